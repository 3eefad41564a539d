"""The exactly-once rules (docs/exactly-once.md), proved against the sandbox's faults over real
HTTP.

Each test drives ``run_job`` (the library under `runner run`) against a loopback sandbox
whose status changes are immediate (``submit_delay=0, complete_delay=0``), with the engine's
waits shrunk, and judges at the provider: how many transactions each item has, which were
confirmed, how far the EUR balance moved, and which calls were made; then checks that the
state database tells the same story.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, SECRET, Admin, Api
from engine_support import (
    MT,
    cli,
    confirmed,
    confirmed_ids,
    cost_confirmed,
    created,
    eur,
    items,
    outcomes,
    posts,
    quotations,
    run,
    sent_for,
    tiny_sleep,
    transactions,
    write_job,
)

from runner import errors
from runner.engine.flow import Entry
from runner.engine.pages import poll_wait
from runner.engine.phases import each
from runner.errors import (
    AlreadyConfirmed,
    AuthenticationError,
    BusinessRefusal,
    ConnectionRefused,
    DuplicateExternalId,
    DuplicateWithoutLookup,
    InsufficientBalance,
    InvalidRequest,
    NotFound,
    PayRefused,
    PayStatusUnknown,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
    QuotationExpired,
    RateLimited,
    ReferenceTaken,
    ResponseLost,
    ServerError,
    ServiceUnavailable,
    UnexpectedAnswer,
    UntrustedCertificate,
)
from runner.provider.retry import Decision, RetryPolicy, decide
from runner.provider.throttle import Throttle
from runner.sandbox import RunningSandbox
from runner.state import open_state

EVERY = {"pay-a": 1, "pay-b": 1, "pay-c": 1}
START = Decimal("10000000.00")
COST = Decimal("64.50")  # 10 + 20 + 30, plus a fee of 1.50 each


def calls(admin: Admin) -> list[tuple[str, str]]:
    """The provider calls seen, oldest first, without the job's validation reads."""
    seen = [(c["method"], c["path"].removeprefix(MT)) for c in admin.requests()["recent"]]
    return [c for c in seen if not c[1].startswith("/payers/")]


def steps(state: Path, external_id: str) -> list[tuple[str, str, str | None, str | None]]:
    return sent_for(state, external_id, "transaction")


def assert_paid_once(sb: RunningSandbox, state: Path, expected: dict[str, int] = EVERY,
                     moved: Decimal = COST) -> None:
    """Each item has exactly one confirmed transaction at the provider, the EUR balance
    moved by exactly their cost, and the state database says they settled."""
    assert confirmed(sb) == expected
    assert cost_confirmed(sb) == moved
    assert eur(sb) == {"balance": START - moved, "available": START - moved}
    records = items(state)
    for external_id in expected:
        r = records[external_id]
        assert (r["outcome"], r["step"], r["intent"], r["status"]) == (
            "settled", "final", None, "70000"), r
        assert r["provider_ref"] in confirmed_ids(sb)


