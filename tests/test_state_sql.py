"""Each backend's SQL, in its own dialect, one file each (runner/state/sql): the same names
in both (but the few only PostgreSQL needs: its locks and its
sequences), and every SQLite statement prepared against a state at runner's schema, so that
a misspelt column or a parameter in the other dialect's style fails here, not mid-run."""

from __future__ import annotations

import re
import sqlite3

import pytest
from sqlite_utils import Database

from runner.state.records import COLUMNS
from runner.state.sql import Queries
from runner.state.sqlite_schema import migrations

POSTGRESQL_ONLY = {"lock", "lock_session", "unlock_session", "reset_ids"}


def test_both_dialects_name_the_same_statements() -> None:
    sqlite, postgresql = Queries("sqlite").entries, Queries("postgresql").entries
    assert set(postgresql) - set(sqlite) == POSTGRESQL_ONLY
    assert set(sqlite) <= set(postgresql)
    assert not any("%(" in s for q in sqlite.values() for s in q)
    assert not any(re.search(r"(?<![:\w]):[a-z_]+\b", s) for q in postgresql.values() for s in q)


def test_every_sqlite_statement_is_prepared_against_runners_schema() -> None:
    db = Database(memory=True)
    migrations.apply(db)
    sql = Queries("sqlite")
    for name, statements in sql.entries.items():
        slots = {"changes": ("step", "outcome")} if any(
            "{changes}" in s for s in statements) else {}
        if any("{table}" in s for s in statements):
            slots = {"table": "items", "columns": COLUMNS}
        if any("{columns}" in s and "{table}" not in s for s in statements):
            slots = {"columns": ("external_id", "row")}
        for statement in sql(name, **slots):
            names = dict.fromkeys(re.findall(r":(\w+)", statement))
            marks = statement.count("?")
            try:
                db.conn.execute("EXPLAIN " + statement, list(names) and names or [None] * marks)
            except sqlite3.Error as exc:
                pytest.fail(f"{name}: {exc}\n{statement}")


def test_a_change_names_item_columns_only() -> None:
    with pytest.raises(ValueError, match="not an item column"):
        Queries("sqlite")("update_item", changes=("step", "claimed_by"))
    with pytest.raises(ValueError, match="not a column or table name"):
        Queries("postgresql")("update_item", changes=("step = 1; DROP TABLE items --",))
    assert Queries("postgresql")("update_item", changes=())[0].startswith(
        "UPDATE items SET updated_at = %(updated_at)s")
