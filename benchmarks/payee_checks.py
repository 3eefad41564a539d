"""Benchmark: what checking 10,000 payees costs (`runner plan --verify`), and next month.

Run from the repository root:

    .venv/bin/python benchmarks/payee_checks.py [--items 10000] [--latency-ms 20]
        [--concurrency 8] [--changed 5]

Starts `runner sandbox serve` in its own process (each call answered after ``--latency-ms``,
as a provider over a network would), writes a remittance job of ``--items`` payees (wallets
of payer 1, each named in its row), and times as subprocesses, on a fresh SQLite state:

1. `runner plan` without checks (the baseline: validation and the plan);
2. `runner plan --verify`: every account asked of the provider (a verification and a
   holder's name each, ``--concurrency`` at a time) and kept in the state;
3. the same again: every answer kept, nothing asked;
4. next month's batch (a new job name) with ``--changed`` percent of the accounts changed:
   only those are asked.

For each: the wall time, the runner's CPU seconds and peak RSS, the calls the sandbox
received, and the state's size. Then the cost of the name rule alone: 10,000 comparisons of
the standard library's difflib, in this process.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import Timed, free_port, mib, start_sandbox, timed_run  # noqa: E402
from chaos import KEY, SECRET  # noqa: E402

JOB = """\
version: 1
name: {name}
kind: remittance
provider: {{base_url: "{url}", auth: hmac, api_key: {key}, api_secret: {secret},
           timeout: 60s}}
defaults:
  payer_id: 1
  mode: SOURCE_AMOUNT
  source: {{country_iso_code: FRA, currency: EUR}}
  destination: {{currency: KES}}
  purpose_of_remittance: SALARY
  sender: {{firstname: Ada, lastname: Acme}}
items:
  from: {rows}
  external_id: "{name}-{{{{ row.id }}}}"
  template:
    source: {{amount: "{{{{ row.amount }}}}"}}
    credit_party_identifier: {{msisdn: "{{{{ row.msisdn }}}}"}}
    beneficiary: {{firstname: "{{{{ row.first }}}}", lastname: "{{{{ row.last }}}}"}}
run:
  concurrency: {concurrency}
  verify_payees: "off"        # --verify checks (warn)
"""
FIRST = ["Wanjiru", "Kofi", "Amina", "Chinedu", "Maria", "Priya", "Juan", "Awa", "Okello"]
LAST = ["Kamau", "Mensah", "Diop", "Okafor", "Santos", "Sharma", "Dela Cruz", "Nwosu"]


def write_job(folder: Path, url: str, name: str, items: int, concurrency: int,
              changed: int = 0) -> Path:
    rows = ["id,amount,msisdn,first,last"]
    for n in range(items):
        account = n + 10_000_000 if n < changed else n
        rows.append(f"E{n},{10 + n % 90}.00,+2547{account:08d},{FIRST[n % len(FIRST)]},"
                    f"{LAST[n % len(LAST)]}")
    (folder / f"{name}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    job = folder / f"{name}.yaml"
    job.write_text(JOB.format(name=name, url=url, key=KEY, secret=SECRET, rows=f"{name}.csv",
                              concurrency=concurrency), encoding="utf-8")
    return job


def line(what: str, t: Timed, state: Path) -> str:
    parties = t.counts.get("POST parties", 0)
    size = state.stat().st_size if state.exists() else 0
    return (f"{what}: exit {t.code}, {t.seconds:.2f} s, runner CPU {t.runner_cpu:.2f} s, "
            f"peak RSS {mib(t.peak_rss)}; party checks {parties} "
            f"({t.counts.get('POST parties verification', 0)} verifications, "
            f"{t.counts.get('POST parties information', 0)} names), other calls "
            f"{t.calls() - parties}; state {size / 1048576:.1f} MiB")


def names_cost(count: int) -> str:
    from runner.payees.names import compare

    pairs = [(f"{FIRST[n % 9]} {LAST[n % 8]}", f"{FIRST[(n * 7) % 9]} {LAST[(n * 5) % 8]}")
             for n in range(count)]
    started = time.process_time()
    for given, held in pairs:
        compare(given, held)
    spent = time.process_time() - started
    return (f"the name rule alone: {count:,} comparisons in {spent:.3f} s CPU "
            f"({1e6 * spent / count:.0f} us each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--changed", type=float, default=5.0,
                        help="percent of accounts changed next month")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        port = free_port()
        server = start_sandbox(port, args.latency_ms, folder / "sandbox.log")
        url = f"http://127.0.0.1:{port}"
        try:
            state = folder / "state.sqlite"
            job = write_job(folder, url, "bench-2026-11", args.items, args.concurrency)
            base = [sys.executable, "-m", "runner", "plan", str(job), "--state", str(state)]

            def timed(command: list[str]) -> Timed:
                return timed_run(command, folder, url, folder / "run.log", False, server.pid)

            print(f"{args.items:,} payees, sandbox latency {args.latency_ms:g} ms, "
                  f"concurrency {args.concurrency}")
            print(line("plan, no checks", timed(base), state))
            first = timed([*base, "--verify"])
            print(line("plan --verify, every account asked", first, state))
            print(line("plan --verify again, every answer kept", timed([*base, "--verify"]),
                       state))
            changed = int(args.items * args.changed / 100)
            month = write_job(folder, url, "bench-2026-12", args.items, args.concurrency,
                              changed)
            later = [sys.executable, "-m", "runner", "plan", str(month), "--state",
                     str(state), "--verify"]
            print(line(f"next month, {changed:,} accounts changed", timed(later), state))
            print(names_cost(args.items))
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
