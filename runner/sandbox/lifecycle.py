"""Status changes after confirm, on the sandbox clock, and the money they move.

Confirming a transaction reserves its cost (sent amount + fee) against the balance of the
source currency: ``available_balance = balance - pending``, and a confirm that would take
the available balance below minus the credit facility is refused (1007005). A completed
transaction settles (balance and pending both drop by the cost); a rejected or declined one
releases the reservation; a reversal gives the money back. A completed merchant payment
credits the merchant balance with the collection less the fee.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from runner.sandbox.callbacks import CallbackQueue
from runner.sandbox.clock import SandboxClock
from runner.sandbox.config import SandboxConfig
from runner.sandbox.errors import ApiError
from runner.sandbox.statuses import Plan, is_final, status_fields
from runner.sandbox.store import Store


class Lifecycle:
    def __init__(self, store: Store, clock: SandboxClock, config: SandboxConfig,
                 callbacks: CallbackQueue) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.callbacks = callbacks
        # Tables whose status changes another module applies (payment_orders.py registers
        # the collection service's payment orders); their plans name SandboxConfig fields.
        self.appliers: dict[str, Callable[[int, str], None]] = {}

    def _delay(self, name: str) -> float:
        if name not in ("submit", "complete"):
            return float(getattr(self.config, name))  # a plan naming a SandboxConfig field
        return self.config.submit_delay if name == "submit" else self.config.complete_delay

    # ------------------------------------------------------------ balances
    def available(self, currency: str) -> Decimal:
        b = self.store.balances[currency]
        return Decimal(b["balance"]) - Decimal(b["pending"])

    def balance_view(self, currency: str) -> dict[str, Any]:
        b = self.store.balances[currency]
        return {"id": b["id"], "currency": currency, "balance": b["balance"],
                "available_balance": self.available(currency),
                "credit_facility": b["credit_facility"]}

    def reserve(self, currency: str, cost: Decimal) -> None:
        b = self.store.balances.get(currency)
        if b is None:
            raise ApiError("1005001", f"no {currency} account")
        if cost > self.available(currency) + Decimal(b["credit_facility"]):
            raise ApiError("1007005")
        b["pending"] = Decimal(b["pending"]) + cost
        self.store.save_balance(currency)

    def _move(self, currency: str, balance: Decimal, pending: Decimal) -> None:
        b = self.store.balances[currency]
        b["balance"] = Decimal(b["balance"]) + balance
        b["pending"] = Decimal(b["pending"]) + pending
        self.store.save_balance(currency)

    # ------------------------------------------------------------ lifecycle
    def start(self, table: str, rid: int, status: str, plan: Plan) -> None:
        """Put a just-confirmed item on its plan; ``status`` is its confirmed status."""
        meta = self.store.meta[table][rid]
        meta["plan"] = plan
        meta["step"] = 0
        self._schedule_next(table, rid, self.clock.now())
        self.set_status(table, rid, status)

    def _schedule_next(self, table: str, rid: int, base: float) -> None:
        meta = self.store.meta[table][rid]
        if meta["step"] < len(meta["plan"]):
            meta["due"] = base + self._delay(meta["plan"][meta["step"]][0])
            self.store.schedule_at(meta["due"], table, rid)
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
        if table in self.appliers:
            self.appliers[table](rid, status)
            return
        obj = self.store.tables[table][rid]
        meta = self.store.meta[table][rid]
        obj.update(status_fields(status))
        if table == "transactions" and meta.get("reserved"):
            self._settle_transaction(meta, status)
        elif table == "payments":
            self._settle_payment(meta, status)
        self.store.save(table, rid)
        if obj.get("callback_url"):
            self.callbacks.enqueue(obj["callback_url"], dict(obj))

    def _settle_transaction(self, meta: dict[str, Any], status: str) -> None:
        cost, currency = Decimal(meta["cost"]), meta["currency"]
        klass = status[0]
        if klass == "7" and not meta.get("settled"):
            self._move(currency, -cost, -cost)
            meta["settled"] = True
        elif klass == "8" and meta.get("settled"):
            self._move(currency, cost, Decimal(0))
            meta["reserved"] = False
        elif is_final(status) and not meta.get("settled"):
            self._move(currency, Decimal(0), -cost)
            meta["reserved"] = False

    def _settle_payment(self, meta: dict[str, Any], status: str) -> None:
        net, currency = Decimal(meta["net"]), meta["currency"]
        b = self.store.merchant_balances[currency]
        if status[0] == "7" and not meta.get("settled"):
            b["balance"] = Decimal(b["balance"]) + net
            meta["settled"] = True
        elif status[0] == "8" and meta.get("settled"):
            b["balance"] = Decimal(b["balance"]) - net
            meta["settled"] = False
        else:
            return
        self.store.save_balance(currency, merchant=True)
