"""``runner validate``, ``runner run`` and ``runner confirm``: the commands that check a job
and pay it, with the plan shown and the question asked before money moves and the progress
on a terminal (``runner plan`` and ``runner apply`` are in ``plan``)."""

from __future__ import annotations

import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from runner.cli.options import (
    F,
    job_argument,
    location_of,
    on_exit,
    reports_errors,
    state_dir_of,
    state_option,
    states,
)
from runner.errors import RunnerError
from runner.exit_codes import UNREACHABLE, ExitCode, exits, listed, signalled
from runner.job.limits import CONCURRENCY_MAX
from runner.money import json_text
from runner.state.locations import StateLocation

if TYPE_CHECKING:  # annotations only: the commands import the library where they use it
    from runner.engine.batch import RunResult
    from runner.engine.plan import Plan
    from runner.engine.plan_file import AppliedPlan
    from runner.job import Job
    from runner.metrics import RunMetrics
    from runner.state import StateStore
    from runner.summary import Templates

# The codes of the commands that pay (run, confirm, apply).
PAYING = (ExitCode.OK, ExitCode.PROBLEMS, ExitCode.USAGE, ExitCode.SUMMARY_NOT_SENT,
          ExitCode.FUNDS_SHORT, ExitCode.STATE_UNUSABLE, ExitCode.TRY_LATER,
          ExitCode.CONFIGURATION, ExitCode.INTERRUPTED, ExitCode.TERMINATED)
QUOTE = click.option("--quote", is_flag=True,
                     help="Ask real quotations (dryrun- external_ids, never confirmed) for the "
                          "true cost with fees.")
FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                      show_default=True, help="Output of the checks.")
RETRY_FAILED = click.option(
    "--retry-failed", is_flag=True,
    help="Send again the items that ended failed at the provider with nothing paid (a final "
         "rejection or decline, a payment reversed), under a new external_id (-f2, -f3 ...): "
         "those whose row changed since, or whose refusal was of the moment (the payer "
         "unavailable, a balance or limit).")
INCLUDE_UNCHANGED = click.option(
    "--include-unchanged", is_flag=True,
    help="With --retry-failed: also send again the items refused for good whose row is "
         "unchanged since.")
ALLOW_DUPLICATES = click.option(
    "--allow-duplicates", is_flag=True,
    help="Pay the items held as possible duplicates (paying what another item of the batch "
         "pays, under another external_id); recorded with the run.")


@click.command()
@job_argument
@QUOTE
@FORMAT
@state_option
@reports_errors
@states(exits((ExitCode.OK, "every item is valid"), (ExitCode.USAGE, "anything is invalid"),
              (ExitCode.TRY_LATER, UNREACHABLE),
              ExitCode.CONFIGURATION))
def validate(job: Path, quote: bool, fmt: str, state: StateLocation | None) -> None:
    """Check every item of JOB against the provider's rules; nothing is sent.

    Prints each problem as FILE:ROW: FIELD: message, then a closing line with the counts and
    the totals per currency. EXITS

    \b
    Example:
      runner validate jobs/payroll.yaml --quote
    """
    _validate(job, quote, fmt, state)


def _validate(job: Path, quote: bool, fmt: str, state: StateLocation | None) -> None:
    from runner.connect import connect
    from runner.job import load_job
    from runner.summary import check_summary
    from runner.validation import validate_job

    loaded = load_job(job)
    check_summary(loaded)
    with connect(loaded, state_dir_of(state)) as provider:
        report = validate_job(loaded, provider, quote=quote)
    if fmt == "json":
        click.echo(json_text(report.as_dict()))
    else:
        _print_report(report)
    sys.exit(ExitCode.OK if report.ok else ExitCode.USAGE)


def _print_report(report: Any) -> None:
    for problem in report.problems:
        click.echo(str(problem))
    click.echo(report.closing_line())


