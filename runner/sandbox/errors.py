"""Provider error answers: ``{"errors": [{"code", "message"}]}`` with an HTTP status.

The documents list the codes but not their HTTP statuses; this table is the sandbox's
decision (and the README's): authentication 401, not-found codes 404, service
unavailable 503, unexpected errors 500, every other refusal 400.
"""

from __future__ import annotations

from typing import Any

import simplejson
from starlette.responses import Response

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
    if code == "1000401":
        return 401
    if code in NOT_FOUND:
        return 404
    if code == "1009001":
        return 500
    return 400


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


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> Response:
    return Response(
        error_body(error.code, error.message), status_code=error.status,
        media_type="application/json", headers=headers,
    )


class JSON(Response):
    """JSON with exact decimals: Decimal amounts are written as JSON numbers, digit for digit."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return simplejson.dumps(content, use_decimal=True, separators=(",", ":")).encode()
