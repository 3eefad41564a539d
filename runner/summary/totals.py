"""A batch's money per currency, from its items: what settled items sent, cost and received,
what was planned and where it is (paid, failed, pending, to check), and the average rate per
pair of currencies. Part of the read model (``model.Summary.totals`` and ``rates``)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from runner.lifecycle import Shown
from runner.summary.lines import ItemLine

# Where an item's money is, by its state: planned = paid + failed + pending + held + to
# check. An item not quoted yet counts the amount its plan priced (``ItemLine.planned``).
MONEY: dict[str, str] = {
    Shown.SETTLED: "paid", Shown.PAID_TWICE: "paid", Shown.FAILED: "failed",
    Shown.PENDING: "pending", Shown.AWAITING_CONFIRM: "pending", Shown.CONFLICT: "to check",
    Shown.UNKNOWN: "to check", Shown.IN_DOUBT: "to check", Shown.HELD: "held"}


def money_group(i: ItemLine) -> str | None:
    """Where ``i``'s money is (``MONEY``): a changed item's is where its outcome says (paid,
    or on its way), whatever its row asks now."""
    return MONEY.get(i.outcome if i.state == Shown.CHANGED else i.state)


@dataclass(frozen=True)
class CurrencyTotal:
    """One currency's money. Settled items: ``sent`` and ``fees`` in a source currency,
    ``received`` in a destination (``fees_known``: some item sent in this currency has a fee
    from the provider; the kinds whose provider shows none leave fees and cost unsaid,
    rather than claim 0). The rest of what was planned in a source currency: ``failed``
    (nothing paid), ``pending`` (on its way), ``held`` (by its payee check, or as a possible
    duplicate: not paid until a plan pays it) and ``review`` (needs a person to tell).
    ``twice``: what earlier attempts paid beside an item's own payment (a double payment),
    counted in ``sent`` (the money left) but not in ``planned``."""

    currency: str
    sent: Decimal = Decimal(0)
    fees: Decimal = Decimal(0)
    received: Decimal = Decimal(0)
    fees_known: bool = False
    senders: int = 0  # settled items sent in this currency
    failed: Decimal = Decimal(0)
    pending: Decimal = Decimal(0)
    held: Decimal = Decimal(0)
    review: Decimal = Decimal(0)
    twice: Decimal = Decimal(0)

    @property
    def cost(self) -> Decimal:
        return self.sent + self.fees

    @property
    def planned(self) -> Decimal:
        return self.sent - self.twice + self.failed + self.pending + self.held + self.review

    @property
    def not_paid(self) -> Decimal:
        return self.planned - (self.sent - self.twice)

    @property
    def parts(self) -> list[tuple[str, Decimal, Decimal]]:
        """(paid | failed | pending | held | to check, amount, percent of planned), those
        not 0:
        the stacked bar's segments."""
        planned = self.planned
        if not planned:
            return []
        shares = (("paid", self.sent - self.twice), ("failed", self.failed),
                  ("pending", self.pending), ("held", self.held), ("to check", self.review))
        return [(name, amount, (amount * 100 / planned).quantize(Decimal("0.1")))
                for name, amount in shares if amount]


@dataclass(frozen=True)
class Rate:
    """What settled items from one currency into another came to: the average rate."""

    source: str
    destination: str
    sent: Decimal
    received: Decimal
    items: int

    @property
    def rate(self) -> Decimal:
        return (self.received / self.sent).quantize(Decimal("0.0001"))


class Sums:
    """A batch's money, added up one item at a time (``add``): the batch is never held."""

    def __init__(self) -> None:
        self.sums: dict[str, dict[str, Any]] = {}
        self.pairs: dict[tuple[str, str], list[Decimal]] = {}

    def _add(self, currency: str, name: str, amount: Decimal) -> None:
        values = self.sums.setdefault(currency, {})
        values[name] = values.get(name, Decimal(0)) + amount

    def add(self, i: ItemLine) -> None:
        group = money_group(i)
        if group == "paid" and i.destination_currency and i.destination_amount is not None:
            self._add(i.destination_currency, "received", i.destination_amount)
        money = i.money
        if group is None or money is None:
            return
        if group != "paid":
            self._add(money[0], {"to check": "review"}.get(group, group), money[1])
            return
        if not i.source_currency or i.source_amount is None:
            return
        self._add(i.source_currency, "sent", i.source_amount)
        values = self.sums[i.source_currency]
        values["senders"] = values.get("senders", 0) + 1
        if i.fee is not None:
            self._add(i.source_currency, "fees", i.fee)
            values["fees_known"] = True
        if i.twice_amount:  # the money left twice: in what was sent, and said apart
            self._add(i.source_currency, "sent", i.twice_amount)
            self._add(i.source_currency, "twice", i.twice_amount)
            if i.twice_fee:
                self._add(i.source_currency, "fees", i.twice_fee)
        if i.destination_amount is not None and i.destination_currency not in (
                "", i.source_currency):
            pair = self.pairs.setdefault((i.source_currency, i.destination_currency),
                                         [Decimal(0), Decimal(0), Decimal(0)])
            pair[0] += i.source_amount
            pair[1] += i.destination_amount
            pair[2] += 1

    def totals(self) -> list[CurrencyTotal]:
        return [CurrencyTotal(c, **self.sums[c]) for c in sorted(self.sums)]

    def rates(self) -> list[Rate]:
        return [Rate(s, d, sent, received, int(n)) for (s, d), (sent, received, n)
                in sorted(self.pairs.items()) if sent]