def log_to_stderr(level: int = logging.WARNING, fmt: str | None = None,
                  heartbeats: int = logging.NOTSET) -> None:
    """The "runner" logger's records on stderr, in ``fmt`` (text or json; by default
    RUNNER_LOG_FORMAT's), at ``level`` and above; the heartbeats at ``heartbeats`` (by
    default as the rest)."""
    from runner import logs

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logs.formatter(fmt))
    root = logging.getLogger("runner")
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The heartbeat lines (``runner.cli.progress``) stay with -q: cron's log shows a long run.
    logging.getLogger("runner.progress").setLevel(heartbeats)


def _ended(code: int) -> None:
    from runner.logs import event

    logging.getLogger("runner").info("exit code %d", code, extra=event("run_ended"))


def _metrics(path: Path, job: Path) -> RunMetrics:
    """The run's metrics, written to ``path`` when the command's exit code is known."""
    from runner import metrics

    seen = metrics.RunMetrics(None, 0, time.time(), 0.0)

    def write(code: int) -> None:
        seen.exit_code, seen.ended = code, time.time()
        try:
            metrics.write(path, seen)
        except RunnerError as exc:  # the payments' outcome stands; monitoring sees a stale
            click.echo(f"error: the metrics file: {exc}", err=True)  # file, and this line

    on_exit(write)
    return seen


@dataclass(frozen=True)
class Admission:
    """What a run pays, taken once the state is open and the job's lease (``job_name``'s)
    held: ``admit`` gives the job and, for `runner apply`, the plan file as admitted on that
    state (``runner.engine.approvals.admit``: or refused, nothing sent)."""

    job_name: str
    admit: Callable[[StateStore], tuple[Job, AppliedPlan | None]]


def _execute(job: Path, state: StateLocation | None, concurrency: int | None, yes: bool,
             allow_partial: bool, quiet: bool, verbose: bool, confirm_only: bool,
             retry_failed: bool = False, admission: Admission | None = None,
             include_unchanged: bool = False,
             ask: Callable[[Plan], bool] | None = None,
             log_format: str | None = None, metrics_file: Path | None = None,
             allow_duplicates: bool = False) -> None:
    """Run JOB (or apply a plan file: ``admission``, on the state it was made on, which
    must exist) with the terminal's question (``ask``, by default the plan made now, shown)
    and progress, and exit with its code."""
    from runner import logs
    from runner.cli.progress import echo_status, progress_for
    from runner.connect import connect
    from runner.engine.approvals import require_plan
    from runner.engine.batch import record_exit, run_job
    from runner.engine.options import Clock, RunHooks, RunOptions
    from runner.job import load_job
    from runner.state import open_state
    from runner.summary import check_summary, status_lines

    log_to_stderr(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO,
                  log_format, logging.DEBUG if verbose else logging.INFO)
    on_exit(_ended)
    seen = _metrics(metrics_file, job) if metrics_file is not None else None
    applying = admission is not None
    templates: Templates | None = None
    if admission is None:
        loaded = load_job(job)
        require_plan(loaded, applying=False)  # before the state is opened or made
        templates = check_summary(loaded)  # a broken template stops us before money moves
        admission = Admission(loaded.name, lambda _: (loaded, None))
    logs.unbind()
    logs.bind(job=admission.job_name)
    if seen is not None:
        seen.job = admission.job_name
    tty = sys.stdin.isatty() and sys.stderr.isatty()
    progress = progress_for(sys.stderr.isatty(), quiet)
    hooks = RunHooks(ask=(ask or _ask) if tty and not yes else None,
                     on_progress=progress.step, on_phase=progress.phase,
                     on_batch=progress.batch)
    clock = Clock()
    # Ctrl-C and SIGTERM (systemd, a container's time-out) alike: the calls in flight finish
    # and are recorded, the summary is written, and the exit code says which (128 + signal).
    stopped_by: list[int] = []

    def stop(signum: int, _: Any) -> None:
        stopped_by.append(signum)
        clock.stop.set()

    # The state opened once, for the plan file's admission, the run, its summary and its
    # exit code.
    with open_state(location_of(state), create=not applying) as st:
        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            # The lease first: a second run (or apply) is refused before anything is
            # admitted or sent, and before the slow part of its start.
            with st.join(admission.job_name) as worker:
                loaded, applied = admission.admit(st)
                if templates is None:  # a plan file's job, known once it is admitted: its
                    templates = check_summary(loaded, _templates_of(applied))  # templates
                options = RunOptions(concurrency=concurrency, allow_partial=allow_partial,
                                     confirm=True if confirm_only else None,
                                     confirm_only=confirm_only, retry_failed=retry_failed,
                                     include_unchanged=include_unchanged, applied=applied,
                                     allow_duplicates=allow_duplicates,
                                     approved_as="--yes" if yes else "no terminal to ask")
                with progress, connect(loaded, state_dir_of(state),
                                       pool=options.workers(loaded)) as provider:
                    result = run_job(loaded, provider, worker, options, hooks, clock)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if seen is not None:
            _measured(seen, result)
        if result.exit_code == ExitCode.USAGE and result.report is not None:
            _print_report(result.report)
        if result.summary is not None:
            echo_status(status_lines(result.summary))
        elif result.lines:  # a run with nothing to do: the lines of the run it repeats
            echo_status(result.lines)
        if result.message:
            click.echo(result.message, err=True)
        code = _summarize(loaded, templates, st, state_dir_of(state), result)
        code = signalled(stopped_by[0]) if stopped_by else code
        if applying and applied is not None:
            _tell_planner(loaded, applied, code, result, state_dir_of(state))
        try:
            record_exit(st, result, code)
        except RunnerError as error:  # the run is over: its exit code stays what it says
            logging.getLogger("runner").warning("the exit code %d could not be recorded: %s",
                                                code, error)
    sys.exit(code)


