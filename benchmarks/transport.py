"""The provider clients' HTTP transport on its own: N calls through ``MoneyTransferClient``
from T threads against ``runner sandbox serve`` in its own process (L ms a call), timed, with
this process's CPU seconds per call (the client's: request, signature, exchange, JSON).

    .venv/bin/python benchmarks/transport.py [--calls 6000] [--threads 16] [--latency-ms 0]
    .venv/bin/python benchmarks/transport.py --proxy      # through a forwarding proxy

Each call is a ``GET /balances`` (the answer a small JSON list). The same script runs in an
older checkout (it uses only the client's public constructor), so the two can be measured in
turn. ``--proxy`` sets HTTP_PROXY to a forwarding proxy in this process (tests'
``http_servers.Proxy``, whose own CPU counts in: compare it with itself only).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from _bench import free_port, start_sandbox
from chaos import KEY, ROOT, SECRET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=6000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--proxy", action="store_true")
    args = parser.parse_args()
    from runner.provider.money_transfer import MoneyTransferClient

    with tempfile.TemporaryDirectory() as scratch:
        port = free_port()
        server = start_sandbox(port, args.latency_ms, Path(scratch) / "sandbox.log")
        try:
            proxy = None
            if args.proxy:
                sys.path.insert(0, str(ROOT / "tests"))
                from http_servers import Proxy

                proxy = Proxy().__enter__()
                os.environ["HTTP_PROXY"] = proxy.url
                os.environ.pop("NO_PROXY", None)
                os.environ.pop("no_proxy", None)
            client = MoneyTransferClient(f"http://127.0.0.1:{port}", KEY, SECRET, auth="hmac")
            client.balances()  # connections, imports and caches warmed up
            per_thread = args.calls // args.threads
            failures: list[BaseException] = []

            def work() -> None:
                try:
                    for _ in range(per_thread):
                        client.balances()
                except BaseException as exc:  # noqa: BLE001 - counted, then reported
                    failures.append(exc)

            threads = [threading.Thread(target=work) for _ in range(args.threads)]
            cpu, wall = time.process_time(), time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            client.close()
            if proxy is not None:
                proxy.__exit__(None, None, None)
        finally:
            server.terminate()
            server.wait(30)
    calls = per_thread * args.threads
    load = os.getloadavg()[0]
    print(f"{calls} calls, {args.threads} threads, latency {args.latency_ms:g} ms"
          f"{' through a proxy' if args.proxy else ''}: wall {wall:.2f} s "
          f"({calls / wall:.0f} calls/s), client CPU {cpu:.2f} s "
          f"({cpu / calls * 1000:.3f} ms a call); load average {load:.1f}")
    if failures:
        raise SystemExit(f"{len(failures)} thread(s) failed: {failures[0]!r}")


if __name__ == "__main__":
    main()
