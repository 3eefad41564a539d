"""The summary email of a large batch: how big it is and how long it takes to make.

Writes a state database holding one remittance batch of N items (by default 10,000: 500
failed, 300 pending, 50 needing a person, the rest paid, in EUR to KES and PHP), builds its
summary as a run's end does, renders the built-in templates, composes the email and prints
the sizes: the text part, the HTML part, the email without its CSV attachment, and the CSV.
With --html PATH it also writes the HTML part there (summary_screenshot.py shows it in a
browser).

    .venv/bin/python benchmarks/summary_email.py [--items 10000] [--failed 500] [--html F]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

from runner.job import load_job
from runner.state import ItemRecord, StateStore, open_store
from runner.summary import check_summary, render_all, summary_of
from runner.summary.mail import compose

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
    records = []
    for n in range(items):
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
    store.insert_items(records)
    for r in records[:50]:  # a few confirm calls recorded, for the run that moved money
        attempt = store.begin_attempt(run_id, r.external_id, "confirm", {})
        store.end_attempt(attempt, r.external_id, "ok")
    store.end_run(run_id, 1, {"settled": items - failed - pending - review})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--failed", type=int, default=500)
    parser.add_argument("--pending", type=int, default=300)
    parser.add_argument("--review", type=int, default=50)
    parser.add_argument("--html", type=Path, help="also write the HTML part here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "job.yaml"
        path.write_text(JOB, encoding="utf-8")
        job = load_job(path)
        templates = check_summary(job)
        with open_store(Path(folder) / "s.sqlite") as store:
            batch(store, args.items, args.failed, args.pending, args.review)
            started = time.perf_counter()
            summary = summary_of(job, store)
        rendered = render_all(summary, templates)
        took = time.perf_counter() - started
    assert job.summary is not None and job.summary.email is not None
    message = compose(job.summary.email, summary, rendered.subject, rendered.text,
                      rendered.html, rendered.csv, rendered.csv_name)
    without_csv = len(message.get_payload()[0].as_bytes())
    print(f"{args.items:,} items ({args.failed:,} failed, {args.pending:,} pending, "
          f"{args.review:,} to check): summary built and rendered in {took:.2f} s")
    print(f"  text part   {len(rendered.text.encode()):>9,} bytes")
    print(f"  HTML part   {len(rendered.html.encode()):>9,} bytes")
    print(f"  email without the CSV  {without_csv:,} bytes ({without_csv / 1024:.1f} KiB)")
    print(f"  CSV attachment  {len(rendered.csv.encode()):,} bytes")
    if args.html is not None:
        args.html.write_text(rendered.html, encoding="utf-8")
        print(f"  HTML written to {args.html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
