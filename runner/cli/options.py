"""What the commands share: where the state is, the JOB argument, the --state option, and
the boundary that turns runner's errors into messages and exit codes (``reports_errors``)."""

from __future__ import annotations

import functools
import io
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from runner.credentials import redact
from runner.errors import BadStateLocation, FileNotWritten, JobErrors, RunnerError
from runner.exit_codes import ExitCode
from runner.state.locations import StateLocation, parse_location

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_STATE_DIR = Path("state")
STATE_FILE = "runner.sqlite"


def state_dir_of(state: StateLocation | None) -> Path:
    """The folder of the state database (and of the embedded sandbox's state, and of the
    summaries); with the state in PostgreSQL, the default folder."""
    folder = state.folder if state is not None else None
    return folder or Path(os.environ.get("RUNNER_STATE_DIR", DEFAULT_STATE_DIR))


def location_of(state: StateLocation | None) -> StateLocation:
    """Where the state is: ``--state`` (or RUNNER_STATE), else the default file."""
    return state if state is not None else StateLocation.sqlite(state_dir_of(None) / STATE_FILE)


class StateParam(click.ParamType):
    """``--state``: a SQLite file path, or a PostgreSQL URL or connection string
    (``runner.state.locations``); one with a password, or another URL, is refused (exit 2)
    without echoing it."""

    name = "PATH|URL"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> StateLocation:
        if isinstance(value, StateLocation):
            return value
        if isinstance(value, Path):
            return StateLocation.sqlite(value)
        try:
            return parse_location(str(value))
        except BadStateLocation as exc:
            self.fail(str(exc).removeprefix("--state: "), param, ctx)


def job_argument(f: F) -> F:
    return click.argument("job", type=click.Path(dir_okay=False, path_type=Path))(f)


def state_option(f: F) -> F:
    return click.option("--state", type=StateParam(), envvar="RUNNER_STATE",
                        help="SQLite state file (default: state/runner.sqlite, or "
                             "$RUNNER_STATE_DIR/runner.sqlite), or a PostgreSQL database: "
                             "postgresql://USER@HOST:PORT/DB or 'host=H dbname=DB user=U' "
                             "(password from PGPASSWORD or ~/.pgpass, never in it); also "
                             "$RUNNER_STATE.")(f)


class QuietStdout:
    """``sys.stdout`` while a command runs: once its reader has gone (``runner status JOB |
    head -1``), the rest of the output is dropped and the command goes on to its end and its
    own exit code, quietly; a run still writes and mails its summary. The stream's file
    descriptor is pointed at /dev/null so that nothing fails again at exit.

    Output that cannot be written (a full disk: ``runner report JOB > /dev/full``) is
    dropped the same way, the command going on, and ``lost`` says why: the command ends
    with that line and exit 74 where it would have exited 0 (``reports_errors``).

    What is written is masked of the credentials the process holds (``runner.credentials``):
    a message quoting a server's answer, or a template's output, shows none."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._gone = False
        self.lost: str | None = None

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                self._stream.write(redact(text))
                return len(text)
            except OSError as exc:
                self._drop(exc)
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except OSError as exc:
                self._drop(exc)

    def _drop(self, exc: OSError) -> None:
        self._gone = True
        if not isinstance(exc, BrokenPipeError):
            self.lost = f"the standard output: cannot write: {exc.strerror or exc}"
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass  # not a file (a test's buffer): nothing will be flushed to it at exit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class MaskedStderr:
    """``sys.stderr`` while a command runs: what is written is masked of the credentials the
    process holds (an error quoting what a server or the mail server sent back)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def quiet_stdout(ctx: click.Context) -> None:
    """Install ``QuietStdout`` and ``MaskedStderr`` for the command of ``ctx`` (and put the
    streams back after)."""
    stdout, stderr = sys.stdout, sys.stderr
    if isinstance(stdout, QuietStdout):
        return
    sys.stdout = QuietStdout(stdout)  # type: ignore[assignment]
    sys.stderr = MaskedStderr(stderr)  # type: ignore[assignment]

    def restore() -> None:
        sys.stdout, sys.stderr = stdout, stderr

    ctx.call_on_close(restore)


EXIT_HOOKS = "runner.exit_hooks"


def on_exit(hook: Callable[[int], None]) -> None:
    """Call ``hook`` with the command's exit code, once it is known, whatever ended it."""
    click.get_current_context().meta.setdefault(EXIT_HOOKS, []).append(hook)


def _exited(code: Any) -> None:
    ctx = click.get_current_context(silent=True)
    hooks = ctx.meta.get(EXIT_HOOKS, []) if ctx is not None else []
    for hook in hooks:
        hook(code if isinstance(code, int) else 0 if code is None else 1)


def states(exit_codes: str) -> Callable[[F], F]:
    """The command's --help with ``exit_codes`` (``runner.exit_codes.exits`` or ``listed``)
    where its docstring says EXITS: built from the codes themselves, never written twice.
    Put below ``reports_errors``, which copies the docstring."""
    def stated(f: F) -> F:
        assert f.__doc__ is not None and "EXITS" in f.__doc__, f
        f.__doc__ = f.__doc__.replace("EXITS", exit_codes)
        return f

    return stated


def reports_errors(f: F) -> F:
    """Turn runner's errors into a message and the documented exit code; no traceback unless
    --debug. Then the hooks of ``on_exit`` (the metrics file) learn the code."""

    reported = _reported(f)

    @click.option("--debug", is_flag=True, help="Show a traceback on errors.")
    @functools.wraps(f)
    def wrapper(*args: Any, debug: bool, **kwargs: Any) -> Any:
        try:
            try:
                returned = reported(*args, debug=debug, **kwargs)
            except SystemExit as ended:
                _output_lost(ended.code)
                raise
            _output_lost(0)
        except SystemExit as end:
            _exited(end.code)
            raise
        _exited(0)
        return returned

    return wrapper  # type: ignore[return-value]


def _output_lost(code: object) -> None:
    """Say so when the standard output could not be written (``QuietStdout.lost``); exit 74
    instead of 0 (a worse code is kept)."""
    stdout = sys.stdout
    if isinstance(stdout, QuietStdout) and stdout.lost is not None:
        click.echo(f"error: {stdout.lost}", err=True)
        stdout.lost = None
        if code in (0, None):
            sys.exit(FileNotWritten.exit_code)


def _reported(f: F) -> Callable[..., Any]:
    """``f`` with runner's errors turned into a message and their exit code (the body of
    ``reports_errors``)."""

    @functools.wraps(f)
    def wrapper(*args: Any, debug: bool, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except JobErrors as errors:
            for error in errors:
                click.echo(str(error), err=True)
            click.echo(f"{len(errors)} problem(s); nothing was sent.", err=True)
            _trace(debug)
            sys.exit(errors.exit_code)
        except RunnerError as error:
            click.echo(f"error: {error}", err=True)
            _trace(debug)
            sys.exit(error.exit_code)
        except KeyboardInterrupt:  # Ctrl-C before a run could stop gracefully: nothing sent
            click.echo("interrupted", err=True)
            sys.exit(ExitCode.INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException):
            raise
        except Exception as error:  # noqa: BLE001 - the boundary: no traceback by default
            click.echo(f"internal error: {type(error).__name__}: {error}", err=True)
            _trace(debug)
            sys.exit(ExitCode.INTERNAL_ERROR)

    return wrapper


def _trace(debug: bool) -> None:
    if debug:
        traceback.print_exc()
