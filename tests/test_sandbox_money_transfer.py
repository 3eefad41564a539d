"""The sandbox's money transfer flow over real HTTP: quotations and their exact prices, every
error code, transactions and their required fields, confirmation, balances, the lifecycle on
the sandbox clock and its test triggers, and credit party information and verification.

Each test has a sandbox of its own (the ``api``/``admin`` fixtures, or ``sandbox_factory``
for other timings); status changes wait 60 s on its clock, which the tests move.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Decimal
from typing import Any

import pytest
import requests
from conftest import KEY, SECRET, Admin, Api, body, error_of

from runner.sandbox import RunningSandbox

MT = "/v1/money-transfer"
D = Decimal
CENT = D("0.01")
CURRENCY = {1: "KES", 2: "XOF", 3: "UGX", 4: "PHP", 5: "INR", 6: "NGN", 7: "MXN", 8: "VND",
            9: "GHS", 10: "PHP", 11: "MXN", 12: "PHP", 13: "KES", 14: "GHS"}
SOURCE_COUNTRY = {"EUR": "FRA", "USD": "USA"}
# Fees are not part of the payer resource: the README's "fixed fee plus a percentage".
FEES = {1: (D("1.50"), D(0)), 2: (D("1.00"), D(0)), 3: (D("1.50"), D("0.5")),
        4: (D("3.00"), D(0)), 5: (D("2.50"), D(0)), 6: (D("2.00"), D("0.25")),
        7: (D("4.00"), D(0)), 8: (D("1.50"), D(0)), 9: (D("0.99"), D(0)),
        10: (D("2.00"), D(0)), 11: (D("1.50"), D(0)), 12: (D("1.50"), D(0))}

SENDER = {"firstname": "Jean", "lastname": "Dupont", "country_iso_code": "FRA",
          "nationality_country_iso_code": "FRA", "address": "1 rue de la Paix", "city": "Paris",
          "postal_code": "75002", "date_of_birth": "1980-01-31", "id_type": "PASSPORT",
          "id_number": "12AB34567", "source_of_funds": "SALARY",
          "beneficiary_relationship": "SISTER"}
BENEFICIARY = {"firstname": "Wanjiru", "lastname": "Kamau", "msisdn": "+254700100200",
               "bank_account_holder_name": "Wanjiru Kamau", "id_type": "NATIONAL_ID",
               "id_number": "12345678", "date_of_birth": "1990-05-12",
               "country_of_birth_iso_code": "KEN"}
WALLET = {"msisdn": "+254700100200"}
BANK = {"bank_account_number": "0012345678", "swift_bic_code": "BMNLPHMM"}

TRANSACTION_FIELDS = {
    "id", "status", "status_message", "status_class", "status_class_message", "external_id",
    "external_code", "payer_transaction_reference", "payer_transaction_code", "creation_date",
    "expiration_date", "credit_party_identifier", "source", "destination", "payer", "sender",
    "beneficiary", "callback_url", "sent_amount", "wholesale_fx_rate", "retail_rate",
    "retail_fee", "retail_fee_currency", "fee", "purpose_of_remittance",
    "additional_information_1", "additional_information_2", "additional_information_3"}
QUOTATION_FIELDS = {"id", "external_id", "payer", "mode", "source", "destination",
                    "sent_amount", "wholesale_fx_rate", "fee", "creation_date",
                    "expiration_date"}
SENDER_FIELDS = {
    "lastname", "lastname2", "middlename", "firstname", "nativename",
    "nationality_country_iso_code", "code", "date_of_birth", "country_of_birth_iso_code",
    "gender", "address", "postal_code", "city", "country_iso_code", "msisdn", "email", "id_type",
    "id_country_iso_code", "id_number", "id_delivery_date", "id_expiration_date", "occupation",
    "province_state", "beneficiary_relationship", "source_of_funds", "bank_account_number"}
BENEFICIARY_FIELDS = SENDER_FIELDS - {"beneficiary_relationship", "source_of_funds",
                                      "bank_account_number"} | {"bank_account_holder_name"}

# The spec README's status classes and sub-code messages.
CLASSES = {"1": "CREATED", "2": "CONFIRMED", "3": "REJECTED", "4": "CANCELLED",
           "5": "SUBMITTED", "6": "AVAILABLE", "7": "COMPLETED", "8": "REVERSED",
           "9": "DECLINED"}
MESSAGES = {"10000": "CREATED", "20000": "CONFIRMED", "20110": "CONFIRMED-UNDER-REVIEW-SLS",
            "30200": "REJECTED-INVALID-BENEFICIARY", "30201": "REJECTED-BARRED-BENEFICIARY",
            "50000": "SUBMITTED", "60000": "AVAILABLE", "70000": "COMPLETED",
            "80000": "REVERSED", "90400": "DECLINED-PAYER-CURRENTLY-UNAVAILABLE"}

_ext = itertools.count(1)


def ext(prefix: str = "q") -> str:
    return f"{prefix}-{next(_ext)}"


# ---------------------------------------------------------------- helpers
def qbody(payer_id: int, amount: str | Decimal | None, mode: str = "SOURCE_AMOUNT",
          currency: str = "EUR", **over: Any) -> dict[str, Any]:
    source: dict[str, Any] = {"country_iso_code": SOURCE_COUNTRY[currency], "currency": currency}
    destination: dict[str, Any] = {"currency": CURRENCY.get(payer_id, "KES")}
    if amount is not None:
        (source if mode == "SOURCE_AMOUNT" else destination)["amount"] = D(amount)
    return {"external_id": ext("q"), "payer_id": payer_id, "mode": mode, "source": source,
            "destination": destination, **over}


def quote(api: Api, payer_id: int, amount: str | Decimal | None, mode: str = "SOURCE_AMOUNT",
          currency: str = "EUR", **over: Any) -> requests.Response:
    return api.post(f"{MT}/quotations", qbody(payer_id, amount, mode, currency, **over))


def quoted(api: Api, payer_id: int, amount: str | Decimal, mode: str = "SOURCE_AMOUNT",
           currency: str = "EUR", **over: Any) -> dict[str, Any]:
    r = quote(api, payer_id, amount, mode, currency, **over)
    assert r.status_code == 201, r.text
    return body(r)  # type: ignore[no-any-return]


def tbody(identifier: dict[str, Any] | None = None, sender: dict[str, Any] | None = None,
          beneficiary: dict[str, Any] | None = None, **over: Any) -> dict[str, Any]:
    return {"credit_party_identifier": WALLET if identifier is None else identifier,
            "sender": SENDER if sender is None else sender,
            "beneficiary": BENEFICIARY if beneficiary is None else beneficiary,
            "external_id": ext("t"), "purpose_of_remittance": "FAMILY_SUPPORT", **over}


def transact(api: Api, quotation: Any, **kw: Any) -> requests.Response:
    return api.post(f"{MT}/quotations/{quotation}/transactions", tbody(**kw))


def created(api: Api, payer_id: int = 1, amount: str = "100.00", currency: str = "EUR",
            **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A quotation and a transaction made from it (status as the trigger decides)."""
    q = quoted(api, payer_id, amount, currency=currency)
    r = transact(api, q["id"], **kw)
    assert r.status_code == 201, r.text
    return q, body(r)


