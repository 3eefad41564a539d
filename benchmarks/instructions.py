"""The runner's CPU per provider call as counted instructions, which the machine's load and
speed do not move: ``benchmarks/engine.py``'s first run (N remittances, the sandbox in its own
process with no latency, ``wait_for_final: 0s``, a SQLite state) under ``valgrind
--tool=callgrind``, for two batch sizes; the difference of their instructions over the
difference of their calls is what one more call costs, start-up, plan and summary of a batch
aside.

    .venv/bin/python benchmarks/instructions.py                  # 300 and 1,300 items
    .venv/bin/python benchmarks/instructions.py --items 300 3300

It prints, for each size, the run's instructions and the calls the sandbox received, then the
instructions a call. Run it on two checkouts to compare them: the counts are the same from one
run to the next within a few tenths of a percent. Slow (valgrind runs the runner about 50
times slower: five minutes for the default sizes); needs valgrind (``apt-get install -y
valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _bench import JOB_NAME, compile_ahead, free_port, start_sandbox
from chaos import admin, runner_command, runner_env, write_batch


def counted(items: int, folder: Path) -> tuple[int, int]:
    """One run of ``items`` under callgrind: its instructions, and the calls the sandbox
    received."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_sandbox(port, 0, folder / "sandbox.log")
    try:
        job, _ = write_batch(folder, url, items, name=JOB_NAME, concurrency=16, timeout="30s",
                             wait_for_final="0s", max_wait="60s", script="instructions.py")
        out = folder / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                   *runner_command(job, folder / "state.sqlite", "--concurrency", "16")]
        admin(url, "DELETE", "/requests")
        with (folder / "run.log").open("wb") as log:
            code = subprocess.run(command, cwd=folder, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT, env=runner_env(),
                                  check=False).returncode
        if code != 0:
            raise SystemExit(f"the run of {items} items exited {code}; see {folder / 'run.log'}")
        counts = admin(url, "GET", "/requests")["counts"]
        calls = sum(int(v) for k, v in counts.items() if k.isupper() and " " not in k)
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        if found is None:
            raise SystemExit(f"no instruction count in {out}")
        return int(found[1]), calls
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs=2, default=[300, 1300],
                        metavar=("SMALL", "LARGE"))
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install -y valgrind")
    compiled = compile_ahead()
    print(f"instructions benchmark: {args.items[0]:,} and {args.items[1]:,} items, the sandbox "
          f"with no latency (own process); {os.cpu_count()} CPU(s){compiled}", flush=True)
    runs = []
    for items in args.items:
        with tempfile.TemporaryDirectory(prefix="instructions-") as folder:
            instructions, calls = counted(items, Path(folder))
        runs.append((instructions, calls))
        print(f"{items:,} items: {instructions:,} instructions, {calls:,} calls", flush=True)
    (small, small_calls), (large, large_calls) = runs
    if large_calls <= small_calls:
        sys.exit("the larger batch made no more calls than the smaller")
    print(f"a call: {(large - small) / (large_calls - small_calls):,.0f} instructions")


if __name__ == "__main__":
    main()
