"""Quotation pricing, in Decimal, from the catalogue's rates.

Money transfer: the source side is in the sender's currency (2 decimals), the destination in
the payer's currency at the payer's precision and increment. The fee is charged in the source
currency; confirming costs ``sent_amount + fee``.

Merchant payment: the payment side is what the consumer pays in the method's currency; the
collection side is what the merchant receives in its own currency; the fee is in the
collection currency and is kept back when the payment completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from runner.money import cents, fits, round_down, round_up
from runner.sandbox import catalogue as cat
from runner.sandbox.errors import ApiError

TWO = 2
CENT = Decimal("0.01")


@dataclass(frozen=True)
class RemittancePrice:
    source_amount: Decimal
    destination_amount: Decimal
    rate: Decimal
    fee: Decimal


def _amount(value: Decimal | None, field: str) -> Decimal:
    if value is None:
        raise ApiError("1000999", f"{field} is required for this mode")
    if not value.is_finite() or value <= 0:
        raise ApiError("1000999", f"{field} must be a positive amount")
    return value


def price_remittance(
    payer: cat.PayerSpec, mode: str, source_currency: str, source_amount: Decimal | None,
    destination_amount: Decimal | None,
) -> RemittancePrice:
    bands = cat.rate_bands(payer.currency).get(source_currency)
    if bands is None:
        raise ApiError("1000999", f"source.currency {source_currency} is not priced by this payer")
    if mode == "SOURCE_AMOUNT":
        source = _amount(source_amount, "source.amount")
        if not fits(source, TWO, CENT):
            raise ApiError("1000999", "source.amount has more than 2 decimals")
        band = next((b for b in bands
                     if b["source_amount_min"] <= source <= b["source_amount_max"]), None)
        if band is None:
            raise ApiError("1006001", f"source.amount over {cat.MAX_SOURCE_AMOUNT}")
        rate = band["wholesale_fx_rate"]
        destination = round_down(source * rate, payer.precision, payer.increment)
        if destination <= 0:
            raise ApiError("1003008", "the converted amount rounds to zero")
    elif mode == "DESTINATION_AMOUNT":
        destination = _amount(destination_amount, "destination.amount")
        if not fits(destination, payer.precision, payer.increment):
            raise ApiError("1003008", f"destination.amount must have at most {payer.precision} "
                                      f"decimals and be a multiple of {payer.increment}")
        for band in bands:
            rate = band["wholesale_fx_rate"]
            # The cheapest source amount of this band that delivers the destination amount:
            # between the bands' edges no source amount converts to exactly it.
            source = max(round_up(destination / rate, TWO, CENT), band["source_amount_min"])
            if source <= band["source_amount_max"]:
                break
        else:
            raise ApiError("1006001", f"source amount over {cat.MAX_SOURCE_AMOUNT}")
    else:
        raise ApiError("1000999", "mode must be SOURCE_AMOUNT or DESTINATION_AMOUNT")
    if destination < payer.minimum:
        raise ApiError("1003011", f"{destination} {payer.currency} < {payer.minimum}")
    if payer.maximum is not None and destination > payer.maximum:
        raise ApiError("1003012", f"{destination} {payer.currency} > {payer.maximum}")
    fee = cents(payer.fee_fixed + source * payer.fee_percent / 100)
    return RemittancePrice(source, destination, rate, fee)


@dataclass(frozen=True)
class MerchantPrice:
    payment_amount: Decimal
    collection_amount: Decimal
    collection_in_payment_currency: Decimal
    rate: Decimal
    fee: Decimal


def price_merchant_payment(
    method: cat.MethodSpec, mode: str, collection_currency: str, payment_amount: Decimal | None,
    collection_amount: Decimal | None,
) -> MerchantPrice:
    rates = cat.MERCHANT_RATES.get(collection_currency)
    if rates is None or method.currency not in rates:
        raise ApiError("1003008", f"collection.currency {collection_currency} is not collected",
                       merchant=True)
    rate = rates[method.currency]
    if mode == "PAYMENT_AMOUNT":
        payment = _amount(payment_amount, "payment.amount")
        if not fits(payment, method.precision, method.increment):
            raise ApiError("1000999", f"payment.amount must have at most {method.precision} "
                                      f"decimals and be a multiple of {method.increment}",
                           merchant=True)
        collection = round_down(payment / rate, TWO, CENT)
        if collection <= 0:
            raise ApiError("1003008", "the collection amount rounds to zero", merchant=True)
    elif mode == "COLLECTION_AMOUNT":
        collection = _amount(collection_amount, "collection.amount")
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
    fee = max(cat.MERCHANT_FEE_MINIMUM, cents(collection * cat.MERCHANT_FEE_PERCENT / 100))
    return MerchantPrice(payment, collection, in_payment, rate, fee)
