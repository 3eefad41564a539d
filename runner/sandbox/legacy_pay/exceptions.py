"""The legacy Pay's answers: every one carries a ReturnCode (docs/sandbox.md, "Legacy Pay"), in the
request's
format (JSON, or XML with root ``Response``): 1000 with HTTP 200; 2000, 2500, 3000, 5000 and
5050 with HTTP 400; 9400, 9401, 9403, 9404, 9405 and 9500 with 400, 401, 403, 404, 405 and
500; and two answers of the sandbox's own: too many calls, 5050 with HTTP 429, and a body over
the limit, 9400 with HTTP 413. ``LEGACY`` is its dialect: what the app's error handlers and
the middlewares answer on ``/Rest/`` paths (core/errors.py).
"""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from typing import Any

import simplejson
from starlette.responses import Response

from runner.sandbox.core import paths
from runner.sandbox.core.auth import AuthFailure, MissingCredentials
from runner.sandbox.core.errors import CLOSE, RETRY_LATER, Dialect, retry_after_header

MESSAGES = {
    1000: "Success", 2000: "Invalid data", 2500: "Operation not allowed",
    3000: "Operation refused", 5000: "Remote technical error, status unknown",
    5050: "Remote server unavailable, retry later", 9400: "Syntax error",
    9401: "Authentication header missing", 9403: "Forbidden", 9404: "Not found",
    9405: "Method not allowed", 9500: "Internal error",
}
HTTP = {1000: 200, 9400: 400, 9401: 401, 9403: 403, 9404: 404, 9405: 405, 9500: 500}
# The collection service's codes, by their descriptions (the provider documents them so).
FROM_COLLECTION = {"2001101": 2000, "2001201": 2500, "1001001": 2500, "1000403": 2500,
                   "2001301": 3000, "2001401": 5000, "2001501": 5050}


class Refusal(Exception):
    def __init__(self, code: int, detail: str | None = None) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def format_of(content_type: str | None) -> str | None:
    """"xml", "json", or None for a content type the call does not take."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media in ("application/xml", "text/xml") or media.endswith("+xml"):
        return "xml"
    if media == "application/json" or media.endswith("+json"):
        return "json"
    return None


def response(code: int, detail: str | None, xml: bool, order_id: int | None = None,
             status: str | None = None, headers: dict[str, str] | None = None,
             http: int | None = None) -> Response:
    """An answer: its ReturnCode and message, and the order it is about when there is one
    (``http``: its HTTP status, when not the ReturnCode's own)."""
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
        kind = "application/xml"
    else:
        body = simplejson.dumps(fields, separators=(",", ":")).encode()
        kind = "application/json"
    return Response(body, status_code=http or HTTP.get(code, 400), media_type=kind,
                    headers=headers)


class LegacyDialect(Dialect):
    """Authentication failures (9401 without credentials, 9403 with wrong ones), the injected
    faults (9500, 5050; throttling 5050 with HTTP 429), a body over the limit (9400 with
    HTTP 413), unknown paths (9404), methods other than POST (9405), failures (9500)."""

    prefixes = (paths.LEGACY,)
    basic_only = True

    def refused(self, content_type: str | None, failure: AuthFailure) -> Response:
        code = 9401 if isinstance(failure, MissingCredentials) else 9403
        return response(code, str(failure), format_of(content_type) == "xml")

    def fault(self, content_type: str | None, kind: str) -> Response | None:
        xml = format_of(content_type) == "xml"
        if kind == "error":
            return response(9500, None, xml)
        if kind == "unavailable":
            return response(5050, None, xml, headers=RETRY_LATER)
        return super().fault(content_type, kind)

    def throttled(self, content_type: str | None, retry_after: int) -> Response:
        return response(5050, "too many requests", format_of(content_type) == "xml",
                        headers=retry_after_header(retry_after), http=429)

    def too_large(self, content_type: str | None, limit: int) -> Response:
        return response(9400, f"the body is larger than {limit} bytes",
                        format_of(content_type) == "xml", headers=CLOSE, http=413)

    def http_error(self, content_type: str | None, path: str, status: int) -> Response:
        code = {404: 9404, 405: 9405}.get(status, 9500)
        detail = {9404: path, 9405: "use POST"}.get(code)
        return response(code, detail, format_of(content_type) == "xml")

    def unexpected(self, content_type: str | None) -> Response:
        return self.http_error(content_type, "", 500)


LEGACY = LegacyDialect()
