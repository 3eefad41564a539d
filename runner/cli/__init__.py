"""The command line: thin commands over the library.

Each command parses its options, calls the library and formats the result; library errors
become messages and exit codes here and nowhere else. ``HELP`` below is what `runner --help`
shows.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import simplejson

from runner import __version__
from runner.cli.sandbox import sandbox
from runner.cli.schema import schema
from runner.errors import JobErrors, RunnerError

if TYPE_CHECKING:  # annotations only: the commands import the library where they use it
    from runner.engine.batch import RunResult
    from runner.job import Job
    from runner.summary import Templates

HELP = """Pay many people at once from a YAML job file, exactly once.

Validates every item against the provider's rules, then quotes, creates and confirms each
payment, keeping its progress so that a run killed at any moment resumes without paying
anyone twice. `base_url: sandbox` runs against the embedded provider sandbox.

\b
Example:
  runner validate jobs/payroll.yaml
  runner run jobs/payroll.yaml

\b
Exit codes:
  0   every item settled well
  1   some items failed, were refused or are unknown
  2   usage error or invalid job file (nothing was sent)
  3   items handled, but the summary email could not be sent (or the summary not
      made); the summary is under the state folder's reports/ (a worse code wins)
  75  another run holds the job's lease, or the provider is unreachable (try later)
"""

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_STATE_DIR = Path("state")
STATE_FILE = "runner.sqlite"


def state_dir_of(state: Path | None) -> Path:
    """The folder of the state database (and of the embedded sandbox's state)."""
    if state is not None:
        return state.parent
    return Path(os.environ.get("RUNNER_STATE_DIR", DEFAULT_STATE_DIR))


def state_path_of(state: Path | None) -> Path:
    return state if state is not None else state_dir_of(None) / STATE_FILE


def job_argument(f: F) -> F:
    return click.argument("job", type=click.Path(dir_okay=False, path_type=Path))(f)


def state_option(f: F) -> F:
    return click.option("--state", type=click.Path(dir_okay=False, path_type=Path),
                        help="SQLite state file (default: state/runner.sqlite, or "
                             "$RUNNER_STATE_DIR/runner.sqlite).")(f)


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


@click.group(help=HELP)
@click.version_option(__version__, prog_name="runner")
def main() -> None:
    pass


QUOTE = click.option("--quote", is_flag=True,
                     help="Ask real quotations (dryrun- external_ids, never confirmed) for the "
                          "true cost with fees.")
FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                      show_default=True, help="Output of the checks.")


@main.command()
@job_argument
@QUOTE
@FORMAT
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
    _validate(job, quote, fmt, state)


def _validate(job: Path, quote: bool, fmt: str, state: Path | None) -> None:
    from runner.connect import connect
    from runner.job import load_job
    from runner.summary import check_summary
    from runner.validation import validate_job

    loaded = load_job(job)
    check_summary(loaded)
    with connect(loaded, state_dir_of(state)) as provider:
        report = validate_job(loaded, provider, quote=quote)
    if fmt == "json":
        click.echo(simplejson.dumps(report.as_dict(), indent=2))
    else:
        _print_report(report)
    sys.exit(0 if report.ok else 2)


def _print_report(report: Any) -> None:
    for problem in report.problems:
        click.echo(str(problem))
    click.echo(report.closing_line())


def _logging(quiet: bool, verbose: bool) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s",
                                           "%Y-%m-%dT%H:%M:%S"))
    root = logging.getLogger("runner")
    root.handlers[:] = [handler]
    root.setLevel(level)


