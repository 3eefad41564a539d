"""The legacy single-call Pay (document 3, part B) over real HTTP, in JSON and in XML: every
ReturnCode with its HTTP status, answers in the request's format, the test cards, the payment
order each Pay creates (read and operated through the collection service), the notification
to ServerNotificationUrl, safe XML parsing, faults and the OpenAPI document."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
import requests
import simplejson
from conftest import KEY, SECRET, Admin, Api, body, error_of
from notification_receiver import Receiver

import runner.sandbox.legacy_pay.models
from runner.provider.auth import DigestAuth
from runner.sandbox import RunningSandbox

PAY = "/Rest/V40/PaymentOrder/Pay"
ORDERS = "/v1/payment/payment-orders"
CARD = "4111111111111111"
CARD_CREDENTIALS = [{"name": "CardNumber", "credential": CARD},
                    {"name": "Cvv", "credential": "123"}, {"name": "Exp", "credential": "209912"}]
URLS = {"ReturnUrl": "https://shop.example/return", "AbortedUrl": "https://shop.example/aborted",
        "ErrorUrl": "https://shop.example/error",
        "ServerNotificationUrl": "https://shop.example/notify"}
JSON_TYPE, XML_TYPE = "application/json", "application/xml"


# ---------------------------------------------------------------- helpers
def request_of(order_id: str | None, page: str = "card-eur", amount: Any = "25.50",
               currency: str = "EUR", credentials: list[dict[str, str]] | None = None,
               urls: dict[str, str] | None = None, email: str | None = "ada@example.com",
               **order: Any) -> dict[str, Any]:
    merchant_order: dict[str, Any] = {"Id": order_id}
    if email is not None:
        merchant_order["Customer"] = {"Email": email}
    payment_order = {"MerchantId": "MER0001", "Amount": amount, "Currency": currency,
                     "PaymentPageId": page, "MerchantUrls": URLS if urls is None else urls,
                     "MerchantOrder": merchant_order, **order}
    return {"PaymentOrder": payment_order,
            "Credentials": CARD_CREDENTIALS if credentials is None else credentials}


def xml_of(payload: dict[str, Any], root: str = "Request") -> bytes:
    def fill(parent: ET.Element, data: dict[str, Any]) -> None:
        for name, value in data.items():
            if name == "Credentials":
                holder = ET.SubElement(parent, "Credentials")
                for c in value:
                    ET.SubElement(holder, "Credential", name=c["name"]).text = c["credential"]
            elif isinstance(value, dict):
                fill(ET.SubElement(parent, name), value)
            elif value is not None:
                ET.SubElement(parent, name).text = str(value)

    element = ET.Element(root)
    fill(element, payload)
    return ET.tostring(element, encoding="utf-8", xml_declaration=True)


def send(sandbox: RunningSandbox, payload: dict[str, Any] | bytes, kind: str = JSON_TYPE,
         auth: Any = (KEY, SECRET), path: str = PAY, method: str = "POST") -> requests.Response:
    if isinstance(payload, bytes):
        data = payload
    elif "xml" in kind:
        data = xml_of(payload)
    else:
        data = simplejson.dumps(payload, use_decimal=True).encode()
    return requests.request(method, sandbox.url + path, data=data, auth=auth, timeout=60,
                            headers={"Content-Type": kind})


def answer(response: requests.Response) -> dict[str, Any]:
    """The answer's fields, from JSON or from XML (root Response), checking the format."""
    kind = response.headers["content-type"]
    if kind.startswith(XML_TYPE):
        root = ET.fromstring(response.content)
        assert root.tag == "Response"
        fields: dict[str, Any] = {child.tag: child.text for child in root}
        for name in ("ReturnCode", "PaymentOrderId"):
            if name in fields:
                fields[name] = int(fields[name])
    else:
        assert kind == JSON_TYPE, kind
        fields = simplejson.loads(response.content)
        assert set(fields) == {"ReturnCode", "ReturnMessage", "RequestId", "PaymentOrderId",
                               "Status"}
    uuid.UUID(fields["RequestId"])  # a GUID, every time
    return fields


def returned(response: requests.Response, http: int, code: int, wording: str = "",
             xml: bool = False) -> dict[str, Any]:
    assert response.status_code == http, response.text
    assert response.headers["content-type"].startswith(XML_TYPE if xml else JSON_TYPE)
    fields = answer(response)
    assert fields["ReturnCode"] == code, fields
    assert wording in fields["ReturnMessage"], fields
    return fields


