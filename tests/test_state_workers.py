"""Cooperating workers at the level of the state: the job's queue (claims held while their
worker's heartbeat is fresh, calls in doubt due first, polls due after their wait), a job's
steps done once, the last worker's finish, the job's shared rate slot and its staged plan.
Two store objects on one state are two workers; with PostgreSQL they may run at once, on
threads of their own."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from runner.lifecycle import Outcome, Step
from runner.state import ItemRecord, StateStore, open_state
from runner.state.records import Staged

JOB = "pay-2026-11"


def plan(store: StateStore, n: int, first: int = 1, action: str = "new") -> None:
    """A plan that pays items e<first> ..: recorded, it makes them due."""
    store.clear_plan(JOB)
    store.stage_plan(JOB, [Staged(f"e{i}", i, action, f"e{i}", f"f{i}", False, None, None,
                                  None, "") for i in range(first, first + n)])
    store.record_plan(JOB, "remittance", "changed")


@pytest.fixture
def two(where: Path | str) -> Iterator[tuple[StateStore, StateStore]]:
    with open_state(where) as a, open_state(where) as b:
        plan(a, 10)
        yield a, b


def ids(records: list[ItemRecord]) -> list[str]:
    return [r.external_id for r in records]


def test_a_claimed_item_is_one_live_workers_until_given_back(
        two: tuple[StateStore, StateStore]) -> None:
    a, b = two
    with a.join(JOB) as worker:
        me = worker.name
        assert ids(a.claim(JOB, me, 3, 60)) == ["e1", "e2", "e3"]
        # Claims of a worker with no heartbeat (it died, or never joined) hold nothing.
        assert ids(b.claim(JOB, "gone", 3, 60)) == ["e4", "e5", "e6"]
        assert ids(a.claim(JOB, me, 3, 60)) == ["e4", "e5", "e6"]
        a.update_item("e7", step="final", outcome="settled")  # final: never due
        assert ids(a.claim(JOB, me, 10, 60)) == ["e8", "e9", "e10"]
        assert b.claim(JOB, "other", 10, 60) == []  # a live worker holds every one
        assert a.claimants(JOB) == [me]
        # Given back once worked: done for this round, but what is to be worked again.
        a.release(JOB, me, ["e1", "e2"], again=["e2"])
        assert ids(b.claim(JOB, "other", 10, 60)) == ["e2"]
        b.release(JOB, "other", ["e2"])
        # Given back unfinished (the worker stops): due as they were.
        a.give_up(JOB, me)
        assert a.claimants(JOB) == []
        taken = ids(b.claim(JOB, "other", 10, 60))
        assert taken == ["e3", "e4", "e5", "e6", "e8", "e9", "e10"]
        b.release(JOB, "other", taken)
    item = a.item("e1")
    assert item is not None and item.external_id == "e1"  # claims are not the item's
    assert b.claim(JOB, "other", 10, 60) == []  # e1 waits for the next plan
    plan(a, 1, action="resume")
    assert ids(b.claim(JOB, "other", 10, 60)) == ["e1"]


def test_calls_in_doubt_are_due_first_and_polls_after_their_wait(where: Path | str) -> None:
    with open_state(where) as store, store.join(JOB) as worker:
        w = worker.name
        plan(store, 4)
        store.update_item("e3", intent="confirm")  # sent, its answer lost
        store.update_item("e4", step="confirmed", outcome="pending")  # polling
        plan(store, 4, action="resume")  # the next run's plan
        assert store.claim(JOB, w, 10, 60, until=store.clock() - 60) == []
        assert [ids(store.claim(JOB, w, 1, 60)) for _ in range(4)] == [
            ["e3"], ["e1"], ["e2"], ["e4"]]
        # e4 read, not final yet: due again after its wait.
        store.release(JOB, w, ["e1", "e2", "e3"], polled={120.0: ["e4"]})
        assert store.claim(JOB, w, 10, 60) == []
        wait = store.next_due(JOB)
        assert wait is not None and 60 < wait <= 120
        assert store.next_due(JOB, until=store.clock()) is None
        record = store.item("e4")
        assert record is not None and record.polls == 1


@pytest.mark.parametrize("where", ["postgresql"], indirect=True)
def test_the_last_worker_to_finish_is_the_one_that_writes_the_summary(
        two: tuple[StateStore, StateStore]) -> None:
    a, b = two
    with a.join(JOB) as wa, b.join(JOB) as wb:
        a.claim(JOB, wa.name, 5, 60)
        b.claim(JOB, wb.name, 5, 60)
        assert a.finish_job(JOB, wa.name, "round-1", 60) is False  # B still works
        assert b.finish_job(JOB, wb.name, "round-1", 60) is True
        assert a.finish_job(JOB, wa.name, "round-1", 60) is False  # once per key
        assert a.finish_job(JOB, wa.name, "round-2", 60) is True


def test_a_jobs_step_is_done_once_per_digest(two: tuple[StateStore, StateStore]) -> None:
    a, b = two
    with pytest.raises(RuntimeError), a.job_step(JOB, "plan", "d1") as mine:
        assert mine is True
        raise RuntimeError("the plan failed")  # not recorded: the next one does it
    with b.job_step(JOB, "plan", "d1") as mine:
        assert mine is True
    with a.job_step(JOB, "plan", "d1") as mine:
        assert mine is False
    with a.job_step(JOB, "plan", "d2") as mine:  # new inputs: the step again
        assert mine is True


def test_the_rate_slots_are_shared_and_spaced(two: tuple[StateStore, StateStore]) -> None:
    a, b = two
    assert a.rate_slot(JOB, 0.5, now=100.0) == 100.0
    assert b.rate_slot(JOB, 0.5, now=100.0) == 100.5
    assert a.rate_slot(JOB, 0.5, now=100.1, count=4) == 101.0
    assert b.rate_slot(JOB, 0.5, now=100.2) == 103.0
    assert a.rate_slot(JOB, 0.5, now=200.0) == 200.0  # an idle job starts afresh
    assert a.rate_slot("other", 0.5, now=100.0) == 100.0


@pytest.mark.parametrize("where", ["postgresql"], indirect=True)
def test_workers_at_once_never_share_an_item_nor_a_step(where: Path | str) -> None:
    with open_state(where) as setup:
        plan(setup, 200, first=0)
    taken: dict[str, list[str]] = {}
    steps: list[str] = []
    slots: list[float] = []

    def work(name: str) -> None:
        with open_state(where) as store, store.join(JOB) as worker:
            with store.job_step(JOB, "plan", "d1") as mine:
                if mine:
                    steps.append(name)
            mine_all = taken.setdefault(name, [])
            while batch := store.claim(JOB, worker.name, 7, 60):
                mine_all += ids(batch)
                for record in batch:
                    store.update_item(record.external_id, step="final", outcome="settled")
                store.release(JOB, worker.name, ids(batch))
                slots.append(store.rate_slot(JOB, 0.01, now=0.0))
            if store.finish_job(JOB, worker.name, "d1", 60):
                steps.append(f"finish:{name}")

    workers = [threading.Thread(target=work, args=(f"W{n}",)) for n in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    every = [e for got in taken.values() for e in got]
    assert sorted(every) == sorted(f"e{i}" for i in range(200))  # each once
    assert len(steps) == 2 and steps[0].startswith("W") and steps[1].startswith("finish:")
    assert len(set(slots)) == len(slots)  # no slot given twice


def test_the_last_windows_are_shared_among_the_live_workers(where: Path | str) -> None:
    with open_state(where) as a, open_state(where) as b, contextlib.ExitStack() as workers:
        plan(a, 40, first=0)
        wa = workers.enter_context(a.join(JOB))
        wa.started(a.start_run(JOB, "job.yaml"))
        names = [(a, wa.name), (a, wa.name)]
        if a.shared:  # a second worker of the job (SQLite lets one run at a time)
            wb = workers.enter_context(b.join(JOB))
            wb.started(b.start_run(JOB, "job.yaml"))
            names = [(a, wa.name), (b, wb.name)]
        windows = [len(s.claim(JOB, name, 32, 60)) for s, name in names * 2]
    # 40 due for two workers: a share of 20 (in steps of 8: 24), then the 16 left (a share of
    # the 40 not started: 20), then none.
    assert windows == ([24, 16, 0, 0] if a.shared else [32, 8, 0, 0])


@pytest.mark.parametrize("where", ["postgresql"], indirect=True)
def test_workers_claiming_one_after_another_take_windows_of_one_size(
        where: Path | str) -> None:
    """Workers that end their windows together claim one after the other: each takes its
    share of what is left to start (due, or claimed by another and not started), so their
    windows are of one size and they end together. An item another worker started is not
    counted."""
    with contextlib.ExitStack() as stack:
        stores = [stack.enter_context(open_state(where)) for _ in range(3)]
        plan(stores[0], 72)
        names = []
        for store in stores:
            worker = stack.enter_context(store.join(JOB))
            worker.started(store.start_run(JOB, "job.yaml"))
            names.append(worker.name)
        (a, b, c), (na, nb, nc) = stores, names
        # 72 to start, for three: 24 each (not 24, then a third of 48, then of 32: 16, 16).
        first = [a.claim(JOB, na, 32, 60), b.claim(JOB, nb, 32, 60), c.claim(JOB, nc, 32, 60)]
        assert [len(w) for w in first] == [24, 24, 24]
        for r in first[0]:  # the first worker starts its window: its items are not waiting
            a.update_item(r.external_id, step=Step.QUOTED)
        b.give_up(JOB, nb)
        c.give_up(JOB, nc)
        # 48 to start: a third of them, in steps of 8 (with the 24 started: 24).
        assert len(b.claim(JOB, nb, 32, 60)) == 16


def _claim_with(store: StateStore, name: str, together: threading.Barrier,
                windows: dict[str, int]) -> None:
    """One worker's claim of up to 64 items, once all are at the barrier: how many it got."""
    together.wait(timeout=30)
    windows[name] = len(store.claim(JOB, name, 64, 60))


