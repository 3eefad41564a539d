"""Cooperating workers in one PostgreSQL state: the claims, the job's steps and the shared
rate slot of ``StateStore`` (see its docs), for processes on any hosts at once.

Claims are rows locked with ``FOR UPDATE SKIP LOCKED`` then marked with the worker and an
expiry on the database's clock (one clock for every host); a worker's heartbeat moves its
expiry on, and an expired claim is anyone's. A job's step is done under a session advisory
lock keyed on the job and the step, held on one connection for the step's block: the other
workers wait at its start, then find it recorded in ``job_steps``. The job's finish and its
rate slot are single statements under row locks or a transaction's advisory lock.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

from runner.state.passes import LocalPasses, staged_row
from runner.state.records import STAGED, ItemRecord, Staged
from runner.state.store import LEASE_TTL, now_iso

_NOW = "extract(epoch FROM clock_timestamp())"
_CLAIMABLE = f"(claimed_by IS NULL OR claim_expires <= {_NOW})"
SHARE_STEP = 8  # items: a page near the end of a pass is a multiple of this, at least


class PostgresWorkers(LocalPasses):
    """The coordination methods, concurrent: ``_with_tx`` and ``_connection`` are the
    store's (``runner.state.postgres``)."""

    _GREATEST = "greatest"
    _DISTINCT = "IS DISTINCT FROM"

    def _with_tx(self, work: Any) -> Any:
        raise NotImplementedError

    def _connection(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _atomic(self, work: Any) -> Any:
        return self._with_tx(work)

    def _now(self) -> tuple[str, list[Any]]:
        return _NOW, []

    def _serialize(self, tx: Any, key: str) -> None:
        tx.execute("SELECT pg_advisory_xact_lock(hashtext(?))", [key])

    def _dicts(self, tx: Any, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        return tx.dicts(sql, params)  # type: ignore[no-any-return]

    def _share(self, tx: Any, job_name: str, ahead: str, params: list[Any], size: int) -> int:
        """Near the end of a pass, a page is a fair share of what is left: of the items
        ahead of the cursor, one live worker's part (rounded up to ``SHARE_STEP``), when
        that is less than ``size``. The pages shrink as the pass ends, and its workers end
        it together instead of one working alone through a last large page (guided
        self-scheduling). Live workers: those whose lease is fresh."""
        fresh = time.time() - LEASE_TTL
        live = tx.execute("SELECT (SELECT count(*) FROM leases WHERE job_name = ? AND "
                          "heartbeat_at > ?) + (SELECT count(*) FROM worker_leases WHERE "
                          "job_name = ? AND heartbeat_at > ?)",
                          [job_name, fresh, job_name, fresh]).fetchone()[0]
        if int(live) <= 1 or size <= SHARE_STEP:
            return size
        left = tx.execute(f"SELECT count(*) FROM (SELECT 1 FROM items WHERE {ahead} LIMIT ?) "
                          "AS ahead", [*params, size * live]).fetchone()[0]
        share = -(-int(left) // int(live))
        return max(SHARE_STEP, min(size, -(-share // SHARE_STEP) * SHARE_STEP))

    def stage_plan(self, job_name: str, staged: Sequence[Staged]) -> None:
        """As SQLite's, with COPY: the rows go in one stream, not one statement each."""
        if not staged:
            return

        def work(tx: Any) -> None:
            with tx.conn.cursor() as cursor, cursor.copy(
                    f"COPY plan_items (job_name, {', '.join(STAGED)}) FROM STDIN") as copy:
                for s in staged:
                    copy.write_row(staged_row(job_name, s))
        self._with_tx(work)

    def claim_items(self, job_name: str, worker: str, limit: int, outcomes: Sequence[str],
                    ttl: float) -> list[ItemRecord]:
        rows = self._rows(
            f"UPDATE items SET claimed_by = ?, claim_expires = {_NOW} + ? WHERE external_id "
            f"IN (SELECT external_id FROM items WHERE job_name = ? AND outcome = ANY(?) AND "
            f"{_CLAIMABLE} ORDER BY row LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING *",
            [worker, ttl, job_name, list(outcomes), limit])
        return sorted((ItemRecord.from_row(r) for r in rows), key=lambda r: r.row)

    def refresh_claims(self, job_name: str, worker: str, ttl: float) -> int:
        return len(self._rows(f"UPDATE items SET claim_expires = {_NOW} + ? WHERE "
                              "job_name = ? AND claimed_by = ? RETURNING external_id",
                              [ttl, job_name, worker]))

    @contextlib.contextmanager
    def job_step(self, job_name: str, step: str, digest: str) -> Iterator[bool]:
        key = f"runner:step:{job_name}:{step}"
        with self._connection() as conn:
            conn.execute("SELECT pg_advisory_lock(hashtext(%s))", [key])
            try:
                done = conn.execute("SELECT digest FROM job_steps WHERE job_name = %s AND "
                                    "step = %s", [job_name, step]).fetchone()
                if done is not None and done[0] == digest:
                    yield False
                    return
                yield True
                conn.execute("INSERT INTO job_steps (job_name, step, digest, done_by, "
                             "done_at) VALUES (%s, %s, %s, NULL, %s) ON CONFLICT (job_name, "
                             "step) DO UPDATE SET digest = excluded.digest, done_at = "
                             "excluded.done_at", [job_name, step, digest, now_iso()])
            finally:
                if not conn.broken:
                    conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [key])

    def finish_job(self, job_name: str, worker: str, key: str) -> bool:
        def work(tx: Any) -> bool:
            tx.execute("SELECT pg_advisory_xact_lock(hashtext(?))",
                       [f"runner:finish:{job_name}"])
            tx.execute(f"UPDATE items SET claimed_by = NULL, claim_expires = NULL WHERE "
                       f"job_name = ? AND claimed_by = ? AND claim_expires > {_NOW}",
                       [job_name, worker])  # what it gave up stays for another to take over
            busy = tx.execute(f"SELECT 1 FROM items WHERE job_name = ? AND claimed_by IS NOT "
                              f"NULL AND claim_expires > {_NOW} LIMIT 1", [job_name])
            if busy.fetchone() is not None:
                return False
            return self._mark_finished(tx.dicts, job_name, worker, key)
        return bool(self._with_tx(work))
