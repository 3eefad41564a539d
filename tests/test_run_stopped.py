"""A run that stops before it sends a payment ends as it says: the payee checks or the fee
estimates stopped by a provider that cannot answer (75) or refuses the credentials (78),
the funds short (4), a Ctrl-C before the run could stop gracefully (130). Its row in the
state is closed with its exit code and why, `runner status` says so in one line (never
"did not finish") with the exit code README's table gives, and once the fault is gone the
next run pays everyone once. Only a process that died (SIGKILL) did not finish."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from conftest import PATIENCE, Admin, ending
from engine_support import (
    MT,
    cli,
    confirmed,
    err_lines,
    out_lines,
    run,
    runner_process,
    write_job,
)
from http_servers import Rewriter, Rule, answer
from test_payee_checks import CLOSE, MATCH, write

import runner.provider.retry
from runner.sandbox import RunningSandbox

LATER = "1009001 Service temporarily unavailable, retry later"
QUOTATIONS = f"(POST {MT}/quotations)"
FEES = "the fee estimates stopped before anything was paid"
NONE_YET = "pay-2026-11: 0 items: none yet"


@pytest.fixture(autouse=True)
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The provider's Retry-After counted, not waited for."""
    waited: list[float] = []
    monkeypatch.setattr(runner.provider.retry, "pause", waited.append)
    return waited


def status(job: Path, state: Path) -> tuple[int, list[str]]:
    shown = cli("status", str(job), "--state", str(state))
    return shown.exit_code, out_lines(shown)


def test_a_run_stopped_before_it_pays_is_ended_and_status_says_how(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb)
    # The balance covers the amounts (60.00) but not twice over: the fees are estimated.
    adm.balance("EUR", "100", "0")
    adm.faults({"quotations": {"unavailable_rate": 1}})
    ran = cli("run", str(job), "--state", str(state), "--yes")
    assert (ran.exit_code, err_lines(ran)) == (75, [f"error: {FEES}: {LATER} {QUOTATIONS}"])
    assert status(job, state) == (5, [
        NONE_YET, f"  stopped: run 1 ended with exit 75: {FEES}: {LATER} {QUOTATIONS}"])

    refused = answer("401 Unauthorized",
                     b'{"errors": [{"code": "1000401", "message": "Unauthorized"}]}')
    adm.api.call("DELETE", "/faults")
    with Rewriter(sb.url, [Rule(f"POST {MT}/quotations", lambda head, body: refused,
                                count=99, forward=False)]) as proxy:
        write_job(tmp_path, proxy.url)
        ran = cli("run", str(job), "--state", str(state), "--yes")
    assert (ran.exit_code, err_lines(ran)) == (
        78, [f"error: {FEES}: 1000401 Unauthorized {QUOTATIONS}"])
    assert status(job, state) == (5, [
        NONE_YET, f"  stopped: run 2 ended with exit 78: {FEES}: 1000401 Unauthorized "
                  f"{QUOTATIONS}"])

    write_job(tmp_path, sb)
    adm.balance("EUR", "10", "0")
    ran = cli("run", str(job), "--state", str(state), "--yes")
    short = "EUR 60.00 needed, 10 available"
    assert (ran.exit_code, err_lines(ran)) == (4, [
        f"{short}: nothing was sent (--allow-partial pays what the balance covers)"])
    assert status(job, state) == (4, [
        NONE_YET, f"  stopped: funds short: {short}; run 3 confirmed nothing"])

    def interrupt(plan: object) -> bool:
        raise KeyboardInterrupt

    adm.balance("EUR", "10000000", "0")
    with pytest.raises(KeyboardInterrupt):
        run(job, state, ask=interrupt)
    assert status(job, state) == (5, [
        NONE_YET, "  stopped: run 4 was interrupted (Ctrl-C, exit 130); the next run "
                  "resumes the batch"])

    ran = cli("run", str(job), "--state", str(state), "--yes", "--retry-failed")
    assert ran.exit_code == 0, ran.output
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    assert status(job, state) == (0, ["pay-2026-11: 3 items: 3 settled",
                                      "  EUR: sent 60.00, fees 4.50"])
    ran = cli("run", str(job), "--state", str(state), "--yes")
    assert ran.exit_code == 0, ran.output
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}


def test_a_run_the_payee_checks_stop_is_ended_then_the_next_pays(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write(tmp_path, sb, MATCH + CLOSE)
    adm.faults({"parties": {"lost_rate": 1}})  # no HTTP answer at all
    ran = cli("run", str(job), "--state", str(state), "--yes")
    stopped = "the payee checks stopped before anything was paid: connection failed: " \
              f"RemoteDisconnected (POST {MT}/payers/1/credit-party-verification)"
    assert (ran.exit_code, err_lines(ran)[-1:]) == (75, [f"error: {stopped}"])
    assert status(job, state) == (5, [NONE_YET,
                                      f"  stopped: run 1 ended with exit 75: {stopped}"])
    adm.api.call("DELETE", "/faults")
    ran = cli("run", str(job), "--state", str(state), "--yes")
    assert ran.exit_code == 0, err_lines(ran)
    assert confirmed(sb) == {"pay-2026-11-a": 1, "pay-2026-11-b": 1}
    code, lines = status(job, state)
    assert (code, lines[0]) == (0, "pay-2026-11: 2 items: 2 settled")
    assert not [line for line in lines if "stopped" in line]


def test_a_killed_run_did_not_finish(sb: RunningSandbox, adm: Admin, tmp_path: Path,
                                     state: Path) -> None:
    adm.faults({"*": {"latency_ms": 150}})
    job = write_job(tmp_path, sb, "a,1,10.00,+254700000001\n", concurrency=1)
    log = tmp_path / "killed.log"
    with ending(runner_process(job, state, log)) as killed:
        deadline = time.monotonic() + PATIENCE
        while not sb.state.faults.counts["POST confirm"]:
            assert killed.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the runner never got that far"
            time.sleep(0.001)
        killed.send_signal(signal.SIGKILL)
        assert killed.wait(timeout=PATIENCE) == -signal.SIGKILL
    while confirmed(sb) != {"pay-a": 1}:  # the confirm in flight ends at the sandbox
        assert time.monotonic() < deadline, "the confirm in flight never ended"
        time.sleep(0.001)
    code, lines = status(job, state)
    assert (code, lines) == (1, [
        "pay-2026-11: 1 items: 1 in doubt",
        "  stopped: run 1 did not finish (killed, or its host stopped); the next run resumes "
        "the batch",
        "  in doubt pay-a (row 2): the confirm was sent and its answer lost; the next run "
        "looks it up before anything"])
    adm.faults({})
    ran = cli("run", str(job), "--state", str(state), "--yes")
    assert ran.exit_code == 0, ran.output
    assert confirmed(sb) == {"pay-a": 1}
