"""Who runs a job now: the job's lease (rule 6), held by a ``Worker`` with its heartbeat,
and the job's steps that its workers share, in two siblings, one per backend.

- ``SoleLease`` (SQLite): one run at a time works a job. A second is refused (LeaseHeld,
  exit 75) while the first is alive: its heartbeat is fresh, its PID lives where the PID
  means the same process, or it holds the job's lock file beside the database
  (``holders.JobLock``).
- ``SharedLeases`` (PostgreSQL): any number of processes, on any hosts, work one job
  together. The first holds the job's lease; each one after it a lease of its own
  (``worker_leases``), so that the runs' states and the pages' shares see them all. A job's
  step is done under a lock held across its block (``PostgresConnector.session_lock``).

``StateStore.join`` makes the ``Worker``: it takes the lease as the block starts (the CLI
joins before the embedded sandbox starts, so that a second run is refused at once), names
the run it works once the run has begun (``Worker.started``), keeps the lease and its claims
fresh from one thread, and gives the lease back as the block ends.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import LeaseHeld, StateError
from runner.logs import event
from runner.state.connector import Connector, Row, Tx
from runner.state.holders import LEASE_TTL, JobLock, alive, this_process, worker_name

if TYPE_CHECKING:
    from runner.state.postgres import PostgresConnector
    from runner.state.store import StateStore

log = logging.getLogger("runner")
# A worker's claims on items last this long without its heartbeat.
CLAIM_TTL = LEASE_TTL


class Worker:
    """This process working one job (``StateStore.join``): the job's lease (rule 6), taken
    as the block starts (LeaseHeld when another live run holds it alone), kept fresh with
    the worker's claims by one heartbeat thread, and given back as the block ends, on the
    connection of ``state``, which the run works with. ``name`` names its claims on items;
    ``claim_ttl`` is how long one lasts without a heartbeat."""

    def __init__(self, state: StateStore, job_name: str, claim_ttl: float) -> None:
        self.state = state
        self.leases = state.leases
        self.job_name = job_name
        self.name = worker_name()
        self.claim_ttl = claim_ttl
        self.run_id: int | None = None
        self._token = ""
        self._lock: JobLock | None = None
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._keep_fresh, daemon=True, name="heartbeat")

    def __enter__(self) -> Worker:
        self._token, self._lock = self.leases.acquire(self.job_name)
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._beat.join()
        try:
            self.leases.release(self.job_name, self._token)
        finally:
            if self._lock is not None:
                self._lock.release()

    def started(self, run_id: int) -> None:
        """The lease names the run this worker works (until now: "starting")."""
        self.leases.started(self.job_name, self._token, run_id)
        self.run_id = run_id

    def _keep_fresh(self) -> None:
        while not self._stop.wait(min(LEASE_TTL, self.claim_ttl) / 3):
            self.leases.heartbeat(self.job_name, self._token)
            try:
                self.state.refresh_claims(self.job_name, self.name, self.claim_ttl)
            except StateError as exc:  # the run's next write meets it, and says so
                log.warning("the claims of %s could not be refreshed: %s", self.job_name, exc,
                            extra=event("claims_not_refreshed"))


class Leases(ABC):
    """What both backends' leases do alike: refresh, release, read, judge one alive."""

    shared = False

    def __init__(self, db: Connector, path: Path | None = None) -> None:
        self.db = db
        self.path = path  # the database's file (None: no lock file)

    def _lock(self, job_name: str) -> JobLock | None:
        """The job's lock file beside the database (None: a database in memory, or
        PostgreSQL: the heartbeat, and the PID where it means the same, decide)."""
        return JobLock(self.path, job_name) if self.path is not None else None

    def alive(self, lease: Row) -> bool:
        lock = self._lock(lease["job_name"])
        return alive(lease, lock.probe() if lock is not None else None)

    def heartbeat(self, job_name: str, token: str) -> None:
        try:
            self.db.write(self.db.sql("heartbeat"), now=time.time(), job_name=job_name,
                          token=token)
        except StateError as exc:  # the run's next write meets it, and says so
            log.warning("the lease of %s could not be refreshed: %s", job_name, exc,
                        extra=event("lease_not_refreshed"))

    def release(self, job_name: str, token: str) -> None:
        self.db.write(self.db.sql("release_lease"), job_name=job_name, token=token)

    def started(self, job_name: str, token: str, run_id: int) -> None:
        self.db.write(self.db.sql("lease_run"), run_id=run_id, now=time.time(),
                      job_name=job_name, token=token)

    def current(self, job_name: str) -> Row | None:
        """The job's lease (its run and heartbeat), if any."""
        leases = self.db.read(self.db.sql("lease"), job_name=job_name)
        return leases[0] if leases else None

    @abstractmethod
    def acquire(self, job_name: str) -> tuple[str, JobLock | None]:
        """Take the job's lease for a run starting (its token, and the job's lock file
        taken with it, if any), or raise LeaseHeld when a live run has it (and runs
        alone)."""

    @abstractmethod
    def step(self, job_name: str, step: str) -> contextlib.AbstractContextManager[None]:
        """The block in which a worker does the job's ``step`` (``StateStore.job_step``)."""


