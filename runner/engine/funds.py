"""What a plan's items to pay draw on each balance (``runner.engine.plan``): the ``Need`` of
each balance against what it holds, fees included (quoted, or estimated where they could
make it short: ``runner.engine.fees``), and each item's estimated cost, which a run keeps in
the state for its windows' funds checks (``runner.engine.pages``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from runner.engine.fees import MARGIN, Corridor, Quote, could_matter, sample, stamp
from runner.engine.flow import Flow
from runner.lifecycle import PlanAction, Step

if TYPE_CHECKING:
    from runner.engine.plan import PlannedItem


@dataclass
class Need:
    """What the items to pay draw on one balance (as ``Flow.draws`` names it), and what it
    holds. ``fees_known``: every item's fee is known (quoted); else fees come on top:
    ``estimated`` (``runner.engine.fees``, from ``samples`` quotations) where they could
    make the balance short, but for ``unestimated`` items (their samples refused)."""

    balance: str
    currency: str
    items: int = 0
    amount: Decimal = Decimal(0)
    fee: Decimal = Decimal(0)
    fees_known: bool = True
    available: Decimal = Decimal(0)
    estimated: Decimal = Decimal(0)
    samples: int = 0
    unestimated: int = 0
    corridors: dict[str, Corridor] = field(default_factory=dict, repr=False, compare=False)

    @property
    def needed(self) -> Decimal:
        return self.amount + self.fee + self.estimated

    @property
    def short(self) -> bool:
        return self.needed > self.available

    @property
    def unquoted(self) -> Decimal:
        """The amounts of the items whose fee is not quoted."""
        return sum((c.total for c in self.corridors.values()), Decimal(0))

    def shortfall(self) -> str:
        fees = f" ({self.fee + self.estimated:,} of fees, {self.estimated:,} of them " \
               f"estimated)" if self.estimated else ""
        return f"{self.balance} {self.needed:,} needed{fees}, {self.available:,} available"

    def as_dict(self) -> dict[str, Any]:
        return {"balance": self.balance, "currency": self.currency, "items": self.items,
                "amount": str(self.amount), "fee": str(self.fee) if self.fees_known else None,
                "estimated_fee": str(self.estimated) if self.samples else None,
                "fee_samples": self.samples, "fee_margin": str(MARGIN) if self.samples else None,
                "needed": str(self.needed), "available": str(self.available),
                "short": self.short}


def draws_funds(p: PlannedItem, flow: Flow[Any, Any]) -> bool:
    """True when paying the item still takes money from a balance: it is to pay, and its
    money-moving call has not been made (nor may have been)."""
    record = p.record
    if not p.pays or p.price is None:
        return False
    if p.action in (PlanAction.NEW, PlanAction.RETRY) or record is None:
        return True
    return record.step not in (Step.CONFIRMED, Step.FINAL) and record.intent != flow.commit_call


def needs(flow: Flow[Any, Any], items: list[PlannedItem]) -> list[Need]:
    """What the items to pay draw on each balance, against what it holds (read now)."""
    found: dict[str, Need] = {}
    for p in items:
        draw(flow, p, found)
    return available(flow, found)


def draw(flow: Flow[Any, Any], p: PlannedItem, found: dict[str, Need]) -> None:
    """Add what ``p`` draws (when it draws funds) to the balance it draws on."""
    if not draws_funds(p, flow) or p.valid is None or p.price is None:
        return
    p.balance = flow.draws(p.valid.item)
    if p.balance is None:
        return
    need = found.setdefault(p.balance, Need(p.balance, p.price.currency))
    need.items += 1
    need.amount += p.price.amount
    if p.price.fee is None:
        need.fees_known = False
        corridor = p.price.rate_name or p.price.currency
        need.corridors.setdefault(corridor, Corridor()).add(p.price.amount, p.valid)
    else:
        need.fee += p.price.fee


def available(flow: Flow[Any, Any], found: dict[str, Need]) -> list[Need]:
    if found:
        usable = flow.usable(list(found))
        for need in found.values():
            need.available = usable.get(need.balance, Decimal(0))
    return [found[k] for k in sorted(found)]


def estimate_fees(needs: list[Need], quote: Quote | None) -> int:
    """The fees not quoted of each balance they could make short (``fees.could_matter``),
    estimated from the provider's quotations (``runner.engine.fees``); how many
    quotations were sent."""
    sent = 0
    namespace = stamp()
    for need in needs:
        if quote is None or not need.corridors or \
                not could_matter(need.available, need.needed, need.unquoted):
            continue
        found = sample(need.corridors, quote, namespace)
        need.estimated, need.samples, need.unestimated = found.fees, found.samples, \
            found.unestimated
        sent += found.samples
    return sent


def estimate(p: PlannedItem, flow: Flow[Any, Any]) -> Decimal | None:
    """What paying ``p`` is estimated to take from its balance (None: nothing of ours)."""
    if p.balance is None or p.price is None or not draws_funds(p, flow):
        return None
    return p.price.amount + (p.price.fee or 0)
