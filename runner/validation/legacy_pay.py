"""Checks of ``legacy_pay`` items that need no provider: the legacy Pay offers no catalogue
to read (which payment pages exist, which take cards), so what can be known before the call
is checked here, and the rest is the provider's to refuse (2000 or 2500, nothing made).

- ``Amount`` greater than 0 (the item model) with at most 2 decimals; ``Currency`` ISO 4217.
- Credentials: at least one; each ``credential_env`` set in the environment. A card
  (``CardNumber``) needs ``Cvv`` and ``Exp``: a number of 12 to 19 digits passing the Luhn
  check, a CVV of 3 or 4 digits, an expiry ``YYYYMM`` with a real month, not in the past.
- ``MerchantUrls`` absolute http(s) URLs, ``MerchantOrder.Customer.Email`` an e-mail address.

Messages name the field and never repeat a credential's value.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from runner import rules
from runner.cards import luhn
from runner.job.merchant_payment import LegacyPayItem
from runner.money import fits
from runner.validation.catalogue import Catalogue

Problems = Iterator[tuple[str, str]]
CENT = Decimal("0.01")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def check_legacy_pay(item: LegacyPayItem, catalogue: Catalogue | None = None,
                     environ: Mapping[str, str] | None = None,
                     now: float | None = None) -> Problems:
    if not fits(item.Amount, 2, CENT):
        yield "Amount", f"{item.Amount} has more than 2 decimals"
    if not rules.is_currency(item.Currency):
        yield "Currency", f"{item.Currency!r} is not an ISO 4217 currency code"
    for name, url in item.MerchantUrls.model_dump(exclude_none=True).items():
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            yield f"MerchantUrls.{name}", f"{url!r} is not an absolute http(s) URL"
    customer = item.MerchantOrder.Customer
    if customer is not None and customer.Email is not None and not EMAIL.fullmatch(
            customer.Email):
        yield "MerchantOrder.Customer.Email", f"{customer.Email!r} is not an e-mail address"
    yield from _credentials(item, environ, time.time() if now is None else now)


def _credentials(item: LegacyPayItem, environ: Mapping[str, str] | None,
                 now: float) -> Problems:
    if not item.Credentials:
        yield "Credentials", "at least one credential is required (a card: CardNumber, Cvv " \
                             "and Exp; or a registered one: qrcode, technicalTransactionId)"
        return
    values: dict[str, tuple[int, str]] = {}
    for index, credential in enumerate(item.Credentials):
        value = credential.value() if environ is None else credential.value(environ)
        if value is None:
            yield (f"Credentials.{index}.credential_env",
                   f"environment variable {credential.credential_env} is not set")
            continue
        values[credential.name] = (index, value)
    if "CardNumber" not in values:
        return
    yield from _card(values)
    at = values.get("Exp")
    if at is not None:
        yield from _expiry(*at, now)


def _card(values: dict[str, Any]) -> Problems:
    index, number = values["CardNumber"]
    where = f"Credentials.{index}.credential"
    if not (re.fullmatch(r"\d{12,19}", number) and luhn(number)):
        yield where, "CardNumber is not a card number (12 to 19 digits, Luhn check)"
    for name in ("Cvv", "Exp"):
        if name not in values:
            yield "Credentials", f"a card needs {name} beside CardNumber"
    if "Cvv" in values and not re.fullmatch(r"\d{3,4}", values["Cvv"][1]):
        yield f"Credentials.{values['Cvv'][0]}.credential", "Cvv must be 3 or 4 digits"


def _expiry(index: int, value: str, now: float) -> Problems:
    where = f"Credentials.{index}.credential"
    if not re.fullmatch(r"\d{6}", value) or not 1 <= int(value[4:]) <= 12:
        yield where, "Exp must be the expiry year and month as six digits (YYYYMM)"
        return
    today = time.gmtime(now)
    if (int(value[:4]), int(value[4:])) < (today.tm_year, today.tm_mon):
        yield where, "the card has expired (Exp is in the past)"


def legacy_pay_amount(item: LegacyPayItem, catalogue: Catalogue | None
                      ) -> tuple[str, Decimal] | None:
    return item.Currency, item.Amount
