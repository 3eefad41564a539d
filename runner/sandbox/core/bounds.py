"""What a request may carry, bounded: the sandbox refuses anything larger in the documents'
words (400, or 413 for a body) and never answers 5xx to it.

- a body of at most ``SandboxConfig.max_body_bytes`` (core/guard.py answers 413 beyond);
- JSON and XML nested at most ``MAX_DEPTH`` deep (the documents' deepest object is 4);
- text values of at most ``MAX_TEXT`` characters, external ids and references of at most
  ``MAX_REFERENCE`` (the ``Reference`` type of the request models);
- numbers finite, with at most ``MAX_INTEGER_DIGITS`` digits before the decimal point and
  ``MAX_FRACTION_DIGITS`` after it (``1e999999`` is refused, not computed with);
- ids in paths written with ASCII digits only, at most ``MAX_ID_DIGITS`` of them (``³``,
  ``１`` or 5,000 digits name nothing: ``number``, and the ``Id`` type of path parameters).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Annotated, Any

import simplejson
from pydantic import BaseModel, BeforeValidator, Field, field_validator
from starlette.exceptions import HTTPException

MAX_DEPTH = 32
MAX_TEXT = 4096
MAX_REFERENCE = 255
MAX_INTEGER_DIGITS = 18
MAX_FRACTION_DIGITS = 20
MAX_ID_DIGITS = 18
DIGITS = rf"[0-9]{{1,{MAX_ID_DIGITS}}}"
_ID = re.compile(DIGITS)


class BodyRefused(HTTPException):
    """A body outside the bounds, or not JSON at all; each dialect words it as the invalid
    request it is (``field`` is a dotted path, ``body`` for the whole of it). An
    HTTPException, so that FastAPI passes it through from reading the body."""

    def __init__(self, field: str, problem: str, kind: str = "value_error") -> None:
        super().__init__(400, problem)
        self.field = field
        self.problem = problem
        self.kind = kind  # "json_invalid": not JSON; "nesting": too deep; else a value


def number(text: str) -> int | None:
    """The id ``text`` writes, when it is ASCII digits of bounded length; else None."""
    return int(text) if _ID.fullmatch(text) else None


def _ascii_id(value: Any) -> Any:
    if isinstance(value, str) and not _ID.fullmatch(value):
        raise ValueError(f"must be 1 to {MAX_ID_DIGITS} ASCII digits")
    return value


# A numeric id in a path: ASCII digits only (pydantic alone would take "1_0", " 5", "+5").
Id = Annotated[int, BeforeValidator(_ascii_id)]
# An external id or reference in a request body.
Reference = Annotated[str, Field(min_length=1, max_length=MAX_REFERENCE)]


def read_json(raw: bytes) -> Any:
    """A JSON body with exact decimals, within the bounds (BodyRefused otherwise)."""
    try:
        found = simplejson.loads(raw, use_decimal=True)
    except (ValueError, RecursionError):  # JSONDecodeError, a 5,000-digit integer, nesting
        raise BodyRefused("body", "the body is not valid JSON", "json_invalid") from None
    check(found)
    return found


def check(value: Any) -> None:
    """Raise BodyRefused, naming the field, for the first value outside the bounds."""
    for path, depth, found in _walk(value):
        if depth > MAX_DEPTH:
            raise BodyRefused(path or "body", f"nested more than {MAX_DEPTH} deep", "nesting")
        problem = _problem(found)
        if problem:
            raise BodyRefused(path or "body", problem)


def _walk(value: Any) -> Iterator[tuple[str, int, Any]]:
    """(dotted path, depth, value) of every value, without recursion."""
    stack: list[tuple[str, int, Any]] = [("", 0, value)]
    while stack:
        path, depth, found = stack.pop()
        yield path, depth, found
        if depth > MAX_DEPTH:
            return
        if isinstance(found, dict):
            stack.extend((f"{path}.{k}" if path else str(k), depth + 1, v)
                         for k, v in found.items())
        elif isinstance(found, list):
            stack.extend((f"{path}.{i}" if path else str(i), depth + 1, v)
                         for i, v in enumerate(found))


OUT_OF_RANGE = (f"a number must be finite, with at most {MAX_INTEGER_DIGITS} digits before "
                f"the decimal point and {MAX_FRACTION_DIGITS} after it")


def _problem(value: Any) -> str | None:
    if isinstance(value, str):
        return f"at most {MAX_TEXT} characters" if len(value) > MAX_TEXT else None
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return None
    return None if in_range(Decimal(value)) else OUT_OF_RANGE


class Bounded(BaseModel):
    """A request model whose numbers are in range however they were written: a JSON number
    is checked as the body is read (``check``), and this also catches a number given as
    text (``"1e999999"``), which the models turn into a Decimal."""

    @field_validator("*", mode="after")
    @classmethod
    def _numbers_in_range(cls, value: Any) -> Any:
        for found in _decimals(value):
            if not in_range(found):
                raise ValueError(OUT_OF_RANGE)
        return value


def _decimals(value: Any) -> Iterator[Decimal]:
    if isinstance(value, Decimal):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _decimals(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _decimals(item)


def in_range(value: Decimal) -> bool:
    """A number the sandbox computes with: finite, and of bounded size and precision."""
    if not value.is_finite():
        return False
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    return value.adjusted() < MAX_INTEGER_DIGITS and exponent >= -MAX_FRACTION_DIGITS
