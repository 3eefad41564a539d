"""Who works a job now: its workers, one row each in ``workers`` with a heartbeat, in two
siblings, one per backend. A worker's claims on the job's items (``runner.state.queue``)
last as long as its heartbeat is fresh.

- ``SoleLease`` (SQLite): one run at a time works a job (rule 6). A second is refused
  (LeaseHeld, exit 75) while the first is alive: its heartbeat is fresh, its PID lives where
  the PID means the same process, or it holds the job's lock file beside the database
  (``holders.JobLock``). The worker that enlists is the job's only one: the claims of any
  before it are void.
- ``SharedLeases`` (PostgreSQL): any number of processes, on any hosts, work one job
  together, each enlisted beside the others. A job's step is done under a lock held across
  its block (``PostgresConnector.session_lock``).

``StateStore.join`` makes the ``Worker``: it enlists as the block starts (the CLI joins
before the embedded sandbox starts, so that a second run is refused at once), names the run
it works once the run has begun (``Worker.started``), keeps its heartbeat fresh from one
thread, and leaves as the block ends (its claims anyone's at once).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import LeaseHeld, StateError
from runner.logs import event
from runner.state.connector import Connector, Row, Tx
from runner.state.holders import LEASE_TTL, JobLock, alive, this_process, worker_name

if TYPE_CHECKING:
    from runner.state.postgres import PostgresConnector
    from runner.state.store import StateStore

log = logging.getLogger("runner")
# A worker's claims on items are anyone's once its heartbeat is this old.
CLAIM_TTL = LEASE_TTL


class Worker:
    """This process working one job (``StateStore.join``): its row among the job's workers
    (rule 6: LeaseHeld when another live run works the job alone), taken as the block
    starts, kept fresh by one heartbeat thread, and given up as the block ends, on the
    connection of ``state``, which the run works with. ``name`` names its claims on items;
    they are anyone's once its heartbeat is ``claim_ttl`` seconds old."""

    def __init__(self, state: StateStore, job_name: str, claim_ttl: float) -> None:
        self.state = state
        self.leases = state.leases
        self.job_name = job_name
        self.name = worker_name()
        self.claim_ttl = claim_ttl
        self.run_id: int | None = None
        self._lock: JobLock | None = None
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._keep_fresh, daemon=True, name="heartbeat")

    def __enter__(self) -> Worker:
        self._lock = self.leases.acquire(self.job_name, self.name)
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._beat.join()
        try:
            self.leases.release(self.job_name, self.name)
        finally:
            if self._lock is not None:
                self._lock.release()

    def started(self, run_id: int) -> None:
        """The worker's row names the run it works (until now: "starting")."""
        self.leases.started(self.name, run_id)
        self.run_id = run_id

    def _keep_fresh(self) -> None:
        while not self._stop.wait(min(LEASE_TTL, self.claim_ttl) / 3):
            self.leases.heartbeat(self.name)


class Leases(ABC):
    """What both backends' workers do alike: refresh, leave, read, judge one alive."""

    shared = False

    def __init__(self, db: Connector, path: Path | None = None) -> None:
        self.db = db
        self.path = path  # the database's file (None: no lock file)

    def _lock(self, job_name: str) -> JobLock | None:
        """The job's lock file beside the database (None: a database in memory, or
        PostgreSQL: the heartbeat, and the PID where it means the same, decide)."""
        return JobLock(self.path, job_name) if self.path is not None else None

    def alive(self, worker: Row) -> bool:
        lock = self._lock(worker["job_name"])
        return alive(worker, lock.probe() if lock is not None else None)

    def heartbeat(self, worker: str) -> None:
        try:
            self.db.write(self.db.sql("heartbeat"), now=time.time(), worker_id=worker)
        except StateError as exc:  # the run's next write meets it, and says so
            log.warning("the heartbeat of %s could not be written: %s", worker, exc,
                        extra=event("heartbeat_not_written"))

    def release(self, job_name: str, worker: str) -> None:
        """The worker leaves: its row is gone, its claims anyone's at once."""
        self.db.write(self.db.sql("forget_worker"), job_name=job_name, worker_id=worker)

    def started(self, worker: str, run_id: int) -> None:
        self.db.write(self.db.sql("worker_started"), run_id=run_id, now=time.time(),
                      worker_id=worker)

    def current(self, job_name: str) -> list[Row]:
        """The job's workers (their runs and heartbeats), the latest heartbeat first."""
        return self.db.read(self.db.sql("workers"), job_name=job_name)

    @abstractmethod
    def acquire(self, job_name: str, worker: str) -> JobLock | None:
        """Enlist ``worker`` for a run starting (with the job's lock file, taken with it, if
        any), or raise LeaseHeld when a live run works the job (and runs alone)."""

    @abstractmethod
    def step(self, job_name: str, step: str) -> contextlib.AbstractContextManager[None]:
        """The block in which a worker does the job's ``step`` (``StateStore.job_step``)."""


class SoleLease(Leases):
    """The workers of a SQLite state: one run per job."""

    def acquire(self, job_name: str, worker: str) -> JobLock | None:
        sql = self.db.sql

        def work(tx: Tx) -> JobLock | None:
            rows = tx.read(sql("workers"), job_name=job_name)
            lock = self._lock(job_name)
            taken = lock.take() if lock is not None else None
            if taken is False or any(alive(row, taken) for row in rows):
                if lock is not None:
                    lock.release()
                raise held(job_name, rows[0] if rows else None)
            me = this_process()
            try:
                tx.write(sql("enlist"), worker_id=worker, job_name=job_name, host=me.host,
                         pid=me.pid, boot_id=me.boot_id, pid_ns=me.pid_ns,
                         locked=int(bool(taken)), now=time.time())
            except BaseException:
                if lock is not None:
                    lock.release()
                raise
            return lock if taken else None
        return self.db.transaction(work)

    @contextlib.contextmanager
    def step(self, job_name: str, step: str) -> Iterator[None]:
        """The job's ``step`` done by this run alone: it is the job's only worker."""
        yield


class SharedLeases(Leases):
    """The workers of a PostgreSQL state: any number per job."""

    shared = True

    def __init__(self, db: PostgresConnector) -> None:
        super().__init__(db)
        self.pg = db

    def acquire(self, job_name: str, worker: str) -> JobLock | None:
        """Enlist beside the job's other workers (those silent for ``LEASE_TTL`` are
        forgotten: dead)."""
        me = this_process()
        now = time.time()
        self.db.write(self.db.sql("enlist"), worker_id=worker, job_name=job_name,
                      host=me.host, pid=me.pid, boot_id=me.boot_id, pid_ns=me.pid_ns,
                      now=now, alive=now - LEASE_TTL)
        return None

    @contextlib.contextmanager
    def step(self, job_name: str, step: str) -> Iterator[None]:
        """One worker at a time in the job's ``step``; the others wait at its start."""
        with self.pg.session_lock(f"runner:step:{job_name}:{step}"):
            yield


def held(job_name: str, lease: Row | None) -> LeaseHeld:
    """Why a run is refused: ``lease`` is the job's live worker (None: a lock file held)."""
    if lease is None:  # its lock still held: a run ending, or one on another database
        return LeaseHeld(f"job {job_name} is being run by another process; try later")
    run = f" (run {lease['run_id']})" if lease["run_id"] else " (starting)"
    return LeaseHeld(f"job {job_name} is being run by pid {lease['pid']} on "
                     f"{lease['host']}{run}; try later")


