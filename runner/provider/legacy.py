"""Client of the legacy single-call Pay (``POST /Rest/V40/PaymentOrder/Pay``, document 3
part B), in JSON or XML: the answer comes back in the request's form.

The call reports in its own ReturnCodes (spec/README.md), mapped here onto the provider error
tree (``runner.provider.errors``) by ``error_from_return_code``:

====================  =================================================  =================
ReturnCode            meaning                                            error (retry)
====================  =================================================  =================
1000                  success (Authorized, or Charged at a point of sale) none
2000, 9400, 9405      invalid data, syntax, method                        InvalidRequest
2500                  operation not allowed (MerchantOrder.Id used ...)   BusinessRefusal
3000                  refused (the order exists, Refused)                 PayRefused
5000                  remote technical error, status unknown              PayStatusUnknown
                                                                          (in doubt)
5050                  remote server unavailable, retry later              ServiceUnavailable
                                                                          (safe)
9401, 9403            authentication missing or refused                   AuthenticationError
9404                  not found                                           NotFound
9500, other 5xx       internal error                                      ServerError
                                                                          (in doubt)
====================  =================================================  =================

A lost connection or a timeout after sending is in doubt too (``http.ProviderClient.send``).
The call has no lookup of its own, so the engine never sends an in-doubt Pay again
(DESIGN.md rule 5). XML is written with the standard library and read with defusedxml (no
DTD, no entities). Card data goes out in the request body only: nothing here logs or keeps it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import defusedxml.ElementTree as SafeET
import simplejson

from runner.provider.errors import (
    AuthenticationError,
    BusinessRefusal,
    InvalidRequest,
    NotFound,
    ProviderHTTPError,
    RateLimited,
    ServerError,
    ServiceUnavailable,
)
from runner.provider.http import ProviderClient

PAY = "/Rest/V40/PaymentOrder/Pay"
MEDIA = {"json": "application/json", "xml": "application/xml"}
SUCCESS = 1000


class PayAnswered:
    """What an answered Pay said besides its code: the order it made, and its status."""

    payment_order_id: int | None = None
    order_status: str | None = None


class PayRefused(PayAnswered, BusinessRefusal):
    """3000: the card (or the remote server) refused; the order exists, Refused."""


class PayStatusUnknown(PayAnswered, ServerError):
    """5000: a remote technical error; the order may exist (Error), its fate is unknown."""


BY_RETURN_CODE: dict[int, type[ProviderHTTPError]] = {
    2000: InvalidRequest, 9400: InvalidRequest, 9405: InvalidRequest,
    2500: BusinessRefusal, 3000: PayRefused, 5000: PayStatusUnknown,
    5050: ServiceUnavailable, 9401: AuthenticationError, 9403: AuthenticationError,
    9404: NotFound, 9500: ServerError,
}


def error_from_return_code(http_status: int, answer: Mapping[str, Any] | None,
                           endpoint: str, external_id: str | None) -> ProviderHTTPError:
    """The error a Pay answer other than 1000 means (``answer`` None: unreadable)."""
    code = _int((answer or {}).get("ReturnCode"))
    message = str((answer or {}).get("ReturnMessage") or f"HTTP {http_status}")
    if code in BY_RETURN_CODE:
        cls = BY_RETURN_CODE[code]
    elif http_status == 429:
        cls = RateLimited
    elif http_status == 503:
        cls = ServiceUnavailable
    elif http_status >= 500 or http_status < 400:
        # A 5xx, or an answer that does not say what happened: the Pay may have been made.
        cls = ServerError
    elif http_status in (401, 403):
        cls = AuthenticationError
    else:
        cls = BusinessRefusal
    error = cls(message, status=http_status, code=None if code is None else str(code),
                endpoint=endpoint, external_id=external_id)
    if isinstance(error, PayAnswered) and answer is not None:
        error.payment_order_id = _int(answer.get("PaymentOrderId"))
        error.order_status = _text(answer.get("Status"))
    return error


class LegacyPayClient(ProviderClient):
    prefix = ""

    def pay(self, order: Mapping[str, Any], credentials: Sequence[Mapping[str, str]],
            form: str = "json", external_id: str | None = None) -> dict[str, Any]:
        """One Pay. ``order`` is the PaymentOrder (document's field names, Amount a Decimal),
        ``credentials`` its ``{name, credential}`` list, ``form`` json or xml. Returns the
        answer's fields (ReturnCode 1000); any other answer raises."""
        if form not in MEDIA:
            raise ValueError(f"form must be json or xml, not {form!r}")
        body = (xml_request(order, credentials) if form == "xml"
                else simplejson.dumps({"PaymentOrder": order, "Credentials": list(credentials)},
                                      use_decimal=True).encode())
        response = self.send("POST", PAY, data=body, external_id=external_id,
                             headers={"Content-Type": f"{MEDIA[form]}; charset=utf-8",
                                      "Accept": MEDIA[form]})
        endpoint = f"POST {PAY}"
        answer = read_answer(response.content, response.headers.get("Content-Type"), form)
        if answer is not None and _int(answer.get("ReturnCode")) == SUCCESS:
            # XML answers are text: the same types whatever the form.
            return {**answer, "ReturnCode": SUCCESS,
                    "PaymentOrderId": _int(answer.get("PaymentOrderId")),
                    "Status": _text(answer.get("Status"))}
        raise error_from_return_code(response.status_code, answer, endpoint, external_id)


def xml_request(order: Mapping[str, Any], credentials: Sequence[Mapping[str, str]]) -> bytes:
    """``<Request><PaymentOrder>...</PaymentOrder><Credentials><Credential name="...">``."""
    root = ET.Element("Request")
    _fill(ET.SubElement(root, "PaymentOrder"), order)
    holder = ET.SubElement(root, "Credentials")
    for c in credentials:
        ET.SubElement(holder, "Credential", name=c["name"]).text = c["credential"]
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _fill(parent: ET.Element, values: Mapping[str, Any]) -> None:
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            _fill(ET.SubElement(parent, name), value)
        else:
            ET.SubElement(parent, name).text = (format(value, "f") if isinstance(value, Decimal)
                                                else str(value))


def read_answer(raw: bytes, content_type: str | None, sent: str) -> dict[str, Any] | None:
    """The answer's fields, from JSON or XML (as its Content-Type says, else as sent); None
    when it cannot be read."""
    media = (content_type or "").split(";")[0].strip().lower()
    form = "xml" if media.endswith("xml") else "json" if media.endswith("json") else sent
    if not raw:
        return None
    if form == "xml":
        try:
            root = SafeET.fromstring(raw, forbid_dtd=True)
        except (SafeET.ParseError, ValueError):  # ValueError: defusedxml's refusals
            return None
        if root.tag != "Response":
            return None
        return {child.tag: (child.text or "").strip() for child in root}
    try:
        answer = simplejson.loads(raw, use_decimal=True)
    except (ValueError, UnicodeDecodeError):
        return None
    return answer if isinstance(answer, dict) else None


def _int(value: Any) -> int | None:
    try:
        return None if value in (None, "") else int(value)
    except (TypeError, ValueError):
        return None


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)
