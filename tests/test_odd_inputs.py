"""Odd inputs refused or made harmless before money moves: an amount in a second spelling
(``+10.00``), a rows file with a header and no rows (a payroll of nobody), and cells that a
spreadsheet would read as a formula in any CSV runner writes, their fullwidth forms too."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from engine_support import HEADER, cli, transactions, write_job

from runner.sandbox import RunningSandbox


def test_an_amount_with_a_plus_sign_is_refused_naming_its_row(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, "a,1,10.00,+254700000001\nb,1,+10.00,+254700000002\n")
    ran = cli("run", str(job), "--yes", "--state", str(state))
    assert ran.exit_code == 2
    assert (f"{tmp_path / 'rows.csv'}:3: source.amount: not a decimal amount: '+10.00'; "
            f"write it without a sign") in ran.output
    assert transactions(sb) == []


def test_a_rows_file_with_no_rows_is_refused_unless_the_job_expects_it(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, "")
    for command in (("validate", str(job)), ("run", str(job), "--yes", "--state", str(state))):
        refused = cli(*command)
        assert refused.exit_code == 2, refused.output
        assert (f"{tmp_path / 'rows.csv'}: no rows: nothing to pay; set items.allow_empty: "
                f"true where an empty batch is expected") in refused.output
    job.write_text(job.read_text().replace("  from: rows.csv", "  from: rows.csv\n"
                                                               "  allow_empty: true"))
    ran = cli("run", str(job), "--yes", "--state", str(state))
    assert ran.exit_code == 0, ran.output
    assert transactions(sb) == []


def test_every_csv_runner_writes_neutralises_formulas_in_any_form(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    """Beneficiaries named ``＝HYPERLINK(...)`` (fullwidth), `` =1+2`` (after a blank) and
    ``@SUM(1)``: the plan's CSV (`runner show --format csv`) and the run's report CSV both
    write them after a quote, which a spreadsheet shows as text."""
    job = write_job(tmp_path, sb, "")
    (tmp_path / "rows.csv").write_text(HEADER.replace("msisdn", "msisdn,first") +
                                       'a,1,10.00,+254700000001,＝HYPERLINK("x")\n'
                                       "b,1,11.00,+254700000002, =1+2\n"
                                       "c,1,12.00,+254700000003,@SUM(1)\n")
    job.write_text(job.read_text().replace("firstname: Jo", 'firstname: "{{ row.first }}"'))
    plan = tmp_path / "plan.json"
    assert cli("plan", str(job), "--state", str(state), "-o", str(plan)).exit_code == 0
    shown = cli("show", str(plan), "--format", "csv")
    assert shown.exit_code == 0, shown.output
    quoted = ["'＝HYPERLINK(\"x\") Doe", "' =1+2 Doe", "'@SUM(1) Doe"]
    assert [r["beneficiary"] for r in csv.DictReader(io.StringIO(shown.stdout))] == quoted
    assert cli("apply", str(plan), "--yes", "--state", str(state)).exit_code == 0
    report = cli("report", str(job), "--state", str(state), "--format", "csv")
    assert [r["beneficiary"] for r in csv.DictReader(io.StringIO(report.stdout))] == quoted
