"""runner's own state: what it has asked of the provider, item by item, and its runs.

``StateStore`` (``store``) is the interface every other part uses; ``records`` are the typed
rows it hands out (``ItemRecord``, ``AttemptRecord``, ``RunRecord``), ``history`` those of a
failed item's retries and a run's approval. It runs its queries through a connector
(``connector``): ``sqlite``, the default backend, one SQLite file; ``postgres``, a
PostgreSQL database that several hosts share (``locations``: which), each with its SQL in
its own dialect (``sql/sqlite.sql``, ``sql/postgresql.sql``). ``open_state`` picks the
backend for a location (``empty_store``: nothing, in memory); a command opens it once and
hands it down. A run works a job as a ``Worker`` of it (``StateStore.join``), which holds
the job's lease on the state's connection.
"""

from __future__ import annotations

from pathlib import Path

from runner.errors import StateMissing
from runner.state.history import Approval, EarlierPaid, RetryRecord, Signer, derived_ref
from runner.state.locations import StateLocation, check_url, parse_location
from runner.state.records import (
    AttemptRecord,
    ItemChanges,
    ItemRecord,
    PlanFileRecord,
    RunRecord,
    WorkLeft,
)
from runner.state.store import CLAIM_TTL, LEASE_TTL, StateStore, Worker, now_iso


def open_state(where: StateLocation | Path | str, *, create: bool = True) -> StateStore:
    """The state at ``where`` (a SQLite file, created with its folder if new; or a
    PostgreSQL database, its tables created if new; a path is a file, text is read as
    ``--state`` is); with ``create`` False a missing one is StateMissing, for the commands
    that only read."""
    location = StateLocation.of(where)
    if location.conninfo is not None:
        from runner.extras import require

        require("postgresql", "a state in PostgreSQL (--state postgresql://...)")
        from runner.state.postgres import PostgresStore

        check_url(location.conninfo)
        return PostgresStore(location.conninfo, location.shown, create=create)
    assert location.path is not None
    if not create and not location.path.is_file():
        raise StateMissing(f"{location.path}: no state database here (nothing has run with "
                           f"this --state yet?)")
    return _sqlite_store(location.path)


def empty_store() -> StateStore:
    """A state holding nothing, in memory: what a plan reads before a job's first run."""
    return _sqlite_store(None)


def _sqlite_store(path: Path | None) -> StateStore:
    from runner.state.leases import SoleLease
    from runner.state.sqlite import SqliteConnector

    connector = SqliteConnector(path)
    return StateStore(connector, SoleLease(connector, path))


__all__ = [
    "CLAIM_TTL",
    "LEASE_TTL",
    "Approval",
    "AttemptRecord",
    "EarlierPaid",
    "ItemChanges",
    "ItemRecord",
    "PlanFileRecord",
    "RetryRecord",
    "RunRecord",
    "Signer",
    "StateLocation",
    "StateStore",
    "WorkLeft",
    "Worker",
    "derived_ref",
    "empty_store",
    "now_iso",
    "open_state",
    "parse_location",
]
