"""What a SQLite state database must be before runner uses it, and how its failures read.

``runner.state.sqlite`` opens the file; this module says whether it can be trusted, before a
single call is sent: a database whose applied migrations include one this runner does not
know was written by a newer runner (its meaning has changed under us), and one missing a
table or a column that runner's migrations create (dropped, or not runner's) would be read
wrongly. Both are ``StateUnusable``.

SQLite's errors (and the operating system's, when the folder or the file is made) become one
clear ``StateError``: locked for longer than runner waits, or a full disk, is
``StateUnavailable`` (exit 75: a later run goes on); read-only, no permission, damaged, not a
database, an I/O error is ``StateUnusable`` (exit 74: a person looks).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from functools import cache
from pathlib import Path

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from runner.errors import StateError, StateUnavailable, StateUnusable
from runner.state.files import in_the_way
from runner.state.schema import refuse_missing

_LOCKED = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_CANNOT_WRITE = {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM,
                 sqlite3.SQLITE_AUTH}
_NOT_OURS = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
#: The files SQLite keeps beside a database: the write-ahead log, its index (shared memory)
#: and the journal of a change made outside WAL mode.
COMPANIONS = ("-wal", "-shm", "-journal")


def check_files(path: Path, location: str) -> None:
    """Refuse a database that is not a regular file (a folder, a FIFO, a device; a link is
    followed to the file it names), and one beside which (where SQLite keeps them: beside the
    file a link names) a companion file is a link, a folder, a FIFO or a device. SQLite
    opens them following links: one placed in a shared folder would have runner's journal
    written into a file that is not runner's."""
    real = Path(os.path.realpath(path))
    try:
        what = in_the_way(real)
        if what is not None:
            raise StateUnusable(f"{location}: {what}, not a database file; name the state's "
                                "file (the default is state/runner.sqlite)")
        for suffix in COMPANIONS:
            companion = real.with_name(real.name + suffix)
            what = in_the_way(companion)
            if what is not None:
                raise StateUnusable(f"{location}: {companion} is {what}, where SQLite keeps "
                                    "the database's journal; remove it (runner never writes "
                                    "through it)")
    except OSError as exc:
        raise state_error(exc, location) from None


def check_migrations(conn: sqlite3.Connection, migrations: Migrations, location: str) -> None:
    """Refuse a database that a newer runner migrated (it applied a step not known here)."""
    table = Migrations.migrations_table
    if not _tables(conn).get(table):
        return
    applied = [row[0] for row in conn.execute(
        f"SELECT name FROM {table} WHERE migration_set = ? ORDER BY rowid", [migrations.name])]
    known = _known(migrations)
    newer = [name for name in applied if name not in known]
    if newer:
        raise StateUnusable(f"{location}: written by a newer runner (its migration "
                            f"{newer[0]!r} is unknown to this one); run it with that runner "
                            "or a newer one")


def check_tables(conn: sqlite3.Connection, location: str) -> None:
    """Refuse a database missing a table or a column that runner's migrations make
    (``runner.state.schema.TABLES``)."""
    refuse_missing(_tables(conn), location)


@cache
def _known(migrations: Migrations) -> frozenset[str]:
    """The names of the migrations this runner has (all pending on an empty database)."""
    with Database(memory=True) as db:
        return frozenset(migration.name for migration in migrations.pending(db))


def _tables(conn: sqlite3.Connection) -> dict[str, set[str]]:
    names = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    quoted = {name: name.replace('"', '""') for name in names}
    return {name: {row[1] for row in conn.execute(f'PRAGMA table_info("{quoted[name]}")')}
            for name in names}


def state_error(exc: sqlite3.Error | OSError, location: str,
                what: str = "the state database") -> StateError:
    """The ``StateError`` that tells what ``exc`` (from SQLite, or from making the folder
    or the file: ``what`` it is) means for a person running runner."""
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOSPC:
            return _disk_full(location)
        return StateUnusable(f"{location}: cannot create {what}: {exc.strerror or exc}")
    code = (exc.sqlite_errorcode or 0) & 0xFF if isinstance(exc, sqlite3.Error) else 0
    if code in _LOCKED:
        return StateUnavailable(f"{location}: the state database is locked by another "
                                "process; try later")
    if code == sqlite3.SQLITE_FULL:
        return _disk_full(location)
    if code in _CANNOT_WRITE:
        return StateUnusable(f"{location}: cannot write the state database (a read-only "
                             f"folder or file system, or no permission): {exc}")
    if code in _NOT_OURS:
        return StateUnusable(f"{location}: not a runner state database, or damaged: {exc}")
    return StateUnusable(f"{location}: cannot use the state database: {exc}")


def _disk_full(location: str) -> StateUnavailable:
    return StateUnavailable(f"{location}: the disk is full; free some space and run again "
                            "(what is recorded is safe)")
