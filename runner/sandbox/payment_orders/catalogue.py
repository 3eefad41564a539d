"""The collection service's payment pages, exchange rates and test card numbers (document 1).

A payment page is one payment method as a merchant reaches it: its vertical decides whether
an order waits for a charge (cards, buy-now-pay-later) or settles by itself (mobile wallets,
open banking), which operations it supports, and what a HOST_TO_HOST order must carry. A page
with ``merchant_currency`` converts currency: the buyer pays in the page's currency, the
merchant is paid in its own, and orders come only from a quotation.

Merchants are the onboarding records (onboarding/models.py: MER0001 ``acme-shop`` and anything
onboarded); every page is open to every merchant of this integrator.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal as D

from runner.sandbox.core.catalogue import BASE_RATES

CARD, BNPL, WALLET, OPEN_BANKING = "CARD", "BNPL", "MOBILE_WALLET", "OPEN_BANKING"
CARD_FIELDS = ("card_number", "card_cvv", "card_expiration_month", "card_expiration_year")
BNPL_CUSTOMER = ("first_name", "last_name", "email")
BNPL_ADDRESS = ("address_line_1", "city", "zip_code", "country_iso_code")


@dataclass(frozen=True)
class PaymentPage:
    id: str
    name: str
    vertical: str
    currency: str  # what the buyer pays in
    needs_charge: bool  # False: the order settles by itself (Charged without a charge call)
    refunds: bool
    cancels: bool
    cancel_while_authorizing: bool = False
    merchant_currency: str | None = None  # set: the page converts currency
    h2h_fields: tuple[str, ...] = ()  # payment_information required in HOST_TO_HOST
    brand: str | None = None  # None: from the card number

    @property
    def converts(self) -> bool:
        return self.merchant_currency is not None


PAGES = {p.id: p for p in (
    PaymentPage("card-eur", "Card payment (EUR)", CARD, "EUR", needs_charge=True, refunds=True,
                cancels=True, h2h_fields=CARD_FIELDS),
    PaymentPage("bnpl-eur", "Pay in 3 instalments (EUR)", BNPL, "EUR", needs_charge=True,
                refunds=True, cancels=True, cancel_while_authorizing=True,
                h2h_fields=("email",), brand="PAYLATER"),
    PaymentPage("wallet-kes", "M-Wallet Kenya (KES)", WALLET, "KES", needs_charge=False,
                refunds=False, cancels=False, h2h_fields=("msisdn",), brand="M-WALLET"),
    PaymentPage("openbanking-eur", "Pay by bank (EUR)", OPEN_BANKING, "EUR", needs_charge=False,
                refunds=True, cancels=False, h2h_fields=("bank_id",), brand="OPENBANK"),
    PaymentPage("card-usd-fx", "Card payment in USD, paid out in EUR", CARD, "USD",
                needs_charge=True, refunds=True, cancels=True, merchant_currency="EUR",
                h2h_fields=CARD_FIELDS),
)}

# Units of the buyer's currency per unit of the merchant's.
FX_RATES = {("EUR", "USD"): D("1.0842"), ("USD", "EUR"): D("0.9223")}


def rate(merchant_currency: str, buyer_currency: str) -> D | None:
    if merchant_currency == buyer_currency:
        return D(1)
    found = FX_RATES.get((merchant_currency, buyer_currency))
    return found or BASE_RATES.get(merchant_currency, {}).get(buyer_currency)


# Digits after the point (ISO 4217 minor units); 2 for the currencies not listed.
MINOR_UNITS = {"XOF": 0, "UGX": 0, "VND": 0, "JPY": 0}


def digits(currency: str) -> int:
    return MINOR_UNITS.get(currency, 2)


# Test card numbers (all pass the Luhn check). Any other valid number is authorized.
REFUSED_CARD = "4000000000000002"  # Refused: 2001301 / legacy 3000
ERROR_CARD = "4000000000000119"  # Error, status unknown to the caller: 2001401 / legacy 5000
UNAVAILABLE_CARD = "4000000000000259"  # nothing created, retry later: 2001501 / legacy 5050
ABANDONED_CARD = "4000000000000069"  # REDIRECT only: the buyer leaves the page -> Aborted
TEST_CARDS = {REFUSED_CARD: "Refused", ERROR_CARD: "Error", UNAVAILABLE_CARD: "unavailable",
              ABANDONED_CARD: "Aborted"}

INTEGRATOR_ID = "INT0001"
PAYMENT_URL = "https://pay.sandbox.invalid/payment-pages/{page}/{order}"


# Demo orders made at the sandbox's first start (external_id, amount, charged in full):
# Authorized ones to charge or cancel, Charged ones to refund (jobs/charges.yaml,
# jobs/cancels.yaml, jobs/refunds.yaml use them).
DEMO_MERCHANT = "acme-shop"
DEMO_PAGE = "card-eur"
DEMO_ORDERS = [
    ("demo-order-1", D("120.00"), False),
    ("demo-order-2", D("80.00"), False),
    ("demo-order-3", D("60.00"), False),
    ("demo-order-4", D("150.00"), True),
    ("demo-order-5", D("45.50"), True),
]
