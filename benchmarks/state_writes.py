"""Benchmark: how many calls a second the state records, from many threads at once.

Run from the repository root:

    .venv/bin/python benchmarks/state_writes.py --state STATE [--threads 16] [--items 4000]

STATE is a SQLite file (made new) or a postgresql:// URL of an empty database. Each of the
threads (the engine's worker threads share one store) takes items in turn and records, for
each, what the engine records around one call: the intent before it (``begin_attempt``)
and the outcome after (``end_attempt``), two committed transactions. It prints the calls
recorded per second and the mean time of one write. With PostgreSQL the store keeps a pool
of connections, so that threads commit side by side.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.state import ItemRecord, open_state  # noqa: E402
from runner.state.locations import parse_location  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", required=True)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--items", type=int, default=4000)
    args = parser.parse_args()
    with open_state(parse_location(args.state)) as store:
        store.insert_items([ItemRecord(f"e{i}", "bench", "remittance", i)
                            for i in range(args.items)])
        run_id = store.start_run("bench", "bench.yaml")
        todo = iter(range(args.items))
        lock = threading.Lock()

        def work() -> None:
            while True:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                attempt = store.begin_attempt(run_id, f"e{i}", "quotation", {"n": i})
                store.end_attempt(attempt, f"e{i}", "ok", http_status=201, step="quoted")

        threads = [threading.Thread(target=work) for _ in range(args.threads)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - start
    print(f"{args.items} calls recorded by {args.threads} threads in {took:.2f} s: "
          f"{args.items / took:,.0f} calls/s, {2 * args.items / took:,.0f} writes/s, "
          f"{took / (2 * args.items) * args.threads * 1000:.2f} ms a write")


if __name__ == "__main__":
    main()
