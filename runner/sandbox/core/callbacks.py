"""Callback deliveries: each status change POSTed to the item's callback_url.

The body is the full object as JSON, signed with the digest scheme (the sandbox's own key
and secret, as the provider signs with the partner's credentials). A non-2xx answer or a
connection failure is retried up to ``callback_attempts`` times in all, the first retry after
``callback_spacing`` seconds and each later one after twice the previous wait. One worker
thread delivers; a heap of due times keeps a slow receiver's retries from holding others.

A delivery may carry its own schedule instead (``delays``: the waits before each repeat) and
go unsigned: the collection service's bare pings (payment_orders/models.py) use both.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import requests
import simplejson

from runner.provider.auth import digest_headers
from runner.sandbox.core.config import SandboxConfig


@dataclass(order=True)
class Delivery:
    due: float
    n: int
    url: str = field(compare=False)
    body: bytes = field(compare=False)
    status: str = field(compare=False)
    attempt: int = field(default=1, compare=False)
    delays: tuple[float, ...] | None = field(default=None, compare=False)
    signed: bool = field(default=True, compare=False)


class CallbackQueue:
    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self._heap: list[Delivery] = []
        self._cond = threading.Condition()
        self._count = itertools.count()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._session = requests.Session()
        self.log: deque[dict[str, Any]] = deque(maxlen=1000)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sandbox-callbacks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._session.close()

    def enqueue(self, url: str, obj: dict[str, Any], *, status: str | None = None,
                delays: tuple[float, ...] | None = None, signed: bool = True) -> None:
        """Deliver ``obj`` to ``url`` now. ``status`` names it in the log (default: its
        own); ``delays``, when given, are the waits before each repeat instead of the
        configured doubling ones."""
        body = simplejson.dumps(obj, use_decimal=True).encode()
        shown = str(obj.get("status")) if status is None else status
        with self._cond:
            heapq.heappush(self._heap, Delivery(time.monotonic(), next(self._count), url, body,
                                                shown, delays=delays, signed=signed))
            self._cond.notify()

    def pending(self) -> int:
        with self._cond:
            return len(self._heap)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop and (not self._heap or self._heap[0].due > time.monotonic()):
                    wait = self._heap[0].due - time.monotonic() if self._heap else None
                    self._cond.wait(timeout=wait)
                if self._stop:
                    return
                delivery = heapq.heappop(self._heap)
            self._deliver(delivery)

    def _deliver(self, d: Delivery) -> None:
        c = self.config
        headers = {"Content-Type": "application/json"}
        if d.signed:
            headers.update(digest_headers(c.api_key, c.api_secret, c.header_brand))
        entry: dict[str, Any] = {"url": d.url, "status": d.status, "attempt": d.attempt}
        try:
            # A redirect is an answer that is not 2xx: retried, never followed (that would
            # re-send the signed body elsewhere, or turn the POST into a GET).
            answer = self._session.post(d.url, data=d.body, headers=headers,
                                        timeout=c.callback_timeout, allow_redirects=False)
            entry["http_status"] = answer.status_code
            ok = 200 <= answer.status_code < 300
        except requests.RequestException as exc:
            entry["error"] = type(exc).__name__
            ok = False
        entry["delivered"] = ok
        self.log.append(entry)
        if ok:
            return
        if d.delays is not None:
            if d.attempt > len(d.delays):
                return
            wait = d.delays[d.attempt - 1]
        elif d.attempt < c.callback_attempts:
            wait = c.callback_spacing * 2 ** (d.attempt - 1)
        else:
            return
        with self._cond:
            heapq.heappush(self._heap, Delivery(time.monotonic() + wait, next(self._count),
                                                d.url, d.body, d.status, d.attempt + 1,
                                                d.delays, d.signed))
            self._cond.notify()
