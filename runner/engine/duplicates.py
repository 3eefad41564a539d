"""Possible duplicates, held (rule 9 of docs/exactly-once.md): two items of one batch that pay the
same.

A batch is a job's name with all its history in the state. Each kind says what makes two of
its items the same payment (``runner.kinds.same``: for a remittance the beneficiary's account
or msisdn, the amount and the currency); an item's is kept as a digest (``content``) with its
staged plan and its record. When a plan is made, an item about to be paid for the first time
(new, sent again by ``--retry-failed``, or held by an earlier plan) whose digest is that of
another item of the batch, one already in the state under another external_id (paid, on its
way, needing a person: not one that failed with nothing paid) or an earlier row of this plan,
is held: not paid, listed by name with the item it matches in the plan, the summary and
status, and the run exits 1. Its row's ``allow_duplicate`` column, or ``--allow-duplicates``
for the run (recorded with it), pays it all the same. A failed item matching one paid since
is not sent again by ``--retry-failed``.

The check streams with the plan, a chunk of rows at a time, in flat memory: the state is
asked which digests of the chunk its items hold (an index per job), and the plan's earlier
rows are kept as ``runner.job.seen`` keeps external_ids (spilling to a temporary file).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from runner.job import Job, ValidItem
from runner.job.seen import Seen
from runner.kinds import kind_named
from runner.lifecycle import Outcome, PlanAction
from runner.state import StateStore

if TYPE_CHECKING:
    from runner.engine.plan import PlannedItem

# The plan's actions of an item a run pays or has paid: it holds what it pays.
PAYING = (PlanAction.NEW, PlanAction.RESUME, PlanAction.IN_DOUBT, PlanAction.RETRY,
          PlanAction.SETTLED, PlanAction.CHANGED, PlanAction.REVIEW)
# How a person reads where the matching item is (its outcome, or its action in this plan).
WHERE: dict[str, str] = {
    Outcome.SETTLED: "paid", Outcome.PENDING: "on its way",
    Outcome.AWAITING_CONFIRM: "awaiting confirmation", Outcome.CONFLICT: "needing a person",
    Outcome.UNKNOWN: "needing a person", PlanAction.NEW: "to pay in this run",
    PlanAction.RESUME: "on its way", PlanAction.IN_DOUBT: "on its way",
    PlanAction.RETRY: "to pay again in this run", PlanAction.CHANGED: "needing a person",
    PlanAction.REVIEW: "needing a person"}
HOW = "allow_duplicate: yes on its row, or --allow-duplicates, pays it"
Match = tuple[str, int, str]  # external_id, row, outcome or plan action


def content_of(job: Job, valid: ValidItem) -> str | None:
    """What ``valid`` pays, as a digest (None: nothing names it; it is not compared)."""
    kind = kind_named(job.kind)
    parts = kind.same_payment(valid.item) if kind.same_payment is not None else None
    if parts is None:
        return None
    return hashlib.sha256(json.dumps([job.kind, *parts]).encode()).hexdigest()[:32]


class Duplicates:
    """The check of one plan, fed its items a chunk at a time, in row order.
    ``allow_all``: ``--allow-duplicates``."""

    def __init__(self, state: StateStore, job: Job, *, allow_all: bool) -> None:
        self.state = state
        self.job = job
        self.allow_all = allow_all
        self.words = kind_named(job.kind).same_payment_is
        self.earlier = Seen()  # digest -> the first row of the plan paying it
        self.held = 0
        self.allowed = 0

    def check(self, planned: Sequence[PlannedItem]) -> None:
        """Hold the items of ``planned`` (one chunk, each with its valid item and record)
        that pay what another item of the batch pays."""
        for p in planned:
            if p.valid is not None:
                p.content = content_of(self.job, p.valid)
        contents = {p.content for p in planned if p.content is not None}
        history = self.state.same_payments(self.job.name, contents) if contents else {}
        for p in planned:
            if p.content is None:
                continue
            found = [m for m in history.get(p.content, ()) if m[0] != p.external_id]
            earlier = self.earlier.get(p.content)
            if earlier is not None:
                found.append((earlier[1].partition(" ")[2], earlier[0],
                              earlier[1].partition(" ")[0]))
            if found and _first_payment(p):
                if self.allow_all or (p.valid is not None and p.valid.allow_duplicate):
                    self.allowed += 1
                    p.why = f"possible duplicate of {_named(found[0])}, paid as allowed"
                else:
                    self._hold(p, found[0])
            if p.action in PAYING and earlier is None:
                self.earlier.put(p.content, p.row, f"{p.action} {p.external_id}")

    def close(self) -> None:
        self.earlier.close()

    def _hold(self, p: PlannedItem, match: Match) -> None:
        self.held += 1
        said = f"possible duplicate of {_named(match)}: the same {self.words}"
        if p.action is PlanAction.RETRY:  # the failed attempt stays as it is: nothing is sent
            assert p.record is not None
            p.action, p.ref, p.step = PlanAction.FAILED, p.record.ref, p.record.step
            p.why = f"{p.why}; not sent again: {said}"
        else:
            p.action, p.why = PlanAction.DUPLICATE, f"{said}; not paid ({HOW})"


def _first_payment(p: PlannedItem) -> bool:
    """An item that a run would pay for the first time: new, sent again after it failed,
    or held by an earlier plan."""
    held = p.record is not None and p.record.outcome == Outcome.HELD
    return p.action in (PlanAction.NEW, PlanAction.RETRY) or (
        p.action is PlanAction.RESUME and held)


def _named(match: Match) -> str:
    external_id, row, where = match
    return f"{external_id} (row {row}, {WHERE.get(where, where)})"
