"""Accounting, faults and authentication, as one ASGI middleware around the provider API.

A provider call is counted, then waits its rule's latency, then is authenticated, then counted
against its key's rate limit (429 with Retry-After beyond it), then meets its fault
(core/faults.py decides which): one answered before any work (500, 503, 429) is worded
by the path's dialect (core/errors.py); a lost answer lets the work be done and committed and
drops the connection with no response; a slow one holds the answer for ``slow_seconds``.
The collection service (document 1) and the legacy Pay take Basic authentication only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runner.sandbox.core.auth import Authenticator, AuthFailure
from runner.sandbox.core.errors import Dialect, dialect_of
from runner.sandbox.core.faults import FaultState, group_of


@dataclass
class ProviderMiddleware:
    """Accounting, faults and authentication, in that order, for provider paths only."""

    app: ASGIApp
    faults: FaultState
    auth: Authenticator
    dialects: Sequence[Dialect]  # families of paths with words of their own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        group = group_of(method, path)
        if group is None:
            await self.app(scope, receive, send)
            return
        self.faults.record(method, path, group)
        try:
            await self._provider_call(scope, receive, send, path, group)
        finally:
            self.faults.done()

    async def _provider_call(self, scope: Scope, receive: Receive, send: Send, path: str,
                             group: str) -> None:
        latency, kind = self.faults.decide(group)
        if latency:
            await _pause(latency)
        dialect = dialect_of(self.dialects, path)
        content_type = next((v.decode("latin-1") for k, v in scope["headers"]
                             if k.lower() == b"content-type"), None)
        try:
            key = self.auth.check(scope["headers"], basic_only=dialect.basic_only)
        except AuthFailure as failure:
            await dialect.refused(content_type, failure)(scope, receive, send)
            return
        wait = self.faults.admit(group, key)
        if wait is not None:
            await dialect.throttled(content_type, wait)(scope, receive, send)
            return
        early = dialect.fault(content_type, kind) if kind else None
        if early is not None:
            await early(scope, receive, send)
        elif kind == "lost":
            await self.app(scope, receive, _discard)
            abort = scope.get("extensions", {}).get("sandbox.abort")
            if abort is None:
                raise ConnectionAbortedError("lost response")
            abort()
        elif kind == "slow":
            await self.app(scope, receive, self._held(send))
        else:
            await self.app(scope, receive, send)

    def _held(self, send: Send) -> Send:
        async def held(message: Message) -> None:
            if message["type"] == "http.response.start":
                await asyncio.sleep(self.faults.slow_seconds)
            await send(message)

        return held


async def _discard(message: Message) -> None:
    return None


async def _pause(seconds: float) -> None:
    """At least ``seconds``: asyncio may wake a timer up to its clock resolution early, and
    a call must never come back sooner than its configured latency."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(left)
