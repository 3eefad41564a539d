"""The state in one SQLite file (default ``state/runner.sqlite``), the default backend.

One file can hold many jobs: items are keyed by external_id across all of them, so an item
already handled under another job's name is seen and refused (rule 7). WAL mode; every
change is its own committed transaction, written before the next request is sent.
``synchronous=NORMAL`` survives a killed process; a power cut may lose the last writes, which
the provider-side lookups by external_id (rule 3) recover, since external_ids are
deterministic.

Tables (named migrations: ``runner.state.sqlite_schema``): ``runs`` (one row per run: job,
start, end, exit code, counts, closing message, the digest of its summary and whether it was
mailed, the digest of its inputs and its closing lines), ``leases`` (who runs a job now: host,
pid, heartbeat), ``items`` (one row per external_id, the columns of ``ItemRecord``),
``attempts`` (every call: item, step, a summary of the request, start and end, result, HTTP
status, provider code and message), ``retries`` (each failed item sent again: the attempt
that failed and the new external_id), ``approvals`` (who planned and approved an applied
run), ``payee_checks`` and ``payee_acceptances`` (``runner.state.payees``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Unpack

from sqlite_utils import Database

from runner import lifecycle
from runner.errors import LeaseHeld, StateError
from runner.logs import event
from runner.state.files import private_file, private_folder
from runner.state.history import RetryRecord
from runner.state.holders import JobLock, alive, this_process
from runner.state.opening import check_migrations, check_tables, state_error
from runner.state.passes import LocalPasses
from runner.state.payees import PayeeBook
from runner.state.records import COLUMNS, AttemptRecord, ItemChanges, ItemRecord
from runner.state.runs import RunBook
from runner.state.sqlite_schema import migrations
from runner.state.store import now_iso

log = logging.getLogger("runner")
# Exact amounts are stored as their text.
sqlite3.register_adapter(Decimal, str)


def _update_items(external_id: str, values: Mapping[str, Any], stamp: str | None = None
                  ) -> tuple[str, list[Any]]:
    """The UPDATE of one item's columns (names are runner's own, never the job's)."""
    values = {**values, "updated_at": stamp or now_iso()}
    columns = ", ".join(f"{name} = ?" for name in values)
    return (f"UPDATE items SET {columns} WHERE external_id = ?",
            [*values.values(), external_id])


# How long a write waits for another process's write to end. A run's own writes are short;
# a second run refused by the lease waits for none of this (``hold_lease``).
LOCK_WAIT = 10.0
# The job locks this process holds, by lease token (``holders.JobLock``): a lease taken
# ahead of its run (``hold_lease``) and taken over by it is released by either.
_LOCKS: dict[str, JobLock] = {}


