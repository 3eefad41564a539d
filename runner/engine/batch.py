"""A run of a job: the plan, the lease, then the phases, each over a pool of workers.

1. The plan (``runner.engine.plan``): every item validated and paired with its state record;
   with ``on_invalid: stop`` nothing is sent when anything is invalid (exit 2). A plan file
   being applied (`runner apply`) is first compared with it: a row, an amount or a rate that
   moved refuses it (exit 2); else only what it lists to pay is paid.
2. Funds first: before the first POST, what the items to pay draw on each balance (the
   state's quoted amounts, else what validation estimates from the rates) against what it
   holds; when it cannot be covered nothing is sent (exit 4) unless ``allow_partial``.
3. The question on a terminal (the plan itself; "no" ends the run, exit 1, with nothing
   recorded of the batch and no summary); then the new items are recorded.
4. Retry (``--retry-failed``): failed items sent again under a new external_id, each once
   the provider shows the attempt that failed final and unpaid.
5. Look up each money-moving call in doubt (its answer lost), before anything else is sent.
6. Windows (``runner.engine.windows``), each sized so that no quotation outlives its TTL:
   prepare (quotation and transaction for each item not yet created); the pre-flight (the
   window's quoted cost plus what the later windows are estimated to cost, against the
   balances: when they cannot cover it nothing more is confirmed, exit 4, unless
   ``allow_partial``); confirm (skipped with ``confirm: false``: the items wait for
   ``runner confirm``).
7. Poll what is confirmed but not final, until final or ``wait_for_final``.

A run of unchanged inputs with nothing left to do repeats the last run instead
(``runner.engine.rerun``): nothing validated, read item by item, sent or written.

State is written as each call goes (``runner.state``), so a run killed at any instant is
resumed by the next one; a Ctrl-C lets calls in flight finish and be recorded.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from runner.engine.flow import Entry, Flow, Run
from runner.engine.phases import (
    UNREACHABLE,
    Heartbeat,
    Phase,
    PhaseStart,
    Progress,
    poll,
)
from runner.engine.plan import CHANGED, Plan, draws_funds, make_plan, needs
from runner.engine.plan_file import AppliedPlan, compare, restrict
from runner.engine.rerun import inputs_digest, repeat, unchanged
from runner.engine.windows import Rest, Windows, shortfall
from runner.errors import LeaseHeld, ProviderDown
from runner.job import Job
from runner.kinds import kind_named
from runner.provider import Provider
from runner.provider.retry import RetryPolicy
from runner.state import ItemRecord, open_store
from runner.summary.model import FUNDS_SHORT, Summary, build_summary, read_runs
from runner.summary.status import status_lines
from runner.validation import Report

log = logging.getLogger("runner")
SKIP = ("conflict",)


@dataclass
class RunOptions:
    state_path: Path
    concurrency: int | None = None
    confirm: bool | None = None  # None: the job's run.confirm
    confirm_only: bool = False  # `runner confirm`: no new quotations or transactions
    allow_partial: bool = False
    retry_failed: bool = False  # send failed items again under a new external_id
    applied: AppliedPlan | None = None  # `runner apply`: pay what this plan lists, or refuse
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    stop: threading.Event = field(default_factory=threading.Event)
    ask: Callable[[Plan], bool] | None = None
    on_progress: Progress | None = None  # after each item of a phase
    on_phase: PhaseStart | None = None  # as a phase starts, with how many items it takes


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

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.summary.counts) if self.summary is not None else dict(self.repeated)


@dataclass
class _Ending:
    """How the run ends when it decides it (else the batch's state does): its exit code,
    closing message, and what the state keeps of why (a shortfall)."""

    code: int | None = None
    message: str = ""
    note: str = ""
    refused: bool = False  # a plan refused, or the question answered no: no summary


def run_job(job: Job, provider: Provider, options: RunOptions) -> RunResult:
    with open_store(options.state_path) as state:
        digest = inputs_digest(job)
        if options.applied is None and not options.retry_failed and not options.confirm_only:
            last = unchanged(job, state, digest)
            if last is not None:
                log.info("inputs unchanged since run %d and every item done: nothing to do",
                         last.id)
                return RunResult(repeat(job, state, last, digest), "",
                                 lines=list(last.lines or ()), repeated=dict(last.counts))
        run_id = state.start_run(job.name, str(job.path))
        try:
            token = state.acquire_lease(job.name, run_id)
        except LeaseHeld as held:
            state.end_run(run_id, held.exit_code, {})
            raise
        beat = Heartbeat(state, job.name, token)
        summary: Summary | None = None
        try:
            policy = RetryPolicy(job.run.retry.attempts, float(job.run.retry.max_wait),
                                 sleep=options.sleep)
            kind = kind_named(job.kind)
            flow = kind.flow(kind.client(provider),
                             Run(state, run_id, job.name, policy, options.clock))
            retry = options.retry_failed if options.applied is None else \
                bool(options.applied.document.get("retry_failed"))
            plan = make_plan(job, provider, state, flow, retry_failed=retry)
            ending = _run(job, options, flow, plan, run_id, digest)
            if not ending.refused:
                refused = [(p.external_id, f"row {p.row}: {p.why}") for p in plan.of("refused")]
                summary = build_summary(state, job.name, secrets=job.secrets(),
                                        refused=refused, notes=[ending.message])
                state.note_lines(run_id, status_lines(summary))
            code = ending.code
            if code is None:
                code = 1 if summary is not None and summary.items_problems else 0
        finally:
            beat.stop()
            state.release_lease(job.name, token)
        state.end_run(run_id, code, summary.counts if summary else {},
                      ending.note or ending.message, summary.digest if summary else None)
        if summary is not None:
            read_runs(summary, state)
        return RunResult(code, ending.message, summary,
                         None if ending.refused else plan.report, plan)


def _run(job: Job, options: RunOptions, flow: Flow[Any, Any], plan: Plan, run_id: int,
         digest: str) -> _Ending:
    """Everything before the first POST (the plan applied, the checks, the question, the
    new items recorded), then the phases."""
    state = flow.state
    if options.applied is not None:
        reasons = compare(options.applied.document, plan, job)
        if reasons:
            return _Ending(2, "the plan is refused: " + "; ".join(reasons) +
                           "; nothing was sent", refused=True)
        restrict(options.applied.document, plan)
        plan.needs = needs(flow, plan.items)
        state.note_approval(run_id, options.applied.approval)
    state.note_checks(run_id, plan.report.invalid, len(plan.of("refused")))
    if plan.stops:
        return _Ending(2, f"{plan.report.invalid} invalid item(s); nothing was sent")
    if plan.short and not options.allow_partial and not options.confirm_only:
        return _Ending(FUNDS_SHORT, f"{plan.shortfall()}: nothing was sent (--allow-partial "
                                    f"pays what the balance covers)", plan.shortfall())
    if options.ask is not None and plan.to_pay and not options.ask(plan):
        return _Ending(1, "cancelled; nothing was sent", refused=True)
    entries = _record(job, flow, plan)
    state.note_inputs(run_id, digest)  # validated in full, and its items recorded
    return _phases(job, options, flow, plan, entries)


def _record(job: Job, flow: Flow[Any, Any], plan: Plan) -> list[Entry[Any]]:
    """Write what the plan found: the new items (in one transaction, before anything is
    sent for them), a changed row not sent yet, a row changed after its payment started
    (a conflict). The entries to work on."""
    state = flow.state
    new: list[ItemRecord] = []
    for p in plan.items:
        if p.valid is None:
            continue
        if p.action == "new":
            p.record = ItemRecord(p.external_id, job.name, job.kind, p.row, p.fingerprint,
                                  summary=json.dumps(flow.summary_of(p.valid.item),
                                                     sort_keys=True))
            new.append(p.record)
        elif p.record is not None and p.action == "resume" and p.changed:
            state.update_item(p.external_id, fingerprint=p.fingerprint, row=p.row)
            p.record.apply({"fingerprint": p.fingerprint, "row": p.row})
        elif p.record is not None and p.action == "changed":
            state.update_item(p.external_id, outcome="conflict", error_code="changed",
                              error_message=CHANGED)
            p.record.apply({"outcome": "conflict", "error_code": "changed",
                            "error_message": CHANGED})
    state.insert_items(new)
    return [Entry(p.valid.item, p.record) for p in plan.to_pay
            if p.valid is not None and p.record is not None]


def _phases(job: Job, options: RunOptions, flow: Flow[Any, Any], plan: Plan,
            entries: list[Entry[Any]]) -> _Ending:
    retry = {p.external_id: p for p in plan.of("retry")}
    workers = options.concurrency or job.run.concurrency
    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="item") as pool:
        phase = Phase(pool, flow, options.stop, options.on_progress, problems,
                      options.on_phase)
        if retry and not options.confirm_only:
            phase.run("retry", lambda e: flow.retry(
                e, retry[e.external_id].fingerprint, retry[e.external_id].row,
                retry[e.external_id].changed), [e for e in entries if e.external_id in retry])
        todo = [e for e in entries if e.record.step != "final"
                and e.record.outcome not in SKIP]
        earlier = {e.external_id for e in todo if e.record.step == "confirmed"}
        # A money-moving call in doubt may have moved money already: learn its fate before
        # counting costs for the funds check or leaving it for `runner confirm`.
        phase.run("look up", flow.settle_doubt,
                  [e for e in todo if e.record.intent == flow.commit_step])
        ending = _windows(job, options, flow, phase, todo, _estimates(flow, plan), workers)
        if ending is not None:
            return ending
        poll(flow, phase, entries, float(job.run.wait_for_final), earlier, options.clock,
             options.sleep)
    if UNREACHABLE in problems:
        return _Ending(75, "the provider is unreachable; run again later to resume")
    if options.stop.is_set():
        return _Ending(1, "interrupted; run again to resume")
    return _Ending()


def _estimates(flow: Flow[Any, Any], plan: Plan) -> dict[str, tuple[str, Decimal]]:
    """external_id -> (balance, estimated cost) of the items to pay that draw funds."""
    found: dict[str, tuple[str, Decimal]] = {}
    for p in plan.to_pay:
        if p.balance is not None and p.price is not None and draws_funds(p, flow):
            found[p.external_id] = (p.balance, p.price.amount + (p.price.fee or 0))
    return found


def _windows(job: Job, options: RunOptions, flow: Flow[Any, Any], phase: Phase,
             todo: list[Entry[Any]], estimates: dict[str, tuple[str, Decimal]],
             workers: int) -> _Ending | None:
    """Prepare, check the funds for and confirm the items window by window
    (``runner.engine.windows``); an ending when the balances cannot cover the rest."""
    confirm = job.run.confirm if options.confirm is None else options.confirm
    windows = Windows(workers, flow.clock)
    rest = Rest(estimates, todo)
    for window in windows.over(todo):
        if options.stop.is_set() or phase.problems:
            break
        if not options.confirm_only:
            phase.run("prepare", flow.prepare, [e for e in window if flow.needs_prepare(e)])
        rest.take(window)
        ready = [e for e in window if flow.ready(e) and not e.record.intent
                 and e.record.outcome in ("pending", "failed", "awaiting_confirm")]
        if not confirm:
            for e in ready:
                flow.update(e, outcome="awaiting_confirm")
            continue
        if not ready or options.stop.is_set() or phase.problems:
            continue
        try:
            short = shortfall(flow, ready, rest)
        except ProviderDown as exc:  # the balances cannot be read: nothing is confirmed
            log.error("provider unreachable: %s", exc)
            phase.problems.append(UNREACHABLE)
            break
        if short and not options.allow_partial:
            return _Ending(FUNDS_SHORT, f"{short}: nothing {'more ' if windows.sizes[1:] else ''}"
                                        f"was confirmed (--allow-partial confirms what the "
                                        f"balance covers)", short)
        phase.run(flow.commit_step, flow.commit, ready)
    if len(windows.sizes) > 1:
        log.info("worked in %d windows of %s item(s)", len(windows.sizes),
                 ", ".join(str(n) for n in windows.sizes))
    return None
