"""Benchmark: the worst hostile job files, and how long and how much memory runner takes to
refuse them.

Run from the repository root:

    .venv/bin/python benchmarks/hostile.py [--python PYTHON] [--timeout 60] [--memory-gib 8]

Each case is jobs/payroll.yaml (60 rows, against the embedded sandbox), spoiled one way (a
YAML alias bomb, templates that loop or grow, a concurrency of 10**22, amounts written as an
exponent or with 31 digits, a megabyte of YAML values), run as cron runs it
(`PYTHON -m runner validate JOB`, or `run JOB --yes`) in a process of its own, killed after
``--timeout`` seconds and limited to ``--memory-gib`` of address space so that a runner
without bounds cannot take the machine. It prints, per case, the exit code, the wall time,
the peak resident memory (ru_maxrss) and the last line runner wrote. Also: a rows file
linked to /proc/self/environ, a JSON Lines row with a key twice, ${...} defaults nested 9
deep, and a plan file of 100,000 nested arrays (`apply`). ``--python`` picks the
interpreter, and so the runner it imports: another checkout's virtualenv measures that
checkout (before and after a change).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTERNAL_ID = '"payroll-{{ vars.period }}-{{ row.employee_id }}"'
LAUGHS = '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"  {c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True))
LOOPS = "{{% for i in range({n}) %}}{{% for j in range({n}) %}}{{% endfor %}}{{% endfor %}}"
JSONL_ROW = ('{"employee_id": "E1", "first_name": "Ada", "last_name": "Byron", "payer_id": 1, '
             '"currency": "KES", "net_pay": 1e400, "msisdn": "+254700000001", '
             '"bank_account": "", "swift": ""}\n')

DEEP_PLAN = "[" * 100_000 + "]" * 100_000
DUPLICATE_KEY = JSONL_ROW.replace('"net_pay": 1e400', '"net_pay": 1.00, "net_pay": 99.00')
NESTED_DEFAULTS = "${A:-" * 9 + "x" + "}" * 9
NONE: dict[str, str] = {}

#: name: (the command, the changes to jobs/payroll.yaml, files written beside it, links
#: made beside it). The command's file is payroll.yaml, or the .json file it names.
CASES: dict[str, tuple[list[str], dict[str, str], dict[str, str], dict[str, str]]] = {
    "YAML alias bomb (1 KB)": (["validate"], {"vars:\n": "vars:\n" + LAUGHS}, NONE, NONE),
    "nested range(100000) loops": (["validate"], {
        EXTERNAL_ID: EXTERNAL_ID.replace("payroll-", LOOPS.format(n=100000))}, NONE, NONE),
    "'x' * 10**9 in a template": (["validate"], {
        EXTERNAL_ID: "\"{{ 'x' * 10**9 }}\""}, NONE, NONE),
    "nested range(10000) loops": (["validate"], {
        EXTERNAL_ID: EXTERNAL_ID.replace("payroll-", LOOPS.format(n=10000))}, NONE, NONE),
    "run.concurrency: 10**22": (["run", "--yes"], {
        "concurrency: 8": "concurrency: 99999999999999999999999"}, NONE, NONE),
    "--concurrency 10**22": (["run", "--yes", "--concurrency", "99999999999999999999999"],
                             NONE, NONE, NONE),
    "amount 1e400 in JSON Lines": (["validate"], {"payroll.csv": "payroll.jsonl"},
                                   {"payroll.jsonl": JSONL_ROW}, NONE),
    "amount of 31 digits": (["validate"], NONE, {"payroll.csv": (
        ROOT / "jobs" / "payroll.csv").read_text(encoding="utf-8").replace("978.26", "9" * 31)},
        NONE),
    "1 MB of YAML values": (["validate"], {
        "vars:\n": "vars:\n  many: [" + ",".join(["1"] * 500_000) + "]\n"}, NONE, NONE),
    "rows file linked to environ": (["validate"], NONE, NONE,
                                    {"payroll.csv": "/proc/self/environ"}),
    "JSON Lines key given twice": (["validate"], {"payroll.csv": "payroll.jsonl"},
                                   {"payroll.jsonl": DUPLICATE_KEY}, NONE),
    "${A:-...} nested 9 deep": (["validate"], {
        "${RUNNER_API_KEY:-sandbox-key}": NESTED_DEFAULTS}, NONE, NONE),
    "100,000-deep plan file": (["apply", "deep.plan.json", "--yes"], NONE,
                               {"deep.plan.json": DEEP_PLAN}, NONE),
}


def measure(python: str, arguments: list[str], folder: Path, timeout: float,
            memory: int) -> tuple[int | str, float, int, str]:
    limit = ("import os, resource, sys; limit = int(sys.argv[1]); "
             "resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); "
             "os.execv(sys.executable, [sys.executable, '-m', 'runner', *sys.argv[2:]])")
    with tempfile.TemporaryFile() as output:
        started = time.monotonic()
        process = subprocess.Popen([python, "-c", limit, str(memory), *arguments],
                                   stdout=output, stderr=subprocess.STDOUT, cwd=folder)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            process.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        output.seek(0)
        lines = output.read().decode("utf-8", errors="replace").strip().splitlines()
    code: int | str = f"killed at {timeout:g} s" if killed.is_set() else process.returncode
    return code, seconds, usage.ru_maxrss * 1024, (lines[-1] if lines else "")[:90]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter, whose runner is measured (default: this one)")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--memory-gib", type=float, default=8.0)
    args = parser.parse_args()
    memory = int(args.memory_gib * (1 << 30))
    print(f"{'case':30} {'exit':>14} {'seconds':>8} {'peak MiB':>9}  last line")
    with tempfile.TemporaryDirectory() as scratch:
        shutil.copytree(ROOT / "templates", Path(scratch) / "templates")
        for n, (name, (command, changes, files, links)) in enumerate(CASES.items()):
            folder = Path(scratch) / f"case{n}"
            shutil.copytree(ROOT / "jobs", folder)
            job = (folder / "payroll.yaml").read_text(encoding="utf-8")
            for old, new in changes.items():
                assert old in job, old
                job = job.replace(old, new, 1)
            (folder / "payroll.yaml").write_text(job, encoding="utf-8")
            for file, content in files.items():
                (folder / file).write_text(content, encoding="utf-8")
            for file, target in links.items():
                (folder / file).unlink(missing_ok=True)
                (folder / file).symlink_to(target)
            named = any(argument.endswith(".json") for argument in command)
            arguments = command if named else [*command, "payroll.yaml"]
            if command[0] == "run":
                arguments += ["--state", "state/runner.sqlite"]
            code, seconds, peak, last = measure(args.python, arguments, folder,
                                                args.timeout, memory)
            print(f"{name:30} {code!s:>14} {seconds:8.2f} {peak / (1 << 20):9.0f}  {last}",
                  flush=True)


if __name__ == "__main__":
    main()
