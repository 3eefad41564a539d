"""The HTTP layer every provider client shares: one request, exact decimals both ways, every
failure mapped onto ``runner.errors``, and paginated lists as iterators.

Clients take their base URL, credentials, auth scheme and ``requests.Session`` as arguments
(no module globals), so tests and the engine decide pooling, proxies, timeouts and TLS. TLS
verification is left on, always.

A base URL reached directly (no proxy for it, no client certificate) is sent to through
``runner.provider.wire``: a kept-alive connection per thread, answers parsed by httptools;
the session gives its CA settings. Otherwise the session's adapter decides the connection
pool (with its proxy and TLS settings) and the request goes out through that urllib3 pool
directly. Either way requests' per-call preparation and response building (cookie jars,
hooks, redirects) are left out: they cost more than half of a call's time on the client
side, and a provider API uses none of them.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast
from urllib.parse import quote, urlencode

import requests
import simplejson
from urllib3 import HTTPConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    MaxRetryError,
    NewConnectionError,
    ReadTimeoutError,
)
from urllib3.util import Timeout

from runner.errors import (
    ConnectionRefused,
    NotFound,
    ProviderConnectionError,
    ProviderTimeout,
    ResponseLost,
    UntrustedCertificate,
)
from runner.provider.auth import DEFAULT_BRAND, make_signer
from runner.provider.errors import error_from_answer
from runner.provider.wire import Headers, Wire, tls_context

DEFAULT_TIMEOUT = (5.0, 30.0)  # connect, read
# One decoder for every answer (simplejson.loads with use_decimal builds one per call).
read_json = simplejson.JSONDecoder(parse_float=Decimal).decode


def ext(external_id: str) -> str:
    """The path segment that addresses a resource by the partner's external id."""
    return "ext-" + quote(external_id, safe="")


@dataclass
class Reply:
    """What came back from one exchange, whatever its status."""

    status_code: int
    headers: Headers
    content: bytes


class Answer:
    """A successful answer: status, headers and the JSON body with Decimal numbers."""

    def __init__(self, response: Reply) -> None:
        self.status = response.status_code
        self.headers = response.headers
        self.body: Any = (read_json(response.content.decode())
                          if response.content else None)


