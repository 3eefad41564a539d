"""What cron's watchers read of a run: its log lines (UTC times; JSON for a log shipper) and
its metrics file for node_exporter's textfile collector, written after every run whatever
its exit code, with the last success kept across runs."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from conftest import Admin
from engine_support import write_job
from prometheus_client.parser import text_string_to_metric_families

from runner.cli import main
from runner.sandbox import RunningSandbox
from runner.state import open_state

JOB = "pay-2026-11"
FAILING = ("a,1,10.00,+254700000001\n"
           "inactive,13,15.00,+254700000005\n"
           "rejected,1,20.00,+254700999302\n"
           "refused,1,25.00,+254700999301\n"
           "c,1,30.00,+254700000003\n")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def invoke(job: Path, state: Path, *more: str, **env: str) -> tuple[int, str, str]:
    result = CliRunner(env=env).invoke(main, ["run", str(job), "--state", str(state),
                                              "--yes", *more])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.exit_code, result.stdout, result.stderr


def metrics(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the file, by name and labels (prometheus_client's own parser)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(path.read_text())
            for s in family.samples}


def value(found: dict[Any, float], name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted({"job": JOB, **labels}.items()))))


def test_json_log_lines_name_the_job_run_item_and_event(sb: RunningSandbox, tmp_path: Path,
                                                        state: Path) -> None:
    job = write_job(tmp_path, sb, FAILING)
    code, out, err = invoke(job, state, "--log-format", "json")
    assert code == 1 and out.startswith(f"{JOB}: 5 items: 2 settled, 3 failed")
    records = [json.loads(line) for line in err.splitlines()]  # every line is one object
    with open_state(state) as store:
        run_id = store.runs(JOB)[-1].id
    for r in records:
        assert STAMP.match(r["time"]), r
        assert (r["job"], r["run_id"]) == (JOB, run_id), r
        assert r["level"] in ("DEBUG", "INFO", "WARNING", "ERROR") and r["event"], r
    events = [(r["event"], r.get("external_id")) for r in records]
    assert events[0] == ("run_started", None) and events[-1] == ("run_ended", None)
    assert records[-1]["message"] == "exit code 1" and records[-1]["level"] == "INFO"
    assert ("phase_started", None) in events
    failed = {r["external_id"]: r["message"] for r in records if r["event"] == "item_failed"}
    assert failed == {
        "pay-inactive": "pay-inactive failed: 1003001 Payer is inactive in your account",
        "pay-rejected": "pay-rejected failed: 30200 REJECTED-INVALID-BENEFICIARY",
        "pay-refused": "pay-refused failed: 30201 REJECTED-BARRED-BENEFICIARY"}
    # The environment variable does the same; the text format has UTC times too.
    code, _, err = invoke(job, state, RUNNER_LOG_FORMAT="json")
    assert code == 1 and json.loads(err.splitlines()[0])["event"] == "run_started"
    code, _, err = invoke(job, state)
    assert code == 1 and re.match(
        rf"^\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ INFO run {run_id + 2} of {JOB} started$",
        err.splitlines()[0])


def test_the_metrics_file_after_failures_a_success_a_repeat_and_a_held_lease(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    prom = tmp_path / "textfile" / "payroll.prom"
    prom.parent.mkdir()
    job = write_job(tmp_path, sb, FAILING)
    before = time.time()
    assert invoke(job, state, "--metrics-file", str(prom))[0] == 1
    found = metrics(prom)
    assert value(found, "runner_exit_code") == 1
    assert {o: value(found, "runner_items", outcome=o) for o in (
        "settled", "failed", "pending", "unknown", "invalid")} == {
        "settled": 2, "failed": 3, "pending": 0, "unknown": 0, "invalid": 0}
    # As the summary counts them: the inactive payer's item was never quoted, and counts
    # what its plan priced (the 15.00 its row asked): every person is in the figures.
    assert {p: value(found, "runner_amount", currency="EUR", part=p) for p in (
        "planned", "paid", "fees", "failed", "pending", "to_check")} == {
        "planned": 100.0, "paid": 40.0, "fees": 3.0, "failed": 60.0, "pending": 0.0,
        "to_check": 0.0}
    ended = value(found, "runner_last_run_timestamp_seconds")
    assert ended is not None and before <= ended <= time.time()
    duration = value(found, "runner_duration_seconds")
    assert duration is not None and 0 < duration <= ended - before
    assert value(found, "runner_last_success_timestamp_seconds") is None  # none yet
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644  # the collector is another user
    assert [p.name for p in prom.parent.iterdir()] == ["payroll.prom"]  # no temporary left

    # A batch paid in full (the same job on another state): exit 0, the last success.
    state = tmp_path / "paid.sqlite"
    job = write_job(tmp_path, sb, prefix="ok", rows_file="ok.csv", file="ok.yaml")
    assert invoke(job, state, "--metrics-file", str(prom))[0] == 0
    found = metrics(prom)
    success = value(found, "runner_last_success_timestamp_seconds")
    assert value(found, "runner_exit_code") == 0
    assert success == value(found, "runner_last_run_timestamp_seconds")
    paid = value(found, "runner_amount", currency="EUR", part="paid")
    # Run again (nothing to do): the batch's counts and amounts stay; a new success.
    assert invoke(job, state, RUNNER_METRICS_FILE=str(prom))[0] == 0
    again = metrics(prom)
    assert value(again, "runner_items", outcome="settled") == \
        value(found, "runner_items", outcome="settled")
    assert value(again, "runner_amount", currency="EUR", part="paid") == paid
    assert success is not None
    assert (value(again, "runner_last_success_timestamp_seconds") or 0) >= success

    # Refused by the lease (exit 75): the last success is kept, from the file it replaces.
    with open_state(state) as holder, holder.join(JOB) as worker:
        worker.started(41)
        assert invoke(job, state, "--metrics-file", str(prom))[0] == 75
    held = metrics(prom)
    assert value(held, "runner_exit_code") == 75
    assert value(held, "runner_last_success_timestamp_seconds") == \
        value(again, "runner_last_success_timestamp_seconds")
    assert value(held, "runner_items", outcome="settled") is None  # not read this time


def test_a_metrics_file_that_is_a_fifo_never_keeps_the_run_from_ending(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    # A FIFO where the metrics go, which no one writes: read as a file, it would keep the
    # command from ending once the batch is paid (cron's next run then finds it running).
    prom = tmp_path / "runner.prom"
    os.mkfifo(prom)
    job = write_job(tmp_path, sb, FAILING)
    done = subprocess.run([sys.executable, "-m", "runner", "run", str(job), "--state",
                           str(state), "--yes", "--metrics-file", str(prom)],
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 1 and done.stdout.startswith(f"{JOB}: 5 items: 2 settled")
    assert (f"error: the metrics file: {prom}: cannot write: not a regular file (runner "
            "writes a file whole, then renames it into place)") in done.stderr.splitlines()
    assert stat.S_ISFIFO(os.lstat(prom).st_mode)  # left as it was

