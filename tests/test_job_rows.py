"""Rows: CSV (BOM, numbering, bad bytes), JSON Lines, inline rows, and the column checks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from job_files import CSV, REMITTANCE, replace, write

from runner.errors import JobErrors
from runner.job import InvalidItem, ValidItem, iter_items, load_job

JSONL_JOB = replace(REMITTANCE, "from: payroll.csv", "from: payroll.jsonl")
INLINE_JOB = replace(
    REMITTANCE,
    "  from: payroll.csv\n",
    "  rows:\n"
    "    - {employee_id: E1, net_pay: 12.50, msisdn: '+254700000001', first_name: Jo}\n"
    "    - employee_id: E2\n"
    "      net_pay: 7\n"
    "      msisdn: '+254700000002'\n"
    "      first_name: Al\n",
)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def results(job: str = REMITTANCE, files: dict[str, str | bytes] | None = None) -> list[str]:
    """Each row as "ROW ok EXTERNAL_ID AMOUNT" or its error messages."""
    write(Path("."), job, files)
    lines = []
    for result in iter_items(load_job("job.yaml", {})):
        if isinstance(result, ValidItem):
            amount = result.item.source.amount  # type: ignore[union-attr]
            lines.append(f"{result.row} ok {result.external_id} {amount}")
        else:
            lines.extend(str(error) for error in result.errors)
    return lines


def load_problems(job: str = REMITTANCE, files: dict[str, str | bytes] | None = None
                  ) -> list[str]:
    write(Path("."), job, files)
    with pytest.raises(JobErrors) as caught:
        load_job("job.yaml", {})
    return [str(error) for error in caught.value]


def test_csv_rows_are_numbered_as_in_a_spreadsheet() -> None:
    assert results() == [
        "2 ok payroll-2026-11-E1 12.50",
        "3 ok payroll-2026-11-E2 7",
    ]


def test_csv_with_a_byte_order_mark() -> None:
    bom = b"\xef\xbb\xbf" + CSV.encode()
    assert results(files={"payroll.csv": bom}) == [
        "2 ok payroll-2026-11-E1 12.50",
        "3 ok payroll-2026-11-E2 7",
    ]


def test_csv_blank_rows_are_skipped_but_counted_and_crlf_is_fine() -> None:
    csv = CSV.replace("\n", "\r\n").replace("E2,", "\r\n,,,\r\nE2,")
    assert results(files={"payroll.csv": csv}) == [
        "2 ok payroll-2026-11-E1 12.50",
        "5 ok payroll-2026-11-E2 7",
    ]


def test_a_quoted_cell_spanning_lines_is_one_row() -> None:
    # One row, though two lines: the next is row 3. (A name is one line: refused.)
    csv = CSV.replace("Jo\n", '"Jo\nJunior"\n')
    assert results(files={"payroll.csv": csv}) == [
        "payroll.csv:2: beneficiary.firstname: holds a line break (U+000A) at character 3; "
        "fields are one line of text",
        "3 ok payroll-2026-11-E2 7",
    ]


def test_csv_with_another_delimiter() -> None:
    job = replace(REMITTANCE, "from: payroll.csv", "from: payroll.csv\n  delimiter: ';'")
    csv = CSV.replace(",", ";").replace("12.50", '"12.50"')
    assert results(job, {"payroll.csv": csv}) == [
        "2 ok payroll-2026-11-E1 12.50",
        "3 ok payroll-2026-11-E2 7",
    ]


def test_missing_csv() -> None:
    assert load_problems(files={}) == ["job.yaml:13: items.from: payroll.csv: no such file"]


def test_rows_path_is_relative_to_the_job_file(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    write(tmp_path / "jobs")
    job = load_job("jobs/job.yaml", {})
    assert job.rows_path == Path("jobs/payroll.csv")
    assert [r.file for r in iter_items(job)] == ["jobs/payroll.csv", "jobs/payroll.csv"]


def test_a_rows_file_is_a_regular_file_under_the_jobs_folder_or_items_root(
        tmp_path: Path) -> None:
    outside = tmp_path / "exports"
    outside.mkdir()
    (outside / "payroll.csv").write_text(CSV)
    (tmp_path / "jobs").mkdir()
    jobs = tmp_path / "jobs"

    def problems(source: str, root: str | None = None) -> list[str]:
        more = f"\n  root: {root}" if root else ""
        write(jobs, replace(REMITTANCE, "from: payroll.csv", f"from: {source}{more}"), {})
        try:
            job = load_job("jobs/job.yaml", {})
        except JobErrors as refused:
            return [str(error) for error in refused]
        return [f"{r.row} ok" for r in iter_items(job)]

    under = "where the job's rows files are read from (items.root names another folder)"
    assert problems("../exports/payroll.csv") == [
        f"jobs/job.yaml:13: items.from: jobs/../exports/payroll.csv: outside the job file's "
        f"folder, {under}"]
    assert problems(str(outside / "payroll.csv")) == [
        f"jobs/job.yaml:13: items.from: {outside / 'payroll.csv'}: outside the job file's "
        f"folder, {under}"]
    # items.root names the folder: relative to the job file, or absolute.
    assert problems("../exports/payroll.csv", "../exports") == ["2 ok", "3 ok"]
    assert problems(str(outside / "payroll.csv"), str(outside)) == ["2 ok", "3 ok"]
    # A link is judged by what it points at: inside, read; outside, refused.
    (jobs / "current.csv").symlink_to(jobs / "payroll.csv")
    (jobs / "payroll.csv").write_text(CSV)
    assert problems("current.csv") == ["2 ok", "3 ok"]
    (jobs / "exported.csv").symlink_to(outside / "payroll.csv")
    assert problems("exported.csv") == [
        f"jobs/job.yaml:13: items.from: jobs/exported.csv: outside the job file's folder, "
        f"{under}"]
    # The system's special files, whatever the root; a FIFO; a folder.
    (jobs / "env.csv").symlink_to("/proc/self/environ")
    assert problems("env.csv", "/") == [
        "jobs/job.yaml:13: items.from: jobs/env.csv: a special file of the system (proc); a "
        "job reads regular files only"]
    assert problems("null.csv", "/dev") == [
        f"jobs/job.yaml:13: items.from: jobs/null.csv: outside items.root /dev, {under}"]
    assert problems("/dev/null\n  format: csv", "/") == [
        "jobs/job.yaml:13: items.from: /dev/null: a special file of the system (dev); a job "
        "reads regular files only"]
    os.mkfifo(jobs / "fifo.csv")
    assert problems("fifo.csv") == [
        "jobs/job.yaml:13: items.from: jobs/fifo.csv: not a regular file (a FIFO)"]
    (jobs / "folder.csv").mkdir()
    assert problems("folder.csv") == [
        "jobs/job.yaml:13: items.from: jobs/folder.csv: not a regular file (a folder)"]


def test_a_first_line_that_is_no_header_is_never_quoted() -> None:
    secret = "S3cr3t-token-value"
    for first, why in ((f"RUNNER_API_SECRET={secret},net_pay", "column 1 holds an ="),
                       (f"{secret}\x00PGPASSWORD,x", "column 1 holds a NUL (U+0000) at "
                                                       "character 19"),
                       (f"{secret}\u202e,x", "column 1 holds a bidirectional control (U+202E) "
                                               "at character 19"),
                       ("x" * 101 + f",{secret}", "column 1 is 101 characters long"),
                       (f'"{secret}', "column 1 holds a line break (U+000A) at character "
                                      "19")):
        found = load_problems(files={"payroll.csv": first + "\nE1,12.50\n"})
        assert secret not in "".join(found)
        assert found == [f"payroll.csv:1: row 1 is not a header: {why}; a header names each "
                         "column on one line, in at most 100 characters"]


def test_a_column_the_template_names_but_the_csv_lacks() -> None:
    csv = CSV.replace("net_pay", "net pay")
    job = replace(REMITTANCE, "firstname: \"{{ row.first_name }}\"",
                  "firstname: \"{{ row['prenom'] }}\"")
    assert load_problems(job, {"payroll.csv": csv}) == [
        "job.yaml:16: items.template.source.amount: column 'net_pay' is not in payroll.csv; "
        "did you mean 'net pay'?",
        "job.yaml:19: items.template.beneficiary.firstname: column 'prenom' is not in "
        "payroll.csv; its columns are: employee_id, net pay, msisdn, first_name",
    ]


def test_non_utf8_csv_names_the_row_and_goes_on() -> None:
    csv = CSV.encode().replace(b"Al", b"\xc0l") + b"E3,5,+254700000003,Ed\n"
    assert results(files={"payroll.csv": csv}) == [
        "2 ok payroll-2026-11-E1 12.50",
        "payroll.csv:3: not UTF-8 text (byte 0xC0 at byte 20 of the line); save the file as "
        "UTF-8",
        "4 ok payroll-2026-11-E3 5",
    ]


def test_non_utf8_csv_header() -> None:
    csv = CSV.encode().replace(b"first_name", b"pr\xe9nom")
    assert load_problems(files={"payroll.csv": csv}) == [
        "payroll.csv:1: not UTF-8 text (byte 0xE9 at byte 30 of the line); save the file as "
        "UTF-8"
    ]


def test_empty_csv() -> None:
    assert load_problems(files={"payroll.csv": ""}) == [
        "payroll.csv: the file is empty; its first row names the columns"
    ]


def test_csv_header_problems() -> None:
    assert load_problems(files={"payroll.csv": "a,,b\n"}) == [
        "payroll.csv:1: column 2 has no name"
    ]
    assert load_problems(files={"payroll.csv": "a,b,a\n"}) == [
        "payroll.csv:1: column 'a' is named twice (columns 1 and 3)"
    ]


def test_a_row_with_the_wrong_number_of_cells() -> None:
    csv = CSV + "E3,5\n"
    assert results(files={"payroll.csv": csv})[2:] == [
        "payroll.csv:4: the row has 2 cells, the header 4"
    ]


def test_json_lines_rows_are_numbered_by_line() -> None:
    jsonl = (
        '{"employee_id": "E1", "net_pay": 12.50, "msisdn": "+254700000001", '
        '"first_name": "Jo"}\n'
        "\n"
        '{"employee_id": "E2", "net_pay": "0.1", "msisdn": "+254700000002", '
        '"first_name": "Al"}\n'
        "[1, 2]\n"
        '{"employee_id": "E4", "net_pay": 1\n'
        '{"employee_id": "E5", "net_pay": 1}\n'
    )
    assert results(JSONL_JOB, {"payroll.jsonl": jsonl}) == [
        "1 ok payroll-2026-11-E1 12.50",
        "3 ok payroll-2026-11-E2 0.1",
        "payroll.jsonl:4: a row must be a JSON object ({...})",
        "payroll.jsonl:5: invalid JSON at column 35: Expecting ',' delimiter",
        "payroll.jsonl:6: credit_party_identifier.msisdn: column 'msisdn' is missing from "
        "this row",
        "payroll.jsonl:6: beneficiary.firstname: column 'first_name' is missing from this row",
    ]


def test_json_lines_numbers_are_exact_decimals() -> None:
    # 17 significant digits: a binary float would make it 1000000000000000.
    jsonl = ('{"employee_id": "E1", "net_pay": 999999999999999.99, "msisdn": "1", '
             '"first_name": "Jo"}\n')
    write(Path("."), JSONL_JOB, {"payroll.jsonl": jsonl})
    [result] = iter_items(load_job("job.yaml", {}))
    assert isinstance(result, ValidItem)
    assert result.values["net_pay"] == Decimal("999999999999999.99")
    assert result.item.source.amount == Decimal("999999999999999.99")  # type: ignore[union-attr]


def test_json_lines_with_a_bom_and_bad_bytes() -> None:
    good = b'{"employee_id": "E1", "net_pay": 1, "msisdn": "1", "first_name": "Jo"}\n'
    jsonl = b"\xef\xbb\xbf" + good + good.replace(b"Jo", b"J\xff").replace(b"E1", b"E2")
    assert results(JSONL_JOB, {"payroll.jsonl": jsonl}) == [
        "1 ok payroll-2026-11-E1 1",
        "payroll.jsonl:2: not UTF-8 text (byte 0xFF at byte 68 of the line); save the file as "
        "UTF-8",
    ]


def test_inline_rows_are_numbered_by_their_line_in_the_job_file() -> None:
    assert results(INLINE_JOB) == [
        "14 ok payroll-2026-11-E1 12.50",
        "15 ok payroll-2026-11-E2 7",
    ]


def test_inline_row_errors_name_the_job_file() -> None:
    job = replace(INLINE_JOB, "net_pay: 7", "net_pay: -7")
    assert results(job)[1:] == ["job.yaml:15: source.amount: must be greater than 0, got -7"]


def test_rows_stream_one_at_a_time() -> None:
    csv = CSV + "".join(f"E{n},1,+2547{n:08d},X\n" for n in range(3, 1000))
    write(Path("."), REMITTANCE, {"payroll.csv": csv})
    stream = iter_items(load_job("job.yaml", {}))
    assert isinstance(stream, Iterator)
    first = next(stream)
    assert isinstance(first, ValidItem) and first.row == 2
    assert sum(1 for _ in stream) == 998


def test_the_rows_file_vanishing_during_a_run() -> None:
    write(Path("."))
    job = load_job("job.yaml", {})
    Path("payroll.csv").unlink()
    with pytest.raises(JobErrors) as caught:
        list(iter_items(job))
    assert str(caught.value) == "payroll.csv: no such file"


def test_invalid_items_carry_their_row_and_external_id() -> None:
    write(Path("."), REMITTANCE, {"payroll.csv": CSV.replace("12.50", "twelve")})
    first, second = iter_items(load_job("job.yaml", {}))
    assert isinstance(first, InvalidItem) and not first.ok
    assert (first.file, first.row, first.external_id) == ("payroll.csv", 2, "payroll-2026-11-E1")
    assert [str(e) for e in first.errors] == [
        "payroll.csv:2: source.amount: not a decimal amount: 'twelve'"
    ]
    assert second.ok
