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

    .venv/bin/python benchmarks/scaling.py                    # 4000 items, 50 ms, C = 8
    .venv/bin/python benchmarks/scaling.py --items 400 --workers 1,2

Target: within 1.3 x the ideal at 4 workers (on 2 cores). Where a job is worked by one run
at a time, every worker but one is refused with exit 75 (the job's lease) and the batch goes
at one worker's pace: the script says so.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chaos import admin, runner_command, runner_env, write_batch
from chaos_workers import LEASE_HELD, state_for
from engine import calls, compile_ahead, free_port, start_sandbox, startup_seconds

from runner.state import StateLocation, open_store

TARGET = 1.3  # x ideal, at 4 workers


def paid(state: StateLocation, job_name: str) -> int:
    """Items of the job with a transaction confirmed, as the state says."""
    with open_store(state) as store:
        return sum(1 for r in store.items(job_name) if r.step in ("confirmed", "final"))


def run_workers(command: list[str], workers: int, folder: Path) -> tuple[float, list[int]]:
    """``workers`` runs of ``command`` started together: the seconds until the last ends,
    and their exit codes."""
    started = time.monotonic()
    procs = []
    for n in range(workers):
        with (folder / f"{folder.name}-w{n + 1}.log").open("wb") as out:
            procs.append(subprocess.Popen(command, cwd=folder, stdin=subprocess.DEVNULL,
                                          stdout=out, stderr=subprocess.STDOUT,
                                          env=runner_env()))
    codes = [p.wait() for p in procs]
    return time.monotonic() - started, codes


def measure(url: str, state: StateLocation, folder: Path, args: argparse.Namespace,
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
    wall, codes = run_workers(command, workers, where)
    counts = {k: int(v) for k, v in admin(url, "GET", "/requests")["counts"].items()}
    n, latency, c = args.items, args.latency_ms, args.concurrency
    ideal = n * 3 * latency / 1000 / (c * workers)
    ratio = wall / ideal if ideal else None
    met = workers != 4 or (ratio is not None and ratio <= TARGET)
    verdict = f" (target <= {TARGET}: {'met' if met else 'MISSED'})" if workers == 4 else ""
    print(f"{workers} worker(s): wall {wall:.2f} s; ideal {n} x 3 x {latency:g} ms / "
          f"({c} x {workers}) = {ideal:.2f} s; ratio "
          f"{'-' if ratio is None else f'{ratio:.2f}'}{verdict}; exit codes {codes}; "
          f"{paid(state, name)}/{n} items confirmed")
    print(f"  calls: {calls(counts, 'POST')}; {calls(counts, 'GET')}")
    refused = codes.count(LEASE_HELD)
    if refused:
        print(f"  {refused} worker(s) refused with exit {LEASE_HELD} (the job's lease: one run "
              f"works a job at a time), so the batch went at one worker's pace")
    return met and all(code == 0 for code in codes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=4000)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=8, help="C, per worker")
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma separated")
    parser.add_argument("--state", default=None,
                        help="postgresql://USER@HOST:PORT/DB (default: a throwaway cluster)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the target is missed or a worker did not exit 0")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]

    with tempfile.TemporaryDirectory(prefix="scaling-") as tmp, \
            state_for(args.state, True, None, echo=print) as (state, _):
        assert state is not None
        folder = Path(tmp)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = start_sandbox(port, args.latency_ms, folder / "sandbox.log")
        try:
            compiled = compile_ahead()
            print(f"scaling benchmark: {args.items} items, sandbox latency "
                  f"{args.latency_ms:g} ms per call (own process), concurrency "
                  f"{args.concurrency} per worker; {os.cpu_count()} CPU(s), load average "
                  f"{os.getloadavg()[0]:.2f}; python -m runner --version alone takes "
                  f"{startup_seconds():.2f} s{compiled}", flush=True)
            ok = all([measure(url, state, folder, args, w) for w in counts])
        finally:
            server.terminate()
            server.wait(timeout=30)
    sys.exit(1 if args.strict and not ok else 0)


if __name__ == "__main__":
    main()
