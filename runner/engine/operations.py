"""Charges, refunds and cancellations on existing payment orders (spec/collection-service.md),
one class for the three: ``OperationFlow`` with the operation's name.

Steps: new (prepare reads the order: it exists, its id is recorded in ``provider_ref``, what
remains allows the amount; nothing is sent) -> final (settled, failed, or ``unknown``), or
confirmed while an answer other than DONE is followed. The commit, under a lock per order,
reads the order the row names again and re-checks what remains
(``runner.validation.collection.remaining``, with the operations this state database
records, in every job) just before sending, so two items on one order never race.

Exactly once (DESIGN.md rule 5): the service offers no lookup of an operation by its
external id, so the operation is sent with ``post_once``: a 503 or a refused connection
(nothing sent) is retried; once in doubt (lost answer, timeout, 5xx, 2001401) it is never
sent again: the item becomes ``unknown``, is listed for a person, and the run exits 1. A run
killed while an operation was in flight leaves its intent: the next run makes that item
``unknown`` without sending anything. The operation carries the item's external id, which the
service refuses to see twice (2001201): even a lost state database cannot make a re-run
charge twice; that refusal also makes the item ``unknown`` (the operation exists, how much it
took is for a person to see). An answer with status DONE settles the item; any other status
is followed with ``GET charges/{id}`` (charges, cancellations) or ``GET refunds/{id}``.

In the state, ``provider_ref`` is the order's id and ``transaction_id`` the operation's; the
requested amount (the order's currency) is the destination of a charge (what the merchant
gets) and the source of a refund or a cancellation (what goes back to the buyer), the buyer's
``processed`` amount the other side.
"""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

from runner.engine.flow import Entry, Flow
from runner.errors import ProviderError
from runner.job.collection import OperationItem
from runner.provider.collection import CollectionClient, order_ref, reused_external_id
from runner.provider.retry import RetryPolicy
from runner.state import StateStore
from runner.validation.collection import (
    NOUNS,
    REQUESTED_SIDE,
    SentOperations,
    know_sent,
    remaining,
)

FAILED = {"FAILED", "REFUSED", "ERROR", "CANCELLED", "REJECTED"}


def _job_of(state: StateStore, run_id: int) -> str:
    with state.lock:
        row = state.db.execute("SELECT job_name FROM runs WHERE id = ?", [run_id]).fetchone()
    return str(row[0]) if row else ""


