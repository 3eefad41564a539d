"""The sandbox's merchant payment service (document 3, part A) over real HTTP: discovery,
debit parties, quotations priced in exact decimals, payments in both request forms, confirm
with payment details, the merchant wording of error codes, and the lifecycle on the sandbox
clock with its test triggers and the merchant balance it credits."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from conftest import Admin, Api, body, error_of

MP = "/v1/merchant-payment"
KNOWN_MSISDN = "+254700100200"
NAMES = {"firstname": "Ada", "lastname": "Lovelace"}
DETAIL_FIELDS = ("qr_code", "qr_url", "instructions", "merchant_id", "invoice_id",
                 "redirect_url", "amount", "currency")
# method id -> (country, currency, a debit party identifier, a complete consumer)
METHODS = {
    1: ("KEN", "KES", {"msisdn": KNOWN_MSISDN}, NAMES),
    2: ("NGA", "NGN", {"bank_account_number": "1234567890"}, {**NAMES, "email": "a@x.test"}),
    3: ("MEX", "MXN", {"email": "ada@x.test"}, {**NAMES, "email": "a@x.test"}),
    4: ("SEN", "XOF", {"msisdn": "+221770001122"}, NAMES),
    5: ("PHL", "PHP", {"msisdn": "+639171234567"}, NAMES),
}


# ---------------------------------------------------------------- helpers
def quotation_body(external_id: str, method_id: int = 1, mode: str = "PAYMENT_AMOUNT",
                   amount: str | None = "1000", collect: str = "EUR") -> dict[str, Any]:
    country, currency = METHODS.get(method_id, METHODS[1])[:2]
    payment: dict[str, Any] = {"country_iso_code": country, "currency": currency}
    collection: dict[str, Any] = {"currency": collect}
    if amount is not None:
        side = payment if mode == "PAYMENT_AMOUNT" else collection
        side["amount"] = Decimal(amount)
    return {"external_id": external_id, "payment_method_id": method_id, "mode": mode,
            "payment": payment, "collection": collection}


def quote(api: Api, external_id: str, **kw: Any) -> dict[str, Any]:
    r = api.post(f"{MP}/quotations", quotation_body(external_id, **kw))
    assert r.status_code == 201, r.text
    return body(r)  # type: ignore[no-any-return]


def payment_body(external_id: str, method_id: int = 1, identifier: dict[str, str] | None = None,
                 **extra: Any) -> dict[str, Any]:
    _, _, default_identifier, consumer = METHODS[method_id]
    return {"external_id": external_id,
            "debit_party_identifier": identifier or default_identifier,
            "consumer": dict(consumer), "purpose_of_payment": "OTHER", **extra}


def create_payment(api: Api, name: str, method_id: int = 1,
                   identifier: dict[str, str] | None = None, **quote_kw: Any) -> dict[str, Any]:
    q = quote(api, f"q-{name}", method_id=method_id, **quote_kw)
    r = api.post(f"{MP}/quotations/{q['id']}/payments",
                 payment_body(f"p-{name}", method_id, identifier))
    assert r.status_code == 201, r.text
    return body(r)  # type: ignore[no-any-return]


def confirm(api: Api, ref: object) -> dict[str, Any]:
    r = api.post(f"{MP}/payments/{ref}/confirm")
    assert r.status_code == 200, r.text
    return body(r)  # type: ignore[no-any-return]


def status_of(api: Api, payment_id: int) -> str:
    return body(api.get(f"{MP}/payments/{payment_id}"))["status"]  # type: ignore[no-any-return]


def merchant_balance(api: Api, currency: str) -> Decimal:
    found = {b["currency"]: b for b in body(api.get(f"{MP}/balances"))}
    assert found[currency]["available_balance"] == found[currency]["balance"]
    return found[currency]["balance"]  # type: ignore[no-any-return]


def refused(response: Any, status: int, code: str, wording: str) -> str:
    """Assert an error answer and return its message."""
    assert error_of(response) == (status, code), response.text
    message: str = body(response)["errors"][0]["message"]
    assert message.startswith(wording), message
    return message


# ---------------------------------------------------------------- discovery
def test_countries_are_those_of_the_payment_methods(api: Api) -> None:
    r = api.get(f"{MP}/countries")
    assert r.status_code == 200
    assert body(r) == [{"iso_code": "GHA", "name": "Ghana"}, {"iso_code": "IND", "name": "India"},
                       {"iso_code": "KEN", "name": "Kenya"}, {"iso_code": "MEX", "name": "Mexico"},
                       {"iso_code": "NGA", "name": "Nigeria"},
                       {"iso_code": "PHL", "name": "Philippines"},
                       {"iso_code": "SEN", "name": "Senegal"}]
    assert r.headers["X-Total"] == "7"


def test_payment_methods_list_and_pagination(api: Api) -> None:
    r = api.get(f"{MP}/payment-methods")
    assert r.status_code == 200
    methods = body(r)
    assert [m["id"] for m in methods] == list(range(1, 9))
    assert set(methods[0]) == {
        "id", "name", "description", "country_iso_code", "currency", "precision", "increment",
        "minimum_payment_amount", "maximum_payment_amount", "debit_party_identifiers_accepted",
        "debit_party_information", "debit_party_verification", "payment_details_fields",
        "required_consumer_fields"}
    page = api.get(f"{MP}/payment-methods", params={"page": 2, "per_page": 3})
    assert [m["id"] for m in body(page)] == [4, 5, 6]
    assert (page.headers["X-Total"], page.headers["X-Total-Pages"], page.headers["X-Page"],
            page.headers["X-Per-Page"], page.headers["X-Next-Page"],
            page.headers["X-Prev-Page"]) == ("8", "3", "2", "3", "3", "1")
    assert error_of(api.get(f"{MP}/payment-methods", params={"page": 4, "per_page": 3})) == \
        (400, "1003009")


def test_payment_methods_filters(api: Api) -> None:
    for query, ids in (({"country_iso_code": "KEN"}, [1, 7]),
                       ({"currency": "PHP"}, [5]),
                       ({"country_iso_code": "SEN", "currency": "XOF"}, [4]),
                       ({"country_iso_code": "KEN", "currency": "PHP"}, [])):
        r = api.get(f"{MP}/payment-methods", params=query)
        assert r.status_code == 200
        assert [m["id"] for m in body(r)] == ids, query
        assert r.headers["X-Total"] == str(len(ids))


def test_one_payment_method_with_exact_precision_and_increment(api: Api) -> None:
    xof = body(api.get(f"{MP}/payment-methods/4"))
    assert (xof["currency"], xof["precision"], xof["increment"]) == ("XOF", 0, Decimal(5))
    assert xof["required_consumer_fields"] == [["firstname", "lastname"], ["msisdn"]]
    assert xof["debit_party_verification"]["required_consumer_fields"] == \
        xof["required_consumer_fields"]
    php = api.get(f"{MP}/payment-methods/5")
    assert b'"increment":0.05' in php.content  # a JSON number, digit for digit
    assert body(php)["increment"] == Decimal("0.05")
    assert body(php)["debit_party_identifiers_accepted"] == [["msisdn"],
                                                             ["bank_account_number"]]
    assert body(api.get(f"{MP}/payment-methods/2"))["payment_details_fields"] == ["instructions"]


def test_unknown_payment_method_is_not_found(api: Api) -> None:
    refused(api.get(f"{MP}/payment-methods/99"), 404, "1000404", "Resource not found")


def test_balances_start_empty_in_each_merchant_currency(api: Api) -> None:
    r = api.get(f"{MP}/balances")
    assert r.status_code == 200
    assert body(r) == [
        {"id": 1, "currency": "EUR", "balance": Decimal("0.00"),
         "available_balance": Decimal("0.00")},
        {"id": 2, "currency": "USD", "balance": Decimal("0.00"),
         "available_balance": Decimal("0.00")}]


def test_every_endpoint_needs_credentials(sandbox: Any) -> None:
    anonymous = Api(sandbox.url, None)
    try:
        for path in ("/countries", "/payment-methods", "/payment-methods/1", "/balances",
                     "/payments/1", "/quotations/1"):
            assert error_of(anonymous.get(MP + path)) == (401, "1000401"), path
        assert error_of(anonymous.post(f"{MP}/quotations", quotation_body("q"))) == \
            (401, "1000401")
    finally:
        anonymous.session.close()


# ---------------------------------------------------------------- debit parties
def test_debit_party_information_of_a_known_identifier(api: Api) -> None:
    r = api.post(f"{MP}/payment-methods/1/debit-party-information",
                 {"debit_party_identifier": {"msisdn": KNOWN_MSISDN}})
    assert r.status_code == 200, r.text
    answer = body(r)
    assert answer["id"] == 1
    assert (answer["consumer"]["firstname"], answer["consumer"]["lastname"],
            answer["consumer"]["country_iso_code"]) == ("Wanjiru", "Kamau", "KEN")


def test_debit_party_information_of_an_unknown_identifier(api: Api) -> None:
    for msisdn in ("+254700100201", "+254700999401"):
        r = api.post(f"{MP}/payment-methods/1/debit-party-information",
                     {"debit_party_identifier": {"msisdn": msisdn}})
        refused(r, 404, "1000404", "Resource not found")
    # The test value 999401 (on the first identifier with digits) is "not found" even beside a
    # known bank account number, which answers otherwise.
    path = f"{MP}/payment-methods/2/debit-party-information"
    known = {"bank_account_number": "1234567890"}
    r = api.post(path, {"debit_party_identifier": {"msisdn": "+234700100201", **known}})
    assert r.status_code == 200, r.text
    assert body(r)["consumer"]["lastname"] == "Nwosu"
    r = api.post(path, {"debit_party_identifier": {"msisdn": "+234700999401", **known}})
    refused(r, 404, "1000404", "Resource not found")


def test_debit_party_information_checks_the_method_and_identifier(api: Api) -> None:
    path = "/debit-party-information"
    msg = refused(api.post(f"{MP}/payment-methods/1{path}",
                           {"debit_party_identifier": {"email": "a@x.test"}}),
                  400, "1000999", "Invalid parameter")
    assert "debit_party_identifier.msisdn" in msg
    refused(api.post(f"{MP}/payment-methods/7{path}",
                     {"debit_party_identifier": {"msisdn": KNOWN_MSISDN}}),
            400, "1003001", "Payment method is inactive in your account")
    refused(api.post(f"{MP}/payment-methods/99{path}",
                     {"debit_party_identifier": {"msisdn": KNOWN_MSISDN}}),
            400, "1003002", "Invalid payment method")


def test_debit_party_verification(api: Api) -> None:
    for method_id, ident, status in ((1, {"msisdn": "+254700100200"}, "AVAILABLE"),
                                     (1, {"msisdn": "+254711000001"}, "AVAILABLE"),
                                     (1, {"msisdn": "+254700999402"}, "UNAVAILABLE"),
                                     (2, {"bank_account_number": "00999402"}, "UNAVAILABLE")):
        r = api.post(f"{MP}/payment-methods/{method_id}/debit-party-verification",
                     {"debit_party_identifier": ident, "consumer": NAMES})
        assert r.status_code == 200, r.text
        assert body(r) == {"id": method_id, "account_status": status}


def test_debit_party_verification_validates_the_consumer(api: Api) -> None:
    path = f"{MP}/payment-methods/1/debit-party-verification"
    ident = {"msisdn": KNOWN_MSISDN}
    msg = refused(api.post(path, {"debit_party_identifier": ident,
                                  "consumer": {**NAMES, "gender": "OTHER"}}),
                  400, "1000999", "Invalid parameter")
    assert "consumer.gender" in msg
    msg = refused(api.post(path, {"debit_party_identifier": ident,
                                  "consumer": {**NAMES, "date_of_birth": "12/05/1990"}}),
                  400, "1000999", "Invalid parameter")
    assert "consumer.date_of_birth" in msg
    msg = refused(api.post(path, {"debit_party_identifier": ident}), 400, "1000999",
                  "Invalid parameter")
    assert "consumer" in msg
    ok = api.post(path, {"debit_party_identifier": ident,
                         "consumer": {**NAMES, "gender": "FEMALE"}})
    assert body(ok)["account_status"] == "AVAILABLE"


# ---------------------------------------------------------------- quotations
# method, mode, input amount, collection currency -> rate, payment, collection,
# collection in payment currency, fee
PRICES = [
    # 100000 / 140.2515 = 713.0048.. -> 713.00 (down to the cent); fee 1.5% = 10.695 ->
    # 10.70 (half up); 713.00 x 140.2515 = 99999.3195 -> 99999 at precision 0.
    (1, "PAYMENT_AMOUNT", "100000", "EUR", "140.2515", "100000", "713.00", "99999",
     "10.70"),
    # 1000 / 140.2515 = 7.1300.. -> 7.13; 1.5% = 0.11 < 0.30: the minimum fee.
    (1, "PAYMENT_AMOUNT", "1000", "EUR", "140.2515", "1000", "7.13", "1000", "0.30"),
    # 12345.50 / 1650.4 = 7.4803.. -> 7.48 (a payment of 0.50 increments); back in NGN
    # 7.48 x 1650.4 = 12344.992 -> 12344.99 at precision 2.
    (2, "PAYMENT_AMOUNT", "12345.50", "EUR", "1650.4", "12345.50", "7.48", "12344.99",
     "0.30"),
    # 10.00 x 655.957 = 6559.57 -> up to a multiple of 5: 6560.
    (4, "COLLECTION_AMOUNT", "10.00", "EUR", "655.957", "6560", "10.00", "6560", "0.30"),
    # 100.00 x 58.7004 = 5870.04 -> up to a multiple of 0.05: 5870.05; fee 1.50.
    (5, "COLLECTION_AMOUNT", "100.00", "USD", "58.7004", "5870.05", "100.00", "5870.04",
     "1.50"),
    # 250.00 x 19.8512 = 4962.80 exactly; fee 3.75.
    (3, "COLLECTION_AMOUNT", "250.00", "EUR", "19.8512", "4962.80", "250.00", "4962.80",
     "3.75"),
]


def test_quotation_prices_in_exact_decimals(api: Api) -> None:
    for n, (method_id, mode, amount, collect, rate, payment, collection, in_payment,
            fee) in enumerate(PRICES):
        country, currency = METHODS[method_id][:2]
        r = api.post(f"{MP}/quotations",
                     quotation_body(f"q-{n}", method_id, mode, amount, collect))
        assert r.status_code == 201, r.text
        q = body(r)
        assert (q["mode"], q["payment_method"]["id"]) == (mode, method_id)
        assert q["wholesale_fx_rate"] == Decimal(rate)
        assert q["payment"] == {"country_iso_code": country, "currency": currency,
                                "amount": Decimal(payment)}, n
        assert q["collection"] == {"currency": collect, "amount": Decimal(collection)}, n
        assert q["collection_in_payment_currency"] == {"currency": currency,
                                                       "amount": Decimal(in_payment)}, n
        assert q["fee"] == {"currency": collect, "amount": Decimal(fee)}, n
        # amounts are exact JSON numbers: the same digits as the expected decimals
        assert f'"fee":{{"currency":"{collect}","amount":{fee}}}'.encode() in r.content
        assert q["creation_date"] < q["expiration_date"]


def test_quotation_by_id_and_by_external_id(api: Api) -> None:
    q = quote(api, "q-lookup", method_id=5, mode="COLLECTION_AMOUNT", amount="20.00")
    by_id = api.get(f"{MP}/quotations/{q['id']}")
    by_ext = api.get(f"{MP}/quotations/ext-q-lookup")
    assert by_id.status_code == by_ext.status_code == 200
    assert body(by_id) == body(by_ext) == q
    refused(api.get(f"{MP}/quotations/{q['id'] + 1}"), 404, "1008002", "Quotation not found")
    refused(api.get(f"{MP}/quotations/ext-nope"), 404, "1008002", "Quotation not found")


def test_quotation_for_an_unusable_method(api: Api) -> None:
    for method_id, country, currency, code, wording in (
        (99, "KEN", "KES", "1003002", "Invalid payment method"),
        (7, "KEN", "KES", "1003001", "Payment method is inactive in your account"),
        (8, "GHA", "GHS", "1003007", "Payment method is currently unavailable"),
    ):
        request = quotation_body(f"q-{method_id}")
        request["payment_method_id"] = method_id
        request["payment"] = {"country_iso_code": country, "currency": currency,
                              "amount": Decimal(1000)}
        refused(api.post(f"{MP}/quotations", request), 400, code, wording)


BELOW = "Payment amount below minimum of the selected payment method"
OVER = "Payment amount over maximum of the selected payment method"
# method 1 (KES, precision 0): minimum 10, maximum 150000
LIMITS = [
    ("PAYMENT_AMOUNT", "9", "1003010", BELOW),
    ("PAYMENT_AMOUNT", "10", None, ""),
    ("PAYMENT_AMOUNT", "150000", None, ""),
    ("PAYMENT_AMOUNT", "150001", "1003011", OVER),
    # 1069.51 x 140.2515 = 150000.38.. -> up to 150001 KES, over the maximum
    ("COLLECTION_AMOUNT", "1069.51", "1003011", OVER),
    ("COLLECTION_AMOUNT", "1069.50", None, ""),  # 149998.98.. -> 149999
    # 0.06 x 140.2515 = 8.41.. -> 9 KES, under the minimum of 10; 0.07 -> 9.82.. -> 10
    ("COLLECTION_AMOUNT", "0.06", "1003010", BELOW),
    ("COLLECTION_AMOUNT", "0.07", None, ""),
]


def test_quotation_limits_of_the_method(api: Api) -> None:
    for n, (mode, amount, code, wording) in enumerate(LIMITS):
        r = api.post(f"{MP}/quotations", quotation_body(f"q-{n}", 1, mode, amount))
        if code is None:
            assert r.status_code == 201, (mode, amount, r.text)
        else:
            refused(r, 400, code, wording)


def test_quotation_with_an_invalid_collection(api: Api) -> None:
    for n, (mode, amount, collect) in enumerate((
        ("PAYMENT_AMOUNT", "1000", "GBP"),  # not a merchant currency
        ("COLLECTION_AMOUNT", "10.00", "GBP"),
        ("COLLECTION_AMOUNT", "10.001", "EUR"),  # three decimals
    )):
        r = api.post(f"{MP}/quotations", quotation_body(f"q-{n}", 1, mode, amount, collect))
        refused(r, 400, "1003008", "Collection amount is invalid")


def _with(request: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, last = path.split(".")
    node = request
    for p in parents:
        node = node[p]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return request


# method, mode, what to change (None: remove), to what, the field the message names
INVALID = [
    (1, "PAYMENT_AMOUNT", "payment.currency", "EUR", "payment.currency"),
    (1, "PAYMENT_AMOUNT", "payment.country_iso_code", "UGA", "payment.country_iso_code"),
    (1, "PAYMENT_AMOUNT", "mode", "SOURCE_AMOUNT", "mode"),
    (1, "PAYMENT_AMOUNT", "payment.amount", None, "payment.amount"),
    (1, "COLLECTION_AMOUNT", "collection.amount", None, "collection.amount"),
    (1, "PAYMENT_AMOUNT", "payment.amount", Decimal("-5"), "payment.amount"),
    (4, "PAYMENT_AMOUNT", "payment.amount", Decimal("1002"), "payment.amount"),  # increment 5
    (5, "PAYMENT_AMOUNT", "payment.amount", Decimal("20.03"), "payment.amount"),  # 0.05
    (1, "PAYMENT_AMOUNT", "payment.amount", Decimal("1000.5"), "payment.amount"),  # precision
    (1, "PAYMENT_AMOUNT", "payment_method_id", "one", "payment_method_id"),
    (1, "PAYMENT_AMOUNT", "external_id", None, "external_id"),
]


def test_quotation_invalid_parameter_names_the_field(api: Api) -> None:
    for n, (method_id, mode, change, value, field) in enumerate(INVALID):
        amount = "10.00" if mode == "COLLECTION_AMOUNT" else {5: "20.00"}.get(method_id, "1000")
        request = _with(quotation_body(f"q-{n}", method_id, mode, amount), change, value)
        msg = refused(api.post(f"{MP}/quotations", request), 400, "1000999",
                      "Invalid parameter")
        assert field in msg, (change, value, msg)


def test_quotation_external_id_is_unique(api: Api) -> None:
    quote(api, "q-dup")
    r = api.post(f"{MP}/quotations", quotation_body("q-dup", amount="2000"))
    refused(r, 400, "1007001", "External ID has already been used")
    assert body(api.get(f"{MP}/quotations/ext-q-dup"))["payment"]["amount"] == Decimal(1000)


# ---------------------------------------------------------------- payments
def test_payment_creation_with_consumer_and_purpose_of_payment(api: Api) -> None:
    q = quote(api, "q-1")
    request = payment_body("p-1", external_code="code-1", callback_url=None,
                           additional_information_1="note")
    r = api.post(f"{MP}/quotations/{q['id']}/payments", request)
    assert r.status_code == 201, r.text
    p = body(r)
    assert (p["status"], p["status_message"], p["status_class"], p["status_class_message"]) == \
        ("10000", "CREATED", "1", "CREATED")
    assert p["details"] == dict.fromkeys(DETAIL_FIELDS)
    assert p["external_id"] == "p-1" and p["external_code"] == "code-1"
    assert p["debit_party_identifier"] == {"msisdn": KNOWN_MSISDN}
    assert (p["consumer"]["firstname"], p["consumer"]["lastname"]) == ("Ada", "Lovelace")
    assert p["purpose_of_payment"] == "OTHER"
    assert p["additional_information_1"] == "note"
    for name in ("payment", "collection", "collection_in_payment_currency", "fee",
                 "wholesale_fx_rate", "payment_method", "expiration_date"):
        assert p[name] == q[name], name
    assert p["payment_method_payment_reference"] is None


def test_payment_creation_with_sender_and_purpose_of_remittance(api: Api) -> None:
    quote(api, "q-1", method_id=4, amount="1000")
    request = {"external_id": "p-1", "debit_party_identifier": {"msisdn": "+221770001122"},
               "sender": {"firstname": "Awa", "lastname": "Diop"},
               "beneficiary": {"lastname": "Merchant"}, "purpose_of_remittance": "OTHER"}
    r = api.post(f"{MP}/quotations/ext-q-1/payments", request)
    assert r.status_code == 201, r.text
    p = body(r)
    assert p["status"] == "10000"
    assert (p["consumer"]["firstname"], p["consumer"]["lastname"]) == ("Awa", "Diop")
    assert p["purpose_of_payment"] == "OTHER"
    # the sender form is checked like the consumer form
    request = {**request, "external_id": "p-2", "sender": {"firstname": "Awa"}}
    msg = refused(api.post(f"{MP}/quotations/ext-q-1/payments", request), 400, "1000999",
                  "Invalid parameter")
    assert "consumer." in msg


def test_payment_purpose_must_be_other(api: Api) -> None:
    quote(api, "q-1")
    msg = refused(api.post(f"{MP}/quotations/ext-q-1/payments",
                           payment_body("p-1", purpose_of_payment="SALARY")),
                  400, "1000999", "Invalid parameter")
    assert "purpose_of_payment" in msg


def test_required_consumer_fields(api: Api) -> None:
    quote(api, "q-2", method_id=2, amount="1000.00")
    no_email = payment_body("p-2", 2, consumer=NAMES)
    msg = refused(api.post(f"{MP}/quotations/ext-q-2/payments", no_email), 400, "1000999",
                  "Invalid parameter")
    assert "consumer.email" in msg
    assert api.post(f"{MP}/quotations/ext-q-2/payments", payment_body("p-2", 2)).status_code \
        == 201

    # method 4: names OR msisdn
    quote(api, "q-4", method_id=4, amount="1000")
    ident = {"msisdn": "+221770001122"}
    neither = payment_body("p-4a", 4, consumer={"email": "a@x.test"})
    msg = refused(api.post(f"{MP}/quotations/ext-q-4/payments", neither), 400, "1000999",
                  "Invalid parameter")
    assert "consumer.msisdn" in msg and "firstname + lastname or msisdn" in msg
    for n, consumer in enumerate(({"msisdn": "+221770009999"}, NAMES)):
        r = api.post(f"{MP}/quotations/ext-q-4/payments",
                     payment_body(f"p-4{n}", 4, ident, consumer=consumer))
        assert r.status_code == 201, r.text


def test_consumer_fields_are_validated(api: Api) -> None:
    quote(api, "q-1")
    for field, value in (("gender", "X"), ("id_type", "BADGE"), ("source_of_funds", "LUCK"),
                         ("date_of_birth", "1990-13"), ("nationality_country_iso_code", "KE")):
        request = payment_body("p-1", consumer={**NAMES, field: value})
        msg = refused(api.post(f"{MP}/quotations/ext-q-1/payments", request), 400, "1000999",
                      "Invalid parameter")
        assert f"consumer.{field}" in msg


def test_debit_party_identifier_alternatives(api: Api) -> None:
    quote(api, "q-2", method_id=2, amount="1000.00")
    for n, ident in enumerate(({"bank_account_number": "0012345678"}, {"msisdn": "+234803"})):
        r = api.post(f"{MP}/quotations/ext-q-2/payments", payment_body(f"p-{n}", 2, ident))
        assert r.status_code == 201, r.text
        assert body(r)["debit_party_identifier"] == ident
    msg = refused(api.post(f"{MP}/quotations/ext-q-2/payments",
                           payment_body("p-x", 2, {"iban": "DE89370400440532013000"})),
                  400, "1000999", "Invalid parameter")
    assert "debit_party_identifier." in msg
    msg = refused(api.post(f"{MP}/quotations/ext-q-2/payments",
                           payment_body("p-y", 2, {"msisdn": "+234803",
                                                   "account_type": "BUSINESS"})),
                  400, "1000999", "Invalid parameter")
    assert "debit_party_identifier.account_type" in msg


def test_payment_external_id_is_unique_and_may_match_its_quotation(api: Api) -> None:
    quote(api, "same")
    r = api.post(f"{MP}/quotations/ext-same/payments", payment_body("same"))
    assert r.status_code == 201, r.text
    quote(api, "q-2")
    refused(api.post(f"{MP}/quotations/ext-q-2/payments", payment_body("same")), 400, "1007001",
            "External ID has already been used")


def test_payment_on_an_unknown_quotation(api: Api) -> None:
    refused(api.post(f"{MP}/quotations/42/payments", payment_body("p-1")), 404, "1008002",
            "Quotation not found")
    refused(api.post(f"{MP}/quotations/ext-nope/payments", payment_body("p-1")), 404,
            "1008002", "Quotation not found")


def test_payment_on_an_expired_quotation(api: Api, admin: Admin) -> None:
    quote(api, "q-1")
    admin.advance(3601)
    refused(api.post(f"{MP}/quotations/ext-q-1/payments", payment_body("p-1")), 400, "1008003",
            "Quotation has expired")


# ---------------------------------------------------------------- confirm and lookups
def test_confirm_fills_qr_details(api: Api) -> None:
    p = create_payment(api, "1", method_id=1)
    c = confirm(api, p["id"])
    assert (c["status"], c["status_message"], c["status_class"]) == ("20000", "CONFIRMED", "2")
    d = c["details"]
    assert d["qr_code"] and d["qr_url"] and d["qr_url"].startswith("https://")
    assert d["instructions"] is None and d["redirect_url"] is None
    assert (d["amount"], d["currency"]) == (Decimal(1000), "KES")
    assert c["payment_method_payment_reference"] is not None
    for ref in (p["id"], "ext-p-1"):
        assert body(api.get(f"{MP}/payments/{ref}")) == c


def test_confirm_by_external_id_fills_instructions(api: Api) -> None:
    create_payment(api, "2", method_id=2, amount="1000.00")
    c = confirm(api, "ext-p-2")
    assert c["status"] == "20000"
    instructions = c["details"]["instructions"]
    assert isinstance(instructions, list) and instructions
    for step in instructions:
        assert set(step) == {"channel", "steps"}
        assert isinstance(step["channel"], str) and step["channel"]
        assert step["steps"] and all(isinstance(s, str) for s in step["steps"])
    assert c["details"]["qr_code"] is None and c["details"]["redirect_url"] is None
    assert (c["details"]["amount"], c["details"]["currency"]) == (Decimal("1000.00"), "NGN")


def test_confirm_fills_redirect_url(api: Api) -> None:
    p = create_payment(api, "3", method_id=3, amount="250.00")
    d = confirm(api, p["id"])["details"]
    assert d["redirect_url"] and d["redirect_url"].startswith("https://")
    assert d["qr_code"] is None and d["qr_url"] is None and d["instructions"] is None


def test_confirm_twice(api: Api) -> None:
    p = create_payment(api, "1")
    confirm(api, p["id"])
    refused(api.post(f"{MP}/payments/{p['id']}/confirm"), 400, "1007002",
            "Payment has already been confirmed")
    refused(api.post(f"{MP}/payments/ext-p-1/confirm"), 400, "1007002",
            "Payment has already been confirmed")


def test_confirm_after_the_quotation_expired(api: Api, admin: Admin) -> None:
    p = create_payment(api, "1")
    admin.advance(3601)
    refused(api.post(f"{MP}/payments/{p['id']}/confirm"), 400, "1007004",
            "Payment can no longer be confirmed, quotation has expired")
    assert status_of(api, p["id"]) == "10000"


def test_rejected_at_creation_can_not_be_confirmed(api: Api) -> None:
    p = create_payment(api, "1", identifier={"msisdn": "+254700999301"})
    assert (p["status"], p["status_message"], p["status_class"]) == \
        ("30250", "REJECTED-INVALID-CONSUMER", "3")
    refused(api.post(f"{MP}/payments/{p['id']}/confirm"), 400, "1007003",
            "Payment can not be confirmed")


def test_unknown_payment(api: Api) -> None:
    for ref in ("77", "ext-nope"):
        refused(api.get(f"{MP}/payments/{ref}"), 404, "1008004", "Payment not found")
        refused(api.post(f"{MP}/payments/{ref}/confirm"), 404, "1008004", "Payment not found")


# ---------------------------------------------------------------- lifecycle and money
def test_happy_lifecycle_credits_the_merchant_balance(api: Api, admin: Admin) -> None:
    p = create_payment(api, "1", amount="100000")  # collection 713.00 EUR, fee 10.70
    confirm(api, p["id"])
    assert status_of(api, p["id"]) == "20000"
    admin.advance(50)
    assert status_of(api, p["id"]) == "20000"
    admin.advance(10)
    assert status_of(api, p["id"]) == "50000"
    assert merchant_balance(api, "EUR") == Decimal("0.00")
    admin.advance(60)
    done = body(api.get(f"{MP}/payments/ext-p-1"))
    assert (done["status"], done["status_message"], done["status_class"]) == \
        ("70000", "COMPLETED", "7")
    assert merchant_balance(api, "EUR") == Decimal("702.30")
    assert merchant_balance(api, "USD") == Decimal("0.00")
    admin.advance(600)
    assert status_of(api, p["id"]) == "70000"
    assert merchant_balance(api, "EUR") == Decimal("702.30")


def test_balance_adds_up_over_payments_in_both_currencies(api: Api, admin: Admin) -> None:
    a = create_payment(api, "a", amount="1000")  # 7.13 EUR - 0.30
    b = create_payment(api, "b", method_id=5, mode="COLLECTION_AMOUNT", amount="100.00",
                       collect="USD")  # 100.00 USD - 1.50
    for p in (a, b):
        confirm(api, p["id"])
    admin.advance(120)
    assert merchant_balance(api, "EUR") == Decimal("6.83")
    assert merchant_balance(api, "USD") == Decimal("98.50")


def test_triggers_that_end_without_money(api: Api, admin: Admin) -> None:
    # last six digits -> the status after one and after two more delays
    triggers = {
        "999302": [("30260", "REJECTED-INVALID-CONSUMER-DETAILS"),
                   ("30260", "REJECTED-INVALID-CONSUMER-DETAILS")],
        "999309": [("50000", "SUBMITTED"),
                   ("90273", "DECLINED-INSUFFICIENT-BALANCE-CONSUMER-ACCOUNT")],
        "999370": [("50000", "SUBMITTED"), ("90270", "DECLINED-PAYMENT-TIME-LIMIT-REACHED")],
    }
    ids = {}
    for digits in triggers:
        p = create_payment(api, digits, identifier={"msisdn": f"+254700{digits}"})
        assert p["status"] == "10000"
        assert confirm(api, p["id"])["status"] == "20000"
        ids[digits] = p["id"]
    for step in range(2):
        admin.advance(60)
        for digits, steps in triggers.items():
            now = body(api.get(f"{MP}/payments/{ids[digits]}"))
            assert (now["status"], now["status_message"]) == steps[step], digits
            assert now["status_class"] == steps[step][0][0]
    admin.advance(600)
    for digits, steps in triggers.items():
        assert status_of(api, ids[digits]) == steps[-1][0]
    assert merchant_balance(api, "EUR") == Decimal("0.00")


def test_reversal_after_completion_takes_the_credit_back(api: Api, admin: Admin) -> None:
    p = create_payment(api, "1", identifier={"msisdn": "+254700999308"}, amount="100000")
    confirm(api, p["id"])
    admin.advance(60)
    assert status_of(api, p["id"]) == "50000"
    admin.advance(60)
    assert status_of(api, p["id"]) == "70000"
    assert merchant_balance(api, "EUR") == Decimal("702.30")
    admin.advance(60)
    reversed_ = body(api.get(f"{MP}/payments/{p['id']}"))
    assert (reversed_["status"], reversed_["status_message"], reversed_["status_class"]) == \
        ("80000", "REVERSED", "8")
    assert merchant_balance(api, "EUR") == Decimal("0.00")
    admin.advance(600)
    assert merchant_balance(api, "EUR") == Decimal("0.00")
