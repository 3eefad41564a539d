"""`runner run`, `runner confirm` and `runner status` end to end: exit codes and exact output
lines, against a loopback sandbox, with the provider's own records as the judge.

The command line's waits are real but short here: the sandbox completes confirmed items on
its next tick, so the run's poll loop ends at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import KEY, SECRET, Admin, Api
from engine_support import (
    MT,
    cli,
    confirmed,
    cost_confirmed,
    created,
    err_lines,
    eur,
    items,
    out_lines,
    posts,
    write_job,
)

from runner.sandbox import RunningSandbox
from runner.state import LEASE_TTL, open_state
from runner.state.holders import JobLock, this_process

JOB_NAME = "pay-2026-11"
ROOT = Path(__file__).resolve().parent.parent
EVERY = {"pay-a": 1, "pay-b": 1, "pay-c": 1}
START = Decimal("10000000.00")


def runner(command: str, job: Path, state: Path, *more: str) -> tuple[int, list[str],
                                                                      list[str]]:
    """``runner COMMAND JOB --state STATE --yes MORE``: (exit code, stdout, stderr lines
    other than the run's timestamped log lines)."""
    extra = ["--yes"] if command in ("run", "confirm") else []
    result = cli(command, str(job), "--state", str(state), *extra, *more)
    return result.exit_code, out_lines(result), err_lines(result)


def status(job: Path, state: Path) -> tuple[int, list[str], list[str]]:
    return runner("status", job, state)


# ---------------------------------------------------------------- summary and status lines
def test_run_and_status_print_the_outcome(sb: RunningSandbox, adm: Admin, tmp_path: Path,
                                          state: Path) -> None:
    rows = ("a,1,10.00,+254700000001\n"
            "inactive,13,15.00,+254700000005\n"
            "rejected,1,20.00,+254700999302\n"
            "refused,1,25.00,+254700999301\n"
            "c,1,30.00,+254700000003\n")
    job = write_job(tmp_path, sb, rows)
    expected = [
        f"{JOB_NAME}: 5 items: 2 settled, 3 failed",
        "  EUR: sent 40.00, fees 3.00",
        "  failed pay-inactive (row 3): 1003001 Payer is inactive in your account",
        "  failed pay-rejected (row 4): 30200 REJECTED-INVALID-BENEFICIARY",
        "  failed pay-refused (row 5): 30201 REJECTED-BARRED-BENEFICIARY",
    ]
    assert runner("run", job, state) == (1, expected, [])
    assert status(job, state) == (1, expected, [])
    assert posts(adm)["POST quotations"] == 5  # the refusal was not asked twice
    assert confirmed(sb) == {"pay-a": 1, "pay-rejected": 1, "pay-c": 1}
    assert eur(sb)["balance"] == START - Decimal("43.00")
    # Run again: finished items are left alone; the refused quotation is asked again.
    assert runner("run", job, state) == (1, expected, [])
    assert confirmed(sb) == {"pay-a": 1, "pay-rejected": 1, "pay-c": 1}


def test_status_lists_in_doubt_and_needing_a_person(sb: RunningSandbox, adm: Admin,
                                                    tmp_path: Path, state: Path) -> None:
    quotation = {"external_id": "pay-b", "payer_id": 1, "mode": "SOURCE_AMOUNT",
                 "source": {"country_iso_code": "FRA", "currency": "EUR",
                            "amount": Decimal("99.00")},
                 "destination": {"currency": "KES"}}
    assert Api(sb.url, (KEY, SECRET)).post(MT + "/quotations", quotation).status_code == 201
    # (The command line's waits are real: the job keeps its backoff to 10 ms.)
    job = write_job(tmp_path, sb, confirm=False, concurrency=1, max_wait="10ms")
    assert status(job, state) == (2, [], [
        f"error: {state}: no state database here (nothing has run with this --state yet?)"])
    assert not state.exists()  # status reads; it does not make an empty database
    assert runner("run", job, state) == (1, [
        f"{JOB_NAME}: 3 items: 2 awaiting confirm, 1 conflict",
        "  needs a person pay-b (row 3): quotation pay-b at the provider does not match this "
        "item"], [])
    # pay-a's confirm is done but its answer lost, and every lookup of it fails (500).
    adm.faults({"confirm": {"lost_next": 1}, "lookups": {"error_next": 3}})
    doubt = [f"{JOB_NAME}: 3 items: 1 settled, 1 conflict, 1 in doubt",
             "  EUR: sent 30.00, fees 1.50",
             "  in doubt pay-a (row 2): the confirm was sent and its answer lost; the next run "
             "looks it up before anything",
             "  needs a person pay-b (row 3): quotation pay-b at the provider does not match "
             "this item"]
    assert runner("confirm", job, state) == (1, doubt, [])
    assert status(job, state) == (1, doubt, [])
    assert confirmed(sb) == {"pay-a": 1, "pay-c": 1}
    # The next confirm looks pay-a up, finds it confirmed, and does not confirm it again.
    assert runner("confirm", job, state) == (1, [
        f"{JOB_NAME}: 3 items: 2 settled, 1 conflict",
        "  EUR: sent 40.00, fees 3.00",
        "  needs a person pay-b (row 3): quotation pay-b at the provider does not match this "
        "item"], [])
    assert posts(adm)["POST confirm"] == 2
    assert confirmed(sb) == {"pay-a": 1, "pay-c": 1} and created(sb) == {"pay-a": 1,
                                                                         "pay-c": 1}


# ---------------------------------------------------------------- confirm: false
def test_confirm_false_then_runner_confirm(sb: RunningSandbox, adm: Admin, tmp_path: Path,
                                           state: Path) -> None:
    job = write_job(tmp_path, sb, confirm=False)
    assert runner("run", job, state) == (0, [f"{JOB_NAME}: 3 items: 3 awaiting confirm"], [])
    assert confirmed(sb) == {} and eur(sb)["balance"] == START
    assert runner("confirm", job, state) == (0, [f"{JOB_NAME}: 3 items: 3 settled",
                                                 "  EUR: sent 60.00, fees 4.50"], [])
    assert posts(adm) == {"POST": 9, "POST quotations": 3, "POST create": 3,
                          "POST confirm": 3}
    assert confirmed(sb) == EVERY
    assert eur(sb)["balance"] == START - Decimal("64.50") == START - cost_confirmed(sb)
    # Confirming again is harmless: nothing is left to confirm.
    assert runner("confirm", job, state)[0] == 0
    assert posts(adm)["POST"] == 9


def test_runner_confirm_sends_no_new_quotation(sb: RunningSandbox, adm: Admin,
                                               tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb)
    assert runner("confirm", job, state) == (0, [f"{JOB_NAME}: 3 items: 3 pending"], [])
    assert posts(adm).get("POST", 0) == 0


# ---------------------------------------------------------------- the process's end
def test_a_run_without_a_terminal_loads_only_what_it_uses_and_leaves_its_imports_frozen(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    """A run from cron loads only what it uses (rich draws bars on a terminal; requests is
    the scripts' client, runner's calls go through urllib3; a remittance job needs no other
    kind's models, checks or flow; cryptography reads signed plans, under four eyes); the
    collector leaves what the imports made from the command's start (``runner.cli.entry``),
    and what the run made once it is over, skipping the interpreter's last collection of
    every object: by the time the process exits, the run, its reports and its state are
    closed."""
    job = write_job(tmp_path, sb)
    unused = {"rich", "requests", "cryptography", "runner.job.collection",
              "runner.job.merchant_payment", "runner.kinds.payout", "runner.engine.accounts"}
    # Handlers registered before the command's run after its own: the freeze at exit.
    probe = ("import atexit, gc, sys\n"
             "before = []\n"
             "atexit.register(lambda: print('frozen again at exit:',\n"
             "                              gc.get_freeze_count() > before[0]))\n"
             f"atexit.register(lambda: print('loaded:', sorted({unused!r}\n"
             "                                             & set(sys.modules))))\n"
             "import runner.engine.batch as batch\n"
             "run_job = batch.run_job\n"
             "def frozen_first(*args, **kwargs):\n"
             "    before.append(gc.get_freeze_count())\n"
             "    print('frozen before the run:', before[0] > 0)\n"
             "    return run_job(*args, **kwargs)\n"
             "batch.run_job = frozen_first\n"
             "from runner.cli import entry\n"
             "entry()\n")
    done = subprocess.run([sys.executable, "-c", probe, "run", str(job), "--yes", "--state",
                           str(state)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          stdin=subprocess.DEVNULL, check=False)
    assert (done.returncode, done.stdout.splitlines()[-2:]) == (
        0, ["loaded: []", "frozen again at exit: True"])
    assert "frozen before the run: True" in done.stdout.splitlines()
    assert [p.suffix for p in sorted((tmp_path / "reports").iterdir())] == [
        ".csv", ".html", ".txt"]
    assert confirmed(sb) == EVERY


# ---------------------------------------------------------------- pre-flight
def test_a_short_balance_stops_the_run_before_any_post(sb: RunningSandbox, adm: Admin,
                                                       tmp_path: Path, state: Path) -> None:
    adm.balance("EUR", "40.00", "0")
    job = write_job(tmp_path, sb, concurrency=1)
    stopped = [f"{JOB_NAME}: 0 items: none yet",
               "  stopped: funds short: EUR 60.00 needed, 40.00 available; run 1 confirmed "
               "nothing"]
    assert runner("run", job, state) == (4, stopped, [
        "EUR 60.00 needed, 40.00 available: nothing was sent (--allow-partial pays what the "
        "balance covers)"])
    assert posts(adm) == {}  # not one quotation, transaction or confirm
    plan = runner("plan", job, state)  # says so before, and sends nothing either
    assert (plan[0], plan[1][-1]) == (4, "nothing would be sent, the balance is short: "
                                         "EUR 60.00 needed, 40.00 available")
    assert posts(adm) == {}
    headline = sorted((tmp_path / "reports").glob("*.txt"))[-1].read_text().splitlines()[0]
    assert headline == f"{JOB_NAME}: nothing paid, funds short: EUR 60.00 needed, 40.00 available"
    report = cli("report", str(job), "--state", str(state), "--format", "json")
    assert json.loads(report.stdout)["headline"] == headline  # from the state, any time later
    assert status(job, state) == (4, stopped, [])  # a funds stop, until a run goes further
    assert runner("run", job, state, "--allow-partial") == (1, [
        f"{JOB_NAME}: 3 items: 2 settled, 1 failed",
        "  EUR: sent 30.00, fees 3.00",
        "  failed pay-c (row 4): 1007005 Transaction can not be confirmed, insufficient "
        "balance"], [])
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1}
    assert eur(sb)["balance"] == Decimal("7.00")
    adm.balance("EUR", "100.00", "0")
    assert runner("run", job, state) == (0, [f"{JOB_NAME}: 3 items: 3 settled",
                                             "  EUR: sent 60.00, fees 4.50"], [])
    assert confirmed(sb) == EVERY
    assert eur(sb)["balance"] == Decimal("68.50")


# ---------------------------------------------------------------- rule 6: the lease
def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_live_run_holding_the_lease_makes_a_second_start_exit_75(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb)
    with open_state(state) as holder, holder.join(JOB_NAME) as worker:
        worker.started(41)
        assert runner("run", job, state) == (75, [], [
            f"error: job {JOB_NAME} is being run by pid {os.getpid()} on "
            f"{socket.gethostname()} (run 41); try later"])
        assert runner("confirm", job, state)[0] == 75
        assert posts(adm).get("POST", 0) == 0
        assert items(state) == {}
    assert runner("run", job, state)[0] == 0
    assert confirmed(sb) == EVERY


ANOTHER_NS = "pid:[4026530001]"  # a PID namespace that is not this process's


def _lease_row(whose: str) -> dict[str, object]:
    """A worker row left by a run that is gone (or, for the last three, may be alive)."""
    me = this_process()
    row: dict[str, object] = {
        "job_name": JOB_NAME, "run_id": 7, "host": me.host, "pid": _dead_pid(),
        "worker_id": "old", "heartbeat_at": time.time(), "boot_id": me.boot_id,
        "pid_ns": me.pid_ns, "locked": 0}
    if whose == "stale heartbeat":
        row.update(pid=os.getpid(), heartbeat_at=time.time() - LEASE_TTL - 5)
    elif whose.startswith("killed in another container"):
        # PID 1 of a container killed a moment ago: PID 1 here is alive, and means
        # another process; its lock file is what tells.
        row.update(pid=1, pid_ns=ANOTHER_NS, locked=1)
    elif whose == "another host":  # a fresh heartbeat from another kernel: alive
        row.update(pid=1, boot_id="0b0e7f3c-another-boot", host="elsewhere", locked=1)
    elif whose == "no kernel identity":  # a row of an older runner: the heartbeat decides
        row.update(boot_id=None, pid_ns=None)
    return row


@pytest.mark.parametrize("whose, blocked", [
    ("dead pid", False), ("stale heartbeat", False), ("killed in another container", False),
    ("killed in another container, its lock held", True), ("another host", True),
    ("no kernel identity", True)])
def test_an_abandoned_lease_is_taken_over(whose: str, blocked: bool, sb: RunningSandbox,
                                          adm: Admin, tmp_path: Path, state: Path) -> None:
    """Only a lease whose holder is known gone, or silent for LEASE_TTL, is taken over; a
    PID is trusted only in this boot and PID namespace, and across namespaces the job's
    lock file (which the kernel drops with its holder) tells."""
    row = _lease_row(whose)
    open_state(state).close()  # made, at runner's schema
    with contextlib.closing(sqlite3.connect(state)) as db, db:
        db.execute(f"INSERT INTO workers ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                   list(row.values()))
    lock = JobLock(state, JOB_NAME)
    if whose.endswith("its lock held"):  # a live process on this kernel holds it
        assert lock.take() is True
    job = write_job(tmp_path, sb)
    try:
        result = runner("run", job, state)
    finally:
        lock.release()
    if blocked:
        assert result == (75, [], [f"error: job {JOB_NAME} is being run by pid {row['pid']} "
                                   f"on {row['host']} (run 7); try later"])
        assert posts(adm).get("POST", 0) == 0
        return
    assert result == (0, [f"{JOB_NAME}: 3 items: 3 settled", "  EUR: sent 60.00, fees 4.50"],
                      [])
    assert confirmed(sb) == EVERY
    with contextlib.closing(sqlite3.connect(state)) as db:
        assert db.execute("SELECT * FROM workers").fetchall() == []  # gone at the end
    assert lock.take() is True  # and its lock let go


# ---------------------------------------------------------------- rule 7
def test_an_item_settled_under_another_job_is_refused(sb: RunningSandbox, adm: Admin,
                                                      tmp_path: Path, state: Path) -> None:
    first = write_job(tmp_path, sb, file="first.yaml")
    assert runner("run", first, state)[0] == 0
    before = posts(adm)["POST"]
    # Another job whose external_ids come out the same for rows a and b.
    second = write_job(tmp_path, sb, "a,1,10.00,+254700000001\n"
                                     "b,1,20.00,+254700000002\n"
                                     "d,1,40.00,+254700000004\n",
                       name="pay-2026-11-bis", file="second.yaml", rows_file="second.csv")
    assert runner("run", second, state) == (1, [
        "pay-2026-11-bis: 1 items: 1 settled",
        "  EUR: sent 40.00, fees 1.50",
        f"  refused pay-a: row 2: already handled by job {JOB_NAME}; not paid again",
        f"  refused pay-b: row 3: already handled by job {JOB_NAME}; not paid again"], [])
    assert posts(adm)["POST"] == before + 3  # pay-d only
    assert confirmed(sb) == {**EVERY, "pay-d": 1}
    assert eur(sb)["balance"] == START - Decimal("64.50") - Decimal("41.50")
    assert set(items(state, "pay-2026-11-bis")) == {"pay-d"}
    assert items(state)["pay-a"]["job_name"] == JOB_NAME


# ---------------------------------------------------------------- the provider unreachable
def test_an_unreachable_provider_exits_75_and_a_later_run_pays(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path, state: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    job = write_job(tmp_path, f"http://127.0.0.1:{port}")
    assert runner("run", job, state) == (75, [], [
        "error: connection failed: ConnectionRefusedError (GET /v1/money-transfer/payers/1)"])
    sb = sandbox_factory(submit_delay=0, complete_delay=0, port=port)
    assert runner("run", job, state) == (0, [f"{JOB_NAME}: 3 items: 3 settled",
                                             "  EUR: sent 60.00, fees 4.50"], [])
    assert confirmed(sb) == EVERY
