"""Callbacks from the sandbox to a real receiver: each status change from confirm on is
POSTed as the full object in JSON, signed with the digest headers, and retried with growing
spacing when the receiver fails or can't be reached."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import socket
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from conftest import KEY, SECRET, Admin, Api, body
from notification_receiver import WAIT, Ping, Receiver

from runner.sandbox import RunningSandbox

MT = "/v1/money-transfer"
MP = "/v1/merchant-payment"
NAMES = {"firstname": "Ada", "lastname": "Lovelace"}


@pytest.fixture
def receiver(receivers: Callable[..., Receiver]) -> Receiver:
    return receivers()


def clients(sb: RunningSandbox) -> tuple[Api, Admin]:
    return Api(sb.url, (KEY, SECRET)), Admin(sb.url)


def wait_until(check: Callable[[], Any], timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)
    return result




def transaction(api: Api, name: str, callback_url: str | None,
                msisdn: str = "+254700100200") -> dict[str, Any]:
    q = api.post(f"{MT}/quotations", {
        "external_id": f"q-{name}", "payer_id": 1, "mode": "SOURCE_AMOUNT",
        "source": {"country_iso_code": "FRA", "currency": "EUR", "amount": Decimal("100.00")},
        "destination": {"currency": "KES"}})
    assert q.status_code == 201, q.text
    t = api.post(f"{MT}/quotations/{body(q)['id']}/transactions", {
        "external_id": f"t-{name}", "credit_party_identifier": {"msisdn": msisdn},
        "sender": NAMES, "beneficiary": NAMES, "purpose_of_remittance": "SALARY",
        "callback_url": callback_url})
    assert t.status_code == 201, t.text
    return body(t)  # type: ignore[no-any-return]


def numbers(transaction: dict[str, Any]) -> dict[str, Any]:
    """A money transfer answer as its callback carries it: status fields as numbers."""
    return {**transaction, "status": int(transaction["status"]),
            "status_class": int(transaction["status_class"])}


def confirm(api: Api, path: str) -> dict[str, Any]:
    r = api.post(f"{path}/confirm")
    assert r.status_code == 200, r.text
    return body(r)  # type: ignore[no-any-return]


def assert_signed(got: Ping, brand: str = "Svc") -> None:
    h = got.headers
    b = brand.lower()
    assert h["content-type"] == "application/json"
    assert h[f"x-{b}-apikey"] == KEY
    nonce, date = h[f"x-{b}-nonce"], h["date"]
    assert 0 < len(nonce) <= 64
    expected = base64.b64encode(hmac.new(SECRET.encode(), (KEY + nonce + date).encode(),
                                         hashlib.sha256).digest()).decode()
    assert h[f"x-{b}-hmac"] == expected
    assert got.dated_in_real_time()


# ---------------------------------------------------------------- what is sent
def test_each_status_change_of_a_transaction_is_posted_signed(
    api: Api, admin: Admin, receiver: Receiver,
) -> None:
    created = transaction(api, "1", receiver.url("/callbacks"))
    assert created["status"] == "10000" and created["callback_url"] == receiver.url("/callbacks")
    confirmed = confirm(api, f"{MT}/transactions/{created['id']}")
    first = receiver.wait_for(1)[0]
    assert first.path == "/callbacks"
    # The full transaction at its new status; its status fields are JSON numbers in a
    # callback, as the public reference's example shows, and text in answers.
    assert first.json == numbers(confirmed)
    assert first.json["status"] == 20000 and confirmed["status"] == "20000"
    admin.advance(60)
    assert receiver.wait_for(2)[1].json["status"] == 50000
    admin.advance(60)
    got = receiver.wait_for(3)
    final = body(api.get(f"{MT}/transactions/ext-t-1"))
    assert final["status"] == "70000"
    assert got[2].json == numbers(final)
    assert got[1].json == {**final, "status": 50000, "status_message": "SUBMITTED",
                           "status_class": 5, "status_class_message": "SUBMITTED"}
    assert [g.json["status"] for g in got] == [20000, 50000, 70000]  # none at creation
    for g in got:
        assert_signed(g)
    assert len({g.headers["x-svc-nonce"] for g in got}) == 3  # a fresh nonce each time
    # amounts travel as exact JSON numbers
    assert re.search(rb'"sent_amount":\s*\{[^}]*"amount":\s*100\.00[,}]', got[0].raw)
    assert receiver.stays_at(3, 0.05)


def test_no_callback_without_callback_url(api: Api, admin: Admin, receiver: Receiver) -> None:
    plain = transaction(api, "plain", None)
    with_url = transaction(api, "with-url", receiver.url("/callbacks"))
    confirm(api, f"{MT}/transactions/{plain['id']}")
    confirm(api, f"{MT}/transactions/{with_url['id']}")
    admin.advance(120)
    got = receiver.wait_for(3)
    assert {g.json["external_id"] for g in got} == {"t-with-url"}
    assert receiver.stays_at(3, 0.05)
    assert [d["status"] for d in admin.deliveries(3)] == ["20000", "50000", "70000"]


def test_merchant_payments_send_callbacks(api: Api, admin: Admin, receiver: Receiver) -> None:
    q = api.post(f"{MP}/quotations", {
        "external_id": "q-1", "payment_method_id": 1, "mode": "PAYMENT_AMOUNT",
        "payment": {"country_iso_code": "KEN", "currency": "KES", "amount": Decimal(1000)},
        "collection": {"currency": "EUR"}})
    assert q.status_code == 201, q.text
    p = api.post(f"{MP}/quotations/ext-q-1/payments", {
        "external_id": "p-1", "debit_party_identifier": {"msisdn": "+254700100200"},
        "consumer": NAMES, "purpose_of_payment": "OTHER",
        "callback_url": receiver.url("/callbacks")})
    assert p.status_code == 201, p.text
    confirmed = confirm(api, f"{MP}/payments/ext-p-1")
    first = receiver.wait_for(1)[0]
    assert first.json == confirmed
    assert first.json["details"]["qr_code"]  # the payment as confirmed, details filled
    assert_signed(first)
    admin.advance(60)
    admin.advance(60)
    got = receiver.wait_for(3)
    assert [g.json["status"] for g in got] == ["20000", "50000", "70000"]
    assert got[2].json == body(api.get(f"{MP}/payments/ext-p-1"))
    for g in got:
        assert_signed(g)


def test_header_brand_is_configurable(sandbox_factory: Callable[..., RunningSandbox],
                                      receiver: Receiver) -> None:
    api, _ = clients(sandbox_factory(header_brand="Acme"))
    t = transaction(api, "1", receiver.url("/callbacks"))
    confirm(api, f"{MT}/transactions/{t['id']}")
    got = receiver.wait_for(1)[0]
    assert_signed(got, brand="Acme")
    assert not any(name.startswith("x-svc-") for name in got.headers)
    api.session.close()


# ---------------------------------------------------------------- retries
def test_failed_deliveries_are_retried_until_accepted(
    api: Api, admin: Admin, receivers: Callable[..., Receiver],
) -> None:
    receiver = receivers([500, 500, 200])
    t = transaction(api, "1", receiver.url("/callbacks"))
    confirmed = confirm(api, f"{MT}/transactions/{t['id']}")
    got = receiver.wait_for(3)
    assert [g.json for g in got] == [numbers(confirmed)] * 3  # the same status, 3 times
    assert len({g.headers["x-svc-nonce"] for g in got}) == 3  # each attempt signed afresh
    for g in got:
        assert_signed(g)
    log = admin.deliveries(3)
    assert [(d["status"], d["attempt"], d["http_status"], d["delivered"]) for d in log] == \
        [("20000", 1, 500, False), ("20000", 2, 500, False), ("20000", 3, 200, True)]
    assert all(d["url"] == receiver.url("/callbacks") for d in log)
    assert receiver.stays_at(3, 0.1)  # accepted: no more attempts


def test_a_redirect_is_not_a_delivery(api: Api, admin: Admin,
                                      receivers: Callable[..., Receiver]) -> None:
    receiver = receivers([302, 307, 200])
    t = transaction(api, "1", receiver.url("/callbacks"))
    confirm(api, f"{MT}/transactions/{t['id']}")
    got = receiver.wait_for(3)
    assert [g.path for g in got] == ["/callbacks"] * 3  # never re-sent to the new location
    assert receiver.gets == []
    log = admin.deliveries(3)
    assert [(d["attempt"], d["http_status"], d["delivered"]) for d in log] == \
        [(1, 302, False), (2, 307, False), (3, 200, True)]


def test_retries_stop_after_the_configured_attempts(
    sandbox_factory: Callable[..., RunningSandbox], receivers: Callable[..., Receiver],
) -> None:
    api, admin = clients(sandbox_factory(callback_attempts=3, callback_spacing=0.005))
    receiver = receivers([500] * 10)
    t = transaction(api, "1", receiver.url("/callbacks"))
    confirm(api, f"{MT}/transactions/{t['id']}")
    receiver.wait_for(3)
    admin.deliveries(3)
    # a fourth attempt would come 0.02 s after the third: watch well past that
    assert receiver.stays_at(3, 0.15)
    log = admin.callbacks()["deliveries"]
    assert [(d["attempt"], d["http_status"], d["delivered"]) for d in log] == \
        [(1, 500, False), (2, 500, False), (3, 500, False)]
    assert admin.callbacks()["pending"] == 0
    api.session.close()


def test_retry_spacing_doubles(sandbox_factory: Callable[..., RunningSandbox],
                               receivers: Callable[..., Receiver]) -> None:
    spacing = 0.02
    api, _ = clients(sandbox_factory(callback_attempts=5, callback_spacing=spacing))
    receiver = receivers([500, 500, 503, 200])
    t = transaction(api, "1", receiver.url("/callbacks"))
    confirm(api, f"{MT}/transactions/{t['id']}")
    at = [g.at for g in receiver.wait_for(4)]
    gaps = [b - a for a, b in zip(at, at[1:], strict=False)]
    # each wait starts after the previous answer, so these are lower bounds
    assert gaps[0] >= spacing
    assert gaps[1] >= 2 * spacing
    assert gaps[2] >= 4 * spacing
    assert gaps[1] >= gaps[0] and gaps[2] >= gaps[1]
    assert receiver.stays_at(4, 0.05)
    api.session.close()


def test_unreachable_receiver_is_retried_and_logged(
    sandbox_factory: Callable[..., RunningSandbox],
) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/callbacks"
    api, admin = clients(sandbox_factory(callback_attempts=3, callback_spacing=0.005))
    t = transaction(api, "1", url)
    confirm(api, f"{MT}/transactions/{t['id']}")
    log = admin.deliveries(3)
    assert [(d["url"], d["status"], d["attempt"], d["delivered"]) for d in log] == \
        [(url, "20000", n, False) for n in (1, 2, 3)]
    for d in log:
        assert d["error"]  # the failure's kind, e.g. ConnectionError
        assert "http_status" not in d
    api.session.close()
