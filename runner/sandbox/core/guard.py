"""What every request meets first and every answer last, as one ASGI middleware outside the
provider's (core/middleware.py):

- ``path/`` is served exactly as ``path``, on every route, without a redirect (real clients
  add the slash, and a redirect would make them send their signed headers twice);
- a body larger than ``max_body_bytes`` is answered 413 in the path's dialect, before any
  route reads it (core/bounds.py holds the other limits);
- an unexpected error is answered in the path's dialect (500) and goes no further: the
  server would otherwise close the kept-alive connection after the answer, and reset the
  next request on it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runner.sandbox.core.errors import Dialect, dialect_of

LOG = logging.getLogger("runner.sandbox")
BODYLESS = ("GET", "HEAD", "OPTIONS")


@dataclass
class Guard:
    app: ASGIApp
    dialects: Sequence[Dialect]
    max_body_bytes: int

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope = _without_trailing_slash(scope)
        answered = _Answer(send)
        try:
            length = _header(scope, b"content-length")
            if scope["method"] not in BODYLESS or length is not None \
                    or _header(scope, b"transfer-encoding") is not None:
                body = await self._body(receive, length)
                if body is None:
                    dialect, content_type = self._words(scope)
                    refused = dialect.too_large(content_type, self.max_body_bytes)
                    await refused(scope, receive, answered)
                    return
                receive = _replay(body, receive)
            await self.app(scope, receive, answered)
        except Exception:
            LOG.exception("unexpected error answering %s %s", scope["method"], scope["path"])
            if not answered.started:
                dialect, content_type = self._words(scope)
                await dialect.unexpected(content_type)(scope, receive, answered)
            # Started and not finished: nothing sane can be added; the server closes the
            # connection, as it must after half an answer.

    def _words(self, scope: Scope) -> tuple[Dialect, str | None]:
        """The dialect of the request's path, and its content type."""
        content_type = _header(scope, b"content-type")
        return (dialect_of(self.dialects, scope["path"]),
                None if content_type is None else content_type.decode("latin-1"))

    async def _body(self, receive: Receive, declared: bytes | None) -> bytes | None:
        """The whole body, or None when it is larger than allowed (read no further)."""
        limit = self.max_body_bytes
        if declared is not None and declared.isdigit() and (
                len(declared) > len(str(limit)) or int(declared) > limit):
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away: the route sees an empty body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


class _Answer:
    """``send``, noting whether the answer has started."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


def _header(scope: Scope, name: bytes) -> bytes | None:
    """A request header's value (the server gives names in lower case)."""
    return next((v for k, v in scope["headers"] if k == name), None)


def _without_trailing_slash(scope: Scope) -> Scope:
    path: str = scope["path"]
    raw: bytes = scope.get("raw_path") or path.encode()
    # Only a slash written as one: an escaped one (%2F) belongs to the last segment.
    if len(path) > 1 and path.endswith("/") and raw.endswith(b"/"):
        return {**scope, "path": path.rstrip("/") or "/", "raw_path": raw.rstrip(b"/") or b"/"}
    return scope


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the body read ahead, then what the connection says next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
