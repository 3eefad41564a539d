"""``runner plan`` and ``runner apply``: what a run would do now (shown, or written as a plan
file for someone to approve), and paying exactly what an approved plan file lists."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from runner.cli.options import location_of, reports_errors, state_dir_of, state_option, states
from runner.cli.run import (
    ALLOW_DUPLICATES,
    FORMAT,
    INCLUDE_UNCHANGED,
    PAYING,
    QUOTE,
    RETRY_FAILED,
    Admission,
    _execute,
    run_options,
)
from runner.exit_codes import ExitCode, exits, listed
from runner.money import json_text
from runner.state.locations import StateLocation, location_text

if TYPE_CHECKING:
    from runner.engine.plan import Plan
    from runner.engine.plan_file import AppliedPlan
    from runner.errors import PlanRefused
    from runner.job import Job
    from runner.policy import MoneyRules
    from runner.state import StateStore


def _store(path: StateLocation, keep: bool) -> tuple[StateStore, bool]:
    """The state to plan against, and whether it exists; one not made yet is an empty state
    (a job's first plan, which says so), and is not created: planning writes nothing but,
    with ``keep``, the payee checks' answers (for the run and next month to use again),
    for which a state not made yet is made."""
    from runner.errors import StateMissing
    from runner.state import empty_store, open_state

    try:
        return open_state(path, create=False), True
    except StateMissing:
        return (open_state(path) if keep else empty_store()), False


def show_plan(job: Path, state: StateLocation | None, quote: bool, retry_failed: bool,
              fmt: str, output: Path | None, verify: bool = False,
              sign: Path | None = None, *, include_unchanged: bool = False,
              allow_duplicates: bool = False) -> int:
    """Print (and with ``output`` write, signed with the key in ``sign``) the plan of
    ``job``; the exit code a run would have before sending anything: 2 invalid items stop
    it, 4 the balances are short. Payees are checked under the job's
    ``run.verify_payees``, or with ``verify`` (warn) when it is off."""
    from runner.cli.approvals import passphrase_for
    from runner.connect import connect
    from runner.engine.approvals import keep_plan, rules_for
    from runner.engine.plan import flow_for, make_plan
    from runner.engine.plan_file import document, write_plan
    from runner.engine.plan_signing import PLAN, sign_plan
    from runner.engine.plan_text import plan_lines
    from runner.engine.review import KEY_NAME, fired_on, mark_whom
    from runner.job import load_job

    loaded = load_job(job)
    if sign is not None and output is None:
        raise click.UsageError("--sign signs the plan file (-o) of a job under four eyes")
    path = location_of(state)
    policy = loaded.run.verify_payees
    policy = "warn" if verify and policy == "off" else policy
    # Opened once; made when the payee checks' answers or a plan file's record are kept.
    store, exists = _store(path, keep=policy != "off" or output is not None)
    with store:
        rules = rules_for(loaded, store)
        if sign is not None and not rules.four_eyes:
            raise click.UsageError("--sign signs the plan file of a job under four eyes "
                                   "(run.four_eyes, or the executor's policy)")
        with connect(loaded, state_dir_of(state), pool=loaded.run.concurrency) as provider:
            # What a person reads (text, no plan file, no quotations) streams: the plan
            # keeps its counts, totals and the items it lists, not every row of the batch.
            streams = output is None and fmt == "text" and not quote
            plan = make_plan(loaded, provider, store, flow_for(loaded, provider, store),
                             quote=quote, retry_failed=retry_failed,
                             include_unchanged=include_unchanged,
                             allow_duplicates=allow_duplicates,
                             sink=_drop if streams else None, verify=policy)
        plan.state = str(path) if exists else f"{path} (none yet: every item is new)"
        if output is not None:
            mark_whom(plan, loaded.kind, store.plans.key(KEY_NAME))
            content = document(plan, loaded, location_text(path), rules)
            content["rules_fired"] = fired_on(rules, content, store)
            if sign is not None:
                signer = sign_plan(content, PLAN, sign, passphrase_for(sign), rules.trust(),
                                   datetime.now(UTC), as_made=True)
                click.echo(f"signed by {signer.principal} ({signer.key}) as its planner",
                           err=True)
            keep_plan(store, content, rules)  # kept first: a plan is never without its record
            if sign is not None:  # the console shows it beside the approvals given there
                store.plans.add_signature(str(content["id"]), signer.key,
                                          content["signatures"][0])
            digest = write_plan(content, output)
            click.echo(f"plan {content['id']} written to {output} (digest sha256:{digest}); "
                       f"`runner show {output}` lists it, `runner apply {output}` pays it",
                       err=True)
            for rule in content["rules_fired"]:
                click.echo(f"step-up rule {rule['rule']!r} fires ({rule['why']}): "
                           f"{rule['approvals']} approval(s) of "
                           f"{rule['group'] or 'the approvers'}", err=True)
            if rules.four_eyes:
                _tell_approvers(loaded, content, rules, state_dir_of(state))
            if rules.four_eyes and sign is None:
                click.echo(f"under four eyes its planner signs it (`runner approve {output} "
                           f"--sign KEY --as-planner`), then {rules.approvals} other key(s) "
                           f"approve it (`runner approve {output} --sign KEY`)", err=True)
    if fmt == "json":
        click.echo(json_text(plan.as_dict()))
    else:
        for line in plan_lines(plan):
            click.echo(line)
        if rules.four_eyes and output is None:
            click.echo(f"under four eyes ({_source(loaded, rules)}) a run is refused: money "
                       f"moves only through an approved plan file (-o PLAN)")
    return ExitCode.USAGE if plan.stops else ExitCode.FUNDS_SHORT if plan.short \
        else ExitCode.OK


def _tell_approvers(job: Job, content: dict[str, Any], rules: MoneyRules,
                    base: Path) -> None:
    """Mail the approvers that the plan waits for them (``runner.console.notify``), through
    the job's summary.email server."""
    from runner.console.notify import plan_waits

    email = job.summary.email if job.summary is not None else None
    principals = [s.principals for _, signers in rules.trust().lists[:1] for s in signers]
    told = plan_waits(email, content, principals, base)
    if told:
        click.echo(f"told the approvers: {', '.join(told)}", err=True)


def _source(job: Job, rules: MoneyRules) -> str:
    if not job.rules.four_eyes and rules.remembered is not None:
        return f"the batch was planned so, plan {rules.remembered.plan_id}"
    return "run.four_eyes" if job.run.four_eyes else rules.source


def _drop(planned: Any) -> None:
    """A streamed plan's items go nowhere: only its counts and listed items are kept."""


@click.command()
@click.argument("job", type=click.Path(dir_okay=False, path_type=Path))
@QUOTE
@RETRY_FAILED
@INCLUDE_UNCHANGED
@ALLOW_DUPLICATES
@FORMAT
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the plan file that `runner apply` pays.")
@click.option("--verify", is_flag=True,
              help="Check each payee with the provider (the account's status, the holder's "
                   "name against the row's), as run.verify_payees: warn does; the job's "
                   "run.verify_payees checks without it.")
@click.option("--sign", type=click.Path(dir_okay=False, path_type=Path), metavar="KEY",
              help="Sign the plan file as its planner with this SSH private key (one of "
                   "run.approvers; a passphrase from $RUNNER_KEY_PASSPHRASE or asked).")
@state_option
@reports_errors
@states(exits((ExitCode.OK, "a run could go"), (ExitCode.USAGE, "invalid items stop it"),
              (ExitCode.FUNDS_SHORT, "the balances are short"), ExitCode.STATE_UNUSABLE,
              ExitCode.TRY_LATER, ExitCode.CONFIGURATION))
def plan(job: Path, quote: bool, retry_failed: bool, include_unchanged: bool,
         allow_duplicates: bool, fmt: str, output: Path | None, verify: bool,
         sign: Path | None, state: StateLocation | None) -> None:
    """What a run of JOB would do now, from the job, the state and the provider.

    Sends nothing (but quotations in a dryrun- namespace, never confirmed: --quote's, and,
    where fees not quoted could make a balance short, two per payer that estimate them).
    Lists the items new, to resume (with the step reached), in doubt, to send again
    (--retry-failed), settled, failed earlier (changed in the job since, or not), needing a
    person, held by the payee check or as possible duplicates (paid with --allow-duplicates,
    which the plan file keeps), refused (held by another job) and invalid, the payee
    checks' findings (--verify, run.verify_payees), then per balance the amounts (and fees
    with --quote) against what it holds. -o writes the plan file for `runner apply` (and
    keeps it in the state); with run.four_eyes, --sign KEY signs it as its planner.
    EXITS

    \b
    Example:
      runner plan jobs/payroll.yaml --quote -o payroll.plan.json
      runner plan jobs/payroll.yaml --verify
      runner plan jobs/payroll.yaml --quote -o payroll.plan.json --sign ~/.ssh/id_ed25519
    """
    if include_unchanged and not retry_failed:
        raise click.UsageError("--include-unchanged goes with --retry-failed")
    sys.exit(show_plan(job, state, quote, retry_failed, fmt, output, verify, sign,
                       include_unchanged=include_unchanged, allow_duplicates=allow_duplicates))


@click.command()
@click.argument("plan_file", metavar="PLAN", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--approved-by", metavar="NAME",
              help="Without run.four_eyes, the name recorded as who approved the plan "
                   "(default: the user running apply); under four eyes the signers are.")
@run_options
@reports_errors
@states(listed(*PAYING))
def apply(plan_file: Path, approved_by: str | None, state: StateLocation | None,
          concurrency: int | None, yes: bool, allow_partial: bool, quiet: bool,
          verbose: bool, log_format: str | None, metrics_file: Path | None) -> None:
    """Pay exactly what the plan file PLAN (`runner plan JOB -o PLAN`) lists.

    Refused (exit 2, nothing sent) when the plan file was edited in any way, when the job,
    a row or an amount changed since the plan, when it is older than run.plan_valid_for,
    when a rate moved by more than run.max_rate_change percent, or, with run.four_eyes,
    unless its planner's key signed it and run.approvals other keys of run.approvers
    approved it (`runner approve`). It is paid on the state the plan was made on (--state
    naming another is refused), once: applying it again resumes the run that applied it.
    The state and the summary name who planned and who approved. Without a terminal (cron)
    nothing is asked. Otherwise as `runner run`, whose options it takes. EXITS

    \b
    Example:
      runner apply payroll.plan.json --yes
    """
    from runner.engine.approvals import admit
    from runner.engine.plan import who
    from runner.engine.plan_file import job_file, read_plan
    from runner.errors import BadStateLocation, PlanRefused
    from runner.state.locations import planned_location

    user, host = who()
    now = datetime.now(UTC)
    try:
        content, digest = read_plan(plan_file)
        try:  # the state the plan was made on, and no other
            location = planned_location(content["state"], state, plan_file)
        except BadStateLocation as exc:
            raise PlanRefused([str(exc)]) from None
    except PlanRefused as refused:
        _refused(refused)

    def admitted(store: StateStore) -> tuple[Job, AppliedPlan | None]:
        try:  # on the state the run pays on, under the lease of the job the plan names
            return admit(content, digest, store, approved_by, user, host, now)
        except PlanRefused as refused:
            _refused(refused)

    _execute(job_file(content), location, concurrency, yes, allow_partial, quiet, verbose,
             confirm_only=False, admission=Admission(str(content["job"]["name"]), admitted),
             ask=lambda plan: _ask_file(content, digest, plan), log_format=log_format,
             metrics_file=metrics_file)


def _refused(refused: PlanRefused) -> NoReturn:
    """A plan file refused: as a refusal after the plan is made again reads."""
    click.echo(f"{refused}; nothing was sent", err=True)
    sys.exit(refused.exit_code)


def _ask_file(content: dict[str, Any], digest: str, plan: Plan) -> bool:
    """The question before an apply pays, on a terminal: the plan file's own listing (with
    its signatures), and what of it is still to pay."""
    from runner.engine.plan_listing import Listing, lines
    from runner.engine.plan_signing import signature_views
    from runner.engine.plan_text import question

    views, approvals = signature_views(content, digest, None, datetime.now(UTC))
    for line in lines(Listing(content, digest, views, approvals)):
        click.echo(line, err=True)
    click.echo(f"About to pay {question(plan)} of this plan", err=True)
    return click.confirm("Send these payments?", default=False, err=True)
