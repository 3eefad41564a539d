"""`runner run`, `status` and `report` with ``--state postgresql://...`` (or RUNNER_STATE)
against the session's PostgreSQL server and a loopback sandbox: items paid once, the same
lines as with SQLite; a refused server or a URL with a password: one line and its exit code.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from conftest import Admin
from engine_support import cli, confirmed, err_lines, eur, out_lines, posts, write_job
from pg_support import free_port

from runner.sandbox import RunningSandbox

JOB_NAME = "pay-2026-11"
SETTLED = [f"{JOB_NAME}: 3 items: 3 settled", "  EUR: sent 60.00, fees 4.50"]


def test_a_run_on_postgresql_pays_each_item_once(sb: RunningSandbox, adm: Admin,
                                                 tmp_path: Path, pg_url: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    job = write_job(tmp_path, sb)
    monkeypatch.chdir(tmp_path)  # the summaries go under ./state/reports
    result = cli("run", str(job), "--state", pg_url, "--yes")
    assert (result.exit_code, out_lines(result), err_lines(result)) == (0, SETTLED, [])
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    assert eur(sb)["balance"] == Decimal("10000000.00") - Decimal("64.50")
    # Again, the state named by RUNNER_STATE: nothing is sent twice.
    monkeypatch.setenv("RUNNER_STATE", pg_url)
    again = cli("run", str(job), "--yes")
    assert (again.exit_code, out_lines(again)) == (0, SETTLED)
    assert posts(adm)["POST quotations"] == 3
    status = cli("status", str(job))
    assert (status.exit_code, out_lines(status)) == (0, SETTLED)


def test_a_state_server_that_refuses_is_exit_75_in_one_line(sb: RunningSandbox,
                                                            tmp_path: Path) -> None:
    job = write_job(tmp_path, sb)
    url = f"postgresql://runner@127.0.0.1:{free_port()}/payroll"
    result = cli("run", str(job), "--state", url, "--yes")
    assert result.exit_code == 75
    [line] = err_lines(result)
    assert line.startswith(f"error: {url}: cannot reach the state database: ")
    assert confirmed(sb) == {}


def test_a_state_url_with_a_password_is_refused(sb: RunningSandbox, tmp_path: Path,
                                                pg_url: str) -> None:
    job = write_job(tmp_path, sb)
    result = cli("status", str(job), "--state", pg_url.replace("runner@", "runner:s3cret@"))
    assert result.exit_code == 2 and "s3cret" not in result.output
    assert "the database URL holds a password; give it in PGPASSWORD or ~/.pgpass" in \
        result.stderr
