"""Pydantic's validation errors, told as a person fixing a job file needs them.

Both the job model and the item models report through ``explain``: one (location, message)
per problem, with the dotted field path, the document's own wording for its conditions
(see ``FieldProblem``), a "did you mean" for a mistyped key or value, and never a secret.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, SecretStr, ValidationError
from pydantic_core import ErrorDetails

from runner.errors import FieldProblem
from runner.job.document import Location

# Fields whose input is never repeated in a message: keys, passwords, legacy Pay credentials.
_SECRET_PARTS = {"api_key", "api_secret", "password", "credential", "credential_env"}


def explain(
    exc: ValidationError,
    model: type[BaseModel],
    keep: Callable[[ErrorDetails], bool] | None = None,
) -> list[tuple[Location, str]]:
    """Each problem of ``exc`` (those ``keep`` accepts) as (location in the input, message)."""
    problems: list[tuple[Location, str]] = []
    for error in exc.errors(include_url=False):
        if keep is not None and not keep(error):
            continue
        location: Location = tuple(error["loc"])
        kind = error["type"]
        context = error.get("ctx") or {}
        cause = context.get("error")
        if isinstance(cause, FieldProblem):
            location += tuple(int(p) if p.isdigit() else p for p in cause.field.split("."))
            message = str(cause)
        elif kind in ("value_error", "assertion_error") and cause is not None:
            message = str(cause)
        elif kind == "missing":
            message = "required, but missing"
        elif kind == "extra_forbidden":
            message = "unknown key" + _suggest(str(location[-1]), keys_at(model, location[:-1]))
        elif kind in ("literal_error", "enum"):
            choices = re.findall(r"'([^']*)'", str(context.get("expected", "")))
            message = (f"{error['input']!r} is not one of {', '.join(choices)}"
                       + _suggest(str(error["input"]), choices, listing=False))
        elif kind == "too_short" and _is_empty_text(error["input"]):
            message = "must not be empty"  # not "at least 1 item", as pydantic words secrets
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            message = "should be a mapping of keys to values"
        else:
            message = error["msg"] + _shown_input(error["input"], location)
        problems.append((location, message))
    return problems


def suggestion(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` when ``word`` is close to one of ``choices``, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _suggest(word: str, choices: list[str], listing: bool = True) -> str:
    hint = suggestion(word, choices)
    if hint or not listing or not choices:
        return hint
    return f"; expected one of: {', '.join(choices)}"


def _is_empty_text(value: Any) -> bool:
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    return isinstance(value, str) and not value


def _shown_input(value: Any, location: Location) -> str:
    if _SECRET_PARTS.intersection(str(part) for part in location):
        return ""
    if isinstance(value, bool | int | Decimal) or (isinstance(value, str) and len(value) <= 40):
        return f", got {value!r}"
    return ""


def keys_at(model: type[BaseModel], location: Location) -> list[str]:
    """The keys the model accepts at ``location`` (list indexes skipped), for suggestions."""
    current: type[BaseModel] | None = model
    for part in location:
        if current is None:
            return []
        if isinstance(part, int):
            continue
        field = _field(current, part)
        current = None if field is None else _model_in(field.annotation)
    if current is None:
        return []
    return [field.alias or name for name, field in current.model_fields.items()]


def _field(model: type[BaseModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The one model inside ``X``, ``X | None``, ``list[X]`` or ``Annotated[X, ...]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, typing.Annotated):
        found = {m for arg in typing.get_args(annotation) if (m := _model_in(arg)) is not None}
        return found.pop() if len(found) == 1 else None
    return None
