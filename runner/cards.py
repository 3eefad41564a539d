"""Card numbers, wherever runner meets one: the Luhn check, and masking to the last four.

Card numbers and CVVs are never stored: the validation checks them (``luhn``), the engine
keeps only their last four digits (``mask``), and the summary masks anything shaped like a
card number in the provider's texts.
"""

from __future__ import annotations


def luhn(digits: str) -> bool:
    """True when ``digits`` (ASCII digits only) pass the Luhn check of card numbers."""
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def mask(value: str) -> str:
    """All but the last four characters hidden."""
    return "*" * max(0, len(value) - 4) + value[-4:]
