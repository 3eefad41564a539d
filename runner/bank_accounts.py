"""Bank account numbers, wherever runner meets one: the IBAN (ISO 13616) and the BIC
(ISO 9362), checked by python-stdnum as job validation and the sandbox both read them.

A job file may write an IBAN as people print it (``FR76 3000 6000 ...``, any case): runner
checks it in that form and sends its electronic form (``compact_iban``), the one the provider
takes and stores; a BIC likewise (``compact_bic``). An IBAN's length and layout are those
of its country's register (a French IBAN has 27 characters); a BIC's country must be an
ISO 3166 country.
"""

from __future__ import annotations

import re

from stdnum import bic, iban, numdb
from stdnum.exceptions import InvalidChecksum, InvalidComponent, ValidationError

_LENGTHS = re.compile(r"(\d+)!")  # a register layout: 5!n5!n11!c2!n


def compact_iban(value: str) -> str:
    """The IBAN without spaces (or dashes, dots), in capitals: what is sent."""
    return iban.compact(value)


def compact_bic(value: str) -> str:
    """The BIC without spaces, in capitals: what is sent."""
    return bic.compact(value)


def iban_problem(value: str) -> str | None:
    """Why ``value`` is not an IBAN (None: it is), in words for a message."""
    number = compact_iban(value)
    if not number:
        return "it is empty"
    try:
        iban.validate(number)
    except InvalidChecksum:
        return "its check digits are wrong"
    except InvalidComponent:
        return f"{number[:2]!r} is not a country with IBANs"
    except ValidationError:
        return _layout(number)
    return None


def _layout(number: str) -> str:
    parts = numdb.get("iban").info(number)
    found = parts[0][1].get("bban") if parts else None
    if not found:
        return f"{number[:2]!r} is not a country with IBANs"
    length = 4 + sum(int(n) for n in _LENGTHS.findall(found))
    if len(number) != length:
        return f"an IBAN of {number[:2]} has {length} characters, this one {len(number)}"
    return f"not the layout of an IBAN of {number[:2]}"


def bic_problem(value: str) -> str | None:
    """Why ``value`` is not a BIC (None: it is): 8 or 11 letters and digits, an ISO 3166
    country in fifth and sixth place."""
    try:
        bic.validate(value)
    except InvalidComponent:
        return f"{value[4:6]!r} is not a country code (ISO 3166)"
    except ValidationError:
        return "not 8 or 11 letters and digits (bank, country, place, branch)"
    return None
