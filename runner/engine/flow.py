"""What every per-kind pipeline shares: the item and its state record (``Entry``), and the
exactly-once mechanics (docs/exactly-once.md; an item's way from row to paid:
docs/how-an-item-moves.md) in one base class (``Flow``).

- ``post``: the intent is committed before a POST and the outcome after; an in-doubt answer
  (lost, timeout, 5xx) or a "this external_id is used" answer is resolved by a lookup by
  external_id, and only a clear "not found" lets the same POST go again (rules 2 and 3).
- ``post_once``: for calls that have no lookup (rule 5): once in doubt, never sent again;
  the item becomes ``unknown`` and is listed for a person.
- ``read``: GETs, retried on any passing failure. A lookup by external id answers only the
  record carrying it (``runner.provider.lookups``): another's is ``OtherRecord``, never
  adopted; the run makes the item a conflict naming both (``other_record``, rule 8).
Where an item is, and the moves that take it on, are ``runner.lifecycle``'s: a flow writes an
item's life only through a move (``move``), and its facts (ids, amounts, statuses) with it
or alone (``update``). Steps a flow records: ``new``, its own intermediate steps,
``confirmed`` (money has moved, the final status is awaited: the engine polls these) and
``final``. A kind's flow says how to ``prepare`` an item (what comes before money moves),
``commit`` it
(the call that moves money), ``poll`` it to its final state, what it costs for the funds
checks (``draws``, ``cost``, ``usable``), how it is summarised for reports (``summary_of``),
which failed items may be paid again under a new external_id (``retryable``, ``unpaid``;
``retry`` starts that lineage), and what the provider holds for an item (``found``, GETs only,
for reconciliation).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, TypeVar, Unpack, cast

from runner import lifecycle
from runner.errors import (
    DuplicateExternalId,
    ItemInDoubt,
    NoLookup,
    OtherRecord,
    ProviderError,
    down,
    stopping,
)
from runner.job.fields import JobModel
from runner.lifecycle import Call, Changes, Outcome, Reason, State
from runner.logs import event
from runner.provider.retry import Decision, RetryPolicy, decide
from runner.state import ItemChanges, ItemRecord, RetryRecord, StateStore, derived_ref

log = logging.getLogger("runner")
ItemT = TypeVar("ItemT", bound=JobModel)
ClientT = TypeVar("ClientT")
T = TypeVar("T")


def fingerprint(item: JobModel) -> str:
    """The hash of an item's request kept in the state: a row changed since is seen."""
    return hashlib.sha256(item.model_dump_json().encode()).hexdigest()[:32]