def _tell_planner(job: Job, applied: AppliedPlan, code: int, result: RunResult,
                  base: Path) -> None:
    """Mail the plan's planner that it was applied, and how it ended."""
    from runner.console.notify import planner_told

    email = job.summary.email if job.summary is not None else None
    counts = ", ".join(f"{n} {k}" for k, n in sorted(result.counts.items()) if n)
    planner_told(email, applied.document, "applied",
                 [f"The run ended with exit code {code}{': ' + counts if counts else ''}."],
                 base)


def _templates_of(applied: AppliedPlan | None) -> dict[str, str] | None:
    """The summary templates a plan file covers (name -> sha256): those the run renders."""
    if applied is None:
        return None
    listed = applied.document["job"].get("templates")
    return {str(t.get("name")): str(t.get("sha256")) for t in listed if isinstance(t, dict)} \
        if isinstance(listed, list) else {}


def _measured(seen: RunMetrics, result: RunResult) -> None:
    """What the summary (the one read model) says of the batch, for the metrics."""
    summary = result.summary
    if summary is not None or result.repeated:
        seen.counts = result.counts
    if summary is not None:
        seen.totals = summary.totals
        this = summary.run.id if summary.run is not None else None
        seen.successes = [r.ended_at.timestamp() for r in summary.runs
                          if r.exit_code == 0 and r.ended_at is not None and r.id != this]


def _summarize(loaded: Job, templates: Templates, state: StateStore, folder: Path,
               result: RunResult) -> int:
    """Write (into ``folder``/reports) and email the run's summary; the exit code, 3 only
    when the run's was 0."""
    from runner.summary import conclude

    if result.summary is None:
        return result.exit_code
    try:
        delivery = conclude(loaded, templates, result.summary, folder / "reports", state)
    except RunnerError as error:
        click.echo(f"error: the summary: {error}", err=True)
        return result.exit_code or error.exit_code
    if delivery.error is not None:  # already logged, with where the summary is
        return result.exit_code or delivery.error.exit_code
    return result.exit_code


def _ask(plan: Plan) -> bool:
    from runner.engine.plan_text import plan_lines, question

    for line in plan_lines(plan):
        click.echo(line, err=True)
    click.echo(f"About to pay {question(plan)}", err=True)
    return click.confirm("Send these payments?", default=False, err=True)


