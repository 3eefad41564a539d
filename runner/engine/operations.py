"""Charges, refunds and cancellations on existing payment orders (docs/kinds.md),
one class for the three: ``OperationFlow`` with the operation's name.

Steps: new (prepare reads the order: it exists, its id is recorded in ``provider_ref``, what
remains allows the amount; nothing is sent) -> final (settled, failed, or ``unknown``), or
confirmed while an answer other than DONE is followed. The commit, under a lock per order,
reads the order the row names again and re-checks what remains
(``runner.validation.collection.remaining``, with the operations this state database
records, in every job) just before sending, so two items on one order never race.

Exactly once (rule 5 of docs/exactly-once.md): the service offers no lookup of an operation by its
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

from runner import lifecycle
from runner.engine.flow import Entry, Flow, Run
from runner.errors import NoLookup, ProviderError
from runner.job.collection import OperationItem
from runner.lifecycle import Call, Outcome, Step
from runner.money import shown
from runner.provider.collection import CollectionClient, reused_external_id
from runner.state import ItemChanges, ItemRecord
from runner.validation.collection import (
    NOUNS,
    REQUESTED_SIDE,
    SentOperations,
    remaining,
)

FAILED = {"FAILED", "REFUSED", "ERROR", "CANCELLED", "REJECTED"}


class OperationFlow(Flow[OperationItem, CollectionClient]):
    operation = ""  # charge | refund | cancel: the path, and the call (``commit_call``)

    def __init__(self, client: CollectionClient, run: Run) -> None:
        super().__init__(client, run)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def summary_of(self, item: OperationItem) -> dict[str, Any]:
        order = item.payment_order_id or f"ext {item.payment_order_external_id}"
        return {"beneficiary": f"payment order {order}", "identifier": {}}

    def needs_prepare(self, entry: Entry[OperationItem]) -> bool:
        # One in doubt is the look-up phase's: it must not be checked (it may have been made).
        return entry.record.step == Step.NEW and not entry.record.intent

    def ready(self, entry: Entry[OperationItem]) -> bool:
        return entry.record.step == Step.NEW and bool(entry.record.provider_ref)

    # ------------------------------------------------------------ steps
    def _order(self, entry: Entry[OperationItem]) -> dict[str, Any] | None:
        """The order the item names (never an id recorded earlier: the row may have
        changed since); None, and the item failed, when the provider has none."""
        item = entry.item
        order: dict[str, Any] | None = self.read(lambda: self.client.find_named_order(
            item.payment_order_id, item.payment_order_external_id))
        if order is None:
            given = item.payment_order_id or item.payment_order_external_id
            self.move(entry, lifecycle.refused(entry.record, "1000404",
                                               f"no payment order {given!r} at the provider"),
                      provider_ref=None)
        return order

    def _refused(self, entry: Entry[OperationItem], order: dict[str, Any]) -> bool:
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
        self.move(entry, lifecycle.refused(entry.record, code, why), provider_ref=None,
                  status=order["status"])
        return True

    def prepare(self, entry: Entry[OperationItem]) -> None:
        """Find the order, record its id, check what remains (nothing is sent). The step
        stays ``new`` until the operation is sent."""
        order = self._order(entry)
        if order is None or self._refused(entry, order):
            return
        facts = _amounts(REQUESTED_SIDE[self.operation], entry.item.requested.currency,
                         entry.item.requested.amount)
        facts.update({"provider_ref": order["id"], "status": order["status"]})
        self.move(entry, lifecycle.checked(entry.record), **facts)

    def _lock(self, order_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(order_id, threading.Lock())

    def commit(self, entry: Entry[OperationItem]) -> None:
        """Under the order's lock: read the order again, re-check what remains, and send
        the operation once."""
        while entry.record.provider_ref:
            key = entry.record.provider_ref
            with self._lock(key):
                order = self._order(entry)
                if order is None or self._refused(entry, order):
                    return
                if order["id"] != key:  # the row names another order since it was checked
                    self.update(entry, provider_ref=order["id"])
                    continue
                self._send(entry, order)
                return

    def _send(self, entry: Entry[OperationItem], order: dict[str, Any]) -> None:
        item = entry.item
        body: dict[str, Any] = {"requested": item.requested.model_dump(),
                                "external_id": entry.external_id}
        if item.custom_data is not None:
            body["custom_data"] = item.custom_data
        try:
            answer = self.post_once(entry, self.commit_call, body,
                                    lambda: self.client.operate(self.operation, order["id"],
                                                                body))
        except ProviderError as exc:
            if reused_external_id(exc):
                self.move(entry, lifecycle.unknown(
                    entry.record, exc.code, f"the provider already holds an operation with "
                                            f"external_id {entry.external_id} (made by an "
                                            f"earlier run whose state was lost?); check it at "
                                            f"the provider: it is not sent again"))
            else:
                self._fail(entry, exc)
            return
        if answer is not None:  # else in doubt: unknown for a person, nothing more for runner
            self._status(entry, answer)

    def _held(self, operation: dict[str, Any]) -> ItemChanges:
        """The operation's id, status and buyer-side amount, as state columns."""
        other = "source" if REQUESTED_SIDE[self.operation] == "destination" else "destination"
        processed = operation.get("processed")
        values = _amounts(other, processed["currency"], Decimal(processed["amount"])) \
            if processed else {}
        values.update({"transaction_id": operation["id"],
                       "status": str(operation.get("status") or "")})
        return values

    def _status(self, entry: Entry[OperationItem], operation: dict[str, Any]) -> None:
        facts = self._held(operation)
        status, record = facts.get("status") or "", entry.record
        if status == "DONE":
            changes = lifecycle.settled(record)
        elif status.upper() in FAILED:
            changes = lifecycle.failed(record, status,
                                       f"{self.operation} {operation['id']} ended {status}")
        else:  # the documents show DONE only: a person tells where the money is
            changes = self.unknown_status(entry, f"{self.operation} {operation['id']}",
                                          shown(status))
        self.move(entry, changes, **facts)

    def settle_doubt(self, entry: Entry[OperationItem]) -> None:
        """Rule 5: an operation sent by an earlier run whose answer was lost has no lookup:
        it becomes ``unknown`` for a person, and is never sent again."""
        if entry.record.intent == self.commit_call:
            self.move(entry, lifecycle.unknown(
                entry.record, None, f"the {self.operation} was sent and its answer lost; "
                                    f"check it at the provider before anything else"))

    def _fetch(self, operation_id: int | str) -> Any:
        fetch = self.client.refund_operation if self.operation == "refund" else \
            self.client.charge_operation
        return self.read(lambda: fetch(operation_id))

    def found(self, record: ItemRecord, ref: str | None = None) -> ItemChanges | None:
        """By the operation's id (the service has no lookup of one by its external id): an
        operation never sent holds nothing; one sent whose answer was lost cannot be read."""
        if record.transaction_id is not None:
            return self._held(self._fetch(record.transaction_id))
        if record.outcome == Outcome.UNKNOWN or record.intent:
            raise NoLookup(f"the {self.operation} has no id (its answer was lost) and the "
                           f"service no lookup by external_id: check payment order "
                           f"{record.provider_ref or '?'} at the provider by hand")
        return None

    def poll(self, entry: Entry[OperationItem]) -> bool:
        operation_id = entry.record.transaction_id
        assert operation_id is not None  # polled once confirmed: the answer gave its id
        operation = self._fetch(operation_id)
        self._status(entry, operation)
        return entry.record.step == Step.FINAL


def _amounts(side: str, currency: str, amount: Decimal) -> ItemChanges:
    """The state columns of one side of an operation (source or destination)."""
    if side == "source":
        return {"source_currency": currency, "source_amount": amount}
    return {"destination_currency": currency, "destination_amount": amount}


class ChargeFlow(OperationFlow):
    operation, commit_call = "charge", Call.CHARGE


class RefundFlow(OperationFlow):
    operation, commit_call = "refund", Call.REFUND


class CancelFlow(OperationFlow):
    operation, commit_call = "cancel", Call.CANCEL
