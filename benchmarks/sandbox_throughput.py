"""Whether the sandbox keeps its pace: throughput per slice of N requests over a long series.

Starts ``runner sandbox serve --nonce-check strict`` in its own process (latency 0, statuses
final at once: benchmarks/_bench.py; ``--nonce-check lenient`` to compare), then sends
``--requests`` calls from T threads of this process, each on its own keep-alive connection
(http.client), every call signed with the digest scheme as the runner signs (a fresh nonce
and Date each: the strict nonce memory holds every one of the last ten minutes). The mix
(``--mix``): ``money``, what a batch sends, quotation + transaction + confirm per item (the
sandbox's tables grow by an item every three calls); ``ping``, GET /ping, the cheapest
authenticated call. It prints the requests per second of each slice of ``--slice`` requests
and whether the last slice is within 10% of the first, and the sandbox's CPU per request in
each slice (from /proc: what other work on a shared machine does not change much).

    .venv/bin/python benchmarks/sandbox_throughput.py                      # 300,000, money
    .venv/bin/python benchmarks/sandbox_throughput.py --mix ping --requests 300000

Exits 1 when a call is not answered as expected, or (``--strict``) when the last slice is
more than 10% slower than the first.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import simplejson
from _bench import cpu_seconds, free_port, start_sandbox
from chaos import KEY, SECRET

from runner.provider.auth import digest_headers

MT = "/v1/money-transfer"
QUOTATION = {"payer_id": 1, "mode": "SOURCE_AMOUNT",
             "source": {"country_iso_code": "FRA", "currency": "EUR", "amount": "100.00"},
             "destination": {"currency": "KES"}}
TRANSACTION = {"credit_party_identifier": {"msisdn": "+254700100200"},
               "sender": {"firstname": "A", "lastname": "B"},
               "beneficiary": {"firstname": "C", "lastname": "D"},
               "purpose_of_remittance": "SALARY"}
TOLERANCE = 0.10  # the last slice at most 10% slower than the first

Call = tuple[str, str, bytes | None, int]  # method, path, body, expected status


def money_calls(item: int) -> Iterator[Call]:
    """The three POSTs of one item, in order."""
    ref = f"tp-{item}"
    yield ("POST", f"{MT}/quotations", simplejson.dumps(
        {**QUOTATION, "external_id": ref}).encode(), 201)
    yield ("POST", f"{MT}/quotations/ext-{ref}/transactions", simplejson.dumps(
        {**TRANSACTION, "external_id": ref}).encode(), 201)
    yield ("POST", f"{MT}/transactions/ext-{ref}/confirm", b"{}", 200)


def ping_calls(item: int) -> Iterator[Call]:
    yield ("GET", "/ping", None, 200)


class Meter:
    """Counts answered calls across threads; notes the time each slice ends, and the
    sandbox's CPU seconds then (``cpu``)."""

    def __init__(self, slice_size: int, cpu: Callable[[], float]) -> None:
        self.slice = slice_size
        self.cpu = cpu
        self.done = 0
        self.ends: list[tuple[float, float]] = []  # (time, sandbox CPU seconds)
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def start(self) -> tuple[float, float]:
        return time.monotonic(), self.cpu()

    def count(self) -> None:
        with self._lock:
            self.done += 1
            if self.done % self.slice == 0:
                self.ends.append((time.monotonic(), self.cpu()))


def client(port: int, items: Iterator[int], mix: str, meter: Meter) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    calls = money_calls if mix == "money" else ping_calls
    try:
        for item in items:
            for method, path, body, expected in calls(item):
                headers = digest_headers(KEY, SECRET)
                if body is not None:
                    headers["Content-Type"] = "application/json"
                conn.request(method, path, body=body, headers=headers)
                answer = conn.getresponse()
                text = answer.read()
                if answer.status != expected:
                    meter.failures.append(f"{method} {path}: {answer.status} {text[:200]!r}")
                    return
                meter.count()
    finally:
        conn.close()


def run(port: int, requests: int, mix: str, threads: int, meter: Meter) -> tuple[float, float]:
    per_item = 3 if mix == "money" else 1
    shared = iter(range(requests // per_item))
    lock = threading.Lock()

    def items() -> Iterator[int]:
        while True:
            with lock:
                item = next(shared, None)
            if item is None:
                return
            yield item

    workers = [threading.Thread(target=client, args=(port, items(), mix, meter))
               for _ in range(threads)]
    started = meter.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return started


def report(started: tuple[float, float], meter: Meter) -> bool:
    """Print each slice's rate and the sandbox's CPU per request in it; True when the last
    slice's rate is within TOLERANCE of the first's."""
    rates, costs = [], []
    for n, ((t0, c0), (t1, c1)) in enumerate(itertools.pairwise([started, *meter.ends]), 1):
        rates.append(meter.slice / (t1 - t0))
        costs.append(1000 * (c1 - c0) / meter.slice)
        print(f"  requests {(n - 1) * meter.slice:>7}-{n * meter.slice:<7} "
              f"{t1 - t0:7.1f} s  {rates[-1]:6.0f} requests/s  sandbox CPU "
              f"{costs[-1]:.3f} ms a request")
    if len(rates) < 2:
        print("fewer than two slices: nothing to compare")
        return True
    change = rates[-1] / rates[0] - 1
    kept = change >= -TOLERANCE
    print(f"last slice against the first: {100 * change:+.1f}% requests/s "
          f"(target: within {100 * TOLERANCE:.0f}%: {'met' if kept else 'MISSED'}), "
          f"{100 * (costs[-1] / costs[0] - 1):+.1f}% sandbox CPU a request")
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300_000)
    parser.add_argument("--slice", type=int, default=50_000)
    parser.add_argument("--mix", choices=["money", "ping"], default="money")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--nonce-check", choices=["strict", "lenient"], default="strict")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the last slice is more than 10%% slower than the first")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sandbox-throughput-"))
    port = free_port()
    server = start_sandbox(port, 0, folder / "sandbox.log", "--nonce-check", args.nonce_check)
    meter = Meter(args.slice, lambda: cpu_seconds(server.pid) or 0.0)
    try:
        print(f"sandbox throughput: {args.requests} requests ({args.mix}), {args.threads} "
              f"client threads, --nonce-check {args.nonce_check}; {os.cpu_count()} CPU(s), "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        started = run(port, args.requests, args.mix, args.threads, meter)
        wall = time.monotonic() - started[0]
        served = meter.cpu() - started[1]
        print(f"{meter.done} requests in {wall:.1f} s: {meter.done / wall:.0f} requests/s; "
              f"sandbox CPU {served:.1f} s ({1000 * served / max(meter.done, 1):.2f} ms a "
              f"request)")
        kept = report(started, meter)
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
    for failure in meter.failures:
        print(f"unexpected answer: {failure}")
    sys.exit(1 if meter.failures or (args.strict and not kept) else 0)


if __name__ == "__main__":
    main()
