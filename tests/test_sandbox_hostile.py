"""Hostile requests to the sandbox, over real HTTP: every one is answered in the documents'
shape (400 or 404 with the family's code, 413 for a body over the limit, 9400 for the legacy
Pay's syntax), never 5xx, and leaves the sandbox as it was. An unexpected error is answered
500 without breaking the kept-alive connection it came on."""

from __future__ import annotations

import base64
import http.client
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import pytest
import requests
import simplejson
from conftest import KEY, QUOTATION, SECRET, Admin, Api, body, error_of

from runner.sandbox import RunningSandbox
from runner.sandbox.core.bounds import MAX_DEPTH, MAX_REFERENCE, MAX_TEXT
from runner.sandbox.core.quotes import QuoteFlow

MT = "/v1/money-transfer"
MP = "/v1/merchant-payment"
PAY = "/Rest/V40/PaymentOrder/Pay"
HUGE_ID = "9" * 5000
BAD_IDS = ["³", "１", "٣", HUGE_ID, "1_0", "+1", " 1", "1.0", "0x1"]


def raw_post(api: Api, path: str, text: str | bytes,
             content_type: str = "application/json") -> requests.Response:
    return api.session.post(api.base + path, data=text, timeout=30,
                            headers={"Content-Type": content_type})


def message(response: requests.Response) -> str:
    return str(body(response)["errors"][0]["message"])


# ---------------------------------------------------------------- ids
@pytest.mark.parametrize("path, code", [
    (f"{MT}/quotations/{{}}", "1008002"), (f"{MT}/transactions/{{}}", "1008004"),
    (f"{MP}/quotations/{{}}", "1008002"), (f"{MP}/payments/{{}}", "1008004"),
    ("/v1/payment/charges/{}", "1000404"), ("/v1/payment/refunds/{}", "1000404"),
    ("/v1/payment/payment-orders/PO{}", "1000404"),
    ("/v1/onboarding/companies/CMP{}", "1000404"),
    ("/v1/account/payout-requests/PYT{}", "1000404"),
])
def test_ids_that_are_not_ascii_digits_of_bounded_length_name_nothing(
        api: Api, path: str, code: str) -> None:
    for bad in BAD_IDS:
        answer = api.get(path.format(quote(bad)))
        assert error_of(answer) == (404, code), (bad[:20], answer.text[:200])


def test_full_width_one_is_not_quotation_one(api: Api) -> None:
    assert api.post(f"{MT}/quotations", QUOTATION).status_code == 201
    assert api.get(f"{MT}/quotations/1").status_code == 200
    for twin in ("１", "¹", "١"):
        assert error_of(api.get(f"{MT}/quotations/{quote(twin)}")) == (404, "1008002"), twin


def test_numeric_path_parameters_take_ascii_digits_only(api: Api) -> None:
    for bad in BAD_IDS:
        for path in (f"{MT}/payers/{{}}", f"{MT}/payers/{{}}/rates", f"{MT}/entities/{{}}",
                     f"{MP}/payment-methods/{{}}"):
            answer = api.get(path.format(quote(bad)))
            assert error_of(answer) == (400, "1000999"), (path, answer.text)
            assert "ASCII digits" in message(answer)
    assert api.get(f"{MT}/payers/1").status_code == 200


# ---------------------------------------------------------------- numbers
@pytest.mark.parametrize("written", ["number", "text"])
def test_amounts_out_of_range_are_refused_naming_the_field(api: Api, written: str) -> None:
    for amount in ("1e999999", "-1e999999", "1e-999999", "1E+19", "0.000000000000000000001",
                   "0E-999999"):
        shown = amount if written == "number" else f'"{amount}"'
        text = simplejson.dumps(QUOTATION, use_decimal=True).replace('"amount": 100.00',
                                                                     f'"amount": {shown}')
        answer = raw_post(api, f"{MT}/quotations", text)
        assert error_of(answer) == (400, "1000999"), answer.text
        assert "source.amount" in message(answer) and "a number must be" in message(answer)
        assert api.get(f"{MT}/quotations/ext-q-1").status_code == 404  # nothing was made


