"""The provider clients' one HTTP transport: an interface (``Transport.handle_request``, as
httpx's ``BaseTransport``), one map from what can go wrong below it to ``runner.errors``
(``map_exceptions``), and one implementation on urllib3 (``Urllib3Transport``), chosen once
per provider (``runner.connect``) and shared by its clients.

urllib3 does the protocol: kept-alive connections in a thread-safe pool (one found closed by
the provider is not written to again), answers chunked, sized or read until the connection
closes and split across any number of packets, gzip and deflate bodies decoded, proxies by
CONNECT (an ``https://`` provider) or by forwarding (``http://``), TLS with the host name
checked against the certificate's subjectAltName only (no common-name fallback). Redirects
are never followed (a payment POST sent again elsewhere is not a thing to do unasked) and
nothing is retried here: ``runner.provider.retry`` decides that, from the error's class.

What is read from the environment, once (``from_environment``): ``HTTPS_PROXY``,
``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` (either case, as curl reads them), and the
authorities a certificate is checked against (``authorities``).

An answer whose head is not one the call asked for (an interim 1xx given as the answer, a
redirect, a media type other than the one accepted, a content encoding not asked for) has
its connection closed before anything else can use it, and comes back with ``unexpected``
saying why and no body: what follows it on that connection could be the answer to this call
rather than to the next (``runner.provider.errors.error_from_answer`` makes it an
``UnexpectedAnswer``: in doubt). A body cut short closes its connection too, and so does a
whole body that proves not to be what the call asked for (``Request.read`` refuses it).

urllib3 gives a connection back to its pool as soon as a body is read whole, before anyone
could tell whether the body was the one asked for; the transport's pools (``_SettlingPool``)
keep such a connection aside until the transport has settled whether to keep it, so that no
other call takes it meanwhile, to have it closed under its feet or to send on a connection
not to be trusted. Nothing closes a connection another call is using. Whatever else goes
wrong below a call (an exception urllib3 does not expect) is a response lost: in doubt.

One deadline bounds a whole exchange, its head and its body (``timeout``'s second figure,
the job's ``provider.timeout``): urllib3's read timeout bounds each read of the socket, so an
answer that trickles in (a byte every few tenths of a second) would never end; the
transport's ``Deadlines`` shut the socket of a call still going at its deadline, and the call
ends as one timed out (in doubt: looked up). No answer is read past ``MAX_ANSWER`` bytes
(decoded), more than any answer the documents describe: a longer one, by its
Content-Length or as it comes, is refused unread (in doubt too) and its connection closed.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Any, Protocol, cast
from urllib.parse import unquote, urlsplit

import certifi
import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    DecodeError,
    NewConnectionError,
    ProxyError,
    ReadTimeoutError,
)
from urllib3.util import Retry, Timeout, make_headers
from urllib3.util.ssl_ import create_urllib3_context

from runner import __version__
from runner.errors import (
    ConnectionRefused,
    ProviderConnectionError,
    ProviderTimeout,
    ResponseLost,
    UntrustedCertificate,
)

USER_AGENT = f"runner/{__version__}"
_UNSAFE_TARGET = re.compile("[\x00-\x20\x7f]")
_UNSAFE_HEADER = re.compile("[\x00-\x08\x0a-\x1f\x7f]")
ASKED_ENCODINGS = ("gzip", "x-gzip", "deflate", "identity")
DEFAULT_HEADERS = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate"}
# Nothing retried, no redirect followed: what ``retries=False`` says, made once (urllib3
# makes one from it at every call).
NO_RETRIES = Retry(total=False, redirect=False)
# The longest answer read (decoded). The documents' largest answers are pages of a list (100
# transactions, payers or payment orders a page): tens of KB, never half a megabyte.
MAX_ANSWER = 512 * 1024
# How late a deadline may be enforced: the watch wakes at most this often, whatever the
# number of calls.
DEADLINE_GRAIN = 0.05


def as_is(content: bytes, headers: Mapping[str, str]) -> Any:
    """The body as it came (any bytes are what such a call asked for)."""
    return content


@dataclass(frozen=True)
class Request:
    """One call: ``target`` is the path (and query) under the base URL; ``endpoint`` ("POST
    /v1/...") and ``external_id`` name the call in its errors. ``read`` makes the answer's
    body (given its headers) into what the caller wants, and raises ValueError for a body
    that is not what the call asked for: the connection it came on is then closed."""

    method: str
    target: str
    headers: Mapping[str, str]
    body: bytes | None
    endpoint: str
    external_id: str | None = None
    read: Callable[[bytes, Mapping[str, str]], Any] = as_is


@dataclass(frozen=True)
class Reply:
    """What came back from one exchange, whatever its status: headers by any case of their
    names; ``body`` what ``Request.read`` made of ``content``; ``unexpected`` says why the
    answer is not one the call asked for (its body then left unread and empty here, or, for
    a body ``Request.read`` refused, "a body that cannot be read")."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes
    body: Any = None
    unexpected: str | None = None


class Transport(Protocol):
    """Sends one request to the provider and returns its whole answer; a failure to get one
    raises a ``ProviderConnectionError`` (``map_exceptions``)."""

    def handle_request(self, request: Request) -> Reply: ...

    def close(self) -> None: ...


class Urllib3Transport:
    """Calls to one provider (its base URL) over urllib3's pool, directly or through a
    proxy, with TLS verified against ``tls``."""

    def __init__(self, base_url: str, *, proxy: str | None = None,
                 tls: ssl.SSLContext | None = None,
                 timeout: tuple[float, float] = (5.0, 30.0), pool_size: int = 10) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        self.base_url = base_url.rstrip("/")
        self.proxy = proxy
        self._timeout = Timeout(connect=timeout[0], read=timeout[1])
        self._deadlines = Deadlines(timeout[1])  # for the whole exchange
        if tls is None and parts.scheme == "https":
            tls = authorities({})
        options: dict[str, Any] = {"maxsize": max(pool_size, 1), "block": False,
                                   "retries": False, "ssl_context": tls}
        manager: urllib3.PoolManager
        self._headers = dict(DEFAULT_HEADERS)
        if proxy is None:
            manager = urllib3.PoolManager(num_pools=2, **options)
            self._prefix = parts.path
        else:
            where = urlsplit(proxy)
            login = (make_headers(proxy_basic_auth=f"{unquote(where.username)}:"
                                  f"{unquote(where.password or '')}")
                     if where.username else {})
            bare = f"{where.scheme}://{where.hostname}" + (f":{where.port}" if where.port else "")
            manager = urllib3.ProxyManager(bare, num_pools=2, proxy_headers=login,
                                           proxy_ssl_context=tls if where.scheme == "https"
                                           else None, **options)
            # Forwarded (http://): the whole URL on the request line (the pool adds the
            # login to each request); tunnelled (https://): the login on the CONNECT only.
            self._prefix = self.base_url if parts.scheme == "http" else parts.path
        manager.pool_classes_by_scheme = {"http": _SettlingPool, "https": _SettlingHTTPSPool}
        self._manager = manager
        self._pool = self._settling_pool()

    @classmethod
    def from_environment(cls, base_url: str, *, timeout: tuple[float, float] = (5.0, 30.0),
                         pool_size: int = 10,
                         environ: Mapping[str, str] | None = None) -> Urllib3Transport:
        """The transport the environment asks for: its proxy (or none, for a host NO_PROXY
        names) and its certificate authorities, read once."""
        env = os.environ if environ is None else environ
        tls = authorities(env) if base_url.startswith("https:") else None
        return cls(base_url, proxy=proxy_for(base_url, env), tls=tls, timeout=timeout,
                   pool_size=pool_size)

    def handle_request(self, request: Request) -> Reply:
        headers = {**self._headers, **request.headers}
        if _UNSAFE_TARGET.search(request.target) or _UNSAFE_HEADER.search(
                "".join(chain.from_iterable(headers.items()))):
            # (http.client refuses them too, but with the header's value, a secret maybe, in
            # its message)
            raise ValueError("a control character or space in the request line or a header")
        pool = self._pool
        watch = self._deadlines.watch()
        pool.calls.watch = watch
        try:
            with map_exceptions(request.endpoint, request.external_id):
                return self._exchange(pool, request, headers, watch)
        except ProviderConnectionError:
            if watch.expired:
                raise ProviderTimeout(f"no whole answer within {self._deadlines.seconds:g}s",
                                      endpoint=request.endpoint,
                                      external_id=request.external_id) from None
            raise
        finally:
            pool.calls.watch = None
            if not watch.ended:  # (urlopen failed: _exchange did not end it)
                self._deadlines.done(watch)

    def _exchange(self, pool: _SettlingPool, request: Request, headers: dict[str, str],
                  watch: _Watch) -> Reply:
        response = pool.urlopen(
            request.method, self._prefix + request.target, body=request.body,
            headers=headers, redirect=False, assert_same_host=False, retries=NO_RETRIES,
            preload_content=False, release_conn=False, decode_content=True,
            timeout=self._timeout)
        connection = pool.hold(response)
        kept = False
        try:
            unexpected = _unexpected(response.status, response.headers, headers.get("Accept"))
            if unexpected is not None:
                return Reply(response.status, response.headers, b"", None, unexpected)
            try:
                content = _read_within(response, MAX_ANSWER)
            except DecodeError:  # gzip or deflate that does not decode: the body is lost
                return Reply(response.status, response.headers, b"", None,
                             f"a {response.headers.get('Content-Encoding')} body that "
                             f"does not decode")
            if content is None:
                return Reply(response.status, response.headers, b"", None,
                             f"an answer longer than {MAX_ANSWER:,} bytes, more than any "
                             f"the provider documents (not read)")
            try:
                body = request.read(content, response.headers)
            except ValueError:  # (UnicodeDecodeError is one)
                return Reply(response.status, response.headers, content, None,
                             "a body that cannot be read")
            kept = True
            return Reply(response.status, response.headers, content, body)
        finally:
            self._deadlines.done(watch)  # before the connection can serve another call
            pool.settle(response, connection, kept and not watch.expired)

    def close(self) -> None:
        """Close every idle connection (a call after this opens another)."""
        self._manager.clear()
        self._pool = self._settling_pool()

    def _settling_pool(self) -> _SettlingPool:
        # (the manager makes its pools of the classes it is given, typed as urllib3's own)
        return cast(_SettlingPool, self._manager.connection_from_url(self.base_url))


def _unexpected(status: int, headers: Mapping[str, str], accept: str | None) -> str | None:
    """Why an answer's head is not one the call asked for; None when it is."""
    if status < 200:
        return f"HTTP {status}, an interim answer given as the answer"
    if 300 <= status < 400:
        where = urlsplit(headers.get("Location") or "").hostname
        return f"HTTP {status}, a redirect{f' to {where}' if where else ''} (not followed)"
    encodings = [e.strip().lower() for e in headers.get("Content-Encoding", "").split(",")]
    if any(e and e not in ASKED_ENCODINGS for e in encodings):
        return f"a body encoded {headers.get('Content-Encoding')}, which was not asked for"
    media = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    wanted = _accepted(accept)
    if media and wanted and "*/*" not in wanted and media not in wanted and \
            not any(media.endswith("+" + w.rpartition("/")[2]) for w in wanted):
        return f"HTTP {status} {media}, not the {' or '.join(sorted(wanted))} asked for"
    return None


@lru_cache(maxsize=64)
def _accepted(accept: str | None) -> frozenset[str]:
    """The media types an Accept header names (a client's few, read once each)."""
    return frozenset(m.split(";")[0].strip().lower() for m in (accept or "").split(",")) - {""}


def _read_within(response: urllib3.BaseHTTPResponse, most: int) -> bytes | None:
    """The whole body (decoded), or None when it is longer than ``most`` bytes: by its
    Content-Length, unread, or once ``most`` bytes came and more follow."""
    length = response.headers.get("Content-Length", "")
    if length.isascii() and length.isdigit():
        if int(length) > most:
            return None
        if not response.headers.get("Content-Encoding"):
            return response.read()  # (its length said: the one read of the common answer)
    content = response.read(most + 1)  # (at most that: urllib3 reads to it, or to the end)
    return None if len(content) > most else content


class _Watch:
    """One exchange's deadline, and the connection it is on once the pool hands one out."""

    __slots__ = ("connection", "expired", "ended")

    def __init__(self) -> None:
        self.connection: Any = None
        self.expired = False
        self.ended = False


class Deadlines:
    """The deadlines of a transport's exchanges, each ``seconds`` after it starts, and one
    thread that ends those still going at theirs by shutting their socket: the read blocked
    on it returns at once, and the exchange fails as one timed out (``_Watch.expired``).
    One length for all, so the deadlines come in the order the exchanges start (a queue,
    its oldest first). The thread wakes at most every ``DEADLINE_GRAIN`` seconds and stops
    when no exchange is watched."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._due: deque[tuple[float, _Watch]] = deque()  # (deadline, watch), oldest first
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self) -> _Watch:
        """The deadline of an exchange starting now."""
        watch = _Watch()
        with self._lock:
            self._due.append((self._clock() + self.seconds, watch))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="deadlines",
                                                daemon=True)
                self._thread.start()
        return watch

    def done(self, watch: _Watch) -> None:
        """The exchange ended: its deadline no longer applies (its entry goes in time)."""
        with self._lock:  # (after this, the thread cannot shut its connection)
            watch.ended = True

    def _run(self) -> None:
        while True:
            with self._lock:
                now = self._clock()
                while self._due and (self._due[0][1].ended or self._due[0][0] <= now):
                    watch = self._due.popleft()[1]
                    if not watch.ended:
                        watch.expired = True
                        _shut(watch.connection)
                if not self._due:
                    self._thread = None
                    return
                wait = max(self._due[0][0] - now, DEADLINE_GRAIN)
            time.sleep(wait)


def _shut(connection: Any) -> None:
    """End whatever reads or writes the connection's socket (it is closed by its call)."""
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class _SettlingPool(urllib3.HTTPConnectionPool):
    """urllib3's pool, but a connection that an answer came on comes back to it only once
    the transport has settled whether the answer was one the call asked for (``hold``, then
    ``settle``). urllib3 gives the connection back as soon as the body is read whole,
    whatever ``release_conn`` says (as its documentation warns), and has no public hook to
    hold it: hence ``_put_conn``, the one way back into urllib3's pool, overridden here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unsettled: set[object] = set()  # connections
        self._settled = threading.Lock()
        self.calls = threading.local()  # .watch: the calling thread's exchange's deadline

    def _get_conn(self, timeout: float | None = None) -> Any:
        connection = super()._get_conn(timeout)
        watch = getattr(self.calls, "watch", None)
        if watch is not None:
            watch.connection = connection
        return connection

    def _put_conn(self, conn: Any) -> None:
        with self._settled:
            if conn in self._unsettled:
                return  # ``settle`` gives it back
        super()._put_conn(conn)

    def hold(self, response: urllib3.BaseHTTPResponse) -> Any:
        """Keep the answer's connection out of the pool until ``settle``; the connection."""
        connection = response.connection
        if connection is not None:  # (always: urlopen with release_conn=False leaves one)
            with self._settled:
                self._unsettled.add(connection)
        return connection

    def settle(self, response: urllib3.BaseHTTPResponse, connection: Any, kept: bool) -> None:
        """Give a held connection back to the pool: as it is if ``kept``, else closed (the
        pool opens another in its place)."""
        if connection is None:
            return
        if not kept:
            response.close()
            connection.close()
        response.release_conn()  # (held above if the body was read whole)
        with self._settled:
            self._unsettled.discard(connection)
        super()._put_conn(connection)


class _SettlingHTTPSPool(_SettlingPool, urllib3.HTTPSConnectionPool):
    pass


@contextlib.contextmanager
def map_exceptions(endpoint: str, external_id: str | None) -> Iterator[None]:
    """urllib3's, http.client's and the socket's errors as ``runner.errors`` says them:
    refused before sending, timed out, or lost after (the reason's type, never its text: it
    could echo a URL or a header). Any other exception raised below the call is taken for
    one lost after sending too: the request may have gone out, so the call is in doubt (and
    looked up), never failed."""
    try:
        yield
    except Exception as exc:
        raise no_answer(exc, endpoint, external_id) from None


def no_answer(exc: BaseException, endpoint: str, external_id: str | None
              ) -> ProviderConnectionError:
    """Why a call got no answer: not sent (no connection, through the proxy or not, or a
    certificate not trusted), no answer in time, or sent and then lost."""
    untrusted = _cause(exc, (ssl.SSLCertVerificationError,))
    if isinstance(untrusted, ssl.SSLCertVerificationError):
        return UntrustedCertificate(f"could not connect: the provider's TLS certificate is not "
                                    f"trusted ({untrusted.verify_message})",
                                    endpoint=endpoint, external_id=external_id)
    if isinstance(exc, ReadTimeoutError | TimeoutError):
        return ProviderTimeout("no answer in time", endpoint=endpoint, external_id=external_id)
    never_sent = isinstance(exc, ProxyError) or _cause(
        exc, (NewConnectionError, ConnectTimeoutError)) is not None
    cls = ConnectionRefused if never_sent else ResponseLost
    verb = "could not connect" if isinstance(exc, ConnectTimeoutError) and not isinstance(
        exc, NewConnectionError) else "connection failed"
    return cls(f"{verb}: {_reason(exc)}", endpoint=endpoint, external_id=external_id)


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
            cause.args[-1] if cause.args and isinstance(cause.args[-1], BaseException)
            else cause.__cause__ or cause.__context__)
    return None


