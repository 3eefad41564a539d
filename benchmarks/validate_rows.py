"""Benchmark: load a 100,000-row remittance job and iterate every item through the pipeline.

Run from the repository root:

    .venv/bin/python benchmarks/validate_rows.py [--rows 100000] [--tracemalloc]

Prints the elapsed seconds and memory: the process's peak resident size (ru_maxrss) and its
resident size after the first tenth and at the end of the rows. Flat memory means the two
are close: rows are streamed, only the external_ids seen are kept. ``--tracemalloc`` also
prints the peak of Python allocations during loading and iteration (and runs slower).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.job import iter_items, load_job  # noqa: E402

JOB = """\
version: 1
name: bench-2026-11
kind: remittance
provider: {base_url: sandbox, auth: hmac, api_key: k, api_secret: s}
vars: {period: "2026-11"}
defaults:
  payer_id: 1
  mode: SOURCE_AMOUNT
  source: {country_iso_code: FRA, currency: EUR}
  purpose_of_remittance: SALARY
  sender: {firstname: Ada, lastname: Acme, country_iso_code: FRA}
items:
  from: payroll.csv
  external_id: "payroll-{{ vars.period }}-{{ row.employee_id }}"
  template:
    source: {amount: "{{ row.net_pay }}"}
    destination: {currency: "{{ row.currency }}"}
    credit_party_identifier: {msisdn: "{{ row.msisdn }}"}
    beneficiary: {firstname: "{{ row.first_name }}", lastname: "{{ row.last_name }}"}
"""


def write_rows(folder: Path, count: int) -> None:
    with (folder / "payroll.csv").open("w", encoding="utf-8-sig", newline="") as out:
        out.write("employee_id,net_pay,currency,msisdn,first_name,last_name\r\n")
        for n in range(count):
            out.write(f"E{n:06d},{1000 + n % 5000}.{n % 100:02d},KES,+2547{n:08d},"
                      f"First{n},Last{n}\r\n")


def resident_mib() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def print_speed_and_memory(count: int, elapsed: float, early: float) -> None:
    """Rows per second, and the resident size after a tenth of the rows (``early``), at the
    end and at its peak: flat memory when the first two are close."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"elapsed: {elapsed:.2f} s  ({count / elapsed:,.0f} rows/s)")
    print(f"resident: {early:.1f} MiB after {count // 10} rows, {resident_mib():.1f} MiB at the "
          f"end; peak (ru_maxrss) {peak:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--tracemalloc", action="store_true")
    options = parser.parse_args()
    count = options.rows
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "job.yaml").write_text(JOB, encoding="utf-8")
        write_rows(folder, count)
        if options.tracemalloc:
            tracemalloc.start()
        start = time.perf_counter()
        job = load_job(folder / "job.yaml", environ={})
        valid = invalid = 0
        early = 0.0
        for result in iter_items(job):
            if result.ok:
                valid += 1
            else:
                invalid += 1
            if valid + invalid == count // 10:
                early = resident_mib()
        elapsed = time.perf_counter() - start
    print(f"rows: {count}  valid: {valid}  invalid: {invalid}")
    print_speed_and_memory(count, elapsed, early)
    if options.tracemalloc:
        _, traced = tracemalloc.get_traced_memory()
        print(f"peak Python allocations while loading and iterating: {traced / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