def _execute(job: Path, state: Path | None, concurrency: int | None, yes: bool,
             allow_partial: bool, quiet: bool, verbose: bool, confirm_only: bool) -> None:
    from runner.connect import connect
    from runner.engine.batch import RunOptions, run_job
    from runner.job import load_job
    from runner.outcome import Outcome
    from runner.summary import check_summary

    _logging(quiet, verbose)
    loaded = load_job(job)
    templates = check_summary(loaded)  # a broken summary template stops us before money moves
    state_path = state_path_of(state)
    tty = sys.stdin.isatty() and sys.stderr.isatty()
    options = RunOptions(state_path, concurrency=concurrency, allow_partial=allow_partial,
                         confirm=True if confirm_only else None, confirm_only=confirm_only)
    if tty and not yes:
        options.ask = _ask
    if tty and not quiet:
        options.on_progress = _Bar().step
    previous = signal.signal(signal.SIGINT, lambda *_: options.stop.set())
    try:
        with connect(loaded, state_dir_of(state), pool=concurrency or loaded.run.concurrency
                     ) as provider:
            result = run_job(loaded, provider, options)
    finally:
        signal.signal(signal.SIGINT, previous)
    if tty and not quiet:
        click.echo("", err=True)
    if result.exit_code == 2 and result.report is not None:
        _print_report(result.report)
    for line in Outcome.load(state_path, loaded.name).lines():
        click.echo(line)
    for external_id, why in result.refused:
        click.echo(f"  refused {external_id}: {why}")
    if result.message:
        click.echo(result.message, err=True)
    sys.exit(_summarize(loaded, templates, state, result))


def _summarize(loaded: Job, templates: Templates, state: Path | None, result: RunResult
               ) -> int:
    """Write (and email) the run's summary; the exit code, 3 only when the run's was 0."""
    from runner.summary import conclude

    try:
        delivery = conclude(loaded, templates, state_path_of(state),
                            state_dir_of(state) / "reports", refused=result.refused,
                            notes=[result.message])
    except RunnerError as error:
        click.echo(f"error: the summary: {error}", err=True)
        return result.exit_code or error.exit_code
    if delivery.error is not None:  # already logged, with where the summary is
        return result.exit_code or delivery.error.exit_code
    return result.exit_code


def _ask(plan: dict[str, Any]) -> bool:
    totals = ", ".join(f"{c} {a:,}" for c, a in sorted(plan["totals"].items()))
    click.echo(f"About to pay {plan['items']} item(s): {totals}", err=True)
    return click.confirm("Send these payments?", default=False, err=True)


class _Bar:
    """One line on the terminal, redrawn as items move."""

    def __init__(self) -> None:
        self.done: dict[str, int] = {}
        self.lock = threading.Lock()

    def step(self, phase: str, entry: Any) -> None:
        with self.lock:
            self.done[phase] = self.done.get(phase, 0) + 1
            parts = "  ".join(f"{p} {n}" for p, n in self.done.items())
            click.echo(f"\r{parts}", nl=False, err=True)


def run_options(f: F) -> F:
    for decorator in reversed([
        state_option,
        click.option("--concurrency", type=click.IntRange(min=1),
                     help="Workers (default: the job's run.concurrency)."),
        click.option("--yes", is_flag=True, help="Do not ask before money moves."),
        click.option("--allow-partial", is_flag=True,
                     help="Confirm what the balance covers even when it cannot cover all."),
        click.option("--quiet", "-q", is_flag=True, help="Warnings and errors only."),
        click.option("--verbose", "-v", is_flag=True, help="A log line per call."),
    ]):
        f = decorator(f)
    return f


@main.command()
@job_argument
@click.option("--dry-run", is_flag=True, help="Check only, as `runner validate`; send nothing.")
@QUOTE
@FORMAT
@run_options
@reports_errors
def run(job: Path, dry_run: bool, quote: bool, fmt: str, state: Path | None,
        concurrency: int | None, yes: bool, allow_partial: bool, quiet: bool,
        verbose: bool) -> None:
    """Pay every item of JOB: quotation, transaction, confirm, then follow it to its end.

    Safe to run again at any time: finished items are skipped, interrupted ones resume, and
    nobody is paid twice. On a terminal it shows the plan and asks first (--yes skips).
    --quote and --format go with --dry-run.

    \b
    Example:
      runner run jobs/payroll.yaml --yes
    """
    if dry_run:
        _validate(job, quote, fmt, state)
    if quote or fmt != "text":
        raise click.UsageError("--quote and --format go with --dry-run")
    _execute(job, state, concurrency, yes, allow_partial, quiet, verbose, confirm_only=False)


