"""Checks of one item against the provider's own data: a payer (remittances) or a payment
method (merchant payments). Pure functions over Decimal: each returns (field, message) pairs,
empty when the provider would take the item.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from runner import rules
from runner.money import fits, round_down, round_up

if TYPE_CHECKING:  # each kind's module imports its own models
    from runner.job.merchant_payment import MerchantPaymentItem
    from runner.job.money_transfer import RemittanceItem

Problems = Iterator[tuple[str, str]]
CENT = Decimal("0.01")
CONSUMER_ENUMS = ("gender", "id_type", "source_of_funds")


def _party(values: Mapping[str, Any], alternatives: Sequence[Sequence[str]], where: str,
           owner: str, enums: Sequence[str] = ()) -> Problems:
    gaps = rules.missing(values, alternatives)
    if gaps:
        yield (f"{where}.{gaps[0]}",
               f"required by {owner} (accepted: {rules.describe(alternatives)})")
    for name, message in rules.party_problems(values, enums):
        yield f"{where}.{name}", message


def _band(rates: Sequence[Mapping[str, Decimal]], source: Decimal) -> Decimal | None:
    for band in rates:
        if band["source_amount_min"] <= source <= band["source_amount_max"]:
            return band["wholesale_fx_rate"]
    return None


def source_estimate(item: RemittanceItem, rates: Mapping[str, Any] | None) -> Decimal | None:
    """What the item sends in its source currency, as the provider will price it."""
    if item.mode == "SOURCE_AMOUNT":
        return item.source.amount
    band = rate_band(item, rates)
    return None if band is None else band[0]


def destination_estimate(item: RemittanceItem, payer: Mapping[str, Any] | None,
                         rates: Mapping[str, Any] | None) -> Decimal | None:
    """What the item's beneficiary receives, as the provider will price it: the row's amount
    (DESTINATION_AMOUNT), or the source amount at the payer's rate, rounded down to the
    payer's precision and increment."""
    if item.mode != "SOURCE_AMOUNT":
        return item.destination.amount
    band = rate_band(item, rates)
    if band is None or payer is None:
        return None
    return round_down(band[0] * band[1], payer["precision"], Decimal(payer["increment"]))


def rate_band(item: RemittanceItem, rates: Mapping[str, Any] | None
              ) -> tuple[Decimal, Decimal] | None:
    """(source amount, wholesale rate) of the payer's band the item falls in; None when no
    band holds it (or the payer has no rates for its source currency)."""
    bands = (rates or {}).get("rates", {}).get(item.source.currency)
    if not bands:
        return None
    for band in bands:
        rate = band["wholesale_fx_rate"]
        if item.mode == "SOURCE_AMOUNT":
            source = item.source.amount
        elif item.destination.amount is None:
            return None
        else:
            source = round_up(item.destination.amount / rate, 2, CENT)
        if source is not None and band["source_amount_min"] <= source <= band["source_amount_max"]:
            return source, Decimal(str(rate))
    return None


def check_remittance(item: RemittanceItem, payer: Mapping[str, Any] | None,
                     rates: Mapping[str, Any] | None) -> Problems:
    if payer is None:
        yield "payer_id", f"unknown payer {item.payer_id}"
        return
    owner = f"payer {payer['id']} ({payer['name']})"
    currency = payer["currency"]
    if not rules.is_country(item.source.country_iso_code):
        yield ("source.country_iso_code",
               f"{item.source.country_iso_code!r} is not an ISO 3166-1 alpha-3 country code")
    if item.destination.currency != currency:
        yield "destination.currency", f"{owner} pays in {currency}, not {item.destination.currency}"
        return
    bands = (rates or {}).get("rates", {}).get(item.source.currency)
    if not rules.is_currency(item.source.currency):
        yield "source.currency", f"{item.source.currency!r} is not an ISO 4217 currency code"
        return
    if bands is None:
        taken = ", ".join(sorted((rates or {}).get("rates", {}))) or "none"
        yield "source.currency", f"{owner} takes no {item.source.currency} (it takes {taken})"
        return
    yield from _remittance_amount(item, payer, bands, owner)
    yield from _party(item.credit_party_identifier.model_dump(), payer[
        "credit_party_identifiers_accepted"], "credit_party_identifier", owner)
    yield from _party(item.sender.model_dump(), payer["required_sender_fields"], "sender", owner)
    yield from _party(item.beneficiary.model_dump(), payer["required_beneficiary_fields"],
                      "beneficiary", owner)


