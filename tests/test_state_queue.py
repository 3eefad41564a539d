"""The items table as the job's queue (``0016_items_queue``): a state made by the runner
before it is migrated with every item's state read from its columns by the lifecycle's own
mapping, and from then on every write that moves an item keeps its state true, through the
store and through whole runs against the sandbox, while when it is due is the queue's alone
(the plan, a claim given back); both backends."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import psycopg
from conftest import Admin
from engine_support import cli, write_job
from sqlite_utils import Database

from runner import lifecycle
from runner.lifecycle import Call, Outcome, State, Step
from runner.sandbox import RunningSandbox
from runner.state import open_state, pg_schema
from runner.state.sqlite_schema import migrations

JOB = "pay-2026-11"
QUEUE = "0016_items_queue"
# One item per (step, intent, outcome) the lifecycle knows.
COMBOS = list(itertools.product([*Step], [None, *Call], [*Outcome]))
INSERT = "INSERT INTO items (external_id, job_name, kind, row, step, intent, outcome) VALUES "


def made_before_the_queue(where: Path | str) -> None:
    """A state as the runner before the queue left it, holding every combination."""
    rows = [(f"e{i}", JOB, "remittance", i, *combo) for i, combo in enumerate(COMBOS)]
    if isinstance(where, Path):
        where.parent.mkdir(parents=True)
        db = Database(where)
        migrations.apply(db, stop_before=QUEUE)
        db.conn.executemany(INSERT + "(?, ?, ?, ?, ?, ?, ?)", rows)
        db.conn.commit()
        db.close()
        return
    with psycopg.connect(where, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {pg_schema.TABLE} (migration_set text, name text, "
                     "applied_at text, PRIMARY KEY (migration_set, name))")
        for name, statements in itertools.takewhile(lambda m: m[0] != QUEUE,
                                                    pg_schema.MIGRATIONS.items()):
            for sql in statements:
                conn.execute(sql)
            conn.execute(f"INSERT INTO {pg_schema.TABLE} VALUES (%s, %s, 'then')",
                         (pg_schema.SET, name))
        with conn.cursor() as cur:
            cur.executemany(INSERT + "(%s, %s, %s, %s, %s, %s, %s)", rows)


def queue_columns(where: Path | str) -> dict[str, tuple[Any, ...]]:
    """external_id -> (step, intent, outcome, state, due_at, polls), as the state holds it."""
    sql = "SELECT external_id, step, intent, outcome, state, due_at, polls FROM items"
    if isinstance(where, Path):
        db = Database(where)
        try:
            return {r[0]: tuple(r[1:]) for r in db.execute(sql).fetchall()}
        finally:
            db.close()
    with psycopg.connect(where) as conn:
        return {r[0]: tuple(r[1:]) for r in conn.execute(sql).fetchall()}


def test_the_queue_migration_reads_every_items_state_from_its_columns(
        where: Path | str) -> None:
    made_before_the_queue(where)
    with open_state(where):
        pass  # opening migrates
    found = queue_columns(where)
    assert len(found) == len(COMBOS) == 7 * 17 * 7
    for external_id, (step, intent, outcome, state, due_at, polls) in found.items():
        assert state == lifecycle.state_of(step, intent, outcome), external_id
        assert (due_at, polls) == (None, 0)  # the next plan makes due what it pays
    states = {(s, i, o): state for s, i, o, state, _, _ in found.values()}
    # Each state, and what older runners left: a call in doubt whatever else the columns
    # say; a confirmed item polled whatever its outcome; a refusal before anything was made
    # apart from a failure at the provider.
    assert states["quoted", "transaction", "pending"] == State.IN_DOUBT
    assert states["final", "pay", "settled"] == State.IN_DOUBT
    assert states["new", None, "pending"] == State.TODO
    assert states["created", None, "awaiting_confirm"] == State.AWAITING_CONFIRM
    assert states["confirmed", None, "pending"] == State.POLLING
    assert states["confirmed", None, "unknown"] == State.POLLING
    assert states["confirmed", None, "failed"] == State.POLLING
    assert states["new", None, "failed"] == State.REFUSED
    assert states["quoted", None, "held"] == State.HELD
    assert states["final", None, "settled"] == State.SETTLED
    assert states["final", None, "failed"] == State.FAILED
    assert states["final", None, "unknown"] == State.UNKNOWN
    assert states["new", None, "unknown"] == State.UNKNOWN
    assert states["confirmed", None, "conflict"] == State.CONFLICT
    assert set(states.values()) == set(State)


def test_every_write_that_moves_an_item_moves_its_state_not_its_due_time(
        where: Path | str, tmp_path: Path) -> None:
    made_before_the_queue(where)
    subsets = [c for n in (1, 2, 3) for c in itertools.combinations(lifecycle.READ, n)]
    with open_state(where) as store:
        # Each item moved to another combination, by one, two or all three columns.
        for i, _ in enumerate(COMBOS):
            to = dict(zip(lifecycle.READ, COMBOS[(i * 5 + 3) % len(COMBOS)], strict=True))
            store.update_item(f"e{i}", **{c: to[c] for c in subsets[i % len(subsets)]})
        # The calls' own writes: an intent committed, then answered with a refusal.
        run_id = store.start_run(JOB, "job.yaml")
        attempt = store.begin_attempt(run_id, "e0", Call.QUOTATION, {})
        assert queue_columns(where)["e0"][3] == State.IN_DOUBT
        store.end_attempt(attempt, "e0", "error", code="1000400")
    moved = queue_columns(where)
    assert moved["e0"][1] is None
    for external_id, (step, intent, outcome, state, due_at, _) in moved.items():
        assert state == lifecycle.state_of(step, intent, outcome), external_id
        # A move writes no due time (it would keep the queue's index up at every call):
        # the next plan makes due what it pays.
        assert due_at is None, external_id
    # `runner state copy` carries them as they are.
    copy = tmp_path / "copy.sqlite"
    assert cli("state", "copy", str(where), str(copy)).exit_code == 0
    assert queue_columns(copy) == moved


def test_the_queue_columns_follow_every_item_of_a_run(
        sandbox: RunningSandbox, admin: Admin, tmp_path: Path, where: Path | str) -> None:
    rows = ("a,1,10.00,+254700000001\n"  # its confirm's answer lost: in doubt, looked up
            "b,1,20.00,+254700999301\n"  # made rejected: failed
            "c,1,30.00,+254700999302\n"  # fails after its confirm
            "r,13,20.00,+254700000007\n"  # payer 13 inactive: refused, nothing made
            "d,1,40.00,+254700000004\n"  # settles
            "e,1,12.00,+254700000005\n"  # held: it pays what f pays (rule 9)
            "f,1,12.00,+254700000005\n"
            "p,1,15.00,+254700999306\n")  # polled: submitted, available, then completed
    job = write_job(tmp_path, sandbox, rows, concurrency=1)
    job.write_text(job.read_text().replace("wait_for_final: 2s", "wait_for_final: 0s"))
    admin.faults({"confirm": {"lost_next": 1}})
    states = []
    for _ in range(2):
        result = cli("run", str(job), "--state", str(where), "--yes")
        assert result.exit_code == 1, result.output
        found = queue_columns(where)
        assert len(found) == 8
        for external_id, (step, intent, outcome, state, due_at, _) in found.items():
            assert state == lifecycle.state_of(step, intent, outcome), external_id
            assert (due_at is None) == (state in lifecycle.FINAL | lifecycle.PARKED)
        states.append({e[4:]: columns[3] for e, columns in found.items()})
        admin.advance(500)
    # Polled until the second run (wait_for_final: 0s), then final; refused and held parked.
    assert states == [
        {"a": "polling", "b": "failed", "c": "polling", "r": "refused", "d": "polling",
         "e": "polling", "f": "held", "p": "polling"},
        {"a": "settled", "b": "failed", "c": "failed", "r": "refused", "d": "settled",
         "e": "settled", "f": "held", "p": "settled"}]
    with open_state(where) as store:
        assert [a.result for a in store.attempts("pay-a") if a.step == Call.CONFIRM] == [
            "in_doubt"]
