"""The items a run works on, a window at a time (``runner.engine.batch``,
``runner.engine.work``): a run holds a bounded window of items, never the whole batch, so
its memory does not grow with the batch.

- ``Stager`` writes the plan into the state as it streams out of the validation, in chunks
  (``StateStore.stage_plan``), and adds up what the items to pay are estimated to cost per
  balance (the job's outstanding cost); the plan is recorded once its checks pass
  (``record_plan``), and makes due what it pays.
- ``Pages`` claims the job's items due from the state's queue (``StateStore.claim``) and
  sorts them for their work (a ``Window``): those polling, read from the state alone; the
  money-moving calls in doubt of a kind that looks them up from the state alone
  (``Flow.doubt_settled_from_state``), whatever became of their rows; and the rest, made
  from their rows, if the plan pays them (the others are given back at once). A worked
  window is given back (``done``): what is polled due again after a wait, the rest done for
  this round.
- ``Models`` makes a window's item models again from the job's rows (the state keeps no
  card data), reading the rows file forward along the window's row numbers (a window behind
  starts it again). An item whose row no longer makes the request planned (the file was
  edited during the run) is not worked, and counted (``unworked``): the run's exit code
  says so.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import tenacity

from runner import lifecycle
from runner.engine.flow import Entry, Flow, fingerprint
from runner.engine.funds import estimate
from runner.engine.plan import PlannedItem
from runner.errors import StateError
from runner.job import Job, ValidItem, iter_items
from runner.lifecycle import TO_PAY, PlanAction, State
from runner.logs import event
from runner.state import ItemRecord, StateStore
from runner.state.holders import worker_gone
from runner.state.records import Staged

log = logging.getLogger("runner")
STAGE_CHUNK = 1000
PAGE = 500  # staged entries read at a time (the retries)


POLL_WAIT = tenacity.wait_exponential(multiplier=0.2, exp_base=1.5, max=5)
_POLLS = tenacity.Retrying(wait=POLL_WAIT)  # (what ``poll_wait``'s attempts belong to)


def poll_wait(polls: int) -> float:
    """The wait after the ``polls``-th poll of an item not final yet: 0.2 s growing by half
    with each poll, up to 5 s."""
    attempt = tenacity.RetryCallState(_POLLS, None, (), {})
    attempt.attempt_number = polls
    return float(POLL_WAIT(attempt))


def give_up(state: StateStore, job_name: str, worker: str) -> None:
    """The claims ``worker`` still holds (a window it did not finish) given back: their
    items are any other worker's to take at once (what is in doubt looked up first); when
    the state cannot be written, they are once the worker's heartbeat goes stale."""
    try:
        state.give_up(job_name, worker)
    except StateError as exc:
        log.warning("the claims of this worker could not be given up (they are free once "
                    "its heartbeat stops): %s", exc, extra=event("claims_not_given_up"))


@dataclass
class Window:
    """The items of one claim, sorted for their work."""

    polls: list[Entry[Any]]  # polling: their final status read (from the state alone)
    lost: list[Entry[Any]]  # money-moving calls in doubt, looked up from the state alone
    entries: list[Entry[Any]]  # the rest, made from their rows: to pay

    def __len__(self) -> int:
        return len(self.polls) + len(self.lost) + len(self.entries)