def _remittance_amount(item: RemittanceItem, payer: Mapping[str, Any],
                       bands: Sequence[Mapping[str, Decimal]], owner: str) -> Problems:
    precision, increment = payer["precision"], Decimal(payer["increment"])
    low, high = payer["minimum_transaction_amount"], payer["maximum_transaction_amount"]
    currency = payer["currency"]
    if item.mode == "SOURCE_AMOUNT":
        source = item.source.amount
        assert source is not None  # the item model requires it in this mode
        field = "source.amount"
        if not fits(source, 2, CENT):
            yield field, f"{source} has more than 2 decimals"
            return
        rate = _band(bands, source)
        if rate is None:
            yield field, f"{source} {item.source.currency} is outside the amounts {owner} prices"
            return
        destination = round_down(source * rate, precision, increment)
        said = f"{source} {item.source.currency} gives {destination} {currency}, "
    else:
        assert item.destination.amount is not None
        destination = item.destination.amount
        field = "destination.amount"
        if not fits(destination, precision, increment):
            yield field, (f"{destination} {currency} must have at most {precision} decimals "
                          f"and be a multiple of {increment}")
            return
        said = f"{destination} {currency} is "
    if destination < low:
        yield field, f"{said}below the minimum of {owner}: {low} {currency}"
    elif high is not None and destination > high:
        yield field, f"{said}over the maximum of {owner}: {high} {currency}"


def check_merchant_payment(item: MerchantPaymentItem, method: Mapping[str, Any] | None,
                           accounts: Sequence[str]) -> Problems:
    if method is None:
        yield "payment_method_id", f"unknown payment method {item.payment_method_id}"
        return
    owner = f"payment method {method['id']} ({method['name']})"
    for name in ("country_iso_code", "currency"):
        if getattr(item.payment, name) != method[name]:
            yield (f"payment.{name}",
                   f"{owner} takes {method[name]}, not {getattr(item.payment, name)}")
    if item.collection.currency not in accounts:
        yield ("collection.currency", f"no {item.collection.currency} merchant account "
                                      f"(accounts: {', '.join(accounts) or 'none'})")
    precision, increment = method["precision"], Decimal(method["increment"])
    if item.mode == "PAYMENT_AMOUNT" and item.payment.amount is not None:
        amount = item.payment.amount
        if not fits(amount, precision, increment):
            yield "payment.amount", (f"{amount} {method['currency']} must have at most "
                                     f"{precision} decimals and be a multiple of {increment}")
        elif amount < method["minimum_payment_amount"]:
            yield "payment.amount", f"below the minimum of {owner}: " \
                                    f"{method['minimum_payment_amount']} {method['currency']}"
        elif amount > method["maximum_payment_amount"]:
            yield "payment.amount", f"over the maximum of {owner}: " \
                                    f"{method['maximum_payment_amount']} {method['currency']}"
    if item.mode == "COLLECTION_AMOUNT" and item.collection.amount is not None:
        if not fits(item.collection.amount, 2, CENT):
            yield "collection.amount", f"{item.collection.amount} has more than 2 decimals"
    yield from _party(item.debit_party_identifier.model_dump(),
                      method["debit_party_identifiers_accepted"], "debit_party_identifier", owner)
    yield from _party(item.consumer.model_dump(), method["required_consumer_fields"], "consumer",
                      owner, CONSUMER_ENUMS)
