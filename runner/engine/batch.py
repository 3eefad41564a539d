"""A run of a job: validate, take the lease, then the phases, each over a pool of workers.

1. Validate every item (``runner.validation``); with ``on_invalid: stop`` nothing is sent
   when anything is invalid (exit 2).
2. Prepare: quotation and transaction for each item not yet created.
3. Pre-flight: the cost of what is to be confirmed against the balances; when it cannot be
   covered nothing is confirmed (exit 1) unless ``allow_partial``.
4. Confirm (skipped with ``confirm: false``: the items wait for ``runner confirm``).
5. Poll what is confirmed but not final, until final or ``wait_for_final``.

State is written as each call goes (``runner.state``), so a run killed at any instant is
resumed by the next one; a Ctrl-C lets calls in flight finish and be recorded.
"""

from __future__ import annotations

import hashlib
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
from runner.errors import ItemConflict, ItemInDoubt, LeaseHeld, ProviderDown
from runner.job import Job, ValidItem
from runner.job.fields import JobModel
from runner.kinds import kind_named
from runner.provider import Provider
from runner.provider.retry import RetryPolicy
from runner.state import LEASE_TTL, ItemRecord, StateStore, open_store
from runner.summary.model import Summary, build_summary, run_times
from runner.validation import Report, validate_job

log = logging.getLogger("runner")
SKIP = ("conflict",)


@dataclass
class RunOptions:
    state_path: Path
    concurrency: int | None = None
    confirm: bool | None = None  # None: the job's run.confirm
    confirm_only: bool = False  # `runner confirm`: no new quotations or transactions
    allow_partial: bool = False
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    stop: threading.Event = field(default_factory=threading.Event)
    ask: Callable[[dict[str, Any]], bool] | None = None
    on_progress: Callable[[str, Entry[Any]], None] | None = None


@dataclass
class RunResult:
    exit_code: int
    message: str
    summary: Summary | None = None  # the batch as the run left it
    report: Report | None = None

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.summary.counts) if self.summary is not None else {}


def fingerprint(item: JobModel) -> str:
    return hashlib.sha256(item.model_dump_json().encode()).hexdigest()[:32]


def _entries(job: Job, provider: Provider, state: StateStore, flow: Flow[Any, Any],
             run_id: int) -> tuple[Report, list[Entry[Any]], list[tuple[str, str]]]:
    """Validate the job and pair each valid item with its state record (created if new);
    what the checks found (invalid items, items another job holds) is noted on the run, and
    the items refused under rule 7 returned with why."""
    valid: list[ValidItem] = []
    report = validate_job(job, provider, check_balances=False, keep=valid.append, state=state)
    known = {r.external_id: r for r in state.items(job.name)}
    elsewhere = state.owners([v.external_id for v in valid if v.external_id not in known])
    entries: list[Entry[Any]] = []
    refused: list[tuple[str, str]] = []
    new: list[ItemRecord] = []  # the records of the items new to the state
    for v in valid:
        record = known.get(v.external_id)
        fingerprinted = fingerprint(flow.fingerprinted(v.item))
        if record is None:
            if v.external_id in elsewhere:  # rule 7: handled under another job's name
                refused.append((v.external_id, f"row {v.row}: already handled by job "
                                               f"{elsewhere[v.external_id]}; not paid again"))
                continue
            record = ItemRecord(v.external_id, job.name, job.kind, v.row, fingerprinted,
                                summary=json.dumps(flow.summary_of(v.item), sort_keys=True))
            new.append(record)
        elif record.fingerprint != fingerprinted and record.step != "final":
            if record.step == "new" and not record.intent:
                state.update_item(v.external_id, fingerprint=fingerprinted, row=v.row)
                record.apply({"fingerprint": fingerprinted, "row": v.row})
            elif record.outcome not in SKIP:
                message = "the item changed after its payment started; check it by hand"
                state.update_item(v.external_id, outcome="conflict", error_code="changed",
                                  error_message=message)
                record.apply({"outcome": "conflict", "error_code": "changed",
                              "error_message": message})
        entries.append(Entry(v.item, record))
    state.insert_items(new)  # in one transaction, before anything is sent for them
    state.note_checks(run_id, report.invalid, len(refused))
    return report, entries, refused


