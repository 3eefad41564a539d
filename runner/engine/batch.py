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

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from runner.engine.accounts import AccountTransferFlow, PayoutFlow
from runner.engine.flow import Entry, Flow
from runner.engine.legacy_pay import LegacyPayFlow
from runner.engine.merchant_payment import MerchantPaymentFlow
from runner.engine.onboarding import OnboardingFlow
from runner.engine.operations import CancelFlow, ChargeFlow, RefundFlow
from runner.engine.payment_orders import PaymentOrderFlow
from runner.engine.remittance import RemittanceFlow
from runner.errors import (
    ItemConflict,
    ItemInDoubt,
    LeaseHeld,
    ProviderDown,
    UnsupportedKind,
)
from runner.job import Job, ValidItem
from runner.provider import Provider
from runner.provider.retry import RetryPolicy
from runner.state import LEASE_TTL, StateStore
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
    on_progress: Callable[[str, Entry], None] | None = None


@dataclass
class RunResult:
    exit_code: int
    message: str
    entries: list[Entry] = field(default_factory=list)
    report: Report | None = None
    refused: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


# The pipeline of each kind, and the provider client it drives.
FLOWS: dict[str, tuple[type[Flow], Callable[[Provider], Any]]] = {
    "payment_order": (PaymentOrderFlow, lambda p: p.collection),
    "charge": (ChargeFlow, lambda p: p.collection),
    "refund": (RefundFlow, lambda p: p.collection),
    "cancel": (CancelFlow, lambda p: p.collection),
    "payout": (PayoutFlow, lambda p: p.accounts),
    "account_transfer": (AccountTransferFlow, lambda p: p.accounts),
    "remittance": (RemittanceFlow, lambda p: p.money_transfer),
    "merchant_payment": (MerchantPaymentFlow, lambda p: p.merchant_payment),
    "legacy_pay": (LegacyPayFlow, lambda p: p.legacy),
    "onboarding": (OnboardingFlow, lambda p: p.onboarding),
}


def _fingerprint(item: Any) -> str:
    import hashlib

    return hashlib.sha256(item.model_dump_json().encode()).hexdigest()[:32]


def _entries(job: Job, provider: Provider, state: StateStore, flow: Flow
             ) -> tuple[Report, list[Entry], list[tuple[str, str]]]:
    """Validate the job and pair each valid item with its state record (created if new)."""
    valid: list[ValidItem] = []
    report = validate_job(job, provider, check_balances=False, keep=valid.append)
    known = {r["external_id"]: r for r in state.items(job.name)}
    elsewhere = state.owners([v.external_id for v in valid if v.external_id not in known])
    entries: list[Entry] = []
    refused: list[tuple[str, str]] = []
    new: list[dict[str, Any]] = []  # the records of the items new to the state
    for v in valid:
        record = known.get(v.external_id)
        fingerprint = _fingerprint(flow.fingerprinted(v.item))
        if record is None:
            if v.external_id in elsewhere:  # rule 7: handled under another job's name
                refused.append((v.external_id, f"row {v.row}: already handled by job "
                                               f"{elsewhere[v.external_id]}; not paid again"))
                continue
            record = {"external_id": v.external_id, "job_name": job.name, "kind": job.kind,
                      "row": v.row, "fingerprint": fingerprint,
                      "summary": _json(flow.summary_of(v.item))}
            new.append(record)
            entries.append(Entry(v.external_id, v.row, v.item, record))
            continue
        if record["fingerprint"] != fingerprint and record["step"] != "final":
            if record["step"] == "new" and not record["intent"]:
                state.update_item(v.external_id, fingerprint=fingerprint, row=v.row)
                record["fingerprint"] = fingerprint
            elif record["outcome"] not in SKIP:
                message = "the item changed after its payment started; check it by hand"
                state.update_item(v.external_id, outcome="conflict", error_code="changed",
                                  error_message=message)
                record.update(outcome="conflict", error_code="changed", error_message=message)
        entries.append(Entry(v.external_id, v.row, v.item, dict(record)))
    state.insert_items(new)  # in one transaction, before anything is sent for them
    return report, entries, refused


