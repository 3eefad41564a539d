"""The sandbox as the public clients of this API family see it, over real HTTP: they sign with
the Unix time in seconds as nonce (several calls share one), an RFC 1123 Date and the
provider's brand in the header names, and add a slash to paths; they read the pagination
headers with case-sensitive maps, callbacks with numeric statuses, merchant payment
timestamps with their ``Z``, and slow down on 429 as Retry-After says.

``RealClient`` (real_client.py) signs by hand, as those clients do, not with
runner.provider.auth, so that a bug shared by runner and the sandbox cannot hide.
"""

from __future__ import annotations

import base64
import http.client
import re
import time
from collections.abc import Callable
from decimal import Decimal
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import KEY, QUOTATION, SECRET, Admin, Api, body, error_of, still_clock
from engine_support import confirmed, run, write_job
from notification_receiver import Receiver
from real_client import BRAND, RealClient

from runner.errors import RateLimited, ServiceUnavailable
from runner.provider.errors import error_from_answer, seconds_to_wait
from runner.provider.money_transfer import MoneyTransferClient
from runner.provider.quoted import read_statuses
from runner.provider.retry import LONGEST_RETRY_AFTER, RetryPolicy
from runner.sandbox import RunningSandbox

MT = "/v1/money-transfer"
MP = "/v1/merchant-payment"
NAMES = {"firstname": "Jo", "lastname": "Doe"}
TRANSACTION = {"external_id": "t-1", "credit_party_identifier": {"msisdn": "+254700100200"},
               "sender": NAMES, "beneficiary": NAMES, "purpose_of_remittance": "SALARY"}
PAGINATION = ("X-Total", "X-Total-Pages", "X-Per-Page", "X-Page", "X-Next-Page", "X-Prev-Page")


def ok(answer: requests.Response, status: int = 200) -> Any:
    assert answer.status_code == status, answer.text
    return body(answer)


