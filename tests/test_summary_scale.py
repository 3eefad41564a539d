"""A summary that scales: the email of a 10,000-item batch with 500 failures stays under
100 KB without its CSV (each list shows 50 items and says how many more the CSV has), and
the CSV still lists every item (attached, or left on disk when it is too big to mail); a
summary holds 50 items of each list and counts all. The
batch is written into a state database directly
(``benchmarks/summary_email.py``, which prints the same figures)."""

from __future__ import annotations

import importlib.util
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import pytest

from runner.job import load_job
from runner.state import open_state
from runner.summary import check_summary, mail, render_all, status_lines, summary_of
from runner.summary.mail import compose
from runner.summary.reports import write_items

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("summary_email",
                                                  BENCHMARKS / "summary_email.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_email_of_10000_items_with_500_failures_is_under_100_kb(tmp_path: Path) -> None:
    made = bench()
    (tmp_path / "job.yaml").write_text(made.JOB, encoding="utf-8")
    job = load_job(tmp_path / "job.yaml")
    with open_state(tmp_path / "s.sqlite") as store:
        made.batch(store, 10_000, 500, 300, 50)
        summary = summary_of(job, store)
        assert write_items(summary, tmp_path / "items.csv") == 10_000
    rendered = render_all(summary, check_summary(job), tmp_path / "items.csv")
    assert job.summary is not None and job.summary.email is not None
    message = compose(job.summary.email, summary, rendered.subject, rendered.text,
                      rendered.html, rendered.csv_file, rendered.csv_name)
    alternative = message.get_payload()[0]
    assert [p.get_content_type() for p in alternative.iter_parts()] == [
        "text/plain", "text/html"]
    assert len(alternative.as_bytes()) < 100_000
    assert rendered.subject == ("payroll-2026-11: 9,150 paid (EUR 5,013,716.75), 500 failed "
                                "(EUR 174,997.50), 50 need review, 300 pending")
    text = rendered.text
    assert "Failed (500):\n" in text and "  ... and 450 more: every item is in the CSV.\n" in text
    assert "Pending (300):\n" in text and "  ... and 250 more: every item is in the CSV.\n" in text
    assert text.count(": 30200 REJECTED-INVALID-BENEFICIARY\n") == 50
    assert ("  EUR  planned 5,459,950.00 = paid 5,013,716.75 + failed 174,997.50 + pending "
            "224,998.50 + to check 46,237.25; not paid 446,233.25\n") in text
    html = rendered.html
    assert "... and 450 more: every item is in the CSV." in html
    # The stacked bar: widths of paid, failed, pending and to check, by amount.
    assert ['width="91.8%" bgcolor="#2e7d32"', 'width="3.2%" bgcolor="#c62828"',
            'width="4.1%" bgcolor="#f9a825"', 'width="0.8%" bgcolor="#6a1b9a"'] == [
        part.split(" style")[0].removeprefix("<td ") for part in html.split("\n")
        if part.startswith('<td width="')]
    assert "<svg" not in html and "<style" not in html and "<script" not in html
    assert len(rendered.csv.splitlines()) == 10_001
    [attached] = message.iter_attachments()
    assert attached.get_content() == rendered.csv


def test_a_list_of_items_too_big_to_mail_stays_on_disk(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    made = bench()
    (tmp_path / "job.yaml").write_text(made.JOB, encoding="utf-8")
    job = load_job(tmp_path / "job.yaml")
    with open_state(tmp_path / "s.sqlite") as store:
        made.batch(store, 2_000, 100, 60, 10)
        summary = summary_of(job, store)
        write_items(summary, tmp_path / "items.csv")
    rendered = render_all(summary, check_summary(job), tmp_path / "items.csv", report=True)
    monkeypatch.setattr(mail, "ATTACH_LIMIT", (tmp_path / "items.csv").stat().st_size - 1)
    assert job.summary is not None and job.summary.email is not None
    message = compose(job.summary.email, summary, rendered.subject, rendered.text,
                      rendered.html, rendered.csv_file, rendered.csv_name)
    assert list(message.iter_attachments()) == []
    assert f"Full list of items: {(tmp_path / 'items.csv').resolve()}" in rendered.text
    assert len(message.as_bytes()) < 100_000


def test_a_summary_of_3000_items_holds_50_of_each_list_and_counts_every_item(
        tmp_path: Path) -> None:
    made = bench()
    (tmp_path / "job.yaml").write_text(made.JOB, encoding="utf-8")
    job = load_job(tmp_path / "job.yaml")
    with open_state(tmp_path / "s.sqlite") as store:
        made.batch(store, 3_000, 400, 120, 60)
        summary = summary_of(job, store)
        assert write_items(summary, tmp_path / "items.csv") == 3_000
        again = summary_of(job, store)
        lines = status_lines(summary)
    assert summary.counts == {"settled": 2_420, "failed": 400, "pending": 120, "unknown": 60}
    assert [(len(x), len(x.shown)) for x in (summary.items, summary.failed, summary.pending,
                                             summary.needs_person)] == [
        (3_000, 50), (400, 50), (120, 50), (60, 50)]
    assert [i.external_id for i in summary.failed][:2] == ["payroll-2026-11-E00000",
                                                          "payroll-2026-11-E00001"]
    assert summary.failed[-1].external_id == "payroll-2026-11-E00049"  # row order
    # The amounts are those of every item, not of the 50 held: n % 900 + n % 100 / 100.
    eur = {t.currency: t for t in summary.totals}["EUR"]
    amounts = {n: Decimal(100 + n % 900) + Decimal(n % 100) / 100 for n in range(3_000)}
    assert eur.failed == sum(amounts[n] for n in range(400))
    assert eur.pending == sum(amounts[n] for n in range(400, 520))
    assert eur.review == sum(amounts[n] for n in range(520, 580))
    assert eur.sent == sum(amounts[n] for n in range(580, 3_000))
    assert eur.fees == Decimal("1.50") * 2_420 and eur.senders == 2_420
    assert {(r.source, r.destination): r.items for r in summary.rates} == {
        ("EUR", "KES"): sum(1 for n in range(580, 3_000) if n % 4),
        ("EUR", "PHP"): sum(1 for n in range(580, 3_000) if n % 4 == 0)}
    assert summary.digest == again.digest and len(summary.digest) == 64
    assert lines[0] == ("payroll-2026-11: 3000 items: 2420 settled, 120 pending, 400 failed, "
                        "60 unknown")
    assert sum(line.startswith("  failed ") for line in lines) == 50
    assert "  ... and 350 more failed: `runner report JOB --format csv` lists every item" \
        in lines
    assert "  ... and 10 more needing a person: `runner report JOB --format csv` lists " \
        "every item" in lines
    listed = summary.as_dict()
    assert (len(listed["failed"]), listed["listed"]["failed"], listed["items"]) == (
        50, 400, 3_000)
    rows = (tmp_path / "items.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 3_001 and rows[-1].startswith("payroll-2026-11-E02999,3001,settled,")
