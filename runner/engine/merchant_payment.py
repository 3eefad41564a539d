"""One merchant payment, exactly once: quotation -> payment -> confirm -> final status
(docs/kinds.md, "merchant_payment").

The exactly-once machinery is ``runner.engine.quoted``'s (lookups ``GET quotations/ext-...``
and ``GET payments/ext-...``); this module says what is a merchant payment's: the payment as
the created object, what a matching quotation and payment are (method, mode, country,
currencies and input amount; both amounts and the debit party), and what is kept.

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
from decimal import Decimal
from typing import Any

from runner.cards import mask
from runner.engine.answers import same_amount
from runner.engine.flow import Entry
from runner.engine.quoted import QuotedFlow
from runner.job.merchant_payment import MerchantPaymentItem
from runner.lifecycle import Call
from runner.provider.merchant_payment import MerchantPaymentClient
from runner.state import ItemChanges

# What the consumer is given to pay, in the order a person reads it.
DETAIL_FIELDS = ("qr_code", "qr_url", "redirect_url", "instructions")


def payment_details(payment: dict[str, Any]) -> dict[str, Any] | None:
    """The parts of a payment's ``details`` a consumer needs, or None while there are none."""
    details = payment.get("details") or {}
    kept = {k: details[k] for k in DETAIL_FIELDS if details.get(k) not in (None, "", [])}
    return kept or None


class MerchantPaymentFlow(QuotedFlow[MerchantPaymentItem, MerchantPaymentClient]):
    created = Call.PAYMENT
    quotation_fields = frozenset({"payment_method_id", "mode", "payment", "collection"})
    sides = ("payment", "collection")
    identified, named = "debit_party_identifier", "consumer"
    not_identifying = ("account_type",)
    def summary_of(self, item: MerchantPaymentItem) -> dict[str, Any]:
        ident = item.debit_party_identifier.model_dump(exclude_none=True)
        ident.pop("account_type", None)  # not an identifier of the consumer
        return {"beneficiary": " ".join(x for x in (item.consumer.firstname,
                                                     item.consumer.lastname) if x),
                "payment_method_id": item.payment_method_id,
                "identifier": {k: mask(v) for k, v in ident.items()}}

    def cost(self, entry: Entry[MerchantPaymentItem]) -> tuple[str, Decimal] | None:
        return None  # a collection: no balance of ours is drawn on

    # ------------------------------------------------------------ what is this item's
    def quotation_matches(self, entry: Entry[MerchantPaymentItem],
                          quotation: dict[str, Any]) -> bool:
        item = entry.item
        payment, collection = quotation["payment"], quotation["collection"]
        same = (quotation["payment_method"]["id"] == item.payment_method_id
                and quotation["mode"] == item.mode
                and payment["country_iso_code"] == item.payment.country_iso_code
                and payment["currency"] == item.payment.currency
                and collection["currency"] == item.collection.currency)
        if item.mode == "PAYMENT_AMOUNT":
            return same and same_amount(payment["amount"], item.payment.amount)
        return same and same_amount(collection["amount"], item.collection.amount)

    def quoted(self, quotation: dict[str, Any]) -> ItemChanges:
        # The consumer's side stands in the source columns, the merchant's in the
        # destination ones; the fee (in the collection currency) is not written (see above).
        return {"source_currency": quotation["payment"]["currency"],
                "source_amount": Decimal(quotation["payment"]["amount"]),
                "destination_currency": quotation["collection"]["currency"],
                "destination_amount": Decimal(quotation["collection"]["amount"])}

    def kept(self, payment: dict[str, Any]) -> ItemChanges:
        details = payment_details(payment)
        return {} if details is None else {"details": json.dumps(details)}