def wallet(digits: str) -> dict[str, str]:
    return {"msisdn": "+254700" + digits}


def confirm(api: Api, ref: Any) -> requests.Response:
    return api.post(f"{MT}/transactions/{ref}/confirm")


def confirmed(api: Api, ref: Any) -> dict[str, Any]:
    r = confirm(api, ref)
    assert r.status_code == 200, r.text
    return body(r)  # type: ignore[no-any-return]


def fetch(api: Api, ref: Any) -> dict[str, Any]:
    r = api.get(f"{MT}/transactions/{ref}")
    assert r.status_code == 200, r.text
    return body(r)  # type: ignore[no-any-return]


def balance(api: Api, currency: str) -> dict[str, Any]:
    r = api.get(f"{MT}/balances")
    assert r.status_code == 200, r.text
    return next(b for b in body(r) if b["currency"] == currency)  # type: ignore[no-any-return]


def money(api: Api, currency: str) -> tuple[Decimal, Decimal]:
    b = balance(api, currency)
    return b["balance"], b["available_balance"]


def bands(api: Api, payer_id: int, currency: str) -> list[dict[str, Any]]:
    r = api.get(f"{MT}/payers/{payer_id}/rates")
    assert r.status_code == 200, r.text
    return body(r)["rates"][currency]  # type: ignore[no-any-return]


def band_rate(api: Api, payer_id: int, currency: str, source: Decimal) -> Decimal:
    return next(b["wholesale_fx_rate"] for b in bands(api, payer_id, currency)
                if b["source_amount_min"] <= source <= b["source_amount_max"])


def payer(api: Api, payer_id: int) -> dict[str, Any]:
    return body(api.get(f"{MT}/payers/{payer_id}"))  # type: ignore[no-any-return]


def refusal(r: requests.Response) -> tuple[int, str, str]:
    status, code = error_of(r)
    return status, code, body(r)["errors"][0]["message"]


def assert_status(txn: dict[str, Any], code: str) -> None:
    assert (txn["status"], txn["status_message"], txn["status_class"],
            txn["status_class_message"]) == (code, MESSAGES[code], code[0], CLASSES[code[0]])


def expected_fee(payer_id: int, source: Decimal) -> Decimal:
    fixed, percent = FEES[payer_id]
    return (fixed + source * percent / 100).quantize(CENT, rounding=ROUND_HALF_UP)


def decimals(amount: Decimal | int) -> int:
    return max(0, -D(amount).normalize().as_tuple().exponent)  # type: ignore[operator]


def own(sandbox: RunningSandbox) -> tuple[Api, Admin]:
    return Api(sandbox.url, (KEY, SECRET)), Admin(sandbox.url)


# ---------------------------------------------------------------- quotations: prices
def test_payer_currencies_are_what_these_tests_assume(api: Api) -> None:
    r = api.get(f"{MT}/payers")
    assert {p["id"]: p["currency"] for p in body(r)} == CURRENCY


@pytest.mark.parametrize(("payer_id", "amount", "currency"), [
    (1, "100.00", "EUR"),
    (2, "123.45", "EUR"),  # XOF, increment 5
    (3, "200.00", "EUR"),  # UGX, increment 100, fee with a percentage
    (12, "33.33", "EUR"),  # PHP, increment 0.05
    (6, "400.00", "EUR"),  # NGN, increment 0.50, fee with a percentage
    (8, "77.77", "EUR"),  # VND, increment 1000
    (7, "55.55", "USD"),  # MXN, increment 10
    (5, "250.00", "USD"),  # INR, precision 2
    (1, "1000.00", "EUR"),  # last amount of the first band
    (1, "1000.01", "EUR"),  # first amount of the second band
    (4, "2500.00", "EUR"),  # second band
    (2, "1500.00", "USD"),  # second band
])
def test_source_amount_quotation_rounds_the_destination_down_to_precision_and_increment(
        api: Api, payer_id: int, amount: str, currency: str) -> None:
    p = payer(api, payer_id)
    source = D(amount)
    rate = band_rate(api, payer_id, currency, source)
    q = quoted(api, payer_id, amount, currency=currency)
    exact = source * rate
    increment = p["increment"]
    floor = (exact / increment).to_integral_value(rounding=ROUND_FLOOR) * increment
    destination = q["destination"]["amount"]
    assert destination == floor
    assert destination <= exact < destination + increment
    assert destination % increment == 0
    assert decimals(destination) <= p["precision"]
    assert q["wholesale_fx_rate"] == rate
    assert q["source"] == {"country_iso_code": SOURCE_COUNTRY[currency], "currency": currency,
                           "amount": source}
    assert q["destination"]["currency"] == p["currency"]
    assert q["sent_amount"] == {"currency": currency, "amount": source}
    assert q["fee"] == {"currency": currency, "amount": expected_fee(payer_id, source)}
    assert q["mode"] == "SOURCE_AMOUNT"
    assert q["payer"] == p
    assert set(q) >= QUOTATION_FIELDS