# ---------------------------------------------------------------- rule 1
def test_external_ids_are_derived_and_a_finished_job_sends_nothing_again(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    path = write_job(tmp_path, sb)
    first = run(path, state)
    assert (first.exit_code, first.message, first.counts) == (0, "", {"settled": 3})
    # The external_ids are the job's template over the rows, for every call.
    assert quotations(sb) == ["pay-a", "pay-b", "pay-c"]
    assert sorted(e for e, _, _ in transactions(sb)) == ["pay-a", "pay-b", "pay-c"]
    assert posts(adm) == {"POST": 9, "POST quotations": 3, "POST create": 3,
                          "POST confirm": 3}
    assert_paid_once(sb, state)
    for external_id in EVERY:
        assert steps(state, external_id) == [("quotation", external_id, "ok", None),
                                             ("transaction", external_id, "ok", None),
                                             ("confirm", external_id, "ok", None)]

    second = run(path, state)
    assert (second.exit_code, second.counts) == (0, {"settled": 3})
    assert posts(adm)["POST"] == 9  # not one more
    assert_paid_once(sb, state)


def test_a_lost_state_database_cannot_pay_twice(sb: RunningSandbox, adm: Admin,
                                                 tmp_path: Path, state: Path) -> None:
    path = write_job(tmp_path, sb)
    assert run(path, state).exit_code == 0
    for f in tmp_path.glob("s.sqlite*"):
        f.unlink()
    again = run(path, state)
    assert (again.exit_code, again.counts) == (0, {"settled": 3})
    # The same external_ids were asked again, refused as reused, found and adopted: the
    # transactions were already final, so no confirm was sent.
    assert posts(adm) == {"POST": 15, "POST quotations": 6, "POST create": 6,
                          "POST confirm": 3}
    assert steps(state, "pay-a") == [("quotation", "pay-a", "error", "1007001"),
                                     ("transaction", "pay-a", "error", "1007001")]
    assert created(sb) == EVERY
    assert_paid_once(sb, state)


# ---------------------------------------------------------------- rules 2 and 3: in doubt
LOST = {
    "quotations": ("quotation", ("POST", "/quotations"), ("GET", "/quotations/ext-pay-a")),
    "create": ("transaction", ("POST", "/quotations/ext-pay-a/transactions"),
               ("GET", "/transactions/ext-pay-a")),
    "confirm": ("confirm", ("POST", "/transactions/ext-pay-a/confirm"),
                ("GET", "/transactions/ext-pay-a")),
}


def _expected_steps(step: str, result: str, code: str | None,
                    again: bool) -> list[tuple[str, str, str | None, str | None]]:
    out: list[tuple[str, str, str | None, str | None]] = []
    for s in ("quotation", "transaction", "confirm"):
        if s == step:
            out.append((s, "pay-a", result, code))
            if not again:
                continue
        out.append((s, "pay-a", "ok", None))
    return out


@pytest.mark.parametrize("group", list(LOST))
def test_a_lost_answer_is_looked_up_and_never_sent_again(
        group: str, sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    step, post, lookup = LOST[group]
    adm.faults({group: {"lost_next": 1}})
    result = run(write_job(tmp_path, sb, concurrency=1), state)
    assert (result.exit_code, result.counts) == (0, {"settled": 3})
    # The work was done at the provider: one POST per item, the lost one included, and
    # the lookup by external_id came straight after the POST whose answer was lost.
    assert posts(adm)["POST " + group] == 3
    seen = calls(adm)
    at = seen.index(post)
    assert seen[at + 1] == lookup, seen
    assert steps(state, "pay-a") == _expected_steps(step, "in_doubt", None, again=False)
    assert created(sb) == EVERY
    assert_paid_once(sb, state)


@pytest.mark.parametrize("group", list(LOST))
def test_a_5xx_is_looked_up_then_sent_again_with_the_same_external_id(
        group: str, sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    step, post, lookup = LOST[group]
    adm.faults({group: {"error_next": 1}})
    result = run(write_job(tmp_path, sb, concurrency=1), state)
    assert (result.exit_code, result.counts) == (0, {"settled": 3})
    # 500: nothing was done; the lookup says so (404, or still CREATED for a confirm), and
    # only then the same request goes again.
    seen = calls(adm)
    at = seen.index(post)
    assert seen[at:at + 3] == [post, lookup, post], seen
    assert posts(adm)["POST " + group] == 4
    assert steps(state, "pay-a") == _expected_steps(step, "in_doubt", "1009001", again=True)
    store = open_state(state)
    try:
        sent = [a.request for a in store.attempts("pay-a") if a.step == step]
    finally:
        store.close()
    assert len(sent) == 2 and sent[0] == sent[1]
    assert_paid_once(sb, state)


@pytest.mark.parametrize("group", list(LOST))
def test_a_503_is_retried_as_it_is(group: str, sb: RunningSandbox, adm: Admin,
                                   tmp_path: Path, state: Path) -> None:
    step, post, lookup = LOST[group]
    adm.faults({group: {"unavailable_next": 1}})
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        tiny_sleep(seconds)

    result = run(write_job(tmp_path, sb, concurrency=1), state, sleep=sleep)
    assert (result.exit_code, result.counts) == (0, {"settled": 3})
    seen = calls(adm)
    at = seen.index(post)
    assert seen[at:at + 2] == [post, post], seen  # no lookup needed: nothing was done
    assert posts(adm)["POST " + group] == 4
    # One call in the state (the retry is within it), after one backoff of the policy
    # (first wait 0.5 s plus up to 0.5 s of jitter, capped by the job's max_wait of 1 s).
    assert steps(state, "pay-a") == _expected_steps(step, "ok", None, again=False)
    assert 0.5 <= waits[0] <= 1.0, waits
    assert_paid_once(sb, state)


@pytest.mark.parametrize("group", list(LOST))
def test_a_timeout_is_resolved_by_lookup(group: str, sb: RunningSandbox, adm: Admin,
                                         tmp_path: Path, state: Path) -> None:
    step, post, lookup = LOST[group]
    adm.faults({group: {"slow_next": 1}}, slow_seconds=0.5)
    result = run(write_job(tmp_path, sb, concurrency=1, timeout="0.2s"), state)
    assert (result.exit_code, result.counts) == (0, {"settled": 3})
    seen = calls(adm)
    at = seen.index(post)
    assert seen[at + 1] == lookup, seen
    assert posts(adm)["POST " + group] == 3
    assert steps(state, "pay-a") == _expected_steps(step, "in_doubt", None, again=False)
    assert_paid_once(sb, state)


# ---------------------------------------------------------------- rule 1: -rN after expiry
@pytest.mark.parametrize("how", ["runner confirm", "run with confirm"])
def test_an_expired_quotation_gets_an_r2_attempt_only_once_unconfirmable(
        how: str, sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    path = write_job(tmp_path, sb, confirm=False)
    first = run(path, state)
    assert (first.exit_code, first.counts) == (0, {"awaiting_confirm": 3})
    adm.advance(3601)  # past the quotations' TTL of 3600 s
    if how == "runner confirm":
        second = run(path, state, confirm=True, confirm_only=True)
    else:
        second = run(write_job(tmp_path, sb, confirm=True), state)
    assert (second.exit_code, second.counts) == (0, {"settled": 3})
    # E was refused (1007004) and is never confirmed; E-r2 was made after that, and paid.
    assert confirmed_ids(sb) == ["pay-a-r2", "pay-b-r2", "pay-c-r2"]
    assert created(sb) == {"pay-a": 2, "pay-b": 2, "pay-c": 2}
    assert quotations(sb) == ["pay-a", "pay-a-r2", "pay-b", "pay-b-r2", "pay-c", "pay-c-r2"]
    assert posts(adm)["POST confirm"] == 6
    assert steps(state, "pay-a") == [
        ("quotation", "pay-a", "ok", None), ("transaction", "pay-a", "ok", None),
        ("confirm", "pay-a", "error", "1007004"),
        ("quotation", "pay-a-r2", "ok", None), ("transaction", "pay-a-r2", "ok", None),
        ("confirm", "pay-a-r2", "ok", None)]
    assert {r["attempt"] for r in items(state).values()} == {2}
    assert_paid_once(sb, state, moved=COST)


def test_items_runner_confirm_confirmed_are_on_their_way_not_awaiting_a_confirm(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path, state: Path) -> None:
    """`runner confirm` confirms what a run withheld; the transactions are not final when it
    stops waiting: they are pending on their way (the next run follows them), never still
    "awaiting confirmation", which would tell a person to confirm them again."""
    sb = sandbox_factory(submit_delay=3600, complete_delay=0)
    path = write_job(tmp_path, sb, confirm=False)
    path.write_text(path.read_text().replace("wait_for_final: 2s", "wait_for_final: 0s"))
    assert run(path, state).counts == {"awaiting_confirm": 3}
    second = run(path, state, confirm=True, confirm_only=True)
    assert (second.exit_code, second.counts) == (0, {"pending": 3})
    assert {(r["step"], r["outcome"]) for r in items(state).values()} == {
        ("confirmed", "pending")}
    assert confirmed(sb) == EVERY
    status = cli("status", str(path), "--state", str(state))
    assert status.stdout.splitlines()[:2] == [
        "pay-2026-11: 3 items: 3 pending", "  pending: 3 confirmed (on their way)"]


# ---------------------------------------------------------------- rule 3: 1007001
def test_what_the_provider_already_holds_is_adopted(sb: RunningSandbox, adm: Admin,
                                                    tmp_path: Path, state: Path) -> None:
    path = write_job(tmp_path, sb, confirm=False)
    assert run(path, state).exit_code == 0
    for f in tmp_path.glob("s.sqlite*"):
        f.unlink()  # the state is lost after the transactions were created
    again = run(path, state, confirm=True)
    assert (again.exit_code, again.counts) == (0, {"settled": 3})
    assert steps(state, "pay-b") == [("quotation", "pay-b", "error", "1007001"),
                                     ("transaction", "pay-b", "error", "1007001"),
                                     ("confirm", "pay-b", "ok", None)]
    assert quotations(sb) == ["pay-a", "pay-b", "pay-c"]
    assert created(sb) == EVERY
    assert {r["error_code"] for r in items(state).values()} == {None}
    assert_paid_once(sb, state)


def _quotation(external_id: str, amount: str) -> dict[str, Any]:
    return {"external_id": external_id, "payer_id": 1, "mode": "SOURCE_AMOUNT",
            "source": {"country_iso_code": "FRA", "currency": "EUR",
                       "amount": Decimal(amount)},
            "destination": {"currency": "KES"}}


def test_a_quotation_that_is_not_the_item_is_a_conflict(sb: RunningSandbox, adm: Admin,
                                                        tmp_path: Path, state: Path) -> None:
    api = Api(sb.url, (KEY, SECRET))
    assert api.post(MT + "/quotations", _quotation("pay-b", "99.00")).status_code == 201
    path = write_job(tmp_path, sb)
    result = run(path, state)
    assert (result.exit_code, result.counts) == (1, {"settled": 2, "conflict": 1})
    record = items(state)["pay-b"]
    assert (record["outcome"], record["intent"], record["error_code"]) == (
        "conflict", None, "conflict")
    assert record["error_message"] == "quotation pay-b at the provider does not match this item"
    # Nothing was created, let alone confirmed, for it.
    assert created(sb) == {"pay-a": 1, "pay-c": 1}
    assert_paid_once(sb, state, {"pay-a": 1, "pay-c": 1}, moved=Decimal("43.00"))
    before = posts(adm)["POST"]
    again = run(path, state)  # a conflict waits for a person: nothing is sent for it
    assert (again.exit_code, again.counts) == (1, {"settled": 2, "conflict": 1})
    assert posts(adm)["POST"] == before


def test_a_transaction_for_another_beneficiary_is_a_conflict(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    """Same external_id, same quotation and amount, but another person: not adopted."""
    api = Api(sb.url, (KEY, SECRET))
    assert api.post(MT + "/quotations", _quotation("pay-b", "20.00")).status_code == 201
    other = {"external_id": "pay-b", "credit_party_identifier": {"msisdn": "+254700000099"},
             "sender": {"firstname": "Ada", "lastname": "Acme"},
             "beneficiary": {"firstname": "Mal", "lastname": "Lory"},
             "purpose_of_remittance": "SALARY"}
    answer = api.post(MT + "/quotations/ext-pay-b/transactions", other)
    assert answer.status_code == 201, answer.text
    result = run(write_job(tmp_path, sb), state)
    assert (result.exit_code, result.counts) == (1, {"settled": 2, "conflict": 1})
    assert outcomes(state)["pay-b"] == "conflict"
    assert confirmed(sb) == {"pay-a": 1, "pay-c": 1}
    assert_paid_once(sb, state, {"pay-a": 1, "pay-c": 1}, moved=Decimal("43.00"))


# ---------------------------------------------------------------- confirm: false
def test_confirm_false_stops_after_creation(sb: RunningSandbox, adm: Admin, tmp_path: Path,
                                            state: Path) -> None:
    result = run(write_job(tmp_path, sb, confirm=False), state)
    assert (result.exit_code, result.message, result.counts) == (
        0, "", {"awaiting_confirm": 3})
    assert created(sb) == EVERY and confirmed(sb) == {}
    assert eur(sb) == {"balance": START, "available": START}
    assert "POST confirm" not in posts(adm)
    assert {(r["step"], r["outcome"], r["status"]) for r in items(state).values()} == {
        ("created", "awaiting_confirm", "10000")}
    # A later run of the job with confirm: true confirms them, once.
    later = run(write_job(tmp_path, sb, confirm=True), state)
    assert (later.exit_code, later.counts) == (0, {"settled": 3})
    assert posts(adm) == {"POST": 9, "POST quotations": 3, "POST create": 3,
                          "POST confirm": 3}
    assert_paid_once(sb, state)


# ---------------------------------------------------------------- pre-flight
def test_preflight_confirms_nothing_when_the_balance_is_short(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    # 62.00 covers the 60.00 the items send, not their cost with the fees (64.50): the
    # funds-first check, before any POST, estimates them from two dryrun- quotations
    # (4.50, with 2% and a cent an item: 4.62) and stops.
    adm.balance("EUR", "62.00", "0")
    path = write_job(tmp_path, sb, concurrency=1)
    result = run(path, state)
    assert (result.exit_code, result.message) == (
        4, "EUR 64.62 needed (4.62 of fees, 4.62 of them estimated), 62.00 available: "
           "nothing was sent but 2 dryrun- quotation(s) that estimated the fees "
           "(--allow-partial pays what the balance covers)")
    assert created(sb) == {} and confirmed(sb) == {}
    assert posts(adm) == {"POST": 2, "POST quotations": 2}
    assert eur(sb)["available"] == Decimal("62.00")

    partial = run(path, state, allow_partial=True)
    assert (partial.exit_code, partial.counts) == (1, {"settled": 2, "failed": 1})
    record = items(state)["pay-c"]
    assert (record["outcome"], record["error_code"], record["error_message"]) == (
        "failed", "1007005", "Transaction can not be confirmed, insufficient balance")
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1}
    assert eur(sb)["balance"] == Decimal("62.00") - Decimal("33.00")

    adm.balance("EUR", "1000.00", "0")
    rest = run(path, state)
    assert (rest.exit_code, rest.counts) == (0, {"settled": 3})
    assert confirmed(sb) == EVERY
    assert eur(sb)["balance"] == Decimal("1000.00") - Decimal("31.50")
    assert posts(adm)["POST confirm"] == 4  # a, b, c refused, then c


# ---------------------------------------------------------------- rule 4: refusals
def test_business_refusals_are_never_retried_and_triggers_end_as_the_provider_says(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    rows = ("a,1,10.00,+254700000001\n"
            "inactive,13,15.00,+254700000005\n"
            "rejected,1,20.00,+254700999302\n"
            "refused,1,25.00,+254700999301\n"
            "c,1,30.00,+254700000003\n")
    result = run(write_job(tmp_path, sb, rows, concurrency=1), state)
    assert (result.exit_code, result.counts) == (1, {"settled": 2, "failed": 3})
    records = items(state)
    assert {e: (r["outcome"], r["error_code"], r["error_message"])
            for e, r in records.items() if r["outcome"] == "failed"} == {
        "pay-inactive": ("failed", "1003001", "Payer is inactive in your account"),
        "pay-rejected": ("failed", "30200", records["pay-rejected"]["status_message"]),
        "pay-refused": ("failed", "30201", records["pay-refused"]["status_message"]),
    }
    assert records["pay-rejected"]["status"] == "30200"
    assert steps(state, "pay-inactive") == [("quotation", "pay-inactive", "error", "1003001")]
    # One POST for the refused quotation (4 + 1), nothing created for it; the item REJECTED
    # at creation was never confirmed; the one REJECTED after confirm gave the money back.
    assert posts(adm) == {"POST": 5 + 4 + 3, "POST quotations": 5, "POST create": 4,
                          "POST confirm": 3}
    assert created(sb) == {"pay-a": 1, "pay-rejected": 1, "pay-refused": 1, "pay-c": 1}
    assert confirmed(sb) == {"pay-a": 1, "pay-rejected": 1, "pay-c": 1}
    moved = Decimal("11.50") + Decimal("31.50")
    assert cost_confirmed(sb) == moved
    assert eur(sb) == {"balance": START - moved, "available": START - moved}


# ---------------------------------------------------------------- an edited job file
def test_an_item_changed_after_its_payment_started_is_left_for_a_person(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    rows = ("a,1,10.00,+254700000001\n"
            "b,1,20.00,+254700000002\n"
            "x,13,15.00,+254700000005\n")
    first = run(write_job(tmp_path, sb, rows, confirm=False), state)
    assert (first.exit_code, first.counts) == (1, {"awaiting_confirm": 2, "failed": 1})
    # b's amount is edited once its transaction exists; x (refused, nothing at the
    # provider) is moved to an active payer.
    edited = rows.replace("b,1,20.00", "b,1,25.00").replace("x,13,", "x,1,")
    second = run(write_job(tmp_path, sb, edited), state)
    assert (second.exit_code, second.counts) == (1, {"settled": 2, "changed": 1})
    record = items(state)["pay-b"]
    assert (record["outcome"], record["error_code"], record["error_message"]) == (
        "conflict", "changed", "the item changed after its payment started; check it by hand")
    assert record["changed_to"] not in (None, record["fingerprint"])  # what the row asks now
    assert confirmed(sb) == {"pay-a": 1, "pay-x": 1}
    assert steps(state, "pay-x") == [("quotation", "pay-x", "error", "1003001"),
                                     ("quotation", "pay-x", "ok", None),
                                     ("transaction", "pay-x", "ok", None),
                                     ("confirm", "pay-x", "ok", None)]
    assert cost_confirmed(sb) == Decimal("28.00")


def test_rows_edited_during_a_run_leave_no_confirmed_item_unfollowed(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    """The rows file is edited while a run works: d's row once the plan is made (d is not
    worked), every other row as their confirms go out. What was confirmed is followed to
    its final status from the state alone (a poll reads no row); the run says that d was
    not worked (exit 1). The next run pays d as its row says now, and nobody twice."""
    rows = ("a,1,10.00,+254700000001\n"
            "b,1,20.00,+254700000002\n"
            "c,1,30.00,+254700000003\n"
            "d,1,40.00,+254700000004\n")
    path = write_job(tmp_path, sb, rows)
    rows_file = tmp_path / "rows.csv"

    def edit(old: str, new: str) -> None:
        rows_file.write_text(rows_file.read_text().replace(old, new))

    def asked(plan: Any) -> bool:
        edit("d,1,40.00", "d,1,45.00")
        return True

    def phase(name: str, count: int) -> None:
        if name == "confirm":
            for row in "abc":
                edit(f"{row},1,", f"{row},1,1")  # 10.00 becomes 110.00 ...

    first = run(path, state, ask=asked, on_phase=phase)
    assert (first.exit_code, first.counts) == (1, {"settled": 3, "pending": 1})
    assert first.message == ("1 item(s) not worked: their rows changed during the run (a run "
                             "pays what its plan checked); run again to plan them anew")
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    assert {k: (r["step"], r["status"]) for k, r in items(state).items()} == {
        "pay-a": ("final", "70000"), "pay-b": ("final", "70000"),
        "pay-c": ("final", "70000"), "pay-d": ("new", None)}
    second = run(path, state)  # a, b and c ask other payments now: not paid again
    assert (second.exit_code, second.counts) == (1, {"settled": 1, "changed": 3})
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1, "pay-d": 1}
    assert items(state)["pay-d"]["source_amount"] == "45.00"


def test_an_item_confirmed_is_followed_to_its_final_status_after_its_row_changed(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path, state: Path) -> None:
    """A run confirms and leaves (wait_for_final: 0s); every row is edited; the next run
    follows the confirmed items to their final status all the same, sending nothing, and
    lists them as changed (their rows' new payments are left unpaid: exit 1)."""
    sb = sandbox_factory(submit_delay=3600, complete_delay=0)
    path = write_job(tmp_path, sb)
    path.write_text(path.read_text().replace("wait_for_final: 2s", "wait_for_final: 0s"))
    first = run(path, state)
    assert (first.exit_code, first.counts) == (0, {"pending": 3})
    rows = tmp_path / "rows.csv"
    rows.write_text(rows.read_text().replace(",1,", ",1,1"))
    path.write_text(path.read_text().replace("wait_for_final: 0s", "wait_for_final: 2s"))
    Admin(sb.url).advance(3600)
    sent = posts(Admin(sb.url))
    second = run(path, state)  # paid as confirmed; the rows' new payments are not made
    assert (second.exit_code, second.counts) == (1, {"changed": 3})
    assert {(r["outcome"], r["status"]) for r in items(state).values()} == {
        ("settled", "70000")}
    assert posts(Admin(sb.url)) == sent
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}


# ---------------------------------------------------------------- Ctrl-C
def test_a_stop_lets_calls_in_flight_finish_and_the_next_run_resumes(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    stop = threading.Event()
    seen: list[tuple[str, str]] = []

    def progress(phase: str, entry: Entry) -> None:
        seen.append((phase, entry.external_id))
        if phase == "confirm":
            stop.set()  # Ctrl-C as the first confirm is recorded, the second in flight

    path = write_job(tmp_path, sb, concurrency=2)
    result = run(path, state, stop=stop, on_progress=progress)
    assert (result.exit_code, result.message) == (1, "interrupted; run again to resume")
    assert sorted(seen[:3]) == [("prepare", "pay-a"), ("prepare", "pay-b"),
                                ("prepare", "pay-c")]
    # Two workers took pay-a and pay-b; whichever finished first stopped the run, so pay-c
    # was never sent; whatever was sent is recorded as the provider knows it, nothing is
    # left in doubt, and nothing was polled.
    paid = confirmed(sb)
    assert "pay-c" not in paid and paid, paid
    assert {e for _, e in seen[3:]} == set(paid)
    assert "POST confirm" in posts(adm) and posts(adm)["POST confirm"] == len(paid)
    assert adm.requests()["counts"].get("GET lookups", 0) == 0
    records = items(state)
    assert {e: (r["step"], r["intent"]) for e, r in records.items()} == {
        e: ("confirmed" if e in paid else "created", None) for e in EVERY}

    again = run(path, state)
    assert (again.exit_code, again.counts) == (0, {"settled": 3})
    assert posts(adm) == {"POST": 9, "POST quotations": 3, "POST create": 3,
                          "POST confirm": 3}
    assert_paid_once(sb, state)


# ---------------------------------------------------------------- provider unreachable
@pytest.mark.parametrize("after", [1, 3], ids=["during-prepare", "before-preflight"])
def test_an_unreachable_provider_ends_the_run_with_75_and_the_next_run_resumes(
        after: int, sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path,
        state: Path) -> None:
    journal = tmp_path / "sandbox.jsonl"
    first_sb = sandbox_factory(submit_delay=0, complete_delay=0, state_file=journal)
    port = int(first_sb.url.rsplit(":", 1)[1])
    prepared: list[str] = []

    def progress(phase: str, entry: Entry) -> None:
        prepared.append(entry.external_id)
        if len(prepared) == after:
            first_sb.stop()  # the provider goes away in the middle of the run

    path = write_job(tmp_path, first_sb, concurrency=1)
    result = run(path, state, on_progress=progress)
    assert (result.exit_code, result.message) == (
        75, "the provider is unreachable; run again later to resume")
    assert prepared[:after] == ["pay-a", "pay-b", "pay-c"][:after]
    assert sorted(e for e, r in items(state).items() if r["step"] == "created") == [
        "pay-a", "pay-b", "pay-c"][:after]
    assert {r["intent"] for r in items(state).values()} == {None}

    back = sandbox_factory(submit_delay=0, complete_delay=0, state_file=journal, port=port)
    again = run(path, state)
    assert (again.exit_code, again.counts) == (0, {"settled": 3})
    assert confirmed(back) == EVERY and created(back) == EVERY
    assert_paid_once(back, state)


# ---------------------------------------------------------------- the retry policy
PROVIDER_ERRORS = [
    (ConnectionRefused, Decision.RETRY, Decision.RETRY),
    (UntrustedCertificate, Decision.STOP, Decision.STOP),  # sending again changes nothing
    (ServiceUnavailable, Decision.RETRY, Decision.RETRY),
    (RateLimited, Decision.RETRY, Decision.RETRY),
    (ResponseLost, Decision.RETRY, Decision.LOOKUP),
    (ProviderTimeout, Decision.RETRY, Decision.LOOKUP),
    (ServerError, Decision.RETRY, Decision.LOOKUP),
    (DuplicateExternalId, Decision.RETRY, Decision.LOOKUP),
    (AuthenticationError, Decision.STOP, Decision.STOP),
    (NotFound, Decision.STOP, Decision.STOP),
    (InvalidRequest, Decision.STOP, Decision.STOP),
    (BusinessRefusal, Decision.STOP, Decision.STOP),
    (AlreadyConfirmed, Decision.STOP, Decision.STOP),
    (QuotationExpired, Decision.STOP, Decision.STOP),
    (InsufficientBalance, Decision.STOP, Decision.STOP),
    (DuplicateWithoutLookup, Decision.STOP, Decision.STOP),
    (ReferenceTaken, Decision.STOP, Decision.STOP),
    (PayRefused, Decision.STOP, Decision.STOP),
    (PayStatusUnknown, Decision.RETRY, Decision.LOOKUP),
    (UnexpectedAnswer, Decision.RETRY, Decision.LOOKUP),
    (ProviderError, Decision.STOP, Decision.STOP),
    (ProviderConnectionError, Decision.STOP, Decision.STOP),
    (ProviderHTTPError, Decision.STOP, Decision.STOP),
]


@pytest.mark.parametrize(("error", "read", "write"), PROVIDER_ERRORS,
                         ids=[e.__name__ for e, _, _ in PROVIDER_ERRORS])
def test_decide(error: type[Exception], read: Decision, write: Decision) -> None:
    exc = error("x")
    assert (decide(exc, idempotent=True), decide(exc, idempotent=False)) == (read, write)


def test_decide_is_known_for_every_provider_error() -> None:
    tree = {cls for cls in vars(errors).values()
            if isinstance(cls, type) and issubclass(cls, ProviderError)}
    assert tree == {error for error, _, _ in PROVIDER_ERRORS}


def test_decide_stops_on_anything_that_is_not_the_providers() -> None:
    assert decide(ValueError("x"), idempotent=True) is Decision.STOP


class Failing:
    """Raises ``error`` the first ``times`` calls, then answers."""

    def __init__(self, error: Exception, times: int) -> None:
        self.error, self.times, self.calls = error, times, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.times:
            raise self.error
        return "answer"


def test_retry_policy_backs_off_up_to_max_wait_then_reraises() -> None:
    waits: list[float] = []
    policy = RetryPolicy(attempts=6, max_wait=3.0, first_wait=0.5, sleep=waits.append)
    error = ServiceUnavailable("later", status=503)
    fn = Failing(error, times=99)
    with pytest.raises(ServiceUnavailable) as raised:
        policy.call(fn, idempotent=False)
    assert raised.value is error
    assert fn.calls == 6 and len(waits) == 5
    # 0.5, 1, 2, 4 -> 3 (capped), 3: each with up to first_wait of jitter, never over max.
    floors = [0.5, 1.0, 2.0, 3.0, 3.0]
    assert all(f <= w <= min(f + 0.5, 3.0) for f, w in zip(floors, waits, strict=True)), waits
    assert waits == sorted(waits)


def test_retry_policy_returns_once_it_works() -> None:
    waits: list[float] = []
    fn = Failing(ConnectionRefused("refused"), times=2)
    assert RetryPolicy(attempts=6, sleep=waits.append).call(fn, idempotent=False) == "answer"
    assert (fn.calls, len(waits)) == (3, 2)


@pytest.mark.parametrize(("error", "idempotent", "calls"), [
    (ResponseLost("lost"), True, 4),  # a read is sent again
    (ResponseLost("lost"), False, 1),  # a write is looked up first: not sent again here
    (ServerError("500", status=500), False, 1),
    (BusinessRefusal("no", status=400, code="1003001"), True, 1),
    (ValueError("bug"), True, 1),
])
def test_retry_policy_follows_decide(error: Exception, idempotent: bool, calls: int) -> None:
    waits: list[float] = []
    fn = Failing(error, times=99)
    with pytest.raises(type(error)):
        RetryPolicy(attempts=4, sleep=waits.append).call(fn, idempotent=idempotent)
    assert (fn.calls, len(waits)) == (calls, calls - 1)


def test_throttle_spaces_requests_with_an_injected_clock() -> None:
    now = [100.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    throttle = Throttle(2, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        throttle()
    assert waits == [0.5, 0.5, 0.5]  # a burst of one second's worth, then 2 per second
    now[0] += 10  # idle: the bucket refills, but only to its capacity
    for _ in range(3):
        throttle()
    assert waits == [0.5, 0.5, 0.5, 0.5]


def test_throttle_below_one_per_second() -> None:
    now = [0.0]
    waits: list[float] = []
    throttle = Throttle(0.5, clock=lambda: now[0], sleep=waits.append)
    throttle()
    throttle()
    assert waits == [2.0]
    with pytest.raises(ValueError, match="positive"):
        Throttle(0)



def test_a_phase_shares_its_items_among_the_threads_and_stops_at_the_first_exception(
        ) -> None:
    """``each`` hands every entry to one of ``workers`` threads of the run's pool (the
    same threads phase after phase), and once a step raises, no thread takes another
    entry: the exception is raised once the steps in flight are done."""
    done: list[tuple[int, str]] = []
    lock = threading.Lock()

    def step(n: int) -> None:
        with lock:
            done.append((n, threading.current_thread().name))

    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="item") as pool:
        each(pool, 3, step, range(50))
        each(pool, 3, step, range(50, 60))
        each(pool, 3, step, [])
        threads = {name for _, name in done}
        assert sorted(n for n, _ in done) == list(range(60))
        assert len(threads) <= 3 and all(name.startswith("item_") for name in threads)

        taken: list[int] = []

        def failing(n: int) -> None:
            taken.append(n)
            if n in (3, 5):
                raise ValueError(f"entry {n}")

        with pytest.raises(ValueError, match="entry 3"):
            each(pool, 1, failing, range(10))
        assert taken == [0, 1, 2, 3]


def test_an_item_not_final_is_polled_again_after_a_wait_growing_by_half_up_to_5s() -> None:
    waits = [poll_wait(polls) for polls in range(1, 11)]
    assert waits == pytest.approx([0.2, 0.3, 0.45, 0.675, 1.0125, 1.51875, 2.278125,
                                   3.4171875, 5.0, 5.0])
