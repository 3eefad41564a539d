"""Cooperating workers: several runs of one job at once on one PostgreSQL state, against a
loopback sandbox. They share the items (each worker pays some, every item is paid once),
the plan is made once and the summary written once, by the last to finish; a worker that
dies leaves its items claimed until its heartbeat goes stale, and the worker that takes them
over looks up first the call that was in doubt (rule 3)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import KEY, SECRET, Admin, Api
from engine_support import MT, confirmed, eur, posts, run, write_job

from runner.engine import windows
from runner.engine.batch import RunResult
from runner.state import ItemRecord, StateStore, open_state
from runner.state.records import Staged

JOB = "pay-2026-11"
ITEMS = 120


def rows(n: int) -> str:
    return "".join(f"e{i:04d},1,{10 + i % 7}.00,+2547{i:08d}\n" for i in range(n))


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows of a few items, so that every worker gets some of a small batch."""
    monkeypatch.setattr(windows, "FIRST_LEAST", 4)
    monkeypatch.setattr(windows, "FIRST_PER_WORKER", 2)
    monkeypatch.setattr(windows, "LARGEST", 8)


def test_workers_share_a_job_and_pay_every_item_once(
        sb: Any, adm: Admin, tmp_path: Path, pg_url: str, small_windows: None) -> None:
    job = write_job(tmp_path, sb, rows(ITEMS), prefix="w", concurrency=2)
    results: dict[str, RunResult] = {}
    start = threading.Barrier(3)

    def worker(name: str) -> None:
        start.wait()
        results[name] = run(job, pg_url, claim_ttl=30.0)

    threads = [threading.Thread(target=worker, args=(f"w{n}",)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)

    assert confirmed(sb) == {f"w-e{i:04d}": 1 for i in range(ITEMS)}
    assert posts(adm)["POST quotations"] == ITEMS  # 3 POSTs an item, nothing again
    cost = sum(Decimal(10 + i % 7) + Decimal("1.50") for i in range(ITEMS))
    assert eur(sb)["balance"] == Decimal("10000000.00") - cost
    # Every worker exited 0; one made the plan, one (the last to finish) the summary.
    assert sorted(r.exit_code for r in results.values()) == [0, 0, 0]
    assert sum(r.plan is not None for r in results.values()) == 1
    finished = [r for r in results.values() if r.summary is not None]
    assert len(finished) == 1 and finished[0].summary is not None
    assert finished[0].summary.counts == {"settled": ITEMS}
    # Each worker confirmed some of the items.
    with open_state(pg_url) as store:
        by_run = Counter(a.run_id for i in range(ITEMS)
                         for a in store.attempts(f"w-e{i:04d}") if a.step == "confirm")
        assert len(by_run) == 3 and sum(by_run.values()) == ITEMS, by_run
        assert store.claimants(JOB) == []  # every claim given back


@pytest.fixture
def other_worker(pg_url: str) -> Iterator[str]:
    """Another worker of the job (its name), on a state of its own: its heartbeat is fresh
    until the test ends (or forgets it, as the heartbeat of a worker that died goes
    stale)."""
    with open_state(pg_url) as store, store.join(JOB) as worker:
        yield worker.name


def claimed_by_a_planner(store: StateStore, worker: str, prefix: str) -> list[ItemRecord]:
    """The job's plan recorded as a worker of the round records it (its items made due),
    then the first two of them claimed by ``worker``."""
    store.clear_plan(JOB)
    store.stage_plan(JOB, [Staged(r.external_id, r.row, "resume")
                           for r in store.items(JOB) if r.external_id.startswith(prefix)])
    store.record_plan(JOB, "remittance", "changed")
    return store.claim(JOB, worker, 2, 600)


def test_a_dead_workers_items_are_taken_over_once_its_claims_expire_and_looked_up_first(
        sb: Any, adm: Admin, tmp_path: Path, pg_url: str,
        other_worker: str) -> None:
    job = write_job(tmp_path, sb, rows(4), prefix="w", concurrency=2)
    made = run(job, pg_url, confirm=False)
    assert made.exit_code == 0
    # Another worker of the round (the one that recorded its plan) claims two items, sends
    # the confirm of the first (the provider confirms it) and dies before its answer is
    # recorded: its heartbeat is fresh until it goes stale.
    dead = other_worker
    with open_state(pg_url) as store:
        claimed = claimed_by_a_planner(store, dead, "w")
        assert [r.external_id for r in claimed] == ["w-e0000", "w-e0001"]
        lost = claimed[0]
        store.begin_attempt(made_run(store), lost.external_id, "confirm",
                            {"transaction": lost.transaction_id})
    answer = Api(sb.url, (KEY, SECRET)).post(f"{MT}/transactions/{lost.transaction_id}/confirm")
    assert answer.status_code == 200, answer.text
    before = posts(adm)["POST confirm"]
    results: list[RunResult] = []
    worker = threading.Thread(target=lambda: results.append(
        run(job, pg_url, confirm_only=True, confirm=True, claim_ttl=30.0)))
    worker.start()

    # The live worker confirms what is free, and waits for what the dead one holds.
    until(lambda: posts(adm)["POST confirm"] - before == 2)
    until(lambda: held_by_others(pg_url, dead) == 0)  # (its windows given back)
    with open_state(pg_url) as store:
        assert store.claimants(JOB) == [dead] and worker.is_alive()
        record = store.item(lost.external_id)
        assert record is not None and record.intent == "confirm"
        store.forget_worker(JOB, dead)  # as its heartbeat going stale does
    worker.join(timeout=120)

    assert results[0].summary is not None
    assert results[0].exit_code == 0, (results[0].summary.counts, results[0].message)
    assert confirmed(sb) == {f"w-e{i:04d}": 1 for i in range(4)}
    # The confirm in doubt was looked up, not sent again: one more for the other item.
    assert posts(adm)["POST confirm"] - before == 3
    with open_state(pg_url) as store:
        record = store.item(lost.external_id)
        assert record is not None and record.intent is None and record.step != "new"
        assert [a.result for a in store.attempts(lost.external_id)
                if a.step == "confirm"] == [None]  # the dead worker's, never answered
        assert store.claimants(JOB) == []


def until(condition: Callable[[], bool], bound: float = 60.0) -> None:
    deadline = time.monotonic() + bound
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.005)


