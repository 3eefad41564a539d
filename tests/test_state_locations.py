"""Where the state is, read one way from `--state`, RUNNER_STATE and a plan file: a URL (of any
scheme) or a libpq connection string is never a file name, a password in any of them is
refused without being repeated, and a plan is applied on the state it was made on, against
the session's PostgreSQL server and a loopback sandbox."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import Admin
from engine_support import cli, confirmed, err_lines, out_lines, posts, write_job
from pg_support import free_port

from runner.sandbox import RunningSandbox

SETTLED = ["pay-2026-11: 3 items: 3 settled", "  EUR: sent 60.00, fees 4.50"]
SECRET = "hunter2"
WITH_PASSWORD = [
    "postgresql://runner:hunter2@127.0.0.1:5432/payroll",
    "postgres://runner@127.0.0.1/payroll?password=hunter2",
    "host=127.0.0.1 dbname=payroll user=runner password=hunter2",
    "  dbname=payroll sslpassword=hunter2",
]
NOT_A_STATE = {  # a location, and the words of its refusal
    "sqlite:///state/runner.sqlite": "'--state': a sqlite: URL is not a state runner knows",
    "https://runner:hunter2@db.example.com/x": "a https: URL is not a state runner knows",
    "postgresql:/runner@db/payroll": "a postgresql: URL is not a state runner knows",
    "file:state.sqlite": "a file: URL is not a state runner knows: give a SQLite file path "
                         "(./file:... for a file named so) or postgresql://USER@HOST:PORT/DB",
    "a b://hunter2": "'--state': a URL runner does not know",
    "port=5432 nonsense=hunter2": "'--state': not a PostgreSQL connection string libpq can read",
    "state/run\nner.sqlite": "'--state': holds a control character",
}


def test_a_url_or_connection_string_is_never_a_file_and_its_password_never_shown(
        sb: RunningSandbox, adm: Admin, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    job = write_job(tmp_path, sb)
    monkeypatch.chdir(tmp_path)
    before = set(os.listdir(tmp_path))
    for location in WITH_PASSWORD:
        for how in ("option", "environment"):
            if how == "environment":
                monkeypatch.setenv("RUNNER_STATE", location)
                result = cli("run", str(job), "--yes")
                monkeypatch.delenv("RUNNER_STATE")
            else:
                result = cli("run", str(job), "--yes", "--state", location)
            assert result.exit_code == 2, (location, result.output)
            assert SECRET not in result.output
            assert "holds a password; give it in PGPASSWORD or ~/.pgpass" in result.stderr
    for location, words in NOT_A_STATE.items():
        result = cli("status", str(job), "--state", location)
        assert result.exit_code == 2 and words in result.stderr, (location, result.output)
        assert SECRET not in result.output
    # A connection string without a password is a PostgreSQL database, never a file.
    unreachable = f"host=127.0.0.1 port={free_port()} dbname=payroll user=runner"
    result = cli("run", str(job), "--yes", "--state", unreachable)
    assert (result.exit_code, err_lines(result)[0].split(": cannot")[0]) == (
        75, f"error: {unreachable}")
    assert set(os.listdir(tmp_path)) == before  # no state file, no folder: nothing made
    assert posts(adm) == {}


def plan_on(job: Path, state: str, plan: Path) -> dict[str, object]:
    result = cli("plan", str(job), "--state", state, "-o", str(plan))
    assert result.exit_code == 0, result.output
    return dict(json.loads(plan.read_text()))


def test_a_plan_made_on_postgresql_is_applied_on_it_and_on_no_other_state(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, pg_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    job = write_job(tmp_path, sb)
    monkeypatch.chdir(tmp_path)
    plan = tmp_path / "pay.plan.json"
    assert plan_on(job, pg_url, plan)["state"] == pg_url
    # --state (or RUNNER_STATE) naming another state: refused, nothing sent.
    other = tmp_path / "other.sqlite"
    result = cli("apply", str(plan), "--yes", "--state", str(other))
    assert (result.exit_code, err_lines(result)) == (2, [
        f"the plan is refused: the plan {plan} was made on the state {pg_url}, and --state "
        f"(or RUNNER_STATE) names {other}: a plan is applied on the state it was made on "
        f"(make a new plan on the other state); nothing was sent"])
    assert posts(adm) == {} and not other.exists()
    # The same database written another way is the same state; without --state, the plan's.
    host, port = pg_url.split("@")[1].split("/")[0].split(":")
    same = f"host={host} port={port} user=runner dbname={pg_url.rsplit('/', 1)[1]}"
    monkeypatch.setenv("RUNNER_STATE", same)
    assert cli("apply", str(plan), "--yes").exit_code == 0
    monkeypatch.delenv("RUNNER_STATE")
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    assert out_lines(cli("status", str(job), "--state", pg_url)) == SETTLED
    assert sorted(os.listdir(tmp_path)) == ["job.yaml", "pay.plan.json", "rows.csv", "state"]
    assert sorted(os.listdir(tmp_path / "state")) == ["reports"]  # no SQLite file anywhere
    # A plan whose state is unreachable, or (edited) holds a password or a folded URL: one
    # line, and never a SQLite file named after it.
    content = json.loads(plan.read_text())
    for state, code, words in (
            (f"postgresql://runner@127.0.0.1:{free_port()}/payroll", 75,
             "cannot reach the state database"),
            (pg_url.replace("runner@", f"runner:{SECRET}@"), 2,
             "the plan's state: the database URL holds a password"),
            (pg_url.replace("://", ":/"), 2, "the plan's state: a postgresql: URL is not a state")):
        plan.write_text(json.dumps({**content, "state": state}))
        result = cli("apply", str(plan), "--yes")
        assert result.exit_code == code and words in result.stderr, result.output
        assert SECRET not in result.output
    assert sorted(os.listdir(tmp_path / "state")) == ["reports"]
    assert not [p for p in tmp_path.rglob("*") if "postgres" in p.name]
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
