"""What the engine benchmarks share (benchmarks/engine.py, benchmarks/scale.py): a sandbox in
its own process, a runner run timed as a subprocess with its CPU seconds and peak RSS (from
``os.wait4``: the run's own, not the largest of this process's children), and the calls the
sandbox received meanwhile.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos import KEY, ROOT, SECRET, admin, runner_env

JOB_NAME = "bench-2026-11"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_sandbox(port: int, latency_ms: float, log: Path, *extra: str,
                  ) -> subprocess.Popen[bytes]:
    """``runner sandbox serve`` in its own process, statuses final at once, money enough;
    ``extra``: more options."""
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "runner", "sandbox", "serve", "--port", str(port),
             "--api-key", KEY, "--api-secret", SECRET, "--latency-ms", str(latency_ms),
             "--submit-delay", "0", "--complete-delay", "0", "--balance", "EUR=10000000000",
             *extra],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=runner_env())
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the sandbox did not start (exit {server.returncode}); see {log}")
        try:
            admin(url, "GET", "/clock")
            return server
        except OSError:
            time.sleep(0.05)
    server.kill()
    server.wait()
    raise SystemExit("the sandbox did not answer within 30 s")


@dataclass
class Timeline:
    """The sandbox's request counts sampled while a run goes (``--timeline``): when the first
    call, the first and last POST and the last call arrived, from the run's start."""

    url: str
    every: float = 0.05
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, POSTs, GETs)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            counts = admin(self.url, "GET", "/requests?latest=0")["counts"]
            self.samples.append((time.monotonic() - self._started, int(counts.get("POST", 0)),
                                 int(counts.get("GET", 0))))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def post_span(self) -> float | None:
        """Seconds from the first to the last POST, or None."""
        last = max((p for _, p, _ in self.samples), default=0)
        if not last:
            return None
        first = next(t for t, p, _ in self.samples if p)
        end = next(t for t, p, _ in self.samples if p >= last)
        return end - first

    def describe(self, wall: float) -> str:
        def first(pred: Any) -> str:
            t = next((t for t, p, g in self.samples if pred(p, g)), None)
            return "-" if t is None else f"{t:.2f}"

        last_post = max((p for _, p, _ in self.samples), default=0)
        last_call = max((p + g for _, p, g in self.samples), default=0)
        return (f"timeline (s from start, +-{self.every:.2f}): first call "
                f"{first(lambda p, g: p + g)}, first POST {first(lambda p, g: p)}, last POST "
                f"{first(lambda p, g: last_post and p >= last_post)}, last call "
                f"{first(lambda p, g: last_call and p + g >= last_call)}, exit {wall:.2f}")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (Linux /proc), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Timed:
    code: int
    seconds: float
    counts: dict[str, int]
    runner_cpu: float  # user + system seconds of the runner process
    sandbox_cpu: float | None
    peak_rss: int  # bytes: the runner process's largest resident set
    timeline: Timeline | None = None

    def calls(self) -> int:
        """Provider calls the sandbox received during the run (every method)."""
        return sum(v for k, v in self.counts.items() if k.isupper() and " " not in k)

    def cpu(self) -> str:
        sandbox = "-" if self.sandbox_cpu is None else f"{self.sandbox_cpu:.2f} s"
        n = self.calls()
        per_call = f"{1000 * self.runner_cpu / n:.2f} ms" if n else "-"
        return (f"CPU: runner {self.runner_cpu:.2f} s ({100 * self.runner_cpu / self.seconds:.0f}%"
                f" of the wall time; {per_call} per call, {n} calls), sandbox {sandbox}; "
                f"runner peak RSS {mib(self.peak_rss)}")


def mib(size: int) -> str:
    return f"{size / 1048576:.0f} MiB"


def timed_run(command: list[str], cwd: Path, url: str, log: Path, timeline: bool,
              sandbox_pid: int) -> Timed:
    admin(url, "DELETE", "/requests")
    line = Timeline(url) if timeline else None
    server = cpu_seconds(sandbox_pid)
    with log.open("wb") as out:
        started = time.monotonic()
        if line is not None:
            line.start()
        proc = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=runner_env())
        _, status, usage = os.wait4(proc.pid, 0)  # the run's own CPU and peak RSS
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        if line is not None:
            line.stop()
    server_after = cpu_seconds(sandbox_pid)
    sandbox_cpu = None if server is None or server_after is None else server_after - server
    counts = {k: int(v) for k, v in admin(url, "GET", "/requests")["counts"].items()}
    return Timed(code, seconds, counts, usage.ru_utime + usage.ru_stime, sandbox_cpu,
                 usage.ru_maxrss * 1024, line)  # ru_maxrss: KiB on Linux


def not_final(state: Path) -> int:
    """How many items of the batch are not final yet in the state database."""
    with sqlite3.connect(state) as db:
        return int(db.execute("SELECT count(*) FROM items WHERE job_name = ? AND step != "
                              "'final'", [JOB_NAME]).fetchone()[0])


def finish_batch(job: Path, command: list[str], state: Path, wait_for_final: str) -> str:
    """Follow what a run with ``wait_for_final`` did not wait for to its final status (an
    untimed run with ``wait_for_final: 60s``, as a later run would), so that the next run
    times a finished batch; what it did, as a line to print ('' when nothing was left)."""
    unfinished = not_final(state)
    if not unfinished:
        return ""
    text = job.read_text(encoding="utf-8")
    job.write_text(text.replace(f"wait_for_final: {wait_for_final}\n", "wait_for_final: 60s\n"),
                   encoding="utf-8")
    code = subprocess.run(command, cwd=job.parent, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env=runner_env(), check=False).returncode
    return (f"finishing run (untimed, wait_for_final: 60s): {unfinished} item(s) followed to "
            f"their final status; exit {code}, {not_final(state)} left\n")


def calls(counts: dict[str, int], method: str) -> str:
    groups = sorted(((k.split(" ", 1)[1], v) for k, v in counts.items()
                     if k.startswith(method + " ")), key=lambda kv: -kv[1])
    inner = ", ".join(f"{g} {n}" for g, n in groups)
    return f"{method} {counts.get(method, 0)}" + (f" ({inner})" if inner else "")


def compile_ahead() -> str:
    """When this environment keeps Python from writing bytecode (PYTHONDONTWRITEBYTECODE, as
    in many containers), an editable install compiles every runner module at every start;
    an installed wheel is compiled once, at install. Compile runner's sources once here, so
    the runs time the engine rather than the compiler; say so."""
    if not (sys.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE")):
        return ""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "runner")],
                   check=True, stdout=subprocess.DEVNULL)
    return ("; runner's bytecode compiled ahead (PYTHONDONTWRITEBYTECODE is set: "
            "python -m compileall runner)")


def startup_seconds() -> float:
    """How long ``python -m runner --version`` takes: the floor of any run."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "runner", "--version"], check=True,
                   stdout=subprocess.DEVNULL, env=runner_env())
    return time.monotonic() - started
