"""The Summary built from a state database written by hand: every state an item can be in,
what a person is told to check, the subject line, the latest run, and the scrubbing of
secrets and card numbers; then the built-in templates over it (escaping provider text)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from job_files import write

from runner.job import load_job
from runner.state import ItemRecord, StateStore, open_state
from runner.summary import build_summary, check_summary, status_lines
from runner.summary.amounts import money_text, number_text, plain_amount
from runner.summary.items_csv import items_csv
from runner.summary.render import duration

JOB = "pay-2026-11"
SECRET = "api-secret-Hq2"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = open_state(tmp_path / "s.sqlite")
    yield s
    s.close()


def add(store: StateStore, n: int, outcome: str, step: str = "final", **values: Any) -> str:
    external_id = f"pay-E{n}"
    store.insert_items([ItemRecord(**{
                       "external_id": external_id, "job_name": JOB, "kind": "remittance",
                       "row": n + 1, "fingerprint": "f", "summary": json.dumps({
                           "beneficiary": f"Name {n}", "payer_id": 1,
                           "identifier": {"msisdn": "*********000" + str(n)}})})])
    store.update_item(external_id, outcome=outcome, step=step, **values)
    return external_id


PAID = dict(source_currency="EUR", source_amount="100.00", fee="1.50",
            destination_currency="KES", destination_amount="14025", status="70000",
            status_class="7", status_message="COMPLETED")


def every_state(store: StateStore) -> None:
    add(store, 1, "settled", **PAID)
    add(store, 2, "settled", **{**PAID, "source_amount": "20.25", "destination_amount": "2800"})
    add(store, 3, "settled", **{**PAID, "source_currency": "USD", "fee": "2",
                                "destination_currency": "PHP", "destination_amount": "58.70"})
    add(store, 4, "failed", source_currency="EUR", source_amount="80.00", fee="1.50",
        error_code="30200", error_message="REJECTED-INVALID-BENEFICIARY")
    add(store, 5, "pending", step="confirmed", status="20000", source_currency="EUR",
        source_amount="5.00")
    add(store, 6, "pending", step="quoted")
    add(store, 7, "awaiting_confirm", step="created")
    add(store, 8, "conflict", step="quoted", error_code="conflict",
        error_message="quotation pay-E8 at the provider does not match this item")
    add(store, 9, "unknown", step="created")
    add(store, 10, "pending", step="created", attempt=2)
    run_id = store.start_run(JOB, "job.yaml")
    store.begin_attempt(run_id, "pay-E10", "confirm", {"transaction": "pay-E10-r2"})
    store.end_run(run_id, 1, {"refused": 1, "invalid": 2})


def test_counts_totals_and_lists(store: StateStore) -> None:
    every_state(store)
    s = build_summary(store, JOB)
    assert s.counts == {"settled": 3, "pending": 2, "awaiting_confirm": 1, "failed": 1,
                        "refused": 1, "invalid": 2, "conflict": 1, "unknown": 1,
                        "in_doubt": 1}
    assert s.headline == (f"{JOB}: 3 paid (EUR 120.25, USD 100.00), 1 failed (EUR 80.00), "
                          "1 refused, 2 invalid, 3 need review, 2 pending, "
                          "1 awaiting confirmation")
    assert [(t.currency, t.sent, t.fees, t.received) for t in s.totals] == [
        ("EUR", Decimal("120.25"), Decimal("3.00"), Decimal(0)),
        ("KES", Decimal(0), Decimal(0), Decimal("16825")),
        ("PHP", Decimal(0), Decimal(0), Decimal("58.70")),
        ("USD", Decimal("100.00"), Decimal("2"), Decimal(0))]
    assert [(i.external_id, i.code, i.message) for i in s.failed] == [
        ("pay-E4", "30200", "REJECTED-INVALID-BENEFICIARY")]
    assert [(i.external_id, i.check) for i in s.needs_person] == [
        ("pay-E8", "quotation pay-E8 at the provider does not match this item"),
        ("pay-E9", "the outcome of a call could not be learnt: check the payment at the "
                   "provider before anything else"),
        ("pay-E10", "the confirm call was sent and its answer lost: look up the transaction "
                    "with external_id pay-E10-r2 at the provider; the next run does this "
                    "itself before sending anything")]
    assert [(i.external_id, i.check) for i in s.pending] == [
        ("pay-E5", "confirmed, status 20000: not final yet; the next run follows it"),
        ("pay-E6", "not confirmed yet (stopped at quoted); the next run continues it")]
    assert [i.external_id for i in s.awaiting_confirm] == ["pay-E7"]
    assert s.problems
    assert s.run is not None and (s.run.id, s.run.state, s.run.exit_code) == (1, "ended", 1)


def test_headline_of_a_clean_run_and_one_needing_review(store: StateStore) -> None:
    add(store, 1, "settled", **PAID)
    assert build_summary(store, JOB).headline == f"{JOB}: 1 paid (EUR 100.00)"
    assert not build_summary(store, JOB).problems
    add(store, 2, "unknown", step="created")
    assert build_summary(store, JOB).headline == f"{JOB}: 1 paid (EUR 100.00), 1 needs review"


def test_the_latest_run(store: StateStore, tmp_path: Path) -> None:
    assert build_summary(store, JOB).run is None
    first = store.start_run(JOB, "job.yaml")
    store.end_run(first, 0, {})
    second = store.start_run(JOB, "job.yaml")
    with store.join(JOB) as worker:
        worker.started(second)
        run = build_summary(store, JOB).run
        assert run is not None and (run.id, run.state, run.duration) == (
            second, "running", None)
        # A run killed without releasing its lease: its heartbeat goes stale.
        with sqlite3.connect(tmp_path / "s.sqlite") as db:
            db.execute("UPDATE workers SET heartbeat_at = ?", [time.time() - 3600])
        run = build_summary(store, JOB).run
        assert run is not None and (run.id, run.state) == (second, "interrupted")
    # A second start refused by the lease leaves a run row with no end: the ended one counts.
    run = build_summary(store, JOB).run
    assert run is not None and (run.id, run.state) == (first, "ended")
    assert run.duration is not None and run.duration >= timedelta(0)


def test_secrets_and_card_numbers_are_scrubbed(store: StateStore) -> None:
    add(store, 1, "failed", step="new", error_code="1000401",
        error_message=f"bad signature for {SECRET}; card 4111 1111 1111 1111 refused; "
                      "order 1234567890123 kept")
    s = build_summary(store, JOB, secrets=[SECRET, "k"], notes=[f"note {SECRET}"])
    assert s.failed[0].message == ("bad signature for [redacted]; card ************1111 "
                                   "refused; order 1234567890123 kept")  # not Luhn-valid
    assert s.notes == ["note [redacted]"]


def test_provider_text_is_escaped_in_html_and_defused_in_csv(store: StateStore,
                                                             tmp_path: Path) -> None:
    add(store, 1, "failed", step="new", error_code='"><b>', error_message="<img src=x "
        "onerror=alert(1)> & more")
    add(store, 2, "conflict", step="new", error_message="@SUM(A1) <i>")
    s = build_summary(store, JOB)
    templates = check_summary(load_job(write(tmp_path)))
    html = templates.html_of(s)
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; more" in html
    assert "&#34;&gt;&lt;b&gt;" in html and "@SUM(A1) &lt;i&gt;" in html
    assert "<img" not in html and "<b>" not in html and "<i>" not in html
    assert "<img src=x onerror=alert(1)> & more" in templates.text_of(s)
    rows = items_csv(s).splitlines()
    assert ",'@SUM(A1) <i>,'@SUM(A1) <i>," in rows[2]


def test_durations_read_naturally() -> None:
    assert [duration(timedelta(seconds=s)) for s in (1.234, 75, 3725)] == [
        "1.2s", "1m 15s", "1h 2m 5s"]
    assert duration(None) == ""


@pytest.mark.parametrize(("amount", "currency", "person", "machine"), [
    ("1500.5", "EUR", "EUR 1,500.50", "1500.50"), ("1500", "JPY", "JPY 1,500", "1500"),
    ("1.5", "KWD", "KWD 1.500", "1.500"), ("-3000.5", "EUR", "-EUR 3,000.50", "-3000.50"),
    ("0.1234", "EUR", "EUR 0.1234", "0.1234"),  # more decimals than the currency: all kept
    ("12", "kes", "KES 12.00", "12.00")])
def test_money_as_accountants_write_it(amount: str, currency: str, person: str,
                                       machine: str) -> None:
    assert money_text(Decimal(amount), currency) == person
    assert plain_amount(Decimal(amount), currency) == machine
    assert number_text(Decimal(amount), currency) == person.replace(f"{currency.upper()} ", "")


def test_amounts_at_the_currencys_decimals_in_every_view(store: StateStore,
                                                         tmp_path: Path) -> None:
    add(store, 1, "settled", **{**PAID, "source_amount": "1500.5", "fee": "2",
                                "destination_currency": "JPY", "destination_amount": "240000"})
    add(store, 2, "failed", source_currency="EUR", source_amount="80", error_code="30200")
    s = build_summary(store, JOB)
    assert s.headline == f"{JOB}: 1 paid (EUR 1,500.50), 1 failed (EUR 80.00)"
    text = check_summary(load_job(write(tmp_path))).text_of(s)
    assert "  EUR  planned 1,580.50 = paid 1,500.50 + failed 80.00 + pending 0.00; " \
           "not paid 80.00\n" in text
    assert "  EUR  sent 1,500.50  fees 2.00  cost 1,502.50\n" in text
    assert "  JPY  received 240,000\n" in text
    assert "  EUR -> JPY  159.9467  (1 item(s): EUR 1,500.50 -> JPY 240,000)\n" in text
    assert status_lines(s)[1] == "  EUR: sent 1,500.50, fees 2.00"
    row = next(csv.DictReader(io.StringIO(items_csv(s))))
    assert (row["source_amount"], row["fee"], row["destination_amount"]) == (
        "1500.50", "2.00", "240000")
