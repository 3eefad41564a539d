"""Real HTTP servers on loopback for the transport's tests, each on a free port in threads of
its own and stopped by its test (``with``): ``Scripted`` answers each request with the bytes
a test scripts (sizes, chunks, packets, closes); ``Proxy`` is a forward proxy (CONNECT
tunnels and absolute-URL forwarding); ``Rewriter`` stands in front of the sandbox as a
reverse proxy and, for the calls a rule picks, replaces the sandbox's answer (given after
the work was done) with odd bytes, or answers without forwarding.

Every server records what it saw, with the number of the client connection it came on (a
call after a dropped connection comes on a new one).
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import urlsplit


@dataclass
class Seen:
    """A request as a server saw it."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    connection: int


def read_head(rfile: BinaryIO) -> list[bytes] | None:
    """The lines of a message's head (start line first); None at a clean end of stream."""
    lines: list[bytes] = []
    while True:
        line = rfile.readline(65537)
        if not line:
            if lines:
                raise ConnectionError("the head was cut short")
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.rstrip(b"\r\n"))


def headers_of(lines: list[bytes]) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        found[name.strip().lower()] = value.strip()
    return found


def read_body(rfile: BinaryIO, headers: dict[str, str]) -> bytes:
    """A message's body as its head frames it (Content-Length; chunked; none)."""
    if "chunked" in headers.get("transfer-encoding", ""):
        body = b""
        while (size := int(rfile.readline().split(b";")[0], 16)) > 0:
            body += rfile.read(size)
            rfile.readline()
        rfile.readline()
        return body
    return rfile.read(int(headers.get("content-length") or 0))


def read_request(rfile: BinaryIO, connection: int) -> Seen | None:
    head = read_head(rfile)
    if head is None:
        return None
    method, target, _ = head[0].decode("latin-1").split(" ", 2)
    headers = headers_of(head)
    return Seen(method, target, headers, read_body(rfile, headers), connection)