class _Unread:
    """The item of an entry made from the state alone: a poll reads the item's record, never
    its row (which may have changed, or gone, since the item was confirmed)."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"an entry made from the state has no item ({name}): a poll "
                             f"reads the state only")


@dataclass
class Entry(Generic[ItemT]):
    """An item of the job and its record in the state database (kept in step)."""

    item: ItemT
    record: ItemRecord
    # The attempt whose answer came back, and what the answer made of the item: committed
    # together (never apart), with the item's next call's intent or at the end of its step,
    # whichever comes first.
    answered: int | None = None
    made: ItemChanges | None = None

    @classmethod
    def of_record(cls, record: ItemRecord) -> Entry[Any]:
        """An entry of the state alone, with no item (for a poll: see ``_Unread``)."""
        return Entry(cast(Any, _Unread()), record)

    @property
    def read(self) -> bool:
        """Whether the item's row is at hand (not for an entry of the state alone)."""
        return not isinstance(self.item, _Unread)

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

    commit_call = Call.CONFIRM  # the call that moves money, resolved before the pre-flight
    # True when ``settle_doubt`` looks the commit up by the item's reference alone (the
    # record's external_id), never comparing it with the item's row: a commit in doubt is
    # then looked up from the state alone (``Entry.of_record``), even when its row has
    # changed or gone since it was sent, since its money may have moved. False: the lookup
    # compares what it finds with the item, whose row must still make the request planned.
    doubt_settled_from_state = False

    def __init__(self, client: ClientT, run: Run) -> None:
        self.client = client
        self.state = run.state
        self.run_id = run.run_id
        self.job_name = run.job_name
        self.policy = run.policy
        self.clock = run.clock

    # ------------------------------------------------------------ bookkeeping
    def move(self, entry: Entry[ItemT], changes: Changes, **facts: Unpack[ItemChanges]
             ) -> None:
        """Move the item as ``changes`` (a ``runner.lifecycle`` move's) say, with the facts
        the provider gave."""
        self._write(entry, {**facts, **changes})

    def unknown_status(self, entry: Entry[ItemT], what: str, status: str) -> Changes:
        """The move for an answer whose status no document names (``status``, as shown):
        money may have moved, so the item is polled on (confirmed first, if it was not),
        shown unknown and named with it, for a person; a poll reading a known status later
        moves it on."""
        if lifecycle.state(entry.record) is not State.POLLING:
            self.move(entry, lifecycle.confirmed(entry.record))
        return lifecycle.polled_unknown(entry.record, Reason.STATUS,
                                        f"{what} has status {status}, which no document "
                                        f"names: check it at the provider")

    def update(self, entry: Entry[ItemT], **facts: Unpack[ItemChanges]) -> None:
        """Record facts of the item (ids, amounts, statuses, details): never where it is in
        its life, which only a move changes."""
        lifecycle.facts_only(facts)
        self._write(entry, facts)

    def _write(self, entry: Entry[ItemT], values: ItemChanges) -> None:
        """Change the item; after an answer not yet recorded, the changes wait for it
        (``close``, or the next call's ``begin_attempt``)."""
        if entry.answered is None:
            entry.record.apply(values)
            self.state.update_item(entry.external_id, **values)
            return
        if entry.made is None:
            values.setdefault("intent", None)  # the call was answered: its doubt is over
            entry.made = {}
        entry.made.update(values)
        entry.record.apply(values)

    def answer(self, entry: Entry[ItemT]) -> tuple[int, ItemChanges] | None:
        """The answered call not recorded yet and what it made of the item (taken off the
        entry: the caller records it)."""
        if entry.answered is None:
            return None
        answered = (entry.answered, entry.made or {"intent": None})
        entry.answered, entry.made = None, None
        return answered

    def close(self, entry: Entry[ItemT]) -> None:
        """Record an answered call, with what it made of the item."""
        answered = self.answer(entry)
        if answered is not None:
            self.state.end_attempt(answered[0], entry.external_id, "ok", http_status=200,
                                   resolved=False, **answered[1])

    def _fail(self, entry: Entry[ItemT], error: ProviderError,
              **values: Unpack[ItemChanges]) -> None:
        """The provider refused the item: it fails with the provider's code and message."""
        if down(error):
            raise stopping(error) from error
        self.move(entry, lifecycle.refused(entry.record, error.code, error.message), **values)

    def other_record(self, entry: Entry[ItemT], error: OtherRecord) -> None:
        """A lookup for the item answered another's record (rule 8): it is not adopted, and
        the item needs a person, told both records (what was asked, what came back). The
        doubt it may have been in is the person's now: nothing is sent for it again."""
        self.move(entry, lifecycle.conflict(entry.record, Reason.OTHER_RECORD, str(error)))

    def retry(self, entry: Entry[ItemT], fingerprint: str, row: int, changed: bool) -> bool:
        """Start the failed item's next lineage (``-f2``, ``-f3`` ...), once the provider
        shows the attempt that failed final and unpaid; the item is then new again, with the
        job's row as it is now. False (nothing changed) when the provider shows otherwise."""
        record = entry.record
        shown = self.unpaid(record)
        if shown is not None:
            log.warning("%s: not sent again: %s", entry.external_id, shown,
                        extra=event("not_sent_again", entry.external_id))
            return False
        lineage = record.lineage + 1
        retry = RetryRecord(record.external_id, self.job_name, lineage,
                            derived_ref(record.external_id, lineage), record.ref,
                            record.status, record.error_code, record.error_message, changed,
                            self.run_id)
        moved = lifecycle.retried(record)
        facts: ItemChanges = {
            "row": row, "fingerprint": fingerprint, "provider_ref": None,
            "quotation_id": None, "expires_at": None, "transaction_id": None,
            "source_currency": None, "source_amount": None, "fee": None,
            "destination_currency": None, "destination_amount": None, "status": None,
            "status_class": None, "status_message": None, "details": None,
            "summary": json.dumps(self.summary_of(entry.item), sort_keys=True)}
        changes: ItemChanges = {**facts, **moved}
        self.state.start_retry(retry, **changes)
        record.apply(changes)
        log.info("%s: failed as %s (%s), sent again as %s", entry.external_id,
                 retry.previous_ref, retry.previous_code, retry.ref,
                 extra=event("sent_again", entry.external_id))
        return True

    def read(self, fetch: Callable[[], T], what: str = "") -> T:
        """``fetch()``, retried as a read. A provider that cannot answer it stops the run
        (``runner.errors.down``); any other failure leaves it in doubt, as an item's lookup
        ("lookup failed: ..."), or as ``what`` says was read ("reading the balances of the
        payer account failed: ...")."""
        try:
            return self.policy.call(fetch, idempotent=True)
        except ProviderError as exc:
            failed = f"{what} failed" if what else ""
            if down(exc):
                raise stopping(exc, failed) from exc
            raise ItemInDoubt(f"{failed or 'lookup failed'}: {exc}") from exc

    def _post(self, entry: Entry[ItemT], call: Call, request: dict[str, Any],
              send: Callable[[], Any], lookup: Callable[[], Any | None]) -> Any:
        """Send a POST once its intent is committed; resolve doubt by ``lookup``.

        Returns the provider's object (answered, or found by lookup). Business refusals are
        raised for the caller; an unresolvable doubt raises ItemInDoubt (the intent stays)."""
        answered = self.answer(entry)  # recorded with this call's intent
        for _ in range(self.policy.attempts):
            intent = lifecycle.send(entry.record, call)
            attempt = self.state.begin_attempt(self.run_id, entry.external_id, call, request,
                                               answered)
            answered = None
            entry.record.apply(intent)
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
        raise ItemInDoubt(f"{call}: no answer after {self.policy.attempts} tries")

    def _end(self, attempt: int, entry: Entry[ItemT], result: str, exc: ProviderError,
             resolved: bool = True) -> None:
        self.state.end_attempt(attempt, entry.external_id, result, http_status=exc.status,
                               code=exc.code, message=exc.message, resolved=resolved)
        if resolved:
            entry.record.intent = None

    def post_once(self, entry: Entry[ItemT], call: Call, request: dict[str, Any],
                  send: Callable[[], Any]) -> Any | None:
        """Send a POST that has no lookup by external_id (rule 5). Passing failures before
        sending are retried; once in doubt it is never sent again: the item becomes
        ``unknown`` (and final) for a person to check, and None is returned."""
        if entry.record.intent == call:  # sent by an earlier run, answer lost
            self.move(entry, lifecycle.unknown(
                entry.record, None, f"the {call} was sent and its answer lost; check it at "
                                    f"the provider before anything else"))
            return None
        intent = lifecycle.send(entry.record, call)
        attempt = self.state.begin_attempt(self.run_id, entry.external_id, call, request,
                                           self.answer(entry))
        entry.record.apply(intent)
        try:
            answer = self.policy.call(send, idempotent=False)
        except ProviderError as exc:
            if decide(exc, idempotent=False) is Decision.LOOKUP:
                # The doubt ends with the item unknown and final, in one transaction: never
                # a moment when the call looks answered and the item still to send.
                unknown = lifecycle.unknown(
                    entry.record, exc.code, f"the {call} was sent and its answer lost "
                                            f"({exc.message}); check it at the provider "
                                            f"before anything else")
                self.state.end_attempt(attempt, entry.external_id, "in_doubt",
                                       http_status=exc.status, code=exc.code,
                                       message=exc.message, resolved=False, **unknown)
                entry.record.apply(unknown)
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
        """Resolve a lost money-moving call by lookup, without sending anything. With
        ``doubt_settled_from_state``, from the state alone: the entry has no item."""

    def poll(self, entry: Entry[ItemT]) -> bool:
        """Read the item's status once; True when it is final. From the state alone: the
        entry has no item (``Entry.of_record``), whatever became of its row."""
        return True

    def draws(self, item: ItemT) -> str | None:
        """The balance the item's commit draws on, for the funds checks (a currency, an
        account's currency); None: none of ours (a collection, an onboarding)."""
        return None

    def cost(self, entry: Entry[ItemT]) -> tuple[str, Decimal] | None:
        """(balance, amount) the commit will take, for the pre-flight; None: no check."""
        return None

    def usable(self, balances: Collection[str]) -> dict[str, Decimal]:
        """What each of ``balances`` (as ``draws`` and ``cost`` name them) can still give."""
        return {}

    def retryable(self, record: ItemRecord) -> bool:
        """True when the item ended failed at the provider with nothing paid (a final
        rejection or decline, a payment reversed): ``--retry-failed`` may pay it under a new
        external_id."""
        return False

    def transient(self, record: ItemRecord) -> bool:
        """True when the provider's refusal of a failed item may pass as the item is (the
        payer unavailable, a balance or a limit of the moment): ``--retry-failed`` sends it
        again unchanged. Any other refusal is sent again only once its row changed, or with
        ``--include-unchanged``."""
        return False

    def outcome_of(self, held: ItemChanges) -> Outcome | None:
        """What a provider record (``found``'s) says of the money: ``settled``, ``failed``
        (final, nothing paid or the money given back), or None (on its way, or this kind
        cannot say), for `runner reconcile` to record."""
        return None

    def unpaid(self, record: ItemRecord, ref: str | None = None) -> str | None:
        """Look ``ref`` (the item's current attempt when None) up: None when the provider
        shows it final and unpaid (a new external_id may pay the item), else what it shows."""
        return "this kind is never sent again under a new external_id"

    def found(self, record: ItemRecord, ref: str | None = None) -> ItemChanges | None:
        """What the provider holds under ``ref`` (the record's current attempt when None),
        as the state's columns (status, ids, amounts, fee), read with GETs only; None when
        it clearly holds nothing. NoLookup when the kind cannot be found so."""
        raise NoLookup(f"the provider cannot find a {record.kind} by its external_id")

    def booked(self, settled: list[ItemRecord]) -> list[tuple[str, Decimal, Decimal]]:
        """Where the service keeps statements: per balance drawn on, what the settled items
        took as the state says, and as the statement shows it; [] when it keeps none. Asked
        after ``found`` was, for the same items."""
        return []
