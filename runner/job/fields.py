"""Field types shared by the job model and the ten item models.

Every model of a job file derives from ``JobModel``: unknown keys are errors (a typo in a
payment file must not be silently ignored), and numbers given where text is expected (a
postal code, a phone number typed without quotes) are taken as their text.

Amounts are ``Decimal`` end to end, read from their text by one grammar wherever they come
from (``runner.money.parse_amount``): the YAML loader reads ``12.50`` as ``Decimal("12.50")``
(see ``document``), CSV cells are text, JSON Lines numbers are read from their text (see
``rows``), and a binary ``float`` reaching an amount field is refused rather than rounded.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from runner.errors import FieldProblem
from runner.money import check_digits, parse_amount


class JobModel(BaseModel):
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True, frozen=True)


def exact_decimal(value: Any) -> Decimal:
    """An exact, finite Decimal from text, an int or a Decimal, by the one grammar of amounts
    (``runner.money.parse_amount``); ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"not a decimal amount: {value!r}")
    if isinstance(value, float):
        # A float has already lost the exact value the person wrote.
        raise ValueError(f"amounts must be written exactly, not as a binary float: {value!r}")
    if isinstance(value, Decimal):
        return check_digits(value)
    if isinstance(value, int | str):
        # An int comes from YAML or JSON, with at most 18 digits (more stay text there).
        return parse_amount(str(value))
    raise ValueError(f"not a decimal amount: {value!r}")


def _amount(value: Any) -> Decimal:
    number = exact_decimal(value)
    if number <= 0:
        raise ValueError(f"must be greater than 0, got {number}")
    return number


def _non_negative(value: Any) -> Decimal:
    number = exact_decimal(value)
    if number < 0:
        raise ValueError(f"must not be negative, got {number}")
    return number


_DECIMAL_TEXT = r"^[ \t]*[+-]?([0-9]{1,15}(\.[0-9]{0,6})?|\.[0-9]{1,6})[ \t]*$"
_DECIMAL_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "number"}, {"type": "string", "pattern": _DECIMAL_TEXT}]
}

#: An amount of money: an exact, finite decimal greater than zero.
Amount = Annotated[
    Decimal,
    BeforeValidator(_amount, json_schema_input_type=Any),
    Field(json_schema_extra=_DECIMAL_SCHEMA, description="exact decimal, greater than 0"),
]
#: A rate or fee: an exact, finite decimal, zero allowed.
Rate = Annotated[
    Decimal,
    BeforeValidator(_non_negative, json_schema_input_type=Any),
    Field(json_schema_extra=_DECIMAL_SCHEMA, description="exact decimal, not negative"),
]

_DURATION = re.compile(r"([0-9]{1,9}(?:\.[0-9]{1,6})?)[ \t]*(ms|s|m|h|d)?")
_UNIT_SECONDS: dict[str | None, Decimal] = {
    "ms": Decimal("0.001"), "s": Decimal(1), "m": Decimal(60), "h": Decimal(3600),
    "d": Decimal(86400), None: Decimal(1),
}


def parse_duration(value: Any) -> Decimal:
    """``"5m"`` -> ``Decimal(300)``: seconds, from a number and an optional unit.

    Units are ``ms``, ``s``, ``m``, ``h`` and ``d``; a bare number counts seconds.
    """
    if isinstance(value, bool) or isinstance(value, float):
        raise ValueError(f"not a duration: {value!r}; write it like 90s, 5m or 1h")
    if isinstance(value, int | Decimal):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"not a duration: {value!r}; write it like 90s, 5m or 1h")
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"not a duration: {value!r}; write it like 90s, 5m or 1h")
    return Decimal(match[1]) * _UNIT_SECONDS[match[2]]


#: A length of time in seconds, written ``90s``, ``5m``, ``1h`` or as a number of seconds.
Duration = Annotated[
    Decimal,
    BeforeValidator(parse_duration, json_schema_input_type=Any),
    Field(
        json_schema_extra={
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": r"^[0-9]{1,9}(\.[0-9]{1,6})?[ \t]*(ms|s|m|h|d)?$"},
            ]
        },
        description="seconds; or a number with a unit: ms, s, m, h, d (e.g. 5m)",
    ),
]

def _whole_number(value: Any) -> Any:
    if isinstance(value, str) and not re.fullmatch(r"[ \t]*[0-9]{1,16}[ \t]*", value):
        raise ValueError(f"not an id: {value[:40]!r}; the provider's ids are whole numbers "
                         "(digits 0-9)")
    return value


#: An id the provider gives as an integer (a payer's, a payment method's): it goes into URL
#: paths, so only digits, and no more than a JSON number holds exactly.
ProviderId = Annotated[int, BeforeValidator(_whole_number), Field(ge=1, le=2**53 - 1)]

#: Optional text, as the documents give most request fields.
Text = str | None


def require_amount(amount: Decimal | None, field: str, mode: str) -> None:
    """The quotation modes name which side carries the input amount; that side must."""
    if amount is None:
        raise FieldProblem(field, f"required when mode is {mode}")