def test_source_amount_rounding_examples(api: Api) -> None:
    # 123.45 x 655.957 = 80977.89...; 77.77 x 4050.5 = 315007.38...; 33.33 x 63.4201 = 2113.79...
    assert quoted(api, 2, "123.45")["destination"]["amount"] == D("80975")
    assert quoted(api, 3, "77.77")["destination"]["amount"] == D("315000")
    assert quoted(api, 12, "33.33")["destination"]["amount"] == D("2113.75")
    assert quoted(api, 1, "1000.01")["destination"]["amount"] == D("140813")  # x 140.8125


@pytest.mark.parametrize(("payer_id", "amount", "currency"), [
    (1, "10000", "EUR"),
    (2, "50005", "EUR"),
    (3, "1000000", "EUR"),
    (12, "1234.55", "EUR"),
    (6, "99999.50", "EUR"),
    (9, "123.45", "USD"),
    (1, "200000", "EUR"),  # second band
    (4, "500000.01", "USD"),  # second band, no maximum
])
def test_destination_amount_quotation_rounds_the_source_up_to_the_cent(
        api: Api, payer_id: int, amount: str, currency: str) -> None:
    destination = D(amount)
    q = quoted(api, payer_id, amount, "DESTINATION_AMOUNT", currency)
    source = q["source"]["amount"]
    rate = q["wholesale_fx_rate"]
    assert rate == band_rate(api, payer_id, currency, source)
    assert source == (destination / rate).quantize(CENT, rounding=ROUND_CEILING)
    assert source * rate >= destination > (source - CENT) * rate
    assert q["destination"] == {"currency": CURRENCY[payer_id], "amount": destination}
    assert q["sent_amount"] == {"currency": currency, "amount": source}
    assert q["fee"] == {"currency": currency, "amount": expected_fee(payer_id, source)}
    assert q["mode"] == "DESTINATION_AMOUNT"


def test_destination_amount_examples_and_the_second_band(api: Api) -> None:
    low, high = bands(api, 1, "EUR")
    q = quoted(api, 1, "10000", "DESTINATION_AMOUNT")
    assert (q["source"]["amount"], q["wholesale_fx_rate"]) == (D("71.31"), low["wholesale_fx_rate"])
    q = quoted(api, 1, "200000", "DESTINATION_AMOUNT")
    assert (q["source"]["amount"], q["wholesale_fx_rate"]) == (D("1420.33"),
                                                               high["wholesale_fx_rate"])


@pytest.mark.parametrize("amount", ["140251", "140252", "140300", "140812", "140813"])
def test_destination_amounts_between_the_bands_cost_the_cheapest_source_that_delivers_them(
        api: Api, amount: str) -> None:
    # 1000.00 EUR buys 140251 KES in the first band and 1000.01 buys 140813 in the second:
    # amounts in between are no source amount's exact conversion, yet they are far below any
    # limit. The cheapest source that delivers them is the second band's first amount.
    destination = D(amount)
    low, high = bands(api, 1, "EUR")
    q = quoted(api, 1, amount, "DESTINATION_AMOUNT")
    source, rate = q["source"]["amount"], q["wholesale_fx_rate"]
    assert q["destination"]["amount"] == destination
    assert source * rate >= destination
    if destination <= D("1000.00") * low["wholesale_fx_rate"]:
        assert rate == low["wholesale_fx_rate"]
        assert source <= D("1000.00")
    else:
        assert (source, rate) == (D("1000.01"), high["wholesale_fx_rate"])
        assert D("1000.00") * low["wholesale_fx_rate"] < destination  # 1000.00 is too little


def test_quotation_expiry_is_the_configured_ttl(api: Api, admin: Admin,
                                                sandbox_factory: Callable[..., Any]) -> None:
    ttl = admin.timing()["quotation_ttl"]
    q = quoted(api, 1, "100.00")
    lifetime = (datetime.fromisoformat(q["expiration_date"])
                - datetime.fromisoformat(q["creation_date"]))
    assert lifetime.total_seconds() == ttl == 3600
    short_api, _ = own(sandbox_factory(quotation_ttl=120))
    q = quoted(short_api, 1, "100.00")
    lifetime = (datetime.fromisoformat(q["expiration_date"])
                - datetime.fromisoformat(q["creation_date"]))
    assert lifetime.total_seconds() == 120


def test_quotation_is_read_back_by_id_and_by_external_id(api: Api) -> None:
    q = quoted(api, 12, "33.33")
    for ref in (q["id"], f"ext-{q['external_id']}"):
        r = api.get(f"{MT}/quotations/{ref}")
        assert r.status_code == 200
        assert body(r) == q
    other = quoted(api, 12, "33.33")
    assert other["id"] != q["id"]
    assert body(api.get(f"{MT}/quotations/ext-{other['external_id']}"))["id"] == other["id"]


