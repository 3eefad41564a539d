"""Money as accountants write it, for every place a person reads an amount: ``EUR 1,500.50``,
``JPY 1,500``, ``KWD 1.500``; and as machines read it, for the CSV: ``1500.50``.

An amount is shown at its currency's decimals (ISO 4217, through babel's CLDR data, rather
than a table typed here): padded when it has fewer (``1500.5`` is ``1,500.50``), never
rounded when it has more, since a digit dropped from an amount on a payment report is a
difference someone has to chase. A code babel does not know gets two decimals.
"""

from __future__ import annotations

import functools
from decimal import Decimal

from babel.numbers import format_currency, get_currency_precision

_LOCALE = "en"  # grouping with commas, a point before the decimals


@functools.lru_cache(maxsize=512)  # once per currency, not once per amount of the CSV
def decimals(currency: str) -> int:
    """The digits after the point of ``currency`` (JPY 0, EUR 2, KWD 3)."""
    return int(get_currency_precision(currency.upper())) if currency else 2


def money_text(amount: Decimal | None, currency: str = "") -> str:
    """``EUR 1,500.50``; without a currency, the grouped number at its own decimals."""
    return _formatted(amount, currency, "¤¤ #,##0.00")


def number_text(amount: Decimal | None, currency: str = "") -> str:
    """``1,500.50``: as ``money_text``, where the currency is said beside it already."""
    return _formatted(amount, currency, "#,##0.00")


def _formatted(amount: Decimal | None, currency: str, pattern: str) -> str:
    if amount is None:
        return ""
    if not currency:
        return f"{amount:,}"
    return str(format_currency(amount, currency.upper(), format=pattern, locale=_LOCALE,
                               decimal_quantization=False))


def plain_amount(amount: Decimal | None, currency: str = "") -> str:
    """``1500.50``: no grouping, at least the currency's decimals (for the CSV)."""
    if amount is None:
        return ""
    if not currency:
        return str(amount)
    places = decimals(currency)
    exponent = amount.as_tuple().exponent
    if isinstance(exponent, int) and -exponent >= places:
        return f"{amount:f}"
    return f"{amount.quantize(Decimal(1).scaleb(-places)):f}"
