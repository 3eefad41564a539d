"""When to call the provider again: one pure decision, and the loop that follows it.

``decide`` reads the error's retry rule (``retry``, declared on each class of
``runner.errors``): SAFE errors (refused connection, 503, 429) are retried with backoff, and
never sooner than the answer's ``Retry-After`` asked;
in-doubt errors (lost answer, timeout, 5xx) are retried as they are only for reads, and for
writes they call for a lookup by external_id first (exactly-once rule 3); everything else
stops. Sleep is injected, so tests never wait.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from runner.errors import ProviderError, Retry

T = TypeVar("T")
# The longest wait a Retry-After is followed to, when the policy's max_wait is shorter (the
# catalogue reads' half second): a provider that asks for more is asked again after this.
LONGEST_RETRY_AFTER = 60.0


class Decision(Enum):
    RETRY = "retry"  # send the same request again, after a wait
    LOOKUP = "lookup"  # look the resource up by external_id before anything else
    STOP = "stop"  # never again: the item fails (or the run stops)


def decide(error: BaseException, idempotent: bool) -> Decision:
    if not isinstance(error, ProviderError):
        return Decision.STOP
    if error.retry is Retry.SAFE:
        return Decision.RETRY
    if error.retry is Retry.LOOKUP:
        return Decision.RETRY if idempotent else Decision.LOOKUP
    return Decision.STOP


@dataclass
class RetryPolicy:
    attempts: int = 6
    max_wait: float = 60.0
    first_wait: float = 0.5
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def backoff(self, failed: int) -> float:
        """The wait after the ``failed``-th call: first_wait doubling with each call, capped
        at max_wait, plus up to first_wait of jitter; the sum capped at max_wait too."""
        exponential = min(self.first_wait * 2.0 ** min(failed - 1, 64), self.max_wait)
        return min(exponential + random.uniform(0, self.first_wait), self.max_wait)

    def wait(self, backoff: float, failed: BaseException) -> float:
        """The wait before the next call: the backoff, or what the provider's Retry-After
        asked when that is longer (an earlier call would only be refused again), up to
        ``LONGEST_RETRY_AFTER`` or ``max_wait``, whichever is longer."""
        asked = getattr(failed, "retry_after", None)
        if isinstance(failed, ProviderError) and isinstance(asked, float | int):
            return max(backoff, min(float(asked), max(self.max_wait, LONGEST_RETRY_AFTER)))
        return backoff

    def call(self, fn: Callable[[], T], idempotent: bool) -> T:
        """Call ``fn``; retry it while ``decide`` says RETRY, up to ``attempts`` calls.
        A plain loop: this is on every call's path, where a retry library's bookkeeping
        costs more than the decision itself."""
        calls = 1
        while True:
            try:
                return fn()
            except Exception as exc:
                if calls >= self.attempts or decide(exc, idempotent) is not Decision.RETRY:
                    raise
                self.sleep(self.wait(self.backoff(calls), exc))
                calls += 1
