"""The sandbox clock: real time plus an offset that the admin API can move forward.

Quotation expiry, timestamps and status changes read this clock, so tests advance it instead
of sleeping. It goes at most a thousand years ahead, so that every date it makes (plus the
longest duration a knob takes) is still one the calendar writes. The Date check of the
digest scheme reads real time: moving this clock must not lock clients out.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

MOST_AHEAD = 1000 * 365 * 86400.0


class SandboxClock:
    def __init__(self, source: Callable[[], float] = time.time) -> None:
        self._source = source
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._source() + self._offset

    def advance(self, seconds: float) -> float:
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError("the sandbox clock only moves forward")
        with self._lock:
            if self._offset + seconds > MOST_AHEAD:
                raise ValueError(f"the sandbox clock goes at most {MOST_AHEAD:g} seconds "
                                 f"(a thousand years) ahead of real time")
            self._offset += seconds
        return self.now()

    @property
    def offset(self) -> float:
        return self._offset


def iso(ts: float) -> str:
    """ISO 8601 date-time without zone designator, as the documents show timestamps."""
    return _iso(math.floor(ts))


@functools.lru_cache(maxsize=256)
def _iso(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
