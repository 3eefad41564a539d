"""`runner state copy FROM TO`: a SQLite state into PostgreSQL and back, every table, the
items and their calls read back the same; refused into a state that holds anything, or
while a run is live on the source."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from engine_support import cli

from runner.state import ItemRecord, open_state

JOB = "pay-2026-11"


def fill(where: Path | str) -> None:
    with open_state(where) as store:
        store.insert_items([ItemRecord("e1", JOB, "remittance", 2, summary="{}"),
                            ItemRecord("e2", JOB, "remittance", 3)])
        run_id = store.start_run(JOB, "job.yaml")
        attempt = store.begin_attempt(run_id, "e1", "quotation", {"external_id": "e1"})
        store.end_attempt(attempt, "e1", "ok", step="quoted", quotation_id=7,
                          source_amount=Decimal("10.50"))
        store.end_run(run_id, 0, {"settled": 2}, digest="d1")


def snapshot(where: Path | str) -> tuple[object, ...]:
    with open_state(where, create=False) as store:
        return (list(store.items(JOB)), store.attempts("e1"), store.runs(JOB))


def test_a_state_copies_into_postgresql_and_back(tmp_path: Path, pg_url: str,
                                                 pg_cluster: object) -> None:
    sqlite = tmp_path / "runner.sqlite"
    fill(sqlite)
    result = cli("state", "copy", str(sqlite), pg_url)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"copied 2 items, 1 runs and 1 calls from {sqlite} to {pg_url}\n"
    assert snapshot(pg_url) == snapshot(sqlite)
    with open_state(pg_url) as store:  # new ids follow the copied ones
        assert store.start_run(JOB, "job.yaml") == 2
    back = tmp_path / "back.sqlite"
    assert cli("state", "copy", pg_url, str(back)).exit_code == 0
    assert snapshot(back)[:2] == snapshot(sqlite)[:2]
    # Into a state that holds anything: refused, nothing written.
    again = cli("state", "copy", str(sqlite), pg_url)
    assert again.exit_code == 1
    assert again.stderr == (f"error: {pg_url}: already holds a state (its runs table has "
                            "rows); copy into a new, empty one\n")


def test_a_state_with_a_live_run_is_not_copied(tmp_path: Path, pg_url: str) -> None:
    fill(pg_url)
    target = tmp_path / "copy.sqlite"
    with open_state(pg_url) as store, store.join(JOB) as worker:
        worker.started(1)
        result = cli("state", "copy", pg_url, str(target))
    assert result.exit_code == 75 and "job pay-2026-11 is being run" in result.stderr
    assert not target.exists()  # refused before the target is made
