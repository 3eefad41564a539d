"""The ``charge``, ``refund`` and ``cancel`` kinds end to end against a loopback sandbox, on
orders made straight at the sandbox: the arithmetic of what remains, checked at validation
(nothing sent) and again just before sending; and rule 5: an operation has no lookup by
external id, so once in doubt (a lost answer, a 500, a run killed with SIGKILL) it is never
sent again: the item is ``unknown``, listed for a person, and the run exits 1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from collection_support import (
    PAY,
    create_order,
    kill_when,
    operations,
    order_at,
    posts,
    run_process,
    run_to_end,
    write_job,
)
from conftest import KEY, SECRET, Admin, Api, body
from engine_support import cli, items, out_lines, run

from runner.engine.flow import fingerprint as engine_fingerprint
from runner.job import iter_items, load_job
from runner.sandbox import RunningSandbox
from runner.state import open_state
from runner.validation.collection import fingerprint

JOB = "col-2026-11"
REPO = Path(__file__).resolve().parent.parent
TEMPLATE = {"payment_order_external_id": "{{ row.order }}",
            "requested": {"amount": "{{ row.amount }}", "currency": "{{ row.currency }}"}}
D = Decimal


def op(ident: str, order: str, amount: str, currency: str = "EUR") -> dict[str, Any]:
    return {"id": ident, "order": order, "amount": amount, "currency": currency}


def job(tmp_path: Path, sb: RunningSandbox, kind: str, rows: list[dict[str, Any]],
        name: str = JOB, **kw: Any) -> Path:
    return write_job(tmp_path, sb, kind, rows, kw.pop("template", TEMPLATE), name=name,
                     file=f"{name}.yaml", **kw)


def ops_by_item(sb: RunningSandbox) -> Counter[str]:
    return Counter(o["external_id"] for o in operations(sb))


def sent_steps(state: Path, external_id: str) -> list[tuple[str, str | None]]:
    store = open_state(state)
    try:
        return [(a.step, a.result) for a in store.attempts(external_id)]
    finally:
        store.close()


def fx_order(sb: RunningSandbox, external_id: str, amount: str) -> dict[str, Any]:
    api = Api(sb.url, (KEY, SECRET))
    quotation = body(api.post(f"{PAY}/quotations", {
        "merchant_id": "MER0001", "payment_page_id": "card-usd-fx",
        "requested": {"amount": D(amount), "currency": "EUR"}, "processed": {"currency": "USD"},
        "quotation_mode": "REQUESTED_AMOUNT"}))
    answer = api.post(f"{PAY}/quotations/{quotation['id']}/payment-orders", {
        "type": "C2B", "external_id": external_id, "integration_mode": "HOST_TO_HOST",
        "merchant_urls": {"notification_url": "https://shop.example/notify"},
        "payment_information": {"card_number": "4111111111111111", "card_cvv": "123",
                                "card_expiration_month": "12", "card_expiration_year": "2099"}})
    assert answer.status_code == 201, answer.text
    return body(answer)  # type: ignore[no-any-return]


# ---------------------------------------------------------------- happy paths
def test_charges_settle_once_and_a_second_run_sends_nothing(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    o1, o2 = create_order(sb, "o1", "50.00"), create_order(sb, "o2", "80.00")
    fx = fx_order(sb, "fx", "100.00")
    by_id = {**TEMPLATE, "payment_order_id": "{{ row.order_id }}",
             "payment_order_external_id": "{{ row.order }}"}
    rows = [{**op("c1", "o1", "50.00"), "order_id": ""},
            {**op("c2", "o2", "30.00"), "order_id": ""},
            {**op("c3", "", "100.00"), "order_id": fx["id"]}]
    path = job(tmp_path, sb, "charge", rows, template=by_id)
    first = run(path, state)
    assert (first.exit_code, first.counts) == (0, {"settled": 3})
    done = {o["external_id"]: o for o in operations(sb)}
    assert {e: (o["type"], o["payment_order_id"], o["requested"]["amount"], o["status"])
            for e, o in done.items()} == {
        "c1": ("CHARGE", o1["id"], D("50.00"), "DONE"),
        "c2": ("CHARGE", o2["id"], D("30.00"), "DONE"),
        "c3": ("CHARGE", fx["id"], D("100.00"), "DONE")}
    assert done["c3"]["processed"] == {"amount": D("108.42"), "currency": "USD"}
    assert [order_at(sb, o["id"])["status"] for o in (o1, o2, fx)] == [
        "Charged", "Authorized", "Charged"]
    records = items(state, JOB)
    for external_id, o in done.items():
        r = records[external_id]
        assert (r["step"], r["outcome"], r["status"], r["transaction_id"],
                 r["provider_ref"]) == ("final", "settled", "DONE", o["id"],
                                        o["payment_order_id"])
        # A charge: the buyer's processed amount as sent, the merchant's as received.
        assert (D(r["source_amount"]), r["source_currency"], D(r["destination_amount"])) == (
            o["processed"]["amount"], o["processed"]["currency"], o["requested"]["amount"])
    assert sent_steps(state, "c1") == [("charge", "ok")]

    again = run(path, state)
    assert (again.exit_code, again.counts) == (0, {"settled": 3})
    assert posts(adm, "operations") == 3


def test_partial_charge_then_refunds_and_a_cancel_follow_the_arithmetic(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    order = create_order(sb, "o", "80.00")

    def step(kind: str, name: str, amount: str) -> tuple[int, dict[str, int]]:
        result = run(job(tmp_path, sb, kind, [op(name, "o", amount)], name=name), state)
        return result.exit_code, result.counts

    assert step("charge", "charge-1", "50.00") == (0, {"settled": 1})
    assert step("refund", "refund-1", "10.00") == (0, {"settled": 1})
    assert order_at(sb, "ext-o")["status"] == "Authorized"  # 30.00 still authorized
    # 50 charged, 10 refunded: 40 may be refunded, not 45; 30 may be cancelled, not 30.01.
    over = run(job(tmp_path, sb, "refund", [op("refund-2", "o", "45.00")], name="refund-2"),
               state)
    assert over.exit_code == 2 and over.report is not None
    assert [(p.field, p.message) for p in over.report.problems] == [
        ("requested.amount", f"a refund of 45.00 EUR exceeds what remains to refund on "
                             f"payment order {order['id']}: 40.00 EUR")]
    over = run(job(tmp_path, sb, "cancel", [op("cancel-1", "o", "30.01")], name="cancel-1"),
               state)
    assert over.exit_code == 2 and over.report is not None
    assert [(p.field, p.message) for p in over.report.problems] == [
        ("requested.amount", f"a cancellation of 30.01 EUR exceeds what remains to charge or "
                             f"cancel on payment order {order['id']}: 30.00 EUR")]
    assert posts(adm, "operations") == 2  # nothing was sent for either
    assert step("cancel", "cancel-2", "30.00") == (0, {"settled": 1})
    assert order_at(sb, "ext-o")["status"] == "Charged"  # nothing left authorized
    assert step("refund", "refund-3", "40.00") == (0, {"settled": 1})
    assert order_at(sb, "ext-o")["status"] == "Refunded"
    assert [(o["type"], o["requested"]["amount"]) for o in operations(sb)] == [
        ("CHARGE", D("50.00")), ("REFUND", D("10.00")), ("CANCEL", D("30.00")),
        ("REFUND", D("40.00"))]


def test_an_order_that_settled_by_itself_is_refunded_from_its_full_amount(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    create_order(sb, "ob", "64.90", page="openbanking-eur")
    assert order_at(sb, "ext-ob")["status"] == "Charged"
    over = run(job(tmp_path, sb, "refund", [op("r0", "ob", "64.91")], name="r0"), state)
    assert over.exit_code == 2
    result = run(job(tmp_path, sb, "refund", [op("r1", "ob", "60.00"), op("r2", "ob", "4.90")],
                     name="r1"), state)
    assert (result.exit_code, result.counts) == (0, {"settled": 2})
    assert order_at(sb, "ext-ob")["status"] == "Refunded"


def test_two_items_on_one_order_are_sent_one_after_the_other(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    create_order(sb, "o", "50.00")
    result = run(job(tmp_path, sb, "charge", [op("a", "o", "30.00"), op("b", "o", "20.00")],
                     concurrency=2), state)
    assert (result.exit_code, result.counts) == (0, {"settled": 2})
    assert order_at(sb, "ext-o")["status"] == "Charged"


def test_the_examples_work_on_the_demo_orders_in_any_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RUNNER_BASE_URL", "RUNNER_API_KEY", "RUNNER_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(REPO)
    state = tmp_path / "s.sqlite"
    # cancels before charges: demo-order-2 is cancelled 30.00, then charged the other 50.00
    for example in ("cancels", "payment-orders", "charges", "refunds", "charges"):
        result = cli("run", f"jobs/{example}.yaml", "--yes", "--state", str(state))
        assert result.exit_code == 0, (example, result.output)
    outcomes = {name: sorted(r["outcome"] for r in items(state, f"{name}-2026-11").values())
                for name in ("charges", "refunds", "cancels")}
    assert outcomes == {"charges": ["settled"] * 2, "refunds": ["settled"] * 2,
                        "cancels": ["settled"] * 2}


# ---------------------------------------------------------------- validation
def test_what_does_not_fit_is_refused_at_validation_and_nothing_is_sent(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    small, other = create_order(sb, "small", "50.00"), create_order(sb, "other", "50.00")
    rows = [op("a", "small", "30.00"), op("b", "small", "30.00"), op("c", "other", "60.00"),
            op("d", "other", "10.00", currency="USD"), op("e", "nope", "1.00"),
            op("f", "other", "0.001")]
    result = run(job(tmp_path, sb, "charge", rows), state)
    assert result.exit_code == 2 and result.report is not None
    assert [(p.field, p.message) for p in result.report.problems] == [
        ("requested.amount", f"a charge of 30.00 EUR exceeds what remains to charge or cancel "
                             f"on payment order {small['id']} after this job's earlier rows "
                             f"(30.00 EUR): 20.00 EUR"),
        ("requested.amount", f"a charge of 60.00 EUR exceeds what remains to charge or cancel "
                             f"on payment order {other['id']}: 50.00 EUR"),
        ("requested.currency", f"payment order {other['id']} is in EUR, not USD"),
        ("payment_order_external_id", "no payment order 'nope' at the provider"),
        ("requested.amount", "0.001 has more than 2 decimals for EUR")]
    refund = run(job(tmp_path, sb, "refund", [op("r", "small", "1.00")], name="r"), state)
    assert refund.exit_code == 2 and refund.report is not None
    assert [p.message for p in refund.report.problems] == [
        f"a refund needs a charge first: runner knows of none on payment order {small['id']} "
        f"(Authorized)"]
    assert posts(adm, "operations") == 0


def test_a_cancel_may_go_while_authorizing_and_a_charge_may_not(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path, state: Path) -> None:
    sb = sandbox_factory()  # buy-now-pay-later stays Authorizing for 60 s
    order = create_order(sb, "bnpl", "90.00", page="bnpl-eur")
    assert order["status"] == "Authorizing"
    charge = run(job(tmp_path, sb, "charge", [op("c", "bnpl", "90.00")], name="c"), state)
    assert charge.exit_code == 2 and charge.report is not None
    assert [p.message for p in charge.report.problems] == [
        f"a charge needs the payment order Authorized; {order['id']} is Authorizing"]
    cancel = run(job(tmp_path, sb, "cancel", [op("x", "bnpl", "90.00")], name="x"), state)
    assert (cancel.exit_code, cancel.counts) == (0, {"settled": 1})
    assert order_at(sb, "ext-bnpl")["status"] == "Cancelled"


def test_the_amount_is_checked_again_just_before_sending(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    """Between validation and the commit someone charged the order: nothing is sent."""
    order = create_order(sb, "o", "50.00")
    api = Api(sb.url, (KEY, SECRET))

    def charge_elsewhere(phase: str, entry: Any) -> None:
        if phase == "prepare":
            answer = api.post(f"{PAY}/payment-orders/ext-o/charges",
                              {"requested": {"amount": D("50.00"), "currency": "EUR"}})
            assert answer.status_code == 200, answer.text

    result = run(job(tmp_path, sb, "charge", [op("a", "o", "20.00")]), state,
                 on_progress=charge_elsewhere)
    assert (result.exit_code, result.counts) == (1, {"failed": 1})
    r = items(state, JOB)["a"]
    assert (r["error_code"], r["error_message"]) == (
        "status", f"a charge needs the payment order Authorized; {order['id']} is Charged")
    assert posts(adm, "operations") == 1 and sent_steps(state, "a") == []


def test_the_validation_knows_items_again_by_the_engines_fingerprint(
        sb: RunningSandbox, tmp_path: Path) -> None:
    path = job(tmp_path, sb, "charge", [op("a", "o", "30.00")])
    [result] = list(iter_items(load_job(path)))
    assert fingerprint(result.item) == engine_fingerprint(result.item)  # type: ignore[union-attr]


# ---------------------------------------------------------------- rule 5
def test_a_lost_answer_makes_the_item_unknown_and_it_is_never_sent_again(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    create_order(sb, "o1", "50.00")
    create_order(sb, "o2", "50.00")
    adm.faults({"operations": {"lost_next": 1}})
    path = job(tmp_path, sb, "charge", [op("a", "o1", "20.00"), op("b", "o2", "30.00")],
               concurrency=1)
    first = run(path, state)
    assert (first.exit_code, first.counts) == (1, {"settled": 1, "unknown": 1})
    # The charge was made at the provider; the runner could not learn it, and says so.
    assert ops_by_item(sb) == {"a": 1, "b": 1}
    r = items(state, JOB)["a"]
    assert (r["outcome"], r["intent"], r["step"]) == ("unknown", None, "final")
    assert r["error_message"].startswith("the charge was sent and its answer lost (")
    assert r["error_message"].endswith("); check it at the provider before anything else")
    assert sent_steps(state, "a") == [("charge", "in_doubt")]

    again = run(path, state)
    assert (again.exit_code, again.counts) == (1, {"settled": 1, "unknown": 1})
    assert posts(adm, "operations") == 2 and ops_by_item(sb) == {"a": 1, "b": 1}
    status = cli("status", str(path), "--state", str(state))
    assert status.exit_code == 1  # an item needs a person
    assert out_lines(status)[0] == f"{JOB}: 2 items: 1 settled, 1 unknown"
    [needs] = [line for line in out_lines(status) if "needs a person" in line]
    assert needs.startswith(f"  needs a person a (row {r['row']}): the charge was sent and "
                            f"its answer lost (")


def test_a_500_is_in_doubt_too_and_never_sent_again(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    """A 500 may come after the work: with no lookup, even an operation that was not made is
    left to a person rather than risked twice."""
    create_order(sb, "o", "50.00")
    adm.faults({"operations": {"error_next": 1}})
    path = job(tmp_path, sb, "charge", [op("a", "o", "20.00")])
    assert run(path, state).counts == {"unknown": 1}
    assert run(path, state).counts == {"unknown": 1}
    assert posts(adm, "operations") == 1 and operations(sb) == []
    assert items(state, JOB)["a"]["error_code"] == "1000500"


class Died(BaseException):
    """The process ends here (as under SIGKILL, nothing after it runs)."""


def test_an_answer_and_what_the_item_becomes_are_recorded_together(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The run dies after the charge's answer came back and before anything of it was
    recorded: the charge is still in doubt for the next run (rule 5: unknown), never "done
    with no result", which would let it be sent again."""
    from runner.engine.operations import OperationFlow

    create_order(sb, "o", "50.00")
    path = job(tmp_path, sb, "charge", [op("a", "o", "20.00")])

    def dies(self: OperationFlow, entry: Any, operation: dict[str, Any]) -> None:
        raise Died

    with monkeypatch.context() as m:
        m.setattr(OperationFlow, "_status", dies)
        with pytest.raises(Died):
            run(path, state)
    assert items(state, JOB)["a"]["intent"] == "charge"
    again = run(path, state)
    assert (again.exit_code, again.counts) == (1, {"unknown": 1})
    assert posts(adm, "operations") == 1 and ops_by_item(sb) == {"a": 1}
    assert sent_steps(state, "a") == [("charge", None)]  # its answer was never recorded


