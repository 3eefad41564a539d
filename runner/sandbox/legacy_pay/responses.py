"""The legacy single-call Pay (document 3, part B): ``POST /Rest/V40/PaymentOrder/Pay``, in
JSON or in XML (root ``Request``), answered in the request's format (root ``Response``).

A Pay creates a payment order of the collection service, with ``MerchantOrder.Id`` as its external
id: ``GET /v1/payment/payment-orders/{MerchantOrder.Id}`` reads it, and its ``PaymentOrderId`` N is
the order ``PO`` + N on 10 digits. Every answer carries a ReturnCode (docs/sandbox.md, "Legacy
Pay"): 1000 with HTTP 200; 2000, 2500, 3000, 5000 and 5050 with HTTP 400; 9400, 9401, 9403, 9404,
9405 and 9500 with 400, 401, 403, 404, 405 and 500. XML is read with defusedxml: no DTD, no entity
expansion, no external entity, nested at most ``MAX_DEPTH`` deep; JSON and XML bodies alike are held
to core/bounds.py's limits (9400 for their syntax, 2000 for a value).
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from typing import Any

import defusedxml.ElementTree as SafeET
from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import Response

from runner.sandbox.core.bounds import MAX_DEPTH, BodyRefused, check, read_json
from runner.sandbox.core.errors import ApiError
from runner.sandbox.core.routing import sandbox
from runner.sandbox.legacy_pay import models
from runner.sandbox.legacy_pay.exceptions import FROM_COLLECTION, Refusal, format_of, response
from runner.sandbox.legacy_pay.schemas import LegacyPayRequest, LegacyPayResponse
from runner.sandbox.payment_orders.models import ERROR, REFUSED

router = APIRouter(tags=["legacy Pay"])
PAY = "/Rest/V40/PaymentOrder/Pay"


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


def _xml(raw: bytes) -> ET.Element:
    """The document's root, read with its depth bounded (no recursion on a deep body)."""
    depth, root = 0, None
    try:
        for event, element in SafeET.iterparse(io.BytesIO(raw), ("start", "end"),
                                               forbid_dtd=True):
            depth += 1 if event == "start" else -1
            if depth > MAX_DEPTH:
                raise Refusal(9400, f"elements nested more than {MAX_DEPTH} deep")
            root = element if root is None else root
    except SafeET.ParseError as exc:
        raise Refusal(9400, f"malformed XML ({exc})") from None
    except ValueError:  # defusedxml's DTDForbidden, EntitiesForbidden ...
        raise Refusal(9400, "DTDs and entities are not accepted") from None
    if root is None:
        raise Refusal(9400, "malformed XML (no element)")
    return root


def _read(raw: bytes, kind: str) -> dict[str, Any]:
    try:
        if kind == "xml":
            root = _xml(raw)
            if root.tag.rsplit("}", 1)[-1] != "Request":
                raise Refusal(9400, "the root element must be Request")
            data = _element(root)
            data = data if isinstance(data, dict) else {}
            check(data)
        else:
            data = read_json(raw)
    except BodyRefused as refused:
        syntax = refused.kind in ("json_invalid", "nesting")
        detail = "malformed JSON" if refused.kind == "json_invalid" else \
            f"{refused.field}: {refused.problem}"
        raise Refusal(9400 if syntax else 2000, detail) from None
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
    kind = format_of(request.headers.get("content-type"))
    xml = kind == "xml"
    try:
        if kind is None:
            raise Refusal(9400, "send Content-Type application/json, application/xml or "
                                "text/xml")
        pay = _request(_read(await request.body(), kind))
        sb = sandbox(request)
        with sb.store.lock:
            order = models.pay_order(sb, pay)
    except Refusal as refusal:
        return response(refusal.code, refusal.detail, xml)
    except ApiError as error:
        base = ApiError(error.code).message
        detail = error.message.removeprefix(base).removeprefix(": ")
        return response(FROM_COLLECTION.get(error.code, 9500), detail, xml)
    number = int(order["id"][2:])
    code = {REFUSED: 3000, ERROR: 5000}.get(order["status"], 1000)
    outcome = {3000: "the card was refused", 5000: "the card issuer failed"}.get(code)
    return response(code, outcome, xml, number, order["status"])