class Stager:
    """Stages a streamed plan's items in the state, and adds up what the items to pay are
    estimated to cost per balance (``outstanding``: the job's outstanding cost, once the
    plan is recorded)."""

    def __init__(self, state: StateStore, job_name: str, flow: Flow[Any, Any]) -> None:
        self.state = state
        self.job_name = job_name
        self.flow = flow
        self.outstanding: dict[str, Decimal] = {}
        self._buffer: list[Staged] = []
        state.clear_plan(job_name)

    def __call__(self, p: PlannedItem) -> None:
        cost = estimate(p, self.flow)
        if cost is not None and p.balance is not None:
            self.outstanding[p.balance] = self.outstanding.get(p.balance, Decimal(0)) + cost
        first = p.action in (PlanAction.NEW, PlanAction.HELD, PlanAction.DUPLICATE)
        summary = None
        if first and p.valid is not None:
            who = self.flow.summary_of(p.valid.item)
            if p.price is not None:  # its money in the figures before it is quoted
                who["planned"] = [p.price.currency, str(p.price.amount)]
            summary = json.dumps(who, sort_keys=True)
        payee = p.payee.to_json() if p.payee is not None else None
        self._buffer.append(Staged(p.external_id, p.row, p.action, p.ref, p.fingerprint,
                                   p.changed, summary, p.balance, cost, p.why, payee,
                                   p.content))
        if len(self._buffer) >= STAGE_CHUNK:
            self.flush()

    def flush(self) -> None:
        self.state.stage_plan(self.job_name, self._buffer)
        self._buffer = []


class Models:
    """The item models of pages of records, made again from the job's rows."""

    def __init__(self, job: Job, flow: Flow[Any, Any]) -> None:
        self.job = job
        self.flow = flow
        self._rows: Iterator[Any] | None = None
        self._at: Any = None  # the row the pass is at (an ItemResult), None: not started
        self._target = 0  # the row sought: those before it are passed over unmade
        self.unworked: set[str] = set()  # items whose row changed since the plan

    def _seek(self, row: int) -> ValidItem | None:
        self._target = row
        if self._at is None or self._at.row > row:
            self._rows = iter_items(self.job, duplicates=False,
                                    needed=lambda number: number >= self._target)
            self._at = next(self._rows, None)
        while self._at is not None and self._at.row < row:
            assert self._rows is not None
            self._at = next(self._rows, None)
        at = self._at
        return at if isinstance(at, ValidItem) and at.row == row else None

    def entries(self, records: Sequence[ItemRecord], staged: dict[str, Staged]
                ) -> list[Entry[Any]]:
        """The entries of ``records`` whose row (as the plan staged it) still makes the
        request planned, in row order."""
        found: list[Entry[Any]] = []
        for record in sorted(records, key=lambda r: staged[r.external_id].row):
            planned = staged[record.external_id]
            valid = self._seek(planned.row)
            if valid is None or valid.external_id != record.external_id or \
                    fingerprint(self.flow.fingerprinted(valid.item)) != planned.fingerprint:
                log.warning("%s: row %d no longer makes the item planned (changed during "
                            "the run); not worked", record.external_id, planned.row,
                            extra=event("row_changed", record.external_id))
                self.unworked.add(record.external_id)
                continue
            found.append(Entry(valid.item, record))
        return found


