"""The engine's throughput: N remittances through a sandbox with L ms per call, C workers.

Starts ``runner sandbox serve --latency-ms L --submit-delay 0 --complete-delay 0 --balance
EUR=10000000000`` in its own process (so it shares no GIL with the runner), writes a job of N
rows like jobs/payroll.csv (same payers and amounts, unique external_ids) with
``run.wait_for_final: 0s``, then times ``runner run JOB --yes --state S --concurrency C``
as a subprocess, from its start to its exit (Python start-up, loading and validating the job
and the state included). The run measures quotation + transaction + confirm: with
``wait_for_final: 0s`` no time is spent waiting for final statuses (nor reading the status
of what the run confirmed). It prints the wall time, the ideal N x 3 x L / C (the three
POSTs per item at L ms each, C at a time, nothing else), their ratio, items/s and the calls
the sandbox received. Then the batch is finished: an untimed run with ``wait_for_final:
60s`` follows what the first run confirmed to its final status (``--wait-for-final 60s``
makes the first run do that itself). Last, the finished batch is run again, timed, with the
POSTs the sandbox received meanwhile (GET /_admin/requests before and after).

    .venv/bin/python benchmarks/engine.py                      # 2000 items, 20 ms, 16 workers
    .venv/bin/python benchmarks/engine.py --items 10000 --latency-ms 0   # the second-run case

Each run also prints the CPU seconds of the runner and of the sandbox (a runner near 100%
of the wall time is bound by its own CPU: one core, the GIL), the runner's CPU per provider
call (its CPU seconds over the calls the sandbox received, GETs included) and the runner's
peak RSS (``os.wait4`` of the run's process: its own largest resident set). ``--timeline``
samples the sandbox's request counts every 50 ms and prints when the first and last POST
arrived (and the POST phase against the ideal); ``--floor`` first times the same N x 3 POSTs
sent by a minimal client (http.client, C threads, nothing else), the floor of this machine
and sandbox.

Targets: the first run within 1.3 x ideal (when L > 0); the second run sends no POST and
takes at most 3 s. ``--strict`` exits 1 when one is missed (and always when a run fails).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import (
    JOB_NAME,
    calls,
    compile_ahead,
    finish_batch,
    free_port,
    start_sandbox,
    startup_seconds,
    timed_run,
)
from chaos import KEY, SECRET, runner_command, runner_env, write_batch
from floor_client import send

FIRST_RUN_TARGET = 1.3  # x ideal
SECOND_RUN_TARGET = 3.0  # seconds


def floor_seconds(port: int, posts: int, concurrency: int, processes: int = 1,
                  prefix: str = "floor") -> float:
    """How long a minimal client (``floor_client``: http.client, one keep-alive connection
    per thread, no state, no validation) takes to send ``posts`` quotation POSTs,
    ``concurrency`` at a time: what the sandbox and this machine allow, whatever the engine
    does. With ``processes`` > 1 the POSTs and the threads are shared by that many processes
    started together (the shape of as many runner workers), timed from their start to the
    last one's exit: Python's start and the client's imports included."""
    if processes == 1:
        return send(port, prefix, posts, concurrency, KEY, SECRET)
    script = str(Path(__file__).with_name("floor_client.py"))
    env = {**runner_env(), "FLOOR_KEY": KEY, "FLOOR_SECRET": SECRET}
    started = time.monotonic()
    clients = [subprocess.Popen(
        [sys.executable, script, str(port), f"{prefix}-{n}", str(posts // processes),
         str(concurrency // processes)], env=env, stdout=subprocess.DEVNULL)
        for n in range(processes)]
    try:
        codes = [client.wait(timeout=600) for client in clients]
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
                client.wait()
    if any(codes):
        raise RuntimeError(f"floor: a client process exited {codes}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--wait-for-final", default="0s",
                        help="the job's run.wait_for_final (default 0s: the first run measures "
                             "the three POSTs; e.g. 60s: it finishes the batch, so the second "
                             "run times a finished batch)")
    parser.add_argument("--timeline", action="store_true",
                        help="sample the sandbox's request counts every 50 ms during the runs "
                             "(costs the sandbox a little)")
    parser.add_argument("--floor", action="store_true",
                        help="first time N x 3 quotation POSTs from a minimal client "
                             "(http.client, C threads): the floor this machine and sandbox allow")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--keep", type=Path, default=None,
                        help="work in this folder and keep it (job, CSV, state, logs)")
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="engine-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_sandbox(port, args.latency_ms, folder / "sandbox.log")
    ok = True
    try:
        job, _ = write_batch(folder, url, args.items, name=JOB_NAME,
                             concurrency=args.concurrency, timeout="30s",
                             wait_for_final=args.wait_for_final,
                             max_wait="60s", script="engine.py")
        state = folder / "state.sqlite"
        command = runner_command(job, state, "--concurrency", str(args.concurrency))
        n, latency, c = args.items, args.latency_ms, args.concurrency
        compiled = compile_ahead()
        print(f"engine benchmark: {n} items, sandbox latency {latency:g} ms per call (own "
              f"process), concurrency {c}; {os.cpu_count()} CPU(s), load average "
              f"{os.getloadavg()[0]:.2f}; python -m runner --version alone takes "
              f"{startup_seconds():.2f} s{compiled}")

        ideal = n * 3 * latency / 1000 / c
        if args.floor:
            floor = floor_seconds(port, n * 3, c)
            print(f"floor: a minimal client sends the {n * 3} POSTs in {floor:.2f} s"
                  + (f" = {floor / ideal:.2f} x ideal" if ideal else ""))
        first = timed_run(command, folder, url, folder / "run-1.log", args.timeline,
                          server.pid)
        print(f"first run: quotation + transaction + confirm (wait_for_final: "
              f"{args.wait_for_final}): exit {first.code}")
        ratio = first.seconds / ideal if ideal else None
        verdict = ""
        if ratio is not None:
            met = ratio <= FIRST_RUN_TARGET
            ok = ok and met
            verdict = f" (target <= {FIRST_RUN_TARGET}: {'met' if met else 'MISSED'})"
        print(f"  wall {first.seconds:.2f} s; ideal {n} x 3 x {latency:g} ms / {c} = "
              f"{ideal:.2f} s; ratio "
              f"{'-' if ratio is None else f'{ratio:.2f}'}{verdict}; "
              f"{n / first.seconds:.0f} items/s")
        print(f"  calls: {calls(first.counts, 'POST')}; {calls(first.counts, 'GET')}")
        print(f"  {first.cpu()}")
        if first.timeline is not None:
            print(f"  {first.timeline.describe(first.seconds)}")
            span = first.timeline.post_span()
            if span is not None and ideal:
                print(f"  POST phase (first to last POST): {span:.2f} s = {span / ideal:.2f} x "
                      f"ideal")

        if first.code == 0:
            print(finish_batch(job, command, state, args.wait_for_final) or "", end="")
        second = timed_run(command, folder, url, folder / "run-2.log", args.timeline,
                           server.pid)
        posts = second.counts.get("POST", 0)
        met = posts == 0 and second.seconds <= SECOND_RUN_TARGET
        ok = ok and met
        print(f"second run of the finished batch: exit {second.code}; {second.seconds:.2f} s; "
              f"POSTs the sandbox received meanwhile: {posts} (target: no POST, <= "
              f"{SECOND_RUN_TARGET:g} s: {'met' if met else 'MISSED'})")
        print(f"  calls: {calls(second.counts, 'POST')}; {calls(second.counts, 'GET')}")
        print(f"  {second.cpu()}")
        if second.timeline is not None:
            print(f"  {second.timeline.describe(second.seconds)}")
        failed = first.code != 0 or second.code != 0
        if failed:
            print(f"a run failed: see {folder}/run-1.log, run-2.log")
    finally:
        server.terminate()
        server.wait(timeout=30)
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    sys.exit(1 if failed or (args.strict and not ok) else 0)


if __name__ == "__main__":
    main()