@pytest.fixture
def branded(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return sandbox_factory(header_brand=BRAND)


# ---------------------------------------------------------------- slashes and nonces
def test_a_real_client_pays_with_slashes_and_one_nonce_per_second(branded: RunningSandbox,
                                                                  ) -> None:
    now = time.time()
    client = RealClient(branded.url, clock=lambda: now)  # every call in the same second
    assert ok(client.call("GET", "/ping/")) == {"status": "up"}
    payers = ok(client.call("GET", f"{MT}/payers/"))
    assert ok(client.call("GET", f"{MT}/payers/1/")) == payers[0]
    quotation = ok(client.call("POST", f"{MT}/quotations/", QUOTATION), 201)
    assert ok(client.call("GET", f"{MT}/quotations/{quotation['id']}/")) == quotation
    made = ok(client.call("POST", f"{MT}/quotations/{quotation['id']}/transactions/",
                          TRANSACTION), 201)
    done = ok(client.call("POST", f"{MT}/transactions/{made['id']}/confirm/"))
    assert done["status"] == "20000"
    assert ok(client.call("GET", f"{MT}/transactions/{made['id']}/")) == done
    counts = Admin(branded.url).requests()["counts"]
    assert counts["POST"] == 3 and counts["GET"] == 5  # each call once: no redirect, no replay


def test_every_route_answers_with_a_slash_as_without(api: Api, sandbox: RunningSandbox,
                                                     ) -> None:
    document = body(api.get("/openapi.json"))
    tried = 0
    for path, operations in document["paths"].items():
        concrete = re.sub(r"\{[^}]*iso[^}]*\}", "KEN", path)
        concrete = re.sub(r"\{[^}]+\}", "1", concrete)
        for method in operations:
            if path.startswith("/_admin") and method != "get":
                continue  # the admin's writes change the sandbox
            payload = None if method == "get" else {}
            plain = api.call(method.upper(), concrete, payload, allow_redirects=False)
            slashed = api.call(method.upper(), concrete + "/", payload, allow_redirects=False)
            assert slashed.status_code == plain.status_code, (method, path, slashed.text)
            if method == "get" and not path.startswith("/_admin"):
                assert slashed.content == plain.content, (method, path)
            tried += 1
    assert tried >= 60


def test_nonce_check_strict_refuses_the_second_call_of_a_second(
        sandbox_factory: Callable[..., RunningSandbox]) -> None:
    now = time.time()
    lenient = RealClient(sandbox_factory(header_brand=BRAND).url, clock=lambda: now)
    for _ in range(3):
        assert lenient.call("GET", f"{MT}/payers/").status_code == 200
    assert lenient.call("POST", f"{MT}/quotations/", QUOTATION).status_code == 201
    strict = RealClient(sandbox_factory(header_brand=BRAND, nonce_check="strict").url,
                        clock=lambda: now)
    assert strict.call("GET", f"{MT}/payers/").status_code == 200
    refused = strict.call("POST", f"{MT}/quotations/", QUOTATION)
    assert error_of(refused) == (401, "1000401")
    assert body(refused)["errors"][0]["message"] == "Unauthorized: nonce already used"
    later = RealClient(strict.base, clock=lambda: now + 1)
    assert later.call("POST", f"{MT}/quotations/", QUOTATION).status_code == 201


# ---------------------------------------------------------------- what comes back
def raw_headers(sandbox: RunningSandbox, path: str) -> list[str]:
    """The header names of an answer exactly as written on the wire."""
    connection = http.client.HTTPConnection(sandbox.url.removeprefix("http://"), timeout=30)
    token = base64.b64encode(f"{KEY}:{SECRET}".encode()).decode()
    try:
        connection.request("GET", path, headers={"Authorization": f"Basic {token}"})
        answer = connection.getresponse()
        answer.read()
        return [name for name, _ in answer.getheaders()]
    finally:
        connection.close()


def test_pagination_headers_are_written_in_their_canonical_case(sandbox: RunningSandbox,
                                                                ) -> None:
    for path in (f"{MT}/payers?per_page=2&page=2", f"{MP}/payment-methods?per_page=2&page=2",
                 "/v1/account/accounts/ACC0001/entries?per_page=1"):
        names = raw_headers(sandbox, path)
        wanted = PAGINATION if "page=2" in path else PAGINATION[:4]
        assert set(wanted) <= set(names), (path, names)
        assert "Content-Type" in names and "content-type" not in names


def test_merchant_payment_timestamps_end_with_z_and_the_others_have_no_zone(api: Api) -> None:
    quotation = ok(api.post(f"{MP}/quotations", {
        "external_id": "mq", "payment_method_id": 1, "mode": "PAYMENT_AMOUNT",
        "payment": {"country_iso_code": "KEN", "currency": "KES", "amount": Decimal(1000)},
        "collection": {"currency": "EUR"}}), 201)
    payment = ok(api.post(f"{MP}/quotations/ext-mq/payments", {
        "external_id": "mp", "debit_party_identifier": {"msisdn": "+254700100200"},
        "consumer": NAMES, "purpose_of_payment": "OTHER"}), 201)
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    for value in (quotation["creation_date"], quotation["expiration_date"],
                  payment["creation_date"], payment["expiration_date"]):
        assert stamp.fullmatch(value), value
    transfer = ok(api.post(f"{MT}/quotations", QUOTATION), 201)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", transfer["creation_date"])


def test_runner_reads_statuses_as_numbers_or_text_in_answers_lookups_and_callbacks(
        sandbox_factory: Callable[..., RunningSandbox],
        receivers: Callable[..., Receiver]) -> None:
    receiver = receivers()
    for numeric in (False, True):
        sandbox = sandbox_factory(numeric_statuses=numeric)
        raw = Api(sandbox.url, (KEY, SECRET))
        client = MoneyTransferClient(sandbox.url, KEY, SECRET, auth="hmac")
        quotation = client.create_quotation(dict(QUOTATION))
        made = client.create_transaction(
            quotation["id"], {**TRANSACTION, "callback_url": receiver.url(f"/{numeric}")})
        assert (made["status"], made["status_class"]) == ("10000", "1")
        shown = body(raw.get(f"{MT}/transactions/{made['id']}"))["status"]
        assert shown == (10000 if numeric else "10000")  # what the wire carried
        done = client.confirm_transaction(made["id"])
        assert (done["status"], done["status_class"]) == ("20000", "2")
        callback = [p for p in receiver.wait_for(2 if numeric else 1)
                    if p.path == f"/{numeric}"][0].json
        assert callback["status"] == 20000 and callback["status_class"] == 2
        assert read_statuses(callback) == client.find_transaction("t-1") == done
        client.close()


def test_the_engine_pays_a_batch_from_numeric_answers(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path, state: Path) -> None:
    """A confirm answered 500 (nothing done) is in doubt: the lookup then finds the
    transaction still CREATED, ``10000`` as a number, and the confirm is sent again."""
    sandbox = sandbox_factory(numeric_statuses=True, submit_delay=0, complete_delay=0)
    Admin(sandbox.url).faults({"confirm": {"error_next": 2}})
    result = run(write_job(tmp_path, sandbox), state)
    assert result.exit_code == 0, result.message
    assert result.counts.get("settled") == 3, result.counts
    assert confirmed(sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}


# ---------------------------------------------------------------- 429
def test_the_throttling_fault_answers_429_with_retry_after_in_each_family(
        api: Api, admin: Admin) -> None:
    admin.faults({"*": {"throttled_next": 3}})
    answer = api.post(f"{MT}/quotations", QUOTATION)
    assert error_of(answer) == (429, "1009001") and answer.headers["Retry-After"] == "1"
    answer = api.get("/v1/account/accounts/ACC0001/balances")
    assert error_of(answer) == (429, "2001501") and answer.headers["Retry-After"] == "1"
    answer = api.post("/Rest/V40/PaymentOrder/Pay", {"PaymentOrder": {}})
    assert answer.status_code == 429 and body(answer)["ReturnCode"] == 5050
    assert admin.requests()["counts"]["throttled"] == 3
    assert api.get(f"{MT}/quotations/ext-q-1").status_code == 404  # nothing was done
    assert api.post(f"{MT}/quotations", QUOTATION).status_code == 201


def test_the_rate_limit_per_key_counts_on_the_sandbox_clock(
        sandbox_factory: Callable[..., RunningSandbox]) -> None:
    # (Real time would refill the allowance while the calls are made: a call every half
    # second at this rate.)
    sandbox = sandbox_factory(faults={"*": _rule(requests_per_second=2)}, clock=still_clock())
    api, admin = Api(sandbox.url, (KEY, SECRET)), Admin(sandbox.url)
    assert [api.get(f"{MT}/payers/1").status_code for _ in range(2)] == [200, 200]
    refused = api.post(f"{MT}/quotations", QUOTATION)
    assert error_of(refused) == (429, "1009001") and refused.headers["Retry-After"] == "1"
    assert api.get(f"{MT}/quotations/ext-q-1").status_code == 429  # still within the second
    admin.advance(1)  # a second later: two more calls
    assert api.post(f"{MT}/quotations", QUOTATION).status_code == 201
    assert api.get(f"{MT}/quotations/ext-q-1").status_code == 200
    assert api.get(f"{MT}/payers/1").status_code == 429
    # The admin API is not rate limited, and the limit is a knob changed at run time.
    admin.faults({"*": {"requests_per_second": 0}})
    assert all(api.get(f"{MT}/payers/1").status_code == 200 for _ in range(5))


def _rule(**values: Any) -> Any:
    from runner.sandbox import FaultRule

    return FaultRule(**values)


def test_runner_waits_what_retry_after_asks() -> None:
    waits: list[float] = []
    policy = RetryPolicy(attempts=3, max_wait=0.5, first_wait=0.1, sleep=waits.append)
    answers = iter([error_from_answer(429, None, "GET /x", retry_after="7"),
                    error_from_answer(503, None, "GET /x", retry_after="100000")])

    def call() -> str:
        error = next(answers, None)
        if error is not None:
            raise error
        return "done"

    assert policy.call(call, idempotent=True) == "done"
    assert waits == [7.0, LONGEST_RETRY_AFTER]  # as asked (at most a minute), not 0.1-0.5
    limited = error_from_answer(429, None, "POST /x", retry_after="3")
    assert isinstance(limited, RateLimited) and limited.retry_after == 3.0
    unavailable = error_from_answer(503, None, "GET /x", retry_after=formatdate(
        time.time() + 3600, usegmt=True))
    assert isinstance(unavailable, ServiceUnavailable)
    # (an hour ahead: whatever the machine's load, most of it is still to wait)
    assert unavailable.retry_after is not None and 1800 <= unavailable.retry_after <= 3600
    assert seconds_to_wait(formatdate(1_800_000_030, usegmt=True), now=1_800_000_000) == 30
    assert seconds_to_wait("soon") is None and seconds_to_wait(None) is None
    assert error_from_answer(400, None, "POST /x", retry_after="9").retry_after is None


def test_the_engine_pays_a_batch_through_a_throttled_sandbox_once(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path, state: Path) -> None:
    """Three requests per second on the sandbox clock; every wait of the runner moves that
    clock by the seconds it waits, so the batch takes no real time (and the clock moves by
    nothing else: calls slowed by a busy machine would otherwise be throttled less)."""
    sandbox = sandbox_factory(submit_delay=0, complete_delay=0,
                              faults={"*": _rule(requests_per_second=3)}, clock=still_clock())
    waited: list[float] = []

    def wait(seconds: float) -> None:
        waited.append(seconds)
        requests.post(sandbox.url + "/_admin/clock/advance", json={"seconds": seconds},
                      timeout=30).raise_for_status()

    rows = "".join(f"{n},1,{10 + n}.00,+25470000010{n}\n" for n in range(6))
    job = write_job(tmp_path, sandbox, rows, concurrency=3, max_wait="2s")
    text = job.read_text(encoding="utf-8").replace("attempts: 3", "attempts: 8")
    job.write_text(text, encoding="utf-8")
    result = run(job, state, sleep=wait)
    assert result.exit_code == 0, result.message
    assert result.counts.get("settled") == 6, result.counts
    assert confirmed(sandbox) == {f"pay-{n}": 1 for n in range(6)}  # nobody paid twice
    assert Admin(sandbox.url).requests()["counts"]["throttled"] > 0  # it was slowed down
    assert any(w >= 1 for w in waited)  # by what Retry-After asked
