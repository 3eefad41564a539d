"""Provider error answers: ``{"errors": [{"code", "message"}]}`` with an HTTP status.

The documents list the codes but not their HTTP statuses; this table is the sandbox's
decision (and docs/sandbox.md's): authentication 401, not-found codes 404, service
unavailable 503, unexpected errors 500, every other refusal 400; and, outside the table,
429 for too many calls and 413 for a body over the limit.

A ``Dialect`` is how one family of paths words what is answered outside its routes (a
refused authentication, an injected fault or throttling, a body its models refuse or that is
too large, an unknown path, an unexpected error): ``PROVIDER`` for the money transfer and
merchant payment services, ``COLLECTION`` for document 1's three services, and the legacy
Pay's own (legacy_pay/exceptions.py). The app's error handlers and the middlewares ask
``dialect_of``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import simplejson
from starlette.responses import Response

from runner.sandbox.core import paths
from runner.sandbox.core.auth import AuthFailure

MESSAGES = {
    "1000401": "Unauthorized",
    "1000404": "Resource not found",
    "1000999": "Invalid parameter",
    "1000998": "Source country not authorized",
    "1003001": "Payer is inactive in your account",
    "1003002": "Invalid payer",
    "1003007": "Payer is currently unavailable",
    "1003008": "Destination amount is invalid",
    "1003009": "Parameter page is outside of the page range",
    "1003010": "Destination currency not provided by payer",
    "1003011": "Transaction amount below minimum of the selected payer",
    "1003012": "Transaction amount over maximum of the selected payer",
    "1005001": "Account is invalid",
    "1006001": "Transaction amount limit exceeded",
    "1006002": "Account quantity limit exceeded",
    "1006099": "Limit exceeded",
    "1007001": "External ID has already been used",
    "1007002": "Transaction has already been confirmed",
    "1007003": "Transaction can not be confirmed",
    "1007004": "Transaction can no longer be confirmed, quotation has expired",
    "1007005": "Transaction can not be confirmed, insufficient balance",
    "1007100": "Method is not supported by this payer",
    "1007101": "Method is currently unavailable",
    "1008002": "Quotation not found",
    "1008003": "Quotation has expired",
    "1008004": "Transaction not found",
    "1009001": "Unexpected error, contact support",
}

# The merchant payment service words some codes differently (and shifts two of them).
MERCHANT_MESSAGES = {
    **MESSAGES,
    "1003001": "Payment method is inactive in your account",
    "1003002": "Invalid payment method",
    "1003007": "Payment method is currently unavailable",
    "1003008": "Collection amount is invalid",
    "1003010": "Payment amount below minimum of the selected payment method",
    "1003011": "Payment amount over maximum of the selected payment method",
    "1005002": "Account not found",
    "1007100": "Method is not supported for this payment method",
    "1007002": "Payment has already been confirmed",
    "1007003": "Payment can not be confirmed",
    "1007004": "Payment can no longer be confirmed, quotation has expired",
    "1008004": "Payment not found",
}

NOT_FOUND = {"1000404", "1008002", "1008004", "1005002"}


def http_status(code: str) -> int:
    if code in COLLECTION_STATUSES:
        return COLLECTION_STATUSES[code]
    if code == "1000401":
        return 401
    if code in NOT_FOUND:
        return 404
    if code == "1009001":
        return 500
    return 400


# ---------------------------------------------------------------- collection service
# Document 1 (payment orders, operations, accounts, onboarding) has codes of its own; their
# HTTP statuses are the sandbox's decision (docs/sandbox.md): 403, 500 for technical errors at the
# provider or at a remote payment server, 503 when the remote server says retry later, and
# 400 for the rest (1000400, 1001001, 2001101, 2001201, 2001301).
COLLECTION_MESSAGES = {
    "1000400": "Invalid or malformed request message",
    "1000403": "Access to the resource is forbidden",
    "1000500": "Technical error",
    "1001001": "Invalid parameter, the value asked does not exist",
    "2001101": "Invalid data",
    "2001201": "Operation not allowed",
    "2001301": "Operation refused by the remote payment server",
    "2001401": "Technical error at the remote payment server, request status unknown",
    "2001501": "Remote payment server temporarily unavailable, retry later",
}
COLLECTION_STATUSES = {"1000403": 403, "1000500": 500, "2001401": 500, "2001501": 503}
MESSAGES.update(COLLECTION_MESSAGES)


def collection_invalid(kind: str, field: str, problem: str) -> ApiError:
    """A request the collection service's models refuse: an unreadable or absent body is
    1000400, a field of the wrong type, length or value 2001101 naming the field."""
    if kind == "json_invalid":
        return ApiError("1000400", "the body is not valid JSON")
    if field == "body":
        return ApiError("1000400", f"body: {problem}")
    return ApiError("2001101", f"{field}: {problem}")
# ---------------------------------------------------------------- end of collection service


class ApiError(Exception):
    """A refusal the provider answers with its error body."""

    def __init__(
        self, code: str, detail: str | None = None, *, merchant: bool = False,
        status: int | None = None,
    ) -> None:
        base = (MERCHANT_MESSAGES if merchant else MESSAGES).get(code, "Error")
        self.code = code
        self.message = f"{base}: {detail}" if detail else base
        self.status = status or http_status(code)
        super().__init__(self.message)


def error_body(code: str, message: str) -> bytes:
    return simplejson.dumps({"errors": [{"code": code, "message": message}]},
                           separators=(",", ":")).encode()


def error_response(error: ApiError, headers: dict[str, str] | None = None,
                   message: str | None = None) -> Response:
    """``error`` answered; ``message`` words it otherwise than the code's own message."""
    return Response(
        error_body(error.code, message or error.message), status_code=error.status,
        media_type="application/json", headers=headers,
    )


