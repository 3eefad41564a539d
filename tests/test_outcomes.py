"""Nobody left unpaid in silence, end to end against a loopback sandbox: a row changed after
its item was paid, and an item the provider refused while the plan was quoted, are listed
by name in every view of the batch (the run's closing lines, status, the summary, the
CSV) and make the commands exit 1. The provider's own records are the judge."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from conftest import Admin
from engine_support import (
    HEADER,
    ROWS,
    cli,
    confirmed,
    created,
    err_lines,
    eur,
    out_lines,
    posts,
    quotations,
    write_job,
)

from runner.sandbox import RunningSandbox

JOB = "pay-2026-11"
NEW_NAME = ("  a new batch needs a new `name` in its job file: the same name is the same "
            "batch, whose items are paid once")


def lines_of(*args: str) -> tuple[int, list[str], list[str]]:
    result = cli(*args)
    return result.exit_code, out_lines(result), err_lines(result)


def csv_rows(job: Path, state: Path) -> dict[str, dict[str, str]]:
    result = cli("report", str(job), "--state", str(state), "--format", "csv")
    return {r["external_id"]: r for r in csv.DictReader(io.StringIO(result.stdout))}


def changed(external_id: str, row: int, amount: str) -> str:
    return (f"  changed {external_id} (row {row}), Jo Doe (EUR {amount} paid): its row "
            f"changed after it was paid: the new request is not paid; a new batch needs a "
            f"new `name` in its job file (the same name is the same batch)")


def test_a_job_run_again_with_changed_amounts_names_who_is_left_unpaid(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb)
    assert lines_of("run", str(job), "--state", str(state), "--yes")[0] == 0
    # Next month under the same name: b and c earn more, d is new.
    (tmp_path / "rows.csv").write_text(HEADER + ROWS.replace("b,1,20.00", "b,1,25.00")
                                       .replace("c,1,30.00", "c,1,35.00")
                                       + "d,1,40.00,+254700000004\n")
    plan = lines_of("plan", str(job), "--state", str(state))[1]
    assert [line for line in plan if "changed since" in line or "not paid again" in line] == [
        "    pay-b (row 3), Jo Doe: changed since it was paid: not paid again",
        "    pay-c (row 4), Jo Doe: changed since it was paid: not paid again",
        "2 row(s) ask another payment than the one made or on its way: not paid again; a new "
        "batch needs a new `name` in its job file (the same name is the same batch)"]
    closing = [f"{JOB}: 4 items: 2 settled, 2 changed", "  EUR: sent 100.00, fees 6.00",
               changed("pay-b", 3, "20.00"), changed("pay-c", 4, "30.00"), NEW_NAME]
    assert lines_of("run", str(job), "--state", str(state), "--yes") == (1, closing, [])
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1, "pay-d": 1}
    assert lines_of("status", str(job), "--state", str(state)) == (1, closing, [])
    report = json.loads(cli("report", str(job), "--state", str(state), "--format",
                            "json").stdout)
    assert (report["counts"]["changed"], report["counts"]["settled"]) == (2, 2)
    assert report["headline"] == (f"{JOB}: 4 paid (EUR 100.00), 2 changed after being paid or "
                                  f"sent (not paid again)")
    assert [(i["external_id"], i["beneficiary"], i["outcome"]) for i in report["changed"]] == [
        ("pay-b", "Jo Doe", "settled"), ("pay-c", "Jo Doe", "settled")]
    rows = csv_rows(job, state)
    assert {e: r["state"] for e, r in rows.items()} == {
        "pay-a": "settled", "pay-b": "changed", "pay-c": "changed", "pay-d": "settled"}
    assert rows["pay-b"]["check"].startswith("its row changed after it was paid")
    summary = max((tmp_path / "reports").glob("*.txt"), key=lambda f: f.stat().st_mtime_ns
                  ).read_text()
    assert "Changed after being paid or sent: not paid again (2):\n  pay-b (row 3), Jo Doe " \
           "(msisdn *********0002), EUR 20.00: COMPLETED\n" in summary
    # b's row asks what was paid again: only c is left unpaid.
    (tmp_path / "rows.csv").write_text(HEADER + ROWS.replace("c,1,30.00", "c,1,35.00")
                                       + "d,1,40.00,+254700000004\n")
    assert lines_of("run", str(job), "--state", str(state), "--yes") == (1, [
        f"{JOB}: 4 items: 3 settled, 1 changed", "  EUR: sent 100.00, fees 6.00",
        changed("pay-c", 4, "30.00"), NEW_NAME], [])
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1, "pay-d": 1}


def test_an_item_refused_when_the_plan_was_quoted_is_listed_by_the_run_that_applies_it(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, ROWS + "x,13,15.00,+254700000005\n")  # payer 13: inactive
    plan = tmp_path / "pay.plan.json"
    code, out, err = lines_of("plan", str(job), "--state", str(state), "--quote", "-o",
                              str(plan))
    refusal = "1003001 Payer is inactive in your account"
    assert code == 0, (out, err)
    assert [line for line in out if "pay-x" in line] == [
        f"    pay-x (row 5): {refusal}; not paid"]
    [x] = [i for i in json.loads(plan.read_text())["items"] if i["external_id"] == "pay-x"]
    assert (x["action"], x["code"], x["why"]) == ("quote_refused", "1003001",
                                                   "Payer is inactive in your account")
    failed = f"  failed pay-x (row 5): {refusal}"
    code, out, _ = lines_of("apply", str(plan), "--state", str(state), "--yes")
    assert (code, out) == (1, [f"{JOB}: 4 items: 3 settled, 1 failed",
                               "  EUR: sent 60.00, fees 4.50", failed])
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    assert lines_of("status", str(job), "--state", str(state))[:2] == (1, out)
    report = json.loads(cli("report", str(job), "--state", str(state), "--format",
                            "json").stdout)
    assert [(i["external_id"], i["code"], i["message"]) for i in report["failed"]] == [
        ("pay-x", "1003001", "Payer is inactive in your account")]
    row = csv_rows(job, state)["pay-x"]
    assert (row["state"], row["code"], row["message"], row["beneficiary"]) == (
        "failed", "1003001", "Payer is inactive in your account", "Jo Doe")
    # A later run asks the provider again, and lists it still.
    assert lines_of("run", str(job), "--state", str(state), "--yes")[:2] == (1, out)


def test_a_row_changed_while_its_payment_is_on_its_way_is_not_sent_and_is_named(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, confirm=False)
    assert lines_of("run", str(job), "--state", str(state), "--yes")[0] == 0  # all created
    (tmp_path / "rows.csv").write_text(HEADER + ROWS.replace("b,1,20.00", "b,1,25.00"))
    closing = [f"{JOB}: 3 items: 2 awaiting confirm, 1 changed",
               "  changed pay-b (row 3), Jo Doe (EUR 20.00 sent): its row changed after it "
               "was on its way (created): the new request is not paid; a new batch needs a "
               "new `name` in its job file (the same name is the same batch)", NEW_NAME]
    assert lines_of("run", str(job), "--state", str(state), "--yes") == (1, closing, [])
    assert lines_of("confirm", str(job), "--state", str(state), "--yes")[0] == 1
    assert confirmed(sb) == {"pay-a": 1, "pay-c": 1}  # b's old request is never confirmed
    assert lines_of("status", str(job), "--state", str(state))[1][0] == (
        f"{JOB}: 3 items: 2 settled, 1 changed")


# ---------------------------------------------------------------- funds first, fees included
def test_a_balance_that_covers_the_amounts_but_not_the_fees_confirms_nobody(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    # Payer 1 charges 1.50 a transfer, payer 3 (UGX) 1.50 and 0.5%: fees 3.00 + 5.00.
    rows = ("a,1,10.00,+254700000001\nb,1,20.00,+254700000002\n"
            "c,3,100.00,+256700000003\nd,3,300.00,+256700000004\n")
    job = write_job(tmp_path, sb, rows, concurrency=1)
    job.write_text(job.read_text().replace(
        "destination: {currency: KES}",
        "destination: {currency: \"{{ 'UGX' if row.payer == '3' else 'KES' }}\"}"))
    adm.balance("EUR", "435.00", "0")  # the amounts (430.00), not the fees
    # Each payer's fee line, from its smallest and largest amount, with 2% and a cent an
    # item: 3.00 + 0.06 + 0.02 and 5.00 + 0.10 + 0.02.
    short = ("EUR 438.20 needed (8.20 of fees, 8.20 of them estimated), 435.00 available")
    stopped = [f"{JOB}: 0 items: none yet",
               f"  stopped: funds short: {short}; run 1 confirmed nothing"]
    assert lines_of("run", str(job), "--state", str(state), "--yes") == (4, stopped, [
        f"{short}: nothing was sent but 4 dryrun- quotation(s) that estimated the fees "
        f"(--allow-partial pays what the balance covers)"])
    assert posts(adm) == {"POST": 4, "POST quotations": 4}  # the samples, nothing else
    assert [q.split("-", 3)[3] for q in quotations(sb)] == ["pay-a", "pay-b", "pay-c", "pay-d"]
    assert all(q.startswith("dryrun-fees-") for q in quotations(sb))
    assert confirmed(sb) == {} and eur(sb)["balance"] == Decimal("435.00")
    assert lines_of("status", str(job), "--state", str(state)) == (4, stopped, [])
    plan = lines_of("plan", str(job), "--state", str(state))
    assert plan[0] == 4 and plan[1][-2:] == [
        "  EUR: 4 item(s), 430.00 + fees 8.20 = 438.20 needed (8.20 of the fees estimated "
        "from 4 dryrun- quotation(s), with a 2% margin); 435.00 available: SHORT by 3.20",
        f"nothing would be sent, the balance is short: {short}"]
    # Enough for the estimate: every item is paid once, and what it cost is 438.00.
    adm.balance("EUR", "440.00", "0")
    assert lines_of("run", str(job), "--state", str(state), "--yes")[:2] == (0, [
        f"{JOB}: 4 items: 4 settled", "  EUR: sent 430.00, fees 8.00"])
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1, "pay-d": 1}
    assert eur(sb)["balance"] == Decimal("2.00")
    assert lines_of("status", str(job), "--state", str(state))[0] == 0


# ---------------------------------------------------------------- reversals and retries
def test_a_reversal_found_by_reconcile_is_paid_again_and_a_double_payment_is_told(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    # x is refused for good (barred: 30201), y for the moment (payer unavailable: 90400).
    rows = ROWS.replace("c,1,30.00,+254700000003\n", "x,1,5.00,+254700999301\n"
                        "y,1,7.00,+254700999309\n")
    job = write_job(tmp_path, sb, rows)
    assert lines_of("run", str(job), "--state", str(state), "--yes")[0] == 1
    # The provider's customer care reverses pay-b after it settled: only reconcile sees it.
    assert adm.api.post("/customer-care/transactions/pay-b",
                        {"status": "80000"}).status_code == 200
    assert lines_of("status", str(job), "--state", str(state))[1][0] == \
        f"{JOB}: 4 items: 2 settled, 2 failed"
    code, out, _ = lines_of("reconcile", str(job), "--state", str(state))
    assert code == 1 and out[-1] == ("  recorded in the state: pay-b (row 3) reversed after "
                                     "it settled: 80000 REVERSED")
    failed = ["  failed pay-b (row 3): 80000 REVERSED",
              "  failed pay-x (row 4): 30201 REJECTED-BARRED-BENEFICIARY",
              "  failed pay-y (row 5): 90400 DECLINED-PAYER-CURRENTLY-UNAVAILABLE"]
    assert lines_of("status", str(job), "--state", str(state)) == (1, [
        f"{JOB}: 4 items: 1 settled, 3 failed", "  EUR: sent 10.00, fees 1.50", *failed], [])
    report = json.loads(cli("report", str(job), "--state", str(state), "--format",
                            "json").stdout)
    assert report["failed"][0]["check"] == (
        "reversed after it was paid: the money came back; fix its row, then `runner run "
        "--retry-failed` pays it again under a new external_id")
    assert csv_rows(job, state)["pay-b"]["status_code"] == "80000"
    # --retry-failed sends again what may pass unchanged (y), not what was refused for good
    # and is unchanged (b reversed, x barred): the plan says so.
    plan = lines_of("plan", str(job), "--state", str(state), "--retry-failed")[1]
    assert [line for line in plan if line.startswith("    pay-")] == [
        "    pay-y (row 5) as pay-y-f2: 90400 DECLINED-PAYER-CURRENTLY-UNAVAILABLE; unchanged "
        "since it failed",
        "    pay-b (row 3): 80000 REVERSED; unchanged since it failed: not sent again "
        "(--include-unchanged sends it as pay-b-f2)",
        "    pay-x (row 4): 30201 REJECTED-BARRED-BENEFICIARY; unchanged since it failed: not "
        "sent again (--include-unchanged sends it as pay-x-f2)"]
    assert lines_of("run", str(job), "--state", str(state), "--yes", "--retry-failed")[0] == 1
    # b's row fixed (a new account): paid again under pay-b-f2 (and y tried again, -f3).
    (tmp_path / "rows.csv").write_text(HEADER + rows.replace("+254700000002", "+254700000022"))
    assert lines_of("run", str(job), "--state", str(state), "--yes", "--retry-failed")[1][:2] \
        == [f"{JOB}: 4 items: 2 settled, 2 failed", "  EUR: sent 30.00, fees 3.00"]
    # --include-unchanged sends x again too (refused again, as it is), and y (-f4).
    assert lines_of("run", str(job), "--state", str(state), "--yes", "--retry-failed",
                    "--include-unchanged")[0] == 1
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-b-f2": 1, "pay-y": 1, "pay-y-f2": 1,
                             "pay-y-f3": 1, "pay-y-f4": 1}
    assert sorted(e for e in created(sb) if e.startswith("pay-x")) == ["pay-x", "pay-x-f2"]
    # The provider's customer care puts the reversed pay-b back to completed: paid twice.
    assert adm.api.post("/customer-care/transactions/pay-b",
                        {"status": "70000"}).status_code == 200
    code, out, _ = lines_of("reconcile", str(job), "--state", str(state))
    assert code == 1 and out[-1] == (
        "  recorded in the state: pay-b (row 3): its earlier attempt pay-b was paid after all "
        "(EUR 20.00), beside pay-b-f2")
    twice = [f"{JOB}: 4 items: 1 settled, 2 failed, 1 paid twice",
             "  EUR: sent 50.00, fees 4.50, paid twice 20.00",
             "  failed pay-x (row 4): 30201 REJECTED-BARRED-BENEFICIARY",
             "  failed pay-y (row 5): 90400 DECLINED-PAYER-CURRENTLY-UNAVAILABLE",
             "  paid twice pay-b (row 3), Jo Doe (EUR 20.00 paid): paid twice: the provider "
             "shows the earlier attempt pay-b (EUR 20.00, status 70000) paid after all, beside "
             "pay-b-f2: ask the beneficiary, or the provider's customer care, for one payment "
             "back"]
    assert lines_of("status", str(job), "--state", str(state)) == (1, twice, [])
    report = json.loads(cli("report", str(job), "--state", str(state), "--format",
                            "json").stdout, parse_float=Decimal)
    assert report["headline"] == (f"{JOB}: 2 paid (EUR 30.00), 2 failed (EUR 12.00), 1 paid "
                                  f"twice (EUR 20.00)")
    assert (report["totals"][0]["sent"], report["totals"][0]["paid_twice"]) == (
        "50.00", "20.00")
    assert csv_rows(job, state)["pay-b"]["state"] == "paid_twice"
    # Recorded once: a second reconcile agrees with the state, which still tells it, and
    # its totals count the money paid twice.
    assert lines_of("reconcile", str(job), "--state", str(state))[:2] == (0, [
        f"{JOB} (remittance): 4 item(s) compared with the provider's records: all agree",
        "  EUR: 2 settled item(s) and 1 paid twice: 54.50 in the state, 54.50 in the "
        "provider's records: agree"])
    assert lines_of("status", str(job), "--state", str(state)) == (1, twice, [])


def test_a_retry_after_a_fix_pays_the_fixed_item_in_that_very_run(
        sandbox_factory: Any, tmp_path: Path) -> None:
    """b is barred at creation (30201); its row fixed, `run --retry-failed` sends it again as
    pay-b-f2 and pays it in that run, also when the job waits for no final status
    (``wait_for_final: 0s``): every item it lists as sent again is sent."""
    sb = sandbox_factory(submit_delay=0, complete_delay=0)
    state = tmp_path / "s.sqlite"
    job = write_job(tmp_path, sb, ROWS.replace("+254700000002", "+254700999301"))
    job.write_text(job.read_text().replace("wait_for_final: 2s", "wait_for_final: 0s"))
    assert lines_of("run", str(job), "--state", str(state), "--yes")[0] == 1
    (tmp_path / "rows.csv").write_text(HEADER + ROWS)
    code, out, _ = lines_of("run", str(job), "--state", str(state), "--yes", "--retry-failed")
    assert code == 0, out
    assert confirmed(sb)["pay-b-f2"] == 1
    assert [e for e in created(sb) if e.startswith("pay-b")] == ["pay-b", "pay-b-f2"]
    assert lines_of("run", str(job), "--state", str(state), "--yes")[1][0] == \
        f"{JOB}: 3 items: 3 settled"
