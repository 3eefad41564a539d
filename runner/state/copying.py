"""``runner state copy FROM TO``: a whole state moved from one backend to another (a SQLite
file into PostgreSQL when a team moves to several hosts, or back), every table and row,
through the stores' own interface (``StateStore.dump`` and ``load``).

Refused, with nothing written, when the target already holds anything (two states are not
merged: the external_ids of one would shadow the other's) or when a run is live on the
source (its lease is fresh: the copy would miss what it writes next). The tables are those
the migrations make (``runner.state.schema.TABLES``), read a page at a time; the rows go in
one transaction: a copy that fails leaves the target empty. Each backend's record of its
migrations is its own (both are at the same named migrations once opened).
"""

from __future__ import annotations

from runner.state.locations import StateLocation
from runner.state.schema import TABLES


def copy_state(source: StateLocation, target: StateLocation) -> dict[str, int]:
    """Copy every row of ``source`` (which must exist) into the empty ``target`` (made if
    new); how many rows each table had."""
    from runner.state import open_state

    with open_state(source, create=False) as src:
        src.require_idle()  # before the target is opened: a refused copy makes nothing
        with open_state(target) as dst:
            dst.require_empty(TABLES)
            return dst.load(src.dump(TABLES))
