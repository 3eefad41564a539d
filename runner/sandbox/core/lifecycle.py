"""Status changes on the sandbox clock, for every service.

A confirmed item (a transaction, a payment, a payment order, a transfer or payout request) is
put on a plan: a list of (delay, status) steps. ``advance`` applies the steps that are due,
in order, by handing each to the applier its service registered for its table: the service
decides what a status means (money moved, a callback or a ping sent). A delay names a
SandboxConfig knob: ``submit`` and ``complete`` stand for ``submit_delay`` and
``complete_delay``, any other name is the knob's own (``validation_delay``), read when the
step is scheduled so that ``PATCH /_admin/timing`` applies to the next steps.
"""

from __future__ import annotations

from collections.abc import Callable

from runner.sandbox.core.clock import SandboxClock
from runner.sandbox.core.config import SandboxConfig
from runner.sandbox.core.statuses import Plan
from runner.sandbox.core.store import Store

Applier = Callable[[int, str], None]  # (internal number, status) -> None


class Lifecycle:
    def __init__(self, store: Store, clock: SandboxClock, config: SandboxConfig) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        # Table -> what applies a status to one of its records (each service registers its own).
        self.appliers: dict[str, Applier] = {}

    def _delay(self, name: str) -> float:
        if name not in ("submit", "complete"):
            return float(getattr(self.config, name))  # a plan naming a SandboxConfig field
        return self.config.submit_delay if name == "submit" else self.config.complete_delay

    def start(self, table: str, rid: int, status: str, plan: Plan) -> None:
        """Put a just-confirmed item on its plan; ``status`` is its confirmed status."""
        meta = self.store.meta[table][rid]
        meta["plan"] = plan
        meta["step"] = 0
        self._schedule_next(table, rid, self.clock.now())
        self.set_status(table, rid, status)

    def schedule(self, table: str, rid: int, due: float) -> None:
        """The item's next step is due at ``due`` (its plan and step are in its meta)."""
        self.store.meta[table][rid]["due"] = due
        self.store.schedule_at(due, table, rid)

    def _schedule_next(self, table: str, rid: int, base: float) -> None:
        meta = self.store.meta[table][rid]
        if meta["step"] < len(meta["plan"]):
            self.schedule(table, rid, base + self._delay(meta["plan"][meta["step"]][0]))
        else:
            meta["due"] = None

    def advance(self) -> int:
        """Apply every status change that is due; returns how many were applied."""
        applied = 0
        now = self.clock.now()
        with self.store.lock:
            while (due := self.store.pop_due(now)) is not None:
                when, table, rid = due
                meta = self.store.meta[table][rid]
                if meta.get("due") != when:
                    continue  # superseded entry
                _, status = meta["plan"][meta["step"]]
                meta["step"] += 1
                self._schedule_next(table, rid, meta["due"])
                self.set_status(table, rid, status)
                applied += 1
        return applied

    def set_status(self, table: str, rid: int, status: str) -> None:
        self.appliers[table](rid, status)
