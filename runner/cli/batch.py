"""``runner status``, ``runner report``, ``runner resolve`` and ``runner reconcile``: the batch
as the state holds it, at any time, and the state against the provider's records; nothing is
sent to the provider (reconcile only reads it)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import click

from runner.cli.options import (
    job_argument,
    location_of,
    reports_errors,
    state_dir_of,
    state_option,
    states,
)
from runner.exit_codes import ExitCode, exits
from runner.lifecycle import Outcome
from runner.money import json_text
from runner.state.files import replacing, write_private
from runner.state.locations import StateLocation

# What status and reconcile, which only read the state, exit 2 for.
NO_STATE = (ExitCode.USAGE, "JOB is invalid or the state database does not exist")


@click.command()
@job_argument
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: the summary's counts and lists, for machines.")
@state_option
@reports_errors
@states(exits((ExitCode.OK, "every item is settled"),
              (ExitCode.PROBLEMS, "any failed, was refused or invalid, is unknown or needs a "
                                  "person"),
              NO_STATE,
              (ExitCode.FUNDS_SHORT, "the latest run stopped short of funds"),
              (ExitCode.PENDING, "items are pending (or none was made yet)"),
              (ExitCode.STATE_UNUSABLE, "the state database cannot be used"),
              (ExitCode.TRY_LATER, "the state stays locked")))
def status(job: Path, fmt: str, state: StateLocation | None) -> None:
    """Counts per state of JOB's items, the items in doubt and those needing a person.

    Reads the state database only (which must exist); nothing is sent. Pending items are
    counted by how far they went (confirmed, created, not started), and a latest run that
    stopped (funds short, a signal, the provider unreachable or refusing the credentials)
    says how, or that it did not finish (its process killed). EXITS

    \b
    Example:
      runner status jobs/payroll.yaml --format json
    """
    from runner.job import load_job
    from runner.state import open_state
    from runner.summary import status_lines, summary_of

    loaded = load_job(job)
    with open_state(location_of(state), create=False) as store:
        summary = summary_of(loaded, store)
    code = summary.status_code
    if fmt == "json":
        click.echo(json_text({**summary.as_dict(), "exit_code": code}))
    else:
        for line in status_lines(summary):
            click.echo(line)
    sys.exit(code)


@click.command()
@job_argument
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text",
              show_default=True, help="csv: one line per difference.")
@click.option("--concurrency", type=click.IntRange(min=1),
              help="Lookups at a time (default: the job's run.concurrency).")
@state_option
@reports_errors
@states(exits((ExitCode.OK, "all agree"), (ExitCode.PROBLEMS, "any differs"),
              NO_STATE,
              ExitCode.STATE_UNUSABLE, ExitCode.TRY_LATER, ExitCode.CONFIGURATION))
def reconcile(job: Path, fmt: str, concurrency: int | None, state: StateLocation | None) -> None:
    """Compare every item of JOB's state with the provider's own record of it.

    Each item is found at the provider by its external_id (GETs only, at bounded
    concurrency) and its status, ids, amounts and fee compared; rows the state does not
    hold are looked up too, and each settled currency's total is compared with the
    provider's records of the same items. Lists every difference (unknown to the state,
    missing at the provider, a status or amount that differs). Sends nothing but reads;
    what changes the batch (a payment reversed after it settled, an earlier attempt paid
    after all beside its retry) is recorded in the state, for status, the summary and exit
    codes to say. Safe at any time, also while a run is going on. EXITS

    \b
    Example:
      runner reconcile jobs/payroll.yaml --format csv > differences.csv
    """
    from runner.connect import connect
    from runner.engine.plan import flow_for
    from runner.engine.reconcile import reconcile_job
    from runner.job import load_job
    from runner.state import open_state

    loaded = load_job(job)
    workers = concurrency or loaded.run.concurrency
    with open_state(location_of(state), create=False) as store, \
            connect(loaded, state_dir_of(state), pool=workers) as provider:
        found = reconcile_job(loaded, store, flow_for(loaded, provider, store), workers)
    if fmt == "json":
        click.echo(json_text(found.as_dict()))
    elif fmt == "csv":
        click.echo(found.csv(), nl=False)
    else:
        for line in found.lines():
            click.echo(line)
    sys.exit(ExitCode.OK if found.ok else ExitCode.PROBLEMS)


@click.command()
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
def report(job: Path, fmt: str, output: Path | None, email: bool,
           state: StateLocation | None) -> None:
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
    from runner.state import open_state
    from runner.summary import check_summary, email_summary, render_all, summary_of
    from runner.summary.reports import csv_name, write_items

    loaded = load_job(job)
    if email and (loaded.summary is None or loaded.summary.email is None):
        raise click.UsageError(f"{job} has no summary.email to send with")
    templates = check_summary(loaded)
    with open_state(location_of(state), create=False) as store, \
            tempfile.TemporaryDirectory() as scratch:
        summary = summary_of(loaded, store)
        if fmt == "csv" or email:  # every item, streamed from the state to a file
            csv_file = Path(scratch) / csv_name(summary)
            write_items(summary, csv_file, store)
        if fmt == "csv":
            _copy_out(csv_file, output)
        else:
            rendered = render_all(summary, templates, Path(scratch) / "none.csv")
            content = {"text": rendered.text, "html": rendered.html,
                       "json": json_text(summary.as_dict())
                       + "\n"}[fmt]
            _echo_out(content, output)
        if email:
            sent = email_summary(loaded, render_all(summary, templates, csv_file))
            click.echo(f"emailed to {', '.join(sent)}", err=True)


def _echo_out(content: str, output: Path | None) -> None:
    if output is None:
        click.echo(content, nl=False)
    else:
        write_private(output, content)


def _copy_out(source: Path, output: Path | None) -> None:
    """The file ``source`` to ``output`` (written whole, private), or to stdout, a block at a
    time."""
    with source.open(encoding="utf-8", newline="") as read:
        if output is not None:
            with replacing(output) as write:
                shutil.copyfileobj(read, write, 1 << 16)
            return
        while block := read.read(1 << 16):
            click.echo(block, nl=False)


@click.command()
@job_argument
@click.argument("external_id")
@click.option("--outcome", type=click.Choice([Outcome.SETTLED.value, Outcome.FAILED.value]),
              help="What the provider shows: the money moved (settled) or it did not.")
@click.option("--accept-payee", is_flag=True,
              help="Accept the item's payee despite its payee check (no match, account not "
                   "available, not verified): its account and name, as its row has them, "
                   "are paid by the next run and trusted in later batches on this state "
                   "until either changes.")
@click.option("--sign", type=click.Path(dir_okay=False, path_type=Path), metavar="KEY",
              help="Under four eyes, accept the payee with this SSH private key (one the "
                   "approvers hold; a passphrase from $RUNNER_KEY_PASSPHRASE or asked).")
@click.option("--note", required=True, help="What was checked, for the record.")
@state_option
@reports_errors
def resolve(job: Path, external_id: str, outcome: str | None, accept_payee: bool,
            sign: Path | None, note: str, state: StateLocation | None) -> None:
    """Record what a person found for an item runner could not settle, or accept its payee.

    --outcome: an unknown or conflicting item (a call with no lookup whose answer was lost,
    or a provider record that is not the item) keeps every run's exit code at 1 until a
    person has checked it at the provider. Nothing is sent: the item becomes final with the
    given outcome and the note. --accept-payee: an item held by its payee check (or that
    would be) is paid by the next run, as long as its row names the same account and name,
    and that account and name are trusted in later batches too; who accepted it and when
    are recorded. Under four eyes the acceptance is signed (--sign KEY, a key of the
    approvers), by as many people as the executor's policy asks (payee_approvals). Nothing
    is sent.

    \b
    Example:
      runner resolve jobs/charges.yaml charges-2026-11-C3 --outcome settled \\
        --note "charge 4411 found DONE in the back office"
      runner resolve jobs/payroll.yaml payroll-2026-11-E5003 --accept-payee \\
        --note "name changed at marriage; confirmed by phone" --sign ~/.ssh/id_ed25519
    """
    from runner.job import load_job
    from runner.state import open_state

    if (outcome is None) == (not accept_payee):
        raise click.UsageError("give one of --outcome and --accept-payee")
    if sign is not None and not accept_payee:
        raise click.UsageError("--sign goes with --accept-payee")
    loaded = load_job(job)
    with open_state(location_of(state)) as store:
        if outcome is not None:
            store.resolve(loaded.name, external_id, outcome, note)
            click.echo(f"{external_id}: {outcome} (resolved by hand)")
            return
        from runner.cli.approvals import passphrase_for
        from runner.engine.plan import who
        from runner.payees.accept import accept_payee as accept

        user, host = who()
        accepted, stands = accept(loaded, store, external_id, note, user, host, sign,
                                  passphrase_for(sign) if sign else lambda: None)
    said = f"{external_id}: payee {accepted.name} accepted by {accepted.accepted_by} on " \
           f"{host} at {accepted.accepted_at}"
    if stands.holds:
        click.echo(f"{said}; the next run pays it while its row names the same account and "
                   f"name, and later batches trust them")
    else:
        click.echo(f"{said}: {stands.text}; another key of the approvers accepts it too "
                   f"(the same command) before it is paid")
