"""Checks of the collection service's payment requests (document 1): references, merchants,
payment pages, amounts, URLs, e-mail addresses and cards. The legacy Pay makes the same
checks (legacy_pay/models.py).

Card data is never kept: only the last four digits, and the test card's effect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from runner.cards import luhn
from runner.sandbox.core.errors import ApiError
from runner.sandbox.core.store import Store
from runner.sandbox.onboarding import models as records
from runner.sandbox.payment_orders import catalogue as pc

ORDER_ID = re.compile(r"PO[0-9]{10}")
QUOTATION_ID = re.compile(r"QT[0-9]{10}")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
MSISDN = re.compile(r"\+?[0-9]{8,15}")


# ---------------------------------------------------------------- references
def reused(external_id: str) -> ApiError:
    """2001201, worded as the other services word their reused external ids."""
    error = ApiError("2001201")
    error.message = f"External ID has already been used: {external_id}"
    return error


def find(store: Store, table: str, ref: str, pattern: re.Pattern[str]) -> int | None:
    """A ref of the id form is an id; ``ext-X`` is the external id X; anything else is an
    external id as it stands."""
    if pattern.fullmatch(ref):
        rid = int(ref[2:])
        return rid if rid in store.tables[table] else None
    if ref.startswith("ext-"):
        ref = ref[4:]
    return store.by_ext[table].get(ref)


def merchant(store: Store, merchant_id: str | None, merchant_external_id: str | None,
             ) -> dict[str, Any]:
    """The merchant a create names (exactly one of the two fields): 1001001 when unknown,
    1000403 when it is another integrator's."""
    if (merchant_id is None) == (merchant_external_id is None):
        raise ApiError("2001101", "give exactly one of merchant_id and merchant_external_id")
    if merchant_id is not None:
        rid = records.find(store, "merchants", merchant_id)
        if rid is None or not records.looks_like_id("merchants", merchant_id):
            raise ApiError("1001001", f"merchant_id {merchant_id!r} does not exist")
        ref = merchant_id
    else:
        assert merchant_external_id is not None
        rid = store.by_ext["merchants"].get(merchant_external_id)
        if rid is None:
            raise ApiError("1001001", f"merchant_external_id {merchant_external_id!r} does "
                                      f"not exist")
        ref = merchant_external_id
    return store.tables["merchants"][records.allowed(store, "merchants", rid, ref)]


def page(page_id: str) -> pc.PaymentPage:
    found = pc.PAGES.get(page_id)
    if found is None:
        raise ApiError("1001001", f"payment_page_id {page_id!r} does not exist")
    return found


# ---------------------------------------------------------------- field checks
def amount(value: Decimal, currency: str, field: str) -> Decimal:
    places = pc.digits(currency)
    if not value.is_finite() or value <= 0:
        raise ApiError("2001101", f"{field} must be a positive amount")
    if value != value.quantize(Decimal(1).scaleb(-places)):
        raise ApiError("2001101", f"{field} has more than {places} decimals for {currency}")
    return value


def url(value: str | None, field: str) -> None:
    if value is not None:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ApiError("2001101", f"{field} must be an absolute http or https URL")


def email(value: str | None, field: str) -> None:
    if value is not None and not EMAIL.fullmatch(value):
        raise ApiError("2001101", f"{field} is not a valid e-mail address")


@dataclass(frozen=True)
class Card:
    last4: str
    brand: str
    test: str | None  # the effect of a test card number (catalogue.TEST_CARDS)


def card(number: str, cvv: str | None, month: str | None, year: str | None, now: float,
         names: dict[str, str]) -> Card:
    """Check card data; ``names`` gives the field names to use in messages. Neither the
    number nor the CVV ever appears in a message."""
    digits = number.replace(" ", "")
    if not ascii_digits(digits) or not 12 <= len(digits) <= 19 or not luhn(digits):
        raise ApiError("2001101", f"{names['number']} is not a valid card number")
    if cvv is None or not (ascii_digits(cvv) and len(cvv) in (3, 4)):
        raise ApiError("2001101", f"{names['cvv']} must be 3 or 4 digits")
    if month is None or not ascii_digits(month) or len(month) > 2 \
            or not 1 <= int(month) <= 12:
        raise ApiError("2001101", f"{names['month']} must be a month, 1 to 12")
    if year is None or not ascii_digits(year) or len(year) not in (2, 4):
        raise ApiError("2001101", f"{names['year']} must be a year (2 or 4 digits)")
    full_year = int(year) + (2000 if len(year) == 2 else 0)
    today = datetime.fromtimestamp(now, UTC)
    if (full_year, int(month)) < (today.year, today.month):
        raise ApiError("2001101", f"{names['year']}: the card has expired")
    brand = {"4": "VISA", "5": "MASTERCARD", "3": "AMEX"}.get(digits[0], "CARD")
    return Card(digits[-4:], brand, pc.TEST_CARDS.get(digits))


def ascii_digits(text: str) -> bool:
    """Digits 0-9 only (``str.isdigit`` also takes ``³`` and ``１``)."""
    return text.isascii() and text.isdigit()