class OperationFlow(Flow):
    operation = ""  # charge | refund | cancel: the kind, the step, the path
    client: CollectionClient

    def __init__(self, client: Any, state: StateStore, run_id: int, policy: RetryPolicy,
                 *args: Any, **kwargs: Any) -> None:
        super().__init__(client, state, run_id, policy, *args, **kwargs)
        self.job_name = _job_of(state, run_id)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        # Validation (which runs next) must know what earlier runs of this job have sent.
        know_sent(client, SentOperations.from_state(state, self.job_name))

    def summary_of(self, item: OperationItem) -> dict[str, Any]:
        order = item.payment_order_id or f"ext {item.payment_order_external_id}"
        return {"beneficiary": f"payment order {order}", "identifier": {}}

    def needs_prepare(self, entry: Entry) -> bool:
        # One in doubt is the look-up phase's: it must not be checked (it may have been made).
        return entry.record["step"] == "new" and not entry.record.get("intent")

    def ready(self, entry: Entry) -> bool:
        return entry.record["step"] == "new" and bool(entry.record.get("provider_ref"))

    def planned(self, entry: Entry) -> tuple[str, Decimal] | None:
        return entry.item.requested.currency, entry.item.requested.amount

    # ------------------------------------------------------------ steps
    def _order(self, entry: Entry) -> dict[str, Any] | None:
        """The order the item names (never an id recorded earlier: the row may have
        changed since); None, and the item failed, when the provider has none."""
        item = entry.item
        ref = order_ref(item.payment_order_id, item.payment_order_external_id)
        order: dict[str, Any] | None = self.read(lambda: self.client.find_payment_order(ref))
        if order is None:
            given = item.payment_order_id or item.payment_order_external_id
            self.update(entry, outcome="failed", provider_ref=None, error_code="1000404",
                        error_message=f"no payment order {given!r} at the provider")
        return order

    def _refused(self, entry: Entry, order: dict[str, Any]) -> bool:
        """Check the amount against what remains now; True (and the item failed, nothing
        sent) when it does not fit."""
        money = entry.item.requested
        currency = order["requested"]["currency"]
        why: str | None
        if money.currency != currency:
            code, why = "currency", (f"payment order {order['id']} is in {currency}, not "
                                     f"{money.currency}")
        else:
            sent = SentOperations.from_state(self.state, self.job_name, order["id"])
            left, status_why = remaining(self.operation, order, sent.sums(
                order["id"], exclude=entry.external_id))
            code, why = "status", status_why
            if why is None and money.amount > left:
                pool = "refund" if self.operation == "refund" else "charge or cancel"
                code, why = "remaining", (
                    f"{NOUNS[self.operation]} of {money.amount} {currency} exceeds what "
                    f"remains to {pool} on payment order {order['id']}: {left} {currency}")
        if why is None:
            return False
        self.update(entry, outcome="failed", error_code=code, error_message=why,
                    provider_ref=None, status=order["status"])
        return True

    def prepare(self, entry: Entry) -> None:
        """Find the order, record its id, check what remains (nothing is sent). The step
        stays ``new`` until the operation is sent."""
        order = self._order(entry)
        if order is None or self._refused(entry, order):
            return
        side = REQUESTED_SIDE[self.operation]
        self.update(entry, provider_ref=order["id"], outcome="pending", error_code=None,
                    error_message=None, status=order["status"],
                    **{f"{side}_currency": entry.item.requested.currency,
                       f"{side}_amount": str(entry.item.requested.amount)})

    def _lock(self, order_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(order_id, threading.Lock())

    def commit(self, entry: Entry) -> None:
        """Under the order's lock: read the order again, re-check what remains, and send
        the operation once."""
        while entry.record.get("provider_ref"):
            key = str(entry.record["provider_ref"])
            with self._lock(key):
                order = self._order(entry)
                if order is None or self._refused(entry, order):
                    return
                if order["id"] != key:  # the row names another order since it was checked
                    self.update(entry, provider_ref=order["id"])
                    continue
                self._send(entry, order)
                return

    def _send(self, entry: Entry, order: dict[str, Any]) -> None:
        item = entry.item
        body: dict[str, Any] = {"requested": item.requested.model_dump(),
                                "external_id": entry.external_id}
        if item.custom_data is not None:
            body["custom_data"] = item.custom_data
        try:
            answer = self.post_once(entry, self.operation, body,
                                    lambda: self.client.operate(self.operation, order["id"],
                                                                body))
        except ProviderError as exc:
            if reused_external_id(exc):
                self.update(entry, outcome="unknown", step="final", error_code=exc.code,
                            error_message=f"the provider already holds an operation with "
                                          f"external_id {entry.external_id} (made by an "
                                          f"earlier run whose state was lost?); check it at "
                                          f"the provider: it is not sent again")
            else:
                self._fail(entry, exc)
            return
        if answer is None:  # in doubt: unknown for a person, and nothing more for runner
            self.update(entry, step="final")
        else:
            self._status(entry, answer)

    def _status(self, entry: Entry, operation: dict[str, Any]) -> None:
        status = str(operation.get("status") or "")
        side = REQUESTED_SIDE[self.operation]
        other = "source" if side == "destination" else "destination"
        values: dict[str, Any] = {"transaction_id": operation["id"], "status": status,
                                  "step": "confirmed", "intent": None}
        processed = operation.get("processed")
        if processed:
            values.update({f"{other}_currency": processed["currency"],
                           f"{other}_amount": str(processed["amount"])})
        if status == "DONE":
            values.update(step="final", outcome="settled", error_code=None, error_message=None)
        elif status.upper() in FAILED:
            values.update(step="final", outcome="failed", error_code=status,
                          error_message=f"{self.operation} {operation['id']} ended {status}")
        else:
            values.update(outcome="pending", status_message=f"{status}: not final yet")
        self.update(entry, **values)

    def settle_doubt(self, entry: Entry) -> None:
        """Rule 5: an operation sent by an earlier run whose answer was lost has no lookup:
        it becomes ``unknown`` for a person, and is never sent again."""
        if entry.record.get("intent") == self.operation:
            self.update(entry, outcome="unknown", intent=None, step="final",
                        error_message=f"the {self.operation} was sent and its answer lost; "
                                      f"check it at the provider before anything else")

    def poll(self, entry: Entry) -> bool:
        fetch = self.client.refund_operation if self.operation == "refund" else \
            self.client.charge_operation
        operation = self.read(lambda: fetch(entry.record["transaction_id"]))
        self._status(entry, operation)
        return entry.record["step"] == "final"


class ChargeFlow(OperationFlow):
    kind = operation = commit_step = "charge"


class RefundFlow(OperationFlow):
    kind = operation = commit_step = "refund"


class CancelFlow(OperationFlow):
    kind = operation = commit_step = "cancel"
