"""How long `runner console` takes to serve the page of a large plan: a batch of N items
(10,000 by default) planned against the one before it (N items, some new, gone, moved and
with another account), each page served over loopback to a person signed in with a passkey.

Prints the first serve (the plan read from the state and parsed), then the median and the
slowest of the later ones, for the page as it opens, a search, and a page of items sorted by
amount, descending.

    .venv/bin/python benchmarks/console_page.py [--items 10000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from console_support import signed_in  # noqa: E402
from passkey_support import SoftPasskey  # noqa: E402
from test_payee_checks import write  # noqa: E402

from runner.state import open_state  # noqa: E402


def rows(n: int, month: int) -> str:
    """N people; in the second month every 50th is new (the one it replaces is gone), every
    40th paid 10% more, every 70th to another account."""
    out = []
    for i in range(n):
        person = i + (n if month == 2 and i % 50 == 0 else 0)
        amount = 100 + i % 900
        if month == 2 and i % 40 == 0:
            amount = amount * 11 // 10
        phone = 254700000000 + person + (500000 if month == 2 and i % 70 == 0 else 0)
        out.append(f"{person},1,KES,{amount}.00,+{phone},Person{person},Payee")
    return "\n".join(out) + "\n"


def plan(folder: Path, name: str, n: int, month: int, state: Path, four_eyes: bool) -> str:
    job = write(folder, "sandbox", rows(n, month), name, "off")  # the embedded sandbox
    if four_eyes:
        job.write_text(job.read_text().replace(
            "run:\n", "run:\n  four_eyes: true\n  approvers: approvers\n"))
    out = folder / f"{name}.plan.json"
    subprocess.run([sys.executable, "-m", "runner", "plan", str(job), "--state", str(state),
                    "-o", str(out), "--format", "json"], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "RUNNER_POLICY": ""})
    return str(json.loads(out.read_text())["id"])


def timed(session: Any, url: str) -> float:
    started = time.perf_counter()
    answer = session.get(url, timeout=600)
    spent = time.perf_counter() - started
    answer.raise_for_status()
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        state = folder / "state.sqlite"
        alice = SoftPasskey("alice@example.com")
        (folder / "approvers").write_text("# approvers\n")
        (folder / "approvers.passkeys").write_text(alice.line() + "\n")
        started = time.perf_counter()
        before = plan(folder, "pay-2026-10", args.items, 1, state, False)
        with open_state(state) as store:  # October counts as applied (as if paid)
            store.note_plan_applied(before, 1)
        current = plan(folder, "pay-2026-11", args.items, 2, state, True)
        print(f"two plans of {args.items} items made in {time.perf_counter() - started:.1f} s")
        process = subprocess.Popen(
            [sys.executable, "-m", "runner", "console", "--state", str(state), "--port", "0"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        try:
            assert process.stderr is not None
            line = process.stderr.readline()
            found = re.search(r"console at (http://localhost:\d+) ", line)
            if not found:
                raise SystemExit(line + process.stderr.read())
            base = found.group(1)
            session, _ = signed_in(base, alice)
            for title, query in [("the plan's page", ""),
                                 ("a search (q=Person12)", "?q=Person12"),
                                 ("page 50 by amount, descending",
                                  "?sort=amount&order=desc&page=50")]:
                url = f"{base}/plans/{current}{query}"
                first = timed(session, url)
                later = [timed(session, url) for _ in range(args.rounds)]
                print(f"{title}: first {first * 1000:.0f} ms, then median "
                      f"{statistics.median(later) * 1000:.0f} ms, slowest "
                      f"{max(later) * 1000:.0f} ms ({args.rounds} serves)")
        finally:
            process.terminate()
            process.wait(timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
