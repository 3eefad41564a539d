"""Card numbers, wherever runner meets one: the Luhn check (python-stdnum's, for job
validation, the summary and the sandbox alike), and masking to the last four.

Card numbers and CVVs are never stored: the validation checks them (``luhn``), the engine
keeps only their last four digits (``mask``), and the summary masks anything shaped like a
card number in the provider's texts.
"""

from __future__ import annotations

from stdnum import luhn as _luhn


def luhn(digits: str) -> bool:
    """True when ``digits`` (ASCII digits only) pass the Luhn check of card numbers."""
    return bool(digits) and _luhn.is_valid(digits)


def mask(value: str) -> str:
    """All but the last four characters hidden."""
    return "*" * max(0, len(value) - 4) + value[-4:]
