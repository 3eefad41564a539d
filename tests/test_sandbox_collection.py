"""The sandbox's collection service, payment side (document 1), over real HTTP: quotations in
both modes, payment orders direct and from a quotation (by id and ext-), retrieval by id and
external id, the REDIRECT and HOST_TO_HOST flows on the sandbox clock, test cards, charges,
cancellations and refunds with their exact arithmetic, every error code of the service, bare
notification pings with their two repeats, faults and the state file. (The OpenAPI document
of these paths is checked in test_sandbox_legacy.py, with the legacy Pay's.)"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import KEY, SECRET, Admin, Api, body, error_of
from notification_receiver import Receiver

from runner.provider.auth import DigestAuth
from runner.sandbox import RunningSandbox

PAY = "/v1/payment"
ORDERS = f"{PAY}/payment-orders"
D = Decimal
URLS = {"aborted_url": "https://shop.example/aborted", "error_url": "https://shop.example/error",
        "return_url": "https://shop.example/return",
        "notification_url": "https://shop.example/notify"}
CARD = {"card_number": "4111111111111111", "card_cvv": "123", "card_expiration_month": "12",
        "card_expiration_year": "2099", "card_holder_name": "Ada Lovelace"}
REFUSED, ERROR, UNAVAILABLE, ABANDONED = ("4000000000000002", "4000000000000119",
                                          "4000000000000259", "4000000000000069")
BUYER = {"first_name": "Ada", "last_name": "Lovelace", "email": "ada@example.com"}
BILLING = {"address_line_1": "1 Rue de la Paix", "city": "Paris", "zip_code": "75002",
           "country_iso_code": "FRA"}
INFO = {"card-eur": CARD, "card-usd-fx": CARD, "bnpl-eur": {"email": "ada@example.com"},
        "wallet-kes": {"msisdn": "+254700100200"}, "openbanking-eur": {"bank_id": "BNPAFRPP"}}
CURRENCY = {"card-eur": "EUR", "bnpl-eur": "EUR", "wallet-kes": "KES", "openbanking-eur": "EUR"}
Factory = Callable[..., RunningSandbox]


# ---------------------------------------------------------------- helpers
def order_body(external_id: str, page: str = "card-eur", amount: str = "100.00",
               mode: str = "HOST_TO_HOST", info: dict[str, Any] | None = None,
               **extra: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "type": "C2B", "external_id": external_id, "merchant_id": "MER0001",
        "requested": {"amount": D(amount), "currency": CURRENCY.get(page, "EUR")},
        "payment_page_id": page, "integration_mode": mode, "merchant_urls": dict(URLS),
        "payment_information": dict(info if info is not None else INFO[page])}
    if page == "bnpl-eur":
        payload["merchant_order"] = {"customer": dict(BUYER), "billing_address": dict(BILLING)}
    payload.update(extra)
    return payload


def create(api: Api, external_id: str, **kw: Any) -> dict[str, Any]:
    r = api.post(ORDERS, order_body(external_id, **kw))
    assert r.status_code == 201, r.text
    return body(r)  # type: ignore[no-any-return]


def order(api: Api, ref: str) -> dict[str, Any]:
    r = api.get(f"{ORDERS}/{ref}")
    assert r.status_code == 200, r.text
    return body(r)  # type: ignore[no-any-return]


def operate(api: Api, ref: str, kind: str, amount: str, currency: str = "EUR",
            **extra: Any) -> requests.Response:
    return api.post(f"{ORDERS}/{ref}/{kind}",
                    {"requested": {"amount": D(amount), "currency": currency}, **extra})


def done(api: Api, ref: str, kind: str, amount: str, currency: str = "EUR",
         **extra: Any) -> dict[str, Any]:
    r = operate(api, ref, kind, amount, currency, **extra)
    assert r.status_code == 200, r.text
    return body(r)  # type: ignore[no-any-return]


def refused(response: requests.Response, status: int, code: str, wording: str = "") -> str:
    """Assert an error answer (and that its message contains ``wording``); the message."""
    assert error_of(response) == (status, code), response.text
    errors = body(response)["errors"]
    assert len(errors) == 1 and set(errors[0]) == {"code", "message"}
    message: str = errors[0]["message"]
    assert wording in message, message
    return message


def quote(api: Api, mode: str = "REQUESTED_AMOUNT", amount: str = "100.00",
          external_id: str | None = None, **extra: Any) -> requests.Response:
    requested: dict[str, Any] = {"currency": "EUR"}
    processed: dict[str, Any] = {"currency": "USD"}
    (requested if mode == "REQUESTED_AMOUNT" else processed)["amount"] = D(amount)
    payload = {"merchant_id": "MER0001", "payment_page_id": "card-usd-fx",
               "requested": requested, "processed": processed, "quotation_mode": mode,
               "external_id": external_id, **extra}
    return api.post(f"{PAY}/quotations", payload)


def from_quotation(api: Api, ref: str, external_id: str, **extra: Any) -> requests.Response:
    payload = order_body(external_id, page="card-usd-fx", **extra)
    for name in ("requested", "merchant_id", "payment_page_id"):
        payload.pop(name)
    return api.post(f"{PAY}/quotations/{ref}/payment-orders", payload)


# ---------------------------------------------------------------- health and auth
def test_ping_takes_basic_only(sandbox: RunningSandbox, api: Api) -> None:
    r = api.get(f"{PAY}/ping")
    assert (r.status_code, body(r)) == (200, {"status": "up"})
    signed = Api(sandbox.url, DigestAuth(KEY, SECRET))
    refused(signed.get(f"{PAY}/ping"), 401, "1000401", "Basic authentication only")
    refused(signed.post(ORDERS, order_body("o-1")), 401, "1000401")
    refused(Api(sandbox.url, None).get(f"{ORDERS}/o-1"), 401, "1000401", "missing credentials")
    refused(Api(sandbox.url, (KEY, "wrong")).get(f"{ORDERS}/o-1"), 401, "1000401")
    assert error_of(api.get(f"{ORDERS}/o-1")) == (404, "1000404")  # nothing was created


# ---------------------------------------------------------------- payment orders
def test_host_to_host_card_order_is_authorized_and_masks_the_card(api: Api) -> None:
    r = api.post(ORDERS, order_body("o-1", amount="100.10"))
    assert r.status_code == 201, r.text
    assert b'"amount":100.10' in r.content  # exact decimals, digit for digit
    assert CARD["card_number"].encode() not in r.content and b'"123"' not in r.content
    created = body(r)
    assert set(created) == {
        "id", "external_id", "type", "status", "requested", "processed", "creation_date",
        "update_date", "quotation_id", "merchant_id", "merchant_external_id", "merchant_urls",
        "payment_integrator_id", "payment_page_id", "payment_url", "merchant_order",
        "integration_mode", "payment_methods"}
    assert created["id"].startswith("PO") and len(created["id"]) == 12
    assert created["id"][2:].isdigit()
    assert (created["status"], created["payment_url"], created["quotation_id"]) == \
        ("Authorized", None, None)
    assert created["requested"] == created["processed"] == {"amount": D("100.10"),
                                                           "currency": "EUR"}
    assert (created["merchant_id"], created["merchant_external_id"]) == ("MER0001", "acme-shop")
    assert created["merchant_urls"] == URLS
    [method] = created["payment_methods"]
    assert method["holder_id"] == "************1111"
    assert (method["type"], method["brand"]) == ("CARD", "VISA")
    assert method["amounts"] == {"authorizing": {"amount": D("100.10"), "currency": "EUR"}}
    assert method["payment_method_reference"] is not None
    for ref in (created["id"], "o-1", "ext-o-1"):
        found = api.get(f"{ORDERS}/{ref}")
        assert found.status_code == 200 and body(found) == created
        assert CARD["card_number"].encode() not in found.content


def test_merchant_by_external_id_and_exactly_one_merchant_field(api: Api) -> None:
    payload = order_body("o-1")
    payload.pop("merchant_id")
    payload["merchant_external_id"] = "acme-shop"
    r = api.post(ORDERS, payload)
    assert r.status_code == 201 and body(r)["merchant_id"] == "MER0001"
    refused(api.post(ORDERS, order_body("o-2", merchant_external_id="acme-shop")), 400,
            "2001101", "exactly one of merchant_id and merchant_external_id")
    payload.pop("merchant_external_id")
    payload["external_id"] = "o-3"
    refused(api.post(ORDERS, payload), 400, "2001101", "exactly one")


def test_redirect_card_order_moves_on_the_sandbox_clock(api: Api, admin: Admin) -> None:
    created = create(api, "o-1", mode="REDIRECT", info={})
    assert created["status"] == "Created" and created["payment_methods"] == []
    assert created["payment_url"] == \
        f"https://pay.sandbox.invalid/payment-pages/card-eur/{created['id']}"
    admin.advance(50)  # the sandbox clock runs on in real time too: leave it a margin
    assert order(api, "o-1")["status"] == "Created"
    admin.advance(10)
    progressing = order(api, "o-1")
    assert progressing["status"] == "Payment_In_Progress"
    assert progressing["payment_methods"][0]["type"] == "CARD"
    assert progressing["update_date"] >= created["update_date"]
    refused(operate(api, "o-1", "charges", "1.00"), 400, "2001201",
            "not allowed on a payment order with status Payment_In_Progress")
    admin.advance(60)
    assert order(api, "o-1")["status"] == "Authorized"
    assert done(api, "o-1", "charges", "100.00")["status"] == "DONE"
    assert order(api, "o-1")["status"] == "Charged"


def test_redirection_is_the_documents_other_spelling_of_redirect(api: Api) -> None:
    created = create(api, "o-1", mode="REDIRECTION", info={})
    assert (created["integration_mode"], created["status"]) == ("REDIRECT", "Created")


def test_what_each_mode_requires(api: Api) -> None:
    urls = dict(URLS, return_url=None)
    refused(api.post(ORDERS, order_body("o-1", mode="REDIRECT", merchant_urls=urls)), 400,
            "2001101", "merchant_urls.return_url is required in REDIRECT mode")
    only_notification = {"notification_url": URLS["notification_url"]}
    assert api.post(ORDERS, order_body("o-2", merchant_urls=only_notification)).status_code \
        == 201
    refused(api.post(ORDERS, order_body("o-3", merchant_urls={})), 400, "2001101",
            "merchant_urls.notification_url is required in HOST_TO_HOST mode")
    refused(api.post(ORDERS, order_body("o-4", payment_information=None)), 400, "2001101",
            "payment_information is required in HOST_TO_HOST mode")
    refused(api.post(ORDERS, order_body("o-5", info=dict(CARD, card_cvv=None))), 400,
            "2001101", "payment_information.card_cvv is required by payment page card-eur")
    refused(api.post(ORDERS, order_body("o-6", page="wallet-kes", info={})), 400, "2001101",
            "payment_information.msisdn is required")
    refused(api.post(ORDERS, order_body("o-7", merchant_urls=dict(URLS, error_url="ftp://x"))),
            400, "2001101", "merchant_urls.error_url must be an absolute http or https URL")


def test_card_data_is_checked_without_being_echoed(api: Api) -> None:
    cases = [({"card_number": "4111111111111112"}, "card_number is not a valid card number"),
             ({"card_number": "41111"}, "card_number is not a valid card number"),
             ({"card_cvv": "12"}, "card_cvv must be 3 or 4 digits"),
             ({"card_expiration_month": "13"}, "card_expiration_month must be a month"),
             ({"card_expiration_year": "20x9"}, "card_expiration_year must be a year"),
             ({"card_expiration_year": "2001"}, "the card has expired")]
    for n, (change, wording) in enumerate(cases):
        r = api.post(ORDERS, order_body(f"o-{n}", info=dict(CARD, **change)))
        message = refused(r, 400, "2001101", wording)
        assert "4111" not in message
    assert api.post(ORDERS, order_body("o-ok", info=dict(CARD, card_expiration_year="99"))) \
        .status_code == 201


def test_test_cards(api: Api, admin: Admin) -> None:
    # Refused: 2001301, and the order exists (look it up by external id).
    message = refused(api.post(ORDERS, order_body("o-r", info=dict(CARD, card_number=REFUSED))),
                      400, "2001301", "the card was refused")
    assert order(api, "o-r")["status"] == "Refused" and order(api, "o-r")["id"] in message
    # Error, status unknown to the caller: 2001401 (HTTP 500); the order exists as Error.
    refused(api.post(ORDERS, order_body("o-e", info=dict(CARD, card_number=ERROR))), 500,
            "2001401", "the card issuer failed")
    assert order(api, "o-e")["status"] == "Error"
    # Unavailable: 2001501 (HTTP 503) and nothing is created; a later call may succeed.
    refused(api.post(ORDERS, order_body("o-u", info=dict(CARD, card_number=UNAVAILABLE))), 503,
            "2001501", "nothing was created")
    assert error_of(api.get(f"{ORDERS}/o-u")) == (404, "1000404")
    assert api.post(ORDERS, order_body("o-u")).status_code == 201
    # Refused and Error orders take no operation.
    for ref in ("o-r", "o-e"):
        refused(operate(api, ref, "charges", "1.00"), 400, "2001201", "not allowed")
        refused(operate(api, ref, "cancellations", "1.00"), 400, "2001201", "not allowed")
    # REDIRECT: the card prefilled for the page decides how the buyer's attempt ends.
    create(api, "o-rr", mode="REDIRECT", info={"card_number": REFUSED, "card_cvv": "123",
                                               "card_expiration_month": "1",
                                               "card_expiration_year": "2099"})
    create(api, "o-ab", mode="REDIRECT", info=dict(CARD, card_number=ABANDONED))
    admin.advance(120)
    assert order(api, "o-rr")["status"] == "Refused"
    assert order(api, "o-ab")["status"] == "Payment_In_Progress"
    admin.advance(7200 - 60)
    assert order(api, "o-ab")["status"] == "Aborted"


def test_external_id_is_unique_and_retrieval_tells_ids_from_external_ids(api: Api) -> None:
    first = create(api, "o-1")
    message = refused(api.post(ORDERS, order_body("o-1", amount="5.00")), 400, "2001201")
    assert message == "External ID has already been used: o-1"
    assert order(api, "o-1") == first  # untouched
    # An external id that has the form of an id: its own id form wins, ext- reaches it.
    lookalike = create(api, "PO0000000999")
    assert error_of(api.get(f"{ORDERS}/PO0000000999")) == (404, "1000404")
    assert order(api, "ext-PO0000000999") == lookalike
    # ext- is stripped once: the external id "ext-1" is reached as ext-ext-1.
    odd = create(api, "ext-1")
    assert order(api, "ext-ext-1") == odd
    assert error_of(api.get(f"{ORDERS}/ext-1")) == (404, "1000404")
    assert error_of(api.get(f"{ORDERS}/PO9999999999")) == (404, "1000404")


def test_unknown_and_forbidden_references(api: Api) -> None:
    refused(api.post(ORDERS, order_body("o-1", merchant_id="MER0999")), 400, "1001001",
            "merchant_id 'MER0999' does not exist")
    payload = order_body("o-2")
    payload.pop("merchant_id")
    payload["merchant_external_id"] = "nobody"
    refused(api.post(ORDERS, payload), 400, "1001001", "merchant_external_id 'nobody'")
    refused(api.post(ORDERS, order_body("o-3", payment_page_id="no-page")), 400, "1001001",
            "payment_page_id 'no-page' does not exist")
    refused(api.post(ORDERS, order_body("o-4", merchant_id="MER0002")), 403, "1000403",
            "belongs to another integrator")
    refused(from_quotation(api, "QT0000000099", "o-5"), 400, "1001001",
            "quotation 'QT0000000099' does not exist")
    refused(from_quotation(api, "ext-none", "o-6"), 400, "1001001")
    refused(operate(api, "PO0000000099", "charges", "1.00"), 404, "1000404")


def test_malformed_requests(api: Api, sandbox: RunningSandbox) -> None:
    raw = requests.post(sandbox.url + ORDERS, data=b'{"type": "C2B",', auth=(KEY, SECRET),
                        headers={"Content-Type": "application/json"}, timeout=60)
    refused(raw, 400, "1000400", "not valid JSON")
    refused(api.post(ORDERS), 400, "1000400")  # no body at all
    refused(api.call("POST", ORDERS, [1, 2]), 400, "1000400")
    refused(api.post(ORDERS, order_body("o-1", type="P2P")), 400, "2001101", "type:")
    refused(api.post(ORDERS, order_body("o-1", requested={"amount": "ten", "currency": "EUR"})),
            400, "2001101", "requested.amount:")
    payload = order_body("o-1")
    payload.pop("external_id")
    refused(api.post(ORDERS, payload), 400, "2001101", "external_id: Field required")
    refused(api.post(ORDERS, order_body("o-1", integration_mode="IFRAME")), 400, "2001101",
            "integration_mode:")
    r = api.call("DELETE", f"{ORDERS}/o-1")
    assert error_of(r) == (405, "1000400")
    assert error_of(api.get(f"{PAY}/nothing-here")) == (404, "1000404")


def test_amount_and_currency_of_an_order(api: Api) -> None:
    refused(api.post(ORDERS, order_body("o-1", requested={"amount": D("-1"), "currency": "EUR"})),
            400, "2001101", "requested.amount must be a positive amount")
    refused(api.post(ORDERS, order_body("o-2", amount="1.005")), 400, "2001101",
            "more than 2 decimals")
    refused(api.post(ORDERS, order_body("o-3", requested={"amount": D(1), "currency": "USD"})),
            400, "2001101", "requested.currency must be EUR")


def test_buy_now_pay_later_needs_the_customer_and_goes_through_authorizing(
    api: Api, admin: Admin,
) -> None:
    payload = order_body("o-1", page="bnpl-eur")
    payload["merchant_order"]["customer"].pop("last_name")
    refused(api.post(ORDERS, payload), 400, "2001101",
            "merchant_order.customer.last_name is required by payment page bnpl-eur")
    payload = order_body("o-1", page="bnpl-eur")
    payload["merchant_order"].pop("billing_address")
    refused(api.post(ORDERS, payload), 400, "2001101",
            "merchant_order.billing_address.address_line_1 is required")
    payload = order_body("o-1", page="bnpl-eur")
    payload["merchant_order"]["customer"]["email"] = "not-an-address"
    refused(api.post(ORDERS, payload), 400, "2001101", "not a valid e-mail address")
    created = create(api, "o-1", page="bnpl-eur", amount="300.00")
    assert created["status"] == "Authorizing"
    assert created["merchant_order"]["customer"]["first_name"] == "Ada"
    refused(operate(api, "o-1", "charges", "1.00"), 400, "2001201", "status Authorizing")
    done(api, "o-1", "cancellations", "100.00")  # this page allows it while authorizing
    assert order(api, "o-1")["status"] == "Authorizing"
    admin.advance(60)
    assert order(api, "o-1")["status"] == "Authorized"
    refused(operate(api, "o-1", "charges", "200.01"), 400, "2001201",
            "exceeds what remains to charge or cancel: 200.00 EUR")
    done(api, "o-1", "charges", "200.00")
    assert order(api, "o-1")["status"] == "Charged"
    create(api, "o-2", page="bnpl-eur", amount="50.00")
    done(api, "o-2", "cancellations", "50.00")
    assert order(api, "o-2")["status"] == "Cancelled"
    admin.advance(60)  # the plan stopped with the cancellation
    assert order(api, "o-2")["status"] == "Cancelled"


def test_self_settling_pages_settle_on_the_clock(api: Api, admin: Admin) -> None:
    wallet = create(api, "w-1", page="wallet-kes", amount="1500.00")
    assert wallet["status"] == "Payment_In_Progress"
    assert wallet["payment_methods"][0]["holder_id"] == "+254700100200"
    bank = create(api, "b-1", page="openbanking-eur", mode="REDIRECT", info={})
    assert bank["status"] == "Created"
    refused(operate(api, "w-1", "charges", "1.00", "KES"), 400, "2001201",
            "payment page wallet-kes settles by itself")
    refused(operate(api, "w-1", "cancellations", "1.00", "KES"), 400, "2001201",
            "does not support cancellations")
    admin.advance(60)
    assert order(api, "w-1")["status"] == "Charged"
    assert order(api, "b-1")["status"] == "Payment_In_Progress"
    refused(operate(api, "w-1", "refunds", "1.00", "KES"), 400, "2001201",
            "payment page wallet-kes does not support refunds")
    admin.advance(60)
    assert order(api, "b-1")["status"] == "Charged"
    done(api, "b-1", "refunds", "40.00")
    assert order(api, "b-1")["status"] == "Charged"
    refused(operate(api, "b-1", "refunds", "60.01"), 400, "2001201",
            "exceeds what remains to refund: 60.00 EUR")
    done(api, "b-1", "refunds", "60.00")
    assert order(api, "b-1")["status"] == "Refunded"


# ---------------------------------------------------------------- operations
def test_partial_operations_in_exact_arithmetic(api: Api) -> None:
    create(api, "o-1", amount="100.00")
    charge = done(api, "o-1", "charges", "30.00", external_id="c-1", custom_data="first")
    assert set(charge) == {"id", "payment_order_id", "type", "status", "requested",
                           "processed", "external_id", "creation_date", "update_date",
                           "custom_data", "payment_methods_responses"}
    assert (charge["type"], charge["status"], charge["external_id"], charge["custom_data"]) == \
        ("CHARGE", "DONE", "c-1", "first")
    assert charge["requested"] == charge["processed"] == {"amount": D("30.00"),
                                                          "currency": "EUR"}
    [response] = charge["payment_methods_responses"]
    assert response["operation_id"] == str(charge["id"])
    assert set(response) == {"operation_id", "payment_method_operation_id", "response_code",
                             "response_message"}
    assert order(api, "o-1")["status"] == "Authorized"
    done(api, "o-1", "refunds", "10.00")  # refund on Authorized after a partial charge
    refused(operate(api, "o-1", "refunds", "20.01"), 400, "2001201",
            "exceeds what remains to refund: 20.00 EUR")
    done(api, "o-1", "cancellations", "20.00")
    refused(operate(api, "o-1", "charges", "50.01"), 400, "2001201",
            "a charge of 50.01 EUR exceeds what remains to charge or cancel: 50.00 EUR")
    refused(operate(api, "o-1", "cancellations", "50.01"), 400, "2001201", "50.00 EUR")
    assert order(api, "o-1")["status"] == "Authorized"
    done(api, "o-1", "charges", "50.00")
    assert order(api, "o-1")["status"] == "Charged"  # 80 charged + 20 cancelled
    refused(operate(api, "o-1", "cancellations", "0.01"), 400, "2001201", "status Charged")
    done(api, "o-1", "refunds", "10.00")
    done(api, "o-1", "refunds", "10.00")
    refused(operate(api, "o-1", "refunds", "50.01"), 400, "2001201",
            "a refund of 50.01 EUR exceeds what remains to refund: 50.00 EUR")
    done(api, "o-1", "refunds", "49.99")
    assert order(api, "o-1")["status"] == "Charged"
    done(api, "o-1", "refunds", "0.01")
    assert order(api, "o-1")["status"] == "Refunded"  # 80 charged, 80 refunded
    refused(operate(api, "o-1", "refunds", "0.01"), 400, "2001201", "status Refunded")


def test_cancelling_everything_and_refunding_nothing(api: Api) -> None:
    create(api, "o-1", amount="19.99")
    refused(operate(api, "o-1", "refunds", "0.01"), 400, "2001201",
            "exceeds what remains to refund: 0 EUR")
    done(api, "o-1", "cancellations", "9.99")
    done(api, "o-1", "cancellations", "10.00")
    assert order(api, "o-1")["status"] == "Cancelled"
    refused(operate(api, "o-1", "charges", "0.01"), 400, "2001201", "status Cancelled")


def test_operation_requests_are_checked(api: Api) -> None:
    create(api, "o-1")
    refused(operate(api, "o-1", "charges", "1.00", "USD"), 400, "2001101",
            "requested.currency must be EUR, the payment order's currency")
    refused(operate(api, "o-1", "charges", "0"), 400, "2001101", "positive amount")
    refused(operate(api, "o-1", "charges", "1.001"), 400, "2001101", "more than 2 decimals")
    refused(api.post(f"{ORDERS}/o-1/charges", {"requested": {"currency": "EUR"}}), 400,
            "2001101", "requested.amount: Field required")
    done(api, "o-1", "charges", "1.00", external_id="op-1")
    message = refused(operate(api, "o-1", "charges", "1.00", external_id="op-1"), 400,
                      "2001201")
    assert message == "External ID has already been used: op-1"
    created = order(api, "o-1")
    done(api, created["id"], "charges", "1.00")  # by id, by ext- and by external id
    done(api, "ext-o-1", "charges", "1.00")
    refused(operate(api, "o-2", "charges", "1.00"), 404, "1000404")


def test_operations_are_retrieved_by_id(api: Api) -> None:
    create(api, "o-1")
    charge = done(api, "o-1", "charges", "60.00")
    cancel = done(api, "o-1", "cancellations", "40.00")
    refund = done(api, "o-1", "refunds", "5.00")
    assert isinstance(charge["id"], int) and cancel["id"] == charge["id"] + 1
    assert cancel["type"] == "CANCEL" and refund["type"] == "REFUND"
    for op in (charge, cancel):
        r = api.get(f"{PAY}/charges/{op['id']}")
        assert r.status_code == 200 and body(r) == op
    r = api.get(f"{PAY}/refunds/{refund['id']}")
    assert r.status_code == 200 and body(r) == refund
    assert body(r)["processed"] == {"amount": D("5.00"), "currency": "EUR"}
    refused(api.get(f"{PAY}/refunds/{charge['id']}"), 404, "1000404")
    refused(api.get(f"{PAY}/charges/{refund['id']}"), 404, "1000404")
    refused(api.get(f"{PAY}/charges/999"), 404, "1000404")
    refused(api.get(f"{PAY}/charges/abc"), 404, "1000404")


def test_an_uncharged_authorization_lapses(sandbox_factory: Factory) -> None:
    sb = sandbox_factory(authorization_period=3600.0)
    api, admin = Api(sb.url, (KEY, SECRET)), Admin(sb.url)
    create(api, "o-1")
    create(api, "o-2")
    done(api, "o-2", "charges", "30.00")
    admin.advance(3590)
    assert order(api, "o-1")["status"] == "Authorized"
    admin.advance(10)
    assert order(api, "o-1")["status"] == "Cancelled"
    assert order(api, "o-2")["status"] == "Charged"  # 30 charged, the rest lapsed
    refused(operate(api, "o-2", "charges", "0.01"), 400, "2001201", "status Charged")
    done(api, "o-2", "refunds", "30.00")
    assert order(api, "o-2")["status"] == "Refunded"


# ---------------------------------------------------------------- quotations
def test_quotation_in_both_modes(api: Api) -> None:
    r = quote(api, external_id="q-1")
    assert r.status_code == 201, r.text
    q = body(r)
    assert set(q) == {"id", "external_id", "merchant_id", "payment_page_id", "requested",
                      "processed", "wholesale_fx_rate", "creation_date", "expiration_date",
                      "quotation_mode"}
    assert q["id"].startswith("QT") and len(q["id"]) == 12
    assert (q["requested"], q["processed"], q["wholesale_fx_rate"]) == (
        {"amount": D("100.00"), "currency": "EUR"}, {"amount": D("108.42"), "currency": "USD"},
        D("1.0842"))
    assert q["quotation_mode"] == "REQUESTED_AMOUNT" and q["external_id"] == "q-1"
    created, expires = q["creation_date"], q["expiration_date"]
    assert int(expires[8:10]) - int(created[8:10]) in (1, -27, -28, -29, -30)  # 24 h later
    assert expires[11:] == created[11:]
    up = body(quote(api, amount="10.05"))  # 10.89621: the buyer pays the cent above
    assert up["processed"]["amount"] == D("10.90")
    down = body(quote(api, mode="PROCESSED_AMOUNT"))  # 92.2339...: the merchant gets the cent
    assert (down["requested"]["amount"], down["processed"]["amount"]) == (D("92.23"),
                                                                          D("100.00"))
    assert down["external_id"] is None


def test_quotation_refusals(api: Api) -> None:
    quote(api, external_id="q-1")
    assert refused(quote(api, external_id="q-1"), 400, "2001201") == \
        "External ID has already been used: q-1"
    refused(quote(api, mode="PROCESSED_AMOUNT", amount="1.00",
                  processed={"currency": "USD"}), 400, "2001101",
            "processed.amount is required when quotation_mode is PROCESSED_AMOUNT")
    refused(quote(api, requested={"currency": "EUR"}), 400, "2001101",
            "requested.amount is required when quotation_mode is REQUESTED_AMOUNT")
    refused(quote(api, quotation_mode="BOTH"), 400, "2001101", "quotation_mode:")
    refused(quote(api, payment_page_id="card-eur"), 400, "2001201",
            "payment page card-eur does not convert currency")
    refused(quote(api, requested={"currency": "GBP", "amount": D(1)}), 400, "2001101",
            "requested.currency must be EUR")
    refused(quote(api, processed={"currency": "EUR"}), 400, "2001101",
            "processed.currency must be USD")
    refused(quote(api, merchant_id="MER0404"), 400, "1001001")
    refused(quote(api, merchant_id="MER0002"), 403, "1000403")
    refused(quote(api, payment_page_id="nope"), 400, "1001001")
    refused(quote(api, amount="0.001"), 400, "2001101", "more than 2 decimals")


def test_orders_from_quotations_by_id_and_by_external_id(api: Api) -> None:
    refused(api.post(ORDERS, order_body("o-0", page="card-usd-fx",
                                        requested={"amount": D(1), "currency": "USD"})),
            400, "2001201", "this payment page converts currency: create the order from a "
                            "quotation")
    q1 = body(quote(api, external_id="q-1"))
    q2 = body(quote(api, external_id="q-2", amount="50.00"))
    r = from_quotation(api, q1["id"], "o-1")
    assert r.status_code == 201, r.text
    one = body(r)
    assert (one["quotation_id"], one["payment_page_id"], one["merchant_id"]) == (
        q1["id"], "card-usd-fx", "MER0001")
    assert (one["requested"], one["processed"]) == (q1["requested"], q1["processed"])
    assert one["payment_methods"][0]["amounts"]["authorizing"] == q1["processed"]
    r = from_quotation(api, "ext-q-2", "o-2")
    assert r.status_code == 201 and body(r)["quotation_id"] == q2["id"]
    refused(from_quotation(api, "ext-q-2", "o-3"), 400, "2001201",
            f"was used by payment order {body(r)['id']}")
    refused(from_quotation(api, q1["id"], "o-1"), 400, "2001201", "External ID has already")


def test_a_quotation_expires_after_its_configurable_ttl(api: Api, admin: Admin) -> None:
    assert admin.timing()["payment_quotation_ttl"] == 86400
    q = body(quote(api))
    admin.advance(86399)
    assert from_quotation(api, q["id"], "o-1").status_code == 201  # still valid
    q = body(quote(api))
    admin.advance(86400)
    refused(from_quotation(api, q["id"], "o-2"), 400, "2001201", "has expired")
    assert admin.timing(payment_quotation_ttl=60)["payment_quotation_ttl"] == 60
    q = body(quote(api))
    assert q["expiration_date"] > q["creation_date"]
    admin.advance(61)
    refused(from_quotation(api, q["id"], "o-3"), 400, "2001201", "has expired")
    assert error_of(api.get(f"{ORDERS}/o-3")) == (404, "1000404")


def test_operations_on_a_converted_order_are_processed_in_the_buyers_currency(
    api: Api,
) -> None:
    q = body(quote(api))  # 100.00 EUR = 108.42 USD
    from_quotation(api, q["id"], "o-1")
    first = done(api, "o-1", "charges", "33.33")
    assert first["processed"] == {"amount": D("36.14"), "currency": "USD"}  # 36.136386
    done(api, "o-1", "charges", "33.33")
    last = done(api, "o-1", "charges", "33.34")  # 36.147828, but only 36.14 USD remain
    assert last["processed"] == {"amount": D("36.14"), "currency": "USD"}
    assert order(api, "o-1")["status"] == "Charged"
    refused(operate(api, "o-1", "refunds", "1.00", "USD"), 400, "2001101",
            "requested.currency must be EUR")
    refunds = [done(api, "o-1", "refunds", amount)["processed"]["amount"]
               for amount in ("33.33", "33.33", "33.34")]
    assert sum(refunds) == D("108.42")
    assert order(api, "o-1")["status"] == "Refunded"


# ---------------------------------------------------------------- notifications
def test_every_status_change_is_a_bare_ping(
    sandbox_factory: Factory, receivers: Callable[..., Receiver],
) -> None:
    sb = sandbox_factory(notification_delays=(0.05, 0.1))
    api, admin = Api(sb.url, (KEY, SECRET)), Admin(sb.url)
    receiver = receivers()
    urls = dict(URLS, notification_url=receiver.url("/orders/1"))
    create(api, "o-1", mode="REDIRECT", info={}, merchant_urls=urls)
    first = receiver.wait_for(1)[0]
    assert (first.path, first.raw) == ("/orders/1", b"{}")
    assert first.headers["content-type"] == "application/json"
    assert not any(name.startswith("x-svc-") for name in first.headers)  # unsigned
    assert "authorization" not in first.headers
    admin.advance(60)
    admin.advance(60)
    receiver.wait_for(3)
    done(api, "o-1", "charges", "40.00")  # no status change: no ping
    assert receiver.stays_at(3, 0.05)
    done(api, "o-1", "charges", "60.00")
    receiver.wait_for(4)
    log = admin.deliveries(4)
    statuses = [entry["status"].split()[1] for entry in log]
    assert statuses == ["Created", "Payment_In_Progress", "Authorized", "Charged"]
    assert all(entry["delivered"] and entry["attempt"] == 1 for entry in log)


def test_a_ping_not_answered_2xx_is_repeated_twice(
    sandbox_factory: Factory, receivers: Callable[..., Receiver],
) -> None:
    sb = sandbox_factory(notification_delays=(0.03, 0.06))
    api, admin = Api(sb.url, (KEY, SECRET)), Admin(sb.url)
    failing, late = receivers([500, 503, 500]), receivers([500])
    create(api, "o-1", merchant_urls={"notification_url": failing.url()})
    create(api, "o-2", merchant_urls={"notification_url": late.url()})
    got = failing.wait_for(3)
    assert got[1].at - got[0].at >= 0.03 and got[2].at - got[1].at >= 0.06
    assert failing.stays_at(3, 0.15)  # two repeats at most
    assert len(late.wait_for(2)) == 2 and late.stays_at(2, 0.05)  # answered 200: done
    log = [e for e in admin.deliveries(5) if e["url"] == failing.url()]
    assert [(e["attempt"], e["http_status"], e["delivered"]) for e in log] == [
        (1, 500, False), (2, 503, False), (3, 500, False)]


def test_the_repeat_delays_default_to_ten_minutes_and_an_hour(admin: Admin) -> None:
    timing = admin.timing()
    assert timing["notification_delays"] == [600, 3600]
    assert timing["authorization_period"] == 604800
    assert admin.timing(notification_delays=[1, 2])["notification_delays"] == [1, 2]


# ---------------------------------------------------------------- faults
def test_faults_on_payment_orders_operations_and_lookups(api: Api, admin: Admin) -> None:
    admin.faults({"payment_orders": {"error_next": 1}})
    refused(api.post(ORDERS, order_body("o-1")), 500, "1000500")
    assert error_of(api.get(f"{ORDERS}/o-1")) == (404, "1000404")  # nothing was done
    admin.faults({"payment_orders": {"unavailable_next": 1}})
    r = api.post(ORDERS, order_body("o-1"))
    refused(r, 503, "2001501", "retry later")
    assert r.headers["Retry-After"] == "1"
    admin.faults({"payment_orders": {"lost_next": 1}})
    with pytest.raises(requests.ConnectionError):
        api.post(ORDERS, order_body("o-1"))
    assert order(api, "o-1")["status"] == "Authorized"  # the work was done
    admin.faults({"operations": {"lost_next": 1}})
    with pytest.raises(requests.ConnectionError):
        operate(api, "o-1", "charges", "25.00")
    refused(operate(api, "o-1", "charges", "75.01"), 400, "2001201", "75.00 EUR")
    admin.faults({"operations": {"error_next": 1, "unavailable_next": 1}})
    refused(operate(api, "o-1", "charges", "1.00"), 500, "1000500")
    refused(operate(api, "o-1", "charges", "1.00"), 503, "2001501")
    admin.faults({"quotations": {"error_next": 1}, "lookups": {"unavailable_next": 1}})
    refused(quote(api), 500, "1000500")
    refused(api.get(f"{ORDERS}/o-1"), 503, "2001501")
    counts = admin.requests()["counts"]
    assert counts["POST payment_orders"] == 3 and counts["POST operations"] >= 4


# ---------------------------------------------------------------- state and documents
def test_orders_quotations_and_operations_survive_a_restart(
    sandbox_factory: Factory, tmp_path: Path,
) -> None:
    path = tmp_path / "sandbox.jsonl"
    sb = sandbox_factory(state_file=path)
    api, admin = Api(sb.url, (KEY, SECRET)), Admin(sb.url)
    create(api, "o-1", amount="100.10")
    done(api, "o-1", "charges", "0.10", external_id="c-1")
    create(api, "o-2", mode="REDIRECT", info={})
    q = body(quote(api, external_id="q-1"))
    admin.advance(60)
    before = order(api, "o-1")
    sb.stop()
    sb = sandbox_factory(state_file=path)
    api, admin = Api(sb.url, (KEY, SECRET)), Admin(sb.url)
    assert order(api, "o-1") == before
    assert order(api, "o-2")["status"] == "Payment_In_Progress"
    admin.advance(60)
    assert order(api, "o-2")["status"] == "Authorized"
    refused(operate(api, "o-1", "charges", "1.00", external_id="c-1"), 400, "2001201")
    refused(operate(api, "o-1", "charges", "100.01"), 400, "2001201", "100.00 EUR")
    done(api, "o-1", "charges", "100.00")
    assert from_quotation(api, "ext-q-1", "o-3").status_code == 201
    assert order(api, "o-3")["quotation_id"] == q["id"]
    refused(api.post(ORDERS, order_body("o-1")), 400, "2001201", "External ID")
    sb.stop()
    assert CARD["card_number"] not in path.read_text()  # only the last four digits are kept


def test_an_unexpected_failure_is_1000500(sandbox: RunningSandbox, api: Api,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ref: str) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(sandbox.state.payment_orders, "order", broken)
    refused(api.get(f"{ORDERS}/o-1"), 500, "1000500", "Technical error")



def test_demo_orders_are_made_once_at_the_first_start(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sb = sandbox_factory(demo_orders=True, state_file=path)
    api = Api(sb.url, (KEY, SECRET))
    seen = {n: order(api, f"demo-order-{n}") for n in range(1, 6)}
    assert [(o["status"], o["requested"]["amount"]) for o in seen.values()] == [
        ("Authorized", Decimal("120.00")), ("Authorized", Decimal("80.00")),
        ("Authorized", Decimal("60.00")), ("Charged", Decimal("150.00")),
        ("Charged", Decimal("45.50"))]
    assert {o["merchant_external_id"] for o in seen.values()} == {"acme-shop"}
    sb.stop()
    again = sandbox_factory(demo_orders=True, state_file=path)
    store = again.state.store
    assert len(store.tables["payment_orders"]) == 5  # replayed, not made a second time
