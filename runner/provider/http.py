"""The HTTP layer every provider client shares: one request, exact decimals both ways, every
answer mapped onto ``runner.errors``, and paginated lists as iterators.

Clients take their base URL, credentials, auth scheme and transport as arguments (no module
globals): ``runner.connect`` gives the clients of one provider one transport
(``runner.provider.transport``: proxies, CA, pool and timeouts read once), and a client
given none makes its own from the environment. TLS verification is left on, always.

An answer is the JSON the call promises, or it is mapped to an error by
``runner.provider.errors.error_from_answer``, odd answers included (an HTML page, a body that
does not decode or is not JSON, a redirect, an interim 1xx): those are ``UnexpectedAnswer``,
in doubt, since the call may have gone through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlencode

import simplejson

from runner.errors import NotFound
from runner.provider.auth import DEFAULT_BRAND, make_signer
from runner.provider.errors import error_from_answer
from runner.provider.transport import Reply, Request, Transport, Urllib3Transport, as_is

DEFAULT_TIMEOUT = (5.0, 30.0)  # connect, read
# One decoder for every answer (simplejson.loads with use_decimal builds one per call).
read_json = simplejson.JSONDecoder(parse_float=Decimal).decode


def ext(external_id: str) -> str:
    """The path segment that addresses a resource by the partner's external id."""
    return "ext-" + quote(external_id, safe="")


class Answer:
    """A successful answer: status, headers and the JSON body with Decimal numbers."""

    def __init__(self, status: int, headers: Mapping[str, str], body: Any) -> None:
        self.status = status
        self.headers = headers
        self.body = body


class ProviderClient:
    """Base of the per-service clients; ``prefix`` is the service's path prefix."""

    prefix = ""

    def __init__(self, base_url: str, api_key: str, api_secret: str, *, auth: str = "basic",
                 transport: Transport | None = None, brand: str = DEFAULT_BRAND,
                 timeout: float | tuple[float, float] = DEFAULT_TIMEOUT) -> None:
        self.base_url = base_url.rstrip("/")
        self.transport = transport or Urllib3Transport.from_environment(
            self.base_url, timeout=timeout if isinstance(timeout, tuple) else (timeout, timeout))
        self._owns_transport = transport is None
        self.sign = make_signer(auth, api_key, api_secret, brand)
        self.throttle: Callable[[], None] | None = None  # a provider-wide rate limit

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    def request(self, method: str, path: str, *, body: Any = None,
                params: Mapping[str, Any] | None = None, external_id: str | None = None,
                prefix: str | None = None) -> Answer:
        full = (self.prefix if prefix is None else prefix) + path
        endpoint = f"{method} {full}"
        data = None if body is None else simplejson.dumps(body, use_decimal=True)
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        reply = self.send(method, full, data=data, headers=headers, params=params,
                          external_id=external_id, read=_json)
        if 200 <= reply.status_code < 300 and reply.unexpected is None:
            return Answer(reply.status_code, reply.headers, reply.body)
        raise error_from_answer(reply.status_code, reply.body, endpoint, external_id,
                                reply.headers.get("Retry-After"), reply.unexpected)

    def send(self, method: str, full_path: str, *, data: str | bytes | None,
             headers: Mapping[str, str], params: Mapping[str, Any] | None = None,
             external_id: str | None = None,
             read: Callable[[bytes, Mapping[str, str]], Any] = as_is) -> Reply:
        """One exchange, whatever the answer's status, its body read by ``read``
        (``transport.Request``); a failure to get an answer is mapped to the connection
        errors (refused before sending, lost after, or timed out)."""
        if self.throttle is not None:
            self.throttle()
        query = "?" + urlencode(params, doseq=True) if params else ""
        body = data.encode() if isinstance(data, str) else data
        return self.transport.handle_request(Request(
            method, full_path + query, {**headers, **self.sign()}, body,
            f"{method} {full_path}", external_id, read))

    def close(self) -> None:
        """Close the connections of the transport the client made itself (a transport given
        to it is its giver's to close)."""
        if self._owns_transport:
            self.transport.close()

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=_clean(params)).body

    def find(self, path: str) -> Any | None:
        """GET a resource; None only when the provider clearly answers that it does not exist
        (any other failure raises: a lookup that fails proves nothing)."""
        return self.find_at(self.prefix, path)

    def find_at(self, prefix: str, path: str) -> Any | None:
        """``find`` under another service prefix of the same provider."""
        try:
            return self.request("GET", path, prefix=prefix).body
        except NotFound:
            return None

    def pages(self, path: str, *, per_page: int = 100, **params: Any) -> Iterator[Any]:
        """Every item of a paginated list, fetching page after page as it is consumed."""
        page: int | None = 1
        while page is not None:
            answer = self.request("GET", path,
                                  params=_clean({**params, "page": page, "per_page": per_page}))
            yield from answer.body
            following = answer.headers.get("X-Next-Page")
            page = int(following) if following else None


def _json(content: bytes, headers: Mapping[str, str]) -> Any:
    """The answer's JSON (None for an empty body); ValueError for a body that is not JSON
    (UnicodeDecodeError is one)."""
    return read_json(content.decode()) if content else None


def _clean(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}