def collection(sandbox: RunningSandbox) -> Api:
    return Api(sandbox.url, (KEY, SECRET))


# ---------------------------------------------------------------- success, both formats
def test_json_pay_creates_an_authorized_payment_order(sandbox: RunningSandbox) -> None:
    r = send(sandbox, request_of("ord-1"))
    fields = returned(r, 200, 1000)
    assert fields["ReturnMessage"] == "Success" and fields["Status"] == "Authorized"
    assert isinstance(fields["PaymentOrderId"], int)
    assert CARD.encode() not in r.content
    api = collection(sandbox)
    found = api.get(f"{ORDERS}/ord-1")
    assert found.status_code == 200 and CARD.encode() not in found.content
    order = body(found)
    assert order["id"] == f"PO{fields['PaymentOrderId']:010d}"
    assert (order["external_id"], order["status"], order["integration_mode"], order["type"]) == \
        ("ord-1", "Authorized", "HOST_TO_HOST", "C2B")
    assert order["requested"] == {"amount": Decimal("25.50"), "currency": "EUR"}
    assert order["merchant_urls"] == {
        "return_url": URLS["ReturnUrl"], "aborted_url": URLS["AbortedUrl"],
        "error_url": URLS["ErrorUrl"], "notification_url": URLS["ServerNotificationUrl"]}
    assert order["merchant_order"]["customer"]["email"] == "ada@example.com"
    assert order["payment_methods"][0]["holder_id"] == "************1111"
    assert body(api.get(f"{ORDERS}/{order['id']}")) == order
    # Later operations go through the collection service.
    charge = api.post(f"{ORDERS}/ord-1/charges",
                      {"requested": {"amount": Decimal("25.50"), "currency": "EUR"}})
    assert charge.status_code == 200, charge.text
    assert body(api.get(f"{ORDERS}/ord-1"))["status"] == "Charged"


@pytest.mark.parametrize("kind", ["application/xml", "text/xml",
                                  "application/xml; charset=utf-8"])
def test_xml_pay_is_answered_in_xml(sandbox: RunningSandbox, kind: str) -> None:
    r = send(sandbox, request_of("ord-x"), kind)
    assert r.content.startswith(b"<?xml")
    fields = returned(r, 200, 1000, "Success", xml=True)
    assert set(fields) == {"ReturnCode", "ReturnMessage", "RequestId", "PaymentOrderId",
                           "Status"}
    order = body(collection(sandbox).get(f"{ORDERS}/ord-x"))
    assert (order["id"], order["status"]) == (f"PO{fields['PaymentOrderId']:010d}",
                                              "Authorized")
    assert order["requested"]["amount"] == Decimal("25.50")


def test_point_of_sale_credentials_are_charged_at_once(sandbox: RunningSandbox) -> None:
    qr = request_of("pos-1", page="wallet-kes", amount="1500", currency="KES",
                    credentials=[{"name": "qrcode", "credential": "QR-7731"}],
                    urls={"ServerNotificationUrl": "https://shop.example/n"}, email=None)
    assert returned(send(sandbox, qr, XML_TYPE), 200, 1000, xml=True)["Status"] == "Charged"
    registered = request_of("pos-2", credentials=[
        {"name": "technicalTransactionId", "credential": "TT-0001"}])
    assert returned(send(sandbox, registered), 200, 1000)["Status"] == "Charged"
    api = collection(sandbox)
    wallet = body(api.get(f"{ORDERS}/pos-1"))
    assert (wallet["status"], wallet["merchant_order"]) == ("Charged", None)
    refund = api.post(f"{ORDERS}/pos-2/refunds",
                      {"requested": {"amount": Decimal("25.50"), "currency": "EUR"}})
    assert refund.status_code == 200, refund.text
    assert body(api.get(f"{ORDERS}/pos-2"))["status"] == "Refunded"


def test_the_order_fields_may_stand_at_the_top_level(sandbox: RunningSandbox) -> None:
    payload = request_of("flat-1")
    flat = {**payload["PaymentOrder"], "Credentials": payload["Credentials"]}
    assert returned(send(sandbox, flat), 200, 1000)["Status"] == "Authorized"
    flat["MerchantOrder"] = {"Id": "flat-2"}
    assert returned(send(sandbox, flat, XML_TYPE), 200, 1000, xml=True)["Status"] == \
        "Authorized"


