"""Which error a provider's answer means: the one function that maps an answer onto the
exception tree of ``runner.errors`` (as stripe-python's ``specific_v1_api_error`` does).

Every client's failed answer goes through ``error_from_answer``: the JSON services' error bodies
(``{"errors": [{"code", "message"}]}``) and the legacy Pay's fields (``ReturnCode``,
``ReturnMessage``, ``PaymentOrderId``, ``Status``; docs/sandbox.md, "Legacy Pay") alike. What the
tables below decide, no caller decides again:

- by code: ``BY_CODE`` for the JSON services, ``BY_RETURN_CODE`` for the legacy Pay;
- by status, where the code says nothing: 429, 503, 5xx, 401, 404;
- an answer that is not one the call promises (``UnexpectedAnswer``, in doubt): a redirect or
  an interim 1xx, whatever its body; a head the transport found odd (``unexpected``: a media
  type or an encoding not asked for), or a body that cannot be read, unless its status alone
  says what happened (401, the Pay's 403, 429, 5xx);
- by code and message (``BY_MESSAGE``), where one code covers many business rules:
  collection-service.md has no code of its own for a reused external_id, so the service
  answers it with 2001201 ("operation not allowed", every business rule) worded "External
  ID has already been used: ..." (docs/sandbox.md), and the Pay passes it on as 2500. That wording
  makes it a ``DuplicateExternalId`` (fetch it, adopt it) where the call has a lookup by
  external_id, and a ``DuplicateWithoutLookup`` (a person checks) where it has none
  (``WITHOUT_LOOKUP``). The same code says a quotation expired (``QuotationExpired``) or
  that an account request's reference or an onboarding name is taken (``ReferenceTaken``).
  Any other 2001201 stays a ``BusinessRefusal`` with its message.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from runner.errors import (
    AlreadyConfirmed,
    AuthenticationError,
    BusinessRefusal,
    DuplicateExternalId,
    DuplicateWithoutLookup,
    InsufficientBalance,
    InvalidRequest,
    NotFound,
    PayAnswered,
    PayRefused,
    PayStatusUnknown,
    ProviderHTTPError,
    QuotationExpired,
    RateLimited,
    ReferenceTaken,
    Retry,
    ServerError,
    ServiceUnavailable,
    UnexpectedAnswer,
)

# The JSON services' codes (documents 1 to 3) that name their error on their own.
BY_CODE: dict[str, type[ProviderHTTPError]] = {
    "1000401": AuthenticationError,
    "1000404": NotFound, "1008002": NotFound, "1008004": NotFound, "1005002": NotFound,
    "1000999": InvalidRequest, "1000400": InvalidRequest, "1001001": InvalidRequest,
    "2001101": InvalidRequest,
    "1007001": DuplicateExternalId,
    "1007002": AlreadyConfirmed,
    "1008003": QuotationExpired, "1007004": QuotationExpired,
    "1007005": InsufficientBalance,
    "2001401": ServerError, "1000500": ServerError,
    "2001501": ServiceUnavailable,
}

# The legacy Pay's ReturnCodes (docs/sandbox.md, "Legacy Pay"); 1000 is success and never comes
# here.
BY_RETURN_CODE: dict[str, type[ProviderHTTPError]] = {
    "2000": InvalidRequest, "9400": InvalidRequest, "9405": InvalidRequest,
    "2500": BusinessRefusal, "3000": PayRefused, "5000": PayStatusUnknown,
    "5050": ServiceUnavailable, "9401": AuthenticationError, "9403": AuthenticationError,
    "9404": NotFound, "9500": ServerError,
}

# Codes that stand for many business rules ("operation not allowed"), told apart by their
# message (a pattern matched at its start): (code, pattern, the class where the call has a
# lookup by external_id, the class where it has none). Only an answer that is otherwise a
# BusinessRefusal is read so.
REUSED = "External ID has already been used"
Rule = tuple[str, re.Pattern[str], type[ProviderHTTPError], type[ProviderHTTPError]]


def _starts(pattern: str) -> re.Pattern[str]:
    # The account service words its refusals after the code's name: "Operation not
    # allowed: External reference has already been used: r-1".
    return re.compile(rf"(?:Operation not allowed: )?(?:{pattern})")


BY_MESSAGE: tuple[Rule, ...] = (
    ("2001201", _starts(REUSED), DuplicateExternalId, DuplicateWithoutLookup),
    ("2500", _starts(REUSED), DuplicateExternalId, DuplicateWithoutLookup),
    ("2001201", _starts(r"quotation \S+ has expired"), QuotationExpired, QuotationExpired),
    ("2001201", _starts(r"External reference has already been used|a company named .* "
                        r"already exists|merchant_external_id .* is already used|an account "
                        r"labelled .* already exists"), ReferenceTaken, ReferenceTaken),
)
# The calls with no lookup by external_id (rule 5 of docs/exactly-once.md): the collection service's
# operations (collection.OPERATION_PATHS) and the legacy Pay (legacy.PAY, whose
# MerchantOrder.Id is its external_id).
WITHOUT_LOOKUP = re.compile(
    r"POST (/v1/payment/payment-orders/[^/]+/(charges|refunds|cancellations)"
    r"|/Rest/V40/PaymentOrder/Pay)")
LEGACY_API = "/Rest/"  # answers in ReturnCodes, not in error bodies


def error_from_answer(status: int, body: Any, endpoint: str,
                      external_id: str | None = None, retry_after: str | None = None,
                      odd: str | None = None) -> ProviderHTTPError:
    """The error an answer other than success means, from its HTTP status and its body
    (None when it cannot be read); ``endpoint`` is "METHOD /path" as sent; ``retry_after``
    the answer's Retry-After header, kept on an error that is safe to retry; ``odd`` why the
    transport found the answer's head not one the call asked for (its body then unread)."""
    legacy = endpoint.partition(" ")[2].startswith(LEGACY_API)
    said = status in (401, 429) or status >= 500 or (legacy and status == 403)
    if status < 200 or 300 <= status < 400 or (body is None and not said):
        return unexpected(status, odd or "a body that cannot be read", endpoint, external_id)
    code, message = (_return_code if legacy else _error_code)(body)
    message = message or f"HTTP {status}"
    cls: type[ProviderHTTPError]
    if legacy and code in BY_RETURN_CODE:
        cls = BY_RETURN_CODE[code]
    elif status == 429:
        cls = RateLimited
    elif status == 503:
        cls = ServiceUnavailable
    elif not legacy and code in BY_CODE:
        cls = BY_CODE[code]
    elif status >= 500 or (legacy and status < 400):
        # (A Pay answer that does not say what happened may have paid.)
        cls = ServerError
    elif status == 401 or (legacy and status == 403):
        cls = AuthenticationError
    elif status == 404 and not legacy:
        cls = NotFound
    else:
        cls = BusinessRefusal
    for rule, pattern, looked_up, not_looked_up in BY_MESSAGE:
        if cls is BusinessRefusal and code == rule and pattern.match(message):
            cls = not_looked_up if WITHOUT_LOOKUP.fullmatch(endpoint) else looked_up
            break
    error = cls(message, status=status, code=code, endpoint=endpoint, external_id=external_id)
    if isinstance(error, PayAnswered) and isinstance(body, Mapping):
        error.payment_order_id = answer_int(body.get("PaymentOrderId"))
        error.order_status = answer_text(body.get("Status"))
    if error.retry is Retry.SAFE:
        error.retry_after = seconds_to_wait(retry_after)
    return error


