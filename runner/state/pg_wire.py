"""PostgreSQL's side of a change (``runner.state.postgres``): a connection spoken to as
SQLite is (``?`` parameters, amounts as exact text, rows as dicts), a transaction whose
COMMIT may be lost, several single-row changes joined into one statement, and the first
line of a driver's message as the errors say it."""

from __future__ import annotations

import re
import select
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, TypeVar

import psycopg
from psycopg.adapt import Dumper

from runner.errors import StateError, StateUnavailable, StateUnusable

T = TypeVar("T")
_IDS = re.compile(r"-?\d+")
# The statements that change one row: a new one, or one named by its key (the last
# parameter). Several of them on distinct rows are joined into one statement (``joined``).
_NEW_ROW = re.compile(r"\s*INSERT INTO (\w+) \([\w, ]+\) VALUES \([?, ]+\)\s*", re.S)
_KEYED_ROW = re.compile(r"\s*UPDATE (\w+) SET (?:(?! WHERE | FROM )[^;(])* "
                        r"WHERE (id|external_id) = \?\s*", re.S)


class DecimalText(Dumper):
    """Amounts are stored as their exact text, as in SQLite."""

    oid = psycopg.adapters.types["text"].oid

    def dump(self, obj: Decimal) -> bytes:
        return str(obj).encode()


class Tx:
    """One connection inside one transaction, spoken to as SQLite is: ``?`` parameters."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        return self.conn.execute(sql.replace("?", "%s"), list(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), rows)

    def dicts(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cursor = self.execute(sql, params)
        if cursor.description is None:
            return []
        names = [d.name for d in cursor.description]
        return [dict_row(names, values) for values in cursor.fetchall()]


def dict_row(names: list[str], values: Sequence[Any]) -> dict[str, Any]:
    row = dict(zip(names, values, strict=True))
    for name in ("quotation_id", "transaction_id"):  # SQLite's integer affinity
        value = row.get(name)
        if isinstance(value, str) and _IDS.fullmatch(value):
            row[name] = int(value)
    return row


def committed(conn: psycopg.Connection[Any], work: Callable[[Tx], T], location: str) -> T:
    """``work`` between BEGIN and COMMIT; a COMMIT whose answer was lost (it may have been
    applied) is StateUnavailable, which is never retried."""
    conn.execute("BEGIN")
    try:
        result = work(Tx(conn))
    except BaseException:
        if not conn.broken:
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except psycopg.OperationalError as exc:
        raise lost(exc, location) from exc
    return result


def lost(exc: psycopg.OperationalError, location: str) -> StateUnavailable:
    return StateUnavailable(f"{location}: the connection to the state database was lost "
                            f"while a change was committed ({first_line(exc)}); run again: the "
                            "next run resumes")


def joined(pairs: list[tuple[str, Sequence[Any]]], returns: bool
            ) -> tuple[str, list[Any]] | None:
    """The statements as one (``WITH`` parts, each a change, applied together), when each
    changes one row and no row is changed twice: a new row (INSERT ... VALUES, whose id
    nobody can name yet), or one named by its key. None otherwise (a transaction of
    several statements, in order)."""
    if len(pairs) == 1:
        sql, params = pairs[0]
        return (sql + " RETURNING id" if returns else sql), list(params)
    keys: set[tuple[str, str, Any]] = set()
    inserted: set[str] = set()
    by_external_id: set[str] = set()
    for sql, params in pairs:
        if (new := _NEW_ROW.fullmatch(sql)) is not None:
            inserted.add(new[1])
        elif (keyed := _KEYED_ROW.fullmatch(sql)) is not None and params:
            key = (keyed[1], keyed[2], params[-1])
            if key in keys:
                return None
            keys.add(key)
            if keyed[2] == "external_id":
                by_external_id.add(keyed[1])
        else:
            return None
    if inserted & by_external_id:  # a new row and a named one could be the same
        return None
    parts = [f"s{n} AS ({sql}{' RETURNING id' if n == 0 and returns else ''})"
             for n, (sql, _) in enumerate(pairs)]
    tail = "SELECT id FROM s0" if returns else "SELECT 0"
    return f"WITH {', '.join(parts)} {tail}", [p for _, params in pairs for p in params]


def closed_by_server(conn: psycopg.Connection[Any]) -> bool:
    """True when an idle connection of the pool is unusable: closed, or with something to
    read (an idle session is sent nothing but the server's goodbye when it shuts down)."""
    if conn.closed or conn.broken:
        return True
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def fetch(conn: psycopg.Connection[Any], sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    cursor = conn.execute(sql, params)
    return cursor.fetchall() if cursor.description is not None else []


def first_line(exc: BaseException) -> str:
    """The first line of a driver's message (libpq adds hints on lines of their own)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def connect_error(exc: psycopg.OperationalError, location: str) -> StateError:
    if exc.sqlstate and exc.sqlstate[:2] in ("28", "3D"):  # authentication; no such database
        return StateUnusable(f"{location}: cannot use the state database: {first_line(exc)}")
    return StateUnavailable(f"{location}: cannot reach the state database: {first_line(exc)}; "
                            "try later")
