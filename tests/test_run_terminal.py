"""`runner run` as a person meets it: a real process, on a terminal (the plan and the question
before money moves, a bar per phase, colour and NO_COLOR), under cron (plain lines and a
heartbeat), with its output closed early (a pipe to `head`), and stopped with Ctrl-C
(SIGINT), or by systemd or a container's time-out (SIGTERM), which it takes the same way."""

from __future__ import annotations

import fcntl
import logging
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import PATIENCE, Admin, ending
from engine_support import cli, confirmed, items, posts, write_job
from mail_server import start

from runner.cli.progress import PlainProgress, progress_for
from runner.cli.run import log_to_stderr
from runner.sandbox import RunningSandbox
from runner.state import open_state

ROWS = "".join(f"i{n},1,{10 + n}.00,+2547001{n:05d}\n" for n in range(30))


def runner_command(job: Path, state: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "runner", "run", str(job), "--state", str(state), *more]


def wait_until(check: object, seconds: float = PATIENCE) -> None:
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
    with ending(subprocess.Popen(runner_command(job, state, "--yes"), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)) as process:
        wait_until(lambda: sum(posts(adm).values()) >= 6)
        process.send_signal(stop)
        out, err = process.communicate(timeout=PATIENCE)
    assert process.returncode == code, err
    assert "interrupted; run again to resume" in err
    assert "Traceback" not in err
    assert "items:" in out  # the closing lines, and the summary's files:
    assert sorted(p.suffix for p in (tmp_path / "reports").iterdir()) == [".csv", ".html",
                                                                          ".txt"]
    records = items(state)
    assert not [r for r in records.values() if r["intent"]], "a call was left unrecorded"
    assert len([r for r in records.values() if r["outcome"] == "settled"]) < 30
    # The run is recorded with the code it exited with; status counts how far each item
    # went and says why the batch stopped.
    with open_state(state) as store:
        assert [r.exit_code for r in store.runs("pay-2026-11")] == [code]
    stages = Counter("not started" if r["step"] == "new" else "confirmed"
                     if r["step"] == "confirmed" else "created"
                     for r in records.values() if r["outcome"] == "pending")
    status = cli("status", str(job), "--state", str(state))
    word = {130: "Ctrl-C", 143: "SIGTERM"}[code]
    assert status.exit_code == 5
    assert status.stdout.splitlines()[1] == (
        f"  stopped: run 1 was interrupted ({word}, exit {code}); the next run resumes "
        f"the batch")
    words = {"confirmed": "confirmed (on their way)", "created": "created (not confirmed)",
             "not started": "not started"}
    assert f"{sum(stages.values())} pending" in status.stdout.splitlines()[0]
    assert status.stdout.splitlines()[2] == "  pending: " + ", ".join(
        f"{stages[k]} {w}" for k, w in words.items() if stages[k])
    adm.api.call("DELETE", "/faults")
    again = subprocess.run(runner_command(job, state, "--yes", "-q"), capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert set(confirmed(sb).values()) == {1} and len(confirmed(sb)) == 30


def on_terminal(command: list[str], answer: bytes | None,
                env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``command`` with a pseudo-terminal (120 columns) as stdin and stderr; type
    ``answer`` when the question comes. Returns the exit code and what the terminal
    showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    shown = b""
    try:
        with ending(subprocess.Popen(
                command, stdin=slave, stdout=subprocess.PIPE, stderr=slave,
                env={**os.environ, "TERM": "xterm-256color", **(env or {})})) as process:
            os.close(slave)
            deadline = time.monotonic() + PATIENCE
            answered = answer is None
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.05)
                if ready:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:  # the process ended and closed the terminal
                        break
                    if not chunk:
                        break
                    shown += chunk
                elif process.poll() is not None:
                    break
                if not answered and b"[y/N]" in shown:
                    os.write(master, answer or b"")
                    answered = True
            process.wait(timeout=PATIENCE)
    finally:
        os.close(master)
    return process.returncode, shown.decode(errors="replace")


def test_on_a_terminal_the_plan_is_shown_and_no_means_nothing_is_sent(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, ROWS)
    mail = start()
    try:
        with job.open("a") as f:
            f.write("summary:\n  email: {to: [a@example.com], from: r@example.com, "
                    f"smtp: {{host: 127.0.0.1, port: {mail.port}, starttls: false}}}}\n")
        code, shown = on_terminal(runner_command(job, state), b"n\n")
        assert code == 1  # not what the person asked for: a script must not read it as done
        assert "to pay: 30 item(s)\r\n  new: 30\r\n" in shown  # the plan, before the question
        assert "About to pay 30 item(s): EUR 735.00" in shown
        assert "Send these payments? [y/N]" in shown
        assert "cancelled; nothing was sent" in shown
        assert posts(adm) == {}
        assert items(state) == {}  # nothing of the batch recorded
        assert not (tmp_path / "reports").exists()  # no summary written
        assert mail.arrived == []  # nor mailed
    finally:
        mail.stop()


def test_on_a_terminal_yes_pays_with_bars_per_phase(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, ROWS + "x,13,5.00,+254700000099\n")  # payer 13: inactive
    code, shown = on_terminal(runner_command(job, state), b"y\n")
    assert code == 1, shown
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)  # what a person reads
    # One bar per phase with its count of the total, its rate and the time left.
    assert re.search(r"prepare +━+ 31/31 [\d,.]+/s elapsed \d:\d\d:\d\d left 0:00:00", screen)
    assert re.search(r"confirm +━+ 30/30 [\d,.]+/s elapsed", screen)
    assert re.search(r"poll final +━+ 30/30 ", screen)
    # A log line lands on a line of its own above the bars, in colour.
    assert re.search(r"\r\x1b\[2K\x1b\[33m\d{4}-\d\d-\d\dT[\d:]+Z WARNING pay-x failed: "
                     r"1003001 Payer is inactive in your account\x1b\[0m\r\n", shown)
    assert "\x1b[38;5;" in shown or "\x1b[32m" in shown  # the bars in colour
    assert len(confirmed(sb)) == 30


