"""The keys a stream of rows has given so far, each with the first row that gave it, in
memory that does not grow with the batch: a dict for the first ``IN_MEMORY`` keys, then a
temporary SQLite file (deleted when closed) whose page cache is bounded. A million rows
stream in the same memory as fifty thousand. The loader keeps the external_ids seen
(``runner.job.loading``: to refuse a second row with the same one), a plan the digests of
what its rows pay (``runner.engine.duplicates``), each with a note (its external_id)."""

from __future__ import annotations

import sqlite3
import tempfile

IN_MEMORY = 50_000
_BATCH = 2_000


class Seen:
    """key -> the first row that gave it, and its note."""

    def __init__(self) -> None:
        self._memory: dict[str, tuple[int, str]] = {}
        self._db: sqlite3.Connection | None = None
        self._file: tempfile._TemporaryFileWrapper[bytes] | None = None

    def first(self, key: str, row: int, note: str = "") -> int:
        """The first row that gave ``key`` (``row`` when this one is the first)."""
        earlier = self.get(key)
        if earlier is not None:
            return earlier[0]
        self.put(key, row, note)
        return row

    def get(self, key: str) -> tuple[int, str] | None:
        """The first row that gave ``key``, with its note; None when none did."""
        earlier = self._memory.get(key)
        if earlier is None and self._db is not None:
            found = self._db.execute("SELECT row, note FROM seen WHERE id = ?",
                                     [key]).fetchone()
            if found is not None:
                earlier = (int(found[0]), str(found[1]))
        return earlier

    def put(self, key: str, row: int, note: str = "") -> None:
        """``key`` was given first by ``row`` (the caller knows it was not seen before)."""
        self._memory[key] = (row, note)
        if len(self._memory) >= (_BATCH if self._db is not None else IN_MEMORY):
            self._spill()

    def _spill(self) -> None:
        if self._db is None:
            self._file = tempfile.NamedTemporaryFile(prefix="runner-seen-", suffix=".db")
            self._db = sqlite3.connect(self._file.name)
            self._db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; "
                                   "PRAGMA cache_size=-2048; "
                                   "CREATE TABLE seen (id TEXT PRIMARY KEY, row INTEGER, "
                                   "note TEXT) WITHOUT ROWID")
        with self._db:
            self._db.executemany("INSERT INTO seen VALUES (?, ?, ?)",
                                 [(k, r, n) for k, (r, n) in self._memory.items()])
        self._memory.clear()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._file is not None:
            self._file.close()
            self._file = None