class SqliteStore(RunBook, LocalPasses, PayeeBook):
    """One connection, one lock, one committed transaction per change."""

    def __init__(self, path: Path | None) -> None:
        """The database at ``path``; None: an empty one in memory."""
        self.path = path
        self.location = str(path or "(no state yet)")
        self.lock = threading.RLock()
        self.host = socket.gethostname()
        try:
            if path is not None:
                private_folder(path.parent)
                private_file(path)  # SQLite gives its WAL and shared-memory files its mode
            conn = sqlite3.connect(path or ":memory:", check_same_thread=False,
                                   isolation_level=None, timeout=LOCK_WAIT)
        except (OSError, sqlite3.Error) as exc:
            raise state_error(exc, self.location) from exc
        self.db = Database(conn)
        try:
            with self._translated():
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                check_migrations(conn, migrations, self.location)  # before changing anything
                if migrations.pending(self.db):
                    # The write lock first: a second process opening a new database waits
                    # for it instead of failing on a stale read.
                    with self._transaction("BEGIN IMMEDIATE"):
                        migrations.apply(self.db)
                check_tables(conn, migrations, self.location)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        with self.lock:
            self.db.conn.close()

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

    @contextlib.contextmanager
    def _transaction(self, begin: str = "BEGIN") -> Iterator[sqlite3.Connection]:
        """One committed transaction, under the store's lock.

        Plain prepared SQL: these writes are on every call's path, where sqlite-utils'
        introspection costs ten times the write itself."""
        conn = self.db.conn
        with self.lock, self._translated():
            conn.execute(begin)
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # a full disk may have rolled it back already
                    conn.execute("ROLLBACK")
                raise

    def _run(self, *statements: Any) -> int:
        """Statement, parameters[, statement, parameters ...] in one transaction; the row id
        the first inserted (if an INSERT). ``_transaction`` written out: every call's write,
        without two context managers' cost while the lock is held."""
        conn = self.db.conn
        with self.lock:
            try:
                conn.execute("BEGIN")
                try:
                    first = conn.execute(statements[0], statements[1]).lastrowid
                    for at in range(2, len(statements), 2):
                        conn.execute(statements[at], statements[at + 1])
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:  # a full disk may have rolled it back already
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                if type(exc) not in (sqlite3.DatabaseError, sqlite3.OperationalError):
                    raise
                raise state_error(exc, self.location) from exc
        return int(first or 0)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self.lock, self._translated():
            cursor = self.db.conn.execute(sql, params)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    # ------------------------------------------------------------ the lease
    def acquire_lease(self, job_name: str, run_id: int) -> str:
        token = uuid.uuid4().hex
        with self._transaction("BEGIN IMMEDIATE") as conn:
            rows = self._rows("SELECT * FROM leases WHERE job_name = ?", [job_name])
            if rows and rows[0]["token"] in self.held_here:  # taken ahead, for this run
                conn.execute("UPDATE leases SET run_id = ?, heartbeat_at = ? "
                             "WHERE job_name = ?", [run_id, time.time(), job_name])
                return str(rows[0]["token"])
            lock = self._lock(job_name)
            taken = lock.take() if lock is not None else None
            if taken is False or (rows and alive(rows[0], taken)):
                if lock is not None:
                    lock.release()
                raise self._held(job_name, rows[0] if rows else None)
            me = this_process()
            conn.execute("INSERT OR REPLACE INTO leases (job_name, run_id, host, pid, token, "
                         "heartbeat_at, boot_id, pid_ns, locked) VALUES "
                         "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         [job_name, run_id, me.host, me.pid, token, time.time(), me.boot_id,
                          me.pid_ns, int(bool(taken))])
        if lock is not None and taken:
            _LOCKS[token] = lock
        return token

    @staticmethod
    def _held(job_name: str, held: dict[str, Any] | None) -> LeaseHeld:
        if held is None:  # its lock still held: a run ending, or one on another database
            return LeaseHeld(f"job {job_name} is being run by another process; try later")
        run = f" (run {held['run_id']})" if held["run_id"] else " (starting)"
        return LeaseHeld(f"job {job_name} is being run by pid {held['pid']} on "
                         f"{held['host']}{run}; try later")

    def _lock(self, job_name: str) -> JobLock | None:
        """The job's lock file beside the database (None: a database in memory)."""
        return JobLock(self.path, job_name) if self.path is not None else None

    def _alive(self, lease: dict[str, Any]) -> bool:
        lock = self._lock(lease["job_name"])
        return alive(lease, lock.probe() if lock is not None else None)

    def heartbeat(self, job_name: str, token: str) -> None:
        try:
            self._run("UPDATE leases SET heartbeat_at = ? WHERE job_name = ? AND token = ?",
                      [time.time(), job_name, token])
        except StateError as exc:  # the run's next write meets it, and says so
            log.warning("the lease of %s could not be refreshed: %s", job_name, exc,
                        extra=event("lease_not_refreshed"))

    def release_lease(self, job_name: str, token: str) -> None:
        self._run("DELETE FROM leases WHERE job_name = ? AND token = ?", [job_name, token])
        lock = _LOCKS.pop(token, None)
        if lock is not None:
            lock.release()

    # ------------------------------------------------------------ items
    def item(self, external_id: str) -> ItemRecord | None:
        rows = self._rows("SELECT * FROM items WHERE external_id = ?", [external_id])
        return ItemRecord.from_row(rows[0]) if rows else None

    def items(self, job_name: str) -> Iterator[ItemRecord]:
        rows = self._rows("SELECT * FROM items WHERE job_name = ? ORDER BY row", [job_name])
        return (ItemRecord.from_row(r) for r in rows)

    def item_pages(self, job_name: str, answered: str, size: int = 500
                   ) -> Iterator[list[tuple[ItemRecord, str | None]]]:
        after: list[Any] = []
        while True:
            rows = self._rows(
                "SELECT i.*, (SELECT max(a.finished_at) FROM attempts a WHERE a.external_id "
                "= i.external_id AND a.step = ? AND a.result = 'ok') AS answered_at FROM "
                "items i WHERE i.job_name = ?" + (" AND (i.row > ? OR (i.row = ? AND "
                "i.external_id > ?))" if after else "") +
                " ORDER BY i.row, i.external_id LIMIT ?", [answered, job_name, *after, size])
            if rows:
                yield [(ItemRecord.from_row(r), r["answered_at"]) for r in rows]
            if len(rows) < size:
                return
            after = [rows[-1]["row"], rows[-1]["row"], rows[-1]["external_id"]]

    def owners(self, external_ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        with self.lock, self._translated():
            for start in range(0, len(external_ids), 500):
                chunk = list(external_ids[start:start + 500])
                found.update(self.db.conn.execute(
                    f"SELECT external_id, job_name FROM items WHERE external_id IN "
                    f"({', '.join('?' * len(chunk))})", chunk).fetchall())
        return found

    def insert_items(self, records: Sequence[ItemRecord]) -> None:
        if not records:
            return
        stamp = now_iso()
        for record in records:
            record.created_at = record.updated_at = stamp
        self._atomic(lambda tx: tx.executemany(
            f"INSERT INTO items ({', '.join(COLUMNS)}) VALUES "
            f"({', '.join('?' * len(COLUMNS))})",
            [[getattr(r, n) for n in COLUMNS] for r in records]))

    def update_item(self, external_id: str, **changes: Unpack[ItemChanges]) -> None:
        self._run(*_update_items(external_id, changes))

    def start_retry(self, retry: RetryRecord, **changes: Unpack[ItemChanges]) -> None:
        stamp = now_iso()
        self._run("INSERT INTO retries (external_id, job_name, run_id, lineage, ref, "
                  "previous_ref, previous_status, previous_code, previous_message, changed, "
                  "at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  [retry.external_id, retry.job_name, retry.run_id, retry.lineage, retry.ref,
                   retry.previous_ref, retry.previous_status, retry.previous_code,
                   retry.previous_message, int(retry.changed), stamp],
                  *_update_items(retry.external_id, {**changes, "lineage": retry.lineage}))

    def retries(self, job_name: str) -> list[RetryRecord]:
        rows = self._rows("SELECT * FROM retries WHERE job_name = ? ORDER BY id", [job_name])
        return [RetryRecord(**{**{k: v for k, v in r.items() if k != "id"},
                               "changed": bool(r["changed"])}) for r in rows]

    def operations_sent(self, kinds: Sequence[str],
                        order_id: str | None = None) -> list[ItemRecord]:
        sql = (f"SELECT * FROM items WHERE kind IN ({', '.join('?' * len(kinds))}) AND "
               "provider_ref IS NOT NULL AND (intent IS NOT NULL OR outcome IN "
               "('settled', 'unknown'))")
        args: list[Any] = list(kinds)
        if order_id is not None:
            sql += " AND provider_ref = ?"
            args.append(order_id)
        return [ItemRecord.from_row(r) for r in self._rows(sql, args)]

    def _resolved(self, record: ItemRecord, outcome: str, note: str) -> None:
        stamp = now_iso()
        self._run(
            "INSERT INTO attempts (external_id, step, started_at, finished_at, result, "
            "request, message) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [record.external_id, lifecycle.Call.RESOLVE, stamp, stamp, outcome,
             json.dumps({"was": record.outcome, "note": note}), note],
            *_update_items(record.external_id, dict(
                lifecycle.resolved(record, lifecycle.Outcome(outcome), note))))

    def note_found(self, record: ItemRecord, note: str, **changes: Unpack[ItemChanges]
                   ) -> bool:
        stamp = now_iso()
        update, values = _update_items(record.external_id, changes, stamp)
        same = " AND lineage = ? AND attempt = ? AND step = ? AND outcome = ?"

        def work(tx: Any) -> bool:
            if not tx.execute(update + same, [*values, record.lineage, record.attempt,
                                              record.step, record.outcome]).rowcount:
                return False
            tx.execute("INSERT INTO attempts (external_id, step, request, started_at, "
                       "finished_at, result, message) VALUES (?, 'reconcile', ?, ?, ?, ?, ?)",
                       [record.external_id, json.dumps({"was": record.outcome, "ref": record.ref}),
                        stamp, stamp, changes.get("outcome", record.outcome), note])
            return True

        return bool(self._atomic(work))

    # ------------------------------------------------------------ attempts (rule 2)
    def begin_attempt(self, run_id: int, external_id: str, step: str,
                      request: Mapping[str, Any],
                      answered: tuple[int, ItemChanges] | None = None) -> int:
        stamp = now_iso()
        insert = ("INSERT INTO attempts (run_id, external_id, step, request, started_at) "
                  "VALUES (?, ?, ?, ?, ?)",
                  [run_id, external_id, step, json.dumps(request, default=str), stamp])
        if answered is None:
            return self._run(*insert, "UPDATE items SET intent = ?, updated_at = ? WHERE "
                             "external_id = ?", [step, stamp, external_id])
        attempt_id, changes = answered
        return self._run(*insert, "UPDATE attempts SET finished_at = ?, result = 'ok', "
                         "http_status = 200 WHERE id = ?", [stamp, attempt_id],
                         *_update_items(external_id, {**changes, "intent": step}, stamp))

    def end_attempt(self, attempt_id: int, external_id: str, result: str, *,
                    http_status: int | None = None, code: str | None = None,
                    message: str | None = None, resolved: bool = True,
                    **changes: Unpack[ItemChanges]) -> None:
        values: dict[str, Any] = dict(changes)
        if resolved:
            values["intent"] = None
        stamp = now_iso()
        self._run("UPDATE attempts SET finished_at = ?, result = ?, http_status = ?, "
                  "code = ?, message = ? WHERE id = ?",
                  [stamp, result, http_status, code, message, attempt_id],
                  *_update_items(external_id, values, stamp))

    def attempts(self, external_id: str) -> list[AttemptRecord]:
        rows = self._rows("SELECT * FROM attempts WHERE external_id = ? ORDER BY id",
                          [external_id])
        return [AttemptRecord(**r) for r in rows]
