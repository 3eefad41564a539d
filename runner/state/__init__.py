"""runner's own state: what it has asked of the provider, item by item, and its runs.

``StateStore`` (``store``) is the interface every other part uses; ``records`` are the typed
rows it hands out (``ItemRecord``, ``AttemptRecord``, ``RunRecord``), ``history`` those of a
failed item's retries and a run's approval. It runs its queries through a connector
(``connector``): ``sqlite``, the default backend, one SQLite file; ``postgres``, a
PostgreSQL database that several hosts share (``locations``: which), each with its SQL in
its own dialect (``sql/sqlite.sql``, ``sql/postgresql.sql``). ``open_store`` picks the
backend for a location (``empty_store``: nothing, in memory).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from runner.errors import StateMissing
from runner.state.history import Approval, EarlierPaid, RetryRecord, Signer, derived_ref
from runner.state.locations import StateLocation, check_url, is_database_url, parse_location
from runner.state.records import (
    AttemptRecord,
    ItemChanges,
    ItemRecord,
    PlanFileRecord,
    RunRecord,
    WorkLeft,
)
from runner.state.store import LEASE_TTL, StateStore, now_iso


def open_store(location: StateLocation, *, create: bool = True) -> StateStore:
    """The state store at ``location`` (a SQLite file, created with its folder if new; or a
    PostgreSQL database, its tables created if new; text is read as ``--state`` is); with
    ``create`` False a missing one is StateMissing, for the commands that only read."""
    if isinstance(location, str):  # read as --state reads it: a database, or a path
        location = parse_location(location)
    if is_database_url(location):
        from runner.extras import require

        require("postgresql", "a state in PostgreSQL (--state postgresql://...)")
        from runner.state.postgres import PostgresStore

        assert isinstance(location, str)
        check_url(location)
        return PostgresStore(location, location, create=create)
    location = Path(location)
    if not create and not location.is_file():
        raise StateMissing(f"{location}: no state database here (nothing has run with this "
                           f"--state yet?)")
    return _sqlite_store(location)


def empty_store() -> StateStore:
    """A state holding nothing, in memory: what a plan reads before a job's first run."""
    return _sqlite_store(None)


def _sqlite_store(path: Path | None) -> StateStore:
    from runner.state.leases import SoleLease
    from runner.state.sqlite import SqliteConnector

    connector = SqliteConnector(path)
    return StateStore(connector, SoleLease(connector, path))


@contextlib.contextmanager
def hold_lease(location: StateLocation, job_name: str) -> Iterator[None]:
    """The job's lease at ``location``, held from now until the end of the block (see
    ``StateStore.hold_lease``); LeaseHeld when another live run has it."""
    with open_store(location) as store, store.hold_lease(job_name):
        yield


__all__ = [
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
    "derived_ref",
    "empty_store",
    "hold_lease",
    "now_iso",
    "open_store",
]
