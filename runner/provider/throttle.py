"""A provider-wide rate limit: at most N requests per second across every worker.

A token bucket holding one second's worth of requests; each request takes a token, waiting
for one when none is left. Clock and sleep are injected, so tests do not wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Throttle:
    def __init__(self, per_second: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if per_second <= 0:
            raise ValueError("a rate limit must be positive")
        self.rate = per_second
        self.capacity = max(1.0, per_second)
        self.clock = clock
        self.sleep = sleep
        self._tokens = self.capacity
        self._last = clock()
        self._lock = threading.Lock()

    def __call__(self) -> None:
        """Take one token, waiting as long as the rate requires."""
        with self._lock:
            now = self.clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= 1
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait:
            self.sleep(wait)
