"""A batch read once, item by item, into what its summary says (``Tally``): the counts per
state, the money per currency and the rates (``totals.Sums``), the digest, and the lists a
person reads (failed, needs a person, pending ...), each holding its first ``limit`` items
and counting the rest (``Listed``). The read model (``model.Summary``) is made of one, so
the memory of a summary is the same for ten items and for a million; the full list is
streamed again from the state when the CSV is written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, overload

from runner.lifecycle import PlanAction, Shown
from runner.summary.lines import ItemLine, stage
from runner.summary.totals import Sums, money_group

# The items' states as they are shown, and the rows a run's plan refused (rule 7) or found
# invalid, which it counted.
STATES = (Shown.SETTLED, Shown.PENDING, Shown.AWAITING_CONFIRM, Shown.FAILED,
          PlanAction.REFUSED, PlanAction.INVALID, Shown.CHANGED, Shown.PAID_TWICE,
          Shown.CONFLICT, Shown.UNKNOWN, Shown.IN_DOUBT, Shown.HELD)
# The states that make a run exit 1: an item that did not end well, or may not have (a
# changed item: its row's new request is left unpaid; one paid twice), or is held (by its payee
# check, or as a possible duplicate) until a person decides.
PROBLEMS = (Shown.FAILED, PlanAction.REFUSED, PlanAction.INVALID, Shown.CHANGED,
            Shown.PAID_TWICE, Shown.CONFLICT, Shown.UNKNOWN, Shown.IN_DOUBT, Shown.HELD)
REVIEW = (Shown.CONFLICT, Shown.UNKNOWN, Shown.IN_DOUBT, Shown.HELD)
# The states a person must act on, listed together (``Tally.needs_person``).
FOR_A_PERSON = (*REVIEW, Shown.PAID_TWICE)
# Each list a person reads shows this many items at most; the CSV has them all.
LIST_LIMIT = 50
# How far pending items went, in the order a reader counts them.
STAGES = ("confirmed", "created", "not started")


class Listed:
    """A list a person reads: its first ``limit`` items held, every one counted.

    ``len()`` (and a template's ``|length``) is the true length; iterating, indexing and
    slicing see the items held, in the batch's row order."""

    def __init__(self, limit: int = LIST_LIMIT) -> None:
        self.limit = limit
        self.shown: list[ItemLine] = []
        self.total = 0

    def add(self, item: ItemLine) -> None:
        self.total += 1
        if len(self.shown) < self.limit:
            self.shown.append(item)

    @property
    def more(self) -> int:
        """How many are counted but not held."""
        return self.total - len(self.shown)

    def __len__(self) -> int:
        return self.total

    def __bool__(self) -> bool:
        return self.total > 0

    def __iter__(self) -> Iterator[ItemLine]:
        return iter(self.shown)

    @overload
    def __getitem__(self, index: int) -> ItemLine: ...

    @overload
    def __getitem__(self, index: slice) -> list[ItemLine]: ...

    def __getitem__(self, index: int | slice) -> ItemLine | list[ItemLine]:
        return self.shown[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Listed):
            return (self.shown, self.total) == (other.shown, other.total)
        return isinstance(other, list) and self.total == len(other) and self.shown == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Listed({len(self.shown)} of {self.total})"


class Tally:
    """What a summary says about the items, added up one item at a time (``add``)."""

    def __init__(self, limit: int = LIST_LIMIT) -> None:
        self.limit = limit
        self.items, self.failed, self.needs_person, self.pending, self.awaiting_confirm, \
            self.with_details, self.left_unpaid, self.payees = (Listed(limit) for _ in range(8))
        self.counts: dict[str, int] = {k: 0 for k in STATES}
        self.stages = {k: 0 for k in STAGES}  # pending items by ``lines.stage``
        self.unpriced = 0
        self.paid = 0  # items whose money was paid (settled, and changed since)
        self.sums = Sums()
        self.groups: dict[str, dict[str, Decimal]] = {}  # money group -> currency -> sum
        self._hash = hashlib.sha256()

    def add(self, i: ItemLine) -> None:
        self.items.add(i)
        self.counts[i.state] = self.counts.get(i.state, 0) + 1
        for listed, yes in ((self.failed, i.state in (Shown.FAILED, PlanAction.REFUSED)),
                            (self.needs_person, i.state in FOR_A_PERSON),
                            (self.pending, i.state == Shown.PENDING),
                            (self.awaiting_confirm, i.state == Shown.AWAITING_CONFIRM),
                            (self.with_details, bool(i.details)),
                            (self.left_unpaid, i.state == Shown.CHANGED),
                            (self.payees, bool(i.payee))):
            if yes:
                listed.add(i)
        if i.state == Shown.PENDING:
            self.stages[stage(i)] += 1
        if i.state != Shown.SETTLED and i.source_amount is None:
            self.unpriced += 1
        group = money_group(i)
        if group == "paid":
            self.paid += 1
        money = i.money
        if group is not None and money is not None:
            sums = self.groups.setdefault(group, {})
            sums[money[0]] = sums.get(money[0], Decimal(0)) + money[1]
        if i.twice_amount:
            sums = self.groups.setdefault("twice", {})
            sums[i.source_currency] = sums.get(i.source_currency, Decimal(0)) + i.twice_amount
        self.sums.add(i)
        final = i.state not in (Shown.PENDING, Shown.AWAITING_CONFIRM)
        self._hash.update(json.dumps([i.external_id, i.state, i.step, str(i.source_amount),
                                      str(i.twice_amount),
                                      str(i.fee), str(i.destination_amount),
                                      str(i.transaction_id), i.code if final else "",
                                      i.message if final else ""]).encode())
        if i.payee:  # a payee finding (none: the digest a batch had before such checks)
            self._hash.update(i.payee.encode())

    def digest(self, *closing: Any) -> str:
        """The items' digest, then ``closing`` (the run's counts, refusals and notes)."""
        h = self._hash.copy()
        h.update(json.dumps(list(closing)).encode())
        return h.hexdigest()
