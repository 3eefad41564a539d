"""runner against the plain script a user would write instead, on the same sandbox, in one
run: N remittances (rows like jobs/payroll.csv), the sandbox in its own process with L ms per
call, C at a time.

The script is what a careful user writes in an afternoon: a thread pool of C over
``requests`` sessions (one per thread, kept alive), the digest auth from ``runner.provider
.auth``, and per row the quotation, the transaction and the confirm, with no state, no
checks and no retries. runner runs the same rows as a job (`runner run --yes`, its state and
every check included), under other external_ids. Both are timed from their process's start
to its end, with their CPU seconds; the line to read is runner / script, for the wall time and
for the CPU.

    .venv/bin/python benchmarks/peer.py [--items 2000] [--latency-ms 20] [--concurrency 16]
        [--rounds 3]
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import free_port, start_sandbox
from chaos import KEY, SECRET, runner_command, runner_env, write_batch

HERE = Path(__file__).resolve()
SENDER = {"firstname": "Ada", "lastname": "Acme", "address": "1 rue de la Paix",
          "city": "Paris", "country_iso_code": "FRA", "date_of_birth": "1971-04-12"}


def script(url: str, rows_file: str, prefix: str, threads: int) -> int:
    """The plain script: every row's quotation, transaction and confirm; the failures."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import local

    import requests

    from runner.provider.auth import DigestAuth

    mt = url + "/v1/money-transfer"
    auth = DigestAuth(KEY, SECRET)
    sessions = local()

    def session() -> requests.Session:
        if not hasattr(sessions, "s"):
            sessions.s = requests.Session()
            sessions.s.auth = auth
        return sessions.s

    def pay(row: dict[str, str]) -> bool:
        s, ref = session(), f"{prefix}-{row['employee_id']}"
        quotation = s.post(mt + "/quotations", timeout=30, json={
            "external_id": ref, "payer_id": int(row["payer_id"]), "mode": "SOURCE_AMOUNT",
            "source": {"country_iso_code": "FRA", "currency": "EUR", "amount": row["net_pay"]},
            "destination": {"currency": row["currency"]}})
        if quotation.status_code != 201:
            return False
        party = {k: v for k, v in (("msisdn", row["msisdn"]),
                                   ("bank_account_number", row["bank_account"]),
                                   ("swift_bic_code", row["swift"])) if v}
        made = s.post(f"{mt}/quotations/{quotation.json()['id']}/transactions", timeout=30,
                      json={"external_id": ref, "credit_party_identifier": party,
                            "sender": SENDER, "purpose_of_remittance": "SALARY",
                            "beneficiary": {
                                "firstname": row["first_name"], "lastname": row["last_name"],
                                "bank_account_holder_name":
                                    f"{row['first_name']} {row['last_name']}"}})
        if made.status_code != 201:
            return False
        confirmed = s.post(f"{mt}/transactions/{made.json()['id']}/confirm", timeout=30)
        return confirmed.status_code == 200

    with open(rows_file, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    with ThreadPoolExecutor(threads) as pool:
        return sum(not ok for ok in pool.map(pay, rows))


def timed(command: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the process's own, os.wait4) and the exit code."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=runner_env())
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if process.stderr is not None:
        process.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="peer-bench-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_sandbox(port, args.latency_ms, folder / "sandbox.log")
    walls: list[float] = []
    cpus: list[float] = []
    try:
        print(f"peer benchmark: {args.items} items, {args.latency_ms:g} ms a call, "
              f"{args.concurrency} at once; {os.cpu_count()} CPU(s), load average "
              f"{os.getloadavg()[0]:.2f}")
        for n in range(1, args.rounds + 1):
            job, _ = write_batch(folder, url, args.items, name=f"peer-{n}",
                                 concurrency=args.concurrency, timeout="30s",
                                 wait_for_final="0s", max_wait="60s", script="peer.py")
            ours = timed(runner_command(job, folder / f"state-{n}.sqlite", "--concurrency",
                                        str(args.concurrency)))
            theirs = timed([sys.executable, str(HERE), "--script", url,
                            str(folder / f"peer-{n}.csv"), f"script-{n}",
                            str(args.concurrency)])
            if ours[2] != 0 or theirs[2] != 0:
                print(f"round {n}: runner exit {ours[2]}, script exit {theirs[2]}: see "
                      f"{folder}")
                return 1
            walls.append(ours[0] / theirs[0])
            cpus.append(ours[1] / theirs[1])
            print(f"round {n}: runner {ours[0]:.2f} s wall, {ours[1]:.2f} s CPU; script "
                  f"{theirs[0]:.2f} s wall, {theirs[1]:.2f} s CPU; runner / script: wall "
                  f"{walls[-1]:.2f}, CPU {cpus[-1]:.2f}")
        print(f"runner / script, median of {args.rounds}: wall {statistics.median(walls):.2f}, "
              f"CPU {statistics.median(cpus):.2f}")
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--script"]:
        base, rows, prefix, threads = sys.argv[2:6]
        failed = script(base, rows, prefix, int(threads))
        sys.exit(1 if failed else 0)
    sys.exit(main())
