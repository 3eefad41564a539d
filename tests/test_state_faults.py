"""The state database under faults, on real files: a full disk (a small tmpfs), a read-only
file system (a read-only bind mount), a database another process keeps locked, one written
by a newer runner, one missing a table, a file that is no database. Each ends in one clear
line and its documented exit code (75 where a later run goes on, 74 where a person must
look), before anything is sent when it is found at the start; and a full disk met halfway
leaves nothing paid twice once there is room again. The files that hold personal data are
created for their owner only.

Mounting needs root (CI runs as root); where the machine does not allow it, those tests are
skipped and say why."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Admin
from engine_support import cli, confirmed, err_lines, posts, write_job

from runner.connect import connect
from runner.job import load_job
from runner.sandbox import RunningSandbox
from runner.state import open_state

ROWS = "".join(f"i{n},1,{10 + n}.00,+2547001{n:05d}\n" for n in range(40))


def runner(*arguments: str) -> subprocess.CompletedProcess[str]:
    """`runner ARGUMENTS` in a process of its own, as cron starts it."""
    return subprocess.run([sys.executable, "-m", "runner", *arguments], capture_output=True,
                          text=True, timeout=60)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """Mounts made for a test (``mount -t tmpfs`` of a size, or a read-only bind of a
    folder), unmounted after it; skips the test when this machine allows no mount."""
    made: list[Path] = []

    def mount(*options: str, source: str = "tmpfs") -> Path:
        target = tmp_path / f"mount{len(made)}"
        target.mkdir()
        if shutil.which("mount") is None:
            pytest.skip("no mount command on this machine")
        done = subprocess.run(["mount", *options, source, str(target)], capture_output=True,
                              text=True)
        if done.returncode != 0:
            pytest.skip(f"this machine allows no mount (root is needed): {done.stderr.strip()}")
        made.append(target)
        return target

    yield mount
    for target in reversed(made):
        subprocess.run(["umount", "-l", str(target)], check=False)


def read_only(mount: Callable[..., Path], folder: Path) -> Path:
    view = mount("--bind", source=str(folder))
    done = subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot remount read-only here: {done.stderr.strip()}")
    return view


def test_a_full_disk_halfway_exits_75_and_a_later_run_pays_nobody_twice(
        sb: RunningSandbox, adm: Admin, tmp_path: Path,
        mounted: Callable[..., Path]) -> None:
    disk = mounted("-t", "tmpfs", "-o", "size=1m")  # room for the schema, not for 40 items
    job = write_job(tmp_path, sb, ROWS, concurrency=4)
    state = disk / "state" / "runner.sqlite"
    full = runner("run", str(job), "--yes", "-q", "--state", str(state))
    assert full.returncode == 75, full.stderr
    assert full.stderr.splitlines()[-1] == (f"error: {state}: the disk is full; free some space "
                                            "and run again (what is recorded is safe)")
    assert "Traceback" not in full.stderr
    assert 0 < sum(posts(adm).values())  # it stopped halfway
    subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
    # The next run, as cron starts it, takes over the lease the full disk kept the first
    # from giving back (its process is gone).
    again = runner("run", str(job), "--yes", "-q", "--state", str(state))
    assert again.returncode == 0, again.stderr
    paid = confirmed(sb)
    assert len(paid) == 40 and set(paid.values()) == {1}


def test_a_new_state_folder_on_a_read_only_file_system_exits_74_and_sends_nothing(
        sb: RunningSandbox, adm: Admin, tmp_path: Path,
        mounted: Callable[..., Path]) -> None:
    (tmp_path / "empty").mkdir()
    view = read_only(mounted, tmp_path / "empty")
    job = write_job(tmp_path, sb, ROWS)
    result = cli("run", str(job), "--yes", "--state", str(view / "state" / "runner.sqlite"))
    assert result.exit_code == 74, result.output
    assert err_lines(result) == [f"error: {view / 'state' / 'runner.sqlite'}: cannot create "
                                 "the state database: Read-only file system"]
    assert not posts(adm)


def test_a_state_database_on_a_read_only_file_system_exits_74_and_sends_nothing(
        sb: RunningSandbox, adm: Admin, tmp_path: Path,
        mounted: Callable[..., Path]) -> None:
    folder = tmp_path / "state"
    open_state(folder / "runner.sqlite").close()
    view = read_only(mounted, folder)
    job = write_job(tmp_path, sb, ROWS)
    result = cli("run", str(job), "--yes", "--state", str(view / "runner.sqlite"))
    assert result.exit_code == 74, result.output
    [line] = err_lines(result)
    assert line.startswith(f"error: {view / 'runner.sqlite'}: cannot write the state database "
                           "(a read-only folder or file system, or no permission)")
    assert not posts(adm)


def test_a_database_written_by_a_newer_runner_is_refused_before_anything_is_sent(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    open_state(state).close()
    with sqlite3.connect(state) as db:
        db.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                   "VALUES ('runner', '0099_from_a_newer_runner', '2030-01-01')")
    db.close()
    result = cli("run", str(write_job(tmp_path, sb, ROWS)), "--yes", "--state", str(state))
    assert result.exit_code == 74
    assert err_lines(result) == [
        f"error: {state}: written by a newer runner (its migration '0099_from_a_newer_runner' "
        "is unknown to this one); run it with that runner or a newer one"]
    assert not posts(adm)


@pytest.mark.parametrize(("damage", "message"), [
    ("DROP TABLE attempts", "the table 'attempts' is missing; this is not a runner state "
                            "database, or it was damaged"),
    ("ALTER TABLE items DROP COLUMN details", "the table 'items' has no column 'details'; it "
                                              "was damaged"),
])
def test_a_database_missing_a_table_is_refused_before_anything_is_sent(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path, damage: str,
        message: str) -> None:
    open_state(state).close()
    with sqlite3.connect(state) as db:
        db.execute(damage)
    db.close()
    result = cli("run", str(write_job(tmp_path, sb, ROWS)), "--yes", "--state", str(state))
    assert result.exit_code == 74
    assert err_lines(result) == [f"error: {state}: {message}"]
    assert not posts(adm)


def test_a_file_that_is_no_database_is_refused(tmp_path: Path, state: Path) -> None:
    state.write_bytes(b"payroll export, not a database\n" * 100)
    result = cli("status", str(write_job(tmp_path, "https://api.example.com")), "--state",
                 str(state))
    assert result.exit_code == 74
    assert err_lines(result) == [f"error: {state}: not a runner state database, or damaged: "
                                 "file is not a database"]


@pytest.mark.parametrize(("make", "what"), [
    (os.mkfifo, "not a regular file"), (Path.mkdir, "a folder")])
def test_a_state_path_that_is_no_file_is_refused_before_anything_is_sent(
        make: Callable[[Path], object], what: str, sb: RunningSandbox, adm: Admin,
        tmp_path: Path) -> None:
    state = tmp_path / "runner.sqlite"
    make(state)
    result = cli("run", str(write_job(tmp_path, sb, ROWS)), "--yes", "--state", str(state))
    assert (result.exit_code, err_lines(result)) == (74, [
        f"error: {state}: {what}, not a database file; name the state's file (the default is "
        "state/runner.sqlite)"])
    assert not posts(adm)


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_link_beside_the_state_database_is_refused_and_nothing_written_through_it(
        suffix: str, sb: RunningSandbox, adm: Admin, tmp_path: Path) -> None:
    # A state in a folder others may write (/tmp, a share): a link placed where SQLite keeps
    # the database's journal would have it written into a file that is not runner's.
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o777)
    state = folder / "runner.sqlite"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not runner's\n")
    link = folder / f"runner.sqlite{suffix}"
    link.symlink_to(elsewhere)
    result = cli("run", str(write_job(tmp_path, sb, ROWS)), "--yes", "--state", str(state))
    assert (result.exit_code, err_lines(result)) == (74, [
        f"error: {state}: {link} is a symbolic link, where SQLite keeps the database's "
        "journal; remove it (runner never writes through it)"])
    assert elsewhere.read_text() == "not runner's\n"
    assert not posts(adm) and not state.exists()
    # A state reached through a link keeps its journal beside the file the link names.
    link.unlink()
    real = tmp_path / "volume" / "runner.sqlite"
    real.parent.mkdir()
    real.touch(mode=0o600)  # (an empty file is an empty database)
    state.symlink_to(real)
    assert cli("run", str(write_job(tmp_path, sb, ROWS)), "--yes", "--state", str(state)
               ).exit_code == 0
    assert len(confirmed(sb)) == 40
    assert not (folder / f"runner.sqlite{suffix}").exists()
    assert sorted(p.name for p in real.parent.iterdir()) == ["runner.sqlite"]


def test_a_database_kept_locked_exits_75(sb: RunningSandbox, adm: Admin, tmp_path: Path,
                                         state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.state.sqlite

    monkeypatch.setattr(runner.state.sqlite, "LOCK_WAIT", 0.05)
    open_state(state).close()
    other = sqlite3.connect(state, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writing, and not finishing
    try:
        result = cli("run", str(write_job(tmp_path, sb, ROWS)), "--yes", "--state", str(state))
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert result.exit_code == 75
    assert err_lines(result) == [f"error: {state}: the state database is locked by another "
                                 "process; try later"]
    assert not posts(adm)


def test_a_second_run_is_refused_at_once_while_the_first_holds_the_lease(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    """Refused before the slow part of its start (the lease comes first, and the first
    run keeps it fresh, so the refusal is not a lease found expired): it asks the provider
    nothing, not even for its catalogue or a balance."""
    job = write_job(tmp_path, sb, ROWS)
    with open_state(state) as first, first.join("pay-2026-11"):
        second = runner("run", str(job), "--yes", "--state", str(state))
    assert second.returncode == 75, second.stderr
    assert "job pay-2026-11 is being run by pid" in second.stderr
    assert "(starting); try later" in second.stderr
    assert adm.requests()["counts"] == {}
    assert not posts(adm)


def test_the_files_with_personal_data_are_their_owners_only(
        sb: RunningSandbox, tmp_path: Path) -> None:
    state = tmp_path / "new" / "deeper" / "runner.sqlite"
    job = write_job(tmp_path, sb, ROWS[:90])
    assert cli("run", str(job), "--yes", "--state", str(state)).exit_code == 0
    assert mode(state.parent) == mode(state.parent.parent) == 0o700
    assert mode(state) == 0o600
    reports = state.parent / "reports"
    assert mode(reports) == 0o700
    assert {mode(p) for p in reports.iterdir()} == {0o600}
    # What `plan -o` and `report --output` write, in folders they make, and what they replace.
    shared = tmp_path / "out" / "report.csv"
    shared.parent.mkdir()
    shared.write_text("an older report\n")
    shared.chmod(0o644)
    for command in (["plan", str(job), "-o", str(tmp_path / "a" / "b" / "plan.json")],
                    ["report", str(job), "--format", "csv", "-o", str(shared)],
                    ["report", str(job), "--format", "html", "-o", str(tmp_path / "c" / "r")]):
        assert cli(*command, "--state", str(state)).exit_code == 0, command
    assert [mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "c")] == [
        0o700] * 3
    assert [mode(p) for p in (tmp_path / "a" / "b" / "plan.json", shared, tmp_path / "c" / "r")
            ] == [0o600] * 3
    assert shared.read_text().startswith("external_id,")
    assert sorted(p.name for p in shared.parent.iterdir()) == ["report.csv"]  # no leftover
    with open_state(state) as store:  # SQLite's WAL and shared memory, while it is open
        store.note_checks(store.start_run("pay-2026-11", "job.yaml"), 0, 0)
        assert {mode(state.with_name(state.name + s)) for s in ("-wal", "-shm")} == {0o600}


def test_the_embedded_sandboxs_journal_is_its_owners_only(tmp_path: Path) -> None:
    job = load_job(write_job(tmp_path, "sandbox"))
    with connect(job, tmp_path / "state") as provider:  # the sandbox rewrites it as it stops
        provider.money_transfer.balances()
    assert mode(tmp_path / "state") == 0o700
    assert mode(tmp_path / "state" / "sandbox.jsonl") == 0o600


def test_a_file_runner_writes_is_never_written_through_a_link_or_into_a_device(
        sb: RunningSandbox, tmp_path: Path) -> None:
    state = tmp_path / "state" / "runner.sqlite"
    job = write_job(tmp_path, sb, ROWS[:90])
    plan = tmp_path / "pay.plan.json"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not runner's\n")
    # The temporary file a plan was once written through (PLAN.partial), placed beforehand.
    plan.with_name(plan.name + ".partial").symlink_to(elsewhere)
    assert cli("plan", str(job), "--state", str(state), "-o", str(plan)).exit_code == 0
    assert elsewhere.read_text() == "not runner's\n"
    assert json.loads(plan.read_text())["format"] == "runner plan"
    assert cli("run", str(job), "--state", str(state), "--yes").exit_code == 0
    # A link where the file goes, or a device: refused in one line, exit 74, nothing written.
    link = tmp_path / "report.html"
    link.symlink_to(elsewhere)
    for output, why in ((link, "a symbolic link (runner does not write through links; "
                               "remove it or name the file itself)"),
                        (Path("/dev/full"), "not a regular file (runner writes a file whole, "
                                            "then renames it into place)")):
        result = cli("report", str(job), "--state", str(state), "--format", "html",
                     "-o", str(output))
        assert (result.exit_code, err_lines(result)) == (
            74, [f"error: {output}: cannot write: {why}"])
    assert elsewhere.read_text() == "not runner's\n"


def test_a_full_disk_on_output_is_one_line_and_exit_74_leaving_nothing_behind(
        sb: RunningSandbox, tmp_path: Path, mounted: Callable[..., Path]) -> None:
    state = tmp_path / "state" / "runner.sqlite"
    job = write_job(tmp_path, sb, ROWS)
    assert cli("run", str(job), "--yes", "--state", str(state)).exit_code == 0
    disk = mounted("-t", "tmpfs", "-o", "size=64k")
    filler = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:  # the disk filled to its last byte
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(filler, b"x" * 4096)
    finally:
        os.close(filler)
    report = disk / "report.csv"
    report.write_bytes(b"")  # an earlier report, kept as it was
    for command in (["report", str(job), "--format", "csv", "-o", str(report)],
                    ["plan", str(job), "-o", str(disk / "plan.json")]):
        result = cli(*command, "--state", str(state))
        assert (result.exit_code, err_lines(result)[-1:]) == (
            74, [f"error: {command[-1]}: cannot write: No space left on device"]), command
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "report.csv"]
    assert report.read_bytes() == b""
