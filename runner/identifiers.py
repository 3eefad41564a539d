"""Account identifiers in their canonical form: one account however it is written.

A person's wallet is ``+254700000001``, ``254700000001`` (a spreadsheet dropped the ``+``),
``00254700000001`` (an international prefix) or ``0700 000 001`` (national, in Kenya); an
IBAN comes with spaces or without, in either case. Wherever runner matches an account (two
items of a batch paying the same: ``runner.kinds.same``; a payee accepted before:
``runner.payees.checks``; the provider's answer against what was sent: ``runner.engine``),
it compares these forms:

- a phone number (``PHONE_FIELDS``) as E.164 (``+254700000001``), read by Google's
  libphonenumber (the ``phonenumbers`` package: every country's calling code, trunk prefix
  and number lengths): ``00`` taken for ``+``; without either, the number is read in the
  item's country when the row gives one, else as international when it is a possible number
  once a ``+`` is put before it; a number that reads as none of these is compared by its
  digits;
- any other identifier (an account number, an IBAN, a BIC, a card number, an id) without
  spaces, dots, dashes, slashes and brackets, case aside.

Digits of other scripts (fullwidth ``２５４``, Arabic-Indic ...) never get here: validation
refuses them in any identifier (``ASCII_FIELDS``), naming the row and the field, since the
provider would not read them as the digits they look like.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import phonenumbers
import pycountry

from runner.rules import PHONE_FIELDS

#: The fields that name an account, a card or a phone: ASCII only.
ASCII_FIELDS = PHONE_FIELDS | frozenset({
    "bank_account_number", "account_number", "iban", "swift_bic_code", "bic", "clabe",
    "bik_code", "ifs_code", "sort_code", "aba_routing_number", "bsb_number", "branch_number",
    "routing_code", "bank_routing_code", "bank_branch_code", "card_number",
    "payout_bank_account_id", "source_account_id", "target_account_id"})
_SEPARATORS = re.compile(r"[\s.\-/()]+")


def compact(value: Any) -> str:
    """An identifier as compared: without separators, case aside."""
    return _SEPARATORS.sub("", str(value)).casefold()


def canonical(field: str, value: Any, country: str | None = None) -> str:
    """``value`` of the identifier ``field`` as compared; ``country``: the item's (ISO 3166
    alpha-3), to read a national phone number."""
    if field in PHONE_FIELDS:
        return phone(str(value), country)
    return compact(value)


@lru_cache(maxsize=4096)
def phone(value: str, country: str | None = None) -> str:
    """A phone number in E.164 (``+254700000001``) when it reads as one, else its digits."""
    text = _SEPARATORS.sub("", value)
    if text.startswith("00"):
        text = "+" + text[2:]
    region = _region(country) if country else None
    tries = [(text, None)] if text.startswith("+") else \
        [(text, region)] if region else [("+" + text, None)]
    for number, where in tries:
        try:
            parsed = phonenumbers.parse(number, where)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_possible_number(parsed):
            return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)
    return text.casefold()


@lru_cache(maxsize=256)
def _region(alpha3: str) -> str | None:
    found = pycountry.countries.get(alpha_3=alpha3) if len(alpha3) == 3 else None
    return found.alpha_2 if found is not None else None


def not_ascii(text: str) -> str | None:
    """Why an identifier cannot be sent as it is written (a character outside ASCII,
    described, fullwidth and other scripts' digits among them); None when it can."""
    if text.isascii():
        return None
    at = next(i for i, c in enumerate(text) if not c.isascii())
    char = text[at]
    what = "a digit of another script" if char.isdigit() else "a character outside ASCII"
    return (f"holds {what} (U+{ord(char):04X}) at character {at + 1}; account numbers, "
            f"phone numbers and codes are written with 0-9 and A-Z")
