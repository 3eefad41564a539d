"""`runner run` as a person meets it: a real process, on a terminal (the plan and the question
before money moves, the progress line) and stopped with Ctrl-C (SIGINT), or by systemd or a
container's time-out (SIGTERM), which it takes the same way."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Admin
from engine_support import confirmed, items, posts, write_job

from runner.sandbox import RunningSandbox

ROWS = "".join(f"i{n},1,{10 + n}.00,+2547001{n:05d}\n" for n in range(30))


def runner_command(job: Path, state: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "runner", "run", str(job), "--state", str(state), *more]


def wait_until(check: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.mark.parametrize(("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_lets_calls_in_flight_finish_and_the_next_run_resumes(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path, stop: signal.Signals,
        code: int) -> None:
    adm.faults({"*": {"latency_ms": 20}})
    job = write_job(tmp_path, sb, ROWS, concurrency=2)
    process = subprocess.Popen(runner_command(job, state, "--yes"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    wait_until(lambda: sum(posts(adm).values()) >= 6)
    process.send_signal(stop)
    out, err = process.communicate(timeout=30)
    assert process.returncode == code, err
    assert "interrupted; run again to resume" in err
    assert "Traceback" not in err
    assert "items:" in out  # the closing lines, and the summary's files:
    assert sorted(p.suffix for p in (tmp_path / "reports").iterdir()) == [".csv", ".html",
                                                                          ".txt"]
    records = items(state)
    assert not [r for r in records.values() if r["intent"]], "a call was left unrecorded"
    assert len([r for r in records.values() if r["outcome"] == "settled"]) < 30
    adm.api.call("DELETE", "/faults")
    again = subprocess.run(runner_command(job, state, "--yes", "-q"), capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert set(confirmed(sb).values()) == {1} and len(confirmed(sb)) == 30


def on_terminal(command: list[str], answer: bytes | None) -> tuple[int, str]:
    """Run ``command`` with a pseudo-terminal as stdin and stderr; type ``answer`` when the
    question comes. Returns the exit code and what the terminal showed."""
    master, slave = pty.openpty()
    process = subprocess.Popen(command, stdin=slave, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + 60
    answered = answer is None
    while process.poll() is None and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                shown += os.read(master, 4096)
            except OSError:
                break
        if not answered and b"[y/N]" in shown:
            os.write(master, answer or b"")
            answered = True
    process.wait(timeout=60)
    assert process.stdout is not None
    process.stdout.close()
    os.close(master)
    return process.returncode, shown.decode(errors="replace")


def test_on_a_terminal_the_plan_is_shown_and_no_means_nothing_is_sent(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, ROWS)
    code, shown = on_terminal(runner_command(job, state), b"n\n")
    assert code == 0
    assert "to pay: 30 item(s)\r\n  new: 30\r\n" in shown  # the plan, before the question
    assert "About to pay 30 item(s): EUR 735.00" in shown
    assert "Send these payments? [y/N]" in shown
    assert "cancelled; nothing was sent" in shown
    assert posts(adm) == {}


def test_on_a_terminal_yes_pays_with_a_progress_line(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, ROWS)
    code, shown = on_terminal(runner_command(job, state), b"y\n")
    assert code == 0, shown
    assert "\rprepare 30  confirm 30" in shown
    assert len(confirmed(sb)) == 30
