"""Cooperating workers at the level of the state: claims with a heartbeat, a job's steps done
once, the last worker's finish, the job's shared rate slot and its staged plan. Two store
objects on one state are two workers; with PostgreSQL they may run at once, on threads of
their own."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from runner.state import ItemRecord, StateStore, open_state
from runner.state.records import Staged

JOB = "pay-2026-11"


@pytest.fixture
def two(where: Path | str) -> Iterator[tuple[StateStore, StateStore]]:
    with open_state(where) as a, open_state(where) as b:
        a.insert_items([ItemRecord(f"e{i}", JOB, "remittance", i) for i in range(1, 11)])
        yield a, b


def ids(records: list[ItemRecord]) -> list[str]:
    return [r.external_id for r in records]


def test_a_claimed_item_is_one_workers_until_released_or_expired(
        two: tuple[StateStore, StateStore]) -> None:
    a, b = two
    assert ids(a.claim_next(JOB, "A", 3, 60, "r1:work")) == ["e1", "e2", "e3"]
    assert ids(b.claim_next(JOB, "B", 3, 60, "r1:work")) == ["e4", "e5", "e6"]
    a.update_item("e7", step="final", outcome="settled")
    assert ids(b.claim_next(JOB, "B", 10, 0, "r1:work")) == ["e8", "e9", "e10"]
    assert a.refresh_claims(JOB, "A", 60) == 3
    # B's last claims had no time at all: as if B died; A takes them over.
    assert ids(a.claim_next(JOB, "A", 10, 60, "r1:work")) == ["e8", "e9", "e10"]
    assert b.refresh_claims(JOB, "B", 60) == 3  # only e4-e6 are still B's
    a.release_claims(JOB, "A", ["e1"])
    # A pass takes an item once; the next takes it again, and nothing a live worker holds.
    assert b.claim_next(JOB, "B", 10, 60, "r1:work") == []
    assert ids(b.claim_next(JOB, "B", 10, 60, "r1:poll0")) == ["e1"]
    item = a.item("e1")
    assert item is not None and item.external_id == "e1"  # claims are not the item's


def test_the_last_worker_to_finish_is_the_one_that_writes_the_summary(
        two: tuple[StateStore, StateStore]) -> None:
    a, b = two
    a.claim_next(JOB, "A", 5, 60, "r1:work")
    b.claim_next(JOB, "B", 5, 60, "r1:work")
    assert a.finish_job(JOB, "A", "round-1") is False  # B still works
    assert b.finish_job(JOB, "B", "round-1") is True
    assert a.finish_job(JOB, "A", "round-1") is False  # once per key
    assert a.finish_job(JOB, "A", "round-2") is True


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
        setup.insert_items([ItemRecord(f"e{i}", JOB, "remittance", i) for i in range(200)])
    taken: dict[str, list[str]] = {}
    steps: list[str] = []
    slots: list[float] = []

    def work(name: str) -> None:
        with open_state(where) as store:
            with store.job_step(JOB, "plan", "d1") as mine:
                if mine:
                    steps.append(name)
            mine_all = taken.setdefault(name, [])
            while batch := store.claim_next(JOB, name, 7, 60, "d1:work"):
                mine_all += ids(batch)
                for record in batch:
                    store.update_item(record.external_id, outcome="settled")
                slots.append(store.rate_slot(JOB, 0.01, now=0.0))
            if store.finish_job(JOB, name, "d1"):
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


def test_the_last_pages_of_a_pass_are_shared_among_the_live_workers(
        where: Path | str) -> None:
    with open_state(where) as a, open_state(where) as b, contextlib.ExitStack() as workers:
        a.insert_items([ItemRecord(f"e{i}", JOB, "remittance", i) for i in range(40)])
        workers.enter_context(a.join(JOB)).started(a.start_run(JOB, "job.yaml"))
        if a.shared:  # a second worker of the job (SQLite's lease lets one run at a time)
            workers.enter_context(b.join(JOB)).started(b.start_run(JOB, "job.yaml"))
        pages = [len(s.claim_next(JOB, name, 32, 60, "r1:work"))
                 for s, name in ((a, "A"), (b, "B"), (a, "A"), (b, "B"))]
    # 40 left for two workers: a share of 20 (in steps of 8: 24), then 8 of 16, then 8.
    assert pages == ([24, 8, 8, 0] if a.shared else [32, 8, 0, 0])


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


def test_a_page_given_up_unfinished_is_taken_over_in_the_same_pass(
        two: tuple[StateStore, StateStore]) -> None:
    a, b = two
    given_up = ids(a.claim_next(JOB, "A", 4, 60, "r1:work"))
    assert given_up == ["e1", "e2", "e3", "e4"]
    a.expire_claims(JOB, "A")  # A stops in the middle of its page (an error, a signal)
    assert a.finish_job(JOB, "A", "r1") is True  # no live claim: A may end the round ...
    # ... and what it gave up is still anyone's to take, first, though the pass is past it.
    assert ids(b.claim_next(JOB, "B", 4, 60, "r1:work")) == given_up
    assert ids(b.claim_next(JOB, "B", 4, 60, "r1:work")) == ["e5", "e6", "e7", "e8"]


def test_poll_passes_walked_by_a_worker_that_died_start_again(
        two: tuple[StateStore, StateStore]) -> None:
    """A worker that polled, then died, leaves its round's poll passes walked to their end;
    items confirmed after it went by would be left unread by the round's other workers:
    a worker that starts polling starts those passes again, and no other."""
    a, _ = two
    for name in ("r1:poll0", "r1:work"):
        while a.claim_next(JOB, "A", 4, 60, name):
            pass
        a.release_claims(JOB, "A")
    assert a.claim_next(JOB, "A", 4, 60, "r1:poll0") == []  # walked past every item
    a.restart_passes(JOB, "r1:poll")
    assert ids(a.claim_next(JOB, "A", 4, 60, "r1:poll0"))[:1] == ["e1"]
    assert a.claim_next(JOB, "A", 4, 60, "r1:work") == []  # the other passes go on
