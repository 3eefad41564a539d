"""Scaling across workers: one latency-bound batch worked by 1, 2 and 4 ``runner run``
processes at once on one PostgreSQL state.

The sandbox serves in its own process with L ms per call (benchmarks/engine.py's
``start_sandbox``); the state is a throwaway PostgreSQL cluster of this script's
(benchmarks/pg_cluster.py) unless ``--state postgresql://...`` names one. For each worker
count W a new batch of N rows like jobs/payroll.csv (its own job name) is written with
``run.wait_for_final: 0s``, and W ``runner run JOB --yes --state URL --concurrency C``
processes are started together; the wall time runs from their start to the last one's exit.
It prints the wall time, the ideal N x 3 x L / (C x W) (three POSTs per item at L ms each,
C at a time in each of W workers, nothing else), their ratio, the POSTs the sandbox received
(3 x N when nothing is sent twice) and each worker's exit code.

``--floor`` first times the same N x 3 POSTs sent by a minimal client (http.client, no
state; ``engine.floor_seconds``) at the largest W, twice: from one process with C x W
threads, then from W processes of C threads started together, as the W workers are (their
start included): what this machine and sandbox allow whatever the runner does, against
which each wall time is also given (the 1.3 target is met only where the floor leaves room
for it).

``--timeline`` says where the time went: the POSTs the sandbox received in each second
(sampled every 0.1 s), each step's call span (from its intent to the item's next intent,
as the state's attempts record them: median and 90th percentile, against L), and for each
worker when it started its run, sent its first POST, had its last answer and ended its run
(the state's runs and attempts, in seconds from the launch), its exit and its CPU seconds
(``os.wait4``), with the CPU seconds of the sandbox and of PostgreSQL (its postmaster's and
ended backends', from /proc, when the server is on this machine). ``--keep DIR`` writes the
batches and the workers' logs in DIR and leaves them there.

    .venv/bin/python benchmarks/scaling.py                    # 4000 items, 50 ms, C = 8
    .venv/bin/python benchmarks/scaling.py --items 400 --workers 1,2
    .venv/bin/python benchmarks/scaling.py --workers 4 --timeline --keep /tmp/scaling
    .venv/bin/python benchmarks/scaling.py --workers 4 --floor

Target: within 1.3 x the ideal at 4 workers (on 2 cores). Where a job is worked by one run
at a time, every worker but one is refused with exit 75 (the job's lease) and the batch goes
at one worker's pace: the script says so.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import psycopg
from _bench import Timeline, cpu_seconds
from chaos import admin, runner_command, runner_env, write_batch
from chaos_workers import LEASE_HELD, state_for
from engine import (
    calls,
    compile_ahead,
    floor_seconds,
    free_port,
    start_sandbox,
    startup_seconds,
)

from runner.state import open_state

TARGET = 1.3  # x ideal, at 4 workers


def paid(state: Path | str, job_name: str) -> int:
    """Items of the job with a transaction confirmed, as the state says."""
    with open_state(state) as store:
        return sum(1 for r in store.items(job_name) if r.step in ("confirmed", "final"))


def run_workers(command: list[str], workers: int, folder: Path
                ) -> tuple[float, list[int], list[tuple[int, float, float]]]:
    """``workers`` runs of ``command`` started together: the seconds until the last ends,
    their exit codes, and each one's pid, seconds until its exit and CPU seconds (user +
    system, ``os.wait4``)."""
    started = time.monotonic()
    procs = []
    for n in range(workers):
        with (folder / f"{folder.name}-w{n + 1}.log").open("wb") as out:
            procs.append(subprocess.Popen(command, cwd=folder, stdin=subprocess.DEVNULL,
                                          stdout=out, stderr=subprocess.STDOUT,
                                          env=runner_env()))
    ended: dict[int, tuple[int, float, float]] = {}
    while len(ended) < len(procs):
        for p in procs:
            if p.pid in ended:
                continue
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                ended[pid] = (os.waitstatus_to_exitcode(status), time.monotonic() - started,
                              usage.ru_utime + usage.ru_stime)
        time.sleep(0.02)
    for p in procs:
        p.returncode = ended[p.pid][0]
    return (time.monotonic() - started, [ended[p.pid][0] for p in procs],
            [(p.pid, ended[p.pid][1], ended[p.pid][2]) for p in procs])


def _seconds(text: str | None, zero: float) -> str:
    """A state stamp (ISO 8601, UTC) as seconds from ``zero`` (a timestamp)."""
    if not text:
        return "-"
    when = datetime.fromisoformat(text.rstrip("Z") + "+00:00").timestamp()
    return f"{when - zero:.2f}"


def describe_workers(url: str, name: str, zero: float,
                     ended: list[tuple[int, float, float]]) -> list[str]:
    """Each worker's run as the state recorded it (``--timeline``): its start, its first
    POST's intent and its last answer, its end, in seconds from the workers' launch; the
    calls it sent, its exit and its CPU seconds."""
    lines = []
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT r.pid, r.started_at, r.ended_at, min(a.started_at), max(a.finished_at), "
            "count(a.id) FROM runs r LEFT JOIN attempts a ON a.run_id = r.id WHERE "
            "r.job_name = %s GROUP BY r.id ORDER BY r.id", [name]).fetchall()
        spans = conn.execute(
            "SELECT step, count(*), percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY "
            "span) FROM (SELECT a.step, extract(epoch FROM coalesce(lead(rtrim(a.started_at, "
            "'Z')::timestamp) OVER (PARTITION BY a.external_id ORDER BY a.id), "
            "rtrim(a.finished_at, 'Z')::timestamp) - rtrim(a.started_at, 'Z')::timestamp) AS "
            "span FROM attempts a JOIN runs r ON r.id = a.run_id WHERE r.job_name = %s) AS s "
            "GROUP BY step ORDER BY min(span)", [name]).fetchall()
    lines.append("  a call's span, from its intent to the item's next intent (the last: to "
                 "its answer recorded), median and 90th percentile: " + "; ".join(
                     f"{step} {1000 * p50:.1f} ms, {1000 * p90:.1f} ms"
                     for step, _, (p50, p90) in spans))
    by_pid = {pid: (exit_s, cpu) for pid, exit_s, cpu in ended}
    for pid, start, end, first, last, n in rows:
        exit_s, cpu = by_pid.get(pid, (None, None))
        lines.append(f"  worker pid {pid}: started {_seconds(start, zero)}, first POST "
                     f"{_seconds(first, zero)}, last answer {_seconds(last, zero)}, ended "
                     f"{_seconds(end, zero)}, exit "
                     f"{'-' if exit_s is None else f'{exit_s:.2f}'}; {n} calls recorded; "
                     f"CPU {'-' if cpu is None else f'{cpu:.2f} s'}")
    return lines


def posts_per_second(line: Timeline) -> str:
    """The POSTs the sandbox received in each second from the launch."""
    per: list[int] = []
    before = 0
    for second in range(int(max((t for t, _, _ in line.samples), default=0)) + 1):
        upto = max((p for t, p, _ in line.samples if t < second + 1), default=0)
        per.append(upto - before)
        before = upto
    return "  POSTs per second: " + " ".join(str(n) for n in per)


def measure(url: str, state: Path | str, folder: Path, args: argparse.Namespace,
            workers: int) -> bool:
    """One batch with ``workers`` workers; prints its line; True when the target (at 4
    workers) is met or not concerned."""
    name = f"scaling-{workers}w-2026-11"
    where = folder / name
    where.mkdir()
    job, _ = write_batch(where, url, args.items, name=name, concurrency=args.concurrency,
                         timeout="30s", wait_for_final="0s", max_wait="60s",
                         script="scaling.py")
    command = runner_command(job, state, "--concurrency", str(args.concurrency))
    admin(url, "DELETE", "/requests")
    line = Timeline(url, every=0.1) if args.timeline else None
    sandbox, database = cpu_seconds(args.sandbox_pid), server_cpu(str(state))
    zero = time.time()
    if line is not None:
        line.start()
    wall, codes, ended = run_workers(command, workers, where)
    if line is not None:
        line.stop()
    sandbox_after, database_after = cpu_seconds(args.sandbox_pid), server_cpu(str(state))
    counts = {k: int(v) for k, v in admin(url, "GET", "/requests")["counts"].items()}
    n, latency, c = args.items, args.latency_ms, args.concurrency
    ideal = n * 3 * latency / 1000 / (c * workers)
    ratio = wall / ideal if ideal else None
    met = workers != 4 or (ratio is not None and ratio <= TARGET)
    verdict = f" (target <= {TARGET}: {'met' if met else 'MISSED'})" if workers == 4 else ""
    floor = f"; {wall / args.floor_seconds:.2f} x the floor" \
        if args.floor_seconds and workers == max(args.counts) else ""
    print(f"{workers} worker(s): wall {wall:.2f} s; ideal {n} x 3 x {latency:g} ms / "
          f"({c} x {workers}) = {ideal:.2f} s; ratio "
          f"{'-' if ratio is None else f'{ratio:.2f}'}{verdict}{floor}; exit codes {codes}; "
          f"{paid(state, name)}/{n} items confirmed")
    print(f"  calls: {calls(counts, 'POST')}; {calls(counts, 'GET')}")
    if line is not None:
        print(f"  {line.describe(wall)}; the workers were launched at "
              f"{datetime.fromtimestamp(zero).strftime('%H:%M:%S.%f')[:-3]} (local time)")
        print(posts_per_second(line))
        for text in describe_workers(str(state), name, zero, ended):
            print(text)
        server = "-" if sandbox is None or sandbox_after is None else \
            f"{sandbox_after - sandbox:.2f} s"
        pg = "-" if database is None or database_after is None else \
            f"{database_after - database:.2f} s"
        print(f"  CPU: workers {sum(c for _, _, c in ended):.2f} s, sandbox {server}, "
              f"PostgreSQL {pg}")
    refused = codes.count(LEASE_HELD)
    if refused:
        print(f"  {refused} worker(s) refused with exit {LEASE_HELD} (the job's lease: one run "
              f"works a job at a time), so the batch went at one worker's pace")
    return met and all(code == 0 for code in codes)


def server_cpu(url: str) -> float | None:
    """The CPU seconds of the PostgreSQL server on this machine behind ``url``: its
    postmaster's, with those of the backends that ended (a parent's children's time), read
    from /proc; None when it is elsewhere."""
    with psycopg.connect(url) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
    try:
        assert backend is not None
        stat = Path(f"/proc/{backend[0]}/stat").read_text().rsplit(")", 1)[1].split()
        fields = Path(f"/proc/{stat[1]}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=4000)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=8, help="C, per worker")
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma separated")
    parser.add_argument("--state", default=None,
                        help="postgresql://USER@HOST:PORT/DB (default: a throwaway cluster)")
    parser.add_argument("--keep", metavar="DIR", default=None,
                        help="write the batches and the workers' logs in DIR, and keep them")
    parser.add_argument("--timeline", action="store_true",
                        help="POSTs per second, each worker's times and CPU")
    parser.add_argument("--floor", action="store_true",
                        help="first time the N x 3 POSTs from a minimal client, C x W at once "
                             "(the largest W): the floor of this machine and sandbox")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the target is missed or a worker did not exit 0")
    args = parser.parse_args()
    counts = args.counts = [int(w) for w in args.workers.split(",")]

    kept = contextlib.nullcontext(args.keep) if args.keep else \
        tempfile.TemporaryDirectory(prefix="scaling-")
    with kept as tmp, \
            state_for(args.state, True, None, echo=print) as (state, _):
        assert state is not None
        folder = Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = start_sandbox(port, args.latency_ms, folder / "sandbox.log")
        args.sandbox_pid = server.pid
        try:
            compiled = compile_ahead()
            print(f"scaling benchmark: {args.items} items, sandbox latency "
                  f"{args.latency_ms:g} ms per call (own process), concurrency "
                  f"{args.concurrency} per worker; {os.cpu_count()} CPU(s), load average "
                  f"{os.getloadavg()[0]:.2f}; python -m runner --version alone takes "
                  f"{startup_seconds():.2f} s{compiled}", flush=True)
            args.floor_seconds = None
            if args.floor:
                most = max(counts)
                concurrent = args.concurrency * most
                ideal = args.items * 3 * args.latency_ms / 1000 / concurrent
                for processes in (1, most):
                    seconds = floor_seconds(port, args.items * 3, concurrent, processes,
                                            prefix=f"floor{processes}")
                    print(f"floor: a minimal client sends the {args.items * 3} POSTs, "
                          f"{concurrent} at a time, from {processes} process(es), in "
                          f"{seconds:.2f} s"
                          + (f" = {seconds / ideal:.2f} x ideal" if ideal else ""), flush=True)
                    args.floor_seconds = seconds  # the last: the workers' shape
            ok = all([measure(url, state, folder, args, w) for w in counts])
        finally:
            server.terminate()
            server.wait(timeout=30)
    sys.exit(1 if args.strict and not ok else 0)


if __name__ == "__main__":
    main()
