"""The state database: what runner has asked of the provider, item by item, in SQLite.

One file (default ``state/runner.sqlite``) can hold many jobs: items are keyed by
external_id across all of them, so an item already handled under another job's name is
seen and refused (exactly-once rule 7). WAL mode; every change is its own committed
transaction, written before the next request is sent. ``synchronous=NORMAL`` survives a
killed process; a power cut may lose the last writes, which the provider-side lookups by
external_id (rule 3) recover, since external_ids are deterministic.

Tables (named migrations in ``_sqlite_migrations``):

- ``runs``: one row per run: job, start, end, exit code, counts.
- ``leases``: who runs a job now (host, pid, heartbeat): one run per job at a time (rule 6).
- ``items``: one row per external_id: job, row, fingerprint of the request, ``step`` reached
  (new, quoted, created, confirmed, final), ``intent`` (the call sent whose answer is not yet
  known: quotation, transaction, confirm; not null = in doubt), ``attempt`` (1, or 2 for the
  ``-r2`` quotation after an expiry ...), provider ids, amounts, the provider's status,
  ``outcome`` (pending, awaiting_confirm, settled, failed, refused, conflict, unknown), the
  error code and message, a ``summary`` (who and how much, no secrets, no card data) and
  ``details`` (what the provider gave to finish or show the item: QR code, instructions,
  payment_url, the ids of an onboarding chain).
- ``attempts``: every call: item, step, a summary of the request, start and end, result
  (ok, error, in_doubt), HTTP status, provider code and message.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from runner.errors import LeaseHeld, StateError

LEASE_TTL = 30.0
migrations = Migrations("runner")


@migrations(name="0001_runs_items_attempts_leases")
def _initial(db: Database) -> None:
    db.table("runs").create({"id": int, "job_name": str, "job_file": str, "started_at": str,
                       "ended_at": str, "host": str, "pid": int, "exit_code": int,
                       "counts": str}, pk="id")
    db.table("leases").create({"job_name": str, "run_id": int, "host": str, "pid": int,
                         "token": str, "heartbeat_at": float}, pk="job_name")
    db.table("items").create({
        "external_id": str, "job_name": str, "kind": str, "row": int, "fingerprint": str,
        "step": str, "intent": str, "attempt": int, "provider_ref": str,
        "quotation_id": int, "expires_at": str, "transaction_id": int, "source_currency": str,
        "source_amount": str, "fee": str, "destination_currency": str,
        "destination_amount": str, "status": str, "status_class": str, "status_message": str,
        "outcome": str, "error_code": str, "error_message": str, "summary": str,
        "created_at": str, "updated_at": str}, pk="external_id",
        defaults={"step": "new", "attempt": 1, "outcome": "pending"})
    db.table("items").create_index(["job_name", "outcome"])
    db.table("attempts").create({
        "id": int, "run_id": int, "external_id": str, "step": str, "request": str,
        "started_at": str, "finished_at": str, "result": str, "http_status": int,
        "code": str, "message": str}, pk="id")
    db.table("attempts").create_index(["external_id"])


@migrations(name="0002_item_details")
def _details(db: Database) -> None:
    # What a person needs to finish or show an item: QR code and instructions of a merchant
    # payment, the payment_url of a REDIRECT order, ids of an onboarding chain (JSON).
    db.table("items").add_column("details", str)


def _update_items(external_id: str, values: dict[str, Any]) -> tuple[str, list[Any]]:
    """The UPDATE of one item's columns (names are runner's own, never the job's)."""
    values = {**values, "updated_at": now_iso()}
    columns = ", ".join(f"{name} = ?" for name in values)
    return (f"UPDATE items SET {columns} WHERE external_id = ?",
            [*values.values(), external_id])


def now_iso() -> str:
    # On every write: isoformat is several times cheaper than strftime.
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


