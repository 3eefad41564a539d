"""The provider's "array of arrays" requirement lists, read one way everywhere.

The outer list holds alternatives; an inner list holds fields that must all be present. A
party is complete when one alternative is. Job validation and the sandbox both use this
module, so runner refuses exactly what the provider would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
ALPHA3 = re.compile(r"^[A-Z]{3}$")


def present(value: Any) -> bool:
    return value is not None and str(value).strip() != ""


def satisfied(values: Mapping[str, Any], alternatives: Sequence[Sequence[str]]) -> bool:
    if not alternatives:
        return True
    return any(all(present(values.get(f)) for f in alt) for alt in alternatives)


def missing(values: Mapping[str, Any], alternatives: Sequence[Sequence[str]]) -> list[str]:
    """The fields still missing from the alternative closest to complete ([] when satisfied)."""
    if satisfied(values, alternatives):
        return []
    gaps = [[f for f in alt if not present(values.get(f))] for alt in alternatives]
    return min(gaps, key=len)


def describe(alternatives: Sequence[Sequence[str]]) -> str:
    """``msisdn`` or ``bank_account_number + swift_bic_code`` alternatives, in words."""
    return " or ".join(" + ".join(alt) for alt in alternatives)
