"""When to call the provider again: one pure decision, plugged into tenacity once.

``decide`` reads the error's retry rule (``retry``, declared on each class of
``runner.errors``): SAFE errors (refused connection, 503, 429) are retried with backoff, and
never sooner than the answer's ``Retry-After`` asked;
in-doubt errors (lost answer, timeout, 5xx) are retried as they are only for reads, and for
writes they call for a lookup by external_id first (exactly-once rule 3); everything else
stops. Sleep is injected, so tests never wait.

A call is made directly first, and tenacity takes over only once it failed and ``decide``
says RETRY: the success path (nearly every call) costs no retry bookkeeping.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

import tenacity

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

    def wait(self, backoff: float, failed: BaseException | None) -> float:
        """The wait before the next call: the backoff, or what the provider's Retry-After
        asked when that is longer (an earlier call would only be refused again), up to
        ``LONGEST_RETRY_AFTER`` or ``max_wait``, whichever is longer."""
        asked = getattr(failed, "retry_after", None)
        if isinstance(failed, ProviderError) and isinstance(asked, float | int):
            return max(backoff, min(float(asked), max(self.max_wait, LONGEST_RETRY_AFTER)))
        return backoff

    def __post_init__(self) -> None:
        # Built once: tenacity keeps each call's state per thread, so workers share these.
        self._retrying = {idempotent: self._build(idempotent) for idempotent in (True, False)}

    def _build(self, idempotent: bool) -> tenacity.Retrying:
        """The calls after a first one that failed and may be retried: attempt N of tenacity
        is the (N+1)-th call."""
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(
                lambda e: decide(e, idempotent) is Decision.RETRY),
            stop=tenacity.stop_after_attempt(max(self.attempts - 1, 1)),
            wait=lambda state: self.wait(self.backoff(state.attempt_number + 1),
                                         _failure(state)),
            sleep=lambda seconds: self.sleep(seconds),
            reraise=True,
        )

    def call(self, fn: Callable[[], T], idempotent: bool) -> T:
        """Call ``fn``; retry it while ``decide`` says RETRY, up to ``attempts`` calls."""
        try:
            return fn()
        except Exception as exc:
            if self.attempts <= 1 or decide(exc, idempotent) is not Decision.RETRY:
                raise
            self.sleep(self.wait(self.backoff(1), exc))
        result: Any = self._retrying[idempotent](fn)
        return result  # type: ignore[no-any-return]


def _failure(state: tenacity.RetryCallState) -> BaseException | None:
    return state.outcome.exception() if state.outcome is not None else None
