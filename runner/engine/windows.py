"""The run's items in windows (``runner.engine.batch``): each window is prepared (quoted,
created), its cost checked against the balances, and confirmed before the next window is
quoted, so that no quotation waits for the whole batch to be prepared and expires on the way.

``Windows`` sizes the windows from what the run measures: how long a window took from its
first quotation to its last confirm, and how long the provider's quotations live (their own
``expiration_date``, as ``expires_at`` keeps it). A window is sized so that its first
quotation is confirmed within half of its life; a kind without expiring quotations works in
windows of ``LARGEST`` (``SHARED_PER_WORKER`` per worker when several processes share the
job). The first window is small (``FIRST_PER_WORKER`` per worker, at least ``FIRST_LEAST``)
and each next one at most ``GROWTH`` times the last.

The funds check keeps its promise window by window: before a window is confirmed, the
quoted cost of its items plus what the items of the later windows are estimated to cost
(the plan's prices, from the rates or the state's quotations: the job's outstanding cost,
kept per balance in the state for every worker, ``StateStore.reduce_outstanding``) must
fit in what the balances hold now (what earlier windows confirmed is already taken from
them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from runner.engine.flow import Entry, Flow

LARGEST = 2000  # items in a window at most
FIRST_PER_WORKER = 8
FIRST_LEAST = 64  # a small batch goes in one window
GROWTH = 4
SHARED_PER_WORKER = 128  # items in a window at most, per worker, when processes share a job
SAFETY = 0.5  # of a quotation's life, at most, from its window's start to its confirm


def expiry(text: str | None) -> float | None:
    """An ``expires_at`` (ISO 8601, UTC when no zone is given) as a timestamp; None when
    there is none or it cannot be read."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


class Windows:
    """Sizes the windows the run takes from the state (``runner.engine.pages``), each from
    the one before."""

    def __init__(self, workers: int, clock: Callable[[], float], shared: bool = False) -> None:
        self.clock = clock
        self.workers = workers
        # Several processes share the job: a window is a claim the others cannot take, so
        # it is bounded; near the end of what is due the state hands out smaller windows (a
        # share of what is left: ``StateStore.claim``), so that no worker is left with the
        # batch's tail alone.
        self.largest = min(LARGEST, max(workers * SHARED_PER_WORKER, FIRST_LEAST)) \
            if shared else LARGEST
        self.size = min(self.largest, max(workers * FIRST_PER_WORKER, FIRST_LEAST))
        self.sizes: list[int] = []

    def start(self, window: Sequence[Entry[Any]]) -> float:
        """A window taken: when it started."""
        self.sizes.append(len(window))
        return self.clock()

    def end(self, window: Sequence[Entry[Any]], started: float) -> None:
        self.size = self.next_size(window, started)

    def next_size(self, window: Sequence[Entry[Any]], started: float) -> int:
        """The next window's size: what fits in SAFETY of the shortest quotation life seen,
        at the rate this window went."""
        grown = min(self.largest, len(window) * GROWTH)
        lives = [t - started for t in (expiry(e.record.expires_at) for e in window)
                 if t is not None]
        elapsed = self.clock() - started
        if not lives or elapsed <= 0:
            return max(grown, self.size)
        fits = int(len(window) * SAFETY * max(min(lives), 0.0) / elapsed)
        return max(self.workers, min(grown, fits))


def shortfall(flow: Flow[Any, Any], ready: Sequence[Entry[Any]],
              outstanding: Mapping[str, Decimal]) -> str:
    """'' when the balances cover the quoted cost of ``ready`` plus the estimated cost of
    the windows still to come (``outstanding``, per balance), else what each one lacks."""
    needed = {k: v for k, v in outstanding.items() if v > 0}
    for e in ready:
        cost = flow.cost(e)
        if cost is not None:
            needed[cost[0]] = needed.get(cost[0], Decimal(0)) + cost[1]
    if not needed:
        return ""
    usable = flow.usable(list(needed))
    short = []
    for balance, amount in sorted(needed.items()):
        has = usable.get(balance, Decimal(0))
        if amount > has:
            short.append(f"{balance} {amount:,} needed, {has:,} available")
    return "; ".join(short)