def run_job(job: Job, provider: Provider, options: RunOptions) -> RunResult:
    with open_store(options.state_path) as state:
        run_id = state.start_run(job.name, str(job.path))
        try:
            token = state.acquire_lease(job.name, run_id)
        except LeaseHeld as held:
            state.end_run(run_id, held.exit_code, {})
            raise
        beat = _Heartbeat(state, job.name, token)
        try:
            policy = RetryPolicy(job.run.retry.attempts, float(job.run.retry.max_wait),
                                 sleep=options.sleep)
            run = Run(state, run_id, job.name, policy, options.clock)
            code, message, report, refused = _run(job, provider, options, run)
            summary = build_summary(state, job.name, secrets=job.secrets(), refused=refused,
                                    notes=[message])
            if code is None:
                code = 1 if summary.items_problems else 0
        finally:
            beat.stop()
            state.release_lease(job.name, token)
        state.end_run(run_id, code, summary.counts)
        summary.run = run_times(state.latest_run(job.name))
        return RunResult(code, message, summary, report)


def _run(job: Job, provider: Provider, options: RunOptions, run: Run
         ) -> tuple[int | None, str, Report, list[tuple[str, str]]]:
    """The phases; the exit code when the run decides it (else the batch's state does),
    its message, what the checks found, and the items refused under rule 7."""
    kind = kind_named(job.kind)
    flow = kind.flow(kind.client(provider), run)
    report, entries, refused = _entries(job, provider, run.state, flow, run.run_id)
    code, message = _phases(job, options, flow, report, entries)
    return code, message, report, refused


def _phases(job: Job, options: RunOptions, flow: Flow[Any, Any], report: Report,
            entries: list[Entry[Any]]) -> tuple[int | None, str]:
    if not report.ok and job.run.on_invalid == "stop":
        return 2, f"{report.invalid} invalid item(s); nothing was sent"
    todo = [e for e in entries if e.record.step != "final"
            and e.record.outcome not in SKIP]
    earlier = {e.external_id for e in todo if e.record.step == "confirmed"}
    if options.ask is not None and todo and not options.ask(_plan(flow, todo)):
        return 0, "cancelled; nothing was sent"
    workers = options.concurrency or job.run.concurrency
    confirm = job.run.confirm if options.confirm is None else options.confirm
    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="item") as pool:
        phase = _Phase(pool, flow, options, problems)
        if not options.confirm_only:
            phase.run("prepare", flow.prepare, [e for e in todo if flow.needs_prepare(e)])
        # A money-moving call in doubt may have moved money already: learn its fate before
        # counting costs for the pre-flight or leaving it for `runner confirm`.
        phase.run("look up", flow.settle_doubt,
                  [e for e in todo if e.record.intent == flow.commit_step])
        ready = [e for e in todo if flow.ready(e) and not e.record.intent
                 and e.record.outcome in ("pending", "failed", "awaiting_confirm")]
        if not confirm:
            for e in ready:
                flow.update(e, outcome="awaiting_confirm")
        elif ready and not options.stop.is_set() and not problems:
            try:
                short = _preflight(flow, ready)
            except ProviderDown as exc:  # the balances cannot be read: nothing is confirmed
                log.error("provider unreachable: %s", exc)
                problems.append("provider unreachable")
            else:
                if short and not options.allow_partial:
                    return 1, (f"{short}: nothing was confirmed (--allow-partial confirms "
                               f"what the balance covers)")
                phase.run(flow.commit_step, flow.commit, ready)
        _poll(flow, phase, entries, options, float(job.run.wait_for_final), earlier)
    if "provider unreachable" in problems:
        return 75, "the provider is unreachable; run again later to resume"
    if options.stop.is_set():
        return 1, "interrupted; run again to resume"
    return None, ""