def _json(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def run_job(job: Job, provider: Provider, options: RunOptions) -> RunResult:
    if job.kind not in FLOWS:
        raise UnsupportedKind(f"{job.path}: kind {job.kind} cannot be run yet")
    state = StateStore(options.state_path)
    try:
        run_id = state.start_run(job.name, str(job.path))
        try:
            token = state.acquire_lease(job.name, run_id)
        except LeaseHeld as held:
            state.end_run(run_id, held.exit_code, {})
            raise
        beat = _Heartbeat(state, job.name, token)
        try:
            result = _run(job, provider, options, state, run_id)
        finally:
            beat.stop()
            state.release_lease(job.name, token)
        state.end_run(run_id, result.exit_code, result.counts)
        return result
    finally:
        state.close()


def _run(job: Job, provider: Provider, options: RunOptions, state: StateStore,
         run_id: int) -> RunResult:
    policy = RetryPolicy(job.run.retry.attempts, float(job.run.retry.max_wait),
                         sleep=options.sleep)
    flow_class, client_of = FLOWS[job.kind]
    flow = flow_class(client_of(provider), state, run_id, policy, options.clock)
    report, entries, refused = _entries(job, provider, state, flow)
    if not report.ok and job.run.on_invalid == "stop":
        return RunResult(2, f"{report.invalid} invalid item(s); nothing was sent",
                         report=report, refused=refused)
    todo = [e for e in entries if e.record["step"] != "final"
            and e.record["outcome"] not in SKIP]
    earlier = {e.external_id for e in todo if e.record["step"] == "confirmed"}
    if options.ask is not None and todo and not options.ask(_plan(flow, todo)):
        return RunResult(0, "cancelled; nothing was sent", entries, report, refused)
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
                  [e for e in todo if e.record.get("intent") == flow.commit_step])
        ready = [e for e in todo if flow.ready(e) and not e.record.get("intent")
                 and e.record["outcome"] in ("pending", "failed", "awaiting_confirm")]
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
                    return _finish(entries, report, refused, 1,
                                   f"{short}: nothing was confirmed (--allow-partial "
                                   f"confirms what the balance covers)")
                phase.run(flow.commit_step, flow.commit, ready)
        _poll(flow, phase, entries, options, float(job.run.wait_for_final), earlier)
    if "provider unreachable" in problems:
        return _finish(entries, report, refused, 75, "the provider is unreachable; "
                                                    "run again later to resume")
    if options.stop.is_set():
        return _finish(entries, report, refused, 1, "interrupted; run again to resume")
    return _finish(entries, report, refused, None, "")


class _Phase:
    def __init__(self, pool: ThreadPoolExecutor, flow: Flow, options: RunOptions,
                 problems: list[str]) -> None:
        self.pool = pool
        self.flow = flow
        self.options = options
        self.problems = problems

    def run(self, name: str, step: Callable[[Entry], Any], entries: list[Entry]) -> None:
        if entries and name != "poll":
            log.info("%s: %d item(s)", name, len(entries))

        def one(entry: Entry) -> None:
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
            log.debug("%s %s: %s %s", name, entry.external_id, entry.record.get("step"),
                      entry.record.get("status") or entry.record.get("outcome"))
            if entry.record.get("outcome") in ("failed", "conflict"):
                log.warning("%s %s: %s %s", entry.external_id, entry.record["outcome"],
                            entry.record.get("error_code"), entry.record.get("error_message"))
            if self.options.on_progress is not None:
                self.options.on_progress(name, entry)

        list(self.pool.map(one, entries))


def _plan(flow: Flow, entries: list[Entry]) -> dict[str, Any]:
    totals: dict[str, Decimal] = {}
    for e in entries:
        planned = flow.planned(e)
        if planned is not None:
            totals[planned[0]] = totals.get(planned[0], Decimal(0)) + planned[1]
    return {"items": len(entries), "totals": totals}


def _preflight(flow: Flow, ready: list[Entry]) -> str:
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


def _poll(flow: Flow, phase: _Phase, entries: list[Entry], options: RunOptions,
          wait: float, earlier: set[str]) -> None:
    """Follow what is confirmed to its final status, for ``wait`` seconds at most. With 0,
    what this run confirmed is not read (it stays pending for the next run), but what
    earlier runs confirmed is read once: else it would never be followed."""
    waiting = [e for e in entries if e.record["step"] == "confirmed"]
    if wait <= 0:
        waiting = [e for e in waiting if e.external_id in earlier]
    deadline = options.clock() + wait
    interval = 0.2
    while waiting and not options.stop.is_set():
        phase.run("poll", flow.poll, waiting)
        waiting = [e for e in waiting if e.record["step"] != "final"]
        remaining = deadline - options.clock()
        if not waiting or remaining <= 0:
            return
        options.sleep(min(interval, remaining))
        interval = min(interval * 1.5, 5.0)


def _finish(entries: list[Entry], report: Report, refused: list[tuple[str, str]],
            code: int | None, message: str) -> RunResult:
    counts: dict[str, int] = {}
    for e in entries:
        key = "in_doubt" if e.record.get("intent") else e.record["outcome"]
        counts[key] = counts.get(key, 0) + 1
    if refused:
        counts["refused"] = len(refused)
    if report.invalid:
        counts["invalid"] = report.invalid
    if code is None:
        bad = sum(counts.get(k, 0) for k in ("failed", "conflict", "unknown", "in_doubt",
                                             "refused", "invalid"))
        code = 1 if bad else 0
    return RunResult(code, message, entries, report, refused, counts)


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
