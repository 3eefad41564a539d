"""One run of a job, from its plan to its summary, by one worker of the job
(``StateStore.join``: the worker holds the job's lease, rule 6, and the state the run works
with; the run opens nothing itself). The run makes the plan, then works its share of the
items in pages (``runner.engine.work``, ``runner.engine.pages``: never the whole batch at
once). What the run is asked, its hooks to a terminal and its clock are
``runner.engine.options``'.

1. The plan (``runner.engine.plan``): every item validated and paired with its state record,
   streamed into the state (staged: nothing of it is recorded yet); with ``on_invalid:
   stop`` nothing is sent when anything is invalid (exit 2). A plan file being applied
   (`runner apply`) is first compared with it: a row, an amount or a rate that moved refuses
   it (exit 2, and its first application leaves no run); else only what it lists to pay is
   paid. A plan is applied once: applying it again resumes the run that applied it
   (``_run_of``). Every run that goes on records who approved it (``_approval``).
2. Funds first: before the first POST, what the items to pay draw on each balance (the
   state's quoted amounts, else what validation estimates from the rates) against what it
   holds; when it cannot be covered nothing is sent (exit 4) unless ``allow_partial``.
3. The question on a terminal (the plan itself; "no" ends the run, exit 1, with nothing
   recorded of the batch and no summary); then the staged plan is recorded (the new items,
   in one transaction, before anything is sent for them).
4. The worker's share (``runner.engine.work``): retry, then windows of what is due: calls
   in doubt looked up, prepare / funds check / confirm, polls.
5. The summary, by the worker that finishes the job.

Cooperating workers (a shared state, PostgreSQL: ``StateStore.shared``): any number of runs
of the job at once, on any hosts. The plan (steps 1 to 3, and the retries) is made once, by
the first (``job_step``: the others wait for it, then skip it); each worker claims windows of
what is due (``StateStore.claim``: no item is worked by two live workers; a dead worker's
claims are free once its heartbeat is stale, and its items are taken over, their calls in
doubt looked up first); ``run.rate_limit`` holds
for them all (``StateStore.rate_slot``); the last to finish (``finish_job``) writes the
summary and exits with its code; the others exit 0, or with what stopped them. With SQLite
the job's lease keeps one run at a time, and it is the only worker.

A run of unchanged inputs with nothing left to do repeats the last run instead
(``runner.engine.rerun``): nothing validated, read item by item, sent or written.

State is written as each call goes (``runner.state``), so a run killed at any instant is
resumed by the next one; a Ctrl-C lets calls in flight finish and be recorded.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from runner import lifecycle
from runner.credentials import redact
from runner.engine.approvals import require_plan, rules_for
from runner.engine.flow import Flow, Run
from runner.engine.options import Clock, RunHooks, RunOptions, Tally
from runner.engine.pages import Pages, Stager, give_up
from runner.engine.plan import CHANGED, Plan, balances, make_plan, who
from runner.engine.plan_file import AppliedPlan, compare, restrict
from runner.engine.rerun import inputs_digest, repeat, unchanged
from runner.engine.sharing import share_rate
from runner.engine.work import Ending, work
from runner.errors import PlanRefused, RunnerError
from runner.exit_codes import ExitCode
from runner.job import Job
from runner.kinds import kind_named
from runner.lifecycle import PlanAction, Step
from runner.logs import bind, event
from runner.provider import Provider
from runner.provider.retry import RetryPolicy
from runner.state import Approval, ItemRecord, StateStore, Worker
from runner.summary.items_csv import Spool
from runner.summary.model import Summary, build_summary, read_runs
from runner.summary.status import status_lines
from runner.validation import Report

log = logging.getLogger("runner")


@dataclass
class RunResult:
    exit_code: int
    message: str
    summary: Summary | None = None  # the batch as the run left it (None: a plan refused)
    report: Report | None = None
    plan: Plan | None = None
    # A run that repeats the last (nothing to do): its closing lines and item counts.
    lines: list[str] = field(default_factory=list)
    repeated: dict[str, int] = field(default_factory=dict)
    run_id: int | None = None  # the run recorded in the state

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.summary.counts) if self.summary is not None else dict(self.repeated)


def run_job(job: Job, provider: Provider, worker: Worker, options: RunOptions | None = None,
            hooks: RunHooks | None = None, clock: Clock | None = None) -> RunResult:
    """Run ``job`` as ``worker`` (``StateStore.join``: it holds the job's lease, on the state
    the run reads and writes), with ``options`` as asked, ``hooks`` to a terminal and
    ``clock`` (by default the real time, sleeps and a stop nothing sets)."""
    options = options or RunOptions()
    hooks = hooks or RunHooks()
    clock = clock or Clock()
    state = worker.state
    # Four eyes (the policy's, the job's, or the batch's as the state remembers it): before
    # anything is written.
    require_plan(job, options.applied is not None, rules_for(job, state))
    digest = inputs_digest(job)
    # (--allow-duplicates too: an item held as a possible duplicate is work left, so a
    # batch with none has nothing it could pay.)
    if options.applied is None and not options.retry_failed and not options.confirm_only:
        last = unchanged(job, state, digest)
        if last is not None:
            log.info("inputs unchanged since run %d and every item done: nothing to do",
                     last.id, extra=event("nothing_to_do"))
            again, repeated = repeat(job, worker, last, digest, options.allow_duplicates)
            return RunResult(repeated, "", lines=list(last.lines or ()),
                             repeated=dict(last.counts), run_id=again)
    run_id = _run_of(job, state, options.applied)
    try:
        return _run(job, provider, worker, options, hooks, clock, run_id, digest)
    except BaseException as error:
        _stopped(state, run_id, error)
        raise


def _run(job: Job, provider: Provider, worker: Worker, options: RunOptions, hooks: RunHooks,
         clock: Clock, run_id: int, digest: str) -> RunResult:
    """The run ``run_id`` (``run_job``'s body once its row is written)."""
    state = worker.state
    worker.started(run_id)
    bind(run_id=run_id)
    log.info("run %d of %s started", run_id, job.name, extra=event("run_started"))
    summary: Summary | None = None
    try:
        policy = RetryPolicy(job.run.retry.attempts, float(job.run.retry.max_wait),
                             sleep=clock.sleep)
        kind = kind_named(job.kind)
        flow = kind.flow(kind.client(provider), Run(state, run_id, job.name, policy, clock.now))
        if state.shared and job.run.rate_limit is not None:
            share_rate(provider, state, job.name, float(job.run.rate_limit), clock)
        ending, plan, round_key = _plan_step(job, provider, options, hooks, flow, run_id,
                                             digest)
        if ending is None:  # the plan stands: this run is approved, and says by whom
            state.note_approval(run_id, _approval(options, hooks, digest, clock))
            # With wait_for_final 0, what this run confirms is not polled (it is due after
            # the plan), what earlier runs confirmed is, once.
            until = state.clock() if job.run.wait_for_final <= 0 else float("inf")
            pages = Pages(state, job, flow, worker.name, worker.claim_ttl, until)
            ending = work(job, flow, pages, options, hooks, clock, Tally(),
                          plan is not None and bool(plan.counts.get(PlanAction.RETRY)))
        if not ending.refused and _finishes(worker, digest, round_key):
            summary = _summary(job, state, run_id, ending)
        code = ending.code
        unpaid = _left_unpaid(job, options, summary) if summary is not None else 0
        if code is None and unpaid:
            code = ExitCode.PROBLEMS
            ending.message = f"{unpaid} item(s) this run was to pay are not paid (not " \
                             f"started, or not confirmed): run again to pay them"
            log.error("%s", ending.message, extra=event("left_unpaid"))
        if code is None:
            code = ExitCode.PROBLEMS if summary is not None and summary.items_problems \
                else ExitCode.OK
    finally:
        give_up(state, job.name, worker.name)
    if summary is None and not ending.refused and not ending.message:
        ending.message = "this worker's share is done; the worker that finishes the " \
                         "job writes its summary"
    if ending.refused and _forgotten(state, run_id, options.applied):
        return RunResult(code, ending.message, None, None, plan)
    state.end_run(run_id, code, summary.counts if summary else {},
                  redact(ending.note or ending.message), summary.digest if summary else None)
    if summary is not None:
        read_runs(summary, state)
    return RunResult(code, ending.message, summary,
                     None if ending.refused or plan is None else plan.report, plan,
                     run_id=run_id)


def record_exit(state: StateStore, result: RunResult, exit_code: int) -> None:
    """The exit code the process exits with, in the run's row, when it is not the run's
    own (decided after it: 3 when the summary's email failed, 130 or 143 after a signal)."""
    if result.run_id is None or exit_code == result.exit_code:
        return
    state.note_exit(result.run_id, exit_code)


def _approval(options: RunOptions, hooks: RunHooks, digest: str, clock: Clock) -> Approval:
    """Who approved this run: the plan file's planner and approvers (`runner apply`); else
    the person who ran it, and how (the question answered on a terminal, ``--yes`` ...),
    with the digest of the inputs it was given as its plan's."""
    if options.applied is not None:
        return options.applied.approval
    user, host = who()
    at = datetime.fromtimestamp(clock.now(), UTC).isoformat(timespec="seconds") \
        .replace("+00:00", "Z")
    how = "answered yes on a terminal" if hooks.ask is not None else options.approved_as
    return Approval(digest, user, host, at, f"{user} ({how})", user, host, at)


def _forgotten(state: StateStore, run_id: int, applied: AppliedPlan | None) -> bool:
    """A plan file applied for the first time and refused (or not confirmed on the
    terminal) leaves no run: its run is forgotten and the plan bound to none. True when
    so."""
    if applied is None or applied.run_id is not None:
        return False
    state.forget_run(run_id)
    return True


def _stopped(state: StateStore, run_id: int, error: BaseException) -> None:
    """The run's row closed after ``error`` stopped it (the plan's checks, the state, a
    Ctrl-C before the run could stop gracefully, a bug), with the exit code the command
    exits with and why: ``runner status`` says how it ended, where a row left open would
    read as a process that died. A run that had ended keeps its end."""
    if isinstance(error, RunnerError):
        code, why = error.exit_code, redact(" ".join(str(error).split()))
    elif isinstance(error, KeyboardInterrupt):
        code, why = ExitCode.INTERRUPTED, "interrupted before it could stop gracefully"
    else:  # a bug: its type only (what a bug's text holds is not known)
        code, why = ExitCode.INTERNAL_ERROR, f"internal error: {type(error).__name__}"
    try:
        state.stop_run(run_id, code, why)
    except RunnerError as unrecorded:  # the state itself failing: the error that stopped
        log.warning("run %d's end could not be recorded: %s", run_id, unrecorded)  # it wins


def _run_of(job: Job, state: StateStore, applied: AppliedPlan | None) -> int:
    """This run's id: for a plan applied before, the run that applied it, resumed (a plan is
    applied once; with a shared state, a worker joining that run while it is live is a run
    of its own); else a new run, which a plan being applied records as its own once the
    plan made now shows it may be paid (``_plan``: a refused plan leaves no run)."""
    if applied is not None and applied.run_id is not None:
        if state.reopen_run(applied.run_id):
            log.info("plan %s was applied by run %d: resuming it", applied.document["id"],
                     applied.run_id)
            return applied.run_id
        return state.start_run(job.name, str(job.path))
    return state.start_run(job.name, str(job.path))


def _finishes(worker: Worker, digest: str, round_key: str) -> bool:
    """True for the worker that writes the summary: the only one (SQLite), or the last of
    the round to finish; the round is over then, and the next run plans again."""
    state = worker.state
    if not state.shared:
        return True
    if not state.finish_job(worker.job_name, worker.name, f"{digest}@{round_key}",
                            worker.claim_ttl):
        return False
    state.forget_step(worker.job_name, "plan")
    return True


def _left_unpaid(job: Job, options: RunOptions, summary: Summary) -> int:
    """The pending items that nothing was confirmed for, at the end of a run that was to
    pay every item it planned (``run.confirm``, not ``runner confirm``): a run that leaves
    one so does not exit 0, whatever left it."""
    if not job.run.confirm or options.confirm_only:
        return 0
    stages = summary.stages
    return stages.get("not started", 0) + stages.get("created", 0)


def _summary(job: Job, state: StateStore, run_id: int, ending: Ending) -> Summary:
    refused = [(s.external_id, f"row {s.row}: {s.why}")
               for s in state.staged_with(job.name, (PlanAction.REFUSED,))]
    spool = Spool()  # the reports' CSV, written in the same read of the items
    summary = build_summary(state, job.name, secrets=job.credentials(), refused=refused,
                            notes=[ending.message], each=spool.add)
    summary.spool = spool
    state.note_lines(run_id, status_lines(summary))
    return summary


def _plan_step(job: Job, provider: Provider, options: RunOptions, hooks: RunHooks,
               flow: Flow[Any, Any], run_id: int, digest: str
               ) -> tuple[Ending | None, Plan | None, str]:
    """The plan, its checks and its recording: by this run alone (SQLite), or once for the
    workers of a shared state (the first does it, the others wait for it). The ending when
    the checks stop the run, the plan (None: another worker made it), and the round."""
    state = flow.state
    if not state.shared:
        alone = _plan(job, provider, options, hooks, flow, run_id, digest)
        return alone[0], alone[1], f"run{run_id}"
    flags = f"{digest}:{options.retry_failed}:{options.include_unchanged}:" \
            f"{options.confirm_only}:{options.allow_duplicates}:" \
            f"{options.applied.sha256 if options.applied else ''}"
    plan: Plan | None = None
    stopped: Ending | None = None
    try:
        with state.job_step(job.name, "plan", flags) as mine:
            if mine:
                stopped, plan = _plan(job, provider, options, hooks, flow, run_id, digest)
                if stopped is not None:  # the step is not recorded done: each worker stops
                    raise PlanRefused(stopped.message)
            else:
                log.info("the job's plan was made by another worker; working on it",
                         extra=event("plan_by_another_worker"))
                state.note_inputs(run_id, digest)
    except PlanRefused:
        if stopped is None:
            raise
        return stopped, plan, ""
    return None, plan, state.step_done_at(job.name, "plan") or ""


def _plan(job: Job, provider: Provider, options: RunOptions, hooks: RunHooks,
          flow: Flow[Any, Any], run_id: int, digest: str) -> tuple[Ending | None, Plan]:
    """The plan made and staged; its checks (an applied plan compared, invalid items, the
    funds, the question); once they pass, recorded."""
    state = flow.state
    stager = Stager(state, job.name, flow)
    verify, workers = job.run.verify_payees, options.workers(job)
    if options.applied is None:
        plan = make_plan(job, provider, state, flow, retry_failed=options.retry_failed,
                         include_unchanged=options.include_unchanged,
                         allow_duplicates=options.allow_duplicates, sink=stager,
                         verify=verify, workers=workers)
    else:
        document = options.applied.document
        plan = make_plan(job, provider, state, flow,
                         retry_failed=bool(document.get("retry_failed")),
                         include_unchanged=bool(document.get("include_unchanged")),
                         allow_duplicates=bool(document.get("allow_duplicates")),
                         verify=verify, workers=workers)
        reasons = compare(options.applied.document, plan, job)
        if reasons:
            return Ending(ExitCode.USAGE, "the plan is refused: " + "; ".join(reasons) +
                          "; nothing was sent", refused=True), plan
        restrict(options.applied.document, plan)
        balances(plan, flow, provider)
        for p in plan.items:
            if p.valid is not None:
                stager(p)
        if options.applied.run_id is None:  # the plan is this run's (applied once)
            state.note_plan_applied(str(options.applied.document["id"]), run_id)
    stager.flush()
    state.note_checks(run_id, plan.report.invalid, plan.counts.get(PlanAction.REFUSED, 0))
    if plan.allow_duplicates:
        state.note_duplicates_allowed(run_id)
    if plan.counts.get(PlanAction.DUPLICATE):
        log.warning("%d item(s) held as possible duplicates: not paid",
                    plan.counts[PlanAction.DUPLICATE])
    if plan.stops:
        return Ending(ExitCode.USAGE, f"{plan.report.invalid} invalid item(s); nothing was "
                             f"sent"), plan
    if plan.short and not options.allow_partial and not options.confirm_only:
        sent = f"nothing was sent but {plan.fee_samples} dryrun- quotation(s) that estimated " \
               f"the fees" if plan.fee_samples else "nothing was sent"
        return Ending(ExitCode.FUNDS_SHORT, f"{plan.shortfall()}: {sent} (--allow-partial "
                                            f"pays what the balance covers)",
                      plan.shortfall()), plan
    if hooks.ask is not None and plan.paying and not hooks.ask(plan):
        return Ending(ExitCode.PROBLEMS, "cancelled; nothing was sent", refused=True), plan
    state.record_plan(job.name, job.kind, CHANGED,
                      flow.commit_call if flow.doubt_settled_from_state else "")
    _refused_when_quoted(job, flow, plan)
    state.set_outstanding(job.name, stager.outstanding,
                          {n.balance: n.estimated for n in plan.needs})
    state.note_inputs(run_id, digest)  # validated in full, and its items recorded
    if hooks.on_batch is not None:
        hooks.on_batch(plan.paying)
    return None, plan


def _refused_when_quoted(job: Job, flow: Flow[Any, Any], plan: Plan) -> None:
    """The items whose quotation the provider refused when the applied plan was made
    (``quote_refused``): recorded as failed, nothing sent, with the provider's code and
    message, as a run that quoted them would have recorded them; the next run asks again."""
    new: list[ItemRecord] = []
    for p in plan.of(PlanAction.QUOTE_REFUSED):
        if p.valid is None or (p.record is not None and (p.record.step != Step.NEW
                                                         or p.record.intent)):
            continue
        if p.record is not None:
            flow.state.update_item(p.external_id, **lifecycle.refused(p.record, p.code, p.why))
            continue
        record = ItemRecord(p.external_id, job.name, job.kind, p.row, p.fingerprint,
                            summary=json.dumps(flow.summary_of(p.valid.item), sort_keys=True))
        record.apply(lifecycle.refused(record, p.code, p.why))
        new.append(record)
    flow.state.insert_items(new)
