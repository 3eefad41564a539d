"""The external_ids a stream of rows has given so far (``runner.job.loading``), to refuse a
second row with the same one, in memory that does not grow with the batch: a dict for the
first ``IN_MEMORY`` ids, then a temporary SQLite file (deleted when closed) whose page cache
is bounded. A million rows stream in the same memory as fifty thousand."""

from __future__ import annotations

import sqlite3
import tempfile

IN_MEMORY = 50_000
_BATCH = 2_000


class Seen:
    """external_id -> the first row that gave it."""

    def __init__(self) -> None:
        self._memory: dict[str, int] = {}
        self._db: sqlite3.Connection | None = None
        self._file: tempfile._TemporaryFileWrapper[bytes] | None = None

    def first(self, external_id: str, row: int) -> int:
        """The first row that gave ``external_id`` (``row`` when this one is the first)."""
        earlier = self._memory.get(external_id)
        if earlier is not None:
            return earlier
        if self._db is not None:
            found = self._db.execute("SELECT row FROM seen WHERE id = ?",
                                     [external_id]).fetchone()
            if found is not None:
                return int(found[0])
        self._memory[external_id] = row
        if len(self._memory) >= (_BATCH if self._db is not None else IN_MEMORY):
            self._spill()
        return row

    def _spill(self) -> None:
        if self._db is None:
            self._file = tempfile.NamedTemporaryFile(prefix="runner-seen-", suffix=".db")
            self._db = sqlite3.connect(self._file.name)
            self._db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; "
                                   "PRAGMA cache_size=-2048; "
                                   "CREATE TABLE seen (id TEXT PRIMARY KEY, row INTEGER) "
                                   "WITHOUT ROWID")
        with self._db:
            self._db.executemany("INSERT INTO seen VALUES (?, ?)", self._memory.items())
        self._memory.clear()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._file is not None:
            self._file.close()
            self._file = None
