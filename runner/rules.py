"""The provider's field rules, read one way everywhere.

Requirement lists are "arrays of arrays": the outer list holds alternatives; an inner list
holds fields that must all be present; a party is complete when one alternative is. Dates are
ISO 8601, countries ISO 3166-1 alpha-3, currencies ISO 4217. Job validation and the sandbox
both use this module, so runner refuses exactly what the provider would.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import date
from functools import cache
from typing import Any

import pycountry

ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# pycountry finds codes whatever their case; the provider takes upper case only.
ALPHA3 = re.compile(r"^[A-Z]{3}$")
DATE_FIELDS = ("date_of_birth", "id_delivery_date", "id_expiration_date")
COUNTRY_FIELDS = ("country_iso_code", "nationality_country_iso_code", "country_of_birth_iso_code",
                  "id_country_iso_code")
ENUMS = {
    "gender": {"MALE", "FEMALE"},
    "id_type": {"PASSPORT", "NATIONAL_ID", "DRIVING_LICENSE", "SOCIAL_SECURITY", "TAX_ID",
                "SENIOR_CITIZEN_ID", "BIRTH_CERTIFICATE", "VILLAGE_ELDER_ID", "RESIDENT_CARD",
                "ALIEN_REGISTRATION", "PAN_CARD", "VOTERS_ID", "HEALTH_CARD", "EMPLOYER_ID",
                "OTHER"},
    "source_of_funds": {"CASH", "BUSINESS", "GIFT", "SALARY", "LOTTERY", "SAVINGS", "OTHER"},
    "account_type": {"CHECKING", "SAVINGS"},
}


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


@cache
def is_country(code: str) -> bool:
    return bool(ALPHA3.match(code)) and pycountry.countries.get(alpha_3=code) is not None


@cache
def is_currency(code: str) -> bool:
    return bool(ALPHA3.match(code)) and pycountry.currencies.get(alpha_3=code) is not None


def is_iso_date(value: str) -> bool:
    if not ISO_DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def party_problems(values: Mapping[str, Any], enums: Sequence[str] = ()
                   ) -> Iterator[tuple[str, str]]:
    """(field, message) for each date, country or enumerated value the provider would refuse."""
    for name in DATE_FIELDS:
        value = values.get(name)
        if present(value) and not is_iso_date(str(value)):
            yield name, f"{value!r} is not an ISO 8601 date (YYYY-MM-DD)"
    for name in COUNTRY_FIELDS:
        value = values.get(name)
        if present(value) and not is_country(str(value)):
            yield name, f"{value!r} is not an ISO 3166-1 alpha-3 country code"
    for name in enums:
        value = values.get(name)
        if present(value) and value not in ENUMS[name]:
            yield name, f"must be one of {', '.join(sorted(ENUMS[name]))}"
