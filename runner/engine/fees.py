"""Fees not quoted yet, estimated for the funds check before the first POST
(``runner.engine.funds``), so that a balance that covers the amounts but not the fees stops
a run before anything is confirmed.

A payer publishes no fee table (the money transfer service's payer and rates say nothing of
fees): the provider's own quotations are its data. The items to pay whose fee is not known
are grouped by balance and corridor (the payer and currencies, as the item's published rate
names them: ``Price.rate_name``), each group keeping its count, the sum of its amounts and
its smallest and largest item. When a balance could be short because of fees (it does not
hold the amounts twice over: only a fee larger than the amount it goes with could make it
short otherwise), each of its groups is sampled with ``dryrun-fees-<stamp>-`` quotations
(never used, never confirmed; they expire): its smallest item and, when it differs, its
largest. The provider prices a fee as a fixed part plus a percentage of the amount, so the
straight line through the two sampled fees gives every item's fee between them (one sample:
all items are the same amount, or the fee is taken as growing with the amount no faster
than in proportion, an upper bound). ``MARGIN`` is added to each group's estimate, and a
cent per item for the rounding of each fee. A group whose samples the provider refuses (an
inactive payer) is left unestimated and said so: its items will be refused too. A provider
that cannot answer them (unreachable, "later" or in doubt after every retry, the
configuration refused) stops the plan, or the run, before anything is paid (75, 78:
``runner.errors.down``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from runner.errors import ProviderError, stop_if_down
from runner.job import ValidItem
from runner.kinds import Price
from runner.validation import dry_run_stamp

STOPPED = "the fee estimates stopped before anything was paid"
MARGIN = Decimal("0.02")  # on top of the fees estimated, with a cent per item
CENT = Decimal("0.01")
# A kind's dryrun quotation of one item, asked as the run's policy retries its calls.
Quote = Callable[[ValidItem, str], Price]


@dataclass
class Corridor:
    """The items of one balance and corridor whose fee is not quoted."""

    items: int = 0
    total: Decimal = Decimal(0)
    low: tuple[Decimal, ValidItem] | None = None
    high: tuple[Decimal, ValidItem] | None = None

    def add(self, amount: Decimal, valid: ValidItem) -> None:
        self.items += 1
        self.total += amount
        if self.low is None or amount < self.low[0]:
            self.low = (amount, valid)
        if self.high is None or amount > self.high[0]:
            self.high = (amount, valid)


@dataclass
class Estimate:
    """What sampling a balance's corridors came to: the fees estimated (margin included),
    the quotations sent, and the items whose fee could not be estimated, with why."""

    fees: Decimal = Decimal(0)
    samples: int = 0
    unestimated: int = 0
    why: str = ""


def stamp() -> str:
    """The namespace of one plan's fee samples: ``fees-<UTC time to the microsecond>``."""
    return f"fees-{dry_run_stamp()}"


def could_matter(available: Decimal, needed: Decimal, unquoted: Decimal) -> bool:
    """True when fees not quoted could make a balance short: it covers what is known
    (``needed``: amounts and quoted fees), but not those amounts whose fee is unknown twice
    over."""
    return needed <= available < needed + unquoted


def sample(corridors: dict[str, Corridor], quote: Quote, namespace: str) -> Estimate:
    """Sample each corridor (see the module's docstring); the fees its items will cost."""
    found = Estimate()
    for corridor in corridors.values():
        assert corridor.low is not None and corridor.high is not None
        points: list[tuple[Decimal, Decimal]] = []
        ends = [corridor.low] + ([corridor.high] if corridor.high[0] != corridor.low[0] else [])
        for _, valid in ends:
            found.samples += 1
            try:
                price = quote(valid, namespace)
            except ProviderError as exc:
                stop_if_down(exc, STOPPED, read=True)  # the provider's state, not the sample's
                found.why = f"{exc.code} {exc.message}"
                continue
            points.append((price.amount, price.fee or Decimal(0)))
        fees = _fees(corridor, sorted(points))
        if fees is None:
            found.unestimated += corridor.items
            continue
        margin = fees * MARGIN + CENT * corridor.items
        found.fees += (fees + margin).quantize(CENT, rounding=ROUND_CEILING)
    return found


def _fees(corridor: Corridor, points: list[tuple[Decimal, Decimal]]) -> Decimal | None:
    """The corridor's fees from its sampled (amount, fee) points, before the margin."""
    if not points:
        return None
    (a1, f1), (a2, f2) = points[0], points[-1]
    n, total = corridor.items, corridor.total
    if a2 > a1:
        slope = (f2 - f1) / (a2 - a1)
        if slope < 0:  # a fee that falls as the amount grows: the larger one for all
            return n * max(f1, f2)
        return n * f1 + slope * (total - n * a1)
    assert corridor.high is not None
    # One point: a fee growing no faster than the amount (a fixed part and a percentage).
    return n * f1 * max(Decimal(1), corridor.high[0] / a1) if a1 > 0 else n * f1
