"""The `payout` and `account_transfer` kinds end to end, against a loopback sandbox.

Each test runs a job (the library under `runner run`, or the command line) and judges at the
provider: the payout and transfer requests it holds per external reference, the accounts'
four balances and their entries, the calls it received; then checks that the state database
tells the same story. Requests are validated on the sandbox's next tick
(``validation_delay=0``) unless a test moves its clock itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from account_support import ACCOUNT, balances, bank, entries, onboard, payout, transfer
from conftest import KEY, PATIENCE, SECRET, Admin, Api, ending
from engine_support import cli, items, out_lines, posts, run

from runner.errors import BusinessRefusal, ReferenceTaken
from runner.provider.accounts import AccountClient
from runner.sandbox import RunningSandbox
from runner.state import open_state

ROOT = Path(__file__).resolve().parents[1]
NAME = "acc-2026-11"
PAYOUTS = f"{ACCOUNT}/payout-requests"
OPENING = Decimal("50000.00")

JOB = """\
version: 1
name: {name}
kind: {kind}
provider:
  base_url: {url}
  auth: basic
  api_key: {key}
  api_secret: {secret}
  timeout: {timeout}
items:
  from: rows.csv
  external_id: "{prefix}-{{{{ row.id }}}}"
  template:
{template}
run:
  concurrency: {concurrency}
  wait_for_final: {wait}
  retry: {{attempts: 3, max_wait: 1s}}
"""
TEMPLATES = {
    "payout": ("id,source,bank,amount,currency", """\
    source_account_id: "{{ row.source }}"
    payout_bank_account_id: "{{ row.bank }}"
    payout: {amount: "{{ row.amount }}", currency: "{{ row.currency }}"}
    label: "payout {{ row.id }}"
"""),
    "account_transfer": ("id,source,target,amount,currency", """\
    source_account_id: "{{ row.source }}"
    target_account_id: "{{ row.target }}"
    transfer: {amount: "{{ row.amount }}", currency: "{{ row.currency }}"}
    label: "transfer {{ row.id }}"
"""),
}
# Three payouts from ACC0001 (one naming it by its label) to its open bank account; three
# transfers from ACC0001 to ACC0002 (one by labels). 10 + 20 + 30.25 each way.
ROWS = {
    "payout": [("a", "ACC0001", "PBA0001-1", "10.00"), ("b", "acme-eur-main", "PBA0001-1", "20"),
               ("c", "ACC0001", "PBA0001-1", "30.25")],
    "account_transfer": [("a", "ACC0001", "ACC0002", "10.00"),
                         ("b", "acme-eur-main", "acme-eur-reserve", "20"),
                         ("c", "ACC0001", "ACC0002", "30.25")],
}
TOTAL = Decimal("60.25")
EVERY = {"acc-a": 1, "acc-b": 1, "acc-c": 1}
KINDS = list(TEMPLATES)


@pytest.fixture
def sb(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return sandbox_factory(validation_delay=0)


@pytest.fixture
def api(sb: RunningSandbox) -> Api:
    return Api(sb.url, (KEY, SECRET))


def write_job(folder: Path, sandbox: RunningSandbox, kind: str,
              rows: list[tuple[str, ...]] | None = None, *, concurrency: int = 2,
              wait: str = "2s", timeout: str = "60s") -> Path:
    header, template = TEMPLATES[kind]
    lines = [",".join((*r, "EUR") if len(r) == 4 else r) for r in (rows or ROWS[kind])]
    (folder / "rows.csv").write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    path = folder / "job.yaml"
    path.write_text(JOB.format(name=NAME, kind=kind, url=sandbox.url, key=KEY, secret=SECRET,
                               timeout=timeout, prefix="acc", template=template,
                               concurrency=concurrency, wait=wait), encoding="utf-8")
    return path


# ---------------------------------------------------------------- what the provider holds
def requests_at(sb: RunningSandbox, kind: str) -> Counter[str]:
    """Payout requests, or the client's transfer requests (not those under a payout), per
    external reference."""
    table = "payout_requests" if kind == "payout" else "transfer_requests"
    store = sb.state.store
    with store.lock:
        return Counter(r["external_reference"] for r in store.tables[table].values()
                       if r.get("type") != "Payout")


def by_reference(sb: RunningSandbox, kind: str) -> dict[str, dict[str, Any]]:
    table = "payout_requests" if kind == "payout" else "transfer_requests"
    store = sb.state.store
    with store.lock:
        return {r["external_reference"]: dict(r) for r in store.tables[table].values()
                if r.get("type") != "Payout"}


def moved(before: dict[str, Decimal], after: dict[str, Decimal]) -> dict[str, Decimal]:
    return {k: after[k] - before[k] for k in ("AVAILABLE", "UP_TO_DATE", "EXPECTED",
                                              "WAITING_FOR_VALIDATION")}


def settled_by(amount: Decimal) -> dict[str, Decimal]:
    """How the four balances move once requests of ``amount`` are validated."""
    return {"AVAILABLE": amount, "UP_TO_DATE": amount, "EXPECTED": amount,
            "WAITING_FOR_VALIDATION": Decimal(0)}


def steps(state: Path, external_id: str) -> list[tuple[str, str | None, str | None]]:
    store = open_state(state)
    try:
        return [(a.step, a.result, a.code) for a in store.attempts(external_id)]
    finally:
        store.close()


def assert_settled(sb: RunningSandbox, state: Path, kind: str,
                   expected: dict[str, int] = EVERY) -> None:
    """Each item has exactly one request at the provider, final there, and the state says
    the same: settled, final, its status, the request's id in its details."""
    assert requests_at(sb, kind) == expected
    held = by_reference(sb, kind)
    records = items(state, NAME)
    final = "charged" if kind == "payout" else "Validated"
    noun = "payout request" if kind == "payout" else "transfer request"
    for external_id in expected:
        r, request = records[external_id], held[external_id]
        assert request["status"] == final
        money = request["payout" if kind == "payout" else "transfer"]
        assert (r["outcome"], r["step"], r["intent"], r["status"], r["provider_ref"],
                r["source_amount"], r["source_currency"]) == (
            "settled", "final", None, final, external_id, str(money["amount"]), "EUR"), r
        assert json.loads(r["details"]) == {noun: request["id"]}


