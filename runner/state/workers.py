"""Cooperating workers on either backend: the job's steps and its finish, and the shared
rate slot of ``StateStore`` (see its docs). With SQLite one run at a time works a job
(rule 6), so nothing here waits for another process and these are trivially true; with
PostgreSQL any number of processes share the job, and the same statements hold for them:
the job's finish is one transaction under the job's lock; a step is done under the lock the
workers' backend gives (``Leases.step``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from runner.state.connector import Connector, Tx
from runner.state.leases import Leases
from runner.state.records import now_iso


class Workers:
    """The workers' part of the store."""

    def __init__(self, db: Connector, leases: Leases) -> None:
        self.db = db
        self.sql = db.sql
        self.leases = leases

    @contextlib.contextmanager
    def job_step(self, job_name: str, step: str, digest: str) -> Iterator[bool]:
        with self.leases.step(job_name, step):
            done = self.db.read(self.sql("step_digest"), job_name=job_name, step=step)
            if done and done[0]["digest"] == digest:
                yield False
                return
            yield True
            self.db.write(self.sql("step_done"), job_name=job_name, step=step, digest=digest,
                          done_at=now_iso())

    def step_done_at(self, job_name: str, step: str) -> str | None:
        rows = self.db.read(self.sql("step_done_at"), job_name=job_name, step=step)
        return rows[0]["done_at"] if rows else None

    def forget_step(self, job_name: str, step: str) -> None:
        self.db.write(self.sql("forget_step"), job_name=job_name, step=step)

    def finish_job(self, job_name: str, worker: str, key: str, stale: float) -> bool:
        def work(tx: Tx) -> bool:
            tx.write(self.sql("give_up"), job_name=job_name, worker=worker)
            if tx.read(self.sql("any_live_claim"), job_name=job_name,
                       alive=time.time() - stale):
                return False  # another worker still works (none does, under SQLite's lease)
            return bool(tx.write(self.sql("mark_finished"), job_name=job_name, digest=key,
                                 worker=worker, done_at=now_iso()))
        return self.db.transaction(work, lock=f"runner:finish:{job_name}")

    def rate_slot(self, job_name: str, interval: float, now: float, count: int = 1) -> float:
        span = interval * count
        rows = self.db.write(self.sql("rate_slot"), job_name=job_name, now=now, span=span)
        return float(rows[0]["next_at"]) - span
