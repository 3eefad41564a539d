"""The legacy single-call Pay (document 3, part B): ``POST /Rest/V40/PaymentOrder/Pay``, in
JSON or in XML (root ``Request``), answered in the request's format (root ``Response``).

A Pay creates a payment order of the collection service, with ``MerchantOrder.Id`` as its
external id: ``GET /v1/payment/payment-orders/{MerchantOrder.Id}`` reads it, and its
``PaymentOrderId`` N is the order ``PO`` + N on 10 digits. Every answer carries a ReturnCode
(spec/README.md): 1000 with HTTP 200; 2000, 2500, 3000, 5000 and 5050 with HTTP 400; 9400,
9401, 9403, 9404, 9405 and 9500 with 400, 401, 403, 404, 405 and 500. XML is read with
defusedxml: no DTD, no entity expansion, no external entity.
"""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from decimal import Decimal
from typing import Any

import defusedxml.ElementTree as SafeET
import simplejson
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.responses import Response

from runner.sandbox import ledger
from runner.sandbox import payment_catalogue as pc
from runner.sandbox import payment_orders as po
from runner.sandbox import payment_schemas as ps
from runner.sandbox.auth import AuthFailure, MissingCredentials
from runner.sandbox.errors import ApiError
from runner.sandbox.routing import sandbox

router = APIRouter(tags=["legacy Pay"])
PREFIX = "/Rest/"
PAY = "/Rest/V40/PaymentOrder/Pay"
MESSAGES = {
    1000: "Success", 2000: "Invalid data", 2500: "Operation not allowed",
    3000: "Operation refused", 5000: "Remote technical error, status unknown",
    5050: "Remote server unavailable, retry later", 9400: "Syntax error",
    9401: "Authentication header missing", 9403: "Forbidden", 9404: "Not found",
    9405: "Method not allowed", 9500: "Internal error",
}
HTTP = {1000: 200, 9400: 400, 9401: 401, 9403: 403, 9404: 404, 9405: 405, 9500: 500}
# The collection service's codes, by their descriptions (spec/README.md).
FROM_COLLECTION = {"2001101": 2000, "2001201": 2500, "1001001": 2500, "1000403": 2500,
                   "2001301": 3000, "2001401": 5000, "2001501": 5050}
POINT_OF_SALE = ("qrcode", "technicalTransactionId")


# ---------------------------------------------------------------- shapes
class Legacy(BaseModel):
    model_config = ConfigDict(extra="ignore")


class LegacyMerchantUrls(Legacy):
    ReturnUrl: str | None = None
    AbortedUrl: str | None = None
    ErrorUrl: str | None = None
    ServerNotificationUrl: str | None = None


class LegacyCustomer(Legacy):
    Email: str | None = None


class LegacyMerchantOrder(Legacy):
    Id: str = Field(min_length=1, description="the payment order's external id")
    Customer: LegacyCustomer | None = None


class LegacyPaymentOrder(Legacy):
    MerchantId: str = Field(min_length=1, description="merchant id or merchant_external_id")
    Amount: Decimal
    Currency: str = Field(min_length=1)
    PaymentPageId: str = Field(min_length=1)
    MerchantUrls: LegacyMerchantUrls | None = None
    MerchantOrder: LegacyMerchantOrder


class LegacyCredential(Legacy):
    name: str = Field(min_length=1, json_schema_extra={"xml": {"attribute": True}})
    credential: str = Field(description="in XML, the Credential element's text")


class LegacyPayRequest(Legacy):
    """JSON: ``{"PaymentOrder": {...}, "Credentials": [{"name", "credential"}]}``. XML: root
    ``Request``, ``<Credentials><Credential name="CardNumber">...</Credential></Credentials>``.
    """

    PaymentOrder: LegacyPaymentOrder
    Credentials: list[LegacyCredential] = Field(
        default_factory=list, description="unique names: CardNumber, Cvv and Exp (YYYYMM); "
                                          "or qrcode, or technicalTransactionId")


class LegacyPayResponse(Legacy):
    ReturnCode: int
    ReturnMessage: str
    RequestId: str
    PaymentOrderId: int | None = None
    Status: str | None = Field(default=None, description="Authorized, Charged (point of "
                                                         "sale), Refused or Error")


def openapi_schemas() -> dict[str, Any]:
    """The request's schemas for /openapi.json: the route reads its body itself (JSON or
    XML), so FastAPI does not see the model."""
    schema = LegacyPayRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    found: dict[str, Any] = schema.pop("$defs", {})
    schema["xml"] = {"name": "Request"}
    found["LegacyPayRequest"] = schema
    return found


