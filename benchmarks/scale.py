"""How a run scales with the batch: wall time, items/s, peak RSS and the re-run, per size.

For each size N (``--sizes``, default 1000,10000,100000; add 1000000 to run a million), a
fresh sandbox in its own process (latency 0, statuses final at once: benchmarks/_bench.py)
and a fresh state: a job of N rows like jobs/payroll.csv, its CSV streamed to disk, is run
with ``wait_for_final: 0s`` (``runner run JOB --yes --state S --concurrency C``, timed as a
subprocess from its start to its exit), then finished untimed (``wait_for_final: 60s``),
then run again, timed, with the POSTs the sandbox received during that re-run. Each timed
run's peak RSS is the runner process's own (``os.wait4``).

    .venv/bin/python benchmarks/scale.py                          # 1,000 to 100,000 items
    .venv/bin/python benchmarks/scale.py --sizes 1000,10000
    .venv/bin/python benchmarks/scale.py --sizes 10000,1000000    # the million: hours today

It prints a line per run as it goes and a table at the end. Exits 1 when a run fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from _bench import (
    JOB_NAME,
    Timed,
    compile_ahead,
    finish_batch,
    free_port,
    mib,
    start_sandbox,
    timed_run,
)
from chaos import runner_command, write_job


@dataclass
class Size:
    items: int
    first: Timed
    again: Timed | None


def run_size(items: int, concurrency: int, folder: Path) -> Size:
    """One size: a fresh sandbox and state; the first run, the finishing run, the re-run."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_sandbox(port, 0, folder / "sandbox.log")
    try:
        job = write_job(folder, url, items, name=JOB_NAME, concurrency=concurrency,
                        timeout="30s", wait_for_final="0s", max_wait="60s",
                        script="scale.py")
        state = folder / "state.sqlite"
        command = runner_command(job, state, "--concurrency", str(concurrency), "-q")
        first = timed_run(command, folder, url, folder / "run-1.log", False, server.pid)
        print(f"{items} items: first run exit {first.code}, {first.seconds:.2f} s, "
              f"{items / first.seconds:.0f} items/s; {first.cpu()}", flush=True)
        if first.code != 0:
            return Size(items, first, None)
        print(finish_batch(job, command, state, "0s"), end="", flush=True)
        again = timed_run(command, folder, url, folder / "run-2.log", False, server.pid)
        print(f"{items} items: re-run of the finished batch exit {again.code}, "
              f"{again.seconds:.2f} s, POSTs {again.counts.get('POST', 0)}; {again.cpu()}",
              flush=True)
        return Size(items, first, again)
    finally:
        server.terminate()
        server.wait(timeout=60)


def table(sizes: list[Size]) -> str:
    lines = [f"{'items':>9} {'wall s':>9} {'items/s':>8} {'CPU/call':>9} {'peak RSS':>9} "
             f"{'re-run s':>9} {'POSTs':>6} {'re-run RSS':>10}"]
    for s in sizes:
        f, a = s.first, s.again
        calls = f.calls()
        per_call = f"{1000 * f.runner_cpu / calls:.2f} ms" if calls else "-"
        rerun = ("-", "-", "-") if a is None else (
            f"{a.seconds:.2f}", str(a.counts.get("POST", 0)), mib(a.peak_rss))
        lines.append(f"{s.items:>9} {f.seconds:>9.2f} {s.items / f.seconds:>8.0f} "
                     f"{per_call:>9} {mib(f.peak_rss):>9} {rerun[0]:>9} {rerun[1]:>6} "
                     f"{rerun[2]:>10}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="batch sizes, comma-separated (default 1000,10000,100000)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--keep", type=Path, default=None,
                        help="work in this folder and keep it (a folder per size)")
    args = parser.parse_args()
    sizes = [int(v.replace("_", "")) for v in args.sizes.split(",") if v.strip()]
    root = args.keep or Path(tempfile.mkdtemp(prefix="scale-bench-"))
    print(f"scale benchmark: sizes {', '.join(map(str, sizes))}, latency 0, concurrency "
          f"{args.concurrency}; {os.cpu_count()} CPU(s), load average "
          f"{os.getloadavg()[0]:.2f}{compile_ahead()}", flush=True)
    done: list[Size] = []
    try:
        for items in sizes:
            done.append(run_size(items, args.concurrency, root / str(items)))
            if done[-1].first.code != 0 or done[-1].again is None \
                    or done[-1].again.code != 0:
                print(f"a run failed: see {root / str(items)}")
                break
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(table(done))
    failed = len(done) < len(sizes) or any(s.again is None or s.again.code for s in done)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