# ---------------------------------------------------------------- quotations: refusals
@pytest.mark.parametrize(("payer_id", "amount", "mode", "over", "code"), [
    (999, "100.00", "SOURCE_AMOUNT", {}, "1003002"),
    (13, "100.00", "SOURCE_AMOUNT", {}, "1003001"),
    (14, "100.00", "SOURCE_AMOUNT", {}, "1003007"),
    (1, "0.71", "SOURCE_AMOUNT", {}, "1003011"),  # 99.58 KES -> 99 < 100
    (1, "99", "DESTINATION_AMOUNT", {}, "1003011"),
    (3, "1.23", "SOURCE_AMOUNT", {}, "1003011"),  # 4982.1 UGX -> 4900 < 5000
    (1, "1800.00", "SOURCE_AMOUNT", {}, "1003012"),  # 253462 KES > 250000
    (1, "250001", "DESTINATION_AMOUNT", {}, "1003012"),
    (1, "100.00", "SOURCE_AMOUNT", {"destination": {"currency": "UGX"}}, "1003010"),
    (4, "100.00", "SOURCE_AMOUNT", {"destination": {"currency": "MXN"}}, "1003010"),
    (1, "100.00", "SOURCE_AMOUNT",
     {"source": {"country_iso_code": "KEN", "currency": "EUR", "amount": 100}}, "1000998"),
    (1, "100.00", "SOURCE_AMOUNT",
     {"source": {"country_iso_code": "CHE", "currency": "EUR", "amount": 100}}, "1000998"),
    (2, "1003", "DESTINATION_AMOUNT", {}, "1003008"),  # XOF: not a multiple of 5
    (3, "50050", "DESTINATION_AMOUNT", {}, "1003008"),  # UGX: not a multiple of 100
    (12, "100.03", "DESTINATION_AMOUNT", {}, "1003008"),  # PHP: not a multiple of 0.05
    (1, "100.5", "DESTINATION_AMOUNT", {}, "1003008"),  # KES: precision 0
    (4, "1000000.01", "SOURCE_AMOUNT", {}, "1006001"),  # over the last band, no maximum
    (4, "100000000.00", "DESTINATION_AMOUNT", {}, "1006001"),
])
def test_quotation_refusals(api: Api, payer_id: int, amount: str, mode: str,
                            over: dict[str, Any], code: str) -> None:
    r = quote(api, payer_id, amount, mode, **over)
    assert error_of(r) == (400, code), r.text
    assert body(r)["errors"][0]["message"]


@pytest.mark.parametrize(("payer_id", "amount", "mode"), [
    (1, "0.72", "SOURCE_AMOUNT"),  # 100.98 KES -> 100, the minimum
    (1, "100", "DESTINATION_AMOUNT"),
    (1, "250000", "DESTINATION_AMOUNT"),  # the maximum
    (4, "1000000.00", "SOURCE_AMOUNT"),  # the last band's end, no maximum
    (4, "999999.99", "SOURCE_AMOUNT"),
])
def test_quotation_limits_are_inclusive(api: Api, payer_id: int, amount: str, mode: str) -> None:
    assert quote(api, payer_id, amount, mode).status_code == 201


def _without(data: dict[str, Any], *path: str) -> dict[str, Any]:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    target = out
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return out


@pytest.mark.parametrize(("change", "field"), [
    (lambda b: _without(b, "payer_id"), "payer_id"),
    (lambda b: _without(b, "external_id"), "external_id"),
    (lambda b: _without(b, "source"), "source"),
    (lambda b: _without(b, "source", "amount"), "source.amount"),
    (lambda b: {**b, "source": {**b["source"], "amount": "abc"}}, "source.amount"),
    (lambda b: {**b, "source": {**b["source"], "amount": -5}}, "source.amount"),
    (lambda b: {**b, "source": {**b["source"], "amount": D("10.001")}}, "source.amount"),
    (lambda b: {**b, "mode": "BOTH"}, "mode"),
    (lambda b: {**b, "payer_id": "one"}, "payer_id"),
    (lambda b: {**b, "mode": "DESTINATION_AMOUNT"}, "destination.amount"),
    (lambda b: {**b, "source": {**b["source"], "currency": "JPY"}}, "source.currency"),
])
def test_invalid_quotation_request_is_1000999_naming_the_field(
        api: Api, change: Callable[[dict[str, Any]], dict[str, Any]], field: str) -> None:
    r = api.post(f"{MT}/quotations", change(qbody(1, "100.00")))
    status, code, message = refusal(r)
    assert (status, code) == (400, "1000999")
    assert field in message


