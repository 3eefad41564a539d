"""The provider's failures as one tree, and the one function that maps an answer to it.

::

    ProviderError (runner.errors)        status, code, message, endpoint, external_id, retry
    ├── ProviderConnectionError          no HTTP answer
    │   ├── ConnectionRefused            never reached the provider: retry is SAFE
    │   ├── ResponseLost                 sent, then the connection dropped: LOOKUP first
    │   └── ProviderTimeout              sent, no answer in time: LOOKUP first
    └── ProviderHTTPError                an HTTP answer with the provider's error body
        ├── AuthenticationError          401 / 1000401: UNSAFE (fix the credentials)
        ├── RateLimited                  429: SAFE after a wait
        ├── ServiceUnavailable           503, 2001501: SAFE after a wait
        ├── ServerError                  other 5xx, 2001401: in doubt, LOOKUP first
        ├── NotFound                     1000404, 1008002, 1008004, 1005002: UNSAFE
        ├── InvalidRequest               1000999, 1000400, 1001001, 2001101: UNSAFE
        ├── DuplicateExternalId          1007001: LOOKUP (fetch it, adopt it if it matches)
        └── BusinessRefusal              every other refusal (2001201, 2001301 ...): UNSAFE
            ├── AlreadyConfirmed         1007002
            ├── QuotationExpired         1008003, 1007004
            └── InsufficientBalance      1007005

``retry`` is what the exactly-once rules allow: SAFE (send again, same external_id), LOOKUP
(look the resource up by its external_id before anything else) or UNSAFE (never again).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from runner.errors import ProviderError as _Base


class Retry(Enum):
    SAFE = "safe"
    LOOKUP = "lookup"
    UNSAFE = "unsafe"


class ProviderError(_Base):
    retry = Retry.UNSAFE
    exit_code = 1

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 endpoint: str = "", external_id: str | None = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.endpoint = endpoint
        self.external_id = external_id
        super().__init__(message)

    def __str__(self) -> str:
        where = f" ({self.endpoint})" if self.endpoint else ""
        code = f"{self.code} " if self.code else ""
        return f"{code}{self.message}{where}"


class ProviderConnectionError(ProviderError):
    exit_code = 75


class ConnectionRefused(ProviderConnectionError):
    retry = Retry.SAFE


class ResponseLost(ProviderConnectionError):
    retry = Retry.LOOKUP


class ProviderTimeout(ProviderConnectionError):
    retry = Retry.LOOKUP


class ProviderHTTPError(ProviderError):
    pass


class AuthenticationError(ProviderHTTPError):
    exit_code = 2


class RateLimited(ProviderHTTPError):
    retry = Retry.SAFE


class ServiceUnavailable(ProviderHTTPError):
    retry = Retry.SAFE
    exit_code = 75


class ServerError(ProviderHTTPError):
    retry = Retry.LOOKUP


class NotFound(ProviderHTTPError):
    pass


class InvalidRequest(ProviderHTTPError):
    pass


class DuplicateExternalId(ProviderHTTPError):
    retry = Retry.LOOKUP


class BusinessRefusal(ProviderHTTPError):
    pass


class AlreadyConfirmed(BusinessRefusal):
    pass


class QuotationExpired(BusinessRefusal):
    pass


class InsufficientBalance(BusinessRefusal):
    pass


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


def error_from_answer(status: int, body: Any, endpoint: str,
                      external_id: str | None = None) -> ProviderHTTPError:
    """The error an HTTP answer means, from its status and the provider's error body."""
    code, message = None, f"HTTP {status}"
    errors = body.get("errors") if isinstance(body, dict) else None
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        code = str(errors[0].get("code")) if errors[0].get("code") is not None else None
        message = str(errors[0].get("message") or message)
    if status == 429:
        cls: type[ProviderHTTPError] = RateLimited
    elif status == 503:
        cls = ServiceUnavailable
    elif code in BY_CODE:
        cls = BY_CODE[code]
    elif status >= 500:
        cls = ServerError
    elif status == 401:
        cls = AuthenticationError
    elif status == 404:
        cls = NotFound
    else:
        cls = BusinessRefusal
    return cls(message, status=status, code=code, endpoint=endpoint, external_id=external_id)
