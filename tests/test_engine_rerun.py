"""A run of a finished batch whose inputs did not change costs nothing: no call to the
provider (not even validation's reads), no report written again, the same closing lines and
exit code; a change to the rows, or an item left to do, makes it a full run again."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Admin
from engine_support import ROWS, cli, err_lines, out_lines, write_job

from runner.sandbox import RunningSandbox
from runner.state import open_state

FAILING = "rejected,1,20.00,+254700999302\n"  # REJECTED at the provider: final, unpaid


def runner_run(job: Path, state: Path | str, *flags: str) -> tuple[int, list[str], list[str]]:
    result = cli("run", str(job), "--state", str(state), "--yes", *flags)
    return result.exit_code, out_lines(result), err_lines(result)


def reports(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (folder / "state" / "reports").glob("*")}


def test_a_finished_batch_run_again_sends_nothing_and_writes_nothing(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, where: Path | str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    state = where  # SQLite, then PostgreSQL (its reports go under ./state)
    monkeypatch.chdir(tmp_path)
    job = write_job(tmp_path, sb, ROWS + FAILING)
    first = runner_run(job, state)
    assert first[0] == 1  # the rejected item
    written = reports(tmp_path)
    assert len(written) == 3
    adm.api.call("DELETE", "/requests")
    again = runner_run(job, state)
    assert again == first
    assert adm.requests()["counts"] == {}  # no POST, and no GET: nothing validated
    assert reports(tmp_path) == written
    with open_state(state) as store:
        runs = store.runs("pay-2026-11")
    assert [r.exit_code for r in runs] == [1, 1]
    assert runs[1].digest == runs[0].digest and runs[1].counts == runs[0].counts
    assert runs[1].lines == tuple(first[1])


def test_changed_rows_or_work_left_make_a_full_run(sb: RunningSandbox, adm: Admin,
                                                   tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, ROWS)
    assert runner_run(job, state)[0] == 0
    write_job(tmp_path, sb, ROWS + "d,1,40.00,+254700000004\n")
    adm.api.call("DELETE", "/requests")
    code, lines, _ = runner_run(job, state)
    assert (code, lines[0]) == (0, "pay-2026-11: 4 items: 4 settled")
    assert adm.requests()["counts"]["POST"] == 3  # the new item only
    with open_state(state) as store:  # an item left to do (a person reopened it)
        store.update_item("pay-d", step="created", outcome="pending")
    adm.api.call("DELETE", "/requests")
    assert runner_run(job, state)[0] == 0
    assert adm.requests()["counts"].get("GET", 0) > 0  # validated again


def test_a_finished_batch_run_again_allowing_duplicates_sends_nothing(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    """--allow-duplicates pays the items held as possible duplicates: a finished batch holds
    none (a held item is work left), so its run again costs nothing either, and is recorded
    as allowing them."""
    job = write_job(tmp_path, sb, ROWS)
    first = runner_run(job, state, "--allow-duplicates")
    assert first[0] == 0
    adm.api.call("DELETE", "/requests")
    assert runner_run(job, state, "--allow-duplicates") == first
    assert adm.requests()["counts"] == {}  # nothing validated, nothing sent
    with open_state(state) as store:
        assert [r.allow_duplicates for r in store.runs("pay-2026-11")] == [True, True]
