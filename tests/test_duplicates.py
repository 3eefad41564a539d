"""Possible duplicates (rule 9 of docs/exactly-once.md): two items of one batch that pay the same
person the same amount, whatever their external_ids, end to end against a loopback sandbox.

The provider is the judge of who was paid: its confirmed transactions per beneficiary's
msisdn. The state, `runner status`, `runner plan` and the run's exit code must say the same.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from engine_support import cli, items, out_lines, run, transactions, write_job

from runner.engine.duplicates import content_of
from runner.job import ValidItem, iter_items, load_job
from runner.sandbox import RunningSandbox
from runner.state import open_state

NAME = "pay-2026-11"
WORDS = "the same beneficiary account or msisdn, amount and currency"
HOW = "not paid (allow_duplicate: yes on its row, or --allow-duplicates, pays it)"


def paid(sb: RunningSandbox) -> Counter[str]:
    """Confirmed transactions at the provider, per beneficiary's msisdn."""
    return Counter(t["credit_party_identifier"]["msisdn"].replace(" ", "")
                   for _, t, m in transactions(sb) if m.get("confirmed"))


def held(external_id: str, row: int, like: str, like_row: int, where: str) -> str:
    return (f"  needs a person {external_id} (row {row}): possible duplicate of {like} (row "
            f"{like_row}, {where}): {WORDS}; {HOW}")


