"""The merchant payment service's deterministic catalogue: payment methods (QR, instruction
and redirect details; one inactive, one unavailable), the fee, rates and merchant balances.
The debit party checks take the identifiers a method accepts, but for the card checkout
(method 3), which offers none (1007100).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal as D
from typing import Any

from runner.sandbox.core.catalogue import BANK, BASE_RATES, MSISDN, NAMES


@dataclass(frozen=True)
class MethodSpec:
    id: int
    name: str
    description: str
    country: str
    currency: str
    precision: int
    increment: D
    minimum: D
    maximum: D
    identifiers: list[list[str]]
    consumer: list[list[str]]
    details: list[str]
    redirect: bool = False
    active: bool = True
    available: bool = True
    checks: list[list[str]] | None = None  # the identifiers its party checks take

    @property
    def checked(self) -> list[list[str]]:
        return self.identifiers if self.checks is None else self.checks


FEE_PERCENT = D("1.5")
FEE_MINIMUM = D("0.30")

PAYMENT_METHODS = [
    MethodSpec(1, "M-Wallet QR Kenya", "Pay by scanning a QR code in the wallet app", "KEN", "KES",
               0, D(1), D(10), D(150000), [[MSISDN]], [NAMES], ["qr_code", "qr_url"]),
    MethodSpec(2, "Bank Transfer Nigeria", "Pay by bank transfer with the given reference", "NGA",
               "NGN", 2, D("0.50"), D(100), D(2000000), [[BANK], [MSISDN]],
               [NAMES + ["email"]], ["instructions"]),
    MethodSpec(3, "Card Checkout Mexico", "Pay on the card page the consumer is sent to", "MEX",
               "MXN", 2, D("0.01"), D(10), D(100000), [["email"]], [NAMES + ["email"]], [],
               redirect=True, checks=[]),
    MethodSpec(4, "Mobile Money Senegal", "Approve the payment on the phone", "SEN", "XOF", 0,
               D(5), D(500), D(1000000), [[MSISDN]], [NAMES, ["msisdn"]], ["instructions"]),
    MethodSpec(5, "QR Ph Philippines", "Scan the QR Ph code", "PHL", "PHP", 2, D("0.05"), D(20),
               D(50000), [[MSISDN], [BANK]], [NAMES], ["qr_code"]),
    MethodSpec(6, "UPI India", "Approve the collect request in any UPI app", "IND", "INR", 2,
               D("0.01"), D(1), D(200000), [[MSISDN], ["email"]],
               [NAMES + ["id_type", "id_number"]], ["qr_code", "qr_url", "instructions"]),
    MethodSpec(7, "Old Wallet Kenya", "Retired", "KEN", "KES", 0, D(1), D(10), D(150000),
               [[MSISDN]], [NAMES], ["qr_code"], active=False),
    MethodSpec(8, "Bank Transfer Ghana", "Pay by bank transfer", "GHA", "GHS", 2, D("0.01"), D(1),
               D(20000), [[BANK]], [NAMES], ["instructions"], available=False),
]
METHODS_BY_ID = {m.id: m for m in PAYMENT_METHODS}

# Units of payment currency per unit of collection currency.
RATES = {c: {k: v for k, v in t.items()} for c, t in BASE_RATES.items()}


def method_resource(m: MethodSpec) -> dict[str, Any]:
    return {
        "id": m.id, "name": m.name, "description": m.description, "country_iso_code": m.country,
        "currency": m.currency, "precision": m.precision, "increment": m.increment,
        "minimum_payment_amount": m.minimum, "maximum_payment_amount": m.maximum,
        "debit_party_identifiers_accepted": m.identifiers,
        "debit_party_information": {"debit_party_identifiers_accepted": m.checked},
        "debit_party_verification": {"debit_party_identifiers_accepted": m.checked,
                                     "required_consumer_fields": m.consumer},
        "payment_details_fields": m.details,
        "required_consumer_fields": m.consumer,
    }

# Starting merchant balances, by currency.
BALANCES = {"EUR": D("0.00"), "USD": D("0.00")}