def test_no_color_is_respected(sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, ROWS)
    code, shown = on_terminal(runner_command(job, state, "--yes"), None, {"NO_COLOR": "1"})
    assert code == 0, shown
    assert "30/30" in shown
    assert not re.search(r"\x1b\[[0-9;]*3\dm|\x1b\[38;", shown)  # no foreground colour


def test_without_a_terminal_plain_lines_and_a_heartbeat_per_long_phase(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    progress = PlainProgress(every=30, clock=lambda: now[0], tick=3600)
    entry = SimpleNamespace(record=SimpleNamespace(step="confirmed"))
    final = SimpleNamespace(record=SimpleNamespace(step="final"))
    with caplog.at_level(logging.INFO, logger="runner"), progress:
        progress.phase("poll", 2000)
        for _ in range(1761):
            progress.step("poll", final)
        progress.beat()  # not 30 s yet
        now[0] = 30.0
        progress.beat()
        progress.phase("poll", 239)  # the next round: only what is not final yet
        progress.step("poll", entry)
        progress.step("poll", final)
        now[0] = 59.0
        progress.beat()
        now[0] = 61.0
        progress.beat()
        progress.phase("prepare", 10)  # a new phase starts its own 30 s
        now[0] = 62.0
        progress.beat()
    assert [r.getMessage() for r in caplog.records] == [
        "poll: 1761/2000 final", "poll: 1762/2000 final"]


def test_a_heartbeat_counts_the_whole_batch_and_quiet_keeps_it(
        caplog: pytest.LogCaptureFixture) -> None:
    """Windows announce their items one by one: the heartbeat counts against the batch the
    run pays, and -q (runner's INFO lines silenced) still writes it, for cron's log."""
    log_to_stderr(logging.WARNING, heartbeats=logging.INFO)  # as -q sets them
    now = [0.0]
    progress = progress_for(terminal=False, quiet=True)
    assert isinstance(progress, PlainProgress)
    progress.clock, progress.tick = (lambda: now[0]), 3600
    entry = SimpleNamespace(record=SimpleNamespace(step="confirmed"))
    with caplog.at_level(logging.DEBUG), progress:
        logging.getLogger("runner").info("an ordinary line: not kept by -q")
        progress.batch(2350)
        for window in (64, 256):
            progress.phase("confirm", window)
            for _ in range(window):
                progress.step("confirm", entry)
        now[0] = 31.0
        progress.beat()
    assert [r.getMessage() for r in caplog.records] == ["confirm: 320/2350"]


def test_a_run_without_a_terminal_draws_no_bars(sb: RunningSandbox, tmp_path: Path,
                                                state: Path) -> None:
    job = write_job(tmp_path, sb, ROWS)
    result = subprocess.run(runner_command(job, state), capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stderr and "━" not in result.stderr
    assert re.search(r"INFO prepare: 30 item\(s\)\n.*INFO confirm: 30 item\(s\)\n",
                     result.stderr, re.S)
    assert result.stdout.splitlines()[0] == "pay-2026-11: 30 items: 30 settled"


def test_a_closed_stdout_ends_quietly(sb: RunningSandbox, tmp_path: Path,
                                      state: Path) -> None:
    """`runner status JOB | head -1`, and a run whose reader went away: no error, the
    command's own exit code, and a run still writes its summary."""
    job = write_job(tmp_path, sb, ROWS + "x,13,5.00,+254700000099\n")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        ran = subprocess.run(runner_command(job, state, "--yes"), stdout=write,
                             stderr=subprocess.PIPE, text=True, timeout=60)
        status = subprocess.run([sys.executable, "-m", "runner", "status", str(job),
                                 "--state", str(state)], stdout=write,
                                stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert ran.returncode == 1  # an item failed: that code, not a broken pipe's
    assert "Error" not in ran.stderr and "Traceback" not in ran.stderr
    assert len(list((tmp_path / "reports").iterdir())) == 3
    assert (status.returncode, status.stderr) == (1, "")
