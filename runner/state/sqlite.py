"""The state in one SQLite file (default ``state/runner.sqlite``), the default backend: its
connector (``runner.state.connector``), which runs ``runner/state/sql/sqlite.sql``.

One file can hold many jobs: items are keyed by external_id across all of them, so an item
already handled under another job's name is seen and refused (rule 7). WAL mode; every
change is its own committed transaction, written before the next request is sent.
``synchronous=NORMAL`` survives a killed process; a power cut may lose the last writes, which
the provider-side lookups by external_id (rule 3) recover, since external_ids are
deterministic. One connection, shared by the engine's threads under one lock.

Tables (named migrations: ``runner.state.sqlite_schema``): ``runs`` (one row per run: job,
start, end, exit code, counts, closing message, the digest of its summary and whether it was
mailed, the digest of its inputs and its closing lines), ``leases`` (who runs a job now: host,
pid, heartbeat), ``items`` (one row per external_id, the columns of ``ItemRecord``),
``attempts`` (every call: item, step, a summary of the request, start and end, result, HTTP
status, provider code and message), ``retries`` (each failed item sent again: the attempt
that failed and the new external_id), ``approvals`` (who planned and approved an applied
run), ``payee_checks`` and ``accepted_payees`` (``runner.state.payees``).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from sqlite_utils import Database

from runner.lifecycle import Call, Outcome, Reason, State, Step
from runner.state.connector import Row, Tx
from runner.state.files import private_file, private_folder
from runner.state.opening import (
    check_files,
    check_migrations,
    check_tables,
    state_error,
)
from runner.state.sql import Dialect, Queries, Statements
from runner.state.sqlite_schema import migrations

T = TypeVar("T")
# Exact amounts are stored as their text; a list (of ids, of states) as JSON, which the
# statements read with json_each (no IN (?, ?, ...) text is built).
sqlite3.register_adapter(Decimal, str)
sqlite3.register_adapter(list, json.dumps)
# An item's life is written as its names' text; said here, the driver finds it at once
# instead of asking each value how to adapt itself first (a few writes each call).
for name in (Call, Outcome, Reason, State, Step):
    sqlite3.register_adapter(name, str)

# How long a write waits for another process's write to end. A run's own writes are short;
# a second run refused by the lease waits for none of this (``StateStore.join``).
LOCK_WAIT = 10.0


class SqliteConnector:
    """One connection, one lock, one committed transaction per change."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: Path | None) -> None:
        """The database at ``path`` (made with its folder if new, migrated); None: an empty
        one in memory."""
        self.path = path
        self.location = str(path or "(no state yet)")
        self.sql = Queries("sqlite")
        self.lock = threading.RLock()
        try:
            if path is not None:
                private_folder(path.parent)
                check_files(path, self.location)
                private_file(path)  # SQLite gives its WAL and shared-memory files its mode
            self.conn = sqlite3.connect(path or ":memory:", check_same_thread=False,
                                        isolation_level=None, timeout=LOCK_WAIT)
        except (OSError, sqlite3.Error) as exc:
            raise state_error(exc, self.location) from exc
        try:
            with self._translated():
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                check_migrations(self.conn, migrations, self.location)  # before any change
                db = Database(self.conn)
                if migrations.pending(db):
                    # The write lock first: a second process opening a new database waits
                    # for it instead of failing on a stale read.
                    self.transaction(lambda tx: migrations.apply(db))
                check_tables(self.conn, self.location)
        except BaseException:
            self.conn.close()
            raise

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """SQLite's failures (locked, disk full, read-only ...) as one clear StateError;
        errors of runner's own making (a constraint, a wrong statement) stay as they are."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if type(exc) not in (sqlite3.DatabaseError, sqlite3.OperationalError):
                raise
            raise state_error(exc, self.location) from exc

    def read(self, query: Statements, /, **args: Any) -> list[Row]:
        with self.lock, self._translated():
            return _rows(self.conn, query, args)

    def write(self, query: Statements, /, **args: Any) -> list[Row]:
        return self._committed(_rows, query, args)

    def insert(self, query: Statements, /, **args: Any) -> int:
        return self._committed(_inserted, query, args)

    def _committed(self, run: Callable[[sqlite3.Connection, Statements, dict[str, Any]], T],
                   query: Statements, args: dict[str, Any]) -> T:
        """``transaction`` written out: every call's write, without two context managers'
        cost while the lock is held."""
        conn = self.conn
        with self.lock:
            try:
                conn.execute("BEGIN")
                try:
                    done = run(conn, query, args)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:  # a full disk may have rolled it back already
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                if type(exc) not in (sqlite3.DatabaseError, sqlite3.OperationalError):
                    raise
                raise state_error(exc, self.location) from exc
        return done

    def write_many(self, query: Statements, rows: Sequence[Sequence[Any]]) -> None:
        self.transaction(lambda tx: tx.write_many(query, rows))

    def load(self, query: Statements, rows: Sequence[Sequence[Any]]) -> None:
        self.transaction(lambda tx: tx.load(query, rows))

    def transaction(self, work: Callable[[Tx], T], *, lock: str | None = None) -> T:
        """``work`` in one transaction that holds the write lock from its start (BEGIN
        IMMEDIATE): every transaction runs alone, whatever its ``lock``."""
        conn = self.conn
        with self.lock, self._translated():
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(_Tx(conn))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return result

    def stream(self, query: Statements, size: int = 1000) -> Iterator[list[Row]]:
        with self.lock, self._translated():
            cursor = self.conn.execute(query[0])
            names = [d[0] for d in cursor.description]
            while batch := cursor.fetchmany(size):
                yield [dict(zip(names, row, strict=True)) for row in batch]


class _Tx:
    """Statements on the connection, inside the caller's transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def read(self, query: Statements, /, **args: Any) -> list[Row]:
        return _rows(self.conn, query, args)

    write = read

    def write_many(self, query: Statements, rows: Iterable[Sequence[Any]]) -> None:
        self.conn.executemany(query[0], rows)

    load = write_many


def _inserted(conn: sqlite3.Connection, query: Statements, args: dict[str, Any]) -> int:
    """The statements run in order; the rowid of the row the first inserted."""
    rowid = conn.execute(query[0], args).lastrowid
    for sql in query[1:]:
        conn.execute(sql, args)
    if not rowid:
        raise ValueError(f"not an insert: {query[0].split(maxsplit=1)[0]}")
    return rowid


def _rows(conn: sqlite3.Connection, query: Statements, args: dict[str, Any]) -> list[Row]:
    """The statements run in order; the rows those that return any gave, as dicts."""
    rows: list[Row] = []
    for sql in query:
        cursor = conn.execute(sql, args)
        if cursor.description is not None:
            names = [d[0] for d in cursor.description]
            rows += [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return rows