def no_faults(admin: Admin) -> None:
    assert admin.api.call("DELETE", "/faults").status_code == 200


# ---------------------------------------------------------------- the client
def test_the_account_client_reads_balances_entries_and_requests(sb: RunningSandbox,
                                                                api: Api) -> None:
    client = AccountClient(sb.url, KEY, SECRET)
    four = client.balances("acme-eur-main")
    assert [b["type"] for b in four] == ["AVAILABLE", "EXPECTED", "WAITING_FOR_VALIDATION",
                                         "UP_TO_DATE"]
    for b in four:
        assert client.balance("ACC0001", b["type"])["balance"] == b["balance"]
    assert four[0]["balance"] == {"amount": OPENING, "currency": "EUR"}
    for n in range(5):
        transfer(api, f"t{n}", f"{n + 1}.00")
    full = list(client.entries("ACC0002"))
    assert [e["entry"]["amount"] for e in full] == [Decimal(f"{n}.00") for n in range(1, 6)]
    # Only what was not read yet, whatever the page size and where the pages break.
    for since in range(7):
        assert list(client.entries("acme-eur-reserve", since, per_page=2)) == full[since:]
    made = client.create_payout_request({
        "external_reference": "ref 1?&", "payout": {"amount": Decimal("1.50"), "currency": "EUR"},
        "label": "x", "source_account_id": "ACC0001", "payout_bank_account_id": "PBA0001-1"})
    assert client.find_payout_request("ref 1?&")["id"] == made["id"]
    assert client.payout_request("ref 1?&")["id"] == made["id"]
    assert client.find_payout_request("nope") is None
    assert client.find_transfer_request("t3")["transfer"]["amount"] == Decimal("4.00")
    assert client.find_transfer_request("nope") is None
    with pytest.raises(BusinessRefusal) as refused:
        client.create_transfer_request({
            "external_reference": "t3", "transfer": {"amount": 1, "currency": "EUR"},
            "label": "x", "source_account_id": "ACC0001", "target_account_id": "ACC0002",
            "type": "ScheduledTransferOut"})
    assert isinstance(refused.value, ReferenceTaken)
    with pytest.raises(BusinessRefusal) as blocked:
        client.create_payout_request({
            "external_reference": "b", "payout": {"amount": 1, "currency": "EUR"},
            "label": "x", "source_account_id": "ACC0001", "payout_bank_account_id": "PBA0001-2"})
    assert blocked.value.code == "2001201" and not isinstance(blocked.value, ReferenceTaken)


