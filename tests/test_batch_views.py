"""One read model of a batch: `runner run`'s closing lines, `runner status`, `runner report`
(every format) and the run's own counts say the same of the same batch, whatever state its
items are in: settled, failed, pending, unknown, refused (held by another job) and invalid.
Before, `status` left refused and invalid items out while `report` counted them."""

from __future__ import annotations

import re
from pathlib import Path

import simplejson
from collection_support import create_order
from collection_support import write_job as write_collection_job
from conftest import Admin
from engine_support import HEADER, cli, out_lines, run, write_job

from runner.sandbox import RunningSandbox

STATES = ("settled", "pending", "awaiting_confirm", "failed", "conflict", "unknown",
          "in_doubt")


def status_counts(job: Path, state: Path) -> dict[str, int]:
    """The counts `runner status` prints: its first line, then the refused and invalid
    lines."""
    result = cli("status", str(job), "--state", str(state))
    lines = out_lines(result)
    first = re.fullmatch(r"[\w.-]+: (\d+) items: (.*)", lines[0])
    assert first is not None, lines[0]
    counts = {}
    for part in first[2].split(", "):
        number, name = part.split(" ", 1)
        counts[name.replace(" ", "_")] = int(number)
    assert sum(counts.values()) == int(first[1])
    for line in lines[1:]:
        if m := re.fullmatch(r"  (refused|invalid): (\d+) item\(s\) .*", line):
            counts[m[1]] = int(m[2])
    # The exit code says the same: 1 with a problem, 5 with items on their way, else 0.
    problems = {"failed", "refused", "invalid", "conflict", "unknown", "in_doubt"}
    assert result.exit_code == (1 if problems & set(counts) else 5 if "pending" in counts
                                else 0), result.output
    return counts


def report_counts(job: Path, state: Path) -> dict[str, int]:
    result = cli("report", str(job), "--state", str(state), "--format", "json")
    assert result.exit_code == 0, result.output
    return {k: n for k, n in simplejson.loads(result.stdout)["counts"].items() if n}


def csv_counts(job: Path, state: Path) -> dict[str, int]:
    result = cli("report", str(job), "--state", str(state), "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()[1:]
    header = result.stdout.splitlines()[0].split(",")
    column = header.index("state")
    counts: dict[str, int] = {}
    for row in rows:
        value = row.split(",")[column]
        counts[value] = counts.get(value, 0) + 1
    return counts


def agree(job: Path, state: Path, expected: dict[str, int], ran: dict[str, int]) -> None:
    assert ran == expected  # the run's own counts
    assert status_counts(job, state) == expected
    assert report_counts(job, state) == expected
    # The CSV lists the items of the job's state (refused and invalid ones have none).
    assert csv_counts(job, state) == {k: n for k, n in expected.items() if k in STATES}


def test_remittances_settled_failed_pending_refused_and_invalid(
        sandbox: RunningSandbox, admin: Admin, tmp_path: Path) -> None:
    state = tmp_path / "s.sqlite"
    other = write_job(tmp_path, sandbox, "r,1,5.00,+254700000009\n", name="pay-other",
                      file="other.yaml", rows_file="other.csv")
    assert run(other, state).counts == {"pending": 1}
    rows = ("a,1,10.00,+254700000001\n"
            "b,1,20.00,+254700999301\n"  # rejected when the transaction is made
            "x,1,abc,+254700000002\n"  # invalid: not an amount
            "r,1,5.00,+254700000009\n")  # held by pay-other
    job = write_job(tmp_path, sandbox, rows)
    job.write_text(job.read_text().replace("wait_for_final: 2s",
                                           "wait_for_final: 0s\n  on_invalid: skip"))
    first = run(job, state)
    assert first.exit_code == 1
    admin.advance(500)  # a completes at the sandbox
    (tmp_path / "rows.csv").write_text(HEADER + rows + "c,1,30.00,+254700000003\n")
    last = run(job, state)
    expected = {"settled": 1, "failed": 1, "pending": 1, "refused": 1, "invalid": 1}
    agree(job, state, expected, last.counts)
    # `runner run` ends with the same lines `runner status` prints.
    again = cli("run", str(job), "--state", str(state), "--yes")
    assert again.exit_code == 1
    status = cli("status", str(job), "--state", str(state))
    assert out_lines(again)[0] == out_lines(status)[0] == \
        "pay-2026-11: 3 items: 1 settled, 1 pending, 1 failed"


def test_charges_settled_unknown_refused_and_invalid(
        sb: RunningSandbox, adm: Admin, tmp_path: Path) -> None:
    state = tmp_path / "s.sqlite"
    for order in ("o1", "o2", "o3", "o4"):
        create_order(sb, order, "50.00")
    template = {"payment_order_external_id": "{{ row.order }}",
                "requested": {"amount": "{{ row.amount }}", "currency": "EUR"}}

    def charge(ident: str, order: str, amount: str) -> dict[str, str]:
        return {"id": ident, "order": order, "amount": amount}

    other = write_collection_job(tmp_path, sb, "charge", [charge("r", "o4", "5.00")],
                                 template, name="col-other", file="other.yaml")
    assert run(other, state).counts == {"settled": 1}
    adm.faults({"operations": {"lost_next": 1}})
    rows = [charge("u", "o1", "20.00"),  # its answer is lost: unknown
            charge("a", "o2", "30.00"),
            charge("f", "o3", "99.00"),  # invalid: more than the order holds
            charge("x", "o3", "abc"),  # invalid: not an amount
            charge("r", "o4", "5.00")]  # held by col-other
    job = write_collection_job(tmp_path, sb, "charge", rows, template, concurrency=1,
                               run={"on_invalid": "skip"})
    result = run(job, state)
    expected = {"settled": 1, "unknown": 1, "refused": 1, "invalid": 2}
    agree(job, state, expected, result.counts)
