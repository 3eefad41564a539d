"""An item's life (``runner.lifecycle``), on records alone: the state the columns say (and the
same as one SQL expression), what every view shows, every move from every state (taken
where it starts, refused elsewhere, and landing where it says), and the plan's actions.
Last, what the state's own SQL writes for a plan's holds and a person's resolve is what the
moves say (SQLite, a file of the test's own)."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runner import lifecycle as life
from runner.errors import IllegalMove
from runner.lifecycle import Call, Outcome, PlanAction, Reason, Shown, State, Step
from runner.state import ItemRecord, open_state
from runner.state.records import Staged

JOB = "pay-2026-11"


def item(step: str = "new", intent: str | None = None, outcome: str = "pending",
         error_code: str | None = None, **more: Any) -> ItemRecord:
    return ItemRecord("pay-a", JOB, "remittance", 2, step=step, intent=intent,
                      outcome=outcome, error_code=error_code, **more)


# One item in each state (several where a state is reached at several steps).
IN = {
    State.TODO: [item(), item("quoted"), item("created"), item("company"), item("merchant")],
    State.IN_DOUBT: [item(intent="quotation"), item("quoted", "transaction"),
                     item("created", "confirm", "failed", "30400")],
    State.AWAITING_CONFIRM: [item("created", outcome="awaiting_confirm")],
    State.POLLING: [item("confirmed"), item("confirmed", outcome="unknown", error_code="status")],
    State.REFUSED: [item(outcome="failed", error_code="1003001"),
                    item("created", outcome="failed", error_code="30400")],
    State.HELD: [item(outcome="held", error_code="payee")],
    State.SETTLED: [item("final", outcome="settled")],
    State.FAILED: [item("final", outcome="failed", error_code="30200")],
    State.UNKNOWN: [item("final", outcome="unknown")],
    State.CONFLICT: [item("quoted", outcome="conflict", error_code="conflict")],
}


def moved(record: ItemRecord, changes: life.Changes) -> ItemRecord:
    after = replace(record)
    after.apply(changes)
    return after


def test_every_state_is_read_from_its_columns() -> None:
    assert set(IN) == set(State)
    for expected, records in IN.items():
        assert {life.state(r) for r in records} == {expected}
    # What older runners left: confirmed items whose outcome is a refusal or a withheld
    # confirm are polled; an unknown one recorded before its step was made final is final.
    assert life.state_of("confirmed", None, "failed") is State.POLLING
    assert life.state_of("confirmed", None, "awaiting_confirm") is State.POLLING
    assert life.state_of("new", None, "unknown") is State.UNKNOWN
    assert life.FINAL == {State.SETTLED, State.FAILED, State.UNKNOWN, State.CONFLICT}
    assert life.claimable(confirm=True) == {State.IN_DOUBT, State.TODO, State.POLLING,
                                            State.AWAITING_CONFIRM}
    assert life.claimable(confirm=False) == {State.IN_DOUBT, State.TODO, State.POLLING}


def test_the_sql_expression_says_the_same_state_for_every_columns() -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE items (step text, intent text, outcome text)")
    combos = list(itertools.product([*Step, "onboarded"], [None, *Call], [*Outcome]))
    db.executemany("INSERT INTO items VALUES (?, ?, ?)", combos)
    found = db.execute(f"SELECT step, intent, outcome, {life.backfill()} FROM items").fetchall()
    assert len(found) == len(combos)
    assert [s for *_, s in found] == [life.state_of(*c) for c in combos]


@pytest.mark.parametrize(("record", "expected"), [
    (item(), Shown.PENDING), (item("confirmed"), Shown.PENDING),
    (item("quoted", "transaction"), Shown.IN_DOUBT),
    (item("final", "pay", "unknown"), Shown.IN_DOUBT),
    (item("created", outcome="awaiting_confirm"), Shown.AWAITING_CONFIRM),
    (item(outcome="failed"), Shown.FAILED), (item("final", outcome="failed"), Shown.FAILED),
    (item("confirmed", outcome="unknown", error_code="missing"), Shown.UNKNOWN),
    (item(outcome="held", error_code="duplicate"), Shown.HELD),
    (item("final", outcome="settled", changed_to="f2"), Shown.CHANGED),
    (item("confirmed", changed_to="f2"), Shown.CHANGED),
    (item("quoted", outcome="conflict", error_code="changed", changed_to="f2"),
     Shown.CHANGED),
    (item("quoted", outcome="conflict", error_code="conflict", changed_to="f2"),
     Shown.CONFLICT),
    (item("final", outcome="failed", changed_to="f2"), Shown.FAILED),
    (item("final", outcome="settled", earlier_paid="[{}]"), Shown.PAID_TWICE),
    (item("final", outcome="failed", earlier_paid="[{}]"), Shown.SETTLED),
    (item("final", outcome="settled", earlier_paid="[{}]", changed_to="f2"), Shown.PAID_TWICE),
], ids=lambda v: v if isinstance(v, str) else "")
def test_each_record_is_shown_as_every_view_shows_it(record: ItemRecord,
                                                     expected: Shown) -> None:
    assert life.shown(record) is expected


Move = Callable[[ItemRecord], life.Changes]
# Every move: the states it starts from, and where the item is after it.
MOVES: list[tuple[str, Move, set[State], State | None]] = [
    ("send", lambda r: life.send(r, Call(r.intent or "quotation")), {
        State.TODO, State.REFUSED, State.AWAITING_CONFIRM, State.IN_DOUBT}, State.IN_DOUBT),
    ("doubted", lambda r: life.doubted(r, Call.PAYOUT_REQUEST), {
        State.TODO, State.REFUSED, State.AWAITING_CONFIRM}, State.IN_DOUBT),
    ("not found", life.not_found, {State.IN_DOUBT}, None),
    ("answered", lambda r: life.answered(r, Step.CREATED), {
        State.TODO, State.REFUSED, State.AWAITING_CONFIRM, State.IN_DOUBT}, State.TODO),
    ("checked", life.checked, {State.TODO, State.REFUSED, State.AWAITING_CONFIRM},
     State.TODO),
    ("confirmed", life.confirmed, {State.TODO, State.REFUSED, State.AWAITING_CONFIRM,
                                   State.IN_DOUBT, State.POLLING}, State.POLLING),
    ("settled", life.settled, {State.TODO, State.REFUSED, State.AWAITING_CONFIRM,
                               State.IN_DOUBT, State.POLLING}, State.SETTLED),
    ("failed", lambda r: life.failed(r, "30200", "REJECTED"), {
        State.TODO, State.REFUSED, State.AWAITING_CONFIRM, State.IN_DOUBT, State.POLLING},
     State.FAILED),
    ("refused", lambda r: life.refused(r, "1003001", "Payer is inactive"), {
        State.TODO, State.REFUSED, State.AWAITING_CONFIRM, State.IN_DOUBT, State.HELD},
     State.REFUSED),
    ("unknown", lambda r: life.unknown(r, None, "the pay was sent and its answer lost"), {
        State.TODO, State.REFUSED, State.AWAITING_CONFIRM, State.IN_DOUBT, State.UNKNOWN},
     State.UNKNOWN),
    ("polled unknown", lambda r: life.polled_unknown(r, Reason.STATUS, "status 'odd'"),
     {State.POLLING}, State.POLLING),
    ("conflict", lambda r: life.conflict(r, Reason.OTHER_RECORD, "another's"), {
        State.TODO, State.REFUSED, State.AWAITING_CONFIRM, State.IN_DOUBT, State.POLLING,
        State.HELD, State.FAILED}, State.CONFLICT),
    ("withheld", life.withheld, {State.TODO, State.REFUSED, State.AWAITING_CONFIRM},
     State.AWAITING_CONFIRM),
    ("retried", life.retried, {State.FAILED}, State.TODO),
    ("reconciled", lambda r: life.reconciled(
        r, Outcome.FAILED if r.outcome == Outcome.SETTLED else Outcome.SETTLED, None, None),
     {State.SETTLED, State.FAILED}, None),
    ("hold", lambda r: life.hold(r, Reason.DUPLICATE, "the same payment as pay-b"), {
        State.TODO, State.REFUSED, State.AWAITING_CONFIRM, State.HELD}, State.HELD),
    ("release", life.release, {State.HELD}, State.TODO),
    ("resolved", lambda r: life.resolved(r, Outcome.SETTLED, "paid, says the bank"),
     {State.UNKNOWN, State.CONFLICT, State.POLLING}, State.SETTLED),
]


@pytest.mark.parametrize(("name", "move", "starts", "lands"), MOVES,
                         ids=[m[0] for m in MOVES])
def test_each_move_goes_from_where_it_starts_and_nowhere_else(
        name: str, move: Move, starts: set[State], lands: State | None) -> None:
    for state, records in IN.items():
        for record in records:
            # Polled and shown pending: nothing for a person to resolve.
            pending = name == "resolved" and record.outcome != "unknown"
            if state not in starts or pending and state is State.POLLING:
                with pytest.raises(IllegalMove, match=r"^pay-a: .*nothing was written"):
                    move(record)
                continue
            after = moved(record, move(record))
            if lands is not None:
                assert life.state(after) is lands, (name, record)
            assert after.external_id == record.external_id


def test_what_each_move_writes() -> None:
    todo, doubt = item("quoted"), item("quoted", "transaction")
    assert life.send(todo, Call.TRANSACTION) == {"intent": "transaction"}
    assert life.not_found(doubt) == {"intent": None}
    cleared = {"intent": None, "outcome": "pending", "error_code": None, "error_message": None}
    assert life.answered(doubt, Step.CREATED) == {"step": "created", **cleared}
    assert life.confirmed(item("created", "confirm")) == {"step": "confirmed", **cleared}
    assert life.settled(item("confirmed")) == {"step": "final", **cleared,
                                               "outcome": "settled"}
    assert life.expired(item("created", attempt=2)) == {"step": "new", "intent": None,
                                                        "attempt": 3}
    assert life.retried(item("final", outcome="failed", lineage=2, attempt=3)) == {
        "step": "new", "intent": None, "attempt": 1, "lineage": 3, **cleared}
    assert life.resolved(item("final", outcome="unknown"), Outcome.FAILED, "not there") == {
        "step": "final", "intent": None, "outcome": "failed", "error_code": "resolved",
        "error_message": "by hand: not there"}
    assert life.withheld(todo) == {"outcome": "awaiting_confirm"}


def test_moves_refused_whatever_the_state() -> None:
    doubt = item("quoted", "transaction")
    with pytest.raises(IllegalMove, match="send confirm while transaction is in doubt"):
        life.send(doubt, Call.CONFIRM)  # never a next call while one is in doubt
    with pytest.raises(IllegalMove, match="no move from in_doubt"):
        life.expired(doubt)  # a new attempt would leave the transaction unlearnt
    with pytest.raises(IllegalMove, match="expired at step new"):
        life.expired(item())
    with pytest.raises(IllegalMove, match="confirmed, settled and failed are moves"):
        life.answered(item(), Step.CONFIRMED)
    with pytest.raises(IllegalMove, match="polled unknown for conflict"):
        life.polled_unknown(item("confirmed"), Reason.CONFLICT, "")
    with pytest.raises(IllegalMove, match="conflict for payee"):
        life.conflict(item(), Reason.PAYEE, "")
    with pytest.raises(IllegalMove, match="held for changed"):
        life.hold(item(), Reason.CHANGED, "")
    with pytest.raises(IllegalMove, match="reconciled as unknown"):
        life.reconciled(item("final", outcome="settled"), Outcome.UNKNOWN, None, None)
    with pytest.raises(IllegalMove, match="resolved as pending"):
        life.resolved(item("final", outcome="unknown"), Outcome.PENDING, "")
    with pytest.raises(IllegalMove, match="^intent, step written as a fact"):
        life.facts_only({"status": "70000", "step": "final", "intent": None})
    life.facts_only({"status": "70000", "error_code": "30200"})


def test_the_plans_actions() -> None:
    assert set(life.TO_PAY) | set(life.SKIPPED) == set(PlanAction)
    assert not set(life.TO_PAY) & set(life.SKIPPED)
    assert set(life.LISTED) <= set(PlanAction) - {PlanAction.NEW, PlanAction.RESUME}


# ---------------------------------------------------------------- the state's own writes
def test_the_plans_holds_releases_changes_and_a_resolve_write_what_the_moves_say(
        tmp_path: Path) -> None:
    with open_state(tmp_path / "s.sqlite") as store:
        fresh = [ItemRecord(e, JOB, "remittance", row, fingerprint=e)
                 for row, e in enumerate(("held", "released", "resolved", "changed"), 2)]
        store.insert_items(fresh)
        store.update_item("changed", **life.answered(fresh[3], Step.QUOTED))
        store.update_item("released", **life.hold(fresh[1], Reason.PAYEE, "no match"))
        store.update_item("resolved", **life.unknown(fresh[2], None, "the pay was lost"))
        store.clear_plan(JOB)
        store.stage_plan(JOB, [Staged("held", 2, PlanAction.DUPLICATE, fingerprint="held",
                                      why="the same payment as pay-b"),
                               Staged("released", 3, PlanAction.RESUME,
                                      fingerprint="released"),
                               Staged("changed", 5, PlanAction.CHANGED, fingerprint="new")])
        before = {e: store.item(e) for e in ("held", "released", "resolved", "changed")}
        store.record_plan(JOB, "remittance", "its row changed")
        store.resolve(JOB, "resolved", "failed", "the bank says no")
        for external_id, changes in (
                ("held", life.hold(fresh[0], Reason.DUPLICATE, "the same payment as pay-b")),
                ("released", life.release(before["released"])),
                ("resolved", life.resolved(before["resolved"], Outcome.FAILED,
                                           "the bank says no")),
                ("changed", life.conflict(before["changed"], Reason.CHANGED,
                                          "its row changed"))):
            after = store.item(external_id)
            assert after is not None
            assert {k: getattr(after, k) for k in changes} == changes, external_id