class SoleLease(Leases):
    """The lease of a SQLite state: one run per job."""

    def acquire(self, job_name: str) -> tuple[str, JobLock | None]:
        sql = self.db.sql

        def work(tx: Tx) -> tuple[str, JobLock | None]:
            rows = tx.read(sql("lease_held"), job_name=job_name)
            lock = self._lock(job_name)
            taken = lock.take() if lock is not None else None
            if taken is False or (rows and alive(rows[0], taken)):
                if lock is not None:
                    lock.release()
                raise held(job_name, rows[0] if rows else None)
            token = uuid.uuid4().hex
            me = this_process()
            try:
                tx.write(sql("take_lease"), job_name=job_name, run_id=0, host=me.host,
                         pid=me.pid, token=token, now=time.time(), boot_id=me.boot_id,
                         pid_ns=me.pid_ns, locked=int(bool(taken)))
            except BaseException:
                if lock is not None:
                    lock.release()
                raise
            return token, lock if taken else None
        return self.db.transaction(work)

    @contextlib.contextmanager
    def step(self, job_name: str, step: str) -> Iterator[None]:
        """The job's ``step`` done by this run alone: it is the job's only worker."""
        yield


class SharedLeases(Leases):
    """The leases of a PostgreSQL state: every worker of a job holds one."""

    shared = True

    def __init__(self, db: PostgresConnector) -> None:
        super().__init__(db)
        self.pg = db

    def acquire(self, job_name: str) -> tuple[str, JobLock | None]:
        """The job's lease; a live holder does not refuse this run (the workers share the
        job): it gets a lease of its own in ``worker_leases``."""
        sql = self.db.sql

        def work(tx: Tx) -> tuple[str, JobLock | None]:
            tx.write(sql("forget_dead_workers"), job_name=job_name,
                     alive=time.time() - LEASE_TTL)
            rows = tx.read(sql("lease_held"), job_name=job_name)
            token = uuid.uuid4().hex
            me = this_process()
            lease: dict[str, Any] = dict(
                job_name=job_name, run_id=0, host=me.host, pid=me.pid, token=token,
                now=time.time(), boot_id=me.boot_id, pid_ns=me.pid_ns, locked=0)
            if rows and self.alive(rows[0]):
                tx.write(sql("take_worker_lease"), **lease)
            else:
                tx.write(sql("take_lease"), **lease)
            return token, None
        return self.db.transaction(work, lock=f"runner:lease:{job_name}")

    @contextlib.contextmanager
    def step(self, job_name: str, step: str) -> Iterator[None]:
        """One worker at a time in the job's ``step``; the others wait at its start."""
        with self.pg.session_lock(f"runner:step:{job_name}:{step}"):
            yield


def held(job_name: str, lease: Row | None) -> LeaseHeld:
    if lease is None:  # its lock still held: a run ending, or one on another database
        return LeaseHeld(f"job {job_name} is being run by another process; try later")
    run = f" (run {lease['run_id']})" if lease["run_id"] else " (starting)"
    return LeaseHeld(f"job {job_name} is being run by pid {lease['pid']} on "
                     f"{lease['host']}{run}; try later")


