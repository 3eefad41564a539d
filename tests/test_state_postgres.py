"""The PostgreSQL state against a real server (the session's throwaway cluster): the same
named migrations as SQLite, a database a newer runner migrated refused, no password in a
URL, and the server's faults: restarted mid-run (reconnect), gone for longer (exit 75,
nothing lost)."""

from __future__ import annotations

from decimal import Decimal

import psycopg
import pytest
from pg_support import Cluster
from sqlite_utils import Database

from runner.errors import BadStateLocation, StateMissing, StateUnavailable, StateUnusable
from runner.state import ItemRecord, open_state, pg_schema, postgres
from runner.state.opening import _known
from runner.state.schema import TABLES
from runner.state.sqlite_schema import migrations

JOB = "pay-2026-11"


def test_both_backends_have_the_same_named_migrations_and_tables(pg_url: str) -> None:
    assert list(pg_schema.MIGRATIONS) == sorted(_known(migrations))
    with open_state(pg_url):
        pass
    with psycopg.connect(pg_url) as conn:
        names = [r[0] for r in conn.execute(f"SELECT name FROM {pg_schema.TABLE}")]
    assert sorted(names) == sorted(pg_schema.MIGRATIONS)


def test_each_backends_migrations_make_the_tables_a_database_is_checked_against(
        pg_url: str) -> None:
    with Database(memory=True) as db:  # SQLite's, applied in memory
        migrations.apply(db)
        sqlite = {name: {row[1] for row in db.conn.execute(f"PRAGMA table_info('{name}')")}
                  for name in db.table_names() if name != "_sqlite_migrations"}
    with open_state(pg_url):
        pass
    with psycopg.connect(pg_url) as conn:
        made: dict[str, set[str]] = {}
        for table, column in conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name <> %s",
                [pg_schema.TABLE]):
            made.setdefault(table, set()).add(column)
    assert sqlite == made == {name: set(columns) for name, columns in TABLES.items()}


def test_two_workers_starting_together_migrate_once(pg_url: str) -> None:
    with open_state(pg_url) as a, open_state(pg_url) as b:
        a.insert_items([ItemRecord("e1", JOB, "remittance", 1)])
        assert [r.external_id for r in b.items(JOB)] == ["e1"]


def test_a_database_a_newer_runner_migrated_is_refused(pg_url: str) -> None:
    with open_state(pg_url):
        pass
    with psycopg.connect(pg_url) as conn:
        conn.execute(f"INSERT INTO {pg_schema.TABLE} VALUES ('runner', '0099_future', 'x')")
    with pytest.raises(StateUnusable) as refused:
        open_state(pg_url)
    assert refused.value.exit_code == 74 and "'0099_future' is unknown" in str(refused.value)


def test_a_database_missing_a_column_is_refused(pg_url: str) -> None:
    with open_state(pg_url):
        pass
    with psycopg.connect(pg_url) as conn:
        conn.execute("ALTER TABLE items DROP COLUMN fee")
    with pytest.raises(StateUnusable, match="the table 'items' has no column 'fee'"):
        open_state(pg_url)


def test_a_database_runner_never_used_is_not_made_by_a_reading_command(pg_url: str) -> None:
    with pytest.raises(StateMissing, match="no runner state in this database"):
        open_state(pg_url, create=False)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM information_schema.tables WHERE "
                            "table_schema = 'public'").fetchone() == (0,)


def test_a_url_with_a_password_is_refused_and_the_password_never_shown(pg_url: str) -> None:
    with_password = pg_url.replace("runner@", "runner:hunter2@")
    with pytest.raises(BadStateLocation) as refused:
        open_state(with_password)
    assert refused.value.exit_code == 2 and "hunter2" not in str(refused.value)
    with pytest.raises(BadStateLocation) as refused:
        open_state(pg_url + "?password=hunter2")
    assert "hunter2" not in str(refused.value)


def test_a_server_that_refuses_at_start_is_exit_75_in_one_line(pg_cluster: Cluster) -> None:
    from pg_support import free_port

    url = f"postgresql://runner@127.0.0.1:{free_port()}/x"
    with pytest.raises(StateUnavailable) as refused:
        open_state(url)
    message = str(refused.value)
    assert refused.value.exit_code == 75 and "\n" not in message
    assert message.startswith(f"{url}: cannot reach the state database: ")


def test_a_server_restarted_mid_run_is_reconnected_to(pg_cluster: Cluster, pg_url: str
                                                      ) -> None:
    with open_state(pg_url) as store:
        store.insert_items([ItemRecord("e1", JOB, "remittance", 1)])
        run_id = store.start_run(JOB, "job.yaml")
        pg_cluster.restart_immediate()  # every connection of the pool is cut
        attempt = store.begin_attempt(run_id, "e1", "quotation", {})
        store.end_attempt(attempt, "e1", "ok", step="quoted", source_amount=Decimal("9.50"))
        item = store.item("e1")
        assert item is not None and (item.step, item.source_amount) == ("quoted",
                                                                        Decimal("9.50"))


def test_a_server_gone_for_longer_is_exit_75_with_nothing_lost(pg_cluster: Cluster,
                                                                pg_url: str) -> None:
    waits: list[float] = []
    store = postgres.PostgresStore(pg_url, pg_url, sleep=waits.append)
    try:
        store.insert_items([ItemRecord("e1", JOB, "remittance", 1)])
        pg_cluster.stop("immediate")
        try:
            with pytest.raises(StateUnavailable) as gone:
                store.update_item("e1", step="quoted")
        finally:
            pg_cluster.start()
        assert gone.value.exit_code == 75 and "after 6 retries" in str(gone.value)
        assert waits == list(postgres.BACKOFF)  # the bound: about 15 s in all
        item = store.item("e1")  # the server is back: the same store goes on
        assert item is not None and item.step == "new"
    finally:
        store.close()
