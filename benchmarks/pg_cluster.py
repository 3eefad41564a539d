"""A throwaway PostgreSQL cluster, for the tests and the benchmarks that need a real server.

``initdb`` then ``pg_ctl start`` in a temporary folder, on a free loopback port, trust
authentication for the user ``runner``; ``new_database`` gives a fresh database. The suite
makes one cluster per session (tests/pg_support.py hands this module to its fixtures);
benchmarks/chaos.py and benchmarks/scaling.py make their own when no ``--state`` is given,
and chaos.py restarts it (``restart_immediate``) in the middle of a run. ``initdb`` refuses
to run as root: when the process is root, the cluster is made and run by the ``postgres``
system user, in a folder that user owns. The binaries are Debian's
(``/usr/lib/postgresql/N/bin``); when they are missing the cluster is not made, loudly: the
tests never skip (``.ci/run`` installs them).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg

USER = "runner"


def pg_bin() -> Path:
    """The newest PostgreSQL's binaries folder on this machine."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name))
    if not found:
        raise RuntimeError("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/"
                           "pg_ctl): apt-get install -y postgresql")
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A PostgreSQL server of its own: started, restarted at will, stopped and removed."""

    def __init__(self) -> None:
        self.bin = pg_bin()
        self.root = Path(tempfile.mkdtemp(prefix="runner-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._numbers = itertools.count(1)
        try:
            self._pg("initdb", "-D", str(self.data), "-U", USER, "-A", "trust", "--no-sync",
                     "-E", "UTF8", "--locale", "C")
            self.start()
        except BaseException:
            # (pg_ctl may give up waiting on a server that comes up after all)
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self.stop("immediate")
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _pg(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr}"
                               f"{done.stdout}")

    def start(self) -> None:
        # No fsync (the machine does not crash under a test), but commits are synchronous:
        # an immediate shutdown keeps every commit a client was told of, as in production.
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c full_page_writes=off "
                   "-c max_connections=200")
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w",
                 "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        self._pg("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart_immediate(self) -> None:
        """What a crash of the server looks like to its clients: every connection cut."""
        self.stop("immediate")
        self.start()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A new, empty database; its URL."""
        name = f"t{os.getpid()}_{next(self._numbers)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} STRATEGY = FILE_COPY")
        return self.url(name)

    def remove(self) -> None:
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
