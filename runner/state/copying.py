"""``runner state copy FROM TO``: a whole state moved from one backend to another (a SQLite
file into PostgreSQL when a team moves to several hosts, or back), every table and row.

Refused, with nothing written, when the target already holds anything (two states are not
merged: the external_ids of one would shadow the other's) or when a run is live on the
source (its lease is fresh: the copy would miss what it writes next). The rows go in one
transaction: a copy that fails leaves the target empty. Each backend's record of its
migrations is its own (both are at the same named migrations once opened).
"""

from __future__ import annotations

from typing import Any

from runner.errors import LeaseHeld, StateError
from runner.state.locations import StateLocation
from runner.state.store import StateStore

TABLES = ("runs", "leases", "items", "attempts", "retries", "approvals", "job_steps",
          "rate_slots", "plan_items", "job_passes", "job_rest", "worker_leases", "plan_files")
_IDENTITIES = ("runs", "attempts", "retries")


def copy_state(source: StateLocation, target: StateLocation) -> dict[str, int]:
    """Copy every row of ``source`` (which must exist) into the empty ``target`` (made if
    new); how many rows each table had."""
    from runner.state import open_store

    with open_store(source, create=False) as src:
        _check_idle(src)  # before the target is opened: a refused copy makes nothing
        tables = {table: _rows(src, f"SELECT * FROM {table}") for table in TABLES}
    with open_store(target) as dst:
        for table in TABLES:
            if _rows(dst, f"SELECT 1 FROM {table} LIMIT 1"):
                raise StateError(f"{dst.location}: already holds a state (its {table} "
                                 "table has rows); copy into a new, empty one")
        with _transaction(dst) as conn:
            for table, rows in tables.items():
                if rows:
                    names = list(rows[0])
                    conn.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES "
                                     f"({', '.join('?' * len(names))})",
                                     [[row[n] for n in names] for row in rows])
            if dst.shared:  # PostgreSQL
                for table in _IDENTITIES:  # the next id after the copied ones
                    conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                 f"coalesce((SELECT max(id) FROM {table}), 0) + 1, false)")
    return {table: len(rows) for table, rows in tables.items()}


def _check_idle(src: StateStore) -> None:
    for lease in _rows(src, "SELECT * FROM leases") + _rows(src, "SELECT * FROM worker_leases"):
        if src._alive(lease):  # type: ignore[attr-defined]
            raise LeaseHeld(f"{src.location}: job {lease['job_name']} is being run (pid "
                            f"{lease['pid']} on {lease['host']}); copy when it has ended")


def _rows(store: StateStore, sql: str) -> list[dict[str, Any]]:
    return store._rows(sql)  # type: ignore[attr-defined, no-any-return]


def _transaction(store: StateStore) -> Any:
    return store._transaction()  # type: ignore[attr-defined]
