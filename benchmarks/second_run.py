"""Benchmark: how a second `runner run` of a job ends while the first still runs.

Run from the repository root:

    .venv/bin/python benchmarks/second_run.py [--python PYTHON] [--tries 32] [--seed 1]

Each try starts `runner run jobs/payroll.yaml --yes` (its rows ten times over: 600 items,
some seconds of work, against the embedded sandbox) on a fresh state folder, then a second,
identical run a random 0.6 to 1.5 s later, as cron does when a run outlasts its interval. It
prints the second run's exit codes (75 is right: the first holds the job's lease) and the
spread of the time it took to exit. ``--python`` picks the interpreter, and so the runner it
imports (another checkout's virtualenv: before and after a change).
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--tries", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    chance = random.Random(args.seed)
    codes: Counter[int] = Counter()
    seconds: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        shutil.copytree(ROOT / "jobs", Path(scratch) / "jobs")
        header, *rows = (ROOT / "jobs" / "payroll.csv").read_text(encoding="utf-8").splitlines()
        (Path(scratch) / "jobs" / "payroll.csv").write_text("\n".join(
            [header, *(f"{row.split(',', 1)[0]}-{n},{row.split(',', 1)[1]}"
                       for n in range(10) for row in rows)]) + "\n", encoding="utf-8")
        shutil.copytree(ROOT / "templates", Path(scratch) / "templates")
        for n in range(args.tries):
            state = Path(scratch) / f"state{n}" / "runner.sqlite"
            command = [args.python, "-m", "runner", "run", "jobs/payroll.yaml", "--yes", "-q",
                       "--state", str(state)]
            first = subprocess.Popen(command, cwd=scratch, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
            time.sleep(chance.uniform(0.6, 1.5))
            started = time.monotonic()
            second = subprocess.run(command, cwd=scratch, capture_output=True, text=True)
            seconds.append(time.monotonic() - started)
            codes[second.returncode] += 1
            first.wait()
    seconds.sort()
    print(f"second run, {args.tries} tries: exit codes {dict(sorted(codes.items()))}; "
          f"exited in {seconds[0]:.2f} s (fastest), {seconds[len(seconds) // 2]:.2f} s "
          f"(median), {seconds[-1]:.2f} s (slowest)")


if __name__ == "__main__":
    main()
