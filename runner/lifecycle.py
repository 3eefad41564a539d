"""An item's life in one place: where it is (``State``), how far it went at the provider
(``Step``), which call of it may be in doubt (``Call``), what a plan does with it
(``PlanAction``), what every view of the batch shows of it (``shown``), and the moves that
take it on, each refusing an item that is not where the move starts (``IllegalMove``).

The state keeps an item's life in four columns: ``step`` (a ``Step``), ``intent`` (the
``Call`` sent whose answer is not recorded yet: in doubt), ``outcome`` (an ``Outcome``) and,
where the life says why, ``error_code`` (a ``Reason``). ``state_of`` reads one ``State``
from them, and ``items.state`` keeps it: every write that moves an item sets it with
``backfill``'s expression of the same rules (when it is next due is the queue's:
``runner.state.queue``).
The flows never write those columns themselves: a move says what to write, and the flow
writes it with the facts the provider gave (ids, amounts, statuses).

======================  ==================================  ===============================
move                    from                                to
======================  ==================================  ===============================
``send(call)``          todo, refused, awaiting_confirm;    in_doubt (the call's intent,
                        in_doubt on that very call          committed before it is sent)
``answered(step)``      todo, refused, awaiting_confirm,    todo at quoted, created,
                        in_doubt                            company or merchant
``confirmed()``         those, and polling                  polling (money moved; its final
                                                            status awaited)
``settled()``,          those                               settled, failed (final at the
``failed(code, why)``                                       provider)
``checked()``           todo, refused, awaiting_confirm     todo: runner's own checks before
                                                            a call pass (nothing is sent)
``not_found()``         in_doubt                            todo: the same call may go again
``doubted(call)``       todo, refused, awaiting_confirm     in_doubt: an answer showed
                                                            something may be held
``refused(code, why)``  todo, refused, awaiting_confirm,    refused: nothing made; the next
                        in_doubt, held (by a plan)          run asks again
``unknown(code, why)``  todo, refused, awaiting_confirm,    unknown: a call with no lookup in
                        in_doubt, unknown                   doubt (rule 5), for a person
``polled_unknown``      polling                             polling, shown unknown (a status
                                                            runner does not know, or gone)
``conflict(reason)``    any but settled, unknown, conflict  conflict, for a person
``expired()``           todo, refused, awaiting_confirm     todo at new, the next attempt
                        at quoted or created                (``-rN``, rule 1)
``withheld()``          todo, refused, awaiting_confirm     awaiting_confirm (``confirm:
                                                            false``)
``retried()``           failed                              todo at new, the next lineage
                                                            (``-fN``)
``reconciled(outcome)`` settled, failed                     settled, failed (what the
                                                            provider shows since)
``hold(reason)``        todo, refused, awaiting_confirm,    held until a plan pays it
                        held
``release()``           held                                todo
``resolved(outcome)``   unknown, conflict, polling shown    settled, failed (a person's word)
                        unknown
======================  ==================================  ===============================

The plan's SQL (holds, releases, ``changed`` conflicts) and ``runner resolve``'s write
what ``hold``, ``release``, ``conflict`` and ``resolved`` say (tests hold them to it).
Nothing here does I/O or imports from runner but its errors: the state, the engine and the
summary all read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Protocol, TypedDict

from runner.errors import IllegalMove


class Step(StrEnum):
    """How far an item went at the provider (``items.step``); a kind uses some of them."""

    NEW = "new"  # nothing made yet (or a new attempt, -rN, after an expiry)
    QUOTED = "quoted"  # a quotation holds its price
    CREATED = "created"  # a transaction or payment awaits its confirm
    COMPANY = "company"  # an onboarding's company is made
    MERCHANT = "merchant"  # and its merchant
    CONFIRMED = "confirmed"  # money moved (or is reserved): its final status is awaited
    FINAL = "final"  # nothing more is sent nor read for it


class Call(StrEnum):
    """A call that makes something at the provider, as ``items.intent`` (in doubt while its
    answer is not recorded) and ``attempts.step`` name it."""

    QUOTATION = "quotation"
    TRANSACTION = "transaction"
    PAYMENT = "payment"
    CONFIRM = "confirm"
    PAYMENT_ORDER = "payment_order"
    PAYOUT_REQUEST = "payout_request"
    TRANSFER_REQUEST = "transfer_request"
    PAY = "pay"
    CHARGE = "charge"
    REFUND = "refund"
    CANCEL = "cancel"
    COMPANY = "company"
    MERCHANT = "merchant"
    ACCOUNT = "account"
    # Attempts written by `runner resolve` and `runner reconcile` (nothing is sent).
    RESOLVE = "resolve"
    RECONCILE = "reconcile"


class Outcome(StrEnum):
    """``items.outcome``: what came of the item so far."""

    PENDING = "pending"
    AWAITING_CONFIRM = "awaiting_confirm"
    SETTLED = "settled"
    FAILED = "failed"
    CONFLICT = "conflict"
    UNKNOWN = "unknown"
    HELD = "held"


class Reason(StrEnum):
    """Why an item is held, a conflict, polled with no known status, or failed by a person
    (its ``error_code``; the other codes are the provider's, or a kind's own checks')."""

    PAYEE = "payee"  # held by its payee check
    DUPLICATE = "duplicate"  # held: it may pay what another item pays (rule 9)
    CONFLICT = "conflict"  # the provider holds something else under its external_id
    CHANGED = "changed"  # its row changed after its payment started
    OTHER_RECORD = "other_record"  # a lookup answered another's record (rule 8)
    STATUS = "status"  # polled: a status runner does not know
    MISSING = "missing"  # polled: the provider no longer finds it
    RESOLVED = "resolved"  # failed by a person (`runner resolve`)


class State(StrEnum):
    """Where an item is in its life: one value, read from the columns by ``state_of``."""

    TODO = "todo"  # nothing in doubt; a next call to make
    IN_DOUBT = "in_doubt"  # a call's answer not recorded: looked up first (rules 2, 3)
    AWAITING_CONFIRM = "awaiting_confirm"  # made, its confirm withheld (confirm: false)
    POLLING = "polling"  # money moved; its final status awaited
    REFUSED = "refused"  # refused before anything was made; asked again by the next run
    HELD = "held"  # not paid until a plan pays it (its reason: payee, duplicate)
    SETTLED = "settled"  # final at the provider
    FAILED = "failed"  # final at the provider
    UNKNOWN = "unknown"  # final for runner: whether it paid is for a person (rule 5)
    CONFLICT = "conflict"  # final for runner: a person decides (conflict, changed, ...)


class Shown(StrEnum):
    """An item's state as every view of the batch shows it (``shown``)."""

    SETTLED = "settled"
    PENDING = "pending"
    AWAITING_CONFIRM = "awaiting_confirm"
    FAILED = "failed"
    CHANGED = "changed"  # paid or on its way, its row asking another payment since
    PAID_TWICE = "paid_twice"  # an earlier attempt paid after all, beside it
    CONFLICT = "conflict"
    UNKNOWN = "unknown"
    IN_DOUBT = "in_doubt"
    HELD = "held"


class PlanAction(StrEnum):
    """What a run does with one row of its job (``runner.engine.plan``)."""

    NEW = "new"
    RESUME = "resume"  # at the step reached
    IN_DOUBT = "in_doubt"  # looked up first
    RETRY = "retry"  # failed; sent again under a new external_id (--retry-failed)
    SETTLED = "settled"
    FAILED = "failed"
    REVIEW = "review"  # a person decides
    CHANGED = "changed"  # its row changed after its payment started
    HELD = "held"  # by its payee check
    DUPLICATE = "duplicate"  # it pays what another item pays
    REFUSED = "refused"  # another job holds its external_id (rule 7)
    QUOTE_REFUSED = "quote_refused"  # the provider refused its quotation in the plan
    INVALID = "invalid"
    UNPLANNED = "unplanned"  # a plan file being applied does not pay it


TO_PAY = (PlanAction.NEW, PlanAction.RESUME, PlanAction.IN_DOUBT, PlanAction.RETRY)
SKIPPED = (PlanAction.SETTLED, PlanAction.FAILED, PlanAction.REVIEW, PlanAction.CHANGED,
           PlanAction.HELD, PlanAction.DUPLICATE, PlanAction.REFUSED, PlanAction.QUOTE_REFUSED,
           PlanAction.INVALID, PlanAction.UNPLANNED)
# The actions a person looks at: a plan kept streamed keeps only these items.
LISTED = (PlanAction.IN_DOUBT, PlanAction.RETRY, PlanAction.FAILED, PlanAction.REVIEW,
          PlanAction.CHANGED, PlanAction.HELD, PlanAction.DUPLICATE, PlanAction.REFUSED,
          PlanAction.QUOTE_REFUSED, PlanAction.INVALID)
# The steps before money moves: an item to pay at one of these has its payee checked.
UNPAID_STEPS = (Step.NEW, Step.QUOTED, Step.CREATED)

FINAL = frozenset({State.SETTLED, State.FAILED, State.UNKNOWN, State.CONFLICT})
PARKED = frozenset({State.REFUSED, State.HELD})
# Nothing in doubt, nothing final: the item's next call may be sent.
SENDABLE = frozenset({State.TODO, State.REFUSED, State.AWAITING_CONFIRM})
# What a plan may make due for a worker's claim (``items.due_at``): all but the final and
# the held.
CLAIMABLE = SENDABLE | {State.IN_DOUBT, State.POLLING}


def claimable(*, confirm: bool) -> frozenset[State]:
    """The states a run's claims take (calls in doubt first): with ``confirm: false`` an
    item awaiting its confirm is not. Refused and held items wait for the next plan."""
    taken = {State.IN_DOUBT, State.TODO, State.POLLING}
    if confirm:
        taken.add(State.AWAITING_CONFIRM)
    return frozenset(taken)


class Item(Protocol):
    """What the life of an item is read from (``runner.state.ItemRecord``)."""

    @property
    def external_id(self) -> str: ...
    @property
    def step(self) -> str: ...
    @property
    def intent(self) -> str | None: ...
    @property
    def outcome(self) -> str: ...
    @property
    def error_code(self) -> str | None: ...
    @property
    def attempt(self) -> int: ...
    @property
    def lineage(self) -> int: ...
    @property
    def changed_to(self) -> str | None: ...
    @property
    def earlier_paid(self) -> str | None: ...


class Changes(TypedDict, total=False):
    """The columns of an item's life that a move writes (``runner.state.ItemChanges``)."""

    step: Step
    intent: Call | None
    outcome: Outcome
    error_code: str | None
    error_message: str | None
    attempt: int
    lineage: int


LIFE = frozenset(Changes.__annotations__) - {"error_code", "error_message"}


# ---------------------------------------------------------------- reading the columns
@dataclass(frozen=True)
class _Rule:
    """One line of ``state_of``: the columns it matches (None: any) and the state."""

    state: State
    in_doubt: bool = False
    outcomes: tuple[Outcome, ...] = ()
    steps: tuple[Step, ...] = ()

    def matches(self, step: str, in_doubt: bool, outcome: str) -> bool:
        return ((not self.in_doubt or in_doubt)
                and (not self.outcomes or outcome in self.outcomes)
                and (not self.steps or step in self.steps))

    def sql(self, columns: dict[str, str]) -> str:
        tests = [f"{columns['intent']} IS NOT NULL"] if self.in_doubt else []
        for column, values in (("outcome", self.outcomes), ("step", self.steps)):
            if values:
                tests.append(f"{columns[column]} IN ({_listed(values)})")
        return " AND ".join(tests)


def _listed(values: Iterable[str]) -> str:
    return ", ".join(f"'{v}'" for v in sorted(values))


# The first rule that matches says the state. A confirmed item is polled whatever its
# outcome says (an older runner left some confirmed items "failed" or "awaiting_confirm");
# an unknown one is final wherever it stopped, but for a status a poll could not read.
_RULES = (
    _Rule(State.IN_DOUBT, in_doubt=True),
    _Rule(State.SETTLED, outcomes=(Outcome.SETTLED,)),
    _Rule(State.CONFLICT, outcomes=(Outcome.CONFLICT,)),
    _Rule(State.HELD, outcomes=(Outcome.HELD,)),
    _Rule(State.POLLING, steps=(Step.CONFIRMED,)),
    _Rule(State.UNKNOWN, outcomes=(Outcome.UNKNOWN,)),
    _Rule(State.FAILED, outcomes=(Outcome.FAILED,), steps=(Step.FINAL,)),
    _Rule(State.REFUSED, outcomes=(Outcome.FAILED,)),
    _Rule(State.AWAITING_CONFIRM, outcomes=(Outcome.AWAITING_CONFIRM,)),
    _Rule(State.TODO),
)


def state_of(step: str, intent: str | None, outcome: str) -> State:
    """The state the columns of an item say."""
    return _state_of(step, bool(intent), outcome)


# Every move asks the state of its item, several times a call: the rules are read once for
# each (step, in doubt, outcome) a run meets, a few dozen at most.
@lru_cache(maxsize=1024)
def _state_of(step: str, in_doubt: bool, outcome: str) -> State:
    return next(r.state for r in _RULES if r.matches(step, in_doubt, outcome))


def state(item: Item) -> State:
    """The state of an item."""
    return _state_of(item.step, bool(item.intent), item.outcome)


# The columns ``state_of`` reads; a change of any of them moves the item (``items.state``).
READ = ("step", "intent", "outcome")


def backfill(**columns: str) -> str:
    """``state_of`` as one SQL expression over the columns (the same text in SQLite and
    PostgreSQL): the migration that keeps the state in a column of its own fills it with
    it, and every write that moves an item sets it with it. A column may be given as
    another expression (the parameter a change sets it to: the state the row moves to)."""
    read = {name: columns.get(name, name) for name in READ}
    whens = " ".join(f"WHEN {r.sql(read)} THEN '{r.state}'" for r in _RULES[:-1])
    return f"CASE {whens} ELSE '{_RULES[-1].state}' END"


def shown(item: Item) -> Shown:
    """An item as every view of the batch shows it: ``in_doubt`` while a call's answer is
    not known; ``paid_twice`` when an earlier attempt was paid after all beside it
    (``earlier_paid``), ``settled`` when one was instead of it; ``changed`` when its row
    asks another payment than the one made or on its way (``changed_to``), which is not
    paid again; else its outcome (``pending`` both before money moves and while its final
    status is awaited; ``failed`` both refused and failed final)."""
    if item.intent:
        return Shown.IN_DOUBT
    if item.earlier_paid and item.outcome in (Outcome.SETTLED, Outcome.FAILED):
        return Shown.PAID_TWICE if item.outcome == Outcome.SETTLED else Shown.SETTLED
    if item.changed_to is not None and (
            item.outcome in (Outcome.SETTLED, Outcome.PENDING, Outcome.AWAITING_CONFIRM)
            or (item.outcome == Outcome.CONFLICT and item.error_code == Reason.CHANGED)):
        return Shown.CHANGED
    return Shown(item.outcome)


def facts_only(columns: Iterable[str]) -> None:
    """Refuse a write of facts that would move the item (only a move does that)."""
    moved = LIFE.intersection(columns)
    if moved:
        raise IllegalMove(f"{', '.join(sorted(moved))} written as a fact, not by a move")


# ---------------------------------------------------------------- the moves
_WORKED = SENDABLE | {State.IN_DOUBT}  # where a flow's answers come to
_ANSWERED = _WORKED | {State.POLLING}


def _from(item: Item, move: str, allowed: frozenset[State]) -> State:
    now = state(item)
    if now not in allowed:
        raise IllegalMove(f"{item.external_id}: {move} is no move from {now} (step "
                          f"{item.step}, intent {item.intent}, outcome {item.outcome}); "
                          f"nothing was written")
    return now


def send(item: Item, call: Call) -> Changes:
    """The call's intent, committed before it is sent (rule 2): from an item with nothing
    in doubt, or in doubt on this very call once a lookup clearly found nothing."""
    if _from(item, f"send {call}", _WORKED) is State.IN_DOUBT and item.intent != call:
        raise IllegalMove(f"{item.external_id}: send {call} while {item.intent} is in doubt; "
                          f"nothing was written")
    return {"intent": call}


def doubted(item: Item, call: Call) -> Changes:
    """The call thought answered is in doubt after all (the provider holds something under
    its reference, and it could not be read): it is looked up before anything is sent."""
    _from(item, f"doubt {call}", SENDABLE)
    return {"intent": call}


def not_found(item: Item) -> Changes:
    """A lookup clearly found nothing of the call in doubt: the doubt is over, and the same
    call, under the same external_id, may go again (rule 3)."""
    _from(item, "not found", frozenset({State.IN_DOUBT}))
    return {"intent": None}


def answered(item: Item, step: Step) -> Changes:
    """The provider made what the item asked before money moves (a quotation, a transaction
    or payment to confirm, a company, a merchant): the item is at ``step``, its doubt over
    and its last refusal forgotten."""
    if step not in (Step.QUOTED, Step.CREATED, Step.COMPANY, Step.MERCHANT):
        raise IllegalMove(f"{item.external_id}: answered at {step}: confirmed, settled and "
                          f"failed are moves of their own")
    _from(item, f"answered at {step}", _WORKED)
    return {"step": step, "intent": None, "outcome": Outcome.PENDING, "error_code": None,
            "error_message": None}


def checked(item: Item) -> Changes:
    """What runner checks itself before the call (an order read again, what it has left)
    allows it: nothing is sent yet, and a refusal of an earlier run is forgotten."""
    _from(item, "checked", SENDABLE)
    return {"outcome": Outcome.PENDING, "error_code": None, "error_message": None}


def confirmed(item: Item) -> Changes:
    """Money moved (or is reserved): the item is polled to its final status."""
    _from(item, "confirmed", _ANSWERED)
    return {"step": Step.CONFIRMED, "intent": None, "outcome": Outcome.PENDING,
            "error_code": None, "error_message": None}


def settled(item: Item) -> Changes:
    """Final at the provider, paid."""
    _from(item, "settled", _ANSWERED)
    return {"step": Step.FINAL, "intent": None, "outcome": Outcome.SETTLED, "error_code": None,
            "error_message": None}


def failed(item: Item, code: str | None, message: str | None) -> Changes:
    """Final at the provider, not paid (or the money given back, or its entries wrong)."""
    _from(item, "failed", _ANSWERED)
    return {"step": Step.FINAL, "intent": None, "outcome": Outcome.FAILED, "error_code": code,
            "error_message": message}


def refused(item: Item, code: str | None, message: str | None) -> Changes:
    """Refused before anything was made (by the provider, or a check of runner's just before
    sending): nothing paid, the step kept, and the next run asks again. A plan refuses a
    held item whose quotation the provider refused."""
    _from(item, "refused", _WORKED | {State.HELD})
    return {"intent": None, "outcome": Outcome.FAILED, "error_code": code,
            "error_message": message}


def unknown(item: Item, code: str | None, message: str) -> Changes:
    """A call that has no lookup was sent and its answer lost, or the provider holds one
    like it (rule 5): whether it paid is for a person to find out; it is never sent again.
    The message may be told again, more precisely."""
    _from(item, "unknown", _WORKED | {State.UNKNOWN})
    return {"step": Step.FINAL, "intent": None, "outcome": Outcome.UNKNOWN, "error_code": code,
            "error_message": message}


def polled_unknown(item: Item, reason: Reason, message: str) -> Changes:
    """A poll could not tell where the money is (a status runner does not know, or a
    request the provider no longer finds): polling goes on, and the item shows unknown."""
    if reason not in (Reason.STATUS, Reason.MISSING):
        raise IllegalMove(f"{item.external_id}: polled unknown for {reason}")
    _from(item, "polled unknown", frozenset({State.POLLING}))
    return {"outcome": Outcome.UNKNOWN, "error_code": reason, "error_message": message}


def conflict(item: Item, reason: Reason, message: str) -> Changes:
    """What the provider holds is not this item's, a lookup answered another's record, or
    its row changed after its payment started: a person decides; nothing is sent for it
    again, its doubt included."""
    if reason not in (Reason.CONFLICT, Reason.OTHER_RECORD, Reason.CHANGED):
        raise IllegalMove(f"{item.external_id}: conflict for {reason}")
    _from(item, "conflict", _ANSWERED | {State.HELD, State.FAILED})
    return {"intent": None, "outcome": Outcome.CONFLICT, "error_code": reason,
            "error_message": message}


def expired(item: Item) -> Changes:
    """The quotation expired before its object was confirmed, and the provider proved the
    attempt can no longer be (rule 1): the next attempt (``-rN``) starts at new."""
    _from(item, "expired", SENDABLE)
    if item.step not in (Step.QUOTED, Step.CREATED):
        raise IllegalMove(f"{item.external_id}: expired at step {item.step}")
    return {"step": Step.NEW, "intent": None, "attempt": item.attempt + 1}


def withheld(item: Item) -> Changes:
    """Ready to confirm, and its confirm withheld (``confirm: false``): `runner confirm`
    sends it."""
    _from(item, "withheld", SENDABLE)
    return {"outcome": Outcome.AWAITING_CONFIRM}


def retried(item: Item) -> Changes:
    """A failed item the provider shows unpaid is paid again as its next lineage (``-fN``),
    new again (``--retry-failed``)."""
    _from(item, "retried", frozenset({State.FAILED}))
    return {"step": Step.NEW, "intent": None, "attempt": 1, "lineage": item.lineage + 1,
            "outcome": Outcome.PENDING, "error_code": None, "error_message": None}


def reconciled(item: Item, outcome: Outcome, code: str | None, message: str | None
               ) -> Changes:
    """The provider shows a final item's money otherwise now (`runner reconcile`): reversed
    after it settled, or paid after it failed."""
    _from(item, f"reconciled {outcome}", frozenset({State.SETTLED, State.FAILED}))
    if outcome not in (Outcome.SETTLED, Outcome.FAILED):
        raise IllegalMove(f"{item.external_id}: reconciled as {outcome}")
    return {"outcome": outcome, "error_code": code, "error_message": message}


def hold(item: Item, reason: Reason, why: str) -> Changes:
    """A plan holds the item unpaid (its payee check, or a possible duplicate)."""
    if reason not in (Reason.PAYEE, Reason.DUPLICATE):
        raise IllegalMove(f"{item.external_id}: held for {reason}")
    _from(item, "held", SENDABLE | {State.HELD})
    return {"outcome": Outcome.HELD, "error_code": reason, "error_message": why}


def release(item: Item) -> Changes:
    """A plan pays a held item after all."""
    _from(item, "released", frozenset({State.HELD}))
    return {"outcome": Outcome.PENDING, "error_code": None, "error_message": None}


def resolved(item: Item, outcome: Outcome, note: str) -> Changes:
    """A person found at the provider what runner could not settle: final from now on."""
    allowed = frozenset({State.UNKNOWN, State.CONFLICT} |
                        ({State.POLLING} if item.outcome == Outcome.UNKNOWN else set()))
    _from(item, f"resolved {outcome}", allowed)
    if outcome not in (Outcome.SETTLED, Outcome.FAILED):
        raise IllegalMove(f"{item.external_id}: resolved as {outcome}")
    return {"step": Step.FINAL, "intent": None, "outcome": outcome,
            "error_code": Reason.RESOLVED if outcome == Outcome.FAILED else None,
            "error_message": f"by hand: {note}"}
