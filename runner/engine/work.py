"""What one worker does with a job once its plan is recorded (``runner.engine.batch``): it
claims what is due in the job's queue a window at a time (``runner.engine.pages``) and works
each window on the run's threads (``runner.engine.phases``).

1. Retry (``--retry-failed``, by the worker that made the plan): each failed item sent again
   under a new external_id, once the provider shows the attempt that failed final, unpaid.
2. Windows, until nothing is due (``runner.engine.windows``: a window is sized so that no
   quotation expires before its confirm). In each:
   - the items polling have their final status read, from the state alone (the rows file
     is not read: an item whose money moved is followed whatever became of its row);
   - the money-moving calls in doubt (``Flow.commit_call``: sent, their answer lost, by a
     run or a worker that died) are looked up before anything else is sent for them
     (rule 3); from the state alone for a kind whose lookup needs no row
     (``Flow.doubt_settled_from_state``), so that an item whose row was edited or removed
     is looked up all the same. The plan makes them due first;
   - the rest is paid: ``_pay``, that is ``_prepare`` (quotation and transaction),
     ``_check_funds`` (the window's quoted cost plus the job's outstanding cost, what the
     later windows are estimated to cost, against the balances: when they fall short
     nothing more is confirmed, exit 4 when nothing was, else 1, unless
     ``allow_partial``), ``_confirm`` (with ``confirm: false`` the items wait for ``runner
     confirm`` instead).
3. When nothing is due: wait for the other workers' claims (a dead worker's are taken
   over), then for the next poll due, until ``wait_for_final`` runs out.

The worker ends with 78 (the provider refuses the configuration), 75 (unreachable), 1
(interrupted, or items not worked because their rows changed during the run), or lets the
summary decide.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from runner import lifecycle
from runner.engine.flow import Entry, Flow
from runner.engine.options import Clock, RunHooks, RunOptions, Tally
from runner.engine.pages import Pages, Window
from runner.engine.phases import (
    MISCONFIGURED,
    UNREACHABLE,
    Phase,
)
from runner.engine.windows import Windows, shortfall
from runner.errors import ProviderDown
from runner.exit_codes import ExitCode
from runner.job import Job
from runner.lifecycle import PlanAction
from runner.logs import event

log = logging.getLogger("runner")


@dataclass
class Ending:
    """How the run ends when it decides it (else the batch's state does): its exit code,
    closing message, and what the state keeps of why (a shortfall)."""

    code: int | None = None
    message: str = ""
    note: str = ""
    refused: bool = False  # a plan refused, or the question answered no: no summary


def work(job: Job, flow: Flow[Any, Any], pages: Pages, options: RunOptions, hooks: RunHooks,
         clock: Clock, tally: Tally, retrying: bool) -> Ending:
    problems: list[str] = []
    workers = max(1, options.workers(job))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="item") as pool:
        phase = Phase(pool, workers, flow, clock.stop, hooks.on_progress, problems,
                      hooks.on_phase)
        if retrying and not options.confirm_only:
            _retry(flow, phase, pages)
        ending = _windows(job, options, clock, tally, flow, phase, pages)
        if ending is not None:
            return ending
    if MISCONFIGURED in problems:
        return Ending(ExitCode.CONFIGURATION,
                      "the provider refuses runner's credentials, or its certificate is not "
                      "trusted: fix the configuration, then run again to resume")
    if UNREACHABLE in problems:
        return Ending(ExitCode.TRY_LATER, "the provider is unreachable; run again later to resume")
    if clock.stop.is_set():
        return Ending(ExitCode.PROBLEMS, "interrupted; run again to resume")
    if pages.unworked:
        return Ending(ExitCode.PROBLEMS,
                      f"{len(pages.unworked)} item(s) not worked: their rows changed during "
                      f"the run (a run pays what its plan checked); run again to plan them "
                      f"anew")
    return Ending()


def _retry(flow: Flow[Any, Any], phase: Phase, pages: Pages) -> None:
    chunk: list[tuple[Any, Entry[Any]]] = []

    def run() -> None:
        planned = {e.external_id: s for s, e in chunk}
        phase.run("retry", lambda e: flow.retry(
            e, planned[e.external_id].fingerprint, planned[e.external_id].row,
            planned[e.external_id].changed), [e for _, e in chunk])
        chunk.clear()

    for pair in pages.staged((PlanAction.RETRY,)):
        chunk.append(pair)
        if len(chunk) >= 500:
            run()
    if chunk:
        run()
    pages.due_from_now()


def _windows(job: Job, options: RunOptions, clock: Clock, tally: Tally, flow: Flow[Any, Any],
             phase: Phase, pages: Pages) -> Ending | None:
    """Work what is due window by window (``runner.engine.windows``); when nothing is,
    wait for the other workers' claims, then for the next poll due, until
    ``wait_for_final`` runs out (counted from when nothing was due first). An ending when
    the balances cannot cover what is outstanding."""
    windows = Windows(options.workers(job), flow.clock, flow.state.shared)
    deadline: float | None = None
    while not clock.stop.is_set() and not phase.problems:
        window = pages.next(windows.size)
        if window is None:
            if pages.wait_for_others(clock.sleep):
                continue  # what a worker that died held is taken over
            due = pages.next_due()
            if due is None:
                break
            if deadline is None:
                deadline = clock.now() + float(job.run.wait_for_final)
            remaining = deadline - clock.now()
            if due > 0 and remaining <= 0:
                break
            if due > 0:
                clock.sleep(min(due, remaining))
            continue
        started = windows.start(window.entries) if window.entries else None
        try:
            ending = _window(job, options, clock, tally, flow, phase, pages, window)
        except BaseException:
            pages.give_up()
            raise
        finally:
            if started is not None:
                windows.end(window.entries, started)
        if clock.stop.is_set() or phase.problems:  # the window may be unfinished
            pages.give_up()
            break
        pages.done(window)
        if ending is not None:
            return ending
    if len(windows.sizes) > 1:
        log.info("worked in %d windows of %s item(s)", len(windows.sizes),
                 ", ".join(str(n) for n in windows.sizes), extra=event("windows"))
    return None


def _window(job: Job, options: RunOptions, clock: Clock, tally: Tally, flow: Flow[Any, Any],
            phase: Phase, pages: Pages, window: Window) -> Ending | None:
    if window.polls:
        phase.run("poll", flow.poll, window.polls)
    lost = window.lost + [e for e in window.entries if e.record.intent == flow.commit_call]
    if lost:  # its calls in doubt first (rule 3)
        phase.run("look up", flow.settle_doubt, lost)
    if not window.entries:
        return None
    try:
        return _pay(job, options, clock, tally, flow, phase, pages, window.entries)
    finally:  # answers not recorded with a confirm's intent are recorded now
        phase.close(window.entries)


def _pay(job: Job, options: RunOptions, clock: Clock, tally: Tally, flow: Flow[Any, Any],
         phase: Phase, pages: Pages, window: list[Entry[Any]]) -> Ending | None:
    """Pay the window: prepare its items, check the funds for them, confirm them (with
    ``confirm: false``, mark them awaiting ``runner confirm`` instead). An ending when the
    balances cannot cover them."""
    confirm = options.confirms(job)
    if not options.confirm_only:
        _prepare(flow, phase, window, hold=confirm)
    # The window's items are costed by their quotations now: what stays outstanding is
    # the later windows' estimated cost.
    outstanding = flow.state.reduce_outstanding(job.name, pages.estimated_cost(window))
    ready = [e for e in window
             if flow.ready(e) and lifecycle.state(e.record) in lifecycle.SENDABLE]
    if not confirm:
        for e in ready:
            flow.move(e, lifecycle.withheld(e.record))
        return None
    if not ready or clock.stop.is_set() or phase.problems:
        return None
    ending = _check_funds(options, tally, flow, phase, ready, outstanding)
    if ending is not None or phase.problems:
        return ending
    _confirm(tally, flow, phase, ready)
    return None


def _prepare(flow: Flow[Any, Any], phase: Phase, window: list[Entry[Any]], hold: bool
             ) -> None:
    """Make what each item of the window needs before its confirm (the quotation and the
    transaction of a remittance). ``hold``: the answer of each item's last call before its
    confirm (its creation) stays on the item, to be recorded with the confirm's intent in
    one transaction: 4 transactions per item, not 5 (a run that dies in between leaves the
    creation in doubt, looked up by the next run before anything is sent for the item)."""
    phase.run("prepare", flow.prepare, [e for e in window if flow.needs_prepare(e)],
              hold=hold)


def _check_funds(options: RunOptions, tally: Tally, flow: Flow[Any, Any], phase: Phase,
                 ready: list[Entry[Any]], outstanding: dict[str, Decimal]) -> Ending | None:
    """The funds check before a confirm: the quoted cost of ``ready`` plus what is still
    outstanding against what the balances hold now. An ending when they cannot cover it
    (nothing more is confirmed; with ``allow_partial`` the window goes on); None when the
    window may be confirmed, or when the balances cannot be read (the run stops:
    ``phase.problems``)."""
    try:
        short = shortfall(flow, ready, outstanding)
    except ProviderDown as exc:  # the balances cannot be read: nothing is confirmed
        phase.stopped(exc)
        return None
    if short and not options.allow_partial:
        # Exit 4 says nothing was confirmed; after some was (the estimates fell short of
        # what the quotations cost, or the balance moved), the batch is left part paid: 1.
        more = "more " if tally.confirmed else ""
        return Ending(ExitCode.PROBLEMS if tally.confirmed else ExitCode.FUNDS_SHORT,
                      f"{short}: funds short; nothing {more}was confirmed (--allow-partial "
                      f"confirms what the balance covers)", short)
    return None


def _confirm(tally: Tally, flow: Flow[Any, Any], phase: Phase, ready: list[Entry[Any]]
             ) -> None:
    """Send each ready item's confirm: the call that moves the money."""
    phase.run(flow.commit_call, flow.commit, ready)
    tally.confirmed += len(ready)