class JSON(Response):
    """JSON with exact decimals: Decimal amounts are written as JSON numbers, digit for digit."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return _encode(content).encode()


_encode = simplejson.JSONEncoder(use_decimal=True, separators=(",", ":")).encode


# ---------------------------------------------------------------- dialects
class Dialect:
    """The money transfer and merchant payment services' words (documents 2 and 3A); a
    family of paths with words of its own overrides what differs."""

    prefixes: tuple[str, ...] = ()
    basic_only = False  # Basic authentication only (no digest)
    retry_later = "1009001"  # the code of a 429 (too many calls)
    malformed = "1000999"  # the code of a 413 (a body over the limit)

    def owns(self, path: str) -> bool:
        return path.startswith(self.prefixes)

    def refused(self, content_type: str | None, failure: AuthFailure) -> Response:
        return error_response(ApiError("1000401", str(failure)))

    def fault(self, content_type: str | None, kind: str) -> Response | None:
        """The answer of an injected fault answered before any work (None: the fault is not
        one of those; the middleware lets the work be done)."""
        if kind == "error":
            return error_response(ApiError("1009001"))
        if kind == "unavailable":
            return error_response(ApiError("1009001", status=503), RETRY_LATER,
                                  message="Service temporarily unavailable, retry later")
        if kind == "throttled":
            return self.throttled(content_type, 1)
        return None

    def throttled(self, content_type: str | None, retry_after: int) -> Response:
        """429: too many calls for now (the throttling fault, or the rate limit per key)."""
        return error_response(ApiError(self.retry_later, status=429),
                              retry_after_header(retry_after),
                              message="Too many requests, retry later")

    def invalid(self, content_type: str | None, kind: str, field: str, problem: str,
                ) -> Response:
        """A body or parameter the route's models refuse (pydantic's error ``kind``)."""
        return error_response(ApiError("1000999", f"{field}: {problem}"))

    def too_large(self, content_type: str | None, limit: int) -> Response:
        """413: a body over the limit, refused unread (the connection is then closed)."""
        return error_response(ApiError(self.malformed, f"body: larger than {limit} bytes",
                                       status=413), CLOSE)

    def http_error(self, content_type: str | None, path: str, status: int) -> Response:
        """No route: an unknown path (404) or a method the path does not take (405)."""
        if status == 405:
            return error_response(ApiError("1000999", "method not allowed", status=405))
        return error_response(ApiError("1000404", path))

    def unexpected(self, content_type: str | None) -> Response:
        return error_response(ApiError("1009001"))


class CollectionDialect(Dialect):
    """Document 1 (payment orders, operations, accounts, onboarding): codes of its own."""

    prefixes = paths.COLLECTION
    basic_only = True
    retry_later = "2001501"
    malformed = "1000400"

    def fault(self, content_type: str | None, kind: str) -> Response | None:
        if kind == "error":
            return error_response(ApiError("1000500"))
        if kind == "unavailable":
            return error_response(ApiError("2001501"), RETRY_LATER)
        return super().fault(content_type, kind)

    def invalid(self, content_type: str | None, kind: str, field: str, problem: str,
                ) -> Response:
        return error_response(collection_invalid(kind, field, problem))

    def http_error(self, content_type: str | None, path: str, status: int) -> Response:
        if status == 405:
            return error_response(ApiError("1000400", "method not allowed", status=405))
        return super().http_error(content_type, path, status)

    def unexpected(self, content_type: str | None) -> Response:
        return error_response(ApiError("1000500"))


RETRY_LATER = {"Retry-After": "1"}
CLOSE = {"Connection": "close"}


def retry_after_header(seconds: int) -> dict[str, str]:
    return {"Retry-After": str(seconds)}
PROVIDER = Dialect()
COLLECTION = CollectionDialect()


def dialect_of(dialects: Sequence[Dialect], path: str) -> Dialect:
    """The dialect of the first family that owns ``path``; the provider's otherwise."""
    return next((d for d in dialects if d.owns(path)), PROVIDER)