@pytest.mark.parametrize("where", ["postgresql"], indirect=True)
def test_workers_claiming_at_once_each_take_their_share(where: Path | str) -> None:
    """Four workers claim at the same moment, round after round: what is left to start is
    read in one snapshot, so none counts an item twice (due before another's claim
    committed, claimed by it after) and takes more than its share, leaving another less."""
    with contextlib.ExitStack() as stack:
        stores = [stack.enter_context(open_state(where)) for _ in range(4)]
        names = []
        for store in stores:
            worker = stack.enter_context(store.join(JOB))
            worker.started(store.start_run(JOB, "job.yaml"))
            names.append(worker.name)
        for round_ in range(40):
            plan(stores[0], 96, first=round_ * 96)
            together = threading.Barrier(4)
            windows: dict[str, int] = {}
            threads = [threading.Thread(target=_claim_with, args=(s, n, together, windows))
                       for s, n in zip(stores, names, strict=True)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            assert sorted(windows.values()) == [24, 24, 24, 24], f"round {round_}"
            for store, name in zip(stores, names, strict=True):
                store.give_up(JOB, name)
            for i in range(round_ * 96, round_ * 96 + 96):  # this round's, out of the way
                stores[0].update_item(f"e{i}", step=Step.FINAL, outcome=Outcome.SETTLED)


def test_a_staged_plan_reads_back_as_it_was_staged(where: Path | str) -> None:
    staged = [Staged("e1", 1, "new", "e1", "f1", False, '{"to": "Ada"}', "EUR",
                     Decimal("10.25"), ""),
              Staged("e2", 2, "resume", "e2", "f2", True, None, None, None, "in doubt: 'x'\t\\"),
              Staged("e3", 3, "refused", why="held by job other")]
    with open_state(where) as store:
        store.stage_plan(JOB, staged[:2])
        store.stage_plan(JOB, staged[2:])
        assert store.staged(JOB, ["e1", "e2", "e3", "e4"]) == {s.external_id: s for s in staged}
        assert list(store.staged_with(JOB, ("new", "resume"))) == staged[:2]


def test_a_window_given_up_unfinished_is_taken_first(
        two: tuple[StateStore, StateStore]) -> None:
    a, b = two
    with a.join(JOB) as worker:
        given_up = ids(a.claim(JOB, worker.name, 4, 60))
        assert given_up == ["e1", "e2", "e3", "e4"]
        a.give_up(JOB, worker.name)  # it stops in the middle of its window
        assert a.finish_job(JOB, worker.name, "r1", 60) is True  # no live claim left
    # What it gave up is still due, and taken first.
    assert ids(b.claim(JOB, "B", 4, 60)) == given_up
    b.release(JOB, "B", given_up)
    assert ids(b.claim(JOB, "B", 4, 60)) == ["e5", "e6", "e7", "e8"]


def test_an_item_final_while_still_due_is_neither_claimed_nor_waited_for(
        where: Path | str) -> None:
    """A worker that dies mid-window leaves its items due though some of them went final (a
    move writes no due time): no claim takes them, and no worker waits for them."""
    with open_state(where) as store:
        plan(store, 2)
        store.update_item("e1", step="final", outcome="settled")
        store.update_item("e2", step="final", outcome="failed")
        assert store.claim(JOB, "w", 10, 60) == []
        assert store.next_due(JOB) is None