# ---------------------------------------------------------------- answers
class Refusal(Exception):
    def __init__(self, code: int, detail: str | None = None) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def _format(content_type: str | None) -> str | None:
    """"xml", "json", or None for a content type the call does not take."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media in ("application/xml", "text/xml") or media.endswith("+xml"):
        return "xml"
    if media == "application/json" or media.endswith("+json"):
        return "json"
    return None


def render(code: int, detail: str | None, xml: bool, order_id: int | None = None,
           status: str | None = None) -> tuple[int, bytes, bytes]:
    """(HTTP status, body, content type) of an answer."""
    message = MESSAGES[code] + (f": {detail}" if detail else "")
    fields: dict[str, Any] = {"ReturnCode": code, "ReturnMessage": message,
                              "RequestId": str(uuid.uuid4()), "PaymentOrderId": order_id,
                              "Status": status}
    if xml:
        root = ET.Element("Response")
        for name, value in fields.items():
            if value is not None:
                ET.SubElement(root, name).text = str(value)
        body = ET.tostring(root, encoding="utf-8", xml_declaration=True)
        kind = b"application/xml"
    else:
        body = simplejson.dumps(fields, separators=(",", ":")).encode()
        kind = b"application/json"
    return HTTP.get(code, 400), body, kind


def _response(code: int, detail: str | None, xml: bool, order_id: int | None = None,
              status: str | None = None) -> Response:
    http, body, kind = render(code, detail, xml, order_id, status)
    return Response(body, status_code=http, media_type=kind.decode())


def http_error(request: Request, status: int) -> Response:
    """An unknown /Rest/ path (9404), a method other than POST (9405), or a failure (9500)."""
    code = {404: 9404, 405: 9405}.get(status, 9500)
    detail = {9404: request.url.path, 9405: "use POST"}.get(code)
    return _response(code, detail, _format(request.headers.get("content-type")) == "xml")


def fault_answer(headers: list[tuple[bytes, bytes]], cause: AuthFailure | str,
                 ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
    """The middleware's answers on /Rest/ paths: authentication failures (9401 without
    credentials, 9403 with wrong ones) and the injected faults (9500, 5050)."""
    kind = next((v.decode("latin-1") for k, v in headers if k.lower() == b"content-type"), None)
    xml = _format(kind) == "xml"
    extra: list[tuple[bytes, bytes]] = []
    if isinstance(cause, MissingCredentials):
        code, detail = 9401, str(cause)
    elif isinstance(cause, AuthFailure):
        code, detail = 9403, str(cause)
    elif cause == "error":
        code, detail = 9500, None
    else:
        code, detail, extra = 5050, None, [(b"retry-after", b"1")]
    http, body, content_type = render(code, detail, xml)
    return http, body, extra, content_type


# ---------------------------------------------------------------- reading the request
def _element(el: ET.Element) -> Any:
    tag = el.tag.rsplit("}", 1)[-1]
    children = list(el)
    if tag == "Credentials":
        return [{"name": c.get("name"), "credential": (c.text or "").strip()}
                for c in children if c.tag.rsplit("}", 1)[-1] == "Credential"]
    if not children:
        text = (el.text or "").strip()
        return text or None
    out: dict[str, Any] = {}
    for child in children:
        name = child.tag.rsplit("}", 1)[-1]
        if name in out:
            raise Refusal(9400, f"element {name} appears twice")
        out[name] = _element(child)
    return out


def _read(raw: bytes, kind: str) -> dict[str, Any]:
    if kind == "xml":
        try:
            root = SafeET.fromstring(raw, forbid_dtd=True)
        except SafeET.ParseError as exc:
            raise Refusal(9400, f"malformed XML ({exc})") from None
        except ValueError:  # defusedxml's DTDForbidden, EntitiesForbidden ...
            raise Refusal(9400, "DTDs and entities are not accepted") from None
        if root.tag.rsplit("}", 1)[-1] != "Request":
            raise Refusal(9400, "the root element must be Request")
        data = _element(root)
        data = data if isinstance(data, dict) else {}
    else:
        try:
            data = simplejson.loads(raw, use_decimal=True)
        except (simplejson.JSONDecodeError, UnicodeDecodeError):
            raise Refusal(9400, "malformed JSON") from None
        if not isinstance(data, dict):
            raise Refusal(9400, "the body must be a JSON object")
    if "PaymentOrder" not in data:  # tolerated: the order's fields at the top level
        data = {"PaymentOrder": {k: v for k, v in data.items() if k != "Credentials"},
                "Credentials": data.get("Credentials") or []}
    return data


def _request(data: dict[str, Any]) -> LegacyPayRequest:
    try:
        pay = LegacyPayRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise Refusal(2000, f"{field}: {first['msg']}") from None
    seen: set[str] = set()
    for credential in pay.Credentials:
        if credential.name in seen:
            raise Refusal(2000, f"Credentials: the name {credential.name} is used twice")
        seen.add(credential.name)
    return pay


# ---------------------------------------------------------------- the call
@router.post(
    PAY, response_model=LegacyPayResponse,
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/LegacyPayRequest"}},
        "application/xml": {"schema": {"$ref": "#/components/schemas/LegacyPayRequest"}},
    }}},
    responses={200: {"content": {"application/xml": {
        "schema": {"$ref": "#/components/schemas/LegacyPayResponse"}}}}},
)
async def pay(request: Request) -> Response:
    """One payment in one call, with credentials given before (card, registered credential,
    QR code). Answered in the request's format, JSON or XML."""
    kind = _format(request.headers.get("content-type"))
    xml = kind == "xml"
    try:
        if kind is None:
            raise Refusal(9400, "send Content-Type application/json, application/xml or "
                                "text/xml")
        pay = _request(_read(await request.body(), kind))
        sb = sandbox(request)
        with sb.store.lock:
            order = _pay(request, pay)
    except Refusal as refusal:
        return _response(refusal.code, refusal.detail, xml)
    except ApiError as error:
        base = ApiError(error.code).message
        detail = error.message.removeprefix(base).removeprefix(": ")
        return _response(FROM_COLLECTION.get(error.code, 9500), detail, xml)
    number = int(order["id"][2:])
    code = {po.REFUSED: 3000, po.ERROR: 5000}.get(order["status"], 1000)
    outcome = {3000: "the card was refused", 5000: "the card issuer failed"}.get(code)
    return _response(code, outcome, xml, number, order["status"])


