"""The merchant payment service's rules: quotation pricing, the payment details a confirmed
payment shows, and the merchant balances completed payments move.

Pricing, in Decimal: the payment side is what the consumer pays in the method's currency; the
collection side is what the merchant receives in its own currency; the fee is in the
collection currency and is kept back when the payment completes. A completed payment credits
the merchant balance with the collection less the fee; a reversal takes it back.

Payment details (QR code, QR URL, instructions, redirect URL) are null until the payment is
confirmed, then filled for the fields the payment method lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from runner.money import cents, fits, round_down, round_up
from runner.sandbox.core.errors import ApiError
from runner.sandbox.core.quotes import CENT, TWO, QuoteFlow, Settle, amount_given
from runner.sandbox.core.store import Store
from runner.sandbox.merchant_payment.catalogue import (
    FEE_MINIMUM,
    FEE_PERCENT,
    METHODS_BY_ID,
    RATES,
    MethodSpec,
)
from runner.sandbox.merchant_payment.schemas import PaymentDetails

FLOW = QuoteFlow("mquotations", "payments", merchant=True, zone="Z")


@dataclass(frozen=True)
class MerchantPrice:
    payment_amount: Decimal
    collection_amount: Decimal
    collection_in_payment_currency: Decimal
    rate: Decimal
    fee: Decimal


def price_merchant_payment(
    method: MethodSpec, mode: str, collection_currency: str, payment_amount: Decimal | None,
    collection_amount: Decimal | None,
) -> MerchantPrice:
    rates = RATES.get(collection_currency)
    if rates is None or method.currency not in rates:
        raise ApiError("1003008", f"collection.currency {collection_currency} is not collected",
                       merchant=True)
    rate = rates[method.currency]
    if mode == "PAYMENT_AMOUNT":
        payment = amount_given(payment_amount, "payment.amount")
        if not fits(payment, method.precision, method.increment):
            raise ApiError("1000999", f"payment.amount must have at most {method.precision} "
                                      f"decimals and be a multiple of {method.increment}",
                           merchant=True)
        collection = round_down(payment / rate, TWO, CENT)
        if collection <= 0:
            raise ApiError("1003008", "the collection amount rounds to zero", merchant=True)
    elif mode == "COLLECTION_AMOUNT":
        collection = amount_given(collection_amount, "collection.amount")
        if not fits(collection, TWO, CENT):
            raise ApiError("1003008", "collection.amount has more than 2 decimals", merchant=True)
        payment = round_up(collection * rate, method.precision, method.increment)
    else:
        raise ApiError("1000999", "mode must be PAYMENT_AMOUNT or COLLECTION_AMOUNT", merchant=True)
    if payment < method.minimum:
        raise ApiError("1003010", f"{payment} {method.currency} < {method.minimum}", merchant=True)
    if payment > method.maximum:
        raise ApiError("1003011", f"{payment} {method.currency} > {method.maximum}", merchant=True)
    in_payment = cents(collection * rate, method.precision)
    fee = max(FEE_MINIMUM, cents(collection * FEE_PERCENT / 100))
    return MerchantPrice(payment, collection, in_payment, rate, fee)


def details(spec: MethodSpec, payment: dict[str, Any]) -> dict[str, Any]:
    pid, amount = payment["id"], payment["payment"]["amount"]
    fields = set(spec.details)
    reference = f"SBX{pid:08d}"
    return PaymentDetails(
        qr_code=f"000201010212{spec.country}{spec.currency}{amount}{reference}"
        if "qr_code" in fields else None,
        qr_url=f"https://pay.sandbox.invalid/qr/{reference}" if "qr_url" in fields else None,
        instructions=[{"channel": "USSD", "steps": ["Dial *500#", f"Enter reference {reference}",
                                                   f"Approve {amount} {spec.currency}"]},
                      {"channel": "APP", "steps": ["Open the app", "Choose Pay",
                                                   f"Enter reference {reference}"]}]
        if "instructions" in fields else None,
        redirect_url=f"https://pay.sandbox.invalid/checkout/{reference}" if spec.redirect
        else None,
        merchant_id="SBX-MERCHANT", invoice_id=reference, amount=amount, currency=spec.currency,
    ).model_dump()


def show_details(payment: dict[str, Any], meta: dict[str, Any]) -> None:
    """What confirming a payment does: its details are filled in."""
    payment["details"] = details(METHODS_BY_ID[payment["payment_method"]["id"]], payment)
    payment["payment_method_payment_reference"] = payment["details"]["invoice_id"]


def settler(store: Store) -> Settle:
    """What a payment's new status does to the merchant balance."""

    def settle(meta: dict[str, Any], status: str) -> None:
        net, currency = Decimal(meta["net"]), meta["currency"]
        b = store.merchant_balances[currency]
        if status[0] == "7" and not meta.get("settled"):
            b["balance"] = Decimal(b["balance"]) + net
            meta["settled"] = True
        elif status[0] == "8" and meta.get("settled"):
            b["balance"] = Decimal(b["balance"]) - net
            meta["settled"] = False
        else:
            return
        store.save_balance(currency, merchant=True)

    return settle