def test_a_re_export_that_dropped_leading_zeros_pays_nobody_twice(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    """Employee ids 00123 and 00456 were paid; the spreadsheet, exported again, says 123 and
    456 (and has a new row). The re-exported rows are held, each named with the item it
    matches, in the plan, the run's lines and status; exit 1; nobody is paid twice. Then
    --allow-duplicates pays them, and the state records that run as allowing them."""
    first = write_job(tmp_path, sb, "00123,1,10.00,+254700000001\n"
                                    "00456,1,20.00,+254700000002\n")
    assert run(first, state).counts == {"settled": 2}
    job = write_job(tmp_path, sb, "123,1,10.00,+254 700 000 001\n"
                                  "456,1,20.0,+254700000002\n"
                                  "789,1,30.00,+254700000003\n")
    plan = cli("plan", str(job), "--state", str(state))
    assert plan.exit_code == 0
    assert [line for line in out_lines(plan) if "    pay-" in line] == [
        f"    pay-123 (row 2): possible duplicate of pay-00123 (row 2, paid): {WORDS}; {HOW}",
        f"    pay-456 (row 3): possible duplicate of pay-00456 (row 3, paid): {WORDS}; {HOW}"]
    assert "  held: possible duplicate: 2" in out_lines(plan)
    lines = [f"{NAME}: 5 items: 3 settled, 2 held", "  EUR: sent 60.00, fees 4.50",
             held("pay-123", 2, "pay-00123", 2, "paid"),
             held("pay-456", 3, "pay-00456", 3, "paid")]
    ran = cli("run", str(job), "--yes", "--state", str(state))
    assert (ran.exit_code, out_lines(ran)) == (1, lines)
    status = cli("status", str(job), "--state", str(state))
    assert (status.exit_code, out_lines(status)) == (1, lines)
    assert paid(sb) == {"+254700000001": 1, "+254700000002": 1, "+254700000003": 1}
    record = items(state)["pay-123"]
    assert (record["outcome"], record["step"], record["error_code"]) == (
        "held", "new", "duplicate")
    again = cli("run", str(job), "--yes", "--state", str(state))  # held still, nothing sent
    assert (again.exit_code, out_lines(again)) == (1, lines)
    assert sum(paid(sb).values()) == 3
    allowed = cli("run", str(job), "--yes", "--allow-duplicates", "--state", str(state))
    assert (allowed.exit_code, out_lines(allowed)[0]) == (0, f"{NAME}: 5 items: 5 settled")
    assert paid(sb) == {"+254700000001": 2, "+254700000002": 2, "+254700000003": 1}
    with open_state(state) as store:
        assert [r.allow_duplicates for r in store.runs(NAME)] == [False] * 3 + [True]


def test_a_duplicate_inside_one_batch_is_held_unless_its_row_allows_it(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    """Rows b and d pay what a pays (b with its amount written otherwise); d's row allows
    it; c pays another amount. b is held (the first is paid), d and c are paid; exit 1. A
    row's allow_duplicate must be a yes or a no."""
    job = write_job(tmp_path, sb)
    (tmp_path / "rows.csv").write_text(
        "id,payer,amount,msisdn,allow_duplicate\n"
        "a,1,10.00,+254700000001,\n"
        "b,1,10,+254700000001,no\n"
        "c,1,11.00,+254700000001,\n"
        "d,1,10.00,+254700000001,yes\n", encoding="utf-8")
    result = run(job, state)
    assert (result.exit_code, result.counts) == (1, {"settled": 3, "held": 1})
    assert items(state)["pay-b"]["error_message"] == (
        f"possible duplicate of pay-a (row 2, to pay in this run): {WORDS}; {HOW}")
    assert paid(sb) == {"+254700000001": 3}
    summary = json.loads(cli("report", str(job), "--state", str(state), "--format",
                             "json").stdout)
    assert [(i["external_id"], i["state"]) for i in summary["needs_person"]] == [
        ("pay-b", "held")]
    (tmp_path / "rows.csv").write_text("id,payer,amount,msisdn,allow_duplicate\n"
                                       "e,1,10.00,+254700000009,perhaps\n", encoding="utf-8")
    bad = cli("validate", str(job))
    assert bad.exit_code == 2
    assert "rows.csv:2: allow_duplicate: 'perhaps' is not a yes or a no" in bad.stdout


def test_what_makes_two_items_the_same_payment(tmp_path: Path) -> None:
    """The digest of a remittance is its beneficiary's identifiers (as a network reads
    them), its amount (as a number) and its currency: not its external_id, nor names."""
    write_job(tmp_path, "http://127.0.0.1:9", "a,1,10.00,+254700000001\n"
                                              "b,1,10,+254-700-000-001\n"
                                              "c,1,10.01,+254700000001\n"
                                              "d,1,10.00,+254700000002\n")
    job = load_job(tmp_path / "job.yaml", {})
    digests = [content_of(job, v) for v in iter_items(job) if isinstance(v, ValidItem)]
    assert digests[0] == digests[1]
    assert len({digests[0], digests[2], digests[3]}) == 3


def test_one_wallet_in_four_spellings_is_paid_once(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    """``+254700000001``, ``254700000001`` and ``00254700000001`` are one wallet (E.164): the
    first is paid, the two others held. The same number in fullwidth digits is refused at
    validation, naming the file, the row and the field: nothing is sent at all."""
    fullwidth = "+２５４７０００００００１"
    job = write_job(tmp_path, sb, "a,1,10.00,+254700000001\n"
                                  "b,1,10.00,254700000001\n"
                                  "c,1,10.00,00254700000001\n"
                                  f"d,1,10.00,{fullwidth}\n")
    refused = cli("validate", str(job))
    assert refused.exit_code == 2
    assert (f"{tmp_path / 'rows.csv'}:5: credit_party_identifier.msisdn: holds a digit "
            f"of another script (U+FF12) at character 2; account numbers, phone numbers and "
            f"codes are written with 0-9 and A-Z") in refused.output
    ran = cli("run", str(job), "--yes", "--state", str(state))
    assert ran.exit_code == 2
    assert transactions(sb) == []
    job = write_job(tmp_path, sb, "a,1,10.00,+254700000001\n"
                                  "b,1,10.00,254700000001\n"
                                  "c,1,10.00,00254 700 000 001\n")
    ran = cli("run", str(job), "--yes", "--state", str(state))
    assert ran.exit_code == 1
    assert out_lines(ran)[:3] == [f"{NAME}: 3 items: 1 settled, 2 held",
                                  "  EUR: sent 10.00, fees 1.50",
                                  held("pay-b", 3, "pay-a", 2, "to pay in this run")]
    assert paid(sb) == {"+254700000001": 1}


def test_a_re_export_that_dropped_zeros_and_plus_signs_pays_nobody_twice(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    """A spreadsheet re-saved the rows: ids lost their leading zeros, phone numbers their
    ``+``. Both people were paid; the re-saved rows are held, and nobody is paid twice."""
    first = write_job(tmp_path, sb, "00123,1,10.00,+254700000001\n"
                                    "00456,1,20.00,+254700000002\n")
    assert run(first, state).counts == {"settled": 2}
    job = write_job(tmp_path, sb, "123,1,10.00,254700000001\n"
                                  "456,1,20.00,254700000002\n")
    ran = cli("run", str(job), "--yes", "--state", str(state))
    assert ran.exit_code == 1
    assert out_lines(ran)[0] == f"{NAME}: 4 items: 2 settled, 2 held"
    assert paid(sb) == {"+254700000001": 1, "+254700000002": 1}
