"""When to call the provider again: one pure decision, plugged into tenacity once.

``decide`` reads the error's retry rule (``retry``, declared on each class of
``runner.errors``): SAFE errors (refused connection, 503, 429) are retried with backoff, and
never sooner than the answer's ``Retry-After`` asked;
in-doubt errors (lost answer, timeout, 5xx) are retried as they are only for reads, and for
writes they call for a lookup by external_id first (exactly-once rule 3); everything else
stops. Sleep is injected, so tests never wait.

A call is made directly first, and tenacity takes over only once it failed and ``decide``
says RETRY (the failed call replayed as tenacity's first attempt, so tenacity counts every
call and waits after each): the success path (nearly every call) costs no retry bookkeeping.

``made_once`` asks a POST that moves no money and is kept nowhere (a plan's or a
validation's dry-run quotation) as a run asks its calls: in doubt, it is looked up by its
external_id before it is sent again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

import tenacity
from tenacity.wait import wait_base

from runner.errors import ProviderError, Retry

T = TypeVar("T")
# The longest wait a Retry-After is followed to, when the policy's max_wait is shorter (the
# catalogue reads' half second): a provider that asks for more is asked again after this.
LONGEST_RETRY_AFTER = 60.0


def pause(seconds: float) -> None:
    """How a policy given no ``sleep`` of its own (a command's) waits: ``time.sleep``, looked
    up at each wait, so that a command's waits can be stood still where it runs in-process."""
    time.sleep(seconds)


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


class RetryAfter(wait_base):
    """The wait before the next call: ``backoff``, or what the failed call's Retry-After
    asked when that is longer (an earlier call would only be refused again), up to
    ``longest``."""

    def __init__(self, backoff: wait_base, longest: float) -> None:
        self.backoff = backoff
        self.longest = longest

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        wait = float(self.backoff(retry_state))
        outcome = retry_state.outcome
        failed: BaseException | None = outcome.exception() if outcome is not None else None
        asked = getattr(failed, "retry_after", None)
        if isinstance(failed, ProviderError) and isinstance(asked, float | int):
            return max(wait, min(float(asked), self.longest))
        return wait


@dataclass
class RetryPolicy:
    attempts: int = 6
    max_wait: float = 60.0
    first_wait: float = 0.5
    sleep: Callable[[float], None] = field(default=lambda seconds: pause(seconds), repr=False)

    def __post_init__(self) -> None:
        # The wait after the N-th call: first_wait doubling with each call, plus up to
        # first_wait of jitter, capped at max_wait; a Retry-After is followed up to
        # LONGEST_RETRY_AFTER or max_wait, whichever is longer.
        self.wait = RetryAfter(
            tenacity.wait_exponential_jitter(multiplier=self.first_wait, max=self.max_wait,
                                             jitter=self.first_wait),
            longest=max(self.max_wait, LONGEST_RETRY_AFTER))
        # Built once: tenacity keeps each call's state per thread, so workers share these.
        self._retrying = {idempotent: self._build(idempotent) for idempotent in (True, False)}

    def _build(self, idempotent: bool) -> tenacity.Retrying:
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(
                lambda e: decide(e, idempotent) is Decision.RETRY),
            stop=tenacity.stop_after_attempt(self.attempts),
            wait=self.wait,
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
            failed = [exc]

        def again() -> T:  # tenacity's first attempt is the call that failed, replayed
            if failed:
                raise failed.pop()
            return fn()

        result: Any = self._retrying[idempotent](again)
        return result  # type: ignore[no-any-return]


def made_once(policy: RetryPolicy, send: Callable[[], T], find: Callable[[], T | None]) -> T:
    """``send()`` a POST that moves no money (a dry-run quotation) as ``policy`` retries a
    run's POST: again while ``decide`` says RETRY; in doubt (a 5xx, an answer runner cannot
    read, none, its external_id taken), looked up first (``find``: None when the provider
    clearly has none), and sent again only when it was not made; ``attempts`` sends at
    most. The last error is raised."""
    last: ProviderError | None = None
    for _ in range(max(policy.attempts, 1)):
        try:
            return policy.call(send, idempotent=False)
        except ProviderError as exc:
            if decide(exc, idempotent=False) is not Decision.LOOKUP:
                raise
            last = exc
        found = policy.call(find, idempotent=True)
        if found is not None:
            return found
    assert last is not None
    raise last
