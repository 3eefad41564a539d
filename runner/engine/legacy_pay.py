"""One legacy Pay, at most once: a single call (``POST /Rest/V40/PaymentOrder/Pay``) that
takes the card or registered credential and pays, in JSON or XML as the item's ``format``
says.

The call has no lookup by external id of its own, so it falls under rule 5 of docs/exactly-once.md:
once sent, it is never sent again. An answer lost, a timeout, a 5xx or a ReturnCode 5000 (remote
technical error, status unknown) make the item ``unknown``: it is listed for a person, with the
``MerchantOrder.Id`` (the payment order's external id at the collection service) to check, and the
run exits non-zero. A run killed while a Pay was in flight leaves its intent, which the next run
turns into ``unknown`` the same way, without sending anything. 5050 (remote server unavailable) is
retried with backoff, as nothing was made; refusals are never retried: 3000 (refused; the order
exists, Refused) ends the item, 2000, 2500 and 94xx fail it with the code and message (nothing was
made: a corrected job may send it again), but for a 2500 saying the ``MerchantOrder.Id`` is already
used: that order may be this item's, paid by a run whose state is lost, so the item is ``unknown``.

Card data never leaves the request: the state (attempts, summary, fingerprint), the logs and
the reports see the card number as its last four digits and no CVV; other credentials by
their names only. ``MerchantOrder.Id`` is the item's, else its external_id.

Steps: new -> final. Outcomes: pending, settled (ReturnCode 1000: Authorized, or Charged at a
point of sale), failed, unknown.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Unpack

from runner import lifecycle
from runner.engine.flow import Entry, Flow
from runner.errors import (
    BusinessRefusal,
    DuplicateWithoutLookup,
    PayAnswered,
    PayRefused,
    PayStatusUnknown,
    ProviderError,
)
from runner.job.merchant_payment import LegacyCredential, LegacyPayItem
from runner.lifecycle import Call, Step
from runner.provider.http import ext
from runner.provider.legacy import LegacyPayClient
from runner.provider.lookups import own
from runner.state import ItemChanges, ItemRecord

CARD = "CardNumber"


def last_four(value: str | None) -> str:
    """A card number as reports may show it: its last four digits."""
    digits = "".join(c for c in value or "" if c.isdigit())
    return "*" * 12 + digits[-4:] if len(digits) > 4 else "****"


def shown_credentials(credentials: list[LegacyCredential]) -> list[dict[str, str]]:
    """The credentials as they may be kept: the card number masked, the CVV left out, any
    other credential by its name only."""
    shown: list[dict[str, str]] = []
    for c in credentials:
        if c.name == "Cvv":
            continue
        if c.name == CARD:
            shown.append({"name": c.name, "credential": last_four(c.value())})
        else:
            shown.append({"name": c.name})
    return shown


def merchant_order_id(entry: Entry[LegacyPayItem]) -> str:
    return str(entry.item.MerchantOrder.Id or entry.external_id)


class LegacyPayFlow(Flow[LegacyPayItem, LegacyPayClient]):
    commit_call = Call.PAY

    def summary_of(self, item: LegacyPayItem) -> dict[str, Any]:
        card = next((c for c in item.Credentials if c.name == CARD), None)
        identifier = ({"card": last_four(card.value())} if card is not None else
                      {"credentials": ", ".join(c.name for c in item.Credentials)})
        return {"beneficiary": item.MerchantId, "identifier": identifier}

    def fingerprinted(self, item: LegacyPayItem) -> LegacyPayItem:
        # The fingerprint is a hash kept in the state: it must not be one of card data.
        kept = [LegacyCredential.model_construct(
            name=c.name, credential_env=c.credential_env,
            credential=last_four(c.value()) if c.name == CARD else None)
            for c in item.Credentials if c.name != "Cvv"]
        return item.model_copy(update={"Credentials": kept})

    def ready(self, entry: Entry[LegacyPayItem]) -> bool:
        return entry.record.step == Step.NEW

    # ------------------------------------------------------------ the call
    def _order(self, entry: Entry[LegacyPayItem]) -> dict[str, Any]:
        item = entry.item
        merchant_order: dict[str, Any] = {"Id": merchant_order_id(entry)}
        customer = (item.MerchantOrder.Customer.model_dump(exclude_none=True)
                    if item.MerchantOrder.Customer is not None else None)
        if customer:
            merchant_order["Customer"] = customer
        urls = item.MerchantUrls.model_dump(exclude_none=True)
        return {"MerchantId": item.MerchantId, "Amount": item.Amount,
                "Currency": item.Currency, "PaymentPageId": item.PaymentPageId,
                **({"MerchantUrls": urls} if urls else {}), "MerchantOrder": merchant_order}

    def commit(self, entry: Entry[LegacyPayItem]) -> None:
        item = entry.item
        order_id = merchant_order_id(entry)
        order = self._order(entry)
        values = [(c, c.value()) for c in item.Credentials]
        unset = [c.credential_env for c, value in values if value is None]
        if unset:  # checked by validation; the environment may have changed since
            self.move(entry, lifecycle.refused(
                entry.record, "credential", f"environment variable {unset[0]} is not set; "
                                            f"nothing was sent"))
            return
        credentials = [{"name": c.name, "credential": value or ""} for c, value in values]
        shown = {"format": item.format, "PaymentOrder": order,
                 "Credentials": shown_credentials(item.Credentials)}
        errors: list[ProviderError] = []

        def send() -> Any:
            try:
                return self.client.pay(order, credentials, item.format, external_id=order_id)
            except ProviderError as exc:
                errors.append(exc)
                raise

        base: ItemChanges = {"provider_ref": order_id, "source_currency": item.Currency,
                             "source_amount": Decimal(item.Amount)}
        try:
            answer = self.post_once(entry, self.commit_call, shown, send)
        except PayRefused as exc:
            base.update({"status": exc.order_status, "transaction_id": exc.payment_order_id,
                         "details": _details(order_id, exc.payment_order_id)})
            self.move(entry, lifecycle.failed(entry.record, exc.code, exc.message), **base)
            return
        except BusinessRefusal as exc:
            if isinstance(exc, DuplicateWithoutLookup):
                # This order id was paid before, maybe by this very item in a run whose
                # state is lost: only a person can tell.
                base["details"] = _details(order_id, None)
                self.move(entry, lifecycle.unknown(
                    entry.record, exc.code, f"the provider already holds a payment order with "
                                            f"MerchantOrder.Id {order_id} ({exc.message}): "
                                            f"check whether it is this item's before anything "
                                            f"else"), **base)
            else:
                self._fail(entry, exc, **base)
            return
        except ProviderError as exc:
            self._fail(entry, exc, **base)
            return
        if answer is None:
            self._unknown(entry, errors[-1] if errors else None, **base)
            return
        base.update({"status": answer["Status"], "transaction_id": answer["PaymentOrderId"],
                     "details": _details(order_id, answer["PaymentOrderId"])})
        self.move(entry, lifecycle.settled(entry.record), **base)

    def _unknown(self, entry: Entry[LegacyPayItem], error: ProviderError | None,
                 **facts: Unpack[ItemChanges]) -> None:
        order_id = merchant_order_id(entry)
        number = error.payment_order_id if isinstance(error, PayAnswered) else None
        if isinstance(error, PayStatusUnknown):
            what = f"the Pay answered {error.code} ({error.message})"
        elif error is not None:
            what = f"the Pay was sent and no answer came back ({error})"
        else:
            what = "the Pay was sent and its answer was never recorded (the run ended)"
        order = f"PaymentOrderId {number}, " if number is not None else ""
        facts.update({"transaction_id": number, "details": _details(order_id, number)})
        self.move(entry, lifecycle.unknown(
            entry.record, error.code if error is not None else None,
            f"{what}: whether it paid is unknown. Check the payment order ({order}"
            f"MerchantOrder.Id {order_id}) at the provider; runner never sends this Pay "
            f"again"), **facts)

    def found(self, record: ItemRecord, ref: str | None = None) -> ItemChanges | None:
        """The Pay has no lookup, but the payment order it makes is the collection service's,
        found by its MerchantOrder.Id (kept in ``provider_ref``)."""
        if record.provider_ref is None:
            return None  # nothing was sent (refused before the call, or never tried)
        merchant_order = str(record.provider_ref)
        order = self.read(lambda: own(self.client.find_at(
            "/v1/payment", f"/payment-orders/{ext(merchant_order)}"), "external_id",
            merchant_order, "payment order"))
        if order is None:
            return None
        number = str(order["id"]).removeprefix("PO").lstrip("0")
        requested = order.get("requested") or {}
        return {"transaction_id": int(number) if number.isdigit() else order["id"],
                "status": order.get("status"), "source_currency": requested.get("currency"),
                "source_amount": Decimal(str(requested["amount"]))
                if requested.get("amount") is not None else None}

    def settle_doubt(self, entry: Entry[LegacyPayItem]) -> None:
        """A Pay in flight when a run ended: rule 5, nothing is sent, a person checks."""
        if entry.record.intent != self.commit_call:
            return
        for attempt in self.state.attempts(entry.external_id):  # the intent stays until
            if attempt.step == self.commit_call and attempt.finished_at is None:  # unknown
                self.state.end_attempt(attempt.id, entry.external_id, "in_doubt",
                                       message="the run ended before the answer was recorded",
                                       resolved=False)
        item = entry.item
        self._unknown(entry, None, provider_ref=merchant_order_id(entry),
                      source_currency=item.Currency, source_amount=Decimal(item.Amount))


def _details(order_id: str, payment_order_id: int | None) -> str:
    details: dict[str, Any] = {"MerchantOrder.Id": order_id}
    if payment_order_id is not None:
        details["PaymentOrderId"] = payment_order_id
    return json.dumps(details)