def _pay(request: Request, pay: LegacyPayRequest) -> dict[str, Any]:
    sb = sandbox(request)
    store, order = sb.store, pay.PaymentOrder
    rid = ledger.find(store, "merchants", order.MerchantId)
    if rid is None:
        raise Refusal(2500, f"PaymentOrder.MerchantId {order.MerchantId!r} does not exist")
    merchant = store.tables["merchants"][ledger.allowed(store, "merchants", rid,
                                                         order.MerchantId)]
    page = pc.PAGES.get(order.PaymentPageId)
    if page is None:
        raise Refusal(2500, f"PaymentOrder.PaymentPageId {order.PaymentPageId!r} does not "
                            f"exist")
    if page.converts or page.vertical == pc.BNPL:
        raise Refusal(2500, f"payment page {page.id} cannot be paid through Pay")
    sb.payment_orders.external_id_free(order.MerchantOrder.Id)
    if order.Currency != page.currency:
        raise Refusal(2000, f"PaymentOrder.Currency must be {page.currency}, the currency of "
                            f"payment page {page.id}")
    value = po.amount(order.Amount, order.Currency, "PaymentOrder.Amount")
    urls = order.MerchantUrls or LegacyMerchantUrls()
    for name, link in urls.model_dump().items():
        po.url(link, f"PaymentOrder.MerchantUrls.{name}")
    email = order.MerchantOrder.Customer.Email if order.MerchantOrder.Customer else None
    po.email(email, "PaymentOrder.MerchantOrder.Customer.Email")
    credentials = {c.name: c.credential for c in pay.Credentials}
    card = None
    if "CardNumber" in credentials:
        if page.vertical != pc.CARD:
            raise Refusal(2500, f"payment page {page.id} takes no card")
        expiry = credentials.get("Exp") or ""
        if not (len(expiry) == 6 and expiry.isdigit()):
            raise Refusal(2000, "Credentials.Exp must be the year and month as six digits "
                                "(YYYYMM)")
        card = po.card(credentials["CardNumber"], credentials.get("Cvv"), expiry[4:],
                       expiry[:4], sb.clock.now(),
                       {"number": "Credentials.CardNumber", "cvv": "Credentials.Cvv",
                        "month": "Credentials.Exp", "year": "Credentials.Exp"})
        if card.test == "unavailable":
            raise Refusal(5050, "the card issuer did not answer; nothing was created")
        first = card.test if card.test in (po.REFUSED, po.ERROR) else po.AUTHORIZED
    elif any(name in credentials for name in POINT_OF_SALE):
        first = po.CHARGED  # point of sale: paid on the spot
    else:
        raise Refusal(2000, "Credentials: CardNumber (with Cvv and Exp), qrcode or "
                            "technicalTransactionId is required")
    money = {"amount": value, "currency": order.Currency}
    merchant_order = (ps.MerchantOrder(customer=ps.OrderCustomer(email=email)).model_dump()
                      if email else None)
    draft = po.Draft(
        merchant=merchant, page=page, external_id=order.MerchantOrder.Id, type="C2B",
        integration_mode="HOST_TO_HOST", requested=money, processed=dict(money),
        rate=Decimal(1),
        merchant_urls={"return_url": urls.ReturnUrl, "aborted_url": urls.AbortedUrl,
                       "error_url": urls.ErrorUrl,
                       "notification_url": urls.ServerNotificationUrl},
        merchant_order=merchant_order, card=card, holder_email=email, legacy=True)
    plan: po.Plan = [("authorization_period", po.LAPSE)] if first == po.AUTHORIZED else []
    return sb.payment_orders.create(draft, first, plan)
