"""The state in a PostgreSQL database (``--state postgresql://USER@HOST:PORT/DB``): one
state that several hosts share, for cooperating workers and for hosts whose disks do not
last. Its connector (``runner.state.connector``) runs ``runner/state/sql/postgresql.sql``.

The same tables, columns and named migrations as the SQLite backend (``pg_schema``). Driver:
psycopg 3 (maintained; libpq underneath, so ``PGPASSWORD``, ``~/.pgpass``, service files and
TLS settings work as everywhere else; parameters are bound by the server), with its pool
(``psycopg_pool``): up to ``POOL`` connections, so that the engine's worker threads commit
side by side, each connection used by one thread at a time. A thread waits at most
``CONNECTION_WAIT`` seconds for one (``PoolTimeout``, then counted as a failed attempt
below).

Round trips: each one costs a wait for the server and for this process's threads (on a busy
machine, more than the statement), so the changes on every call's path are one statement
each (autocommit: it is its own transaction; data-modifying ``WITH`` parts in
postgresql.sql). What needs the answer of one statement before the next (a claim, the lease,
the job's finish) is a transaction of several.

Faults: refused, or the server gone at start, is ``StateUnavailable`` (exit 75) with one
line. A connection that the server closed while it sat in the pool (the server restarted)
is seen before it is used (it has something to read: the server's goodbye) and replaced.
A connection lost mid-run is retried on a new connection, up to ``RETRIES`` times with a
short back-off (``BACKOFF``: about 15 s in all), when nothing of the change can have been
applied: no connection could be had, a read, or a transaction whose COMMIT was not sent
(PostgreSQL rolled it back, nothing half-done). A change whose answer was lost after it was
sent (its COMMIT, or the single statement) is not retried (it may have been applied):
``StateUnavailable``, and the next run resumes from what the state holds (an item whose
outcome was not recorded is in doubt, and is looked up first, rule 3).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.adapt import Dumper
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from runner.credentials import hold
from runner.errors import StateError, StateUnavailable, StateUnusable
from runner.state import pg_schema
from runner.state.connector import Row, Tx
from runner.state.sql import Dialect, Queries, Statements

if TYPE_CHECKING:
    from runner.state.store import StateStore

T = TypeVar("T")
POOL = 8
CONNECTION_WAIT = 1.0  # seconds a thread waits for a connection of the pool
RETRIES = 6
BACKOFF = (0.1, 0.5, 1.0, 2.0, 4.0, 8.0)  # seconds before each retry
CONNECT_TIMEOUT = 10
# The pool's own reports (a connection it could not make) go to runner's log when one is
# configured, never to a terminal on their own: the errors below say what happened.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())


class DecimalText(Dumper):
    """Amounts are stored as their exact text, as in SQLite."""

    oid = psycopg.adapters.types["text"].oid

    def dump(self, obj: Decimal) -> bytes:
        return str(obj).encode()


class PostgresConnector:
    """A pool of connections; each change one transaction, retried on a new connection
    when the old one was lost before its commit."""

    dialect: Dialect = "postgresql"

    def __init__(self, conninfo: str, location: str, *, create: bool = True,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.location = location
        self.sleep = sleep
        self.sql = Queries("postgresql")
        hold(os.environ.get("PGPASSWORD"))  # libpq's; masked in whatever runner writes
        options: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT,
                                   "application_name": "runner", "row_factory": dict_row}
        # The first connection is made here, not by the pool: what refused it (the server
        # down, a password refused) is told at once, in its own words.
        try:
            first = psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
                                    application_name="runner")
        except psycopg.OperationalError as exc:
            raise connect_error(exc, location) from exc
        with first, first.transaction():
            pg_schema.migrate(lambda sql, params: _fetch(first, sql, params), location,
                              create)
        self.pool: ConnectionPool[psycopg.Connection[Row]] = ConnectionPool(
            conninfo, kwargs=options, configure=_configure, min_size=1, max_size=POOL,
            timeout=CONNECTION_WAIT, reconnect_timeout=CONNECTION_WAIT, num_workers=1,
            name="runner-state", open=True)

    def close(self) -> None:
        self.pool.close()

    # ------------------------------------------------------------ connections
    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Row]]:
        """A connection of the pool for this thread alone; one the server closed while it
        was idle is closed and another one taken (nothing was sent on it)."""
        while True:
            conn = self.pool.getconn()
            if not closed_by_server(conn):
                break
            conn.close()
            self.pool.putconn(conn)  # discarded: the pool makes a new one
        try:
            yield conn
        finally:
            self.pool.putconn(conn)

    def _retried(self, once: Callable[[psycopg.Connection[Row]], T]) -> T:
        """``once`` on a connection of the pool; again on a new connection, up to
        ``RETRIES`` times, when it raises OperationalError (nothing of it was applied)."""
        for attempt in range(RETRIES + 1):
            try:
                with self._connection() as conn:
                    return once(conn)
            except psycopg.OperationalError as exc:
                self._wait_before(attempt, exc)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise StateUnusable(f"{self.location}: cannot use the state database: "
                                    f"{first_line(exc)}") from exc
        raise AssertionError("unreachable")

    def _wait_before(self, attempt: int, exc: psycopg.OperationalError) -> None:
        """The back-off before retry ``attempt + 1``; StateUnavailable after the last."""
        if attempt == RETRIES:
            raise StateUnavailable(
                f"{self.location}: the state database stayed unreachable after {RETRIES} "
                f"retries: {first_line(exc)}; run again: the next run resumes (what is "
                "recorded is safe)") from exc
        self.sleep(BACKOFF[attempt])

    # ------------------------------------------------------------ the interface
    def read(self, query: Statements, /, **args: Any) -> list[Row]:
        return self._retried(lambda conn: _Tx(conn).read(query, **args))

    def write(self, query: Statements, /, **args: Any) -> list[Row]:
        if len(query) > 1:
            return self.transaction(lambda tx: tx.write(query, **args))

        def once(conn: psycopg.Connection[Row]) -> list[Row]:
            """One statement, its own transaction (autocommit): one round trip. Refused by
            the server (rolled back), or never sent: again; sent and no answer: lost."""
            try:
                return _Tx(conn).read(query, **args)
            except psycopg.OperationalError as exc:
                if conn.broken:  # sent, and no answer: maybe applied
                    raise lost(exc, self.location) from exc
                raise
        return self._retried(once)

    def insert(self, query: Statements, /, **args: Any) -> int:
        return int(self.write(query, **args)[0]["id"])  # (its statement says RETURNING id)

    def write_many(self, query: Statements, rows: Sequence[Sequence[Any]]) -> None:
        self.transaction(lambda tx: tx.write_many(query, rows))

    def load(self, query: Statements, rows: Sequence[Sequence[Any]]) -> None:
        self.transaction(lambda tx: tx.load(query, rows))

    def transaction(self, work: Callable[[Tx], T], *, lock: str | None = None) -> T:
        def once(conn: psycopg.Connection[Row]) -> T:
            """``work`` between BEGIN and COMMIT; a COMMIT whose answer was lost (it may
            have been applied) is StateUnavailable, never retried."""
            tx = _Tx(conn)
            conn.execute("BEGIN")
            try:
                if lock is not None:
                    tx.read(self.sql("lock"), key=lock)
                result = work(tx)
            except BaseException:
                if not conn.broken:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except psycopg.OperationalError as exc:
                raise lost(exc, self.location) from exc
            return result
        return self._retried(once)

    @contextlib.contextmanager
    def session_lock(self, key: str) -> Iterator[None]:
        """A lock on ``key`` held for the block by one connection, across transactions:
        the other processes asking for it wait at its start. Asked for again on a new
        connection when the connection was lost before it was had."""
        for attempt in range(RETRIES + 1):
            locked = False
            try:
                with self._connection() as conn:
                    conn.execute(self.sql("lock_session")[0], {"key": key})
                    locked = True
                    try:
                        yield
                    finally:
                        with contextlib.suppress(psycopg.OperationalError):
                            # A lost connection's locks are the server's to drop.
                            conn.execute(self.sql("unlock_session")[0], {"key": key})
                    return
            except psycopg.OperationalError as exc:
                if locked:  # the block's own
                    raise
                self._wait_before(attempt, exc)

    def stream(self, query: Statements, size: int = 1000) -> Iterator[list[Row]]:
        with self._connection() as conn, conn.transaction(), \
                conn.cursor(name="runner_stream") as cursor:
            cursor.execute(query[0])
            while batch := cursor.fetchmany(size):
                yield batch


class _Tx:
    """Statements on a connection of the pool, inside the caller's transaction (or, outside
    one, each its own)."""

    def __init__(self, conn: psycopg.Connection[Row]) -> None:
        self.conn = conn

    def read(self, query: Statements, /, **args: Any) -> list[Row]:
        rows: list[Row] = []
        for sql in query:
            cursor = self.conn.execute(sql, args)
            if cursor.description is not None:
                rows += cursor.fetchall()
        return rows

    write = read

    def write_many(self, query: Statements, rows: Iterable[Sequence[Any]]) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(query[0], list(rows))

    def load(self, query: Statements, rows: Iterable[Sequence[Any]]) -> None:
        with self.conn.cursor() as cursor, cursor.copy(query[0]) as copy:
            for row in rows:
                copy.write_row(row)


def _fetch(conn: psycopg.Connection[Any], sql: str, params: list[Any]
           ) -> list[tuple[Any, ...]]:
    cursor = conn.execute(sql, params)
    return cursor.fetchall() if cursor.description is not None else []


def _configure(conn: psycopg.Connection[Row]) -> None:
    conn.adapters.register_dumper(Decimal, DecimalText)


def closed_by_server(conn: psycopg.Connection[Any]) -> bool:
    """True when an idle connection of the pool is unusable: closed, or with something to
    read (an idle session is sent nothing but the server's goodbye when it shuts down).
    Not psycopg_pool's ``check_connection``: that one costs a round trip per checkout."""
    if conn.closed or conn.broken:
        return True
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def first_line(exc: BaseException) -> str:
    """The first line of a driver's message (libpq adds hints on lines of their own)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def lost(exc: psycopg.OperationalError, location: str) -> StateUnavailable:
    return StateUnavailable(f"{location}: the connection to the state database was lost "
                            f"while a change was committed ({first_line(exc)}); run again: the "
                            "next run resumes")


def connect_error(exc: psycopg.OperationalError, location: str) -> StateError:
    if exc.sqlstate and exc.sqlstate[:2] in ("28", "3D"):  # authentication; no such database
        return StateUnusable(f"{location}: cannot use the state database: {first_line(exc)}")
    return StateUnavailable(f"{location}: cannot reach the state database: {first_line(exc)}; "
                            "try later")


def PostgresStore(conninfo: str, location: str, *, create: bool = True,  # noqa: N802
                  sleep: Callable[[float], None] = time.sleep) -> StateStore:
    """The state store on the database ``conninfo`` (``location``: how messages name it)."""
    from runner.state.leases import SharedLeases
    from runner.state.store import StateStore

    connector = PostgresConnector(conninfo, location, create=create, sleep=sleep)
    return StateStore(connector, SharedLeases(connector))
