"""runner's own state: what it has asked of the provider, item by item, and its runs.

``StateStore`` (``store``) is the interface every other part uses; ``records`` are the typed
rows it hands out (``ItemRecord``, ``AttemptRecord``, ``RunRecord``); ``sqlite`` is the
default backend, one SQLite file. ``open_store`` picks the backend for a location.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from runner.state.records import AttemptRecord, ItemChanges, ItemRecord, RunRecord
from runner.state.store import LEASE_TTL, StateStore, now_iso


def open_store(location: Path) -> StateStore:
    """The state store at ``location`` (a SQLite file, created with its folder if new)."""
    from runner.state.sqlite import SqliteStore

    return SqliteStore(location)


@contextlib.contextmanager
def hold_lease(location: Path, job_name: str) -> Iterator[None]:
    """The job's lease at ``location``, held from now until the end of the block (see
    ``StateStore.hold_lease``); LeaseHeld when another live run has it."""
    with open_store(location) as store, store.hold_lease(job_name):
        yield


__all__ = [
    "LEASE_TTL",
    "AttemptRecord",
    "ItemChanges",
    "ItemRecord",
    "RunRecord",
    "StateStore",
    "hold_lease",
    "now_iso",
    "open_store",
]