def unexpected(status: int, why: str, endpoint: str, external_id: str | None
               ) -> UnexpectedAnswer:
    """An answer that is not one the call promises, and why."""
    return UnexpectedAnswer(f"an unexpected answer: {why}", status=status, endpoint=endpoint,
                            external_id=external_id)


def seconds_to_wait(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header's wait in seconds: a number of seconds, or an HTTP date (RFC
    9110); None when absent or unreadable. ``now``: Unix time (default: the clock's)."""
    if not value:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(int(text)) if len(text) <= 9 else 1e9  # (a longer wait is capped anyway)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_code(body: Any) -> tuple[str | None, str | None]:
    """The first error of a JSON service's error body: its code and message."""
    errors = body.get("errors") if isinstance(body, Mapping) else None
    if not (isinstance(errors, list) and errors and isinstance(errors[0], Mapping)):
        return None, None
    first = errors[0]
    code = first.get("code")
    return (None if code is None else str(code)), answer_text(first.get("message") or None)


def _return_code(body: Any) -> tuple[str | None, str | None]:
    """The legacy Pay's ReturnCode (as text, however it came) and ReturnMessage."""
    fields = body if isinstance(body, Mapping) else {}
    code = answer_int(fields.get("ReturnCode"))
    return (None if code is None else str(code)), answer_text(fields.get("ReturnMessage") or None)


def answer_int(value: Any) -> int | None:
    """A number from a JSON or XML answer (XML gives text); None when absent or not one."""
    try:
        return None if value in (None, "") else int(value)
    except (TypeError, ValueError):
        return None


def answer_text(value: Any) -> str | None:
    """A text field of a JSON or XML answer; None when absent or empty."""
    return None if value in (None, "") else str(value)