def run_options(f: F) -> F:
    for decorator in reversed([
        state_option,
        click.option("--concurrency", type=click.IntRange(min=1, max=CONCURRENCY_MAX),
                     help=f"Workers: calls in flight at once (default: the job's "
                          f"run.concurrency; at most {CONCURRENCY_MAX})."),
        click.option("--yes", is_flag=True, help="Do not ask before money moves."),
        click.option("--allow-partial", is_flag=True,
                     help="Confirm what the balance covers even when it cannot cover all."),
        click.option("--quiet", "-q", is_flag=True,
                     help="Warnings, errors and a heartbeat line every 30 s of a long phase; "
                          "no progress bars."),
        click.option("--verbose", "-v", is_flag=True, help="A log line per call."),
        click.option("--log-format", type=click.Choice(["text", "json"]),
                     envvar="RUNNER_LOG_FORMAT", show_envvar=True,
                     help="Log lines as text (TIME LEVEL message, UTC) or one JSON object "
                          "per line (time, level, job, run_id, external_id, event, "
                          "message) for a log shipper."),
        click.option("--metrics-file", type=click.Path(dir_okay=False, path_type=Path),
                     envvar="RUNNER_METRICS_FILE", show_envvar=True,
                     help="Write the run's outcome there in the Prometheus text format, for "
                          "node_exporter's textfile collector (name it *.prom; one file per "
                          "job), whatever the exit code."),
    ]):
        f = decorator(f)
    return f


@click.command()
@job_argument
@click.option("--dry-run", is_flag=True,
              help="Print the plan, as `runner plan` does, and send nothing.")
@QUOTE
@FORMAT
@RETRY_FAILED
@INCLUDE_UNCHANGED
@ALLOW_DUPLICATES
@run_options
@reports_errors
@states(listed(*PAYING))
def run(job: Path, dry_run: bool, quote: bool, fmt: str, retry_failed: bool,
        include_unchanged: bool, allow_duplicates: bool, state: StateLocation | None,
        concurrency: int | None, yes: bool, allow_partial: bool, quiet: bool, verbose: bool,
        log_format: str | None, metrics_file: Path | None) -> None:
    """Pay every item of JOB: quotation, transaction, confirm, then follow it to its end.

    Safe to run again at any time: finished items are skipped, interrupted ones resume, and
    nobody is paid twice. Before the first POST the balances must cover what is to be paid,
    fees included (else nothing is sent: exit 4). On a terminal it shows the plan and asks
    first (--yes skips). --quote and --format go with --dry-run. Ctrl-C or SIGTERM stops
    it: the calls in flight finish and are recorded, the summary is written, and it exits
    130 or 143. Under run.four_eyes it is refused (exit 2, nothing sent): an approved plan
    is applied instead.
    An item paying what another item of the batch pays (its beneficiary, amount, currency)
    is held, not paid, and the run exits 1, unless its row's allow_duplicate column or
    --allow-duplicates says to pay it. EXITS

    \b
    Example:
      runner run jobs/payroll.yaml --yes
      runner run jobs/payroll.yaml --retry-failed --dry-run
    """
    if include_unchanged and not retry_failed:
        raise click.UsageError("--include-unchanged goes with --retry-failed")
    if dry_run:
        from runner.cli.plan import show_plan

        sys.exit(show_plan(job, state, quote, retry_failed, fmt, None,
                           include_unchanged=include_unchanged,
                           allow_duplicates=allow_duplicates))
    if quote or fmt != "text":
        raise click.UsageError("--quote and --format go with --dry-run")
    _execute(job, state, concurrency, yes, allow_partial, quiet, verbose, confirm_only=False,
             retry_failed=retry_failed, include_unchanged=include_unchanged,
             log_format=log_format, metrics_file=metrics_file,
             allow_duplicates=allow_duplicates)


@click.command()
@job_argument
@run_options
@reports_errors
@states(listed(*PAYING))
def confirm(job: Path, state: StateLocation | None, concurrency: int | None, yes: bool,
            allow_partial: bool, quiet: bool, verbose: bool, log_format: str | None,
            metrics_file: Path | None) -> None:
    """Confirm what JOB created and left unconfirmed (a job run with `confirm: false`).

    Refused under run.four_eyes (exit 2, nothing sent). EXITS

    \b
    Example:
      runner confirm jobs/payroll.yaml --yes
    """
    _execute(job, state, concurrency, yes, allow_partial, quiet, verbose, confirm_only=True,
             log_format=log_format, metrics_file=metrics_file)