# ---------------------------------------------------------------- refusals
def test_invalid_data_is_2000(sandbox: RunningSandbox) -> None:
    duplicate = CARD_CREDENTIALS + [{"name": "Cvv", "credential": "456"}]
    cases: list[tuple[dict[str, Any], str]] = [
        (request_of(None), "PaymentOrder.MerchantOrder.Id"),
        (request_of("o", amount="abc"), "PaymentOrder.Amount"),
        (request_of("o", amount="-5"), "PaymentOrder.Amount must be a positive amount"),
        (request_of("o", amount="1.234"), "more than 2 decimals"),
        (request_of("o", currency="USD"), "PaymentOrder.Currency must be EUR"),
        (request_of("o", credentials=duplicate), "the name Cvv is used twice"),
        (request_of("o", credentials=[]), "CardNumber (with Cvv and Exp), qrcode or"),
        (request_of("o", credentials=CARD_CREDENTIALS[:2]), "Credentials.Exp must be"),
        (request_of("o", credentials=[{"name": "CardNumber", "credential": "4111111111111112"},
                                      *CARD_CREDENTIALS[1:]]),
         "Credentials.CardNumber is not a valid card number"),
        (request_of("o", credentials=[*CARD_CREDENTIALS[:2], {"name": "Exp",
                                                               "credential": "200101"}]),
         "the card has expired"),
        (request_of("o", email="nobody"), "Customer.Email is not a valid e-mail address"),
        (request_of("o", urls={"ServerNotificationUrl": "notify-me"}),
         "MerchantUrls.ServerNotificationUrl must be an absolute http or https URL"),
    ]
    for payload, wording in cases:
        for kind in (JSON_TYPE, XML_TYPE):
            r = send(sandbox, payload, kind)
            fields = returned(r, 400, 2000, wording, xml=kind == XML_TYPE)
            assert fields.get("PaymentOrderId") is None and fields.get("Status") is None
            assert CARD not in fields["ReturnMessage"]
    assert error_of(collection(sandbox).get(f"{ORDERS}/o")) == (404, "1000404")


def test_operations_not_allowed_are_2500(sandbox: RunningSandbox) -> None:
    returned(send(sandbox, request_of("ord-1")), 200, 1000)
    fields = returned(send(sandbox, request_of("ord-1")), 400, 2500,
                      "External ID has already been used: ord-1")
    assert fields["PaymentOrderId"] is None
    cases: list[tuple[dict[str, Any], str]] = [
        (request_of("o", page="nope"), "PaymentPageId 'nope' does not exist"),
        (request_of("o", MerchantId="MER0999"), "MerchantId 'MER0999' does not exist"),
        (request_of("o", MerchantId="MER0002"), "belongs to another integrator"),
        (request_of("o", page="wallet-kes", currency="KES"), "takes no card"),
        (request_of("o", page="card-usd-fx", currency="USD"), "cannot be paid through Pay"),
        (request_of("o", page="bnpl-eur"), "cannot be paid through Pay"),
    ]
    for payload, wording in cases:
        returned(send(sandbox, payload), 400, 2500, wording)
        returned(send(sandbox, payload, "text/xml"), 400, 2500, wording, xml=True)
    # The merchant's external id names it as well as its id does.
    assert returned(send(sandbox, request_of("ord-2", MerchantId="acme-shop")), 200,
                    1000)["Status"] == "Authorized"


def test_test_cards_give_3000_5000_and_5050(sandbox: RunningSandbox) -> None:
    def with_card(number: str) -> list[dict[str, str]]:
        return [{"name": "CardNumber", "credential": number}, *CARD_CREDENTIALS[1:]]

    api = collection(sandbox)
    fields = returned(send(sandbox, request_of("r-1", credentials=with_card(
        "4000000000000002"))), 400, 3000, "the card was refused")
    assert fields["Status"] == "Refused"
    order = body(api.get(f"{ORDERS}/r-1"))
    assert (order["id"], order["status"]) == (f"PO{fields['PaymentOrderId']:010d}", "Refused")
    fields = returned(send(sandbox, request_of("e-1", credentials=with_card(
        "4000000000000119")), XML_TYPE), 400, 5000, "status unknown", xml=True)
    assert fields["Status"] == "Error"
    assert body(api.get(f"{ORDERS}/e-1"))["status"] == "Error"
    fields = returned(send(sandbox, request_of("u-1", credentials=with_card(
        "4000000000000259"))), 400, 5050, "retry later")
    assert fields["PaymentOrderId"] is None and fields["Status"] is None
    assert error_of(api.get(f"{ORDERS}/u-1")) == (404, "1000404")  # nothing was created


BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<Request><PaymentOrder><MerchantId>&lol2;</MerchantId></PaymentOrder></Request>"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<Request><PaymentOrder><MerchantId>&xxe;</MerchantId></PaymentOrder></Request>"""


def test_syntax_errors_are_9400(sandbox: RunningSandbox) -> None:
    returned(send(sandbox, b'{"PaymentOrder": {'), 400, 9400, "malformed JSON")
    returned(send(sandbox, b"[1, 2]"), 400, 9400, "must be a JSON object")
    returned(send(sandbox, b"<Request><PaymentOrder></Request>", XML_TYPE), 400, 9400,
             "malformed XML", xml=True)
    returned(send(sandbox, xml_of(request_of("o"), root="Order"), XML_TYPE), 400, 9400,
             "the root element must be Request", xml=True)
    twice = b"<Request><PaymentOrder/><PaymentOrder/></Request>"
    returned(send(sandbox, twice, XML_TYPE), 400, 9400, "appears twice", xml=True)
    for hostile in (BOMB, EXTERNAL):
        r = send(sandbox, hostile, XML_TYPE)
        returned(r, 400, 9400, "DTDs and entities are not accepted", xml=True)
        assert b"root:" not in r.content
    returned(send(sandbox, b"MerchantId=MER0001", "text/plain"), 400, 9400,
             "send Content-Type application/json")


def test_authentication_is_basic_9401_and_9403(sandbox: RunningSandbox) -> None:
    returned(send(sandbox, request_of("a-1"), auth=None), 401, 9401, "missing credentials")
    returned(send(sandbox, request_of("a-1"), XML_TYPE, auth=None), 401, 9401, xml=True)
    returned(send(sandbox, request_of("a-1"), auth=DigestAuth(KEY, SECRET)), 401, 9401,
             "Basic authentication only")
    returned(send(sandbox, request_of("a-1"), auth=(KEY, "wrong")), 403, 9403,
             "invalid API key or secret")
    returned(send(sandbox, request_of("a-1"), "text/xml", auth=("nobody", SECRET)), 403, 9403,
             xml=True)
    assert error_of(collection(sandbox).get(f"{ORDERS}/a-1")) == (404, "1000404")


def test_unknown_paths_9404_and_other_methods_9405(sandbox: RunningSandbox) -> None:
    returned(send(sandbox, request_of("p-1"), path="/Rest/V40/PaymentOrder/Refund"), 404, 9404,
             "/Rest/V40/PaymentOrder/Refund")
    returned(send(sandbox, b"", method="GET"), 405, 9405, "use POST")
    returned(send(sandbox, b"", XML_TYPE, method="PUT"), 405, 9405, xml=True)
    returned(send(sandbox, b"", method="GET", auth=None), 401, 9401)  # authentication first


