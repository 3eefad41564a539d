"""Parties, as the money transfer and merchant payment services check them: the payer's (or
payment method's) requirement lists, ISO dates, countries and enumerations, field by field
(runner/rules.py, which job validation reads too), and the documented test triggers.

A trigger is chosen by the last six digits of the first party identifier value that has
digits, like a card network's test numbers (the table is in core/statuses.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from runner import rules
from runner.sandbox.core.catalogue import KNOWN_PARTIES
from runner.sandbox.core.errors import ApiError

UNREGISTERED, UNAVAILABLE = "999401", "999402"


def require_alternatives(values: Mapping[str, Any], alternatives: Sequence[Sequence[str]],
                         where: str, merchant: bool = False) -> None:
    gaps = rules.missing(values, alternatives)
    if gaps:
        raise ApiError("1000999", f"{where}.{gaps[0]} is required (accepted: "
                                  f"{rules.describe(alternatives)})", merchant=merchant)


def check_party(values: Mapping[str, Any], where: str, merchant: bool = False,
                enums: Sequence[str] = ()) -> None:
    """ISO dates, ISO 3166 alpha-3 countries and the given enumerations, field by field."""
    for name, problem in rules.party_problems(values, enums):
        raise ApiError("1000999", f"{where}.{name} {problem}", merchant=merchant)


def trigger_of(identifier: dict[str, Any]) -> str | None:
    for value in identifier.values():
        if isinstance(value, str):
            digits = re.sub(r"\D", "", value)
            if digits:
                return digits[-6:]
    return None


def known_party(identifier: dict[str, Any]) -> tuple[str, str] | None:
    """(first name, last name) of the party the provider knows by one of these values."""
    for value in identifier.values():
        if value in KNOWN_PARTIES:
            return KNOWN_PARTIES[value]
    return None
