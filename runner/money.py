"""Decimal money rules shared by job validation and the sandbox.

Providers state amounts as a precision (digits after the point) and an increment (the unit
amounts must be a multiple of). Both sides of the wire use these helpers, so what runner
accepts at validation is exactly what the sandbox accepts at quotation time.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Decimal

import simplejson

#: Up to 999 trillion, to the millionth: more than any currency needs, and every sum of a
#: batch stays exact in Decimal's 28 digits.
INTEGER_DIGITS_MAX = 15
FRACTION_DIGITS_MAX = 6


def parse_amount(text: str) -> Decimal:
    """The exact amount ``text`` writes, read by the one grammar of amounts, wherever it
    comes from (a CSV cell, a JSON Lines number, a YAML number, a rendered template): ASCII
    digits with at most one point, within the digit bounds, spaces or tabs around, in one
    spelling: no plus sign (a minus is read, to be refused as not positive, or accepted
    where a negative amount is); nothing else, although ``Decimal()`` would take an
    exponent, ``_``, other scripts' digits, ``NaN``. A ValueError says what is wrong (the
    text shown at most 40 characters long)."""
    written = text.strip(" \t")
    digits = written[1:] if written[:1] == "-" else written
    integer, _, fraction = digits.partition(".")
    if not (digits.isascii() and (integer + fraction).isdigit()):
        raise ValueError(f"not a decimal amount: {shown(text)}{_hint(written)}")
    _within_bounds(len(integer), len(fraction))
    return Decimal(written)


def check_digits(amount: Decimal) -> Decimal:
    """``amount`` when it is finite and within the digit bounds of ``parse_amount``."""
    if not amount.is_finite():
        raise ValueError(f"not a finite amount: {amount}")
    _, digits, exponent = amount.as_tuple()
    assert isinstance(exponent, int)
    _within_bounds(max(len(digits) + exponent, 0), max(-exponent, 0))
    return amount


def _within_bounds(integer: int, fraction: int) -> None:
    if integer > INTEGER_DIGITS_MAX:
        raise ValueError(f"{integer} digits before the point; at most {INTEGER_DIGITS_MAX} "
                         "are allowed")
    if fraction > FRACTION_DIGITS_MAX:
        raise ValueError(f"{fraction} digits after the point; at most {FRACTION_DIGITS_MAX} "
                         "are allowed")


def shown(value: object, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters: messages never repeat a whole input."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(str(value))} characters)"


def _hint(text: str) -> str:
    if text.startswith("+"):
        return "; write it without a sign"
    if re.fullmatch(r"[+-]?[0-9]+,[0-9]+", text):
        return "; use a point as the decimal separator"
    if any(c.isdigit() and not "0" <= c <= "9" for c in text):
        return "; write the digits as 0-9"
    if "_" in text or "," in text or " " in text:
        return "; write the digits without _, commas or spaces"
    if re.fullmatch(r"[+-]?[0-9.]+[eE][+-]?[0-9]+", text):
        return "; write the digits out, without an exponent"
    return ""


def step(precision: int, increment: Decimal) -> Decimal:
    """The smallest allowed move of an amount: the increment, at least one unit of precision."""
    unit = Decimal(1).scaleb(-precision)
    return max(unit, increment)


def fits(amount: Decimal, precision: int, increment: Decimal) -> bool:
    """True when ``amount`` has at most ``precision`` decimals and is a multiple of
    ``increment``."""
    if not amount.is_finite() or amount != amount.quantize(Decimal(1).scaleb(-precision)):
        return False
    return amount % increment == 0


def round_down(amount: Decimal, precision: int, increment: Decimal) -> Decimal:
    """The largest allowed amount not above ``amount``."""
    unit = Decimal(1).scaleb(-precision)
    steps = (amount / increment).to_integral_value(rounding=ROUND_FLOOR)
    return (steps * increment).quantize(unit)


def round_up(amount: Decimal, precision: int, increment: Decimal) -> Decimal:
    """The smallest allowed amount not below ``amount``."""
    unit = Decimal(1).scaleb(-precision)
    steps = (amount / increment).to_integral_value(rounding=ROUND_CEILING)
    return (steps * increment).quantize(unit)


def cents(amount: Decimal, precision: int = 2) -> Decimal:
    """Round half up to ``precision`` decimals (fees, converted amounts)."""
    return amount.quantize(Decimal(1).scaleb(-precision), rounding=ROUND_HALF_UP)


def json_text(value: object) -> str:
    """``value`` as the JSON runner writes for people and their scripts (status, report,
    reconcile, plan, validate): every Decimal as its exact text (``"264923.88"``), never a
    JSON number, which most readers take for a binary float. Money goes beside its currency
    (each output's own fields say which)."""
    return simplejson.dumps(value, indent=2, use_decimal=False, default=_exact)


def _exact(value: object) -> str:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")