def test_an_internal_failure_is_9500(sandbox: RunningSandbox,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(runner.sandbox.legacy_pay.models, "pay_order", broken)
    returned(send(sandbox, request_of("b-1"), XML_TYPE), 500, 9500, "Internal error", xml=True)


# ---------------------------------------------------------------- notification
def test_server_notification_url_gets_a_bare_ping(
    sandbox_factory: Callable[..., RunningSandbox], receivers: Callable[..., Receiver],
) -> None:
    sb = sandbox_factory(notification_delays=(0.03, 0.06))
    receiver, failing = receivers(), receivers([500, 500, 500])
    urls = {"ServerNotificationUrl": receiver.url("/legacy")}
    returned(send(sb, request_of("n-1", urls=urls), XML_TYPE), 200, 1000, xml=True)
    ping = receiver.wait_for(1)[0]
    assert (ping.path, ping.raw, ping.headers["content-type"]) == ("/legacy", b"{}",
                                                                   JSON_TYPE)
    api = Api(sb.url, (KEY, SECRET))
    assert api.post(f"{ORDERS}/n-1/cancellations", {
        "requested": {"amount": Decimal("25.50"), "currency": "EUR"}}).status_code == 200
    receiver.wait_for(2)
    returned(send(sb, request_of("n-2", urls={"ServerNotificationUrl": failing.url()})), 200,
             1000)
    assert len(failing.wait_for(3)) == 3 and failing.stays_at(3, 0.15)
    statuses = [e["status"] for e in Admin(sb.url).deliveries(5)]
    assert [s.split()[1] for s in statuses[:2]] == ["Authorized", "Cancelled"]


# ---------------------------------------------------------------- faults and documents
def test_faults_on_the_legacy_call(sandbox: RunningSandbox, admin: Admin) -> None:
    admin.faults({"legacy": {"error_next": 1}})
    returned(send(sandbox, request_of("f-1"), XML_TYPE), 500, 9500, xml=True)
    admin.faults({"legacy": {"unavailable_next": 1}})
    r = send(sandbox, request_of("f-1"))
    returned(r, 400, 5050, "retry later")
    assert r.headers["Retry-After"] == "1"
    api = collection(sandbox)
    assert error_of(api.get(f"{ORDERS}/f-1")) == (404, "1000404")  # neither did anything
    admin.faults({"legacy": {"lost_next": 1}})
    with pytest.raises(requests.ConnectionError):
        send(sandbox, request_of("f-1"))
    assert body(api.get(f"{ORDERS}/f-1"))["status"] == "Authorized"  # the work was done
    returned(send(sandbox, request_of("f-1")), 400, 2500, "already been used")
    assert admin.requests()["counts"]["POST legacy"] == 4


def test_openapi_documents_the_legacy_pay_and_the_payment_side(
    sandbox: RunningSandbox,
) -> None:
    """One test for both (the document is slow to build): the legacy Pay in both formats, and
    the collection service's payment endpoints, all with Basic only."""
    doc = requests.get(sandbox.url + "/openapi.json", timeout=60).json()
    operation = doc["paths"][PAY]["post"]
    assert operation["security"] == [{"basic": []}]
    content = operation["requestBody"]["content"]
    for kind in (JSON_TYPE, XML_TYPE):
        assert content[kind]["schema"]["$ref"] == "#/components/schemas/LegacyPayRequest"
    assert set(operation["responses"]["200"]["content"]) == {JSON_TYPE, XML_TYPE}
    schemas = doc["components"]["schemas"]
    request = schemas["LegacyPayRequest"]
    assert request["xml"] == {"name": "Request"}
    assert set(request["required"]) == {"PaymentOrder"}
    assert {"MerchantId", "Amount", "Currency", "PaymentPageId", "MerchantOrder"} <= set(
        schemas["LegacyPaymentOrder"]["required"])
    assert schemas["LegacyCredential"]["properties"]["name"]["xml"] == {"attribute": True}
    assert "get" not in doc["paths"][PAY]
    payment = "/v1/payment"
    expected = {
        f"{payment}/ping": "get", f"{payment}/quotations": "post", ORDERS: "post",
        f"{payment}/quotations/{{ref}}/payment-orders": "post", f"{ORDERS}/{{ref}}": "get",
        f"{ORDERS}/{{ref}}/cancellations": "post", f"{ORDERS}/{{ref}}/charges": "post",
        f"{ORDERS}/{{ref}}/refunds": "post", f"{payment}/charges/{{ref}}": "get",
        f"{payment}/refunds/{{ref}}": "get"}
    for path, method in expected.items():
        assert doc["paths"][path][method]["security"] == [{"basic": []}], path
    create = doc["paths"][ORDERS]["post"]
    assert create["requestBody"]["content"][JSON_TYPE]["schema"]["$ref"] == \
        "#/components/schemas/PaymentOrderCreate"
    assert {"type", "requested", "external_id", "merchant_urls", "payment_page_id",
            "integration_mode"} <= set(schemas["PaymentOrderCreate"]["required"])
    assert create["responses"]["201"]["content"][JSON_TYPE]["schema"]["$ref"] == \
        "#/components/schemas/PaymentOrder"
    assert {"PaymentOperation", "PaymentQuotation", "OperationCreate",
            "PaymentQuotationCreate", "QuotationPaymentOrderCreate"} <= set(schemas)