# ---------------------------------------------------------------- happy paths
@pytest.mark.parametrize("kind", KINDS)
def test_each_item_is_one_request_and_the_balances_move_exactly(
        kind: str, sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path,
        state: Path) -> None:
    before = {a: balances(api, a) for a in ("ACC0001", "ACC0002")}
    path = write_job(tmp_path, sb, kind)
    first = run(path, state)
    assert (first.exit_code, first.message, first.counts) == (0, "", {"settled": 3})
    assert_settled(sb, state, kind)
    assert posts(adm) == {"POST": 3, "POST accounts": 3}
    for external_id in EVERY:
        assert steps(state, external_id) == [
            ("payout_request" if kind == "payout" else "transfer_request", "ok", None)]
    after = {a: balances(api, a) for a in ("ACC0001", "ACC0002")}
    assert moved(before["ACC0001"], after["ACC0001"]) == settled_by(-TOTAL)
    assert moved(before["ACC0002"], after["ACC0002"]) == settled_by(
        TOTAL if kind == "account_transfer" else Decimal(0))
    assert after["ACC0001"]["UP_TO_DATE"] == OPENING - TOTAL

    # A finished job sends nothing again.
    second = run(path, state)
    assert (second.exit_code, second.counts) == (0, {"settled": 3})
    assert posts(adm)["POST"] == 3
    assert balances(api, "ACC0001") == after["ACC0001"]


def test_a_settled_transfer_has_its_two_entries_at_the_provider(
        sb: RunningSandbox, api: Api, tmp_path: Path, state: Path) -> None:
    assert run(write_job(tmp_path, sb, "account_transfer"), state).exit_code == 0
    held = by_reference(sb, "account_transfer")
    for account, way, other in (("ACC0001", "debit", "ACC0002"),
                                ("ACC0002", "credit", "ACC0001")):
        lines = {e["transfer_request_id"]: e for e in entries(api, account)}
        for reference, request in held.items():
            line = lines[request["id"]]
            assert (line["credit_debit_indicator"], line["entry"], line["counterpart_account_id"],
                    line["status"]) == (way, request["transfer"], other, "VALIDATED"), reference


def test_wrong_or_missing_entries_fail_the_transfer(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path, state: Path) -> None:
    sb = sandbox_factory(validation_delay=3600)
    path = write_job(tmp_path, sb, "account_transfer", wait="0s")
    first = run(path, state)
    assert first.counts == {"pending": 3}  # made, waiting for validation
    held = by_reference(sb, "account_transfer")
    store = sb.state.store
    with store.lock:  # a provider whose statements do not say what the transfers did
        for e in store.tables["entries"].values():
            if e["transfer_request_id"] == held["acc-a"]["id"] and e["account_id"] == "ACC0002":
                e["entry"] = {"amount": Decimal("1.00"), "currency": "EUR"}
            if e["transfer_request_id"] == held["acc-b"]["id"] and e["account_id"] == "ACC0001":
                e["transfer_request_id"] = "TRF9999"
    Admin(sb.url).advance(3600)
    second = run(path, state)
    assert (second.exit_code, second.counts) == (1, {"settled": 1, "failed": 2})
    records = items(state, NAME)
    a, b = held["acc-a"]["id"], held["acc-b"]["id"]
    assert (records["acc-a"]["outcome"], records["acc-a"]["step"], records["acc-a"]["error_code"],
            records["acc-a"]["error_message"]) == (
        "failed", "final", "entries",
        f"the entry of {a} on ACC0002 is a credit of 1.00 EUR with ACC0001, expected a credit "
        f"of 10.00 EUR with ACC0001")
    assert records["acc-b"]["error_message"] == \
        f"0 entries of {b} on ACC0001, expected one debit"
    assert records["acc-c"]["outcome"] == "settled"
    assert requests_at(sb, "account_transfer") == EVERY


