"""One payment order of the collection service, exactly once: (quotation ->) payment order ->
final status (docs/kinds.md, "payment_order").

The order is created directly, or, when the item has a ``quotation`` (the payment page
converts currency), from a quotation addressed by its external id
(``POST quotations/ext-{ref}/payment-orders``). The quotation's external id is the item's
(``-r2``, ``-r3`` ... once the provider has refused the order because the quotation expired:
the order was then not created); the order's is always the item's own.

- The quotation moves no money and the service has no GET for it: a quotation in doubt is
  asked again with the same external id, which either creates it or is refused as reused
  (2001201 "External ID has already been used"), proving it exists: adopted as it stands.
- The order is the commit: ``post`` commits the intent first; in doubt (lost answer,
  timeout, 5xx, 2001401) it is looked up with ``GET payment-orders/ext-{external_id}``, and
  only a clear 404 lets the same POST go again; a reused external id (2001201) is looked up
  too, adopted when it is this item (merchant, page, mode, amounts, card's last four
  digits), a conflict when not.
- A refused card (2001301) leaves an order that exists, Refused: the item fails with the
  provider's code and message, and the order is recorded.

Statuses. Final and settled: Authorized (cards and buy-now-pay-later: charging is an
operation of its own, the ``charge`` kind), Charged (self-settling pages), Refunded. Final and
failed: Refused, Error, Aborted, Cancelled. Pending: Created (a REDIRECT order awaiting the
buyer at its ``payment_url``, kept in the item's ``details`` for the summary),
Payment_In_Progress, Authorizing; an item still pending at the end of ``wait_for_final``
stays pending, and the next run follows it.

In the state, the buyer's amount (``processed``) stands in the source columns and the
merchant's (``requested``) in the destination ones: reports read "buyers sent, the merchant
received". A collection draws on no balance of ours: there is no pre-flight.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

from runner import lifecycle
from runner.cards import mask
from runner.engine.flow import Entry, Flow
from runner.errors import (
    BusinessRefusal,
    DuplicateExternalId,
    ItemConflict,
    ItemInDoubt,
    ProviderError,
    QuotationExpired,
)
from runner.job.collection import PaymentOrderItem
from runner.lifecycle import Call, Reason, Step
from runner.money import shown
from runner.provider.collection import CollectionClient
from runner.provider.http import ext
from runner.provider.retry import Decision, decide
from runner.state import ItemChanges, ItemRecord

SETTLED = {"Authorized", "Charged", "Refunded"}
FAILED = {"Refused", "Error", "Aborted", "Cancelled"}
WAITING = {"Created", "Payment_In_Progress", "Authorizing"}  # the documents' others
# What the quotation-based create takes from the item: the rest is the quotation's.
NOT_FROM_QUOTATION = {"requested", "merchant_id", "merchant_external_id", "payment_page_id",
                      "quotation"}
SECRET_FIELDS = ("card_number", "card_cvv", "otp", "token_id")


def redacted(body: dict[str, Any]) -> dict[str, Any]:
    """The request as the state records it: no card number, CVV, one-time password or token."""
    info = body.get("payment_information")
    if not info:
        return body
    hidden = {k: (mask(str(v)) if k == "card_number" else "***")
              for k, v in info.items() if k in SECRET_FIELDS and v is not None}
    return {**body, "payment_information": {**info, **hidden}}


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and Decimal(str(a)) == Decimal(str(b))




class PaymentOrderFlow(Flow[PaymentOrderItem, CollectionClient]):
    commit_call = Call.PAYMENT_ORDER

    def summary_of(self, item: PaymentOrderItem) -> dict[str, Any]:
        info = item.payment_information
        customer = item.merchant_order.customer if item.merchant_order else None
        names = [customer.first_name, customer.last_name] if customer else []
        buyer = " ".join(n for n in names if n) or (
            info and (info.card_holder_name or info.account_holder_name)) or ""
        ident = {k: mask(v) for k, v in (info.model_dump(
            include={"card_number", "msisdn", "bank_account_number"}, exclude_none=True)
            if info else {}).items()}
        return {"beneficiary": buyer, "identifier": ident,
                "payment_page_id": item.payment_page_id}

    def fingerprinted(self, item: PaymentOrderItem) -> PaymentOrderItem:
        # The fingerprint is a hash kept in the state: it must not be one of card data.
        info = item.payment_information
        if info is None:
            return item
        card = info.card_number
        kept = info.model_copy(update={
            "card_number": card.replace(" ", "")[-4:] if card else None,
            "card_cvv": None, "otp": None, "token_id": None})
        return item.model_copy(update={"payment_information": kept})

    def needs_prepare(self, entry: Entry[PaymentOrderItem]) -> bool:
        return entry.item.quotation is not None and entry.record.step == Step.NEW

    def ready(self, entry: Entry[PaymentOrderItem]) -> bool:
        step = entry.record.step
        return step == Step.QUOTED or (step == Step.NEW and entry.item.quotation is None)

    def commit(self, entry: Entry[PaymentOrderItem]) -> None:
        self.create(entry)

    # ------------------------------------------------------------ quotation
    def prepare(self, entry: Entry[PaymentOrderItem]) -> None:
        self._quote(entry)

    def _quote(self, entry: Entry[PaymentOrderItem]) -> bool:
        """Ask the quotation (safe to ask again: its external id cannot be used twice)."""
        item = entry.item
        conversion = item.quotation
        assert conversion is not None
        requested: dict[str, Any] = {"currency": item.requested.currency}
        processed: dict[str, Any] = {"currency": conversion.processed.currency}
        if conversion.quotation_mode == "REQUESTED_AMOUNT":
            requested["amount"] = item.requested.amount
        else:
            processed["amount"] = conversion.processed.amount
        body = {"external_id": entry.ref, "merchant_id": item.merchant_id,
                "payment_page_id": item.payment_page_id, "requested": requested,
                "processed": processed, "quotation_mode": conversion.quotation_mode}
        quotation: dict[str, Any] | None = None
        self.close(entry)
        for _ in range(self.policy.attempts):
            intent = lifecycle.send(entry.record, Call.QUOTATION)
            attempt = self.state.begin_attempt(self.run_id, entry.external_id,
                                               Call.QUOTATION, body)
            entry.record.apply(intent)
            try:
                quotation = self.policy.call(lambda: self.client.create_quotation(body),
                                             idempotent=False)
            except DuplicateExternalId as exc:  # it exists: asked before, its answer lost
                self._end(attempt, entry, "error", exc)
                break
            except ProviderError as exc:
                if decide(exc, idempotent=False) is Decision.LOOKUP:
                    self._end(attempt, entry, "in_doubt", exc, resolved=False)
                    continue  # asking again, same external_id, is the lookup
                self._end(attempt, entry, "error", exc)
                self._fail(entry, exc)
                return False
            self.state.end_attempt(attempt, entry.external_id, "ok", http_status=201)
            entry.record.intent = None
            break
        else:
            raise ItemInDoubt(f"quotation: no answer after {self.policy.attempts} tries")
        facts: ItemChanges = {"provider_ref": entry.external_id, "quotation_id": None,
                              "expires_at": None}
        if quotation is not None:
            facts.update(self._amounts(quotation))
            facts.update({"quotation_id": quotation["id"],
                          "expires_at": quotation["expiration_date"]})
        self.move(entry, lifecycle.answered(entry.record, Step.QUOTED), **facts)
        return True

    def _expired(self, entry: Entry[PaymentOrderItem]) -> bool:
        expires = entry.record.expires_at
        return expires is not None and time.strftime(
            "%Y-%m-%dT%H:%M:%S", time.gmtime(self.clock())) > expires

    def _next_attempt(self, entry: Entry[PaymentOrderItem]) -> None:
        self.move(entry, lifecycle.expired(entry.record), quotation_id=None, expires_at=None)

    # ------------------------------------------------------------ the order
    def create(self, entry: Entry[PaymentOrderItem]) -> None:
        """Create the order (quoting first, again after an expiry, when the item says so)."""
        while entry.record.step in (Step.NEW, Step.QUOTED):
            if entry.record.step == Step.NEW and entry.item.quotation is not None:
                if not self._quote(entry):
                    return
            elif not self._create_once(entry):
                return

    def _create_once(self, entry: Entry[PaymentOrderItem]) -> bool:
        """One creation; True when a new quotation attempt (-rN) was started."""
        item, external_id = entry.item, entry.external_id

        def lookup() -> Any | None:
            return self.client.find_payment_order_by_external_id(external_id)

        found = None
        if entry.record.intent == self.commit_call:
            found = self.read(lookup)
        elif item.quotation is not None and self._expired(entry):
            self._next_attempt(entry)  # no order was asked from this quotation
            return True
        if item.quotation is None:
            body = {"external_id": external_id,
                    **item.model_dump(exclude={"quotation"}, exclude_none=True)}

            def send() -> Any:
                return self.client.create_payment_order(body)
        else:
            body = {"external_id": external_id,
                    **item.model_dump(exclude=NOT_FROM_QUOTATION, exclude_none=True)}
            quotation = ext(entry.ref)

            def send() -> Any:
                return self.client.create_payment_order_from_quotation(quotation, body)
        try:
            order = found or self._post(entry, self.commit_call, redacted(body), send, lookup)
        except BusinessRefusal as exc:
            if item.quotation is not None and isinstance(exc, QuotationExpired):
                self._next_attempt(entry)  # proved not created: a new quotation may be asked
                return True
            refused = self.read(lookup) if exc.code == "2001301" else None
            if refused is None:
                self._fail(entry, exc)
            else:  # refused, yet the order exists (Refused): recorded, and final
                self._check(entry, refused)
                self._status(entry, refused, code=exc.code, message=exc.message)
            return False
        except ProviderError as exc:
            self._fail(entry, exc)
            return False
        self._check(entry, order)
        self._status(entry, order)
        return False

    def _check(self, entry: Entry[PaymentOrderItem], order: dict[str, Any]) -> None:
        """Adopt what the provider holds only when it is this item; else a conflict."""
        if not self._matches(entry.item, entry.external_id, order):
            self.move(entry, lifecycle.conflict(
                entry.record, Reason.CONFLICT, f"payment order {entry.external_id} at the "
                                               f"provider ({order.get('id')}) does not match "
                                               f"this item"), transaction_id=order.get("id"))
            raise ItemConflict(entry.external_id)

    @staticmethod
    def _matches(item: PaymentOrderItem, external_id: str, order: dict[str, Any]) -> bool:
        same = (order.get("external_id") == external_id and order.get("type") == item.type
                and order.get("integration_mode") == item.integration_mode
                and order.get("payment_page_id") == item.payment_page_id)
        if item.merchant_id is not None:
            same = same and order.get("merchant_id") == item.merchant_id
        else:
            same = same and order.get("merchant_external_id") == item.merchant_external_id
        requested, processed = order.get("requested") or {}, order.get("processed") or {}
        conversion = item.quotation
        same = same and requested.get("currency") == item.requested.currency
        if conversion is None:
            same = same and order.get("quotation_id") is None
        else:
            same = same and order.get("quotation_id") is not None and \
                processed.get("currency") == conversion.processed.currency
        if conversion is None or conversion.quotation_mode == "REQUESTED_AMOUNT":
            same = same and _same(requested.get("amount"), item.requested.amount)
        else:
            same = same and _same(processed.get("amount"), conversion.processed.amount)
        info = item.payment_information
        methods = order.get("payment_methods") or []
        holder = str(methods[0].get("holder_id") or "") if methods else ""
        if info is not None and holder:
            if info.card_number:
                same = same and holder[-4:] == info.card_number.replace(" ", "")[-4:]
            elif info.msisdn:
                same = same and holder == info.msisdn
        return same

    @staticmethod
    def _amounts(resource: dict[str, Any]) -> ItemChanges:
        processed, requested = resource["processed"], resource["requested"]
        return {"source_currency": processed["currency"],
                "source_amount": Decimal(processed["amount"]),
                "destination_currency": requested["currency"],
                "destination_amount": Decimal(requested["amount"])}

    def _status(self, entry: Entry[PaymentOrderItem], order: dict[str, Any],
                code: str | None = None, message: str | None = None) -> None:
        status, record = order["status"], entry.record
        facts = self._amounts(order)
        facts.update({"transaction_id": order["id"], "provider_ref": entry.external_id,
                      "status": status, "status_message": None})
        if order.get("payment_url"):
            facts["details"] = json.dumps({"payment_url": order["payment_url"]})
        if status in SETTLED:
            changes = lifecycle.settled(record)
        elif status in FAILED:
            changes = lifecycle.failed(record, code or status, message or (
                f"payment order {order['id']} ended {status}"))
        elif status in WAITING:
            changes = lifecycle.confirmed(record)
            waiting = status == "Created" and order.get("integration_mode") == "REDIRECT"
            facts["status_message"] = "awaiting the buyer at the payment page (payment_url)" \
                if waiting else f"{status}: not final yet"
        else:  # no document names it: where the money is, a person tells; polling goes on
            changes = self.unknown_status(entry, f"payment order {order['id']}", shown(status))
        self.move(entry, changes, **facts)

    def settle_doubt(self, entry: Entry[PaymentOrderItem]) -> None:
        """A creation whose answer was lost: found -> adopted (or a conflict); clearly not
        found -> the doubt is over, the same POST may go again."""
        if entry.record.intent != self.commit_call:
            return
        order = self.read(lambda: self.client.find_payment_order_by_external_id(
            entry.external_id))
        if order is None:
            self.move(entry, lifecycle.not_found(entry.record))
            return
        self._check(entry, order)
        self._status(entry, order)

    def found(self, record: ItemRecord, ref: str | None = None) -> ItemChanges | None:
        # The order is always created under the item's own external id (-rN are quotations).
        order = self.read(lambda: self.client.find_payment_order_by_external_id(
            record.external_id))
        if order is None:
            return None
        return {**self._amounts(order), "transaction_id": order["id"],
                "status": order["status"]}

    def poll(self, entry: Entry[PaymentOrderItem]) -> bool:
        order = self.read(lambda: self.client.find_payment_order_by_external_id(
            entry.external_id))
        if order is not None:
            self._status(entry, order)
        return entry.record.step == Step.FINAL