class ProviderClient:
    """Base of the per-service clients; ``prefix`` is the service's path prefix."""

    prefix = ""

    def __init__(self, base_url: str, api_key: str, api_secret: str, *, auth: str = "basic",
                 session: requests.Session | None = None, brand: str = DEFAULT_BRAND,
                 timeout: float | tuple[float, float] = DEFAULT_TIMEOUT) -> None:
        self.base_url = base_url.rstrip("/")
        self.session = session or requests.Session()
        self.sign = make_signer(auth, api_key, api_secret, brand)
        self.timeout = timeout
        connect, read = _seconds(timeout)
        self._timeout = Timeout(connect=connect, read=read)
        self.throttle: Callable[[], None] | None = None  # a provider-wide rate limit
        self._routed: tuple[HTTPConnectionPool, str, Any] | None = None
        self._wire: Wire | None = None
        self._direct: bool | None = None  # decided at the first call

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
        response = self.send(method, full, data=data, headers=headers, params=params,
                             external_id=external_id)
        if not 200 <= response.status_code < 300:  # a redirect is not an answer either
            try:
                parsed = read_json(response.content.decode())
            except ValueError:
                parsed = None
            raise error_from_answer(response.status_code, parsed, endpoint, external_id,
                                    response.headers.get("Retry-After"))
        return Answer(response)

    def send(self, method: str, full_path: str, *, data: str | bytes | None,
             headers: Mapping[str, str], params: Mapping[str, Any] | None = None,
             external_id: str | None = None) -> Reply:
        """One exchange, whatever the answer's status; a failure to get an answer is mapped
        to the connection errors (refused before sending, lost after, or timed out)."""
        endpoint = f"{method} {full_path}"
        if self.throttle is not None:
            self.throttle()
        query = "?" + urlencode(params, doseq=True) if params else ""
        body = data.encode() if isinstance(data, str) else data
        wire = self._wire if self._direct else self._wired()
        if wire is not None:
            return Reply(*wire.exchange(method, full_path + query, body,
                                        {**headers, **self.sign()}, endpoint, external_id))
        try:
            pool, prefix, retries = self._route()
            raw = pool.urlopen(
                method, prefix + full_path + query,
                body=body, headers={**headers, **self.sign()}, redirect=False,
                assert_same_host=False, preload_content=True, decode_content=True,
                retries=retries, timeout=self._timeout)
        except (HTTPError, OSError) as exc:
            raise _no_answer(exc, endpoint, external_id) from None
        return Reply(raw.status, Headers((k.lower(), raw.headers[k]) for k in raw.headers),
                     raw.data)

    def close(self) -> None:
        """Close the client's direct connections (the session's pools are the session's)."""
        if self._wire is not None:
            self._wire.close()

    def _wired(self) -> Wire | None:
        """The direct exchanges, when the session sends the base URL's calls straight to it
        (no proxy for it, no client certificate): worked out at the first call."""
        if self._direct is None:
            session = self.session
            proxied = requests.utils.select_proxy(self.base_url, session.proxies)
            self._direct = not proxied and not session.cert and session.verify is not False
            if self._direct:
                tls = tls_context(True if session.verify is None else session.verify) \
                    if self.base_url.startswith("https:") else None
                connect, read = _seconds(self.timeout)
                self._wire = Wire(self.base_url, connect, read, tls)
        return self._wire

    def _route(self) -> tuple[HTTPConnectionPool, str, Any]:
        """The pool the session's adapter sends the base URL's calls through (with its proxy
        and TLS settings), what precedes a path on the request line (the base URL's path, or
        the whole URL through an HTTP proxy), and the adapter's retries; worked out once, and
        again should the pool be closed."""
        route = self._routed
        if route is None or route[0].pool is None:
            session = self.session
            adapter = session.get_adapter(self.base_url)
            if not isinstance(adapter, requests.adapters.HTTPAdapter):
                raise TypeError(f"{type(adapter).__name__}: the session needs HTTP adapters")
            base = requests.PreparedRequest()
            base.url = self.base_url + "/"
            pool = cast(HTTPConnectionPool, adapter.get_connection_with_tls_context(
                base, True if session.verify is None else session.verify,
                proxies=session.proxies, cert=session.cert))
            line = adapter.request_url(base, session.proxies)
            route = self._routed = (pool, line[:-1], adapter.max_retries)
        return route

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


def _seconds(timeout: float | tuple[float, float]) -> tuple[float, float]:
    """The connect and read timeouts."""
    return timeout if isinstance(timeout, tuple) else (timeout, timeout)


def _clean(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _no_answer(exc: BaseException, endpoint: str, external_id: str | None
               ) -> ProviderConnectionError:
    """Why a call got no answer: refused before sending, timed out, or lost after."""
    reason = exc.reason if isinstance(exc, MaxRetryError) else exc
    cls: type[ProviderConnectionError]
    if isinstance(reason, ReadTimeoutError):
        cls, message = ProviderTimeout, "no answer in time"
    elif isinstance(untrusted := _cause(exc, (ssl.SSLCertVerificationError,)),
                    ssl.SSLCertVerificationError):
        cls, message = UntrustedCertificate, (f"could not connect: the provider's TLS certificate "
                                           f"is not trusted ({untrusted.verify_message})")
    # (urllib3 counts a refused connection as a connect timeout too.)
    elif isinstance(reason, ConnectTimeoutError) and not isinstance(reason, NewConnectionError):
        cls, message = ConnectionRefused, f"could not connect: {_reason(exc)}"
    else:  # refused or not resolved: the request never left; else it may have
        never_sent = _cause(exc, (NewConnectionError, ConnectTimeoutError)) is not None
        cls = ConnectionRefused if never_sent else ResponseLost
        message = f"connection failed: {_reason(exc)}"
    return cls(message, endpoint=endpoint, external_id=external_id)


def _cause(exc: BaseException, kinds: tuple[type[BaseException], ...]
           ) -> BaseException | None:
    """The first exception of ``kinds`` in what caused ``exc`` (itself included)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, kinds):
            return cause
        reason = getattr(cause, "reason", None)
        cause = reason if isinstance(reason, BaseException) else (
            cause.args[0] if cause.args and isinstance(cause.args[0], BaseException)
            else cause.__context__)
    return None


def _reason(exc: BaseException) -> str:
    # The type names what happened without echoing URLs or headers (which could carry keys).
    inner = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else exc
    reason = getattr(inner, "reason", inner)
    return type(reason).__name__