def raw_post(api: Api, path: str, data: bytes) -> requests.Response:
    return api.session.post(api.base + MT + path, data=data, timeout=60,
                            headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("path", ["/quotations", "/quotations/1/transactions"])
def test_malformed_json_body_is_1000999(api: Api, path: str) -> None:
    quoted(api, 1, "100.00")  # so that quotation 1 exists
    status, code, message = refusal(raw_post(api, path, b'{"external_id": '))
    assert (status, code) == (400, "1000999")
    assert "body" in message


@pytest.mark.parametrize("path", ["/quotations", "/quotations/1/transactions"])
def test_a_body_that_is_no_object_is_1000999(api: Api, path: str) -> None:
    quoted(api, 1, "100.00")
    for data in (b"[]", b'"quotation"', b"42"):
        status, code, message = refusal(raw_post(api, path, data))
        assert (status, code) == (400, "1000999")
        assert "body" in message


def test_quotation_external_id_is_unique(api: Api) -> None:
    first = qbody(1, "100.00")
    assert api.post(f"{MT}/quotations", first).status_code == 201
    again = qbody(2, "50.00", external_id=first["external_id"])
    assert error_of(api.post(f"{MT}/quotations", again)) == (400, "1007001")
    kept = body(api.get(f"{MT}/quotations/ext-{first['external_id']}"))
    assert kept["payer"]["id"] == 1


@pytest.mark.parametrize("ref", ["999999", "ext-no-such-quotation"])
def test_unknown_quotation_is_1008002(api: Api, ref: str) -> None:
    assert error_of(api.get(f"{MT}/quotations/{ref}")) == (404, "1008002")
    assert error_of(transact(api, ref)) == (404, "1008002")


@pytest.mark.parametrize("ref", ["999999", "ext-no-such-transaction"])
def test_unknown_transaction_is_1008004(api: Api, ref: str) -> None:
    assert error_of(api.get(f"{MT}/transactions/{ref}")) == (404, "1008004")
    assert error_of(confirm(api, ref)) == (404, "1008004")


@pytest.mark.parametrize("path", ["/nope", "/quotations/1/nope", "/payers/1/rates/EUR"])
def test_unknown_path_is_1000404(api: Api, path: str) -> None:
    assert error_of(api.get(MT + path)) == (404, "1000404")
    assert error_of(api.get("/v1/nothing-here")) == (404, "1000404")


# ---------------------------------------------------------------- transactions
def test_transaction_copies_its_quotation_and_echoes_the_request(api: Api) -> None:
    q = quoted(api, 1, "100.00")
    request = tbody(external_code="CODE-1", callback_url="http://127.0.0.1:9/cb",
                    retail_rate=D("139.1"), retail_fee=D("2.50"), retail_fee_currency="EUR",
                    additional_information_1="one", additional_information_2="two",
                    additional_information_3="three")
    r = api.post(f"{MT}/quotations/{q['id']}/transactions", request)
    assert r.status_code == 201, r.text
    t = body(r)
    assert set(t) >= TRANSACTION_FIELDS
    assert_status(t, "10000")
    for field in ("source", "destination", "payer", "fee", "sent_amount", "wholesale_fx_rate",
                  "expiration_date"):
        assert t[field] == q[field], field
    for field in ("external_id", "external_code", "callback_url", "retail_rate", "retail_fee",
                  "retail_fee_currency", "purpose_of_remittance", "additional_information_1",
                  "additional_information_2", "additional_information_3"):
        assert t[field] == request[field], field
    assert t["credit_party_identifier"] == WALLET
    assert set(t["sender"]) >= SENDER_FIELDS
    assert set(t["beneficiary"]) >= BENEFICIARY_FIELDS
    assert {k: t["sender"][k] for k in SENDER} == SENDER
    assert {k: t["beneficiary"][k] for k in BENEFICIARY} == BENEFICIARY
    assert t["payer_transaction_reference"] is None and t["payer_transaction_code"] is None
    datetime.fromisoformat(t["creation_date"])
    assert t["creation_date"] >= q["creation_date"]


def test_transaction_is_read_back_by_id_and_by_external_id(api: Api) -> None:
    _, t = created(api)
    assert fetch(api, t["id"]) == t
    assert fetch(api, f"ext-{t['external_id']}") == t


def test_transaction_from_a_quotation_external_id(api: Api) -> None:
    q = quoted(api, 12, "33.33")
    r = transact(api, f"ext-{q['external_id']}")
    assert r.status_code == 201, r.text
    assert body(r)["destination"] == q["destination"]


def test_transaction_external_id_is_unique_but_may_repeat_a_quotation_one(api: Api) -> None:
    q1, q2 = quoted(api, 1, "100.00"), quoted(api, 1, "120.00")
    r = transact(api, q1["id"], external_id=q1["external_id"])
    assert r.status_code == 201, r.text
    assert error_of(transact(api, q2["id"], external_id=q1["external_id"])) == (400, "1007001")
    assert fetch(api, f"ext-{q1['external_id']}")["source"] == q1["source"]


def test_confirm_by_id_and_by_external_id(api: Api) -> None:
    _, t1 = created(api)
    c1 = confirmed(api, t1["id"])
    assert_status(c1, "20000")
    assert c1["id"] == t1["id"]
    assert_status(fetch(api, t1["id"]), "20000")
    _, t2 = created(api)
    r = confirm(api, f"ext-{t2['external_id']}")
    assert r.status_code == 200
    assert_status(body(r), "20000")
    assert body(r)["id"] == t2["id"]
    assert error_of(confirm(api, t1["id"])) == (400, "1007002")
    assert error_of(confirm(api, f"ext-{t2['external_id']}")) == (400, "1007002")


@pytest.mark.parametrize(("payer_id", "identifier"), [
    (6, {"msisdn": "+2348031234567"}),
    (6, {"bank_account_number": "1234567890", "swift_bic_code": "LCBKNGLA"}),
    (4, BANK),
    (1, WALLET),
])
def test_accepted_credit_party_identifiers(api: Api, payer_id: int,
                                           identifier: dict[str, str]) -> None:
    q = quoted(api, payer_id, "100.00")
    r = transact(api, q["id"], identifier=identifier)
    assert r.status_code == 201, r.text
    assert body(r)["credit_party_identifier"] == identifier


@pytest.mark.parametrize(("payer_id", "kw", "field"), [
    (4, {"identifier": {"bank_account_number": "0012345678"}},
     "credit_party_identifier.swift_bic_code"),
    (4, {"identifier": WALLET}, "credit_party_identifier."),
    (6, {"identifier": {"swift_bic_code": "LCBKNGLA"}}, "credit_party_identifier."),
    (6, {"identifier": {}}, "credit_party_identifier.msisdn"),
    (1, {"identifier": BANK}, "credit_party_identifier.msisdn"),
    (2, {"sender": {"firstname": "Jean", "lastname": "Dupont"}}, "sender.country_iso_code"),
    (5, {"identifier": BANK, "sender": {**SENDER, "id_number": None}}, "sender.id_number"),
    (5, {"identifier": BANK, "sender": {**SENDER, "date_of_birth": " "}},
     "sender.date_of_birth"),
    (9, {"sender": {"firstname": "Jean", "lastname": "Dupont"}}, "sender.date_of_birth"),
    (9, {"sender": {"firstname": "Jean", "lastname": "Dupont", "id_type": "PASSPORT",
                    "id_number": ""}}, "sender.date_of_birth"),
    (7, {"beneficiary": {"firstname": "Lucia", "lastname": "Hernandez"}}, "beneficiary."),
    (7, {"beneficiary": {"firstname": "Lucia", "lastname": "Hernandez",
                         "date_of_birth": "1990-01-01"}},
     "beneficiary.country_of_birth_iso_code"),
    (4, {"identifier": BANK, "beneficiary": {"firstname": "Maria", "lastname": "Santos"}},
     "beneficiary.bank_account_holder_name"),
    (1, {"sender": {**SENDER, "date_of_birth": "31/01/1980"}}, "sender.date_of_birth"),
    (1, {"sender": {**SENDER, "id_expiration_date": "2030-1-1"}}, "sender.id_expiration_date"),
    (1, {"beneficiary": {**BENEFICIARY, "date_of_birth": "19900512"}},
     "beneficiary.date_of_birth"),
    (1, {"sender": {**SENDER, "country_iso_code": "FR"}}, "sender.country_iso_code"),
    (1, {"sender": {**SENDER, "nationality_country_iso_code": "FRX"}},
     "sender.nationality_country_iso_code"),
    (1, {"beneficiary": {**BENEFICIARY, "country_of_birth_iso_code": "KENYA"}},
     "beneficiary.country_of_birth_iso_code"),
    (1, {"sender": "Jean Dupont"}, "sender"),
])
def test_invalid_transaction_is_1000999_naming_the_field(
        api: Api, payer_id: int, kw: dict[str, Any], field: str) -> None:
    q = quoted(api, payer_id, "100.00")
    status, code, message = refusal(transact(api, q["id"], **kw))
    assert (status, code) == (400, "1000999")
    assert field in message


@pytest.mark.parametrize("date", ["1990-02-30", "1990-13-01", "1990-00-10"])
def test_an_impossible_date_is_1000999(api: Api, date: str) -> None:
    q = quoted(api, 1, "100.00")
    status, code, message = refusal(transact(api, q["id"],
                                             sender={**SENDER, "date_of_birth": date}))
    assert (status, code) == (400, "1000999")
    assert "sender.date_of_birth" in message


@pytest.mark.parametrize("missing", ["credit_party_identifier", "sender", "beneficiary",
                                     "external_id", "purpose_of_remittance"])
def test_missing_transaction_field_is_1000999_naming_it(api: Api, missing: str) -> None:
    q = quoted(api, 1, "100.00")
    request = tbody()
    del request[missing]
    status, code, message = refusal(api.post(f"{MT}/quotations/{q['id']}/transactions", request))
    assert (status, code) == (400, "1000999")
    assert missing in message


@pytest.mark.parametrize(("payer_id", "kw"), [
    (9, {"sender": {"firstname": "Jean", "lastname": "Dupont", "date_of_birth": "1980-01-31"}}),
    (9, {"sender": {"firstname": "Jean", "lastname": "Dupont", "id_type": "PASSPORT",
                    "id_number": "X1"}}),
    (5, {"identifier": BANK}),
    (7, {"beneficiary": {"firstname": "Lucia", "lastname": "Hernandez", "id_type": "PASSPORT",
                         "id_number": "G123"}}),
    (7, {"beneficiary": {"firstname": "Lucia", "lastname": "Hernandez",
                         "date_of_birth": "1990-01-01", "country_of_birth_iso_code": "MEX"}}),
    (6, {"identifier": {"msisdn": "+2348031234567"},
         "beneficiary": {"bank_account_holder_name": "Adaeze Nwosu"}}),
    (2, {"sender": {"firstname": "Jean", "lastname": "Dupont", "country_iso_code": "FRA"}}),
])
def test_each_alternative_of_the_required_fields_is_enough(api: Api, payer_id: int,
                                                           kw: dict[str, Any]) -> None:
    q = quoted(api, payer_id, "100.00")
    r = transact(api, q["id"], **kw)
    assert r.status_code == 201, r.text


def test_transaction_on_an_expired_quotation_is_1008003(api: Api, admin: Admin) -> None:
    ttl = admin.timing()["quotation_ttl"]
    late, in_time = quoted(api, 1, "100.00"), quoted(api, 1, "100.00")
    admin.advance(ttl - 1)
    r = transact(api, in_time["id"])
    assert r.status_code == 201, r.text
    admin.advance(2)
    assert error_of(transact(api, late["id"])) == (400, "1008003")
    assert error_of(transact(api, f"ext-{late['external_id']}")) == (400, "1008003")
    assert error_of(confirm(api, body(r)["id"])) == (400, "1007004")
    assert_status(fetch(api, body(r)["id"]), "10000")


def test_a_short_configured_ttl_expires_quotations(sandbox_factory: Callable[..., Any]) -> None:
    api, admin = own(sandbox_factory(quotation_ttl=30))
    q = quoted(api, 1, "100.00")
    _, t = created(api)
    admin.advance(31)
    assert error_of(transact(api, q["id"])) == (400, "1008003")
    assert error_of(confirm(api, f"ext-{t['external_id']}")) == (400, "1007004")
    assert body(api.get(f"{MT}/quotations/{q['id']}")) == q  # still readable


# ---------------------------------------------------------------- confirmation and balances
def test_rejected_at_creation_cannot_be_confirmed(api: Api) -> None:
    before = money(api, "EUR")
    _, t = created(api, identifier=wallet("999301"))
    assert_status(t, "30201")
    assert error_of(confirm(api, t["id"])) == (400, "1007003")
    assert_status(fetch(api, t["id"]), "30201")
    assert money(api, "EUR") == before


def test_confirm_reserves_the_cost_and_completion_settles_it(api: Api, admin: Admin) -> None:
    start, available = money(api, "EUR")
    assert start == available
    q, t = created(api, payer_id=3, amount="200.00")
    cost = q["sent_amount"]["amount"] + q["fee"]["amount"]
    assert cost == D("202.50")
    confirmed(api, t["id"])
    assert money(api, "EUR") == (start, start - cost)
    admin.advance(60)
    assert_status(fetch(api, t["id"]), "50000")
    assert money(api, "EUR") == (start, start - cost)
    admin.advance(60)
    assert_status(fetch(api, t["id"]), "70000")
    assert money(api, "EUR") == (start - cost, start - cost)


def test_with_no_delays_a_confirmed_transaction_completes_on_the_next_clock_move(
        sandbox_factory: Callable[..., Any]) -> None:
    api, admin = own(sandbox_factory(submit_delay=0, complete_delay=0))
    start, _ = money(api, "EUR")
    q, t = created(api, payer_id=6, amount="400.00")
    cost = q["sent_amount"]["amount"] + q["fee"]["amount"]
    assert cost == D("403.00")
    assert_status(confirmed(api, t["id"]), "20000")
    admin.advance(0)
    assert_status(fetch(api, t["id"]), "70000")
    assert money(api, "EUR") == (start - cost, start - cost)


def test_balances_show_the_money_of_status_changes_already_due(
        sandbox_factory: Callable[..., Any]) -> None:
    # The background ticker never runs here: what is due must apply when balances are read,
    # as it does when a transaction is read.
    api, _ = own(sandbox_factory(tick=3600, submit_delay=0, complete_delay=0))
    start, _ = money(api, "EUR")
    q, t = created(api)
    cost = q["sent_amount"]["amount"] + q["fee"]["amount"]
    confirmed(api, t["id"])
    assert money(api, "EUR") == (start - cost, start - cost)
    assert_status(fetch(api, t["id"]), "70000")


def test_insufficient_balance_keeps_the_transaction_until_money_arrives(api: Api,
                                                                        admin: Admin) -> None:
    admin.balance("EUR", "50.00")
    assert money(api, "EUR") == (D("50.00"), D("50.00"))
    _, big = created(api, amount="100.00")  # costs 101.50
    assert error_of(confirm(api, big["id"])) == (400, "1007005")
    assert_status(fetch(api, big["id"]), "10000")
    assert money(api, "EUR") == (D("50.00"), D("50.00"))
    _, exact = created(api, amount="48.50")  # costs 50.00: all there is
    confirmed(api, exact["id"])
    assert money(api, "EUR") == (D("50.00"), D("0.00"))
    admin.balance("EUR", "200.00")
    assert_status(confirmed(api, f"ext-{big['external_id']}"), "20000")
    assert money(api, "EUR") == (D("200.00"), D("48.50"))


def test_credit_facility_lets_the_balance_go_below_zero_up_to_it(api: Api,
                                                                  admin: Admin) -> None:
    admin.balance("USD", "100.00", "503.00")
    assert balance(api, "USD")["credit_facility"] == D("503.00")
    _, t1 = created(api, amount="300.00", currency="USD")  # costs 301.50
    _, t2 = created(api, amount="300.00", currency="USD")
    _, t3 = created(api, payer_id=9, amount="1.00", currency="USD")  # costs 1.99
    confirmed(api, t1["id"])
    assert money(api, "USD") == (D("100.00"), D("-201.50"))
    confirmed(api, t2["id"])  # exactly up to the facility
    assert money(api, "USD") == (D("100.00"), D("-503.00"))
    assert error_of(confirm(api, t3["id"])) == (400, "1007005")
    admin.advance(120)
    assert money(api, "USD") == (D("-503.00"), D("-503.00"))
    assert money(api, "EUR") == (D("10000000.00"), D("10000000.00"))


def test_default_usd_credit_facility_allows_spending_past_the_balance(api: Api,
                                                                      admin: Admin) -> None:
    admin.balance("USD", "0.00")
    assert balance(api, "USD")["credit_facility"] == D("250000.00")
    _, t = created(api, amount="999.00", currency="USD")
    confirmed(api, t["id"])
    assert money(api, "USD") == (D("0.00"), D("-1000.50"))
    admin.balance("EUR", "0.00")
    _, e = created(api, amount="1.00")
    assert error_of(confirm(api, e["id"])) == (400, "1007005")


# ---------------------------------------------------------------- lifecycle and triggers
def test_confirmed_stays_until_the_clock_moves(api: Api, admin: Admin) -> None:
    _, t = created(api)
    assert_status(confirmed(api, t["id"]), "20000")
    admin.advance(50)
    assert_status(fetch(api, t["id"]), "20000")
    admin.advance(10)
    assert_status(fetch(api, t["id"]), "50000")
    assert error_of(confirm(api, t["id"])) == (400, "1007002")
    admin.advance(50)
    assert_status(fetch(api, t["id"]), "50000")
    admin.advance(10)
    done = fetch(api, t["id"])
    assert_status(done, "70000")
    admin.advance(3600)
    assert fetch(api, f"ext-{t['external_id']}") == done


@pytest.mark.parametrize(("digits", "steps", "settles"), [
    ("100200", ["50000", "70000"], True),
    ("999306", ["50000", "60000", "70000"], True),
    ("999308", ["50000", "60000", "80000"], False),
    ("999309", ["50000", "90400"], False),
    ("999302", ["30200"], False),
    ("999320", ["20110", "50000", "70000"], True),
])
def test_lifecycle_by_trigger_and_the_money_it_moves(api: Api, admin: Admin, digits: str,
                                                     steps: list[str], settles: bool) -> None:
    start, _ = money(api, "EUR")
    q, t = created(api, identifier=wallet(digits))
    cost = q["sent_amount"]["amount"] + q["fee"]["amount"]
    assert_status(t, "10000")
    assert_status(confirmed(api, t["id"]), "20000")
    assert money(api, "EUR") == (start, start - cost)
    for n, code in enumerate(steps, 1):
        admin.advance(60)
        assert_status(fetch(api, t["id"]), code)
        if n < len(steps):
            assert money(api, "EUR") == (start, start - cost), code
    end = start - cost if settles else start
    assert money(api, "EUR") == (end, end)
    admin.advance(600)
    assert_status(fetch(api, t["id"]), steps[-1])
    assert money(api, "EUR") == (end, end)


def test_trigger_uses_the_first_identifier_with_digits(api: Api, admin: Admin) -> None:
    q = quoted(api, 6, "100.00")
    r = transact(api, q["id"], identifier={"bank_account_number": "NG-000999302",
                                            "swift_bic_code": "LCBKNGLA"})
    assert r.status_code == 201, r.text
    confirmed(api, body(r)["id"])
    admin.advance(60)
    assert_status(fetch(api, body(r)["id"]), "30200")


# ---------------------------------------------------------------- credit parties
def parties(api: Api, payer_id: int, kind: str, identifier: dict[str, Any],
            **extra: Any) -> requests.Response:
    return api.post(f"{MT}/payers/{payer_id}/credit-party-{kind}",
                    {"credit_party_identifier": identifier, **extra})


@pytest.mark.parametrize(("payer_id", "identifier", "names", "country"), [
    (1, {"msisdn": "+254700100200"}, ("Wanjiru", "Kamau"), "KEN"),
    (12, {"msisdn": "+639171234567"}, ("Maria", "Santos"), "PHL"),
    (4, {"bank_account_number": "0012345678", "swift_bic_code": "BMNLPHMM"},
     ("Juan", "Dela Cruz"), "PHL"),
])
def test_credit_party_information_for_known_identifiers(
        api: Api, payer_id: int, identifier: dict[str, str], names: tuple[str, str],
        country: str) -> None:
    r = parties(api, payer_id, "information", identifier)
    assert r.status_code == 200, r.text
    beneficiary = body(r)
    assert (beneficiary["firstname"], beneficiary["lastname"]) == names
    assert beneficiary["country_iso_code"] == country
    assert set(beneficiary) >= BENEFICIARY_FIELDS


def test_credit_party_information_refusals(api: Api) -> None:
    assert error_of(parties(api, 1, "information", {"msisdn": "+254700555555"})) == (
        404, "1000404")
    status, code, message = refusal(parties(api, 4, "information", {"msisdn": "+639171234567"}))
    assert (status, code) == (400, "1000999")
    assert "credit_party_identifier." in message
    status, code, message = refusal(parties(api, 4, "information",
                                            {"bank_account_number": "0012345678"}))
    assert (status, code) == (400, "1000999")
    assert "credit_party_identifier.swift_bic_code" in message
    assert error_of(api.post(f"{MT}/payers/1/credit-party-information", {})) == (400, "1000999")
    assert error_of(parties(api, 13, "information", WALLET)) == (400, "1003001")
    assert error_of(parties(api, 14, "information", BANK)) == (400, "1003007")


@pytest.mark.parametrize(("identifier", "status"), [
    ({"msisdn": "+254700100200"}, "AVAILABLE"),
    ({"msisdn": "+254700555555"}, "AVAILABLE"),
    ({"msisdn": "+254700999401"}, "UNREGISTERED"),
    ({"msisdn": "+254700999402"}, "UNAVAILABLE"),
])
def test_credit_party_verification(api: Api, identifier: dict[str, str], status: str) -> None:
    r = parties(api, 1, "verification", identifier,
                beneficiary={"firstname": "Wanjiru", "lastname": "Kamau"})
    assert r.status_code == 200, r.text
    assert body(r) == {"id": 1, "account_status": status}
    assert body(parties(api, 1, "verification", identifier))["account_status"] == status


def test_credit_party_verification_checks_identifiers_per_payer(api: Api) -> None:
    r = parties(api, 6, "verification", {"bank_account_number": "1234999402",
                                        "swift_bic_code": "LCBKNGLA"})
    assert body(r)["account_status"] == "UNAVAILABLE"
    status, code, message = refusal(parties(api, 8, "verification", {"msisdn": "+84901234567"}))
    assert (status, code) == (400, "1000999")
    assert "credit_party_identifier." in message
    status, code, message = refusal(parties(api, 1, "verification", {"msisdn": ""}))
    assert (status, code) == (400, "1000999")
    assert "credit_party_identifier.msisdn" in message
