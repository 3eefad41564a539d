"""`runner report` in every format, to stdout and to a file, over the state a real run left;
the job's own templates (and the repository's examples); broken templates stop a run before
any money moves."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import simplejson
from conftest import Admin
from engine_support import err_lines
from summary_support import HOSTILE, NAME, SETTLED, cli, reports, run, start_sandbox, write_job

from runner.job import load_job
from runner.sandbox import RunningSandbox
from runner.summary import check_summary, items_csv
from runner.summary.model import Summary

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return start_sandbox(sandbox_factory)


@pytest.fixture
def ran(sandbox: RunningSandbox, tmp_path: Path) -> tuple[Path, Path]:
    """(job, state) after a run: 2 paid, 2 failed."""
    job, state = write_job(tmp_path, sandbox), tmp_path / "s.sqlite"
    assert run(job, state).exit_code == 1
    return job, state


def report(job: Path, state: Path, *more: str) -> str:
    result = cli("report", str(job), "--state", str(state), *more)
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    return result.stdout


def test_text(ran: tuple[Path, Path]) -> None:
    text = report(*ran)
    lines = text.splitlines()
    assert lines[:2] == [f"{NAME}: 2 paid (EUR 350.50), 2 failed (EUR 150.00)", ""]
    assert lines[2].startswith("Money moved in run 1: started ") and lines[2].endswith(
        "; exit code 1; 3 confirm call(s).")
    # Every run that moved money says who approved it, and what (a run of the job file:
    # the digest of its inputs).
    assert re.fullmatch(r"Planned by (\S+) on (\S+) at \S+Z; approved by \1 \(--yes\); "
                        r"applied by \1 on \2 at \S+Z \(plan sha256:[0-9a-f]{16}\)\.",
                        lines[3]), lines[3]
    assert lines[4:] == [
        "",
        "Money, per currency (planned = paid + failed + pending + held + to check):",
        "  EUR  planned 500.50 = paid 350.50 + failed 150.00 + pending 0.00; not paid 150.00",
        "  and 1 item(s) not priced by the provider yet",
        "",
        "Paid, per currency (settled items only):",
        "  EUR  sent 350.50  fees 3.00  cost 353.50",
        "  KES  received 49,158.00",
        "",
        "Rates (settled items, received / sent):",
        "  EUR -> KES  140.2511  (2 item(s): EUR 350.50 -> KES 49,158.00)",
        "",
        "Items: 4",
        "  paid                                          2",
        "  failed                                        2",
        "",
        "Failed (2):",
        f"  pay-E3 (row 4), {HOSTILE} Smith & Sons (msisdn *********9302), EUR 80.00: 30200 "
        "REJECTED-INVALID-BENEFICIARY",
        "  pay-E4 (row 5), Old Wallet (msisdn *********0005), EUR 70.00 (planned): 1003001 Payer "
        "is inactive in your account",
        "",
        "Full list of items: runner report JOB --format csv"]
    # The run's own report says the same, naming its CSV.
    written = reports(ran[1])
    assert written[".txt"].read_text(encoding="utf-8") == text.replace(
        "runner report JOB --format csv", str(written[".csv"].resolve()))


def test_html_escapes_every_value(ran: tuple[Path, Path]) -> None:
    html = report(*ran, "--format", "html")
    assert html.startswith("<!DOCTYPE html>")
    assert "<title>pay-2026-11: 2 paid (EUR 350.50), 2 failed (EUR 150.00)</title>" in html
    assert ("<tr><td>pay-E3</td><td align=\"right\">4</td><td>&lt;script&gt;alert(1)&lt;/script&gt;"
            " Smith &amp; Sons</td>") in html
    assert "<script>" not in html


def test_json(ran: tuple[Path, Path]) -> None:
    document = simplejson.loads(report(*ran, "--format", "json"), use_decimal=True)
    assert document["headline"] == f"{NAME}: 2 paid (EUR 350.50), 2 failed (EUR 150.00)"
    assert document["run"]["exit_code"] == 1 and document["run"]["state"] == "ended"
    assert {k: n for k, n in document["counts"].items() if n} == {"settled": 2, "failed": 2}
    # Money as exact text beside its currency, never a JSON number.
    assert document["totals"] == [
        {"currency": "EUR", "sent": "350.50", "fees": "3.00", "received": "0",
         "planned": "500.50", "failed": "150.00", "pending": "0", "held": "0",
         "to_check": "0", "not_paid": "150.00", "paid_twice": "0"},
        {"currency": "KES", "sent": "0", "fees": None, "received": "49158", "planned": "0",
         "failed": "0", "pending": "0", "held": "0", "to_check": "0", "not_paid": "0",
         "paid_twice": "0"}]
    assert document["rates"] == [
        {"source": "EUR", "destination": "KES", "sent": "350.50", "received": "49158",
         "items": 2, "rate": "140.2511"}]
    assert document["money_run"]["money_calls"] == 3 and document["runs_since"] == 0
    assert document["not_priced"] == 1
    assert [(f["external_id"], f["code"], f["message"]) for f in document["failed"]] == [
        ("pay-E3", "30200", "REJECTED-INVALID-BENEFICIARY"),
        ("pay-E4", "1003001", "Payer is inactive in your account")]
    assert document["items"] == 4 and document["csv"] is None


def test_csv(ran: tuple[Path, Path]) -> None:
    rows = list(csv.DictReader(io.StringIO(report(*ran, "--format", "csv"))))
    assert [(r["external_id"], r["row"], r["state"], r["beneficiary"], r["destination_amount"])
            for r in rows] == [
        ("pay-E1", "2", "settled", "Jo Doe", "14025.00"),
        ("pay-E2", "3", "settled", "'=1+2 Doe", "35133.00"),
        ("pay-E3", "4", "failed", f"{HOSTILE} Smith & Sons", "11220.00"),
        ("pay-E4", "5", "failed", "Old Wallet", "")]
    # The provider's status as code and name; times for the bank reconciliation (UTC).
    assert [(r["status_code"], r["status_name"]) for r in rows] == [
        ("70000", "COMPLETED"), ("70000", "COMPLETED"),
        ("30200", "REJECTED-INVALID-BENEFICIARY"), ("", "")]
    paid = rows[0]
    assert paid["created_at"] <= paid["confirmed_at"] <= paid["final_at"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", paid["confirmed_at"])
    assert (rows[3]["confirmed_at"], bool(rows[3]["final_at"])) == ("", True)  # at quotation


@pytest.mark.parametrize("memory", [items_csv.SPOOL_MEMORY, 64])  # the 2nd: on disk
def test_a_runs_csv_report_lists_the_items_as_the_state_holds_them(
        sandbox: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        memory: int) -> None:
    """The run writes its CSV as its summary reads the items (one read, not two): what
    `runner report --format csv` reads from the state afterwards, byte for byte."""
    monkeypatch.setattr(items_csv, "SPOOL_MEMORY", memory)
    job, state = write_job(tmp_path, sandbox), tmp_path / "s.sqlite"
    with monkeypatch.context() as once:
        once.setattr(Summary, "lines", lambda *_: pytest.fail("the items read again"))
        assert run(job, state).exit_code == 1
    written = reports(state)[".csv"].read_bytes()
    assert len(written.splitlines()) == 5  # the header and the 4 items
    later = tmp_path / "later.csv"
    report(job, state, "--format", "csv", "--output", str(later))
    assert written == later.read_bytes()


@pytest.mark.parametrize("fmt", ["text", "html", "json", "csv"])
def test_output_writes_the_same_as_stdout(ran: tuple[Path, Path], tmp_path: Path,
                                          fmt: str) -> None:
    target = tmp_path / "out" / f"report.{fmt}"
    assert report(*ran, "--format", fmt, "--output", str(target)) == ""
    printed = report(*ran, "--format", fmt)
    written = target.read_bytes().decode().replace("\r\n", "\n")  # as CliRunner shows it
    if fmt == "json":  # generated_at differs
        assert simplejson.loads(written)["counts"] == simplejson.loads(printed)["counts"]
    else:
        assert written == printed


def test_report_while_nothing_ran_yet(sandbox: RunningSandbox, tmp_path: Path) -> None:
    job = write_job(tmp_path, sandbox)
    result = cli("report", str(job), "--state", str(tmp_path / "none.sqlite"))
    assert result.exit_code == 2
    assert result.stderr == (f"error: {tmp_path / 'none.sqlite'}: no state database here "
                             "(nothing has run with this --state yet?)\n")


def test_the_jobs_own_templates(sandbox: RunningSandbox, tmp_path: Path) -> None:
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "pay.html.j2").write_text(
        '{% extends "runner/summary.html.j2" %}{% block footer %}<p>For {{ vars.period }}: '
        '{{ summary.failed|length }} to redo, by {{ "<Ops & Co>" }}</p>{% endblock %}')
    summary = "summary:\n  template: templates/pay.html.j2\n"
    job, state = write_job(tmp_path, sandbox, summary=summary), tmp_path / "s.sqlite"
    assert run(job, state).exit_code == 1
    html = report(job, state, "--format", "html")
    assert html.endswith("<p>For 2026-11: 2 to redo, by &lt;Ops &amp; Co&gt;</p></body>\n"
                         "</html>\n")
    headline = f"{NAME}: 2 paid (EUR 350.50), 2 failed (EUR 150.00)"
    assert report(job, state).startswith(headline + "\n")  # built-in text
    (folder / "pay.txt.j2").write_text("{{ summary.headline }} / {{ vars.period }} <&>\n")
    assert report(job, state) == headline + " / 2026-11 <&>\n"  # not escaped


@pytest.mark.parametrize(("template", "message"), [
    ("{{ summary.nope }}", "the summary template failed: pay.html.j2:1: UndefinedError: "
                           "'dict object' has no attribute 'nope'"),
    ("{% if %}", "the summary template failed: pay.html.j2:1: TemplateSyntaxError: "
                 "Expected an expression, got 'end of statement block'"),
    (None, "the summary template failed: no such template: pay.html.j2"),
    ("{{ ''.__class__ }}", "the summary template failed: pay.html.j2:1: SecurityError: "
                           "access to attribute '__class__' of 'str' object is unsafe."),
])
def test_a_broken_template_stops_the_run_before_money_moves(
        sandbox: RunningSandbox, tmp_path: Path, template: str | None, message: str) -> None:
    if template is not None:
        (tmp_path / "pay.html.j2").write_text(template)
    job = write_job(tmp_path, sandbox, SETTLED, summary="summary: {template: pay.html.j2}\n")
    result = run(job, tmp_path / "s.sqlite")
    assert result.exit_code == 2
    assert err_lines(result) == [f"{job}:21: summary.template: {message}",
                                          "1 problem(s); nothing was sent."]
    assert Admin(sandbox.url).requests()["counts"] == {}


def test_the_repository_example_templates(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    for name in ("RUNNER_BASE_URL", "RUNNER_API_KEY", "RUNNER_API_SECRET", "SMTP_HOST",
                 "RUNNER_SUMMARY_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    job = load_job(REPO / "jobs" / "payroll.yaml")
    assert job.summary is not None and job.summary.email is not None
    assert job.summary.email.send == "never"  # runnable as it is, with no mail server
    templates = check_summary(job)
    assert (templates.text, templates.html) == ("summary.txt.j2", "summary.html.j2")
    from runner.summary import Summary

    empty = Summary(job.name, None, [], [], {})
    assert "Payroll period 2026-11." in templates.text_of(empty)
    assert "<p>Payroll period 2026-11." in templates.html_of(empty)


def test_a_template_failing_only_on_real_items_costs_the_summary_only(
        sandbox: RunningSandbox, tmp_path: Path) -> None:
    (tmp_path / "pay.html.j2").write_text("{% for i in summary.items %}{{ i.nope }}"
                                          "{% endfor %}")
    job = write_job(tmp_path, sandbox, SETTLED, summary="summary: {template: pay.html.j2}\n")
    state = tmp_path / "s.sqlite"
    result = run(job, state)
    assert result.exit_code == 3  # the payments went well; the summary did not
    assert err_lines(result)[-1] == (
        "error: the summary: the summary template failed: pay.html.j2:1: UndefinedError: "
        "'dict object' has no attribute 'nope'")
    [written] = (tmp_path / "reports").iterdir()  # the CSV needs no template
    assert written.suffix == ".csv" and len(written.read_text().splitlines()) == 3
    assert cli("status", str(job), "--state", str(state)).stdout.splitlines()[0] == \
        f"{NAME}: 2 items: 2 settled"


def test_report_email_needs_an_email_section(ran: tuple[Path, Path]) -> None:
    result = cli("report", str(ran[0]), "--state", str(ran[1]), "--email")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"Error: {ran[0]} has no summary.email to send with"


def test_items_refused_as_another_jobs(ran: tuple[Path, Path], tmp_path: Path) -> None:
    job, state = ran
    other = job.with_name("other.yaml")
    other.write_text(job.read_text().replace(f"name: {NAME}", "name: pay-again"))
    assert run(other, state).exit_code == 1
    [txt] = (tmp_path / "reports").glob("pay-again-*.txt")
    text = txt.read_text(encoding="utf-8")
    assert text.startswith("pay-again: 0 paid, 4 refused\n")
    assert ("Failed (0, and 4 refused):\n"
            "  pay-E1: refused: row 2: already handled by job pay-2026-11; not paid again\n"
            ) in text
    # Later, from the state alone, the run's count remains (the list was the run's own).
    later = simplejson.loads(report(other, state, "--format", "json"))
    assert (later["headline"], later["refused"]) == ("pay-again: 0 paid, 4 refused", [])


def test_validate_checks_the_summary_templates_too(sandbox: RunningSandbox,
                                                   tmp_path: Path) -> None:
    job = write_job(tmp_path, sandbox, SETTLED, summary="summary: {template: gone.txt.j2}\n")
    result = cli("validate", str(job), "--state", str(tmp_path / "s.sqlite"))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        f"{job}:21: summary.template: the summary template failed: no such template: "
        "gone.txt.j2")
