"""runner's own state: what it has asked of the provider, item by item, and its runs.

``StateStore`` (``store``) is the interface every other part uses; ``records`` are the typed
rows it hands out (``ItemRecord``, ``AttemptRecord``, ``RunRecord``); ``sqlite`` is the
default backend, one SQLite file. ``open_store`` picks the backend for a location.
"""

from __future__ import annotations

from pathlib import Path

from runner.state.records import AttemptRecord, ItemChanges, ItemRecord, RunRecord
from runner.state.store import LEASE_TTL, StateStore, now_iso


def open_store(location: Path) -> StateStore:
    """The state store at ``location`` (a SQLite file, created with its folder if new)."""
    from runner.state.sqlite import SqliteStore

    return SqliteStore(location)


__all__ = [
    "LEASE_TTL",
    "AttemptRecord",
    "ItemChanges",
    "ItemRecord",
    "RunRecord",
    "StateStore",
    "now_iso",
    "open_store",
]
