"""Parties, as the money transfer and merchant payment services check them: the payer's (or
payment method's) requirement lists, ISO dates, countries and enumerations, field by field
(runner/rules.py, which job validation reads too), and the documented test triggers.

A trigger is chosen by the last six digits of the first party identifier value that has
digits, like a card network's test numbers (the table is in core/statuses.py).

Who holds an account (what credit and debit party information answers): the known parties of
the catalogue, and every other account the first time a verification names its holder (an
account is opened once: the first name given stays its holder's, whatever later rows say).
The test values make the payee checks' findings: 999401 no such account, 999402 a closed
one, 999403 a check that fails (500), 999411 an account held under a name a letter off the
one given (a close match), 999412 one held by somebody else (no match).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from runner import rules
from runner.sandbox.core.catalogue import KNOWN_PARTIES
from runner.sandbox.core.errors import ApiError

UNREGISTERED, UNAVAILABLE, FAILING = "999401", "999402", "999403"
CLOSE, SOMEBODY_ELSE = "999411", "999412"
OTHER_HOLDER = ("Ines", "Valderrama")  # who holds the accounts ending 999412
_VOWELS = {"a": "e", "e": "a", "i": "y", "o": "u", "u": "o", "y": "i"}


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


def account_key(identifier: dict[str, Any]) -> str:
    """The account an identifier names, as the holders' register keys it."""
    return "|".join(f"{k}={v}" for k, v in sorted(identifier.items()) if v is not None)


def holder_of(holders: dict[str, list[str]], identifier: dict[str, Any]
              ) -> tuple[str, str] | None:
    """(first name, last name) of who holds the account: a known party of the catalogue
    (by any one of the values), else whoever the register holds; None: no such account."""
    if trigger_of(identifier) in (UNREGISTERED, FAILING):
        return None
    for value in identifier.values():
        if value in KNOWN_PARTIES:
            return KNOWN_PARTIES[value]
    held = holders.get(account_key(identifier))
    return (held[0], held[1]) if held else None


def account_status(identifier: dict[str, Any]) -> str:
    return {UNREGISTERED: "UNREGISTERED", UNAVAILABLE: "UNAVAILABLE"}.get(
        trigger_of(identifier) or "", "AVAILABLE")


def fail_on_test_value(identifier: dict[str, Any], merchant: bool = False) -> None:
    """The test value of a check that fails: 500, nothing learnt."""
    if trigger_of(identifier) == FAILING:
        raise ApiError("1009001", "the party check failed", merchant=merchant)


def named_holder(identifier: dict[str, Any], party: dict[str, Any]) -> tuple[str, str] | None:
    """Who an account that a verification names for the first time is held by: the names
    given, or, for the test values, a close variant of them or somebody else."""
    first, last = party.get("firstname") or "", party.get("lastname") or ""
    if account_status(identifier) == "UNREGISTERED" or not (first or last):
        return None
    trigger = trigger_of(identifier)
    if trigger == SOMEBODY_ELSE:
        return OTHER_HOLDER
    if trigger == CLOSE:
        return (first, _letter_off(last)) if last else (_letter_off(first), last)
    return first, last


def _letter_off(name: str) -> str:
    """The name with its last vowel changed (Kamau -> Kamao), or an s added."""
    for i in range(len(name) - 1, -1, -1):
        swap = _VOWELS.get(name[i].lower())
        if swap is not None:
            return name[:i] + (swap.upper() if name[i].isupper() else swap) + name[i + 1:]
    return name + "s"
