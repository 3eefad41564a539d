"""Chaos across workers: benchmarks/chaos.py's experiment with N ``runner run JOB`` processes
on one job and one state (PostgreSQL, or a SQLite file) at once.

The N workers start together while the sandbox injects its faults. Each planned event falls
after a random one of the POSTs the batch still needs (chaos.py's ``plan_kill``): a kill
(SIGKILL to a random live worker) or, once, a restart of the database
(``pg_ctl stop -m immediate`` then ``start``: every connection cut). A worker that ends, for
whatever reason, is started again a random 0.3-1.2 s later; exit 75 (another run holds the
job's lease, where a job is worked by one run at a time) is "try later" too. After the last
event the workers still alive are killed, the faults switched off, and the N workers run
again until each has ended (75: started again later); the round passes when every one
exited 0 (at most ``final_runs`` rounds). The verdicts are chaos.py's, read through the
state store, so they hold for either backend.

``state_for`` gives the command line its state: the one named, or a throwaway PostgreSQL
cluster (benchmarks/pg_cluster.py) made for the run and removed after it.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from chaos import (
    JOB_NAME,
    Kill,
    Result,
    RunRecord,
    Settings,
    admin,
    balance,
    fault_rules,
    plan_kill,
    post_count,
    posts_left,
    runner_command,
    runner_env,
    sandbox_config,
    verify,
    wait_final,
    write_batch,
)
from pg_cluster import Cluster

from runner.sandbox import RunningSandbox, start_in_thread

LEASE_HELD = 75  # exit code: another run holds the job's lease (or: try later)


@dataclass
class Worker:
    """One of the N slots: the process running in it now, if any."""

    slot: int
    proc: subprocess.Popen[bytes] | None = None
    out: IO[bytes] | None = None
    number: int = 0
    started: float = 0.0
    posts0: int = 0
    due: float | None = 0.0  # when to start it (again); None: not to be started


class Crew:
    """N workers running one command in one folder, their runs recorded in ``runs``."""

    def __init__(self, settings: Settings, command: list[str], folder: Path,
                 sandbox: RunningSandbox, result: Result, rng: random.Random,
                 say: Callable[[str], None]) -> None:
        self.settings, self.command, self.folder = settings, command, folder
        self.sandbox, self.result, self.rng, self.say = sandbox, result, rng, say
        self.workers = [Worker(n + 1) for n in range(settings.workers)]
        self.numbers = itertools.count(1)
        self.faults = True

    def live(self) -> list[Worker]:
        return [w for w in self.workers if w.proc is not None]

    def start_due(self) -> None:
        now = time.monotonic()
        for w in self.workers:
            if w.proc is None and w.due is not None and now >= w.due:
                w.number, w.started, w.posts0 = next(self.numbers), now, post_count(self.sandbox)
                w.out = (self.folder / f"run-{w.number:02d}-w{w.slot}.log").open("wb")
                w.proc = subprocess.Popen(self.command, cwd=self.folder,
                                          stdin=subprocess.DEVNULL, stdout=w.out,
                                          stderr=subprocess.STDOUT, env=runner_env())

    def _ended(self, w: Worker, code: int | None, kill: Kill | None = None,
               hung: bool = False) -> RunRecord:
        assert w.proc is not None and w.out is not None
        w.proc.wait()
        w.out.close()
        record = RunRecord(w.number, self.faults, time.monotonic() - w.started, code,
                           post_count(self.sandbox) - w.posts0, kill, hung,
                           Path(w.out.name), worker=w.slot)
        w.proc = w.out = None
        self.result.runs.append(record)
        self.say(record.describe())
        return record

    def reap(self, restart: Callable[[int], bool]) -> list[RunRecord]:
        """The runs that ended since; a worker whose run ended with a code for which
        ``restart`` says so is started again a random delay later."""
        ended = []
        for w in self.live():
            assert w.proc is not None
            code = w.proc.poll()
            hung = code is None and time.monotonic() - w.started > self.settings.run_bound
            if hung:
                w.proc.send_signal(signal.SIGKILL)
            if code is None and not hung:
                continue
            record = self._ended(w, code, hung=hung)
            ended.append(record)
            w.due = (time.monotonic() + self.rng.uniform(*self.settings.restart_delay)
                     if code is not None and restart(code) else None)
        return ended

    def kill(self, w: Worker, kill: Kill | None) -> None:
        assert w.proc is not None
        w.proc.send_signal(signal.SIGKILL)
        self._ended(w, None, kill)
        w.due = time.monotonic() + self.rng.uniform(*self.settings.restart_delay)

    def stop_all(self) -> None:
        for w in self.live():
            self.kill(w, None)
        for w in self.workers:
            w.due = None


def fault_phase(crew: Crew, settings: Settings, ids: list[str], rng: random.Random,
                restart_db: Callable[[], None] | None) -> None:
    """The kills (and the database's restart) while the faults are on; then every worker
    still alive is killed too."""
    events = ["kill"] * settings.kills
    if restart_db is not None:
        events.insert(rng.randint(0, len(events)), "restart")
    sandbox = crew.sandbox
    for n, event in enumerate(events):
        kill = plan_kill(rng, settings, posts_left(sandbox, ids), len(events) - n)
        if kill is None:
            crew.say("nothing left to send: no more kills")
            break
        posts0, reached, checked = post_count(sandbox), None, time.monotonic()
        while True:
            crew.reap(lambda code: True)
            crew.start_due()
            now = time.monotonic()
            if reached is None and post_count(sandbox) - posts0 >= kill.posts:
                reached = now
            if reached is not None and now - reached >= kill.delay:
                break
            if now - checked > 0.2:  # the batch may have ended meanwhile
                checked = now
                if not posts_left(sandbox, ids):
                    break
            time.sleep(0.001)
        if event == "restart":
            assert restart_db is not None
            began = time.monotonic()
            restart_db()
            note = (f"database restarted (immediate shutdown, then start) {kill}, "
                    f"{time.monotonic() - began:.2f} s, {len(crew.live())} worker(s) alive")
            crew.result.notes.append(note)
            crew.say(note)
        elif crew.live():
            crew.kill(rng.choice(crew.live()), kill)
    crew.stop_all()


def final_rounds(crew: Crew, settings: Settings) -> bool:
    """The N workers to the end (75: again later), at most ``final_runs`` rounds; True when
    every worker of a round exited 0."""
    for _ in range(settings.final_runs):
        codes: dict[int, int | None] = {}
        for w in crew.workers:
            w.due = time.monotonic()
        deadline = time.monotonic() + 2 * settings.run_bound
        while len(codes) < len(crew.workers) and time.monotonic() < deadline:
            for record in crew.reap(lambda code: code == LEASE_HELD):
                if record.exit_code != LEASE_HELD:
                    assert record.worker is not None
                    codes[record.worker] = record.exit_code
            crew.start_due()
            time.sleep(0.005)
        crew.stop_all()
        if len(codes) == len(crew.workers) and all(c == 0 for c in codes.values()):
            return True
    return False


def run_workers(settings: Settings, folder: Path, state: Path | str,
                restart_db: Callable[[], None] | None,
                echo: Callable[[str], None] | None = None) -> Result:
    began = time.monotonic()
    result = Result(settings)
    say = echo or (lambda line: None)
    rng = random.Random(settings.seed)
    with start_in_thread(sandbox_config(settings)) as sandbox:
        job, ids = write_batch(folder, sandbox.url, settings.items,
                               concurrency=settings.concurrency)
        crew = Crew(settings, runner_command(job, state), folder, sandbox, result, rng, say)
        start = balance(sandbox.url)
        admin(sandbox.url, "POST", "/faults", {"rules": fault_rules(
            settings.latency_ms, settings.lost_rate, settings.error_rate,
            settings.unavailable_rate, settings.groups)})
        fault_phase(crew, settings, ids, rng, restart_db)
        crew.faults = settings.faults_in_final_runs
        if not crew.faults:
            admin(sandbox.url, "DELETE", "/faults")
        result.ended_well = final_rounds(crew, settings)
        admin(sandbox.url, "DELETE", "/faults")
        wait_final(sandbox)
        result.verdicts = verify(sandbox, state, JOB_NAME, ids, start)
    result.seconds = time.monotonic() - began
    return result


@contextlib.contextmanager
def state_for(state: str | None, own_cluster: bool, restart_command: str | None,
              echo: Callable[[str], None]
              ) -> Iterator[tuple[Path | str | None, Callable[[], None] | None]]:
    """The state and how to restart its database: ``state`` (restarted by
    ``restart_command``, if any), or a throwaway PostgreSQL cluster when ``own_cluster``,
    or neither (chaos.py's SQLite file)."""
    if state is not None:
        command = restart_command or ""

        def restart() -> None:
            subprocess.run(command, shell=True, check=True)

        if not command and "://" in state:
            echo("the database is not this script's: it is not restarted (--db-restart)")
        yield state, restart if command else None
    elif own_cluster:
        cluster = Cluster()
        try:
            echo(f"a throwaway PostgreSQL cluster: {cluster.url()} ({cluster.root})")
            yield cluster.new_database(), cluster.restart_immediate
        finally:
            cluster.remove()
    else:
        yield None, None
