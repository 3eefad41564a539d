"""The provider clients' direct HTTP/1.1 exchanges: one kept-alive connection per thread,
the request written in one piece, the answer parsed by httptools (the llhttp parser the
sandbox's server already uses).

``runner.provider.http`` sends through this whenever the base URL is reached directly (no
proxy, no client certificate); it keeps requests' adapter and its urllib3 pool for the rest.
The reason is CPU: at thousands of calls, http.client's parsing of every answer's headers
(with the ``email`` package), urllib3's pool and response objects cost more than everything
else a call does on the client's side. TLS is always verified (the system's or the
configured authorities, with host names checked).

A call without a whole answer raises what is known of it (``runner.errors``):
``ConnectionRefused`` when nothing was sent (no connection, or a certificate not trusted),
``ProviderTimeout`` when no answer came in time, ``ResponseLost`` when the connection failed
after sending.
"""

from __future__ import annotations

import os
import re
import select
import socket
import ssl
import weakref
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import certifi
import httptools

from runner.errors import (
    ConnectionRefused,
    ProviderConnectionError,
    ProviderTimeout,
    ResponseLost,
    UntrustedCertificate,
)

Failure = Literal["refused", "untrusted", "timeout", "lost"]
_CHUNK = 65536
_UNSAFE_TARGET = re.compile("[\x00-\x20\x7f]")


class Headers(dict[str, str]):
    """An answer's headers by their lower-case names; ``get`` takes any case. A repeated
    header's values are joined with commas."""

    def get(self, name: str, default: Any = None) -> Any:
        return dict.get(self, name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return dict.__getitem__(self, name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and dict.__contains__(self, name.lower())


class _Answer:
    """The httptools callbacks of one answer: status line, headers and body."""

    __slots__ = ("headers", "body", "headed", "complete")

    def __init__(self) -> None:
        self.headers = Headers()
        self.body: list[bytes] = []
        self.headed = self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        seen = dict.get(self.headers, key)
        dict.__setitem__(self.headers, key, text if seen is None else f"{seen}, {text}")

    def on_headers_complete(self) -> None:
        self.headed = True

    def until_closed(self) -> bool:
        """Whether the body is what comes until the connection closes (no length given)."""
        return self.headed and "content-length" not in self.headers and \
            "transfer-encoding" not in self.headers

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class Wire:
    """Direct exchanges with one origin (scheme, host, port) over kept-alive connections:
    each exchange takes an idle one (or opens one) and gives it back once answered, so there
    are as many as calls at once."""

    def __init__(self, base_url: str, connect_timeout: float, read_timeout: float,
                 tls: ssl.SSLContext | None) -> None:
        parts = urlsplit(base_url)
        self.tls = tls if parts.scheme == "https" else None
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self._head = f"\r\nHost: {parts.netloc.rpartition('@')[2]}\r\n"
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        # list.pop and list.append are atomic: no lock on the way of each call.
        self._idle: list[socket.socket] = []
        self._open: set[socket.socket] = set()
        weakref.finalize(self, _close_all, self._open)

    def exchange(self, method: str, target: str, body: bytes | None,
                 headers: Mapping[str, str], endpoint: str, external_id: str | None
                 ) -> tuple[int, Headers, bytes]:
        """Send one request (``target``: path and query under the base URL's path) and read
        its whole answer: status, headers, body. ``endpoint`` and ``external_id`` name the
        call in its errors."""
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        if _UNSAFE_TARGET.search(target) or lines.count("\n") != len(headers) or \
                lines.count("\r") != len(headers):  # as http.client refuses them
            raise ValueError("a control character or space in the request line or a header")
        length = f"Content-Length: {len(body)}\r\n" if body is not None else ""
        request = (f"{method} {self.prefix}{target} HTTP/1.1{self._head}{lines}{length}"
                   f"Accept-Encoding: identity\r\n\r\n").encode("latin-1")
        sock = self._connection(endpoint, external_id)
        try:
            sock.sendall(request + body if body else request)
            status, headers_, content, keep = self._read(sock)
        except BaseException as exc:
            self._discard(sock)
            if isinstance(exc, TimeoutError):
                raise _no_answer("timeout", exc, endpoint, external_id) from None
            if isinstance(exc, OSError | httptools.HttpParserError):
                raise _no_answer("lost", exc, endpoint, external_id) from None
            raise
        if keep:
            self._idle.append(sock)
        else:
            self._discard(sock)
        return status, headers_, content

    @staticmethod
    def _read(sock: socket.socket) -> tuple[int, Headers, bytes, bool]:
        """The whole answer, and whether the connection stays open after it."""
        answer = _Answer()
        parser = httptools.HttpResponseParser(answer)
        while not answer.complete:
            data = sock.recv(_CHUNK)
            if not data:
                if answer.until_closed():
                    return parser.get_status_code(), answer.headers, b"".join(answer.body), False
                raise ConnectionResetError("closed before a whole answer")
            parser.feed_data(data)
        closing = answer.headers.get("Connection", "").lower()
        keep = closing != "close" and (parser.get_http_version() == "1.1"
                                       or closing == "keep-alive")
        return parser.get_status_code(), answer.headers, b"".join(answer.body), keep

    def _connection(self, endpoint: str, external_id: str | None) -> socket.socket:
        """An idle connection still open, or a new one (nothing sent yet on failure)."""
        while self._idle:
            try:
                sock = self._idle.pop()
            except IndexError:  # taken by another thread meanwhile
                break
            if not _dropped(sock):
                return sock
            self._discard(sock)
        sock = self._connect(endpoint, external_id)
        self._open.add(sock)
        return sock

    def _connect(self, endpoint: str, external_id: str | None) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), self.connect_timeout)
        except OSError as exc:
            raise _no_answer("refused", exc, endpoint, external_id) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise _no_answer("untrusted", exc, endpoint, external_id) from None
        except OSError as exc:
            sock.close()
            raise _no_answer("refused", exc, endpoint, external_id) from None
        sock.settimeout(self.read_timeout)
        return sock

    def _discard(self, sock: socket.socket) -> None:
        self._open.discard(sock)
        sock.close()

    def close(self) -> None:
        """Close every connection (an exchange after this opens another)."""
        self._idle.clear()
        _close_all(self._open)