@main.command()
@job_argument
@run_options
@reports_errors
def confirm(job: Path, state: Path | None, concurrency: int | None, yes: bool,
            allow_partial: bool, quiet: bool, verbose: bool) -> None:
    """Confirm what JOB created and left unconfirmed (a job run with `confirm: false`).

    \b
    Example:
      runner confirm jobs/payroll.yaml --yes
    """
    _execute(job, state, concurrency, yes, allow_partial, quiet, verbose, confirm_only=True)


@main.command()
@job_argument
@state_option
@reports_errors
def status(job: Path, state: Path | None) -> None:
    """Counts per state of JOB's items, the items in doubt and those needing a person.

    Reads the state database only; nothing is sent.

    \b
    Example:
      runner status jobs/payroll.yaml
    """
    from runner.job import load_job
    from runner.outcome import Outcome

    loaded = load_job(job)
    for line in Outcome.load(state_path_of(state), loaded.name).lines():
        click.echo(line)


@main.command()
@job_argument
@click.option("--format", "fmt", type=click.Choice(["text", "html", "json", "csv"]),
              default="text", show_default=True, help="text and html use the job's templates; "
              "csv lists every item.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to this file instead of stdout.")
@click.option("--email", is_flag=True,
              help="Also email the summary now, as the job's summary.email says (whatever "
                   "its `send`).")
@state_option
@reports_errors
def report(job: Path, fmt: str, output: Path | None, email: bool, state: Path | None) -> None:
    """The summary of JOB, from the state database, at any time (during a run too).

    How many were paid and what it cost per currency, what failed with the provider's code
    and message, what needs a person and what to check, what is still pending; --format csv
    lists every item. Nothing is sent to the provider. After each run the same summary is
    written under the state folder's reports/ (and emailed when the job says so).

    \b
    Example:
      runner report jobs/payroll.yaml --format html --output payroll.html
    """
    from runner.job import load_job
    from runner.summary import check_summary, email_summary, load_summary, render_all

    loaded = load_job(job)
    if email and (loaded.summary is None or loaded.summary.email is None):
        raise click.UsageError(f"{job} has no summary.email to send with")
    templates = check_summary(loaded)
    rendered = render_all(load_summary(loaded, state_path_of(state)), templates)
    content = {"text": rendered.text, "html": rendered.html, "csv": rendered.csv,
               "json": simplejson.dumps(rendered.summary.as_dict(), indent=2, use_decimal=True)
               + "\n"}[fmt]
    if output is None:
        click.echo(content, nl=False)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(content, encoding="utf-8", newline="")
    if email:
        click.echo(f"emailed to {', '.join(email_summary(loaded, rendered))}", err=True)


@main.command()
@job_argument
@click.argument("external_id")
@click.option("--outcome", type=click.Choice(["settled", "failed"]), required=True,
              help="What the provider shows: the money moved (settled) or it did not.")
@click.option("--note", required=True, help="What was checked, for the record.")
@state_option
@reports_errors
def resolve(job: Path, external_id: str, outcome: str, note: str, state: Path | None) -> None:
    """Record what a person found at the provider for an unknown or conflicting item.

    Such items (a call with no lookup whose answer was lost, or a provider record that is
    not the item) keep every run's exit code at 1 until a person has checked them. Nothing
    is sent: the item becomes final with the given outcome and the note.

    \b
    Example:
      runner resolve jobs/charges.yaml charges-2026-11-C3 --outcome settled \\
        --note "charge 4411 found DONE in the back office"
    """
    from runner.job import load_job
    from runner.state import StateStore

    loaded = load_job(job)
    store = StateStore(state_path_of(state))
    try:
        store.resolve(loaded.name, external_id, outcome, note)
    finally:
        store.close()
    click.echo(f"{external_id}: {outcome} (resolved by hand)")


main.add_command(sandbox)
main.add_command(schema)
