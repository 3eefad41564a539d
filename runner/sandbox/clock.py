"""The sandbox clock: real time plus an offset that the admin API can move forward.

Quotation expiry, Date checks and status changes all read this clock, so tests advance it
instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime


class SandboxClock:
    def __init__(self, source: Callable[[], float] = time.time) -> None:
        self._source = source
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._source() + self._offset

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("the sandbox clock only moves forward")
        with self._lock:
            self._offset += seconds
        return self.now()

    @property
    def offset(self) -> float:
        return self._offset


def iso(ts: float) -> str:
    """ISO 8601 date-time without zone designator, as the documents show timestamps."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S")
