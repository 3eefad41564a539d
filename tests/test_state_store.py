"""The state store's interface, as every backend must keep it: runs and the lease (rule 6),
items and who holds an external_id (rule 7), an attempt's intent and outcome committed
around a call (rule 2), the latest run, the operations sent, resolving by hand, and the payee
checks' answers, acceptances and held items.

The ``store`` fixture is parametrized by backend (``where``, in conftest): a new backend runs
these same tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from runner import lifecycle
from runner.errors import LeaseHeld, StateError, StateMissing
from runner.state import (
    LEASE_TTL,
    Approval,
    ItemRecord,
    PlanFileRecord,
    RetryRecord,
    Signer,
    StateStore,
    derived_ref,
    empty_store,
    open_state,
)
from runner.state.records import PayeeAcceptance, PayeeCheck, Staged

JOB = "pay-2026-11"


@pytest.fixture
def store(where: Path | str) -> Iterator[StateStore]:
    with open_state(where) as opened:
        yield opened


def record(external_id: str, row: int = 2, job: str = JOB, kind: str = "remittance"
           ) -> ItemRecord:
    return ItemRecord(external_id, job, kind, row, fingerprint=f"f-{external_id}",
                      summary='{"beneficiary": "Jo"}')


def test_items_are_inserted_read_back_typed_and_changed(store: StateStore) -> None:
    store.insert_items([record("b", 3), record("a", 2)])
    a = store.item("a")
    assert a is not None and (a.step, a.outcome, a.attempt, a.intent) == (
        "new", "pending", 1, None)
    assert a.created_at is not None and a.created_at.endswith("Z")
    store.update_item("a", step="quoted", source_currency="EUR",
                      source_amount=Decimal("10.50"), fee=Decimal("1.5"), quotation_id=7)
    a = store.item("a")
    assert a is not None
    assert (a.step, a.source_currency, a.source_amount, a.fee, a.quotation_id) == (
        "quoted", "EUR", Decimal("10.50"), Decimal("1.5"), 7)
    assert [r.external_id for r in store.items(JOB)] == ["a", "b"]  # in row order
    assert store.item("nope") is None and list(store.items("other")) == []


def test_owners_tell_which_job_holds_an_external_id(store: StateStore) -> None:
    store.insert_items([record("a"), record("z", job="other")])
    many = [f"x{i}" for i in range(1200)] + ["a", "z"]  # more than one query's worth
    assert store.owners(many) == {"a": JOB, "z": "other"}


def test_an_attempt_leaves_the_item_in_doubt_until_its_outcome(store: StateStore) -> None:
    store.insert_items([record("a")])
    run_id = store.start_run(JOB, "job.yaml")
    first = store.begin_attempt(run_id, "a", "quotation", {"external_id": "a"})
    item = store.item("a")
    assert item is not None and (item.intent, lifecycle.state(item)) == ("quotation", "in_doubt")
    store.end_attempt(first, "a", "in_doubt", code="1000500", message="lost",
                      resolved=False)
    item = store.item("a")
    assert item is not None and item.intent == "quotation"
    second = store.begin_attempt(run_id, "a", "quotation", {"external_id": "a"})
    store.end_attempt(second, "a", "ok", http_status=201, step="quoted",
                      source_amount=Decimal("10.00"))
    item = store.item("a")
    assert item is not None and (item.intent, item.step, item.source_amount) == (
        None, "quoted", Decimal("10.00"))
    assert [(x.id, x.step, x.result, x.code, x.run_id) for x in store.attempts("a")] == [
        (first, "quotation", "in_doubt", "1000500", run_id),
        (second, "quotation", "ok", None, run_id)]
    assert store.attempts("a")[1].http_status == 201


def test_an_answer_is_recorded_with_the_next_calls_intent(store: StateStore) -> None:
    store.insert_items([record("a"), record("b", 3)])
    run_id = store.start_run(JOB, "job.yaml")
    quoted = store.begin_attempt(run_id, "a", "quotation", {"external_id": "a"})
    created = store.begin_attempt(run_id, "a", "transaction", {"quotation_id": 7},
                                  answered=(quoted, {"step": "quoted", "quotation_id": 7,
                                                     "source_amount": Decimal("9.50")}))
    item = store.item("a")
    assert item is not None and (item.intent, item.step, item.quotation_id,
                                 item.source_amount) == ("transaction", "quoted", 7,
                                                         Decimal("9.50"))
    attempts = store.attempts("a")
    assert [(x.id, x.step, x.result, x.http_status) for x in attempts] == [
        (quoted, "quotation", "ok", 200), (created, "transaction", None, None)]
    assert attempts[0].finished_at is not None and attempts[1].finished_at is None
    other = store.item("b")
    assert other is not None and (other.intent, other.step) == (None, "new")


def test_one_live_run_holds_a_jobs_lease(store: StateStore, where: Path | str) -> None:
    """With SQLite; with PostgreSQL a second run is a worker of the same job, with a lease
    of its own: the job shows as running while either lives. The lease is the worker's
    from ``join`` to the end of its block."""
    run_id = store.start_run(JOB, "job.yaml")
    first = store.join(JOB).__enter__()
    first.started(run_id)
    with open_state(where) as other:
        if store.shared:
            second = other.start_run(JOB, "job.yaml")
            with other.join(JOB) as worker:
                worker.started(second)
                first.__exit__(None, None, None)
                latest = store.latest_run(JOB)
                assert latest is not None and (latest.id, latest.state) == (second, "running")
            first = store.join(JOB).__enter__()
            first.started(run_id)
        else:
            with pytest.raises(LeaseHeld) as held, other.join(JOB):
                pass
            assert held.value.exit_code == 75
            assert f"pid {os.getpid()}" in str(held.value)
            assert f"(run {run_id})" in str(held.value)
        with other.join("another-job"):  # leases are per job
            pass
    latest = store.latest_run(JOB)
    assert latest is not None and (latest.id, latest.state) == (run_id, "running")
    first.__exit__(None, None, None)
    store.end_run(run_id, 0, {"settled": 3})
    latest = store.latest_run(JOB)
    assert latest is not None
    assert (latest.state, latest.exit_code, latest.counts) == ("ended", 0, {"settled": 3})
    with store.join(JOB):  # free again
        pass


def test_a_plan_file_is_kept_once_and_its_run_reopened_when_no_one_runs_it(
        store: StateStore, where: Path | str) -> None:
    plan = PlanFileRecord("p1", JOB, "d1", '{"items": []}', "2026-11-25T09:14:03Z")
    store.note_plan_file(plan)
    store.note_plan_file(PlanFileRecord("p1", JOB, "another digest", "{}", "later"))
    assert (store.plan_file("p1"), store.plan_file("p2")) == (plan, None)  # kept once
    run_id = store.start_run(JOB, "job.yaml")
    with store.join(JOB) as worker:
        worker.started(run_id)
        store.note_plan_applied("p1", run_id)
        kept = store.plan_file("p1")
        assert kept is not None and kept.run_id == run_id
        with open_state(where) as other:  # its run is live: not reopened
            assert not other.reopen_run(run_id)
    store.end_run(run_id, 1, {"settled": 2})
    assert store.reopen_run(run_id)
    latest = store.latest_run(JOB)
    assert latest is not None and (latest.id, latest.ended_at, latest.exit_code) == (
        run_id, None, None)
    approval = Approval("d1", "alice@example.com", "fin-01", "2026-11-25T09:14:03Z",
                        "bob@example.com", "cron", "srv-01", "2026-11-25T10:00:00Z",
                        "SHA256:a", (Signer("plan", "alice@example.com", "SHA256:a", "t0"),
                                     Signer("approve", "bob@example.com", "SHA256:b", "t1")))
    store.note_approval(run_id, approval)
    store.note_approval(run_id, approval)  # once per run
    store.end_run(run_id, 0, {"settled": 3})
    [run] = store.runs(JOB)
    assert (run.id, run.exit_code, run.approval) == (run_id, 0, approval)


def test_the_latest_run_and_what_its_checks_found(store: StateStore) -> None:
    assert store.latest_run(JOB) is None
    first = store.start_run(JOB, "job.yaml")
    store.end_run(first, 1, {"failed": 1})
    refused = store.start_run(JOB, "job.yaml")  # a start the lease refused: no end
    latest = store.latest_run(JOB)  # the latest that ended
    assert latest is not None and (latest.id, latest.state) == (first, "ended")
    second = store.start_run(JOB, "job.yaml")
    with store.join(JOB) as worker:
        worker.started(second)
        store.note_checks(second, invalid=2, refused=1)
        latest = store.latest_run(JOB)  # the one running
        assert latest is not None and (latest.id, latest.state, latest.counts) == (
            second, "running", {"invalid": 2, "refused": 1})
    latest = store.latest_run(JOB)  # died without an end: nothing ended since the first
    assert latest is not None and (latest.id, latest.state) == (first, "ended")
    assert refused < second and LEASE_TTL > 0


def test_operations_sent_are_those_that_reached_the_provider(store: StateStore) -> None:
    store.insert_items([record(e, kind="charge") for e in ("sent", "settled", "new", "gone")]
                       + [record("pay", kind="remittance")])
    run_id = store.start_run(JOB, "job.yaml")
    store.update_item("sent", provider_ref="PO1", destination_amount=Decimal("5"))
    store.begin_attempt(run_id, "sent", "charge", {})
    store.update_item("settled", provider_ref="PO2", outcome="settled")
    store.update_item("new", provider_ref="PO1")
    store.update_item("gone", provider_ref="PO1", outcome="failed")
    store.update_item("pay", provider_ref="PO1", outcome="settled")
    found = store.operations_sent(("charge", "refund", "cancel"))
    assert sorted(r.external_id for r in found) == ["sent", "settled"]
    assert [r.external_id for r in store.operations_sent(("charge",), "PO1")] == ["sent"]


def test_only_unknown_or_conflicting_items_are_resolved_by_hand(store: StateStore) -> None:
    store.insert_items([record("u"), record("s")])
    store.update_item("u", outcome="unknown", step="final")
    store.update_item("s", outcome="settled", step="final")
    with pytest.raises(StateError, match="s is settled: only unknown or conflict items"):
        store.resolve(JOB, "s", "failed", "checked")
    with pytest.raises(StateError, match="x: no such item in job"):
        store.resolve(JOB, "x", "failed", "checked")
    store.resolve(JOB, "u", "settled", "found DONE in the back office")
    u = store.item("u")
    assert u is not None and (u.outcome, u.error_message) == (
        "settled", "by hand: found DONE in the back office")
    assert [(a.step, a.result) for a in store.attempts("u")] == [("resolve", "settled")]


def test_a_retry_starts_the_items_next_lineage_and_is_kept(store: StateStore) -> None:
    store.insert_items([record("b")])
    store.update_item("b", step="final", outcome="failed", status="30201",
                      error_code="30201", error_message="REJECTED-BARRED-BENEFICIARY",
                      transaction_id=7)
    run_id = store.start_run(JOB, "job.yaml")
    store.start_retry(RetryRecord("b", JOB, 2, "b-f2", "b", "30201", "30201",
                                  "REJECTED-BARRED-BENEFICIARY", True, run_id),
                      step="new", outcome="pending", transaction_id=None, error_code=None,
                      fingerprint="f-new")
    b = store.item("b")
    assert b is not None and (b.lineage, b.ref, b.step, b.outcome, b.transaction_id,
                              b.fingerprint) == (2, "b-f2", "new", "pending", None, "f-new")
    [retry] = store.retries(JOB)
    assert (retry.previous_ref, retry.ref, retry.previous_status, retry.changed,
            retry.run_id) == ("b", "b-f2", "30201", True, run_id)
    assert retry.at is not None and store.retries("other") == []
    assert derived_ref("b", 2, 3) == "b-f2-r3" and derived_ref("b") == "b"


def test_a_run_keeps_its_closing_message_and_who_planned_and_approved(
        store: StateStore) -> None:
    run_id = store.start_run(JOB, "job.yaml")
    approval = Approval("ab12", "alice", "fin-01", "2026-11-25T09:00:00Z", "bob", "bob",
                        "fin-02", "2026-11-25T10:00:00Z")
    store.note_approval(run_id, approval)
    store.end_run(run_id, 4, {}, "EUR 64.50 needed, 40.00 available")
    latest = store.latest_run(JOB)
    assert latest is not None and (latest.exit_code, latest.message, latest.approval) == (
        4, "EUR 64.50 needed, 40.00 available", approval)


def test_a_state_that_is_only_read_is_never_made_empty(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    with pytest.raises(StateMissing) as raised:
        open_state(missing, create=False)
    assert raised.value.exit_code == 2 and not missing.exists()
    with empty_store() as empty:  # what a plan reads before a job's first run
        assert list(empty.items(JOB)) == [] and empty.latest_run(JOB) is None


def test_payee_checks_and_acceptances_are_kept_and_replaced(store: StateStore) -> None:
    first = PayeeCheck("acct-1", "money_transfer", 1, "msisdn ********0200", "AVAILABLE",
                       ("Wanjiru Kamau",), 1_800_000_000.5)
    closed = PayeeCheck("acct-2", "money_transfer", 1, "msisdn ********9402", "UNAVAILABLE",
                        None, 1_800_000_001.0)
    store.keep_payee_checks([first, closed])
    assert store.payee_checks(["acct-1", "acct-2", "acct-3"]) == {"acct-1": first,
                                                                  "acct-2": closed}
    again = PayeeCheck("acct-1", "money_transfer", 1, "msisdn ********0200", "AVAILABLE",
                       ("Wanjiru Kamau", "W Kamau"), 1_800_000_100.0)
    store.keep_payee_checks([again])
    assert store.payee_checks(["acct-1"]) == {"acct-1": again}
    accepted = PayeeAcceptance("acct-1", "Peter Otieno", "bob", JOB, "a", "bob", "fin-02",
                               "2026-11-25T09:14:03Z", "his legal name")
    store.payees.accept_payee(accepted)
    # Each person's acceptance is a row of its own; a person's second one replaces the first.
    carol = PayeeAcceptance("acct-1", "Peter Otieno", "SHA256:carol", "other", "b", "carol",
                            "fin-03", "2026-11-26T09:14:03Z", "seen his passport", "SIG")
    store.payees.accept_payee(carol)
    again = PayeeAcceptance("acct-1", "Peter Otieno", "bob", JOB, "a", "bob", "fin-02",
                            "2026-11-27T09:14:03Z", "called him again")
    store.payees.accept_payee(again)
    store.payees.accept_payee(PayeeAcceptance("acct-9", "Awa Diop", "eve", JOB, "c", "eve",
                                              "fin-04", "2026-11-26T10:00:00Z", "other"))
    assert store.payees.acceptances(["acct-1", "acct-3"]) == [carol, again]
    assert store.payees.acceptances(["acct-3"]) == []


def test_a_plan_records_what_its_payee_checks_hold(store: StateStore) -> None:
    store.insert_items([record("resumed", 2), record("paid", 3)])
    store.update_item("paid", step="final", outcome="settled")
    held = '{"result": "no_match"}'
    store.clear_plan(JOB)
    store.stage_plan(JOB, [
        Staged("new-held", 4, "held", "new-held", "f", summary='{"beneficiary": "Jo"}',
               why="payee check: no match", payee=held),
        Staged("resumed", 2, "held", "resumed", "f-resumed", why="payee check: no match",
               payee=held),
        Staged("paid", 3, "settled", "paid", "f-paid"),
        Staged("fresh", 5, "new", "fresh", "f", payee='{"result": "match"}')])
    store.record_plan(JOB, "remittance", "changed")
    found = {r.external_id: (r.outcome, r.error_code, r.error_message, r.payee)
             for r in store.items(JOB)}
    assert found == {
        "resumed": ("held", "payee", "payee check: no match", held),
        "paid": ("settled", None, None, None),
        "new-held": ("held", "payee", "payee check: no match", held),
        "fresh": ("pending", None, None, '{"result": "match"}')}
    # The next plan pays the held items (accepted, or their rows fixed): pending again.
    store.clear_plan(JOB)
    store.stage_plan(JOB, [Staged("new-held", 4, "resume", "new-held", "f", payee=held),
                           Staged("resumed", 2, "resume", "resumed", "f-resumed")])
    store.record_plan(JOB, "remittance", "changed")
    assert {r.external_id: (r.outcome, r.error_message) for r in store.items(JOB)
            if r.external_id in ("new-held", "resumed")} == {
        "new-held": ("pending", None), "resumed": ("pending", None)}


def test_what_reconcile_found_is_written_only_onto_the_item_it_read(store: StateStore) -> None:
    store.insert_items([record("a")])
    store.update_item("a", step="final", outcome="settled", status="70000")
    read = store.item("a")
    assert read is not None
    assert store.note_found(read, "a: reversed after it settled", outcome="failed",
                            status="80000", error_code="80000", error_message="REVERSED")
    found = store.item("a")
    assert found is not None and (found.outcome, found.status, found.error_message) == (
        "failed", "80000", "REVERSED")
    assert [(a.step, a.result, a.message) for a in store.attempts("a")] == [
        ("reconcile", "failed", "a: reversed after it settled")]
    # Read before a run moved the item on: not written, no attempt row.
    assert not store.note_found(read, "stale", earlier_paid="[]")
    assert store.item("a").earlier_paid is None  # type: ignore[union-attr]
    assert len(store.attempts("a")) == 1


def test_the_estimated_fees_go_with_the_amounts_left_to_confirm(store: StateStore) -> None:
    store.set_outstanding(JOB, {"EUR": Decimal("1000.00")}, {"EUR": Decimal("154.00")})
    assert store.reduce_outstanding(JOB, {"EUR": Decimal("640.00")}) == {"EUR": Decimal("415.44")}
    assert store.reduce_outstanding(JOB, {"EUR": Decimal("360.00")}) == {"EUR": Decimal("0.00")}