def test_numbers_in_every_service_and_in_the_legacy_pay_are_bounded(api: Api) -> None:
    huge = "1e999999"
    cases = [
        ("/v1/payment/payment-orders", '{"type": "C2B", "requested": {"amount": %s, '
         '"currency": "EUR"}}', "2001101"),
        ("/v1/account/transfer-requests", '{"transfer": {"amount": %s, "currency": "EUR"}}',
         "2001101"),
        (f"{MP}/quotations", '{"external_id": "m", "payment_method_id": 1, "mode": '
         '"PAYMENT_AMOUNT", "payment": {"country_iso_code": "KEN", "currency": "KES", '
         '"amount": %s}, "collection": {"currency": "EUR"}}', "1000999"),
    ]
    for path, template, code in cases:
        answer = raw_post(api, path, template % huge)
        assert error_of(answer) == (400, code), (path, answer.text)
    pay = {"PaymentOrder": {"MerchantId": "MER0001", "Amount": "1e999999", "Currency": "EUR",
                            "PaymentPageId": "card-eur", "MerchantOrder": {"Id": "p-1"}}}
    answer = api.post(PAY, pay)
    assert answer.status_code == 400 and body(answer)["ReturnCode"] == 2000, answer.text


def test_a_5000_digit_integer_and_deep_nesting_are_refused(api: Api) -> None:
    answer = raw_post(api, f"{MT}/quotations", '{"payer_id": %s}' % ("7" * 5000))
    assert error_of(answer) == (400, "1000999"), answer.text
    deep = '{"a": ' * 50_000 + "1" + "}" * 50_000
    answer = raw_post(api, f"{MT}/quotations", deep)
    assert error_of(answer) == (400, "1000999"), answer.text
    nested = '{"source": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1)
    answer = raw_post(api, "/v1/account/transfer-requests", nested)
    assert error_of(answer) == (400, "2001101"), answer.text
    assert f"nested more than {MAX_DEPTH} deep" in message(answer)


# ---------------------------------------------------------------- text and bodies
def test_external_ids_and_text_are_bounded(api: Api) -> None:
    long_id = {**QUOTATION, "external_id": "x" * (MAX_REFERENCE + 1)}
    answer = api.post(f"{MT}/quotations", long_id)
    assert error_of(answer) == (400, "1000999") and "external_id" in message(answer)
    assert api.post(f"{MT}/quotations",
                    {**QUOTATION, "external_id": "x" * MAX_REFERENCE}).status_code == 201
    long_text = {**QUOTATION, "external_id": "q-2", "mode": "m" * (MAX_TEXT + 1)}
    answer = api.post(f"{MT}/quotations", long_text)
    assert error_of(answer) == (400, "1000999") and "mode" in message(answer)
    order = {"type": "C2B", "external_id": "o" * (MAX_REFERENCE + 1)}
    answer = api.post("/v1/payment/payment-orders", order)
    assert error_of(answer) == (400, "2001101") and "external_id" in message(answer)


def test_a_body_over_the_limit_is_413_in_each_family_and_nothing_is_kept(
        sandbox_factory: Any) -> None:
    sandbox = sandbox_factory(max_body_bytes=64 * 1024)
    api = Api(sandbox.url, (KEY, SECRET))
    ten_mb = {**QUOTATION, "external_id": "y" * 10_000_000}
    answer = api.post(f"{MT}/quotations", ten_mb, timeout=60)
    assert error_of(answer) == (413, "1000999"), answer.text[:200]
    assert "larger than 65536 bytes" in message(answer)
    assert api.get(f"{MT}/quotations/1").status_code == 404
    answer = raw_post(api, "/v1/account/transfer-requests", "[" + "0," * 40_000 + "0]")
    assert error_of(answer) == (413, "1000400")
    answer = raw_post(api, PAY, b"<Request>" + b" " * 70_000 + b"</Request>",
                      "application/xml")
    assert answer.status_code == 413 and b"<ReturnCode>9400</ReturnCode>" in answer.content
    # A body sent in chunks, with no length announced, is counted as it comes.
    chunks = (b"x" * 8192 for _ in range(20))
    answer = api.session.post(api.base + f"{MT}/quotations", data=chunks, timeout=30,
                              headers={"Content-Type": "application/json"})
    assert error_of(answer) == (413, "1000999")
    assert Api(sandbox.url, (KEY, SECRET)).post(f"{MT}/quotations", QUOTATION).status_code \
        == 201


