"""``runner man``: the manual, made from the commands themselves (each command's --help, as
click formats it), as a roff page for ``man`` or as Markdown (docs/commands.md, which a test
keeps equal to it): one text for the terminal, the manual and the documentation."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import click

from runner import __version__


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], click.Command]]:
    """Every command under ``group``, groups before their commands, by name."""
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


def help_text(root: click.Group, path: tuple[str, ...]) -> str:
    """What ``runner PATH --help`` prints."""
    ctx = click.Context(root, info_name="runner", terminal_width=88, max_content_width=88)
    for name in path:
        command = ctx.command.commands[name]  # type: ignore[attr-defined]
        ctx = click.Context(command, info_name=name, parent=ctx, terminal_width=88,
                            max_content_width=88)
    return ctx.get_help()


def markdown(root: click.Group) -> str:
    parts = ["# Commands", "",
             "Every command's `--help`, as `runner man --format markdown` prints it (the "
             "manual page is `runner man`). Made from the commands: a test keeps this page "
             "up to date.", "", "## runner", "", "```", help_text(root, ()), "```"]
    for path, _ in commands(root):
        parts += ["", f"## runner {' '.join(path)}", "", "```", help_text(root, path), "```"]
    return "\n".join(parts) + "\n"


def _roff(text: str) -> str:
    """Preformatted text for roff: backslashes doubled, lines that start a request
    escaped."""
    lines = []
    for line in text.replace("\\", "\\e").splitlines():
        lines.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(lines)


def roff(root: click.Group, today: date | None = None) -> str:
    day = (today or date.today()).isoformat()
    parts = [f'.TH RUNNER 1 "{day}" "runner {__version__}" "User Commands"',
             ".SH NAME", r"runner \- pay many people at once from a YAML job file, exactly once",
             ".SH SYNOPSIS", r".B runner", r"[\fIOPTIONS\fR] \fICOMMAND\fR [\fIARGS\fR]...",
             ".SH DESCRIPTION", ".nf", _roff(help_text(root, ())), ".fi", ".SH COMMANDS"]
    for path, _ in commands(root):
        parts += [f".SS runner {' '.join(path)}", ".nf", _roff(help_text(root, path)), ".fi"]
    return "\n".join(parts) + "\n"


@click.command()
@click.option("--format", "fmt", type=click.Choice(["roff", "markdown"]), default="roff",
              show_default=True, help="roff: a manual page for man(1); markdown: "
                                      "docs/commands.md.")
@click.pass_context
def man(ctx: click.Context, fmt: str) -> None:
    """The manual: every command's help, as a manual page (or Markdown).

    \b
    Example:
      runner man | man -l -
      runner man > ~/.local/share/man/man1/runner.1
      runner man --format markdown > docs/commands.md
    """
    root = ctx.find_root().command
    assert isinstance(root, click.Group)
    click.echo(roff(root) if fmt == "roff" else markdown(root), nl=False)
