"""Every command documents itself: --help works and shows an example; exit codes are listed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
from click.testing import CliRunner

from runner.cli import main
from runner.exit_codes import ExitCode

ROOT = Path(__file__).resolve().parent.parent


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


def test_every_exit_code_is_documented_where_a_user_reads_them() -> None:
    """runner.exit_codes holds the codes; `runner --help` and README's table say each, and
    no other."""
    shown = CliRunner().invoke(main, ["--help"]).output.split("Exit codes:")[1].split("\n\n")[0]
    in_help = {int(n) for n in re.findall(r"^ +([0-9]+) ", shown, re.M)}
    in_help |= {int(n) for n in re.findall(r", ([0-9]+) by SIG", shown)}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("\n## Exit codes\n")[1].split("\n## ")[0]
    in_readme = {int(n) for row in re.findall(r"^\| ([0-9, ]+) \|", table, re.M)
                 for n in row.split(",")}
    assert in_help == in_readme == {int(code) for code in ExitCode}


def test_the_commands_page_is_the_commands_own_help() -> None:
    """docs/commands.md is `runner man --format markdown`: made again, it is the same (when
    a command changes: runner man --format markdown > docs/commands.md)."""
    result = CliRunner().invoke(main, ["man", "--format", "markdown"])
    assert result.exit_code == 0
    page = ROOT / "docs" / "commands.md"
    assert page.read_text(encoding="utf-8") == result.stdout, \
        "docs/commands.md is out of date: runner man --format markdown > docs/commands.md"
    for path in walk(main):
        assert f"\n## runner {' '.join(path)}\n" in result.stdout


def test_the_manual_page_is_roff_with_every_command() -> None:
    result = CliRunner().invoke(main, ["man"])
    assert result.exit_code == 0
    page = result.stdout
    assert page.startswith('.TH RUNNER 1 "') and "\n.SH NAME\nrunner \\- pay many people" in page
    sections = re.findall(r"^\.SS runner (.+)$", page, re.MULTILINE)
    assert {tuple(s.split()) for s in sections} >= set(walk(main))
    assert not [line for line in page.splitlines()  # no help line read as a request
                if line.startswith((".", "'")) and not re.match(r"\.(TH|SH|SS|B|nf|fi)\b",
                                                                line)]


def test_shell_completion_is_documented_and_works() -> None:
    assert 'eval "$(_RUNNER_COMPLETE=bash_source runner)"' in \
        CliRunner().invoke(main, ["--help"]).output
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert "_RUNNER_COMPLETE=bash_source runner" in readme
    script = CliRunner().invoke(main, [], prog_name="runner",
                                env={"_RUNNER_COMPLETE": "bash_source"})
    assert "_runner_completion" in script.output and "complete -o nosort" in script.output
    words = CliRunner().invoke(main, [], prog_name="runner", env={
        "_RUNNER_COMPLETE": "bash_complete", "COMP_WORDS": "runner re", "COMP_CWORD": "1"})
    assert words.output.split() == ["plain,reconcile", "plain,report", "plain,resolve"]
    options = CliRunner().invoke(main, [], prog_name="runner", env={
        "_RUNNER_COMPLETE": "bash_complete", "COMP_WORDS": "runner run --log-f",
        "COMP_CWORD": "2"})
    assert options.output.split() == ["plain,--log-format"]


def test_a_command_that_states_its_exit_codes_states_every_one_it_gives() -> None:
    """validate gives 75 and 78 too (the provider busy or unreachable, the credentials or
    certificate refused); the codes a --help states are runner's, in its words."""
    def helped(*path: str) -> str:
        return " ".join(CliRunner().invoke(main, [*path, "--help"]).output.split())

    assert ('Exits 0 when every item is valid; 2 when anything is invalid; 75 when the '
            'provider stays unreachable or answers "later" after retries; or 78 when the '
            'provider refuses the credentials or its TLS certificate is not trusted.'
            ) in helped("validate")
    assert "or 75 when the state stays locked." in helped("status")
    for command in ("run", "apply", "confirm"):
        assert "Exit codes: 0, 1, 2, 3, 4, 74, 75, 78, 130 or 143 (`runner --help` says " \
               "each)." in helped(command), command
    for path in walk(main):
        text = helped(*path)
        stated = re.findall(r"(?:Exits|Exit codes:) (.*?)\.(?: |$)", text)
        numbers = {int(n) for sentence in stated for n in re.findall(r"\b(\d+)\b", sentence)}
        assert numbers <= {int(code) for code in ExitCode}, path