def test_a_50000_deep_xml_body_to_the_legacy_pay_is_9400(api: Api) -> None:
    deep = b"<Request>" + b"<a>" * 50_000 + b"</a>" * 50_000 + b"</Request>"
    answer = raw_post(api, PAY, deep, "application/xml")
    assert answer.status_code == 400, answer.text[:300]
    assert b"<ReturnCode>9400</ReturnCode>" in answer.content
    assert b"nested more than 32 deep" in answer.content
    deep_json = '{"a": ' * 50_000 + "1" + "}" * 50_000
    answer = raw_post(api, PAY, deep_json)
    assert answer.status_code == 400 and body(answer)["ReturnCode"] == 9400


# ---------------------------------------------------------------- the admin knobs
@pytest.mark.parametrize("payload", [
    {"seconds": 1e300}, {"seconds": Decimal("1e18")}, {"seconds": -1}, {"seconds": "soon"},
    {"seconds": Decimal("31536000000000")},  # a million years, in range as a number
])
def test_clock_advances_out_of_bounds_are_refused_and_the_clock_goes_on(
        api: Api, admin: Admin, payload: dict[str, Any]) -> None:
    before = admin.api.get("/clock").json()["offset"]
    answer = admin.api.post("/clock/advance", payload)
    assert error_of(answer) == (400, "1000999"), answer.text
    assert "seconds" in message(answer)
    assert admin.api.get("/clock").json()["offset"] == before
    assert api.post(f"{MT}/quotations", QUOTATION).status_code == 201  # dates still written
    assert admin.advance(3600)["offset"] == before + 3600


@pytest.mark.parametrize("path, payload", [
    ("/timing", {"quotation_ttl": 1e300}), ("/timing", {"submit_delay": -1}),
    ("/timing", {"notification_delays": [1, 1e12]}), ("/timing", {"callback_attempts": 10**9}),
    ("/faults", {"rules": {"*": {"latency_ms": 1e12}}}),
    ("/faults", {"rules": {"*": {"error_rate": 2}}}),
    ("/faults", {"rules": {"*": {"lost_next": 10**12}}}),
    ("/faults", {"rules": {"*": {"requests_per_second": -3}}}),
    ("/faults", {"slow_seconds": 1e9}),
])
def test_admin_knobs_out_of_bounds_are_refused_and_change_nothing(
        api: Api, admin: Admin, path: str, payload: dict[str, Any]) -> None:
    method = "PATCH" if path == "/timing" else "POST"
    before = admin.api.get(path).json()
    answer = admin.api.call(method, path, payload)
    assert error_of(answer) == (400, "1000999"), answer.text
    assert admin.api.get(path).json() == before
    assert api.post(f"{MT}/quotations", QUOTATION).status_code == 201


def test_balances_set_out_of_range_are_refused(admin: Admin) -> None:
    answer = admin.api.call("PUT", "/balances/EUR", {"balance": "1e999999"})
    assert error_of(answer) == (400, "1000999"), answer.text


# ---------------------------------------------------------------- the connection
def test_an_unexpected_error_is_500_and_the_kept_alive_connection_serves_the_next(
        sandbox: RunningSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    item = QuoteFlow.item
    broken = iter([True])

    def once_broken(flow: QuoteFlow, store: Any, ref: str) -> Any:
        if next(broken, False):
            raise RuntimeError("a bug")  # what a bug in a route would do
        return item(flow, store, ref)

    monkeypatch.setattr(QuoteFlow, "item", once_broken)
    host = sandbox.url.removeprefix("http://")
    connection = http.client.HTTPConnection(host, timeout=30)
    auth = {"Authorization": "Basic " + base64.b64encode(f"{KEY}:{SECRET}".encode()).decode()}
    try:
        connection.request("GET", f"{MT}/transactions/1", headers=auth)
        first = connection.getresponse()
        assert first.status == 500
        assert simplejson.loads(first.read())["errors"][0]["code"] == "1009001"
        socket = connection.sock
        for _ in range(3):
            connection.request("GET", f"{MT}/transactions/1", headers=auth)
            again = connection.getresponse()
            again.read()
            assert again.status == 404
        assert connection.sock is socket  # the same connection all along
    finally:
        connection.close()
