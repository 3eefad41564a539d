"""One merchant payment, exactly once: quotation -> payment -> confirm -> final status
(spec/merchant-payment-service.md, part A).

The flow mirrors ``runner.engine.remittance``: the quotation and the payment share the item's
external_id (``-r2``, ``-r3`` ... after an expiry, and only once the provider has said the
earlier payment can no longer be confirmed: 1008003 / 1007004); every POST is preceded by its
intent and resolved, when in doubt, by a lookup by external_id
(``GET quotations/ext-...``, ``GET payments/ext-...``); a 1007001 answer is adopted when what
the provider holds is this item, and is a conflict when not. Confirm is the commit: it sends
the payment order to the provider. CONFIRMED (class 2) and SUBMITTED (5) are waited for;
COMPLETED (7) settles the item; REJECTED, CANCELLED, REVERSED, DECLINED (3, 4, 8, 9) fail it.

A merchant payment collects money from a consumer: nothing leaves a balance of ours, so there
is no pre-flight (``cost`` is None). What the consumer needs to pay (QR code, QR URL,
instructions, redirect URL) comes with the confirmed payment and is kept in the item's
``details`` for the summary.

In the state, the payment amount (the consumer's currency) stands in the ``source`` columns
and the collection amount (the merchant's currency) in the ``destination`` ones, so reports
read "consumers sent, the merchant received". The fee is in the collection currency, which
the ``fee`` column (summed in the source currency) cannot say: it is not written there.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

from runner.engine.flow import Conflict, Entry, Flow, mask
from runner.job.merchant_payment import MerchantPaymentItem
from runner.provider.errors import AlreadyConfirmed, ProviderError, QuotationExpired
from runner.provider.http import ext
from runner.provider.merchant_payment import MerchantPaymentClient

FINAL_CLASSES = {"3", "4", "7", "8", "9"}
QUOTATION_FIELDS = {"payment_method_id", "mode", "payment", "collection"}
CREATED = "10000"
# What the consumer is given to pay, in the order a person reads it.
DETAIL_FIELDS = ("qr_code", "qr_url", "redirect_url", "instructions")


def _given(fields: dict[str, Any] | None) -> dict[str, Any]:
    """The fields that have a value (to compare who pays, whatever shows the empty)."""
    return {k: v for k, v in (fields or {}).items() if v is not None}


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and Decimal(str(a)) == Decimal(str(b))


def payment_details(payment: dict[str, Any]) -> dict[str, Any] | None:
    """The parts of a payment's ``details`` a consumer needs, or None while there are none."""
    details = payment.get("details") or {}
    kept = {k: details[k] for k in DETAIL_FIELDS if details.get(k) not in (None, "", [])}
    return kept or None


