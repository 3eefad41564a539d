"""Whether the process that holds a job's lease (or a worker's claims) is still alive,
without trusting a PID beyond where it names that process.

A PID names a process only inside its PID namespace, on one boot of one kernel: PID 1 of a
container killed a moment ago reads as alive in the next container, whose own PID 1 it is.
So a lease row records, beside its holder's host name and PID, the kernel's boot id
(``/proc/sys/kernel/random/boot_id``) and the holder's PID namespace (``/proc/self/ns/pid``);
another process asks the kernel about that PID only when both are its own (``pid_gone``).

With the state in a SQLite file the holder also keeps a lock (``flock``) on a file of the
job's beside the database (``JobLock``). The kernel drops it when the process ends, however
it ends and whatever its namespace, so the next run on the same kernel (the same boot id: a
container after a killed one, on a volume they share) finds the lock free and takes the job
over at once. Anywhere else (another host, a file system without locks, the PostgreSQL
state) the heartbeat decides: a lease not refreshed for ``LEASE_TTL`` seconds is abandoned.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A lease not refreshed for this long is abandoned: its run died without releasing it.
LEASE_TTL = 30.0
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
PID_NAMESPACE = "/proc/self/ns/pid"


@dataclass(frozen=True)
class Holder:
    """Who this process is, as a lease row records it ("" where the system does not say)."""

    host: str
    pid: int
    boot_id: str
    pid_ns: str

    def scope(self) -> str:
        """A short name for where this process's PID means something (boot, namespace)."""
        if not (self.boot_id and self.pid_ns):
            return "unknown"
        return hashlib.sha256(f"{self.boot_id}/{self.pid_ns}".encode()).hexdigest()[:8]


def this_process() -> Holder:
    return _holder(os.getpid())  # keyed by PID: a forked child is another process


@functools.cache
def _holder(pid: int) -> Holder:
    try:
        boot_id = BOOT_ID.read_text().strip()
    except OSError:
        boot_id = ""
    try:
        pid_ns = os.readlink(PID_NAMESPACE)  # pid:[4026531836]: the namespace's inode
    except OSError:
        pid_ns = ""
    return Holder(socket.gethostname(), pid, boot_id, pid_ns)


def same_kernel(lease: Mapping[str, Any]) -> bool:
    """The lease's holder ran on this boot of this kernel (its locks are ours to see)."""
    me = this_process()
    return bool(me.boot_id) and lease.get("boot_id") == me.boot_id


def pid_gone(lease: Mapping[str, Any]) -> bool:
    """True only when the lease's holder is known to have ended: its PID is of our boot and
    PID namespace, and no process has it."""
    me = this_process()
    if not (same_kernel(lease) and me.pid_ns and lease.get("pid_ns") == me.pid_ns):
        return False
    return _no_process(int(lease["pid"]))


def _no_process(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: alive
        return False
    return False


def alive(lease: Mapping[str, Any], lock_free: bool | None, now: float | None = None) -> bool:
    """Whether the holder of ``lease`` (a row of ``leases``) may still be running.
    ``lock_free``: whether the job's lock file could be taken just now (None: no lock file
    here, or locks do not work on its file system)."""
    if (now or time.time()) - float(lease["heartbeat_at"]) > LEASE_TTL:
        return False
    if lease.get("locked") and lock_free is not None and same_kernel(lease):
        return not lock_free
    return not pid_gone(lease)


def worker_name() -> str:
    """A name for this process's claims, unique across hosts: host:pid:scope-random."""
    me = this_process()
    return f"{me.host}:{me.pid}:{me.scope()}-{uuid.uuid4().hex[:8]}"


def worker_gone(worker: str) -> bool:
    """True when ``worker`` (``worker_name``) ran where this process's PIDs mean the same
    (this boot, this PID namespace) and its process is gone."""
    parts = worker.rsplit(":", 2)
    me = this_process()
    if len(parts) != 3 or not parts[1].isdigit() or me.scope() == "unknown" \
            or not parts[2].startswith(me.scope() + "-"):
        return False
    return _no_process(int(parts[1]))


class JobLock:
    """An exclusive ``flock`` on ``<database>.<job digest>.lock``, held while the job's lease
    is: the one sign of a holder's life that outlives neither it nor its namespace."""

    def __init__(self, database: Path, job_name: str) -> None:
        digest = hashlib.sha256(job_name.encode()).hexdigest()[:16]
        self.path = database.with_name(f"{database.name}.{digest}.lock")
        self.fd: int | None = None

    def take(self) -> bool | None:
        """True: taken (held until ``release``); False: another live process holds it;
        None: locks cannot be used here (a read-only folder, no locks on the file system)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            return False if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else None
        self.fd = fd
        return True

    def probe(self) -> bool | None:
        """Whether the lock is free now (taken and let go at once); None as for ``take``."""
        free = self.take()
        self.release()
        return free

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the only descriptor lets the lock go
            self.fd = None
