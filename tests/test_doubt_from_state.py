"""A money-moving call in doubt whose item's row was edited or removed since it was sent,
end to end against a loopback sandbox. A remittance's confirm is looked up by its
external_id alone (``Flow.doubt_settled_from_state``): the next run looks it up from the
state, follows the money it moved to its final status, pays nothing again, and every view
names the item as changed after it was paid. A payment order's lookup compares the order it
finds with the item: its row changed, it is left to a person, and nothing is looked up. Each
on a SQLite state and on a PostgreSQL one."""

from __future__ import annotations

import threading
from decimal import Decimal
from pathlib import Path

import pytest
from collection_support import order_counts
from collection_support import posts as posted
from conftest import Admin
from engine_support import (
    HEADER,
    cli,
    confirmed,
    err_lines,
    eur,
    items,
    out_lines,
    outcomes,
    run,
    write_job,
)
from test_kind_payment_order import job as order_job
from test_kind_payment_order import row as order_row

from runner.sandbox import RunningSandbox

JOB = "pay-2026-11"
ROWS = "a,1,10.00,+254700000001\nb,1,20.00,+254700000002\n"
NEW_NAME = ("  a new batch needs a new `name` in its job file: the same name is the same "
            "batch, whose items are paid once")


def lookups_of(sb: RunningSandbox, external_id: str) -> int:
    """The GETs of the item's transaction by its external_id the sandbox received."""
    return sum(1 for c in list(sb.state.faults.recent)
               if c["method"] == "GET" and c["path"].endswith(f"/ext-{external_id}"))


def lines(*args: str) -> tuple[int, list[str], list[str]]:
    result = cli(*args)
    return result.exit_code, out_lines(result), err_lines(result)


CHANGED = ("the new request is not paid; a new batch needs a new `name` in its job file (the "
           "same name is the same batch)")
# (the confirm's fault, the edit of a's row): the closing lines of the next run
CASES = {
    # The confirm moved a's money: settled, listed as changed after it was paid.
    ("lost", "amount edited"): [
        f"{JOB}: 2 items: 1 settled, 1 changed", "  EUR: sent 30.00, fees 3.00",
        f"  changed pay-a (row 2), Jo Doe (EUR 10.00 paid): its row changed after it was "
        f"paid: {CHANGED}", NEW_NAME],
    # A deleted row asks for nothing: a's payment is what it was, settled.
    ("lost", "row deleted"): [f"{JOB}: 2 items: 2 settled", "  EUR: sent 30.00, fees 3.00"],
    # The confirm did nothing (a 500): the lookup ends the doubt; the old request is never
    # confirmed, and a is listed as changed after it was made.
    ("error", "amount edited"): [
        f"{JOB}: 2 items: 1 settled, 1 changed", "  EUR: sent 20.00, fees 1.50",
        f"  changed pay-a (row 2), Jo Doe (EUR 10.00 sent): its row changed after it was on "
        f"its way (created): {CHANGED}", NEW_NAME],
}


@pytest.mark.parametrize("fault,edit", list(CASES))
def test_a_confirm_in_doubt_whose_row_changed_is_looked_up_and_paid_once(
        fault: str, edit: str, sb: RunningSandbox, adm: Admin, tmp_path: Path,
        where: Path | str) -> None:
    closing = CASES[fault, edit]
    job = write_job(tmp_path, sb, ROWS, concurrency=1)
    before = eur(sb)["balance"]
    # a's confirm is sent and its answer lost (or a 500), and so is every lookup of it: the
    # run is stopped there, a in doubt, b created and not confirmed.
    adm.faults({"confirm": {f"{fault}_next": 1}, "lookups": {"error_next": 3}})
    stopping = threading.Event()

    def stop_after_the_first_confirm(phase: str, entry: object) -> None:
        if phase == "confirm":
            stopping.set()

    assert run(job, where, stop=stopping, on_progress=stop_after_the_first_confirm
               ).message == "interrupted; run again to resume"
    adm.api.call("DELETE", "/faults")
    assert outcomes(where) == {"pay-a": "in_doubt", "pay-b": "pending"}
    moved = {"pay-a": 1} if fault == "lost" else {}
    assert confirmed(sb) == moved
    rows = ROWS.replace("a,1,10.00", "a,1,15.00") if edit == "amount edited" else \
        ROWS.split("\n", 1)[1]
    (tmp_path / "rows.csv").write_text(HEADER + rows)
    looked_up = lookups_of(sb, "pay-a")

    code, out, err = lines("run", str(job), "--state", str(where), "--yes")
    assert (code, out, err) == (1 if "changed" in closing[0] else 0, closing, [])
    # a's confirm was looked up once, from the state, and never sent again; b paid as its
    # row asks.
    assert lookups_of(sb, "pay-a") - looked_up == 1
    assert confirmed(sb) == {**moved, "pay-b": 1}
    assert before - eur(sb)["balance"] == Decimal("33.00" if moved else "21.50")
    record = items(where)["pay-a"]
    assert (record["step"], record["intent"], record["source_amount"]) == (
        "final" if moved else "created", None, "10.00")
    assert outcomes(where) == {"pay-a": "settled" if moved else "pending",
                               "pay-b": "settled"}
    assert lines("status", str(job), "--state", str(where)) == (code, closing, [])
    # The next plan pays nothing, and says why a's row is not paid; nor does the next run.
    planned, plan, err = lines("plan", str(job), "--state", str(where))
    assert (planned, err, plan[-1]) == (0, [], "nothing to pay")
    if edit == "amount edited":
        assert ("    pay-a (row 2), Jo Doe: " + (
            "changed since it was paid: not paid again" if moved else
            "the item changed after its payment started; check it by hand")) in plan
    assert lines("run", str(job), "--state", str(where), "--yes")[:2] == (code, closing)
    assert confirmed(sb) == {**moved, "pay-b": 1}


def test_a_payment_order_in_doubt_whose_row_changed_is_left_to_a_person(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, where: Path | str) -> None:
    path = order_job(tmp_path, sb, [order_row("a")], concurrency=1)
    # Once the plan is made (its catalogue read): the order is made, its answer lost, and
    # every lookup of it fails.
    assert run(path, where, on_batch=lambda paying: adm.faults(
        {"payment_orders": {"lost_next": 1}, "lookups": {"error_next": 10}})).exit_code == 1
    adm.api.call("DELETE", "/faults")
    assert outcomes(where, "col-2026-11") == {"a": "in_doubt"}
    order_job(tmp_path, sb, [order_row("a", "55.00")], concurrency=1)
    looked_up = lookups_of(sb, "a")
    code, out, err = lines("run", str(path), "--state", str(where), "--yes")
    assert (code, out, err) == (1, [
        "col-2026-11: 1 items: 1 in doubt",
        "  in doubt a (row 24): the payment_order was sent and its answer lost; the next run "
        "looks it up before anything"], [])
    assert lookups_of(sb, "a") == looked_up  # its lookup compares: not without its row
    assert order_counts(sb) == {"a": 1} and posted(adm, "payment_orders") == 1
    record = items(where, "col-2026-11")["a"]
    assert (record["intent"], record["outcome"], record["error_code"]) == (
        "payment_order", "conflict", "changed")