class StateStore:
    """Thread-safe: one connection, one lock, one committed transaction per change."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None,
                                   timeout=10)
            self.db = Database(conn)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            migrations.apply(self.db)
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{path}: cannot use the state database: {exc}") from None
        self.path = path
        self.lock = threading.RLock()
        self.host = socket.gethostname()

    def close(self) -> None:
        with self.lock:
            self.db.conn.close()

    # ------------------------------------------------------------ runs and lease
    def start_run(self, job_name: str, job_file: str) -> int:
        with self.lock, self.db.atomic():
            table = self.db.table("runs")
            table.insert({"job_name": job_name, "job_file": job_file, "started_at": now_iso(),
                          "host": self.host, "pid": os.getpid()})
            return int(table.last_pk or 0)

    def end_run(self, run_id: int, exit_code: int, counts: dict[str, int]) -> None:
        with self.lock, self.db.atomic():
            self.db.table("runs").update(run_id, {"ended_at": now_iso(), "exit_code": exit_code,
                                            "counts": json.dumps(counts)})

    def acquire_lease(self, job_name: str, run_id: int) -> str:
        """Take the job's lease, or raise LeaseHeld when a live run has it."""
        token = uuid.uuid4().hex
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                rows = list(self.db.table("leases").rows_where("job_name = ?", [job_name]))
                if rows and self._alive(rows[0]):
                    held = rows[0]
                    raise LeaseHeld(f"job {job_name} is being run by pid {held['pid']} on "
                                    f"{held['host']} (run {held['run_id']}); try later")
                self.db.table("leases").upsert({"job_name": job_name, "run_id": run_id,
                                          "host": self.host, "pid": os.getpid(),
                                          "token": token, "heartbeat_at": time.time()},
                                         pk="job_name")
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return token

    def _alive(self, lease: dict[str, Any]) -> bool:
        if time.time() - lease["heartbeat_at"] > LEASE_TTL:
            return False
        if lease["host"] == self.host:
            try:
                os.kill(lease["pid"], 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
        return True

    def heartbeat(self, job_name: str, token: str) -> None:
        with self.lock, self.db.atomic():
            self.db.execute("UPDATE leases SET heartbeat_at = ? WHERE job_name = ? AND token = ?",
                            [time.time(), job_name, token])

    def release_lease(self, job_name: str, token: str) -> None:
        with self.lock, self.db.atomic():
            self.db.execute("DELETE FROM leases WHERE job_name = ? AND token = ?",
                            [job_name, token])

    # ------------------------------------------------------------ items
    def item(self, external_id: str) -> dict[str, Any] | None:
        with self.lock:
            rows = list(self.db.table("items").rows_where("external_id = ?", [external_id]))
        return rows[0] if rows else None

    def items(self, job_name: str) -> Iterator[dict[str, Any]]:
        with self.lock:
            rows = list(self.db.table("items").rows_where("job_name = ?", [job_name],
                                                    order_by="row"))
        return iter(rows)

    def owners(self, external_ids: list[str]) -> dict[str, str]:
        """external_id -> the job holding it, for those of ``external_ids`` in the state."""
        found: dict[str, str] = {}
        with self.lock:
            for start in range(0, len(external_ids), 500):
                chunk = external_ids[start:start + 500]
                found.update(self.db.conn.execute(
                    f"SELECT external_id, job_name FROM items WHERE external_id IN "
                    f"({', '.join('?' * len(chunk))})", chunk).fetchall())
        return found

    def insert_item(self, values: dict[str, Any]) -> dict[str, Any]:
        record = dict(values)
        self.insert_items([record])
        return record

    def insert_items(self, records: list[dict[str, Any]]) -> None:
        """New items (the same columns in each) in one transaction; each record is completed
        in place with the columns the insert gives it (step, attempt, outcome, stamps)."""
        if not records:
            return
        stamp = now_iso()
        for record in records:
            for name, value in (("step", "new"), ("attempt", 1), ("outcome", "pending"),
                                ("created_at", stamp), ("updated_at", stamp)):
                record.setdefault(name, value)
        columns = ", ".join(records[0])
        marks = ", ".join("?" * len(records[0]))
        with self.lock:
            conn = self.db.conn
            conn.execute("BEGIN")
            try:
                conn.executemany(f"INSERT INTO items ({columns}) VALUES ({marks})",
                                 [list(r.values()) for r in records])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def update_item(self, external_id: str, **values: Any) -> None:
        with self.lock:
            self._run(*_update_items(external_id, values))

    def _run(self, *statements: Any) -> None:
        """Statement, parameters[, statement, parameters ...] in one committed transaction.

        Plain prepared SQL: these writes are on every call's path, where sqlite-utils'
        introspection costs ten times the write itself."""
        conn = self.db.conn
        conn.execute("BEGIN")
        try:
            for sql, params in zip(statements[::2], statements[1::2], strict=True):
                conn.execute(sql, params)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def resolve(self, job_name: str, external_id: str, outcome: str, note: str) -> None:
        """Record what a person found at the provider for an item runner could not settle
        (``unknown`` or ``conflict``): it is final from now on, and the note says why."""
        record = self.item(external_id)
        if record is None or record["job_name"] != job_name:
            raise StateError(f"{external_id}: no such item in job {job_name}")
        if record["outcome"] not in ("unknown", "conflict"):
            raise StateError(f"{external_id} is {record['outcome']}: only unknown or conflict "
                             f"items are resolved by hand")
        with self.lock, self.db.atomic():
            self.db.table("attempts").insert({
                "external_id": external_id, "step": "resolve", "started_at": now_iso(),
                "finished_at": now_iso(), "result": outcome,
                "request": json.dumps({"was": record["outcome"], "note": note}),
                "message": note})
            self.db.table("items").update(external_id, {
                "outcome": outcome, "step": "final", "intent": None,
                "error_code": "resolved" if outcome == "failed" else None,
                "error_message": f"by hand: {note}", "updated_at": now_iso()})

    # ------------------------------------------------------------ attempts (rule 2)
    def begin_attempt(self, run_id: int, external_id: str, step: str,
                      request: dict[str, Any]) -> int:
        """Commit the intent before the call: the item is in doubt until ``end_attempt``."""
        stamp = now_iso()
        with self.lock:
            conn = self.db.conn
            conn.execute("BEGIN")
            try:
                cursor = conn.execute(
                    "INSERT INTO attempts (run_id, external_id, step, request, started_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [run_id, external_id, step, json.dumps(request, default=str), stamp])
                conn.execute("UPDATE items SET intent = ?, updated_at = ? "
                             "WHERE external_id = ?", [step, stamp, external_id])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return int(cursor.lastrowid or 0)

    def end_attempt(self, attempt_id: int, external_id: str, result: str, *,
                    http_status: int | None = None, code: str | None = None,
                    message: str | None = None, resolved: bool = True,
                    **item: Any) -> None:
        """Commit the outcome; ``resolved`` False leaves the item in doubt (intent kept)."""
        values = dict(item)
        if resolved:
            values["intent"] = None
        with self.lock:
            self._run("UPDATE attempts SET finished_at = ?, result = ?, http_status = ?, "
                      "code = ?, message = ? WHERE id = ?",
                      [now_iso(), result, http_status, code, message, attempt_id],
                      *_update_items(external_id, values))

    def attempts(self, external_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.db.table("attempts").rows_where("external_id = ?", [external_id],
                                                       order_by="id"))
