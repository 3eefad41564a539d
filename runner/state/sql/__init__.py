"""Each backend's SQL, in its own dialect, in one file: ``sqlite.sql`` and ``postgresql.sql``
beside this module, the same names in both (as procrastinate keeps its ``queries.sql``).

A file is a list of entries: a line ``-- name --``, a few comment lines saying what it does,
then its SQL: one statement, or several (each ending with ``;`` at the end of a line) that
make one change together. ``Queries(dialect)(name)`` gives an entry's statements; the
connector of that dialect runs them (``runner.state.connector``).

A few entries have slots in braces, filled here from runner's own names (never from input,
and checked to be plain names): ``{changes}``, the columns one change of an item sets (each
``column = <parameter set_column>``, in the dialect's parameter style; when a change sets
``step``, ``intent`` or ``outcome``, the item moves, and ``state`` is set with them, from the
values the change sets, by ``runner.lifecycle``'s own expression; when it is due is the
queue's to say, not a move's), ``{moved}`` (the state read from an item's columns as they
are), ``{item_columns}`` and
``{item_marks}``, every column of an item, and ``{table}``, ``{columns}`` and ``{marks}`` for
`runner state copy`; ``{now}`` is the database's clock in seconds since the epoch (when an
item is due counts on it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Literal

from runner import lifecycle
from runner.state.records import COLUMNS

Dialect = Literal["sqlite", "postgresql"]
Statements = tuple[str, ...]

_ENTRY = re.compile(r"^-- (\w+) --$", re.M)
_NAME = re.compile(r"[a-z_][a-z0-9_]*")
# A named parameter, and a positional one, in each dialect's style.
_PARAMETER = {"sqlite": ":{}", "postgresql": "%({})s"}
_MARK = {"sqlite": "?", "postgresql": "%s"}
# A parameter read as text (PostgreSQL cannot tell the type of one only tested for NULL).
_TEXT = {"sqlite": "{}", "postgresql": "{}::text"}
# The database's clock, in seconds since the epoch (``items.due_at``).
_NOW = {"sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
        "postgresql": "extract(epoch FROM clock_timestamp())"}


class Queries:
    """The named statements of one dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.entries = _entries(dialect)

    def __call__(self, name: str, *, changes: Sequence[str] = (), table: str = "",
                 columns: Sequence[str] = ()) -> Statements:
        """The statements of ``name``, their slots filled (``changes``: the item columns a
        change sets; ``table`` and ``columns``: those of a copied table)."""
        return _rendered(self.dialect, name, tuple(changes), table, tuple(columns))


@cache
def _entries(dialect: Dialect) -> dict[str, Statements]:
    text = resources.files(__package__).joinpath(f"{dialect}.sql").read_text("utf-8")
    parts = _ENTRY.split(text)
    entries: dict[str, Statements] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        statements = tuple(s.strip() for s in "\n".join(lines).split(";\n") if s.strip())
        entries[name] = tuple(s.removesuffix(";") for s in statements)
    return entries


@cache
def _rendered(dialect: Dialect, name: str, changes: tuple[str, ...], table: str,
              columns: tuple[str, ...]) -> Statements:
    statements = _entries(dialect)[name]
    for given in (*changes, *columns, *([table] if table else [])):
        if not _NAME.fullmatch(given):
            raise ValueError(f"not a column or table name: {given!r}")
    if any(c not in COLUMNS for c in changes):
        raise ValueError(f"not an item column: {sorted(set(changes) - set(COLUMNS))}")
    parameter, mark = _PARAMETER[dialect], _MARK[dialect]
    sets = [f"{c} = {parameter.format('set_' + c)}" for c in changes]
    moved = {c: _TEXT[dialect].format(parameter.format("set_" + c))
             for c in changes if c in lifecycle.READ}
    if moved:  # the item moves: its state moves with it
        sets.append(f"state = {lifecycle.backfill(**moved)}")
    slots = {
        "{changes}": ", ".join(sets),
        "{moved}": lifecycle.backfill(),
        "{item_columns}": ", ".join(COLUMNS),
        "{item_marks}": ", ".join([mark] * len(COLUMNS)),
        "{table}": table,
        "{columns}": ", ".join(columns),
        "{marks}": ", ".join([mark] * len(columns)),
        "{now}": _NOW[dialect],
    }
    filled = []
    for statement in statements:
        if not changes:  # nothing but the stamp changes
            statement = statement.replace("{changes}, ", "")
        for slot, value in slots.items():
            statement = statement.replace(slot, value)
        filled.append(statement)
    return tuple(filled)