def test_a_status_runner_does_not_know_is_left_for_a_person_and_followed_again(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path, state: Path) -> None:
    sb = sandbox_factory(validation_delay=3600)
    path = write_job(tmp_path, sb, "payout", wait="0s")
    assert run(path, state).counts == {"pending": 3}
    store = sb.state.store
    with store.lock:
        for r in store.tables["payout_requests"].values():
            if r["external_reference"] == "acc-a":
                r["status"] = "Suspended"
    second = run(path, state)
    assert (second.exit_code, second.counts) == (1, {"unknown": 1, "pending": 2})
    r = items(state, NAME)["acc-a"]
    assert (r["step"], r["status"], r["error_code"], r["error_message"]) == (
        "confirmed", "Suspended", "status",
        "payout request acc-a has status 'Suspended', which runner does not know: check it "
        "at the provider")
    Admin(sb.url).advance(3600)  # the sandbox's clock charges it after all
    third = run(path, state)
    assert (third.exit_code, third.counts) == (0, {"settled": 3})
    assert_settled(sb, state, "payout")


# ---------------------------------------------------------------- validation
def test_items_the_accounts_cannot_take_are_refused_before_anything_is_sent(
        sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path, state: Path) -> None:
    us = onboard(api, "Initrode", template="TPL-US")["id"]
    path = write_job(tmp_path, sb, "account_transfer", [
        ("ok", "ACC0001", "ACC0002", "10.00", "EUR"),
        ("unknown", "ACC0009", "ACC0002", "10.00", "EUR"),
        ("theirs", "ACC0001", "ACC0003", "10.00", "EUR"),
        ("dollars", "ACC0001", "ACC0002", "10.00", "USD"),
        ("cents", "ACC0001", "ACC0002", "10.005", "EUR"),
        ("same", "ACC0001", "ACC0001", "10.00", "EUR"),
        ("usd", "ACC0001", us, "10.00", "EUR"),
        ("zero", "ACC0001", "ACC0002", "0", "EUR"),
    ])
    result = cli("validate", str(path), "--state", str(state))
    assert result.exit_code == 2
    lines = out_lines(result)
    rows = tmp_path / "rows.csv"
    assert lines[:7] == [
        f"{rows}:3: source_account_id: account 'ACC0009' does not exist",
        f"{rows}:4: target_account_id: account 'ACC0003' is not open to these credentials "
        f"(1000403 Access to the resource is forbidden: ACC0003 belongs to another "
        f"integrator)",
        f"{rows}:5: transfer.currency: account ACC0001 holds EUR, not USD",
        f"{rows}:6: transfer.amount: at most 2 decimals, got 10.005",
        f"{rows}:7: target_account_id: the same account as source_account_id",
        f"{rows}:8: target_account_id: account {us} holds USD, not EUR",
        f"{rows}:9: transfer.amount: must be greater than 0, got 0",
    ]
    assert lines[7] == f"{path}: 8 items, 1 valid, 7 invalid; EUR 10.00 over 1 item"

    sent = posts(adm)  # the onboarding of the USD account
    ran = cli("run", str(path), "--yes", "--state", str(state))
    assert ran.exit_code == 2
    assert posts(adm) == sent  # nothing was sent


def test_a_blocked_bank_account_is_refused_at_validation_and_nothing_is_sent(
        sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path, state: Path) -> None:
    # The account's payout bank accounts are read (GET /v1/onboarding/accounts/{id}) before
    # anything is sent: a blocked one, or one of another account, is refused there.
    before = balances(api, "ACC0001")
    path = write_job(tmp_path, sb, "payout", [("a", "ACC0001", "PBA0001-1", "10.00"),
                                              ("b", "ACC0001", "PBA0001-2", "20.00"),
                                              ("c", "ACC0001", "PBA0002-1", "30.00")])
    result = run(path, state)
    assert result.exit_code == 2
    assert result.report is not None
    assert [(p.row, p.field, p.message) for p in result.report.problems] == [
        (3, "payout_bank_account_id", "PBA0001-2 is blocked"),
        (4, "payout_bank_account_id",
         "PBA0002-1 is not a payout bank account of ACC0001 (it has: PBA0001-1, PBA0001-2)"),
    ]
    assert posts(adm) == {}
    assert requests_at(sb, "payout") == {}
    assert balances(api, "ACC0001") == before


# ---------------------------------------------------------------- pre-flight
def test_the_preflight_sends_nothing_when_an_account_cannot_cover_its_items(
        sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path, state: Path) -> None:
    # ACC0001 covers its own items easily; ACC0002 holds nothing.
    path = write_job(tmp_path, sb, "payout", [("a", "ACC0001", "PBA0001-1", "100.00"),
                                              ("b", "ACC0002", "PBA0002-1", "50.00"),
                                              ("c", "ACC0002", "PBA0002-1", "25.00")])
    result = run(path, state)
    assert (result.exit_code, result.message) == (
        4, "ACC0002 EUR 75.00 needed, 0.00 available: nothing was sent "
           "(--allow-partial pays what the balance covers)")
    assert posts(adm) == {}
    assert requests_at(sb, "payout") == {}


