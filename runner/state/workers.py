"""Cooperating workers in one SQLite state: the claims, the job's steps and the shared rate
slot of ``StateStore`` (see its docs), for a backend whose run is the job's only worker.

With SQLite the job's lease (rule 6) lets one run at a time work a job, so nothing here
waits for another process: claims are kept (the same columns as PostgreSQL's, so that
``runner state copy`` moves them both ways) and honoured, and a step is done once per digest.
``runner.state.postgres`` overrides each with its concurrent form.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from runner.state.records import ItemRecord
from runner.state.store import StateStore, now_iso

_CLAIMABLE = "(claimed_by IS NULL OR claim_expires <= ?)"


class LocalWorkers(StateStore):
    """The coordination methods over ``_run`` and ``_rows`` (``?`` parameters)."""

    # The backend's SQL for the larger of two values, and for "differs, NULL included".
    _GREATEST = "max"
    _DISTINCT = "IS NOT"

    def _run(self, *statements: Any) -> int:
        raise NotImplementedError

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    def claim_items(self, job_name: str, worker: str, limit: int, outcomes: Sequence[str],
                    ttl: float) -> list[ItemRecord]:
        now = time.time()
        marks = ", ".join("?" * len(outcomes))
        rows = self._rows(
            "UPDATE items SET claimed_by = ?, claim_expires = ? WHERE external_id IN "
            f"(SELECT external_id FROM items WHERE job_name = ? AND outcome IN ({marks}) "
            f"AND {_CLAIMABLE} ORDER BY row LIMIT ?) RETURNING *",
            [worker, now + ttl, job_name, *outcomes, now, limit])
        return sorted((ItemRecord.from_row(r) for r in rows), key=lambda r: r.row)

    def refresh_claims(self, job_name: str, worker: str, ttl: float) -> int:
        rows = self._rows("UPDATE items SET claim_expires = ? WHERE job_name = ? AND "
                          "claimed_by = ? RETURNING external_id",
                          [time.time() + ttl, job_name, worker])
        return len(rows)

    def release_claims(self, job_name: str, worker: str,
                       external_ids: Sequence[str] | None = None) -> None:
        sql = ("UPDATE items SET claimed_by = NULL, claim_expires = NULL WHERE job_name = ? "
               "AND claimed_by = ?")
        args: list[Any] = [job_name, worker]
        if external_ids is not None:
            sql += f" AND external_id IN ({', '.join('?' * len(external_ids))})"
            args += external_ids
        self._run(sql, args)

    @contextlib.contextmanager
    def job_step(self, job_name: str, step: str, digest: str) -> Iterator[bool]:
        done = self._rows("SELECT digest FROM job_steps WHERE job_name = ? AND step = ?",
                          [job_name, step])
        if done and done[0]["digest"] == digest:
            yield False
            return
        yield True
        self._run("INSERT INTO job_steps (job_name, step, digest, done_by, done_at) VALUES "
                  "(?, ?, ?, NULL, ?) ON CONFLICT (job_name, step) DO UPDATE SET digest = "
                  "excluded.digest, done_at = excluded.done_at",
                  [job_name, step, digest, now_iso()])

    def finish_job(self, job_name: str, worker: str, key: str) -> bool:
        self._run("UPDATE items SET claimed_by = NULL, claim_expires = NULL WHERE job_name = ? "
                  "AND claimed_by = ? AND claim_expires > ?", [job_name, worker, time.time()])
        if self._rows("SELECT 1 FROM items WHERE job_name = ? AND claimed_by IS NOT NULL "
                      "AND claim_expires > ? LIMIT 1", [job_name, time.time()]):
            return False  # another worker still works (none does, under the lease)
        return self._mark_finished(self._rows, job_name, worker, key)

    def _mark_finished(self, rows: Callable[[str, list[Any]], list[Any]], job_name: str,
                       worker: str, key: str) -> bool:
        """The job's finish recorded for ``key`` by ``worker``: True unless it already was."""
        return bool(rows(
            "INSERT INTO job_steps (job_name, step, digest, done_by, done_at) VALUES "
            "(?, 'finish', ?, ?, ?) ON CONFLICT (job_name, step) DO UPDATE SET digest = "
            "excluded.digest, done_by = excluded.done_by, done_at = excluded.done_at "
            f"WHERE job_steps.digest {self._DISTINCT} excluded.digest RETURNING digest",
            [job_name, key, worker, now_iso()]))

    def rate_slot(self, job_name: str, interval: float, now: float, count: int = 1) -> float:
        span = interval * count
        rows = self._rows(
            "INSERT INTO rate_slots (job_name, next_at) VALUES (?, ?) ON CONFLICT (job_name) "
            f"DO UPDATE SET next_at = {self._GREATEST}(rate_slots.next_at, ?) + ? "
            "RETURNING next_at",
            [job_name, now + span, now, span])
        return float(rows[0]["next_at"]) - span

