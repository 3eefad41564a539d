"""Every command documents itself: --help works and shows an example; exit codes are listed."""

from __future__ import annotations

from collections.abc import Iterator

import click
from click.testing import CliRunner

from runner.cli import main


def walk(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        path = (*prefix, name)
        if isinstance(command, click.Group):
            yield from walk(command, path)
        else:
            yield path


def test_every_command_has_help_with_an_example() -> None:
    commands = list(walk(main))
    assert ("sandbox", "serve") in commands
    for path in commands:
        result = CliRunner().invoke(main, [*path, "--help"])
        assert result.exit_code == 0, path
        assert "Example" in result.output, f"{' '.join(path)} --help shows no example"


def test_top_level_help_lists_exit_codes() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for line in ("0   every item settled well", "2   usage error or invalid job file",
                 "3   items handled, but the summary email could not be sent",
                 "4   the balances cannot cover what is to be paid: nothing was paid",
                 "5   status: no item failed, but some are still pending",
                 "74  the state database cannot be used",
                 "75  another run holds the job's lease",
                 "130 stopped by Ctrl-C (SIGINT), 143 by SIGTERM"):
        assert line in result.output