def test_allow_partial_sends_what_the_available_balance_covers(
        sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path, state: Path) -> None:
    path = write_job(tmp_path, sb, "payout", [("a", "ACC0001", "PBA0001-1", "30000.00"),
                                              ("b", "ACC0001", "PBA0001-1", "25000.00")],
                     concurrency=1)
    refused = run(path, state)
    assert (refused.exit_code, refused.message) == (
        4, "ACC0001 EUR 55,000.00 needed, 50,000.00 available: nothing was sent "
           "(--allow-partial pays what the balance covers)")
    assert posts(adm) == {}

    partial = run(path, state, allow_partial=True)
    assert (partial.exit_code, partial.counts) == (1, {"settled": 1, "failed": 1})
    records = items(state, NAME)
    assert (records["acc-b"]["error_code"], records["acc-b"]["error_message"]) == (
        "2001201", "Operation not allowed: insufficient AVAILABLE balance (20000.00 EUR)")
    assert requests_at(sb, "payout") == {"acc-a": 1}
    assert balances(api, "ACC0001")["UP_TO_DATE"] == Decimal("20000.00")


# ---------------------------------------------------------------- doubt and refusals
@pytest.mark.parametrize("kind", KINDS)
def test_a_lost_answer_is_looked_up_and_the_request_made_once(
        kind: str, sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path,
        state: Path) -> None:
    adm.faults({"accounts": {"lost_next": 1}})
    result = run(write_job(tmp_path, sb, kind, concurrency=1), state)
    assert (result.exit_code, result.counts) == (0, {"settled": 3})
    step = "payout_request" if kind == "payout" else "transfer_request"
    assert steps(state, "acc-a") == [(step, "in_doubt", None)]  # found: not sent again
    assert posts(adm)["POST accounts"] == 3
    recent = [(c["method"], c["path"]) for c in adm.requests()["recent"]]
    path = PAYOUTS if kind == "payout" else f"{ACCOUNT}/transfer-requests"
    at = recent.index(("POST", path))
    assert recent[at + 1] == ("GET", f"{path}/acc-a"), recent
    assert_settled(sb, state, kind)
    assert balances(api, "ACC0001")["UP_TO_DATE"] == OPENING - TOTAL


FAULTS = {
    # 500, nothing done: looked up, clearly not found, sent again with the same reference
    "error": ({"accounts": {"error_next": 1}}, [("in_doubt", "1000500"), ("ok", None)]),
    # 503: retried as it is, within the one attempt
    "unavailable": ({"accounts": {"unavailable_next": 2}}, [("ok", None)]),
    # no answer in time, the work done: found by the lookup
    "timeout": ({"accounts": {"slow_next": 1}}, [("in_doubt", None)]),
    # reads failing: retried
    "lookups": ({"lookups": {"error_next": 2}}, [("ok", None)]),
}


