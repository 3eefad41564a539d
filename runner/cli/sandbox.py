"""``runner sandbox``: serve the provider emulator.

The options of ``serve`` are made from the sandbox's declaration of its knobs (the fields of
``SandboxConfig``, and of ``FaultRule`` for the ``*`` rule's rates and latency): a knob added
there is an option here, with its help and default, and nothing is listed twice.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from runner.sandbox.core.config import SandboxConfig
from runner.sandbox.core.faults import FaultRule
from runner.sandbox.core.knobs import Setting, settings

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


@click.group()
def sandbox() -> None:
    """The embedded provider sandbox."""


class _Read(click.ParamType):
    """A knob's own reader (``Knob.read``) as a click type: its ValueError is a usage error."""

    def __init__(self, read: Callable[[str], Any], metavar: str | None) -> None:
        self.read = read
        self.name = metavar or "TEXT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None,
                ) -> Any:
        if not isinstance(value, str):
            return value  # a default already read
        try:
            return self.read(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _within(maximum: float) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """The check of a number knob: from 0 to its ``maximum`` (said in the error, not in
    every line of ``--help``)."""

    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None and not 0 <= value <= maximum:
            raise click.BadParameter(f"{value:g} is not from 0 to {maximum:g}")
        return value

    return check


def _option(s: Setting) -> Decorator:
    """The click option of one knob."""
    k = s.knob
    name = s.option
    assert name is not None
    kw: dict[str, Any] = {"help": k.help or None, "envvar": k.envvar, "metavar": k.metavar}
    default = s.default
    if isinstance(default, tuple):
        default = ",".join(f"{value:g}" for value in default)  # as Knob.read reads it
    if k.read is not None:
        kw["type"] = _Read(k.read, k.metavar)
    elif s.type is bool:
        name = f"{name}/--no-{name[2:]}"
    elif s.type == Path | None:
        kw["type"] = click.Path(dir_okay=False, path_type=Path)
    elif s.type in (int, int | None):
        kw["type"] = int
    elif s.type is float:
        kw["type"] = float
    if s.type in (int, float) and k.maximum is not None:
        kw["callback"] = _within(k.maximum)
    if k.repeat:
        kw["multiple"] = True
    elif default is not None:
        kw["default"] = default
        kw["show_default"] = k.show_default
    return click.option(name, s.name, **kw)


def serve_options() -> list[Setting]:
    """Every knob with an option, in the order ``--help`` lists them: the ``*`` rule's
    settings just before ``--fault``, which sets the rules of single groups."""
    found: list[Setting] = []
    for s in settings(SandboxConfig):
        if s.name == "faults":
            found.extend(f for f in settings(FaultRule) if f.option is not None)
        found.append(s)
    return found


def _with_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for s in reversed(serve_options()):
        command = _option(s)(command)
    return command


@sandbox.command()
@_with_options
def serve(**options: Any) -> None:
    """Serve every provider endpoint on one server until interrupted.

    \b
    Example:
      runner sandbox serve --port 8765 --latency-ms 20 --fault confirm:lost_rate=0.1
    """
    from runner.errors import MissingExtra
    from runner.extras import require

    try:
        require("sandbox", "runner sandbox serve")
    except MissingExtra as missing:
        click.echo(f"error: {missing}", err=True)
        sys.exit(missing.exit_code)
    from runner.sandbox import server

    config = SandboxConfig.from_options(options)
    click.echo(f"sandbox serving on http://{config.host}:{config.port} "
               f"(brand {config.header_brand})", err=True)
    server.serve(config)