class Pages:
    """One worker's claims on the job's queue (see the module's docstring). ``stale``: how
    long a worker's heartbeat may be silent before its claims are free; ``until``: the
    latest due time (the database's clock) this run claims."""

    def __init__(self, state: StateStore, job: Job, flow: Flow[Any, Any], worker: str,
                 stale: float, until: float = float("inf")) -> None:
        self.state = state
        self.job_name = job.name
        self.flow = flow
        self.worker = worker
        self.stale = stale
        self.until = until
        self.models = Models(job, flow)
        # Each item of the last window: the balance it draws on and its estimated cost.
        self.estimated: dict[str, tuple[str, Decimal]] = {}

    def due_from_now(self) -> None:
        """What was made due until now is this run's to work too: the items a run sends
        again (``--retry-failed``) are due once their retry is started, after the plan, and
        a run that claims nothing due after its plan (``wait_for_final: 0s``) would leave
        them unpaid."""
        if self.until != float("inf"):
            self.until = self.state.clock()

    def next(self, size: int) -> Window | None:
        """The next window of at most ``size`` items due, claimed; None when none is due
        now. Those the plan does not pay, or whose rows changed, are given back at once."""
        from_state = self.flow.doubt_settled_from_state
        while True:
            records = self.state.claim(self.job_name, self.worker, size, self.stale,
                                       self.until)
            if not records:
                return None
            polls, lost, rest = [], [], []
            for r in records:
                if lifecycle.state(r) == State.POLLING:
                    polls.append(Entry.of_record(r))
                elif from_state and r.intent == self.flow.commit_call:
                    lost.append(Entry.of_record(r))
                else:
                    rest.append(r)
            entries = self._to_pay(rest)
            if polls or lost or entries:
                return Window(polls, lost, entries)

    def _to_pay(self, records: list[ItemRecord]) -> list[Entry[Any]]:
        """The entries of ``records`` that the plan pays, made from their rows; the others
        are given back, done for this round."""
        if not records:
            return []
        staged = self.state.staged(self.job_name, [r.external_id for r in records])
        paid = [r for r in records if r.external_id in staged
                and staged[r.external_id].action in TO_PAY]
        self.estimated = {s.external_id: (s.balance, s.cost) for s in staged.values()
                          if s.balance is not None and s.cost is not None}
        entries = self.models.entries(paid, staged)
        kept = {e.external_id for e in entries}
        self.state.release(self.job_name, self.worker,
                           [r.external_id for r in records if r.external_id not in kept])
        return entries

    def done(self, window: Window) -> None:
        """Give the window back once worked: what was polled and is still polling due again
        after its wait; a call in doubt looked up and not found paid from its row by the
        next claim; the rest done for this round."""
        delays: dict[float, list[str]] = {}
        for e in window.polls:
            delays.setdefault(poll_wait(e.record.polls + 1), []).append(e.external_id)
        again = [e.external_id for e in window.lost
                 if lifecycle.state(e.record) in lifecycle.SENDABLE]
        self.state.release(self.job_name, self.worker,
                           [e.external_id for e in (*window.lost, *window.entries)], again,
                           delays)

    def give_up(self) -> None:
        """Give back, unfinished, the window the worker holds (it stops: an error, a
        signal)."""
        give_up(self.state, self.job_name, self.worker)

    def wait_for_others(self, sleep: Callable[[float], None]) -> bool:
        """When other live workers hold claims on the job's items: wait for them (one whose
        process is gone from this host is forgotten at once, its claims free) and True,
        for the next claim to take what a dead worker leaves; False when no other holds
        any."""
        others = [w for w in self.state.claimants(self.job_name, self.stale)
                  if w != self.worker]
        if not others:
            return False
        gone = [w for w in others if worker_gone(w)]
        for w in gone:
            log.warning("worker %s is gone: its items are taken over", w,
                        extra=event("worker_gone"))
            self.state.forget_worker(self.job_name, w)
        if not gone:
            sleep(min(0.25, self.stale / 4))
        return True

    def next_due(self) -> float | None:
        """Seconds until the next of the job's items this run claims is due (0 or less:
        now); None when none will be."""
        return self.state.next_due(self.job_name, self.until)

    @property
    def unworked(self) -> set[str]:
        """The items this worker did not work because their rows changed since the plan."""
        return self.models.unworked

    def estimated_cost(self, entries: Sequence[Entry[Any]]) -> dict[str, Decimal]:
        """What the entries (of the last page) were estimated to cost, per balance."""
        cost: dict[str, Decimal] = {}
        for e in entries:
            found = self.estimated.get(e.external_id)
            if found is not None:
                cost[found[0]] = cost.get(found[0], Decimal(0)) + found[1]
        return cost

    def staged(self, actions: Sequence[str]) -> Iterator[tuple[Staged, Entry[Any]]]:
        """The staged entries of ``actions`` with their items, in pages."""
        chunk: list[Staged] = []
        for s in self.state.staged_with(self.job_name, actions):
            chunk.append(s)
            if len(chunk) >= PAGE:
                yield from self._with_items(chunk)
                chunk = []
        yield from self._with_items(chunk)

    def _with_items(self, chunk: list[Staged]) -> Iterator[tuple[Staged, Entry[Any]]]:
        records = self.state.items_by_id([s.external_id for s in chunk])
        by_id = {s.external_id: s for s in chunk if s.external_id in records}
        for e in self.models.entries([records[i] for i in by_id], by_id):
            yield by_id[e.external_id], e

