"""Decimal money rules shared by job validation and the sandbox.

Providers state amounts as a precision (digits after the point) and an increment (the unit
amounts must be a multiple of). Both sides of the wire use these helpers, so what runner
accepts at validation is exactly what the sandbox accepts at quotation time.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Decimal, InvalidOperation


def to_decimal(value: object) -> Decimal:
    """Read an amount without ever passing through a binary float."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool) or value is None:
        raise InvalidOperation(f"not an amount: {value!r}")
    if isinstance(value, int | str):
        return Decimal(value)
    raise InvalidOperation(f"not an amount: {value!r}")


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
