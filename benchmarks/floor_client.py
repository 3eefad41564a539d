"""The floor the benchmarks time the runner against: a minimal provider client that sends
quotation POSTs over http.client, one keep-alive connection per thread, and nothing else (no
state, no validation, no plan). ``engine.floor_seconds`` runs it in its own process, or as
several processes at once (``python benchmarks/floor_client.py``, one per runner worker), so
that the floor has the shape of the runs it is set against.

    python benchmarks/floor_client.py PORT PREFIX POSTS THREADS   # prints its seconds

The sandbox's key and secret come from FLOOR_KEY and FLOOR_SECRET.
"""

from __future__ import annotations

import http.client
import os
import sys
import threading
import time

import simplejson

from runner.provider.auth import digest_headers


def send(port: int, prefix: str, posts: int, threads: int, key: str, secret: str) -> float:
    """Send ``posts`` quotation POSTs (external_ids PREFIX-0, PREFIX-1, ...) on ``threads``
    threads; the seconds from the first thread's start to the last one's end."""
    failed: list[int] = []

    def work(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            for i in range(k, posts, threads):
                body = simplejson.dumps({
                    "external_id": f"{prefix}-{i}", "payer_id": 1, "mode": "SOURCE_AMOUNT",
                    "source": {"country_iso_code": "FRA", "currency": "EUR", "amount": "100.00"},
                    "destination": {"currency": "KES"}})
                conn.request("POST", "/v1/money-transfer/quotations", body=body, headers={
                    "Content-Type": "application/json", **digest_headers(key, secret)})
                answer = conn.getresponse()
                answer.read()
                if answer.status != 201:
                    failed.append(answer.status)
                    return
        finally:
            conn.close()

    running = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    started = time.monotonic()
    for t in running:
        t.start()
    for t in running:
        t.join()
    if failed:
        raise RuntimeError(f"floor: HTTP {failed[0]}")
    return time.monotonic() - started


if __name__ == "__main__":
    port, prefix, posts, threads = sys.argv[1:5]
    print(send(int(port), prefix, int(posts), int(threads), os.environ["FLOOR_KEY"],
               os.environ["FLOOR_SECRET"]))