def _close_all(sockets: set[socket.socket]) -> None:
    for sock in list(sockets):
        sockets.discard(sock)
        sock.close()


def _no_answer(kind: Failure, reason: BaseException, endpoint: str, external_id: str | None
               ) -> ProviderConnectionError:
    """Why an exchange got no answer, as ``runner.errors`` says it (the reason's type, never
    its text: it could echo a URL or a header)."""
    if kind == "timeout":
        return ProviderTimeout("no answer in time", endpoint=endpoint, external_id=external_id)
    if kind == "untrusted":
        detail = getattr(reason, "verify_message", type(reason).__name__)
        return UntrustedCertificate(f"could not connect: the provider's TLS certificate is not "
                                 f"trusted ({detail})", endpoint=endpoint,
                                 external_id=external_id)
    cls = ConnectionRefused if kind == "refused" else ResponseLost
    return cls(f"connection failed: {type(reason).__name__}", endpoint=endpoint,
               external_id=external_id)


def _dropped(sock: socket.socket) -> bool:
    """Whether a kept-alive connection was closed by the other side (or has stray bytes):
    readable before anything was asked."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def tls_context(verify: bool | str) -> ssl.SSLContext:
    """Certificates checked against the given authorities (a file or a folder), or against
    certifi's bundle as requests does by default; host names checked."""
    where = certifi.where() if verify is True else str(verify)
    if os.path.isdir(where):
        return ssl.create_default_context(capath=where)
    return ssl.create_default_context(cafile=where)
