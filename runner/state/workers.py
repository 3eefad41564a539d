"""Cooperating workers on either backend: the claims' heartbeat and their release, the job's
steps and its finish, and the shared rate slot of ``StateStore`` (see its docs). With SQLite
the job's lease (rule 6) lets one run at a time work a job, so nothing here waits for another
process and these are trivially true; with PostgreSQL any number of processes share the job,
and the same statements hold for them: a claim is a row marked with its worker and an expiry
on the database's clock (taken by ``StateStore.claim_next``, ``runner.state.passes``); the
job's finish is one transaction under the job's lock; a step is done under the lock the
leases give (``Leases.step``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence

from runner.state.connector import Connector, Tx
from runner.state.leases import Leases
from runner.state.records import now_iso


class Workers:
    """The workers' part of the store."""

    def __init__(self, db: Connector, leases: Leases) -> None:
        self.db = db
        self.sql = db.sql
        self.leases = leases

    def refresh_claims(self, job_name: str, worker: str, ttl: float) -> int:
        return len(self.db.write(self.sql("refresh_claims"), now=time.time(), ttl=ttl,
                                 job_name=job_name, worker=worker))

    def release_claims(self, job_name: str, worker: str,
                       external_ids: Sequence[str] | None = None) -> None:
        if external_ids is None:
            self.db.write(self.sql("release_claims"), job_name=job_name, worker=worker)
        else:
            self.db.write(self.sql("release_claims_of"), job_name=job_name, worker=worker,
                          ids=list(external_ids))

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

    def finish_job(self, job_name: str, worker: str, key: str) -> bool:
        def work(tx: Tx) -> bool:
            now = time.time()  # SQLite's clock; PostgreSQL's statements read the database's
            # What it gave up stays expired, for another to take over.
            tx.write(self.sql("release_live_claims"), job_name=job_name, worker=worker,
                     now=now)
            if tx.read(self.sql("any_live_claim"), job_name=job_name, now=now):
                return False  # another worker still works (none does, under SQLite's lease)
            return bool(tx.write(self.sql("mark_finished"), job_name=job_name, digest=key,
                                 worker=worker, done_at=now_iso()))
        return self.db.transaction(work, lock=f"runner:finish:{job_name}")

    def rate_slot(self, job_name: str, interval: float, now: float, count: int = 1) -> float:
        span = interval * count
        rows = self.db.write(self.sql("rate_slot"), job_name=job_name, now=now, span=span)
        return float(rows[0]["next_at"]) - span
