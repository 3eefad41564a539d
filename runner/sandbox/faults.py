"""Fault injection and request accounting, as one ASGI middleware around the provider API.

Each request falls in an endpoint group (``group_of``). A group's rule (or the ``*`` rule)
may add latency, answer 500 or 503 before any work is done, lose the answer (the work is
done and committed, then the connection is dropped with no response), or hold the answer
for ``slow_seconds`` (longer than a client's timeout). Counters (``lost_next`` ...) hit the
next calls deterministically; rates draw from a seeded random generator.

The collection service (document 1) and the legacy Pay take Basic authentication only and
answer in their own terms: 1000401, 1000500 and 2001501 on document 1's paths; ReturnCodes
9401, 9403, 9500 and 5050, in the request's JSON or XML, on the legacy Pay's.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter, deque
from dataclasses import asdict, fields, replace
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runner.sandbox import legacy
from runner.sandbox.auth import Authenticator, AuthFailure
from runner.sandbox.config import FaultRule
from runner.sandbox.errors import error_body, is_collection

GROUPS = ("ping", "discovery", "balances", "parties", "quotations", "create", "confirm",
          "lookups", "payment_orders", "operations", "accounts", "onboarding", "legacy")
COLLECTION = ("/v1/payment/", "/v1/account/", "/v1/onboarding/")


def group_of(method: str, path: str) -> str | None:
    """The endpoint group of a provider call; None for paths outside the provider API."""
    if path in ("/ping", "/v1/payment/ping"):
        return "ping"
    if path.startswith("/Rest/"):
        return "legacy"
    if not path.startswith("/v1/"):
        return None
    if path.startswith(COLLECTION):
        return _collection_group(method, path)
    if method == "GET":
        if path.endswith("/balances"):
            return "balances"
        if any(p in path for p in ("/quotations/", "/transactions/", "/payments/")):
            return "lookups"
        return "discovery"
    if path.endswith("/confirm"):
        return "confirm"
    if path.endswith(("/transactions", "/payments")):
        return "create"
    if path.endswith("/quotations"):
        return "quotations"
    if "-party-" in path:
        return "parties"
    return "create"


def _collection_group(method: str, path: str) -> str:
    if method == "GET":
        if "/balances" in path or path.endswith("/entries"):
            return "balances"
        # Reading an account's set-up (its payout bank accounts) is what validation does,
        # like reading a payer: not a lookup of something a client asked for.
        return "discovery" if path.startswith("/v1/onboarding/accounts/") else "lookups"
    if path.endswith("/quotations"):
        return "quotations"
    if path.endswith(("/charges", "/refunds", "/cancellations")):
        return "operations"
    if path.endswith("/payment-orders"):
        return "payment_orders"
    if path.startswith("/v1/onboarding/"):
        return "onboarding"
    return "accounts"


def _setting(name: str, value: Any) -> float | int:
    """A fault setting as the rule holds it: counters int, the rest float (JSON bodies carry
    Decimal, which asyncio.sleep refuses); anything else is refused."""
    counter = name.endswith("_next")
    try:
        if isinstance(value, bool | str) or value is None or value < 0:
            raise TypeError
        number = int(value) if counter else float(value)
        if counter and number != value:
            raise TypeError
    except (TypeError, ValueError, ArithmeticError):
        kind = "integer" if counter else "number"
        raise ValueError(f"{name} must be a non-negative {kind}") from None
    return number


class FaultState:
    def __init__(self, rules: dict[str, FaultRule], slow_seconds: float,
                 seed: int | None) -> None:
        # Copies: the counters count down here, not in the caller's (reusable) config.
        self.rules = {group: replace(rule) for group, rule in rules.items()}
        self.slow_seconds = slow_seconds
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.recent: deque[dict[str, Any]] = deque(maxlen=2000)
        self.in_flight = 0
        self.peak_in_flight = 0  # the most provider calls being answered at once

    def set_rules(self, changes: dict[str, dict[str, Any]]) -> None:
        """Change the rules of several groups at once: all of them, or (on a bad value) none."""
        known = {f.name for f in fields(FaultRule)}
        checked: dict[str, dict[str, float | int]] = {}
        for group, settings in changes.items():
            unknown = set(settings) - known
            if unknown:
                raise ValueError(f"unknown fault settings: {', '.join(sorted(unknown))}")
            if group != "*" and group not in GROUPS:
                raise ValueError(
                    f"unknown endpoint group {group!r} (groups: *, {', '.join(GROUPS)})")
            checked[group] = {name: _setting(name, value) for name, value in settings.items()}
        with self._lock:
            for group, settings in checked.items():
                base = asdict(self.rules.get(group, FaultRule()))
                self.rules[group] = FaultRule(**{**base, **settings})

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def describe(self) -> dict[str, Any]:
        return {"slow_seconds": self.slow_seconds,
                "rules": {g: asdict(r) for g, r in self.rules.items()}}

    def record(self, method: str, path: str, group: str) -> None:
        """A provider call arrives (``done`` when it is answered)."""
        with self._lock:
            self.counts[method] += 1
            self.counts[f"{method} {group}"] += 1
            self.recent.append({"method": method, "path": path, "group": group})
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def forget(self) -> None:
        """Counts, latest calls and peak start again."""
        with self._lock:
            self.counts.clear()
            self.recent.clear()
            self.peak_in_flight = self.in_flight

    def decide(self, group: str) -> tuple[float, str | None]:
        """(latency in seconds, action) for one call."""
        with self._lock:
            rule = self.rules.get(group) or self.rules.get("*")
            if rule is None:
                return 0.0, None
            for action in ("error", "unavailable", "lost", "slow"):
                left = getattr(rule, f"{action}_next")
                if left > 0:
                    setattr(rule, f"{action}_next", left - 1)
                    return rule.latency_ms / 1000, action
            for action in ("error", "unavailable", "lost", "slow"):
                rate = getattr(rule, f"{action}_rate")
                if rate and self._random.random() < rate:
                    return rule.latency_ms / 1000, action
            return rule.latency_ms / 1000, None


async def _answer(send: Send, status: int, body: bytes,
                  headers: list[tuple[bytes, bytes]] | None = None,
                  content_type: bytes = b"application/json") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class ProviderMiddleware:
    """Accounting, faults and authentication, in that order, for provider paths only."""

    def __init__(self, app: ASGIApp, faults: FaultState, auth: Authenticator) -> None:
        self.app = app
        self.faults = faults
        self.auth = auth

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
        latency, action = self.faults.decide(group)
        if latency:
            await asyncio.sleep(latency)
        # The collection service and the legacy Pay: Basic only, and answers of their own.
        legacy_path = group == "legacy"
        if legacy_path or is_collection(path):
            try:
                self.auth.check(scope["headers"], basic_only=True)
            except AuthFailure as failure:
                if legacy_path:
                    await _answer(send, *legacy.fault_answer(scope["headers"], failure))
                else:
                    await _answer(send, 401, error_body("1000401", f"Unauthorized: {failure}"))
                return
            if action in ("error", "unavailable"):
                status, body, extra, kind = (
                    legacy.fault_answer(scope["headers"], action) if legacy_path
                    else _collection_fault(action))
                await _answer(send, status, body, extra, kind)
                return
        else:
            try:
                self.auth.check(scope["headers"])
            except AuthFailure as failure:
                await _answer(send, 401, error_body("1000401", f"Unauthorized: {failure}"))
                return
        if action == "error":
            await _answer(send, 500, error_body("1009001", "Unexpected error, contact support"))
        elif action == "unavailable":
            await _answer(send, 503, error_body("1009001", "Service temporarily unavailable, "
                                                           "retry later"),
                          [(b"retry-after", b"1")])
        elif action == "lost":
            await self.app(scope, receive, _discard)
            abort = scope.get("extensions", {}).get("sandbox.abort")
            if abort is None:
                raise ConnectionAbortedError("lost response")
            abort()
        elif action == "slow":
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


def _collection_fault(action: str) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
    """An injected error or unavailability, in document 1's codes."""
    if action == "error":
        return 500, error_body("1000500", "Technical error"), [], b"application/json"
    return (503, error_body("2001501", "Remote payment server temporarily unavailable, retry "
                                       "later"), [(b"retry-after", b"1")], b"application/json")