class MerchantPaymentFlow(Flow):
    kind = "merchant_payment"
    client: MerchantPaymentClient

    def summary_of(self, item: MerchantPaymentItem) -> dict[str, Any]:
        ident = item.debit_party_identifier.model_dump(exclude_none=True)
        ident.pop("account_type", None)  # not an identifier of the consumer
        return {"beneficiary": " ".join(x for x in (item.consumer.firstname,
                                                     item.consumer.lastname) if x),
                "payment_method_id": item.payment_method_id,
                "identifier": {k: mask(v) for k, v in ident.items()}}

    def needs_prepare(self, entry: Entry) -> bool:
        return entry.record["step"] in ("new", "quoted")

    def ready(self, entry: Entry) -> bool:
        return entry.record["step"] == "created"

    def commit(self, entry: Entry) -> None:
        self.confirm(entry)

    def cost(self, entry: Entry) -> tuple[str, Decimal] | None:
        return None  # a collection: no balance of ours is drawn on

    def planned(self, entry: Entry) -> tuple[str, Decimal] | None:
        item, r = entry.item, entry.record
        if r.get("source_amount"):
            return r["source_currency"], Decimal(r["source_amount"])
        side = item.payment if item.mode == "PAYMENT_AMOUNT" else item.collection
        return (side.currency, side.amount) if side.amount is not None else None

    # ------------------------------------------------------------ steps
    def prepare(self, entry: Entry) -> None:
        """Quote and create the payment (steps new -> quoted -> created)."""
        while entry.record["step"] in ("new", "quoted"):
            if entry.record["step"] == "new":
                if not self._quote(entry):
                    return
            elif not self._create(entry):
                return

    def _quote(self, entry: Entry) -> bool:
        ref = entry.ref
        body = {"external_id": ref,
                **entry.item.model_dump(include=QUOTATION_FIELDS, exclude_none=True)}
        found = None
        if entry.record.get("intent") == "quotation":
            found = self.read(lambda: self.client.find_quotation(ref))
        try:
            quotation = found or self._post(
                entry, "quotation", body, lambda: self.client.create_quotation(body),
                lambda: self.client.find_quotation(ref))
        except ProviderError as exc:
            self._fail(entry, exc)
            return False
        self._check_quotation(entry, quotation)
        self.update(entry, step="quoted", intent=None, quotation_id=quotation["id"],
                     provider_ref=ref, source_currency=quotation["payment"]["currency"],
                     source_amount=str(quotation["payment"]["amount"]),
                     destination_currency=quotation["collection"]["currency"],
                     destination_amount=str(quotation["collection"]["amount"]),
                     expires_at=quotation["expiration_date"], outcome="pending",
                     error_code=None, error_message=None)
        return True

    def _check_quotation(self, entry: Entry, quotation: dict[str, Any]) -> None:
        item = entry.item
        payment, collection = quotation["payment"], quotation["collection"]
        same = (quotation["payment_method"]["id"] == item.payment_method_id
                and quotation["mode"] == item.mode
                and payment["country_iso_code"] == item.payment.country_iso_code
                and payment["currency"] == item.payment.currency
                and collection["currency"] == item.collection.currency)
        if item.mode == "PAYMENT_AMOUNT":
            same = same and _same(payment["amount"], item.payment.amount)
        else:
            same = same and _same(collection["amount"], item.collection.amount)
        if not same:  # the doubt is over: what the provider holds is known, and not ours
            self._conflict(entry, f"quotation {entry.ref} at the provider does not match "
                                  f"this item")

    def _conflict(self, entry: Entry, message: str) -> None:
        self.update(entry, outcome="conflict", error_code="conflict", intent=None,
                    error_message=message)
        raise Conflict(entry.external_id)

    def _expired(self, entry: Entry) -> bool:
        expires = entry.record.get("expires_at")
        if not expires:
            return False
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.clock())) > str(expires)

    def _next_attempt(self, entry: Entry) -> None:
        self.update(entry, step="new", intent=None,
                    attempt=int(entry.record.get("attempt") or 1) + 1,
                    quotation_id=None, transaction_id=None)

    def _create(self, entry: Entry) -> bool:
        ref = entry.ref
        if entry.record.get("intent") != "payment" and self._expired(entry):
            self._next_attempt(entry)  # no payment was asked under this quotation
            return True
        body = {"external_id": ref, **entry.item.model_dump(exclude=QUOTATION_FIELDS,
                                                            exclude_none=True)}
        found = None
        if entry.record.get("intent") == "payment":
            found = self.read(lambda: self.client.find_payment(ref))
        try:
            payment = found or self._post(
                entry, "payment", body,
                lambda: self.client.create_payment(ext(ref), body),
                lambda: self.client.find_payment(ref))
        except QuotationExpired:
            self._next_attempt(entry)
            return True
        except ProviderError as exc:
            self._fail(entry, exc)
            return False
        if payment["external_id"] != ref \
                or not _same(payment["payment"]["amount"], entry.record["source_amount"]) \
                or not _same(payment["collection"]["amount"],
                             entry.record["destination_amount"]) \
                or _given(payment["debit_party_identifier"]) != \
                _given(entry.item.debit_party_identifier.model_dump()):
            self._conflict(entry, f"payment {ref} at the provider does not match this item")
        self._status(entry, payment, step="created")
        return True

    def _status(self, entry: Entry, payment: dict[str, Any], step: str) -> None:
        klass = str(payment["status_class"])
        values: dict[str, Any] = {"step": step, "intent": None, "transaction_id": payment["id"],
                                  "status": payment["status"], "status_class": klass,
                                  "status_message": payment["status_message"]}
        details = payment_details(payment)
        if details is not None:
            values["details"] = json.dumps(details)
        if klass in FINAL_CLASSES:
            values["step"] = "final"
            values["outcome"] = "settled" if klass == "7" else "failed"
            if klass != "7":
                values["error_code"] = payment["status"]
                values["error_message"] = payment["status_message"]
        elif step == "created":
            values["outcome"] = "pending"
        self.update(entry, **values)

    def confirm(self, entry: Entry) -> None:
        """Confirm a created payment (the order goes to the provider); -rN after expiry."""
        while entry.record["step"] in ("new", "quoted", "created"):
            if entry.record["step"] != "created":
                self.prepare(entry)
                if entry.record["step"] != "created":
                    return
            if not self._confirm_once(entry):
                return

    def _confirm_once(self, entry: Entry) -> bool:
        """One confirm; True when a new attempt (-rN) was started and needs confirming."""
        ref = entry.ref
        if entry.record.get("intent") == "confirm":
            payment = self.read(lambda: self.client.find_payment(ref))
            if payment is not None and payment["status"] != CREATED:
                self._status(entry, payment, step="confirmed")
                return False
        try:
            payment = self._post(entry, "confirm", {"payment": ref},
                                 lambda: self.client.confirm_payment(ext(ref), ref),
                                 lambda: self._confirmed_or_none(ref))
        except AlreadyConfirmed:
            payment = self.read(lambda: self.client.find_payment(ref))
        except QuotationExpired:
            self._next_attempt(entry)  # proved unconfirmable: a new attempt may be made
            return True
        except ProviderError as exc:
            payment = self.read(lambda: self.client.find_payment(ref))
            if payment is None or str(payment["status_class"]) not in FINAL_CLASSES:
                self._fail(entry, exc)
                return False
        self._status(entry, payment, step="confirmed")
        return False

    def settle_doubt(self, entry: Entry) -> None:
        """Resolve a confirm whose answer was lost, by lookup, without confirming anything:
        confirmed -> its status; still CREATED -> the doubt is over (nothing happened)."""
        if entry.record.get("intent") != "confirm":
            return
        payment = self.read(lambda: self.client.find_payment(entry.ref))
        if payment is not None and payment["status"] != CREATED:
            self._status(entry, payment, step="confirmed")
        elif payment is not None:
            self.update(entry, intent=None)

    def _confirmed_or_none(self, ref: str) -> Any | None:
        """A lost confirm is resolved by the payment's status: still CREATED means the
        confirm did not happen (so it may be sent again)."""
        payment = self.client.find_payment(ref)
        if payment is None or payment["status"] == CREATED:
            return None
        return payment

    def poll(self, entry: Entry) -> bool:
        """Read the status once; True when the item is final."""
        payment = self.read(lambda: self.client.find_payment(entry.ref))
        if payment is not None:
            self._status(entry, payment, step="confirmed")
        return entry.record["step"] == "final"