def held_by_others(pg_url: str, worker: str) -> int:
    """How many of the job's items a worker other than ``worker`` holds a claim on (read
    from the column itself: the live worker between two windows holds none)."""
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT count(*) FROM items WHERE job_name = %s AND claimed_by "
                           "IS NOT NULL AND claimed_by <> %s", (JOB, worker)).fetchone()
    return int(row[0]) if row is not None else 0


def made_run(store: Any) -> int:
    latest = store.latest_run(JOB)
    assert latest is not None
    return int(latest.id)


def test_the_rate_limit_holds_for_every_worker_together(
        sb: Any, adm: Admin, tmp_path: Path, pg_url: str, small_windows: None) -> None:
    """Each call of either worker takes the job's next slot, 1/40 s after the one before
    whoever took it (the waits are shrunk here, so the slots run ahead of the clock)."""
    job = write_job(tmp_path, sb, rows(24), prefix="w", concurrency=2)
    job.write_text(job.read_text().replace("run:\n", "run:\n  rate_limit: 40\n"))
    started = time.time()
    results: list[RunResult] = []
    threads = [threading.Thread(target=lambda: results.append(run(job, pg_url)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)

    assert sorted(r.exit_code for r in results) == [0, 0]
    assert confirmed(sb) == {f"w-e{i:04d}": 1 for i in range(24)}
    counts = adm.requests()["counts"]
    calls = sum(n for method, n in counts.items() if " " not in method)
    with open_state(pg_url) as store:
        slot = store.rate_slot(JOB, 1 / 40, now=started)  # the next free one
    assert calls >= 72 and slot - started >= (calls - 1) / 40, (calls, slot - started)


def test_claims_that_expire_while_a_worker_looks_at_them_are_taken_over(
        sb: Any, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch,
        other_worker: str) -> None:
    """A dead worker's claims expire between the live worker's last page (none free) and
    its look at who still holds claims (nobody alive): the items are taken over, not left
    for the next run."""
    from runner.engine.pages import Pages

    job = write_job(tmp_path, sb, rows(4), prefix="x", concurrency=2)
    assert run(job, pg_url, confirm=False).exit_code == 0
    # Another worker of the round (the one that recorded its plan) claims two items, and
    # dies.
    dead = other_worker
    with open_state(pg_url) as store:
        held = claimed_by_a_planner(store, dead, "x")
    assert [r.external_id for r in held] == ["x-e0000", "x-e0001"]
    look = Pages.wait_for_others

    def expiring_first(pages: Pages, sleep: Callable[[float], None]) -> bool:
        with open_state(pg_url) as store:
            store.forget_worker(JOB, dead)  # as its heartbeat going stale does
        return look(pages, sleep)

    monkeypatch.setattr(Pages, "wait_for_others", expiring_first)
    result = run(job, pg_url, confirm_only=True, confirm=True, claim_ttl=30.0)
    assert result.summary is not None
    assert (result.exit_code, dict(result.summary.counts)) == (0, {"settled": 4})
    assert confirmed(sb) == {f"x-e{i:04d}": 1 for i in range(4)}
