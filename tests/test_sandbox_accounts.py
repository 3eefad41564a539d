"""The collection service's accounts (document 1) over real HTTP: the seeded accounts, the four
balances and the combined list, entries and their pagination, transfer and payout requests
with their retrieval by external reference, the validation on the sandbox clock, the balances
against the entries at every stage, every refusal with its code, the payout test triggers,
Basic-only authentication, faults, the state file and the OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests
from account_support import (
    ACCOUNT,
    BALANCE_PATHS,
    BALANCE_TYPES,
    ONBOARDING,
    OPENING,
    bank,
    consistent,
    created,
    entries,
    fetched,
    iban,
    money,
    onboard,
    payout,
    payout_body,
    refused,
    transfer,
    transfer_body,
)
from conftest import KEY, SECRET, Admin, Api, body

from runner.provider.auth import DigestAuth
from runner.sandbox import RunningSandbox

TRANSFERS = f"{ACCOUNT}/transfer-requests"
PAYOUTS = f"{ACCOUNT}/payout-requests"
ZERO = {kind: Decimal("0.00") for kind in BALANCE_TYPES}


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    """Validation waits 60 s on the sandbox clock: tests move it with ``admin.advance``."""
    return sandbox_factory(validation_delay=60.0)


def settled(amount: str) -> dict[str, Decimal]:
    """The four balances of an account whose entries are all validated."""
    return {"AVAILABLE": Decimal(amount), "EXPECTED": Decimal(amount),
            "WAITING_FOR_VALIDATION": Decimal("0.00"), "UP_TO_DATE": Decimal(amount)}


# ---------------------------------------------------------------- seeded accounts
def test_seeded_accounts_have_their_balances_by_id_and_by_label(api: Api) -> None:
    r = api.get(f"{ACCOUNT}/accounts/ACC0001/balances")
    assert r.status_code == 201  # as the document shows, for a GET
    found = body(r)["balances"]
    assert [b["type"] for b in found] == BALANCE_TYPES
    for b in found:
        assert set(b) == {"type", "date", "last_change_date", "balance"}
        assert b["balance"]["currency"] == "EUR"
        assert b["last_change_date"] <= b["date"]
    assert consistent(api, "ACC0001") == settled("50000.00")
    assert consistent(api, "acme-eur-main") == settled("50000.00")
    assert consistent(api, "ACC0002") == ZERO
    assert consistent(api, "acme-eur-reserve") == ZERO
    for segment, kind in BALANCE_PATHS.items():
        r = api.get(f"{ACCOUNT}/accounts/acme-eur-reserve/balances/{segment}")
        assert r.status_code == 201
        assert body(r)["type"] == kind
        assert body(r)["balance"] == money("0.00")


def test_the_opening_balance_is_one_validated_entry(api: Api) -> None:
    [opening] = entries(api, "ACC0001")
    assert opening == {
        "account_id": "ACC0001", "entry": money("50000.00"), "counterpart_account_id": None,
        "creation_date": opening["creation_date"], "credit_debit_indicator": "credit",
        "label": "Opening balance", "status": "VALIDATED", "transfer_request_id": None,
        "validation_date": opening["creation_date"]}
    assert entries(api, "ACC0002") == []


# ---------------------------------------------------------------- transfer requests
def test_a_transfer_writes_two_entries_at_once_and_is_validated_on_the_clock(
        api: Api, admin: Admin) -> None:
    sent = transfer_body("tr-1", "1200.50", custom_data="float for November")
    r = api.post(TRANSFERS, sent)
    assert r.status_code == 201, r.text
    made = body(r)
    assert made == {
        "id": made["id"], "transfer": money("1200.50"), "external_reference": "tr-1",
        "label": "transfer tr-1", "source_account_id": "ACC0001",
        "target_account_id": "ACC0002", "type": "ScheduledTransferOut",
        "custom_data": "float for November", "creation_date": made["creation_date"],
        "status": "WaitingForValidation", "validation_date": None, "related": []}
    assert made["id"].startswith("TRF")
    debit = entries(api, "ACC0001")[-1]
    [credit] = entries(api, "ACC0002")
    for e, way, other in ((debit, "debit", "ACC0002"), (credit, "credit", "ACC0001")):
        assert (e["credit_debit_indicator"], e["counterpart_account_id"], e["entry"],
                e["status"], e["transfer_request_id"], e["label"], e["validation_date"]) == \
            (way, other, money("1200.50"), "WAITINGFORVALIDATION", made["id"], "transfer tr-1",
             None)
        assert e["creation_date"] == made["creation_date"]
    # The debit is reserved at once; the credit is expected but not available yet.
    assert consistent(api, "ACC0001") == {
        "AVAILABLE": Decimal("48799.50"), "EXPECTED": Decimal("48799.50"),
        "WAITING_FOR_VALIDATION": Decimal("-1200.50"), "UP_TO_DATE": OPENING}
    assert consistent(api, "ACC0002") == {
        "AVAILABLE": Decimal("0.00"), "EXPECTED": Decimal("1200.50"),
        "WAITING_FOR_VALIDATION": Decimal("1200.50"), "UP_TO_DATE": Decimal("0.00")}

    admin.advance(50)
    assert fetched(api, f"{TRANSFERS}/tr-1")["status"] == "WaitingForValidation"
    admin.advance(10)
    done = fetched(api, f"{TRANSFERS}/tr-1")
    assert (done["status"], done["id"]) == ("Validated", made["id"])
    assert done["validation_date"] >= made["creation_date"]
    for e in (entries(api, "ACC0001")[-1], entries(api, "ACC0002")[0]):
        assert (e["status"], e["validation_date"]) == ("VALIDATED", done["validation_date"])
    assert consistent(api, "ACC0001") == settled("48799.50")
    assert consistent(api, "ACC0002") == settled("1200.50")
    last = fetched(api, f"{ACCOUNT}/accounts/ACC0002/balances/uptodate")
    assert last["last_change_date"] == done["validation_date"]
    assert last["date"] >= last["last_change_date"]


def test_transfers_are_addressed_by_label_and_by_reference(api: Api) -> None:
    made = transfer(api, "tr-label", "10", source="acme-eur-main", target="acme-eur-reserve")
    assert (made["source_account_id"], made["target_account_id"]) == ("ACC0001", "ACC0002")
    assert made["transfer"] == money("10.00")
    assert fetched(api, f"{TRANSFERS}/tr-label") == made
    # {externalId} is the external reference only: an id is no reference of any request.
    refused(api.get(f"{TRANSFERS}/{made['id']}"), 404, "1000404", made["id"])
    refused(api.get(f"{TRANSFERS}/tr-unknown"), 404, "1000404", "tr-unknown")


def test_lookups_match_ids_answers_another_request_by_its_id(
        sandbox_factory: Callable[..., RunningSandbox]) -> None:
    """A provider that matches its own ids where a reference is asked for (the knob): the
    lookup of a reference shaped like an id answers the request of that id, which carries
    another reference; a reference that is held is answered as its own still."""
    api = Api(sandbox_factory(lookups_match_ids=True).url, (KEY, SECRET))
    first = transfer(api, "tr-first", "1.00")
    shaped = transfer(api, first["id"], "2.00")  # a reference that is the first one's id
    assert fetched(api, f"{TRANSFERS}/{first['id']}") == shaped
    second = transfer(api, "tr-second", "3.00")
    found = fetched(api, f"{TRANSFERS}/{second['id']}")
    assert (found["id"], found["external_reference"]) == (second["id"], "tr-second")
    made = payout(api, "po-first", "4.00")
    assert fetched(api, f"{PAYOUTS}/{made['id']}")["external_reference"] == "po-first"


def test_an_external_reference_is_used_once(api: Api) -> None:
    first = transfer(api, "tr-once", "5.00")
    again = api.post(TRANSFERS, transfer_body("tr-once", "6.00"))
    refused(again, 400, "2001201", "External reference has already been used", "tr-once")
    assert fetched(api, f"{TRANSFERS}/tr-once") == first  # what clients look up
    assert len(entries(api, "ACC0002")) == 1
    payout(api, "po-once", "5.00")
    refused(api.post(PAYOUTS, payout_body("po-once", "5.00")), 400, "2001201",
            "External reference has already been used")
    payout(api, "tr-once", "1.00")  # unique per kind of request, like external_id elsewhere


def test_available_is_what_can_be_moved(api: Api, admin: Admin) -> None:
    refused(api.post(TRANSFERS, transfer_body("tr-over", "50000.01")), 400, "2001201",
            "insufficient AVAILABLE balance", "50000.00 EUR")
    transfer(api, "tr-all", "50000.00")
    refused(api.post(PAYOUTS, payout_body("po-none", "0.01")), 400, "2001201",
            "insufficient AVAILABLE")
    # The reserve's credit waits for validation: not available yet.
    back = transfer_body("tr-back", "1.00", source="ACC0002", target="ACC0001")
    refused(api.post(TRANSFERS, back), 400, "2001201", "insufficient AVAILABLE", "0.00 EUR")
    admin.advance(60)
    transfer(api, "tr-back", "1.00", source="ACC0002", target="ACC0001")
    assert consistent(api, "ACC0001") == {
        "AVAILABLE": Decimal("0.00"), "EXPECTED": Decimal("1.00"),
        "WAITING_FOR_VALIDATION": Decimal("1.00"), "UP_TO_DATE": Decimal("0.00")}
    assert consistent(api, "ACC0002") == {
        "AVAILABLE": Decimal("49999.00"), "EXPECTED": Decimal("49999.00"),
        "WAITING_FOR_VALIDATION": Decimal("-1.00"), "UP_TO_DATE": Decimal("50000.00")}


@pytest.mark.parametrize("change, field, code, words", [
    ({"type": "ScheduledTransferIn"}, None, "2001101", ["type must be one of",
                                                         "ScheduledTransferOut"]),
    ({"transfer": money("0")}, None, "2001101", ["transfer.amount must be positive"]),
    ({"transfer": money("-5.00")}, None, "2001101", ["transfer.amount must be positive"]),
    ({"transfer": money("1.005")}, None, "2001101", ["more than 2 decimals"]),
    ({"transfer": money("1E+40")}, None, "2001101", ["transfer.amount: a number must be"]),
    ({"transfer": {"amount": "NaN", "currency": "EUR"}}, None, "2001101", ["transfer.amount"]),
    ({"transfer": money("1.00", "USD")}, None, "2001101", ["transfer.currency must be EUR"]),
    ({"transfer": {"amount": "ten", "currency": "EUR"}}, None, "2001101", ["transfer.amount"]),
    ({"transfer": {"currency": "EUR"}}, None, "2001101", ["transfer.amount", "required"]),
    ({}, "label", "2001101", ["label", "required"]),
    ({}, "external_reference", "2001101", ["external_reference", "required"]),
    ({}, "type", "2001101", ["type", "required"]),
    ({"label": ""}, None, "2001101", ["label"]),
    ({"source_account_id": "ACC0999"}, None, "1001001", ["ACC0999", "does not exist"]),
    ({"target_account_id": "nowhere"}, None, "1001001", ["nowhere", "does not exist"]),
    ({"target_account_id": "ACC0001"}, None, "2001201", ["same account"]),
    ({"target_account_id": "ACC0003"}, None, "1000403", ["another integrator"]),
    ({"source_account_id": "globex-eur-main"}, None, "1000403", ["another integrator"]),
])
def test_transfer_refusals(api: Api, change: dict[str, Any], field: str | None, code: str,
                           words: list[str]) -> None:
    sent = {**transfer_body("tr-bad", "10.00"), **change}
    if field:
        del sent[field]
    refused(api.post(TRANSFERS, sent), 403 if code == "1000403" else 400, code, *words)
    refused(api.get(f"{TRANSFERS}/tr-bad"), 404, "1000404")  # nothing was recorded
    assert entries(api, "ACC0002") == []


def test_accounts_in_different_currencies_do_not_transfer(api: Api) -> None:
    dollars = onboard(api, "Initech", template="TPL-US")
    assert dollars["currency"] == "USD"
    sent = transfer_body("tr-fx", "10.00", target=dollars["id"])
    refused(api.post(TRANSFERS, sent), 400, "2001201", "USD", "EUR")


# ---------------------------------------------------------------- payout requests
def held(sandbox: RunningSandbox, transfer_id: str) -> dict[str, Any]:
    """A transfer request as the sandbox keeps it (a payout's own has no reference)."""
    store = sandbox.state.store
    with store.lock:
        return next(dict(t) for t in store.tables["transfer_requests"].values()
                    if t["id"] == transfer_id)


def test_a_payout_debits_one_entry_then_is_charged(sandbox: RunningSandbox, api: Api,
                                                    admin: Admin) -> None:
    made = created(api, PAYOUTS, payout_body("po-1", "300.25", custom_data="rent"))
    assert made == {
        "id": made["id"], "payout": money("300.25"), "creation_date": made["creation_date"],
        "external_reference": "po-1", "label": "payout po-1",
        "payout_bank_account_id": "PBA0001-1", "source_account_id": "ACC0001",
        "status": "WaitingForValidation", "target": money("300.25"),
        "transfer_request_id": made["transfer_request_id"], "validation_date": None,
        "custom_data": "rent"}
    assert made["id"].startswith("PYT")
    refused(api.get(f"{TRANSFERS}/{made['transfer_request_id']}"), 404, "1000404")
    under = held(sandbox, made["transfer_request_id"])
    assert (under["type"], under["target_account_id"], under["transfer"], under["status"],
            under["related"]) == ("Payout", "PBA0001-1", money("300.25"),
                                  "WaitingForValidation",
                                  [{"resource_type": "payout_request", "resource_id": made["id"]}])
    debit = entries(api, "ACC0001")[-1]
    assert (debit["credit_debit_indicator"], debit["counterpart_account_id"], debit["entry"],
            debit["status"], debit["transfer_request_id"]) == \
        ("debit", "PBA0001-1", money("300.25"), "WAITINGFORVALIDATION", under["id"])
    assert consistent(api, "ACC0001") == {
        "AVAILABLE": Decimal("49699.75"), "EXPECTED": Decimal("49699.75"),
        "WAITING_FOR_VALIDATION": Decimal("-300.25"), "UP_TO_DATE": OPENING}

    admin.advance(60)
    done = fetched(api, f"{PAYOUTS}/po-1")
    assert (done["status"], done["id"]) == ("charged", made["id"])
    assert done["validation_date"] is not None
    assert held(sandbox, under["id"])["status"] == "Validated"
    refused(api.get(f"{PAYOUTS}/{made['id']}"), 404, "1000404")  # by reference only
    assert entries(api, "ACC0001")[-1]["status"] == "VALIDATED"
    assert consistent(api, "ACC0001") == settled("49699.75")
    refused(api.get(f"{PAYOUTS}/po-unknown"), 404, "1000404", "po-unknown")


@pytest.mark.parametrize("change, field, status, code, words", [
    ({"payout_bank_account_id": "PBA0009-1"}, None, 400, "1001001", ["PBA0009-1"]),
    ({"payout_bank_account_id": "FR76"}, None, 400, "1001001", ["does not exist"]),
    ({"payout_bank_account_id": "PBA0002-1"}, None, 400, "2001201", ["not one of", "ACC0001"]),
    ({"payout_bank_account_id": "PBA0001-2"}, None, 400, "2001201", ["blocked"]),
    ({"source_account_id": "nobody"}, None, 400, "1001001", ["nobody"]),
    ({"source_account_id": "ACC0003"}, None, 403, "1000403", ["another integrator"]),
    ({"payout": money("10.00", "GBP")}, None, 400, "2001101", ["payout.currency must be EUR"]),
    ({"payout": money("0.00")}, None, 400, "2001101", ["payout.amount must be positive"]),
    ({"payout": money("50000.01")}, None, 400, "2001201", ["insufficient AVAILABLE"]),
    ({}, "payout_bank_account_id", 400, "2001101", ["payout_bank_account_id", "required"]),
    ({}, "payout", 400, "2001101", ["payout", "required"]),
    ({"custom_data": {"not": "a string"}}, None, 400, "2001101", ["custom_data"]),
])
def test_payout_refusals(api: Api, change: dict[str, Any], field: str | None, status: int,
                         code: str, words: list[str]) -> None:
    sent = {**payout_body("po-bad", "10.00"), **change}
    if field:
        del sent[field]
    refused(api.post(PAYOUTS, sent), status, code, *words)
    refused(api.get(f"{PAYOUTS}/po-bad"), 404, "1000404")
    assert len(entries(api, "ACC0001")) == 1


def test_payout_test_triggers_at_the_receiving_bank(api: Api, admin: Admin) -> None:
    banks = [bank("ok"), bank("refuses", "30006000011234567999301"),
             bank("in-doubt", "30006000011234567999401"),
             bank("unavailable", "30006000011234567999501")]
    account = onboard(api, "Hooli", banks=banks)
    ok, refusing, in_doubt, unavailable = (b["id"] for b in account["payout_bank_accounts"])
    transfer(api, "fund", "1000.00", target=account["id"])
    admin.advance(60)
    assert consistent(api, account["id"]) == settled("1000.00")

    r = api.post(PAYOUTS, payout_body("po-refused", "10", source=account["id"], bank=refusing))
    refused(r, 400, "2001301", "refused")
    r = api.post(PAYOUTS, payout_body("po-later", "10", source=account["id"], bank=unavailable))
    refused(r, 503, "2001501", "retry later")
    for reference in ("po-refused", "po-later"):
        refused(api.get(f"{PAYOUTS}/{reference}"), 404, "1000404")  # nothing was done
    assert consistent(api, account["id"]) == settled("1000.00")

    r = api.post(PAYOUTS, payout_body("po-doubt", "10", source=account["id"], bank=in_doubt))
    refused(r, 500, "2001401", "status unknown")
    recorded = fetched(api, f"{PAYOUTS}/po-doubt")  # the lookup settles the doubt
    assert (recorded["status"], recorded["payout_bank_account_id"]) == \
        ("WaitingForValidation", in_doubt)
    assert consistent(api, account["id"])["AVAILABLE"] == Decimal("990.00")
    payout(api, "po-ok", "10", source=account["id"], bank=ok)
    admin.advance(60)
    assert consistent(api, account["id"]) == settled("980.00")


# ---------------------------------------------------------------- balances against entries
def test_balances_follow_the_entries_at_every_stage(api: Api, admin: Admin) -> None:
    steps = [("transfer", "700.00", "ACC0001"), ("payout", "150.10", "ACC0001"),
             ("transfer", "0.01", "ACC0001"), ("wait", "", ""),
             ("transfer", "200.00", "ACC0002"), ("payout", "99.99", "ACC0002"),
             ("transfer", "1234.56", "ACC0001"), ("wait", "", ""),
             ("payout", "0.02", "ACC0002")]
    paid = Decimal(0)
    for n, (kind, amount, source) in enumerate(steps):
        if kind == "wait":
            admin.advance(60)
        elif kind == "transfer":
            target = "ACC0002" if source == "ACC0001" else "ACC0001"
            transfer(api, f"tr-{n}", amount, source=source, target=target)
        else:
            payout(api, f"po-{n}", amount, source=source,
                   bank="PBA0001-1" if source == "ACC0001" else "PBA0002-1")
            paid += Decimal(amount)
        first, second = consistent(api, "ACC0001"), consistent(api, "ACC0002")
        # Money leaves through payouts only: the opening balance is all accounted for.
        assert first["EXPECTED"] + second["EXPECTED"] + paid == OPENING
    admin.advance(60)
    assert consistent(api, "ACC0001") == settled("48115.33")
    assert consistent(api, "ACC0002") == settled("1634.56")
    assert all(e["status"] == "VALIDATED" for e in entries(api, "ACC0001"))


def test_validation_delay_is_a_timing_setting(api: Api, admin: Admin) -> None:
    assert admin.timing()["validation_delay"] == 60
    assert admin.timing(validation_delay=0)["validation_delay"] == 0
    transfer(api, "tr-now", "1.00")
    assert fetched(api, f"{TRANSFERS}/tr-now")["status"] == "Validated"  # due at once
    assert consistent(api, "ACC0002") == settled("1.00")


# ---------------------------------------------------------------- entries: pagination
def test_entries_are_paginated(api: Api) -> None:
    for n in range(5):
        transfer(api, f"tr-page-{n}", f"{n + 1}.00")
    r = api.get(f"{ACCOUNT}/accounts/ACC0001/entries", params={"per_page": 4, "page": 2})
    assert r.status_code == 201
    assert [e["entry"]["amount"] for e in body(r)] == [Decimal("4.00"), Decimal("5.00")]
    assert {h: r.headers.get(h) for h in ("X-Total", "X-Total-Pages", "X-Per-Page", "X-Page",
                                          "X-Next-Page", "X-Prev-Page")} == \
        {"X-Total": "6", "X-Total-Pages": "2", "X-Per-Page": "4", "X-Page": "2",
         "X-Next-Page": None, "X-Prev-Page": "1"}
    first = api.get(f"{ACCOUNT}/accounts/ACC0001/entries", params={"per_page": 4})
    assert [e["label"] for e in body(first)][0] == "Opening balance"
    assert (first.headers["X-Next-Page"], first.headers.get("X-Prev-Page")) == ("2", None)
    whole = api.get(f"{ACCOUNT}/accounts/ACC0002/entries")
    assert (whole.headers["X-Per-Page"], whole.headers["X-Total"]) == ("50", "5")
    empty = api.get(f"{ACCOUNT}/accounts/ACC0002/entries", params={"per_page": 100, "page": 1})
    assert len(body(empty)) == 5
    for params, words in (({"page": 3, "per_page": 4}, ["page 3 of 2"]),
                          ({"per_page": 101}, ["per_page"]), ({"per_page": 0}, ["per_page"]),
                          ({"page": 0}, ["page"]), ({"page": "two"}, ["page"])):
        refused(api.get(f"{ACCOUNT}/accounts/ACC0001/entries", params=params), 400, "2001101",
                *words)


# ---------------------------------------------------------------- addressing, auth, format
def test_unknown_and_forbidden_accounts(api: Api) -> None:
    paths = ["/balances", "/entries", *(f"/balances/{s}" for s in BALANCE_PATHS)]
    for suffix in paths:
        refused(api.get(f"{ACCOUNT}/accounts/ACC0999{suffix}"), 404, "1000404", "ACC0999")
        refused(api.get(f"{ACCOUNT}/accounts/no-such-label{suffix}"), 404, "1000404")
        refused(api.get(f"{ACCOUNT}/accounts/ACC0003{suffix}"), 403, "1000403")
        refused(api.get(f"{ACCOUNT}/accounts/globex-eur-main{suffix}"), 403, "1000403")
    refused(api.get(f"{ACCOUNT}/accounts/ACC0001/balances/pending"), 404, "1000404")


def test_basic_authentication_only(sandbox: RunningSandbox, api: Api) -> None:
    with requests.Session() as s:
        for auth in (None, (KEY, "wrong"), DigestAuth(KEY, SECRET)):
            r = s.get(f"{sandbox.url}{ACCOUNT}/accounts/ACC0001/balances", auth=auth, timeout=60)
            refused(r, 401, "1000401")
            r = s.post(f"{sandbox.url}{TRANSFERS}", json={}, auth=auth, timeout=60)
            refused(r, 401, "1000401")
    assert entries(api, "ACC0002") == []


def test_malformed_bodies(sandbox: RunningSandbox, api: Api) -> None:
    r = api.session.post(sandbox.url + TRANSFERS, data=b"{not json",
                         headers={"Content-Type": "application/json"}, timeout=60)
    refused(r, 400, "1000400")
    refused(api.post(TRANSFERS, ["a", "list"]), 400, "1000400")
    refused(api.call("DELETE", f"{TRANSFERS}/tr-1"), 405, "1000400")


# ---------------------------------------------------------------- faults
def test_a_lost_transfer_is_made_nevertheless(api: Api, admin: Admin) -> None:
    admin.faults({"accounts": {"lost_next": 1}})
    with pytest.raises(requests.ConnectionError):
        api.post(TRANSFERS, transfer_body("tr-lost", "25.00"))
    found = fetched(api, f"{TRANSFERS}/tr-lost")
    assert found["transfer"] == money("25.00")
    refused(api.post(TRANSFERS, transfer_body("tr-lost", "25.00")), 400, "2001201")
    assert consistent(api, "ACC0002")["EXPECTED"] == Decimal("25.00")
    admin.faults({"accounts": {"lost_next": 1}})
    with pytest.raises(requests.ConnectionError):
        api.post(PAYOUTS, payout_body("po-lost", "5.00"))
    assert fetched(api, f"{PAYOUTS}/po-lost")["status"] == "WaitingForValidation"


def test_errors_and_unavailability_do_nothing(api: Api, admin: Admin) -> None:
    admin.faults({"accounts": {"error_next": 1, "unavailable_next": 1}})
    refused(api.post(TRANSFERS, transfer_body("tr-err", "25.00")), 500, "1000500")
    r = api.post(PAYOUTS, payout_body("po-busy", "5.00"))
    refused(r, 503, "2001501", "retry later")
    assert r.headers["Retry-After"] == "1"
    refused(api.get(f"{TRANSFERS}/tr-err"), 404, "1000404")
    refused(api.get(f"{PAYOUTS}/po-busy"), 404, "1000404")
    assert consistent(api, "ACC0001") == settled("50000.00")

    admin.faults({"balances": {"error_next": 1, "unavailable_next": 1},
                  "lookups": {"unavailable_next": 1}})
    refused(api.get(f"{ACCOUNT}/accounts/ACC0001/balances"), 500, "1000500")
    refused(api.get(f"{ACCOUNT}/accounts/ACC0001/entries"), 503, "2001501")
    refused(api.get(f"{TRANSFERS}/tr-err"), 503, "2001501")
    counts = admin.requests()["counts"]
    assert counts["POST accounts"] == 2
    assert counts["GET balances"] >= 2


def test_slow_answers_still_do_the_work(sandbox_factory: Callable[..., RunningSandbox]) -> None:
    sb = sandbox_factory(validation_delay=60.0)
    api, admin = Api(sb.url, (KEY, SECRET)), Admin(sb.url)
    admin.faults({"accounts": {"slow_next": 1}}, slow_seconds=1.5)
    with pytest.raises(requests.Timeout):
        api.post(TRANSFERS, transfer_body("tr-slow", "1.00"), timeout=0.5)
    assert fetched(api, f"{TRANSFERS}/tr-slow")["status"] == "WaitingForValidation"


# ---------------------------------------------------------------- state and OpenAPI
def test_accounts_survive_a_restart(sandbox_factory: Callable[..., RunningSandbox],
                                    tmp_path: Path) -> None:
    path = tmp_path / "state.jsonl"
    first = sandbox_factory(state_file=path, validation_delay=60.0)
    api = Api(first.url, (KEY, SECRET))
    transfer(api, "tr-kept", "40.00")
    payout(api, "po-kept", "2.00")
    account = onboard(api, "Umbrella")
    before = [consistent(api, a) for a in ("ACC0001", "ACC0002")]
    first.stop()

    again = sandbox_factory(state_file=path, validation_delay=60.0)
    api, admin = Api(again.url, (KEY, SECRET)), Admin(again.url)
    assert [consistent(api, a) for a in ("ACC0001", "ACC0002")] == before
    assert len(entries(api, "ACC0001")) == 3  # the seed was not written twice
    assert fetched(api, f"{ACCOUNT}/accounts/{account['label']}/balances")
    refused(api.post(TRANSFERS, transfer_body("tr-kept")), 400, "2001201")
    admin.advance(60)  # the validations still due are on the restarted clock
    assert fetched(api, f"{TRANSFERS}/tr-kept")["status"] == "Validated"
    assert fetched(api, f"{PAYOUTS}/po-kept")["status"] == "charged"
    assert consistent(api, "ACC0001") == settled("49958.00")
    assert onboard(api, "Wonka")["id"] == "ACC0005"  # numbering carries on
    # The merchants made before the restart are found by name and count for their company.
    merchant = fetched(api, f"{ONBOARDING}/merchants/Umbrella Shop")
    second = created(api, f"{ONBOARDING}/accounts", {
        "template_id": "TPL-STANDARD", "label": "Umbrella-second",
        "company_id": merchant["company_id"]})
    assert second["id"] == "ACC0006"


def test_openapi_describes_the_account_endpoints(sandbox: RunningSandbox) -> None:
    with requests.Session() as http:
        doc = http.get(sandbox.url + "/openapi.json", timeout=60).json()
    expected = {f"{ACCOUNT}/accounts/{{account_external_id}}/balances": "get",
                f"{ACCOUNT}/accounts/{{account_external_id}}/entries": "get",
                TRANSFERS: "post", f"{TRANSFERS}/{{external_id}}": "get",
                PAYOUTS: "post", f"{PAYOUTS}/{{external_id}}": "get",
                **{f"{ACCOUNT}/accounts/{{account_external_id}}/balances/{s}": "get"
                   for s in BALANCE_PATHS}}
    for path, method in expected.items():
        operation = doc["paths"][path][method]
        assert "201" in operation["responses"], path
        assert operation["security"] == [{"basic": []}], path
    schemas = doc["components"]["schemas"]
    assert set(schemas["TransferRequestCreate"]["required"]) == {
        "transfer", "external_reference", "label", "source_account_id", "target_account_id",
        "type"}
    assert set(schemas["PayoutRequestCreate"]["required"]) == {
        "payout", "external_reference", "label", "source_account_id", "payout_bank_account_id"}
    entry = doc["paths"][f"{ACCOUNT}/accounts/{{account_external_id}}/entries"]["get"]
    assert {p["name"] for p in entry["parameters"]} == {"account_external_id", "page",
                                                        "per_page"}


def test_iban_helper_matches_the_seeded_ones() -> None:
    assert iban("FR", "30006000011234567890189") == "FR7630006000011234567890189"
    assert iban("GB", "NWBK60161331926819") == "GB29NWBK60161331926819"