def _reason(exc: BaseException) -> str:
    """The innermost cause's type: ConnectionRefusedError, RemoteDisconnected ..."""
    inner = exc
    while True:
        nested = inner.args[-1] if inner.args and isinstance(inner.args[-1],
                                                             BaseException) else None
        nested = nested or inner.__cause__
        if nested is None or nested is inner:
            return type(inner).__name__
        inner = nested


# ---------------------------------------------------------------- the environment
def proxy_for(base_url: str, environ: Mapping[str, str]) -> str | None:
    """The proxy the environment names for ``base_url`` (``HTTPS_PROXY`` for https://,
    ``HTTP_PROXY`` for http://, ``ALL_PROXY`` for either; the lower-case name first, as curl
    reads them), None when there is none or ``NO_PROXY`` names its host (a name, a domain
    with or without its leading dot, or *)."""
    proxies: dict[str, str] = {}
    for name, value in environ.items():  # upper case first, so that lower case wins
        if name.upper() == name and name.endswith("_PROXY") and value:
            proxies[name[:-6].lower()] = value
    for name, value in environ.items():
        if name.lower() == name and name.endswith("_proxy") and value:
            proxies[name[:-6]] = value
    parts = urlsplit(base_url)
    if _bypassed(parts.hostname or "", parts.port, proxies.get("no", "")):
        return None
    return proxies.get(parts.scheme) or proxies.get("all") or None


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` names the host: ``*``, the host, a domain above it (with or
    without its leading dot), or either with this port (``host:443``, ``[::1]:8443``)."""
    host = host.lower()
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if entry == "*":
            return True
        name, wanted = entry, ""
        if entry.startswith("[") or entry.count(":") == 1:  # a port is named
            before, _, after = entry.rpartition(":")
            if after.isdigit() and not after.endswith("]"):
                name, wanted = before, after
        if wanted and str(port) != wanted:
            continue
        name = name.strip("[]").lstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def authorities(environ: Mapping[str, str]) -> ssl.SSLContext:
    """A TLS context that verifies certificates, and their host names against their
    subjectAltName only, against: ``REQUESTS_CA_BUNDLE`` (or ``CURL_CA_BUNDLE``), a file or
    a folder, when set, as requests reads them; else ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``
    when either is set, as OpenSSL reads them; else the system's store, or certifi's
    bundle where the system has none (a slim container)."""
    context = create_urllib3_context()  # TLS 1.2 at least, CERT_REQUIRED
    context.hostname_checks_common_name = False
    context.check_hostname = True
    bundle = environ.get("REQUESTS_CA_BUNDLE") or environ.get("CURL_CA_BUNDLE")
    cert_file, cert_dir = environ.get("SSL_CERT_FILE"), environ.get("SSL_CERT_DIR")
    if bundle:
        if os.path.isdir(bundle):
            context.load_verify_locations(capath=bundle)
        else:
            context.load_verify_locations(cafile=bundle)
    elif cert_file or cert_dir:
        context.load_verify_locations(cafile=cert_file or None, capath=cert_dir or None)
    else:
        # (OpenSSL's own places: the ones it reads when SSL_CERT_FILE is not set.)
        paths = ssl.get_default_verify_paths()
        cafile = paths.openssl_cafile if os.path.isfile(paths.openssl_cafile) else None
        capath = paths.openssl_capath if _filled(paths.openssl_capath) else None
        if cafile or capath:
            context.load_verify_locations(cafile=cafile, capath=capath)
        else:
            context.load_verify_locations(cafile=certifi.where())
    return context


def _filled(folder: str) -> bool:
    if not os.path.isdir(folder):
        return False
    with os.scandir(folder) as entries:
        return any(True for _ in entries)