@pytest.mark.parametrize("case", list(FAULTS))
@pytest.mark.parametrize("kind", KINDS)
def test_errors_unavailability_and_timeouts_make_each_request_once(
        kind: str, case: str, sb: RunningSandbox, adm: Admin, tmp_path: Path,
        state: Path) -> None:
    fault, expected = FAULTS[case]
    adm.faults(fault, slow_seconds=1.5)
    result = run(write_job(tmp_path, sb, kind, concurrency=1, timeout="0.5s"), state)
    assert (result.exit_code, result.counts) == (0, {"settled": 3})
    step = "payout_request" if kind == "payout" else "transfer_request"
    assert steps(state, "acc-a") == [(step, *e) for e in expected]
    assert_settled(sb, state, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_a_doubt_left_by_a_run_is_settled_by_the_next_without_sending_again(
        kind: str, sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    path = write_job(tmp_path, sb, kind, concurrency=1, wait="0s")
    adm.faults({"accounts": {"lost_next": 1}, "lookups": {"error_rate": 1.0}})
    first = run(path, state)
    assert (first.exit_code, first.counts) == (1, {"in_doubt": 1, "pending": 2})
    assert items(state, NAME)["acc-a"]["intent"] is not None
    no_faults(adm)
    second = run(path, state)
    assert (second.exit_code, second.counts) == (0, {"settled": 3})
    assert posts(adm)["POST accounts"] == 3  # the lost one was found, not sent again
    assert_settled(sb, state, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_a_reference_already_used_for_this_item_is_adopted(
        kind: str, sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path,
        state: Path) -> None:
    # Made earlier (a lost state database, another tool), with the accounts by id where the
    # item names them by label.
    if kind == "payout":
        payout(api, "acc-b", "20.00", source="ACC0001", bank="PBA0001-1")
    else:
        transfer(api, "acc-b", "20.00", source="ACC0001", target="ACC0002")
    result = run(write_job(tmp_path, sb, kind, concurrency=1), state)
    assert (result.exit_code, result.counts) == (0, {"settled": 3})
    step = "payout_request" if kind == "payout" else "transfer_request"
    assert steps(state, "acc-b") == [(step, "error", "2001201")]
    assert_settled(sb, state, kind)
    assert balances(api, "ACC0001")["UP_TO_DATE"] == OPENING - TOTAL


def test_a_used_reference_that_cannot_be_read_stays_in_doubt_until_it_can(
        sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path, state: Path) -> None:
    payout(api, "acc-b", "20.00")
    path = write_job(tmp_path, sb, "payout", concurrency=1, wait="0s")
    adm.faults({"lookups": {"error_rate": 1.0}})
    first = run(path, state)
    assert (first.exit_code, first.counts) == (1, {"in_doubt": 1, "pending": 2})
    assert items(state, NAME)["acc-b"]["intent"] == "payout_request"
    no_faults(adm)
    second = run(path, state)
    assert (second.exit_code, second.counts) == (0, {"settled": 3})
    assert steps(state, "acc-b") == [("payout_request", "error", "2001201")]  # sent once
    assert_settled(sb, state, "payout")


@pytest.mark.parametrize("kind", KINDS)
def test_a_reference_used_for_something_else_is_a_conflict(
        kind: str, sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path,
        state: Path) -> None:
    theirs = (payout if kind == "payout" else transfer)(api, "acc-b", "21.00")
    path = write_job(tmp_path, sb, kind, concurrency=1)
    before = balances(api, "ACC0001")["AVAILABLE"]
    result = run(path, state)
    assert (result.exit_code, result.counts) == (1, {"settled": 2, "conflict": 1})
    r = items(state, NAME)["acc-b"]
    noun, field = ("payout request", "payout") if kind == "payout" else \
        ("transfer request", "transfer")
    assert (r["outcome"], r["error_code"], r["error_message"]) == (
        "conflict", "conflict", f"{noun} acc-b at the provider does not match this item: "
                                f"{field} 21.00 EUR, the item 20 EUR")
    assert by_reference(sb, kind)["acc-b"]["id"] == theirs["id"]
    assert requests_at(sb, kind) == EVERY
    assert before - balances(api, "ACC0001")["AVAILABLE"] == Decimal("40.25")  # a and c
    # A conflict is left for a person: the next run sends nothing for it.
    again = run(path, state)
    assert (again.exit_code, again.counts) == (1, {"settled": 2, "conflict": 1})
    assert posts(adm)["POST accounts"] == 4  # theirs, then a and c


def test_the_receiving_banks_test_triggers(sb: RunningSandbox, adm: Admin, api: Api,
                                            tmp_path: Path, state: Path) -> None:
    account = onboard(api, "Hooli", banks=[bank("ok"),
                                           bank("refuses", "30006000011234567999301"),
                                           bank("in-doubt", "30006000011234567999401")])
    ok, refusing, in_doubt = (b["id"] for b in account["payout_bank_accounts"])
    transfer(api, "fund", "100.00", target=account["id"])
    adm.advance(1)
    assert balances(api, account["id"])["AVAILABLE"] == Decimal("100.00")
    result = run(write_job(tmp_path, sb, "payout", [("a", account["id"], ok, "10.00"),
                                                    ("b", account["id"], refusing, "20.00"),
                                                    ("c", account["id"], in_doubt, "30.00")]),
                 state)
    assert (result.exit_code, result.counts) == (1, {"settled": 2, "failed": 1})
    records = items(state, NAME)
    assert (records["acc-b"]["outcome"], records["acc-b"]["error_code"],
            records["acc-b"]["error_message"]) == (
        "failed", "2001301",
        "Operation refused by the remote payment server: payout refused by the receiving bank")
    assert steps(state, "acc-b") == [("payout_request", "error", "2001301")]
    # 2001401: the payout was recorded; the lookup by reference found it.
    assert steps(state, "acc-c") == [("payout_request", "in_doubt", "2001401")]
    assert_settled(sb, state, "payout", {"acc-a": 1, "acc-c": 1})
    assert balances(api, account["id"])["UP_TO_DATE"] == Decimal("60.00")


def test_an_unavailable_receiving_bank_ends_the_run_with_75(
        sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path, state: Path) -> None:
    account = onboard(api, "Hooli", banks=[bank("later", "30006000011234567999501")])
    transfer(api, "fund", "1.00", target=account["id"])
    adm.advance(1)
    path = write_job(tmp_path, sb, "payout", [
        ("a", account["id"], account["payout_bank_accounts"][0]["id"], "0.50")])
    result = run(path, state)
    assert (result.exit_code, result.message) == (
        75, "the provider is unreachable; run again later to resume")
    # 2001501 is retried as it is (nothing was done), then left for a later run.
    assert steps(state, "acc-a") == [("payout_request", "error", "2001501")]
    assert posts(adm)["POST accounts"] == 4  # the fund transfer, and 3 tries
    r = items(state, NAME)["acc-a"]
    assert (r["outcome"], r["step"], r["intent"]) == ("pending", "new", None)
    assert requests_at(sb, "payout") == {}


# ---------------------------------------------------------------- the examples
def test_the_example_jobs_run_to_exit_0_and_again(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RUNNER_BASE_URL", "RUNNER_API_KEY", "RUNNER_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(ROOT)
    state = tmp_path / "s.sqlite"  # the embedded sandbox keeps its state beside it
    examples = {"jobs/payouts.yaml": ("payouts-2026-11", 4, "6,345.75"),
                "jobs/transfers.yaml": ("transfers-2026-11", 2, "7,500.00")}
    for _ in range(2):  # the second time, everything is found settled
        for job, (name, count, sent) in examples.items():
            result = cli("run", job, "--yes", "--state", str(state))
            assert (result.exit_code, out_lines(result)) == (0, [
                f"{name}: {count} items: {count} settled", f"  EUR: sent {sent}"])
    assert {(r["outcome"], r["status"]) for r in items(state, "payouts-2026-11").values()} \
        == {("settled", "charged")}
    assert {(r["outcome"], r["status"]) for r in items(state, "transfers-2026-11").values()} \
        == {("settled", "Validated")}
    # The provider shows no fee for payouts: the summary says what was sent, not "fees 0".
    report = cli("report", "jobs/payouts.yaml", "--state", str(state)).stdout
    assert "  EUR  sent 6,345.75  received 6,345.75\n" in report


# ---------------------------------------------------------------- kill -9, then resume
def runner_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_killed_with_sigkill_is_resumed_and_pays_each_item_once(
        kind: str, sb: RunningSandbox, adm: Admin, api: Api, tmp_path: Path, state: Path
        ) -> None:
    count = 12
    target = "PBA0001-1" if kind == "payout" else "ACC0002"
    rows = [(f"{n:02d}", "ACC0001", target, f"{n}.00") for n in range(1, count + 1)]
    path = write_job(tmp_path, sb, kind, rows, concurrency=2)
    expected = {f"acc-{n:02d}": 1 for n in range(1, count + 1)}
    total = Decimal(sum(range(1, count + 1)))
    adm.faults({"*": {"latency_ms": 5}})
    command = [sys.executable, "-m", "runner", "run", str(path), "--yes", "--state",
               str(state)]
    posts_before = sb.state.faults.counts["POST"]
    with ending(subprocess.Popen(command, cwd=tmp_path, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 env=runner_env())) as proc:
        deadline = time.monotonic() + PATIENCE
        while sb.state.faults.counts["POST"] - posts_before < 3:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "the run sent nothing"
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    time.sleep(0.1)  # what the sandbox had received when the run died, done
    made = sum(requests_at(sb, kind).values())
    assert 1 <= made < count, made  # killed half-way: work was left

    no_faults(adm)
    resumed = cli("run", str(path), "--yes", "--state", str(state))  # the same command
    assert resumed.exit_code == 0, resumed.output
    assert out_lines(resumed)[0] == f"{NAME}: {count} items: {count} settled"
    assert_settled(sb, state, kind, expected)
    assert balances(api, "ACC0001")["UP_TO_DATE"] == OPENING - total
    # Whatever the kill interrupted, no item was asked for twice.
    store = open_state(state)
    try:
        for external_id in expected:
            ok = [a for a in store.attempts(external_id) if a.result == "ok"]
            assert len(ok) <= 1, external_id
    finally:
        store.close()


# ---------------------------------------------------------------- another's record (rule 8)
@pytest.mark.parametrize("matches_ids", [True, False], ids=["provider-matches-ids", "faithful"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_reference_shaped_like_an_id_never_adopts_another_request(
        kind: str, matches_ids: bool, sandbox_factory: Callable[..., RunningSandbox],
        tmp_path: Path, state: Path) -> None:
    """The item's external reference is another request's id; its POST is answered 500
    before anything is done. A provider whose lookup also matches ids answers that other
    request (same amount, accounts and type): it is not adopted, the item needs a person,
    both requests named, and nothing is reported paid. The documents' lookup (by reference
    only) finds nothing: the request is made, once."""
    sb = sandbox_factory(validation_delay=0, lookups_match_ids=matches_ids)
    api, adm = Api(sb.url, (KEY, SECRET)), Admin(sb.url)
    make, target = (payout, "PBA0001-1") if kind == "payout" else (transfer, "ACC0002")
    other = make(api, "someone-else", "10.00")
    path = write_job(tmp_path, sb, kind, [(other["id"], "ACC0001", target, "10.00")])
    path.write_text(path.read_text().replace('"acc-{{ row.id }}"', '"{{ row.id }}"'))
    adm.faults({"accounts": {"error_next": 1}})
    before = balances(api, "ACC0001")
    ran = cli("run", str(path), "--yes", "--state", str(state))
    status = cli("status", str(path), "--state", str(state))
    reconciled = cli("reconcile", str(path), "--state", str(state))
    noun = "payout request" if kind == "payout" else "transfer request"
    if not matches_ids:
        assert (ran.exit_code, status.exit_code, reconciled.exit_code) == (0, 0, 0)
        assert requests_at(sb, kind) == {"someone-else": 1, other["id"]: 1}
        assert items(state, NAME)[other["id"]]["outcome"] == "settled"
        return
    assert (ran.exit_code, status.exit_code, reconciled.exit_code) == (1, 1, 1)
    assert requests_at(sb, kind) == {"someone-else": 1}  # nothing made for the item
    assert balances(api, "ACC0001") == before
    record = items(state, NAME)[other["id"]]
    assert (record["outcome"], record["step"], record["intent"], record["error_code"],
            record["transaction_id"], record["source_amount"]) == (
        "conflict", "new", None, "other_record", None, None)
    why = (f"the lookup of {noun} {other['id']!r} answered {noun} {other['id']}, whose "
           f"external_reference is 'someone-else': another's, not adopted; whether this "
           f"item's {noun} (external_reference {other['id']!r}) was made is not known: "
           f"check both at the provider")
    assert record["error_message"] == why
    assert f"  needs a person {other['id']} (row 2): {why}" in out_lines(status)
    assert out_lines(reconciled)[0] == \
        f"{NAME} ({kind}): 1 item(s) compared with the provider's records: 1 difference(s)"
    assert out_lines(reconciled)[1] == (f"  {other['id']} (row 2): another's record: the "
                                        f"state says conflict, the provider {why}")


# ---------------------------------------------------------------- reconciliation
@pytest.mark.parametrize("kind", KINDS)
def test_reconcile_compares_the_requests_and_the_source_accounts_statement(
        kind: str, sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    path = write_job(tmp_path, sb, kind)
    assert run(path, state).counts == {"settled": 3}
    sent = posts(adm)
    result = cli("reconcile", str(path), "--state", str(state))
    assert (result.exit_code, out_lines(result)) == (0, [
        f"{NAME} ({kind}): 3 item(s) compared with the provider's records: all agree",
        "  EUR: 3 settled item(s): 60.25 in the state, 60.25 in the provider's records: "
        "agree",
        "  ACC0001 EUR: 60.25 in the state, 60.25 debited on the account's statement: "
        "agree"])
    assert posts(adm) == sent