class _Phase:
    def __init__(self, pool: ThreadPoolExecutor, flow: Flow[Any, Any], options: RunOptions,
                 problems: list[str]) -> None:
        self.pool = pool
        self.flow = flow
        self.options = options
        self.problems = problems

    def run(self, name: str, step: Callable[[Entry[Any]], Any],
            entries: list[Entry[Any]]) -> None:
        if entries and name != "poll":
            log.info("%s: %d item(s)", name, len(entries))

        def one(entry: Entry[Any]) -> None:
            if self.options.stop.is_set() or "provider unreachable" in self.problems:
                return
            try:
                step(entry)
                # An answer no update recorded is recorded now; after an exception it is
                # not: the call stays in doubt, for a lookup (or a person) to settle.
                self.flow.close(entry)
            except ItemConflict:
                log.warning("%s: conflict at the provider", entry.external_id)
            except ItemInDoubt as exc:
                log.warning("%s: in doubt: %s", entry.external_id, exc)
            except ProviderDown as exc:
                log.error("provider unreachable: %s", exc)
                self.problems.append("provider unreachable")
            log.debug("%s %s: %s %s", name, entry.external_id, entry.record.step,
                      entry.record.status or entry.record.outcome)
            if entry.record.outcome in ("failed", "conflict"):
                log.warning("%s %s: %s %s", entry.external_id, entry.record.outcome,
                            entry.record.error_code, entry.record.error_message)
            if self.options.on_progress is not None:
                self.options.on_progress(name, entry)

        list(self.pool.map(one, entries))


def _plan(flow: Flow[Any, Any], entries: list[Entry[Any]]) -> dict[str, Any]:
    totals: dict[str, Decimal] = {}
    for e in entries:
        planned = flow.planned(e)
        if planned is not None:
            totals[planned[0]] = totals.get(planned[0], Decimal(0)) + planned[1]
    return {"items": len(entries), "totals": totals}


def _preflight(flow: Flow[Any, Any], ready: list[Entry[Any]]) -> str:
    """'' when the balances cover the batch, else what is short."""
    needed: dict[str, Decimal] = {}
    for e in ready:
        cost = flow.cost(e)
        if cost is not None:
            needed[cost[0]] = needed.get(cost[0], Decimal(0)) + cost[1]
    if not needed:
        return ""
    usable = flow.usable()
    short = []
    for balance, amount in sorted(needed.items()):
        has = usable.get(balance, Decimal(0))
        if amount > has:
            short.append(f"{balance} {amount:,} needed, {has:,} available")
    return "; ".join(short)


def _poll(flow: Flow[Any, Any], phase: _Phase, entries: list[Entry[Any]],
          options: RunOptions, wait: float, earlier: set[str]) -> None:
    """Follow what is confirmed to its final status, for ``wait`` seconds at most. With 0,
    what this run confirmed is not read (it stays pending for the next run), but what
    earlier runs confirmed is read once: else it would never be followed."""
    waiting = [e for e in entries if e.record.step == "confirmed"]
    if wait <= 0:
        waiting = [e for e in waiting if e.external_id in earlier]
    deadline = options.clock() + wait
    interval = 0.2
    while waiting and not options.stop.is_set():
        phase.run("poll", flow.poll, waiting)
        waiting = [e for e in waiting if e.record.step != "final"]
        remaining = deadline - options.clock()
        if not waiting or remaining <= 0:
            return
        options.sleep(min(interval, remaining))
        interval = min(interval * 1.5, 5.0)


class _Heartbeat:
    """Keeps the lease fresh while the run lives."""

    def __init__(self, state: StateStore, job_name: str, token: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(state, job_name, token),
                                        daemon=True, name="lease")
        self._thread.start()

    def _beat(self, state: StateStore, job_name: str, token: str) -> None:
        while not self._stop.wait(LEASE_TTL / 3):
            state.heartbeat(job_name, token)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
