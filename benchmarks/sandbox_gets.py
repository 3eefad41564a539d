"""How many authenticated GETs per second the sandbox serves over loopback.

Starts ``runner sandbox serve`` in its own process, then one client process (this one) with
N threads, each with its own keep-alive session signing every request with the digest scheme
(or Basic with --basic), asks a mix of catalogue and transaction reads for a fixed time.

    python benchmarks/sandbox_gets.py --seconds 10 --threads 8
"""

from __future__ import annotations

import argparse
import base64
import http.client
import socket
import statistics
import subprocess
import sys
import threading
import time

import requests

from runner.provider.auth import DigestAuth, digest_headers

KEY, SECRET = "bench-key", "bench-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, auth: object) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "/ping", auth=auth, timeout=1).status_code == 200:  # type: ignore[arg-type]
                return
        except requests.ConnectionError:
            time.sleep(0.05)
    raise SystemExit("sandbox did not start")


def seed_transaction(url: str, auth: object) -> str:
    s = requests.Session()
    s.auth = auth  # type: ignore[assignment]
    s.post(url + "/v1/money-transfer/quotations", json={
        "external_id": "bench-q", "payer_id": 1, "mode": "SOURCE_AMOUNT",
        "source": {"country_iso_code": "FRA", "currency": "EUR", "amount": "100.00"},
        "destination": {"currency": "KES"}}).raise_for_status()
    s.post(url + "/v1/money-transfer/quotations/ext-bench-q/transactions", json={
        "external_id": "bench-t", "credit_party_identifier": {"msisdn": "+254700100200"},
        "sender": {"firstname": "A", "lastname": "B"},
        "beneficiary": {"firstname": "C", "lastname": "D"},
        "purpose_of_remittance": "SALARY"}).raise_for_status()
    return "/v1/money-transfer/transactions/ext-bench-t"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--basic", action="store_true", help="Basic auth instead of digest")
    parser.add_argument("--client", choices=["requests", "http.client"], default="requests",
                        help="http.client costs the client less CPU, so shows more of the server")
    args = parser.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "runner", "sandbox", "serve", "--port", str(port),
         "--api-key", KEY, "--api-secret", SECRET],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        auth: object = (KEY, SECRET) if args.basic else DigestAuth(KEY, SECRET)
        wait_up(url, auth)
        paths = ["/v1/money-transfer/payers/4", seed_transaction(url, auth),
                 "/v1/money-transfer/balances", "/v1/merchant-payment/payment-methods/1"]
        counts = [0] * args.threads
        errors = [0] * args.threads
        latencies: list[list[float]] = [[] for _ in range(args.threads)]
        stop = time.monotonic() + args.seconds

        def work_light(n: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            signer = DigestAuth(KEY, SECRET)
            basic = "Basic " + base64.b64encode(f"{KEY}:{SECRET}".encode()).decode()
            i = n
            while time.monotonic() < stop:
                headers = ({"Authorization": basic} if args.basic
                           else digest_headers(KEY, SECRET, signer.brand))
                t0 = time.perf_counter()
                conn.request("GET", paths[i % len(paths)], headers=headers)
                r = conn.getresponse()
                r.read()
                latencies[n].append(time.perf_counter() - t0)
                i += 1
                if r.status == 200:
                    counts[n] += 1
                else:
                    errors[n] += 1
            conn.close()

        def work(n: int) -> None:
            session = requests.Session()
            # No proxy lookups in the environment on every call: measure the server.
            session.trust_env = False
            session.auth = DigestAuth(KEY, SECRET) if not args.basic else (KEY, SECRET)  # type: ignore[assignment]
            i = n
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                r = session.get(url + paths[i % len(paths)], timeout=5)
                latencies[n].append(time.perf_counter() - t0)
                i += 1
                if r.status_code == 200:
                    counts[n] += 1
                else:
                    errors[n] += 1
            session.close()

        target = work if args.client == "requests" else work_light
        threads = [threading.Thread(target=target, args=(n,)) for n in range(args.threads)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        all_lat = sorted(x for lat in latencies for x in lat)
        ok = sum(counts)
        print(f"client: {args.client}; auth: {'basic' if args.basic else 'digest'}; "
              f"threads: {args.threads}; "
              f"seconds: {elapsed:.1f}")
        print(f"ok: {ok}; errors: {sum(errors)}; GETs/s: {ok / elapsed:.0f}")
        print(f"latency ms: p50 {1000 * statistics.median(all_lat):.2f}, "
              f"p99 {1000 * all_lat[int(len(all_lat) * 0.99)]:.2f}")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
