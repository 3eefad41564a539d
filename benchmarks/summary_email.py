"""The summary email of a large batch: how big it is and how long it takes to make.

Writes a state database holding one remittance batch of N items (by default 10,000: 500
failed, 300 pending, 50 needing a person, the rest paid, in EUR to KES and PHP), builds its
summary as a run's end does, renders the built-in templates, composes the email and prints
the sizes: the text part, the HTML part, the email without its CSV attachment, and the CSV.
With --html PATH it also writes the HTML part there (summary_screenshot.py shows it in a
browser). For each size it also prints the time and the memory (tracemalloc's peak) of the
summary (built, rendered and its CSV written to disk, as a run's end does), then of the
email composed with the CSV attached: the summary's should not grow with the batch.

    .venv/bin/python benchmarks/summary_email.py [--items 10000 100000] [--failed 500]
        [--html F]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
import tracemalloc
from decimal import Decimal
from pathlib import Path

from runner.job import load_job
from runner.state import ItemRecord, StateStore, open_state
from runner.summary import check_summary, render_all, summary_of
from runner.summary.mail import compose
from runner.summary.reports import write_items

JOB = """\
version: 1
name: payroll-2026-11
kind: remittance
provider: {base_url: sandbox, api_key: k-bench, api_secret: s-bench}
defaults:
  payer_id: 1
  mode: SOURCE_AMOUNT
  source: {country_iso_code: FRA, currency: EUR, amount: "10.00"}
  destination: {currency: KES}
  purpose_of_remittance: SALARY
  sender: {firstname: Ada, lastname: Acme}
  beneficiary: {firstname: Jo, lastname: Doe}
items:
  rows: [{msisdn: "+254700000001"}]
  external_id: "x"
  template: {credit_party_identifier: {msisdn: "{{ row.msisdn }}"}}
summary:
  email: {to: [payroll@example.com], from: runner@example.com,
          smtp: {host: 127.0.0.1, starttls: false}}
"""
NAMES = ("Amani Otieno", "Wanjiru Kamau", "Juan dela Cruz", "Maria Santos", "Kofi Mensah")


def batch(store: StateStore, items: int, failed: int, pending: int, review: int) -> None:
    """N items of one job, as runs would have left them, and one run that moved them."""
    run_id = store.start_run("payroll-2026-11", "job.yaml")
    for start in range(0, items, 5_000):  # a page at a time: the benchmark holds no batch
        records = _records(range(start, min(items, start + 5_000)), failed, pending, review)
        store.insert_items(records)
        for r in records[:50 if start == 0 else 0]:  # a few confirm calls, for the run
            attempt = store.begin_attempt(run_id, r.external_id, "confirm", {})
            store.end_attempt(attempt, r.external_id, "ok")
    store.end_run(run_id, 1, {"settled": items - failed - pending - review})


def _records(numbers: range, failed: int, pending: int, review: int) -> list[ItemRecord]:
    records = []
    for n in numbers:
        php = n % 4 == 0
        amount = Decimal(100 + n % 900) + Decimal(n % 100) / 100
        state = ("failed" if n < failed else "pending" if n < failed + pending else
                 "unknown" if n < failed + pending + review else "settled")
        records.append(ItemRecord(
            f"payroll-2026-11-E{n:05d}", "payroll-2026-11", "remittance", n + 2, "f",
            step="final" if state in ("failed", "settled") else "confirmed",
            source_currency="EUR", source_amount=amount, fee=Decimal("1.50"),
            destination_currency="PHP" if php else "KES",
            destination_amount=(amount * (Decimal("58.7") if php else Decimal("140.25"))
                                ).quantize(Decimal(1)),
            transaction_id=n + 1, outcome=state if state != "pending" else "pending",
            status={"failed": "30200", "settled": "70000"}.get(state, "20000"),
            status_message={"failed": "REJECTED-INVALID-BENEFICIARY",
                             "settled": "COMPLETED"}.get(state, "SUBMITTED"),
            error_code="30200" if state == "failed" else None,
            error_message="REJECTED-INVALID-BENEFICIARY" if state == "failed" else
            "the outcome of a call could not be learnt" if state == "unknown" else None,
            summary=json.dumps({"beneficiary": NAMES[n % len(NAMES)], "payer_id": 1,
                                "identifier": {"msisdn": f"*********{n:04d}"}})))
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[10_000])
    parser.add_argument("--failed", type=int, default=500)
    parser.add_argument("--pending", type=int, default=300)
    parser.add_argument("--review", type=int, default=50)
    parser.add_argument("--html", type=Path, help="also write the HTML part here")
    args = parser.parse_args()
    for items in args.items:
        with tempfile.TemporaryDirectory() as folder:
            measure(Path(folder), items, args)
    return 0


def measure(folder: Path, items: int, args: argparse.Namespace) -> None:
    path = folder / "job.yaml"
    path.write_text(JOB, encoding="utf-8")
    job = load_job(path)
    templates = check_summary(job)
    with open_state(folder / "s.sqlite") as store:
        batch(store, items, args.failed, args.pending, args.review)
        gc.collect()
        tracemalloc.start()
        started = time.perf_counter()
        summary = summary_of(job, store)
        write_items(summary, folder / "items.csv")
        rendered = render_all(summary, templates, folder / "items.csv", report=True)
        took, peak = time.perf_counter() - started, tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    started = time.perf_counter()
    assert job.summary is not None and job.summary.email is not None
    message = compose(job.summary.email, summary, rendered.subject, rendered.text,
                      rendered.html, rendered.csv_file, rendered.csv_name)
    mail_took, mail_peak = time.perf_counter() - started, tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    without_csv = len(message.get_payload()[0].as_bytes())
    print(f"{items:,} items ({args.failed:,} failed, {args.pending:,} pending, "
          f"{args.review:,} to check): summary built, rendered and its CSV written in "
          f"{took:.2f} s, peak {peak / 2**20:.1f} MiB")
    print(f"  email composed with the CSV attached in {mail_took:.2f} s, peak "
          f"{mail_peak / 2**20:.1f} MiB")
    print(f"  text part   {len(rendered.text.encode()):>9,} bytes")
    print(f"  HTML part   {len(rendered.html.encode()):>9,} bytes")
    print(f"  email without the CSV  {without_csv:,} bytes ({without_csv / 1024:.1f} KiB)")
    print(f"  CSV attachment  {rendered.csv_file.stat().st_size:,} bytes")
    if args.html is not None:
        args.html.write_text(rendered.html, encoding="utf-8")
        print(f"  HTML written to {args.html}")


if __name__ == "__main__":
    sys.exit(main())
