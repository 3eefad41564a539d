"""What every per-kind pipeline shares: the item and its state record (``Entry``), and the
exactly-once mechanics of DESIGN.md in one base class (``Flow``).

- ``post``: the intent is committed before a POST and the outcome after; an in-doubt answer
  (lost, timeout, 5xx) or a "this external_id is used" answer is resolved by a lookup by
  external_id, and only a clear "not found" lets the same POST go again (rules 2 and 3).
- ``post_once``: for calls that have no lookup (rule 5): once in doubt, never sent again;
  the item becomes ``unknown`` and is listed for a person.
- ``read``: GETs, retried on any passing failure.
Steps a flow records: ``new``, its own intermediate steps, ``confirmed`` (money has moved,
the final status is awaited: the engine polls these) and ``final``. A kind's flow says how
to ``prepare`` an item (what comes before money moves), ``commit`` it
(the call that moves money), ``poll`` it to its final state, what it costs for the pre-flight
(``cost``/``usable``), and how it is summarised for reports (``summary_of``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, TypeVar, Unpack

from runner.errors import (
    DuplicateExternalId,
    ItemInDoubt,
    ProviderConnectionError,
    ProviderDown,
    ProviderError,
    Retry,
)
from runner.job.fields import JobModel
from runner.provider.retry import Decision, RetryPolicy, decide
from runner.state import ItemChanges, ItemRecord, StateStore

ItemT = TypeVar("ItemT", bound=JobModel)
ClientT = TypeVar("ClientT")
T = TypeVar("T")


def _down(exc: ProviderError) -> bool:
    return isinstance(exc, ProviderConnectionError) or exc.retry is Retry.SAFE


@dataclass
class Entry(Generic[ItemT]):
    """An item of the job and its record in the state database (kept in step)."""

    item: ItemT
    record: ItemRecord
    # The attempt whose answer came back and is committed with the item's next update (one
    # transaction: the answer and what the item becomes are never recorded apart).
    answered: int | None = None

    @property
    def external_id(self) -> str:
        return self.record.external_id

    @property
    def ref(self) -> str:
        """The external_id of the current attempt: E, then E-r2, E-r3 ..."""
        return self.record.ref


@dataclass
class Run:
    """What every flow of one run shares: the state, the run's id and job, the retry policy
    and the clock."""

    state: StateStore
    run_id: int
    job_name: str
    policy: RetryPolicy
    clock: Callable[[], float] = time.time


class Flow(Generic[ItemT, ClientT]):
    """Base of the per-kind pipelines; ``client`` is the provider client the kind uses."""

    commit_step = "confirm"  # the call that moves money, resolved before the pre-flight

    def __init__(self, client: ClientT, run: Run) -> None:
        self.client = client
        self.state = run.state
        self.run_id = run.run_id
        self.job_name = run.job_name
        self.policy = run.policy
        self.clock = run.clock

    # ------------------------------------------------------------ bookkeeping
    def update(self, entry: Entry[ItemT], **values: Unpack[ItemChanges]) -> None:
        answered, entry.answered = entry.answered, None
        if answered is None:
            entry.record.apply(values)
            self.state.update_item(entry.external_id, **values)
            return
        values.setdefault("intent", None)  # the call was answered: its doubt is over
        entry.record.apply(values)
        self.state.end_attempt(answered, entry.external_id, "ok", http_status=200,
                               resolved=False, **values)

    def close(self, entry: Entry[ItemT]) -> None:
        """Record an answered call that no update has recorded yet."""
        if entry.answered is not None:
            self.update(entry)

    def _fail(self, entry: Entry[ItemT], error: ProviderError,
              **values: Unpack[ItemChanges]) -> None:
        """The provider refused the item: it fails with the provider's code and message."""
        if _down(error):
            raise ProviderDown(str(error)) from error
        values.update({"outcome": "failed", "error_code": error.code,
                       "error_message": error.message})
        self.update(entry, **values)

    def read(self, fetch: Callable[[], T]) -> T:
        try:
            return self.policy.call(fetch, idempotent=True)
        except ProviderError as exc:
            if _down(exc):
                raise ProviderDown(str(exc)) from exc
            raise ItemInDoubt(f"lookup failed: {exc}") from exc

    def _post(self, entry: Entry[ItemT], step: str, request: dict[str, Any],
              send: Callable[[], Any], lookup: Callable[[], Any | None]) -> Any:
        """Send a POST once its intent is committed; resolve doubt by ``lookup``.

        Returns the provider's object (answered, or found by lookup). Business refusals are
        raised for the caller; an unresolvable doubt raises ItemInDoubt (the intent stays)."""
        self.close(entry)
        for _ in range(self.policy.attempts):
            attempt = self.state.begin_attempt(self.run_id, entry.external_id, step, request)
            entry.record.intent = step
            try:
                answer = self.policy.call(send, idempotent=False)
            except DuplicateExternalId as exc:
                self._end(attempt, entry, "error", exc, resolved=False)
                found = self.read(lookup)
                if found is None:
                    raise ItemInDoubt(f"{exc.code} yet not found by external_id") from exc
                return found
            except ProviderError as exc:
                if decide(exc, idempotent=False) is not Decision.LOOKUP:
                    self._end(attempt, entry, "error", exc)
                    raise
                self._end(attempt, entry, "in_doubt", exc, resolved=False)
                found = self.read(lookup)
                if found is not None:
                    return found
                continue  # clearly not found: the same POST, same external_id, again
            entry.answered = attempt  # recorded with what the caller makes of the answer
            return answer
        raise ItemInDoubt(f"{step}: no answer after {self.policy.attempts} tries")

    def _end(self, attempt: int, entry: Entry[ItemT], result: str, exc: ProviderError,
             resolved: bool = True) -> None:
        self.state.end_attempt(attempt, entry.external_id, result, http_status=exc.status,
                               code=exc.code, message=exc.message, resolved=resolved)
        if resolved:
            entry.record.intent = None

    def post_once(self, entry: Entry[ItemT], step: str, request: dict[str, Any],
                  send: Callable[[], Any]) -> Any | None:
        """Send a POST that has no lookup by external_id (rule 5). Passing failures before
        sending are retried; once in doubt it is never sent again: the item becomes
        ``unknown`` for a person to check, and None is returned."""
        if entry.record.intent == step:  # sent by an earlier run, answer lost
            self.update(entry, outcome="unknown", intent=None,
                        error_message=f"the {step} was sent and its answer lost; check it at "
                                      f"the provider before anything else")
            return None
        self.close(entry)
        attempt = self.state.begin_attempt(self.run_id, entry.external_id, step, request)
        entry.record.intent = step
        try:
            answer = self.policy.call(send, idempotent=False)
        except ProviderError as exc:
            if decide(exc, idempotent=False) is Decision.LOOKUP:
                self._end(attempt, entry, "in_doubt", exc)
                self.update(entry, outcome="unknown", error_code=exc.code,
                            error_message=f"the {step} was sent and its answer lost "
                                          f"({exc.message}); check it at the provider before "
                                          f"anything else")
                return None
            self._end(attempt, entry, "error", exc)
            raise
        entry.answered = attempt  # recorded with what the caller makes of the answer
        return answer

    # ------------------------------------------------------------ what each kind says
    def summary_of(self, item: ItemT) -> dict[str, Any]:
        """Who is paid and how, for reports: names and masked identifiers only."""
        return {}

    def fingerprinted(self, item: ItemT) -> ItemT:
        """What of the item its fingerprint (a hash kept in the state) covers: a kind may
        leave secrets out, such as card data."""
        return item

    def needs_prepare(self, entry: Entry[ItemT]) -> bool:
        return False

    def prepare(self, entry: Entry[ItemT]) -> None:
        """What comes before money moves (quotations, creations awaiting confirmation)."""

    def ready(self, entry: Entry[ItemT]) -> bool:
        """True when the item's money-moving call is still to be made."""
        return False

    def commit(self, entry: Entry[ItemT]) -> None:
        """The call that moves money."""

    def settle_doubt(self, entry: Entry[ItemT]) -> None:
        """Resolve a lost money-moving call by lookup, without sending anything."""

    def poll(self, entry: Entry[ItemT]) -> bool:
        """Read the item's status once; True when it is final."""
        return True

    def cost(self, entry: Entry[ItemT]) -> tuple[str, Decimal] | None:
        """(balance, amount) the commit will take, for the pre-flight; None: no check."""
        return None

    def planned(self, entry: Entry[ItemT]) -> tuple[str, Decimal] | None:
        """(currency, amount) the item sends, for the plan shown before money moves."""
        return None

    def usable(self) -> dict[str, Decimal]:
        """What each balance the costs are drawn from can still give."""
        return {}
