"""The state in a PostgreSQL database (``--state postgresql://USER@HOST:PORT/DB``): one
state that several hosts share, for cooperating workers and for hosts whose disks do not
last.

The same tables, columns and named migrations as the SQLite backend (``pg_schema``); the
same statements too: ``PostgresStore`` keeps ``SqliteStore``'s methods and replaces what
runs them (a pool of connections instead of one file) and the few statements SQLite spells
its own way. Driver: psycopg 3 (maintained; libpq underneath, so ``PGPASSWORD``,
``~/.pgpass``, service files and TLS settings work as everywhere else; parameters are bound
by the server).

Connections: a small pool (up to ``POOL`` connections, opened as needed, each used by one
thread at a time), so that the engine's worker threads commit side by side. Every change is
one transaction, committed before the method returns.

Round trips: each one costs a wait for the server and for this process's threads (on a busy
machine, more than the statement), so the changes on every call's path go in one. A single
statement runs on its own (autocommit: it is its own transaction), and so do the changes of
one item and its attempts (``begin_attempt``, ``end_attempt``: single-row INSERTs and
UPDATEs of distinct rows), joined into one statement of data-modifying ``WITH`` parts, which
PostgreSQL applies together or not at all. What needs the answer of one statement before
the next (a claim, the lease, the job's finish) is a transaction of several
(``_with_tx``).

Faults: refused, or the server gone at start, is ``StateUnavailable`` (exit 75) with one
line. A connection that the server closed while it sat in the pool (the server restarted)
is seen before it is used (it has something to read: the server's goodbye) and replaced.
A connection lost mid-run is retried on a new connection, up to ``RETRIES`` times with a
short back-off (``BACKOFF``: about 15 s in all), when nothing of the change can have been
applied: the connection could not be made, a read, or a transaction whose COMMIT was not
sent (PostgreSQL rolled it back, nothing half-done). A change whose answer was lost after
it was sent (its COMMIT, or the single statement) is not retried (it may have been
applied): ``StateUnavailable``, and the next run resumes from what the state holds (an item
whose outcome was not recorded is in doubt, and is looked up first, rule 3).
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any, TypeVar

import psycopg

from runner.errors import StateError, StateUnavailable, StateUnusable
from runner.logs import event
from runner.state import pg_schema
from runner.state.holders import this_process
from runner.state.pg_wire import (
    DecimalText,
    Tx,
    closed_by_server,
    committed,
    connect_error,
    dict_row,
    fetch,
    first_line,
    joined,
    lost,
)
from runner.state.pg_workers import PostgresWorkers
from runner.state.sqlite import SqliteStore
from runner.state.store import LEASE_TTL

T = TypeVar("T")
log = logging.getLogger("runner")
POOL = 8
RETRIES = 6
BACKOFF = (0.1, 0.5, 1.0, 2.0, 4.0, 8.0)  # seconds before each retry
CONNECT_TIMEOUT = 10
_RETURNS_ID = re.compile(r"\s*INSERT INTO (runs|attempts|retries) ")


class PostgresStore(PostgresWorkers, SqliteStore):
    """A pool of connections; each change one transaction, retried on a new connection
    when the old one was lost before its commit."""

    shared = True

    def __init__(self, conninfo: str, location: str, *, create: bool = True,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.location = location
        self.conninfo = conninfo
        self.sleep = sleep
        self.lock = threading.RLock()
        self.host = socket.gethostname()
        self._idle: list[psycopg.Connection[Any]] = []
        self._open = 0
        self._free = threading.Condition(self.lock)
        try:
            first = self._connect()
        except psycopg.OperationalError as exc:
            raise connect_error(exc, location) from exc
        self._open = 1
        try:
            with first.transaction():
                pg_schema.migrate(lambda sql, params: fetch(first, sql, params), location,
                                  create)
        except BaseException:
            first.close()
            raise
        self._idle.append(first)

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.conninfo, autocommit=True,
                               connect_timeout=CONNECT_TIMEOUT, application_name="runner")
        conn.adapters.register_dumper(Decimal, DecimalText)
        return conn

    def close(self) -> None:
        self._drop_idle()

    def _drop_idle(self) -> None:
        with self._free:
            for conn in self._idle:
                conn.close()
            self._open -= len(self._idle)
            self._idle.clear()

    # ------------------------------------------------------------ connections
    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool for this thread alone (a new one when none is idle and
        fewer than ``POOL`` are open); a broken one is dropped when given back."""
        with self._free:
            while True:
                while not self._idle and self._open >= POOL:
                    self._free.wait()
                conn = self._idle.pop() if self._idle else None
                if conn is None:
                    self._open += 1
                    break
                if not closed_by_server(conn):
                    break
                conn.close()  # the server went away meanwhile: not used, nothing sent
                self._open -= 1
        try:
            if conn is None:
                conn = self._connect()
            yield conn
        except BaseException:
            if conn is None:
                with self._free:
                    self._open -= 1
                    self._free.notify()
            raise
        finally:
            if conn is not None:
                self._give_back(conn)

    def _give_back(self, conn: psycopg.Connection[Any]) -> None:
        with self._free:
            if conn.closed or conn.broken:
                conn.close()
                self._open -= 1
            else:
                self._idle.append(conn)
            self._free.notify()

    def _with_tx(self, work: Callable[[Tx], T]) -> T:
        """``work`` in one committed transaction; again on a new connection when the
        connection was lost before the COMMIT (see the module's docs for the bound)."""
        return self._retried(lambda conn: committed(conn, work, self.location))

    def _retried(self, once: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``once`` on a connection of the pool; again on a new connection, up to
        ``RETRIES`` times, when it raises OperationalError (nothing of it was applied)."""
        for attempt in range(RETRIES + 1):
            try:
                with self._connection() as conn:
                    return once(conn)
            except psycopg.OperationalError as exc:
                self._drop_idle()  # lost one, lost all: the server went away
                if attempt == RETRIES:
                    raise _unavailable(exc, self.location) from exc
                self.sleep(BACKOFF[attempt])
            except psycopg.errors.InsufficientPrivilege as exc:
                raise StateUnusable(f"{self.location}: cannot use the state database: "
                                    f"{first_line(exc)}") from exc
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def _transaction(self, begin: str = "BEGIN") -> Iterator[Any]:
        """One transaction on one connection, not retried (``_with_tx`` is)."""
        with self._connection() as conn, conn.transaction():
            yield Tx(conn)

    def _run(self, *statements: Any) -> int:
        pairs = list(zip(statements[::2], statements[1::2], strict=True))
        returns = bool(_RETURNS_ID.match(pairs[0][0]))
        one = joined(pairs, returns)
        if one is not None:
            _, rows = self._alone(*one, write=True)
            return int(rows[0][0] or 0) if returns else 0

        def work(tx: Tx) -> int:
            first = None
            for sql, params in pairs:
                if first is None and returns:
                    [[first]] = tx.execute(sql + " RETURNING id", params).fetchall()
                else:
                    tx.execute(sql, params)
                    first = 0 if first is None else first
            return first or 0
        return self._with_tx(work)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        names, rows = self._alone(sql, params, write=not sql.lstrip().startswith("SELECT"))
        return [dict_row(names, values) for values in rows]

    def _alone(self, sql: str, params: Sequence[Any], *, write: bool
               ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement, its own transaction (autocommit): one round trip. Again on a new
        connection when none could be had, or when the server refused it (rolled back);
        when the connection is lost once the statement was sent, a read is sent again, a
        change is StateUnavailable (it may have been applied). The columns' names and the
        rows."""
        def once(conn: psycopg.Connection[Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
            try:
                cursor = conn.execute(sql.replace("?", "%s"), list(params))
                if cursor.description is None:
                    return [], []
                return [d.name for d in cursor.description], cursor.fetchall()
            except psycopg.OperationalError as exc:
                if write and conn.broken:  # sent, and no answer: maybe applied
                    raise lost(exc, self.location) from exc
                raise  # refused by the server (rolled back), or a read
        return self._retried(once)

    # ------------------------------------------------------------ SQLite's own spellings
    def acquire_lease(self, job_name: str, run_id: int) -> str:
        """The job's lease; a live holder does not refuse this run (the workers share the
        job): it gets a lease of its own in ``worker_leases``."""
        def work(tx: Tx) -> str:
            tx.execute("SELECT pg_advisory_xact_lock(hashtext(?))", [f"runner:lease:{job_name}"])
            tx.execute("DELETE FROM worker_leases WHERE job_name = ? AND heartbeat_at < ?",
                       [job_name, time.time() - LEASE_TTL])
            held = list(self.held_here)
            ours = tx.dicts("SELECT token FROM worker_leases WHERE job_name = ? AND "
                            "token = ANY(?)", [job_name, held])
            if ours:  # taken ahead, for this run
                tx.execute("UPDATE worker_leases SET run_id = ?, heartbeat_at = ? WHERE "
                           "token = ?", [run_id, time.time(), ours[0]["token"]])
                return str(ours[0]["token"])
            rows = tx.dicts("SELECT * FROM leases WHERE job_name = ?", [job_name])
            if rows and rows[0]["token"] in self.held_here:
                tx.execute("UPDATE leases SET run_id = ?, heartbeat_at = ? WHERE job_name = ?",
                           [run_id, time.time(), job_name])
                return str(rows[0]["token"])
            token = uuid.uuid4().hex
            me = this_process()
            values = [job_name, run_id, me.host, me.pid, token, time.time(), me.boot_id,
                      me.pid_ns]
            columns = "(job_name, run_id, host, pid, token, heartbeat_at, boot_id, pid_ns) " \
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            if rows and self._alive(rows[0]):
                tx.execute(f"INSERT INTO worker_leases {columns}", values)
                return token
            tx.execute(f"INSERT INTO leases {columns} ON CONFLICT (job_name) DO UPDATE SET "
                       + ", ".join(f"{c} = excluded.{c}" for c in (
                           "run_id", "host", "pid", "token", "heartbeat_at", "boot_id",
                           "pid_ns", "locked")), values)
            return token
        return self._with_tx(work)

    def heartbeat(self, job_name: str, token: str) -> None:
        super().heartbeat(job_name, token)
        try:
            self._run("UPDATE worker_leases SET heartbeat_at = ? WHERE token = ?",
                      [time.time(), token])
        except StateError as exc:  # the run's next write meets it, and says so
            log.warning("the lease of %s could not be refreshed: %s", job_name, exc,
                        extra=event("lease_not_refreshed"))

    def _lock(self, job_name: str) -> None:
        """No lock file: the heartbeat, and the PID where it means the same, decide."""
        return None

    def release_lease(self, job_name: str, token: str) -> None:
        self._run("DELETE FROM leases WHERE job_name = ? AND token = ?", [job_name, token],
                  "DELETE FROM worker_leases WHERE token = ?", [token])

    def _lease(self, job_name: str) -> dict[str, Any] | None:
        """The job's lease, or when its holder is gone a live worker's."""
        rows = self._rows("SELECT run_id, heartbeat_at FROM leases WHERE job_name = ? UNION "
                          "ALL SELECT run_id, heartbeat_at FROM worker_leases WHERE "
                          "job_name = ? ORDER BY heartbeat_at DESC", [job_name, job_name])
        return rows[0] if rows else None

    def owners(self, external_ids: Sequence[str]) -> dict[str, str]:
        rows = self._rows("SELECT external_id, job_name FROM items WHERE external_id = "
                          "ANY(?)", [list(external_ids)])
        return {r["external_id"]: r["job_name"] for r in rows}


def _unavailable(exc: psycopg.OperationalError, location: str) -> StateUnavailable:
    return StateUnavailable(f"{location}: the state database stayed unreachable after "
                            f"{RETRIES} retries: {first_line(exc)}; run again: the next run "
                            "resumes (what is recorded is safe)")
