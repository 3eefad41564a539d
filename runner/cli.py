"""The command line: thin commands over the library.

Each command parses its options, calls the library and formats the result; library errors
become messages and exit codes here and nowhere else.

\b
Exit codes:
  0   every item settled well
  1   some items failed, were refused or are unknown
  2   usage error or invalid job file (nothing was sent)
  75  another run holds the job's lease, or the provider is unreachable (try later)
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import simplejson

from runner import __version__
from runner.errors import JobErrors, RunnerError
from runner.job.cli import schema
from runner.sandbox.cli import sandbox

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_STATE_DIR = Path("state")


def state_dir_of(state: Path | None) -> Path:
    """The folder of the state database (and of the embedded sandbox's state)."""
    if state is not None:
        return state.parent
    return Path(os.environ.get("RUNNER_STATE_DIR", DEFAULT_STATE_DIR))


def job_argument(f: F) -> F:
    return click.argument("job", type=click.Path(dir_okay=False, path_type=Path))(f)


def state_option(f: F) -> F:
    return click.option("--state", type=click.Path(dir_okay=False, path_type=Path),
                        help="SQLite state file (default: state/<job name>.sqlite).")(f)


def reports_errors(f: F) -> F:
    """Turn runner's errors into a message and the documented exit code; no traceback unless
    --debug."""

    @click.option("--debug", is_flag=True, help="Show a traceback on errors.")
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
        except (click.exceptions.Exit, click.ClickException, KeyboardInterrupt):
            raise
        except Exception as error:  # noqa: BLE001 - the boundary: no traceback by default
            click.echo(f"internal error: {type(error).__name__}: {error}", err=True)
            _trace(debug)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def _trace(debug: bool) -> None:
    if debug:
        traceback.print_exc()


@click.group(help=__doc__)
@click.version_option(__version__, prog_name="runner")
def main() -> None:
    pass


@main.command()
@job_argument
@click.option("--quote", is_flag=True,
              help="Ask real quotations (dryrun- external_ids, never confirmed) for the true "
                   "cost with fees.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@state_option
@reports_errors
def validate(job: Path, quote: bool, fmt: str, state: Path | None) -> None:
    """Check every item of JOB against the provider's rules; nothing is sent.

    Prints each problem as FILE:ROW: FIELD: message, then a closing line with the counts and
    the totals per currency. Exits 2 when anything is invalid, 0 otherwise.

    \b
    Example:
      runner validate jobs/payroll.yaml --quote
    """
    from runner.job import load_job
    from runner.provider.connect import connect
    from runner.validation import validate_job

    loaded = load_job(job)
    with connect(loaded, state_dir_of(state)) as provider:
        report = validate_job(loaded, provider, quote=quote)
    if fmt == "json":
        click.echo(simplejson.dumps(report.as_dict(), indent=2))
    else:
        for problem in report.problems:
            click.echo(str(problem))
        click.echo(report.closing_line())
    sys.exit(0 if report.ok else 2)


main.add_command(sandbox)
main.add_command(schema)