def test_a_run_dying_as_a_lost_answer_is_recorded_leaves_the_operation_unknown(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The charge's answer is lost, and the run dies just as it records the call in doubt:
    what it wrote already makes the item unknown, so the next run sends nothing (never the
    call's end written with the item still to send, which would charge it again)."""
    from runner.state import StateStore

    create_order(sb, "o", "50.00")
    adm.faults({"operations": {"lost_next": 1}})
    path = job(tmp_path, sb, "charge", [op("a", "o", "20.00")])
    end_attempt = StateStore.end_attempt

    def dies(self: StateStore, attempt: int, external_id: str, result: str,
             **more: Any) -> None:
        end_attempt(self, attempt, external_id, result, **more)
        if result == "in_doubt":
            raise Died

    with monkeypatch.context() as m:
        m.setattr(StateStore, "end_attempt", dies)
        with pytest.raises(Died):
            run(path, state)
    r = items(state, JOB)["a"]
    assert (r["step"], r["intent"], r["outcome"]) == ("final", None, "unknown")
    again = run(path, state)
    assert (again.exit_code, again.counts) == (1, {"unknown": 1})
    assert posts(adm, "operations") == 1 and ops_by_item(sb) == {"a": 1}


def test_a_503_before_sending_is_retried_safely(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    create_order(sb, "o", "50.00")
    adm.faults({"operations": {"unavailable_next": 1}})
    result = run(job(tmp_path, sb, "charge", [op("a", "o", "20.00")]),
                 state)
    assert (result.exit_code, result.counts) == (0, {"settled": 1})
    assert posts(adm, "operations") == 2 and ops_by_item(sb) == {"a": 1}
    assert sent_steps(state, "a") == [("charge", "ok")]


def test_a_lost_state_database_cannot_charge_twice(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    create_order(sb, "o", "50.00")
    path = job(tmp_path, sb, "charge", [op("a", "o", "20.00")])
    assert run(path, state).exit_code == 0
    for f in tmp_path.glob("s.sqlite*"):
        f.unlink()
    again = run(path, state)  # 30.00 remains, so validation lets it through; the provider
    assert (again.exit_code, again.counts) == (1, {"unknown": 1})  # knows its external id
    r = items(state, JOB)["a"]
    assert (r["error_code"], r["error_message"]) == (
        "2001201", "the provider already holds an operation with external_id a (made by an "
                   "earlier run whose state was lost?); check it at the provider: it is not "
                   "sent again")
    assert ops_by_item(sb) == {"a": 1}


def test_a_run_killed_mid_operations_leaves_what_was_in_flight_unknown(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    orders = {f"o{n}": create_order(sb, f"o{n}", "50.00")["id"] for n in range(6)}
    rows = [op(f"c{n}", f"o{n}", "50.00") for n in range(6)]
    # One call at a time: the first charge to arrive is the first made (calls arriving
    # together may pass the sandbox's latency in any order). It is made but its answer held
    # for longer than any loaded machine takes to kill: the kill comes while it is in flight.
    path = job(tmp_path, sb, "charge", rows, concurrency=1, timeout="90s")
    adm.faults({"*": {"latency_ms": 5}, "operations": {"latency_ms": 5, "slow_next": 1}},
               slow_seconds=60)
    kill_when(run_process(path, state), lambda: len(operations(sb)) >= 1)
    held = operations(sb)[0]["external_id"]
    in_flight = {e for e, r in items(state, JOB).items() if r["intent"]}
    assert held in in_flight

    adm.faults({"*": {"latency_ms": 0}, "operations": {"latency_ms": 0}})
    assert run_to_end(path, state) == 1
    records = items(state, JOB)
    assert {e for e, r in records.items() if r["outcome"] == "unknown"} == in_flight
    # Still counted against its order (a full charge: the order is Charged if it was made).
    assert {records[e]["provider_ref"] for e in in_flight} == {
        orders["o" + e[1:]] for e in in_flight}
    assert {e for e, r in records.items() if r["outcome"] == "settled"} == {
        r["id"] for r in rows} - in_flight
    # Nothing was sent twice: one call per item (an unknown one may never have reached the
    # provider: it was in flight when the run was killed), at most one charge per item at
    # the provider, and exactly one for each settled item.
    for external_id in records:
        assert sent_steps(state, external_id) == [("charge", records[external_id][
            "outcome"] == "settled" and "ok" or None)]
    held_ops = ops_by_item(sb)
    assert all(held_ops[e] == 1 for e, r in records.items() if r["outcome"] == "settled")
    assert set(held_ops.values()) == {1} and posts(adm, "operations") <= len(rows)
    before = posts(adm, "operations")
    assert run_to_end(path, state) == 1 and posts(adm, "operations") == before
