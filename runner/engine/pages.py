"""The items a run works on, a page at a time (``runner.engine.batch``,
``runner.engine.work``): a run holds a bounded page of items, never the whole batch, so its
memory does not grow with the batch.

- ``Stager`` writes the plan into the state as it streams out of the validation, in chunks
  (``StateStore.stage_plan``), and adds up what the items to pay are estimated to cost per
  balance (the job's outstanding cost); the plan is recorded once its checks pass
  (``record_plan``).
- ``Pages`` claims the job's items from the state a page at a time (``claim_next``): a page
  is this worker's until it gives it back (``done``) or its claim expires (the heartbeat
  keeps it). Each phase is a pass over the job's items, named by the run (SQLite) or by the
  round the workers share; the items the staged plan does not pay are given back at once.
- ``Models`` makes a page's item models again from the job's rows (the state keeps no card
  data), reading the rows file forward along the page's row numbers (a page behind starts it
  again). An item whose row no longer makes the request planned (the file was edited during
  the run) is not worked, and counted (``unworked``): the run's exit code says so. A poll
  needs no row: it works from the state alone (``Entry.of_record``); so does the lookup of a
  commit in doubt of a kind that finds it by its external_id alone
  (``Flow.doubt_settled_from_state``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from runner.engine.flow import Entry, Flow, fingerprint
from runner.engine.funds import estimate
from runner.engine.plan import PlannedItem
from runner.errors import StateError
from runner.job import Job, ValidItem, iter_items
from runner.lifecycle import TO_PAY, PlanAction
from runner.logs import event
from runner.state import ItemRecord, StateStore
from runner.state.holders import worker_gone
from runner.state.records import Staged

log = logging.getLogger("runner")
STAGE_CHUNK = 1000
PAGE = 500  # items in a page of a pass that is not cut in windows


def give_up(state: StateStore, job_name: str, worker: str) -> None:
    """The claims ``worker`` still holds (a page it did not finish) given up: its items are
    any other worker's to take over at once, as a dead worker's (what is in doubt looked up
    first); when the state cannot be written, its claims expire."""
    try:
        state.expire_claims(job_name, worker)
    except StateError as exc:
        log.warning("the claims of this worker could not be given up (they expire): %s", exc,
                    extra=event("claims_not_given_up"))


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
        summary = json.dumps(self.flow.summary_of(p.valid.item), sort_keys=True) \
            if first and p.valid is not None else None
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
    """The passes of one worker over the job's items (see the module's docstring)."""

    def __init__(self, state: StateStore, job: Job, flow: Flow[Any, Any], worker: str,
                 round_key: str, ttl: float) -> None:
        self.state = state
        self.job_name = job.name
        self.worker = worker
        self.round = round_key
        self.ttl = ttl
        self.models = Models(job, flow)
        # Each item of the last page: the balance it draws on and its estimated cost.
        self.estimated: dict[str, tuple[str, Decimal]] = {}

    def next(self, name: str, size: int, *, rows: bool = True,
             **only: Any) -> list[Entry[Any]] | None:
        """The next page of the pass ``name`` (``only``: ``claim_next``'s filters) as the
        entries to work on; None when the pass is over. Those the plan does not pay are
        given back at once. ``rows`` False: every item of the page, from the state alone,
        with no item model (``Entry.of_record``: a poll)."""
        while True:
            records = self.state.claim_next(self.job_name, self.worker, size, self.ttl,
                                            f"{self.round}:{name}", **only)
            if not records:
                return None
            if not rows:
                return [Entry.of_record(r) for r in records]
            staged = self.state.staged(self.job_name, [r.external_id for r in records])
            paid = [r for r in records if r.external_id in staged
                    and staged[r.external_id].action in TO_PAY]
            self.estimated = {s.external_id: (s.balance, s.cost) for s in staged.values()
                              if s.balance is not None and s.cost is not None}
            entries = self.models.entries(paid, staged)
            kept = {e.external_id for e in entries}
            dropped = [r.external_id for r in records if r.external_id not in kept]
            if dropped:
                self.state.release_claims(self.job_name, self.worker, dropped)
            if entries:
                return entries

    def wait_for_others(self, sleep: Callable[[float], None]) -> bool:
        """When other workers hold claims on the job's open items: wait for them (a claim
        of a worker whose process is gone from this host expires at once) and True, for
        the pass to take again what a dead worker leaves; False when no other holds any."""
        others = [w for w in self.state.claimants(self.job_name) if w != self.worker]
        if not others:
            return False
        gone = [w for w in others if worker_gone(w)]
        for w in gone:
            log.warning("worker %s is gone: its items are taken over", w,
                        extra=event("worker_gone"))
            self.state.expire_claims(self.job_name, w)
        if not gone:
            sleep(min(0.25, self.ttl / 4))
        return True

    def give_up(self) -> None:
        """Give back, unfinished, the page the worker holds (it stops: an error, a signal)."""
        give_up(self.state, self.job_name, self.worker)

    def hand_on(self, entries: Sequence[Entry[Any]],
                onward: Callable[[Entry[Any]], bool]) -> None:
        """Give the page back, and hand on those of its entries ``onward`` picks: their
        claims expire at once, so that the next pass of any worker (the windows, after the
        look-up pass) takes them first, even where its cursor is already past them."""
        kept = [e.external_id for e in entries if not onward(e)]
        if kept:
            self.state.release_claims(self.job_name, self.worker, kept)
        self.give_up()

    def done(self, entries: Sequence[Entry[Any]]) -> None:
        """Give the page back."""
        self.state.release_claims(self.job_name, self.worker,
                                  [e.external_id for e in entries])

    def restart(self, prefix: str) -> None:
        """The passes whose names start with ``prefix`` start again from the first page."""
        self.state.restart_passes(self.job_name, f"{self.round}:{prefix}")

    @property
    def unworked(self) -> set[str]:
        """The items this worker did not work because their rows changed since the plan."""
        return self.models.unworked

    def over(self, name: str, size: int = PAGE, *, rows: bool = True,
             **only: Any) -> Iterator[list[Entry[Any]]]:
        """Every page of the pass ``name``, one after another, until the pass is over; each
        page's claims are given back (``done``) once the caller has worked it."""
        while (page := self.next(name, size, rows=rows, **only)) is not None:
            try:
                yield page
            finally:
                self.done(page)

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