def answer(status: str, body: bytes = b"", content_type: str | None = "application/json",
           *more: str) -> bytes:
    """An answer's bytes: ``status`` ("200 OK"), the body sized by Content-Length."""
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *more]
    if content_type:
        lines.append(f"Content-Type: {content_type}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Server:
    """A listening socket on loopback, a thread per client connection; ``serve`` handles
    one connection. Stopped on leaving ``with``: every socket closed, every thread joined."""

    def __init__(self, tls: Any = None) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.tls = tls
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.connections = 0
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._accepting = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> Server:
        self._accepting.start()
        return self

    def __exit__(self, *exc: object) -> None:
        _close(self._listener)  # (shut down: a bare close leaves accept() waiting)
        with self._lock:
            for sock in list(self._sockets):
                _close(sock)
        self._accepting.join(10)
        for thread in list(self._threads):
            thread.join(10)

    def track(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.add(sock)
        return sock

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                number = self.connections
            thread = threading.Thread(target=self._handle, args=(sock, number), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _handle(self, sock: socket.socket, number: int) -> None:
        self.track(sock)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = self.track(self.tls.wrap_socket(sock, server_side=True))
            self.serve(sock, number)
        except (OSError, ValueError):
            pass  # the client went away, or the test ended: nothing to report
        finally:
            _close(sock)

    def serve(self, sock: socket.socket, number: int) -> None:
        raise NotImplementedError


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


@dataclass
class Script:
    """What to write for one request: byte pieces, each sent on its own (``split``: with a
    pause between them, so that they come as packets apart), then close the connection or
    not."""

    pieces: list[bytes]
    close: bool = False


class Scripted(Server):
    """Answers each request with ``script(seen)``; records the requests in ``seen``."""

    def __init__(self, script: Callable[[Seen], Script], tls: Any = None) -> None:
        super().__init__(tls)
        self.script = script
        self.seen: list[Seen] = []

    def serve(self, sock: socket.socket, number: int) -> None:
        rfile = sock.makefile("rb")
        while (request := read_request(rfile, number)) is not None:
            self.seen.append(request)
            planned = self.script(request)
            for i, piece in enumerate(planned.pieces):
                if i:
                    threading.Event().wait(0.005)
                sock.sendall(piece)
            if planned.close:
                return


class Proxy(Server):
    """A forward proxy: ``CONNECT host:port`` tunnels (what an https:// provider goes
    through), an absolute URL forwarded (http://). Records each request line, and the
    Proxy-Authorization it was given, in ``seen``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Seen] = []

    def serve(self, sock: socket.socket, number: int) -> None:
        rfile = sock.makefile("rb")
        while (request := read_request(rfile, number)) is not None:
            self.seen.append(request)
            if request.method == "CONNECT":
                host, _, port = request.target.rpartition(":")
                upstream = self.track(socket.create_connection((host, int(port)), timeout=60))
                sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                _pipe(sock, upstream, rfile)
                return
            parts = urlsplit(request.target)
            upstream = self.track(socket.create_connection((parts.hostname, parts.port or 80),
                                                           timeout=60))
            try:
                kept = {k: v for k, v in request.headers.items()
                        if not k.startswith("proxy-") and k != "connection"}
                head = [f"{request.method} {parts.path}{'?' + parts.query if parts.query else ''}"
                        f" HTTP/1.1", *(f"{k}: {v}" for k, v in kept.items())]
                upstream.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
                                 + request.body)
                sock.sendall(_whole_answer(upstream.makefile("rb")))
            finally:
                _close(upstream)


def _whole_answer(rfile: BinaryIO) -> bytes:
    head = read_head(rfile)
    if head is None:
        raise ConnectionError("no answer")
    return b"\r\n".join(head) + b"\r\n\r\n" + read_body(rfile, headers_of(head))


def _pipe(client: socket.socket, upstream: socket.socket, rfile: BinaryIO) -> None:
    """Bytes both ways until either side closes (the client sends nothing past its CONNECT
    before the answer, so its reader holds nothing yet)."""
    thread = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
    thread.start()
    _copy(client, upstream)
    thread.join(10)


def _copy(source: socket.socket, sink: socket.socket) -> None:
    """What ``source`` sends, to ``sink``, until ``source`` ends; then ``sink`` is closed."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    _close(sink)


@dataclass
class Rule:
    """Which calls to answer oddly: the ``count`` next ones whose "METHOD path" matches
    ``call``. ``odd`` makes the bytes written instead of the sandbox's answer (given that
    answer, whole), or the pieces written one after the other (an iterator: it may pause
    between them; the writing stops when the client hangs up, ``cut``, after ``sent``
    bytes); ``forward=False`` answers without asking the sandbox (nothing done); ``close``
    closes the client's connection after."""

    call: str
    odd: Callable[[bytes, bytes], bytes | Iterable[bytes]]
    count: int = 1
    forward: bool = True
    close: bool = False
    hits: int = 0
    sent: int = 0
    cut: bool = False


@dataclass
class Call:
    method: str
    path: str
    connection: int
    rewritten: bool


class Rewriter(Server):
    """A reverse proxy in front of ``upstream`` (the sandbox's URL): one upstream connection
    per client connection; calls a ``Rule`` picks are answered oddly. ``calls`` lists every
    call in order. With ``tls`` (a server context) it is reached over TLS."""

    def __init__(self, upstream: str, rules: list[Rule] | None = None, tls: Any = None
                 ) -> None:
        super().__init__(tls)
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.rules = rules or []
        self.calls: list[Call] = []

    def _rule(self, request: Seen) -> Rule | None:
        with self._lock:
            for rule in self.rules:
                if rule.hits < rule.count and re.fullmatch(rule.call, f"{request.method} "
                                                                      f"{request.target}"):
                    rule.hits += 1
                    return rule
        return None

    def serve(self, sock: socket.socket, number: int) -> None:
        rfile = sock.makefile("rb")
        upstream = self.track(socket.create_connection(self.upstream, timeout=60))
        upstream_rfile = upstream.makefile("rb")
        while (request := read_request(rfile, number)) is not None:
            rule = self._rule(request)
            self.calls.append(Call(request.method, request.target, number, rule is not None))
            if rule is None or rule.forward:
                head = [f"{request.method} {request.target} HTTP/1.1",
                        *(f"{k}: {v}" for k, v in request.headers.items())]
                upstream.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
                                 + request.body)
                real = _whole_answer(upstream_rfile)
            else:
                real = b""
            if rule is None:
                sock.sendall(real)
                continue
            head, _, body = real.partition(b"\r\n\r\n")
            made = rule.odd(head, body)
            try:
                for piece in [made] if isinstance(made, bytes) else made:
                    sock.sendall(piece)
                    rule.sent += len(piece)
            except OSError:  # the client hung up
                rule.cut = True
                return
            if rule.close:
                return


@dataclass
class Odd:
    """An odd answer: its name, its bytes made from the sandbox's head and body, whether
    the call settles from it alone (else it is in doubt, and looked up), and whether the
    connection is closed after it."""

    name: str
    make: Callable[[bytes, bytes], bytes]
    settles: bool
    close: bool = False


def odd_answers() -> Iterator[Odd]:
    """Each odd answer a provider (or what stands before it) may give."""
    import gzip
    import zlib

    def html(head: bytes, body: bytes) -> bytes:
        return answer("200 OK", b"<html><body>Please log in</body></html>", "text/html")

    def gzip_asked(head: bytes, body: bytes) -> bytes:
        packed = gzip.compress(body)
        return answer("200 OK", packed, "application/json", "Content-Encoding: gzip")

    def deflate_asked(head: bytes, body: bytes) -> bytes:
        return answer("200 OK", zlib.compress(body), "application/json",
                      "Content-Encoding: deflate")

    def gzip_broken(head: bytes, body: bytes) -> bytes:
        packed = gzip.compress(body)
        return answer("200 OK", packed[:10] + b"\xff" * 8 + packed[18:], "application/json",
                      "Content-Encoding: gzip")

    def gzip_unlabelled(head: bytes, body: bytes) -> bytes:
        return answer("200 OK", gzip.compress(body), "application/json")

    def encoding_not_asked(head: bytes, body: bytes) -> bytes:
        return answer("200 OK", b"\x1b\x00\xf8\xa5\x86\x80", "application/json",
                      "Content-Encoding: br")

    def redirect(head: bytes, body: bytes) -> bytes:
        return answer("307 Temporary Redirect", b"", None,
                      "Location: http://elsewhere.example/v1/moved")

    def continue_first(head: bytes, body: bytes) -> bytes:
        return b"HTTP/1.1 100 Continue\r\n\r\n" + head + b"\r\n\r\n" + body

    def interim_as_answer(head: bytes, body: bytes) -> bytes:
        # http.client reads a 1xx other than 100 as the answer: what follows is stale.
        return b"HTTP/1.1 102 Processing\r\n\r\n" + head + b"\r\n\r\n" + body

    def truncated(head: bytes, body: bytes) -> bytes:
        return head + b"\r\n\r\n" + body[: len(body) // 2]

    yield Odd("html", html, False)
    yield Odd("gzip", gzip_asked, True)
    yield Odd("deflate", deflate_asked, True)
    yield Odd("gzip that does not decode", gzip_broken, False)
    yield Odd("gzip without Content-Encoding", gzip_unlabelled, False)
    yield Odd("an encoding not asked for", encoding_not_asked, False)
    yield Odd("a redirect", redirect, False)
    yield Odd("100 Continue first", continue_first, True)
    yield Odd("an interim 1xx as the answer", interim_as_answer, False)
    yield Odd("a truncated body", truncated, False, close=True)

