"""Answers bounded in time and in size: one deadline for a whole exchange (``provider.timeout``,
head and body), however slowly the answer trickles in, and no answer read past
``transport.MAX_ANSWER`` bytes, however long it says or turns out to be. Either ends the call
in doubt: it is looked up by its external_id, and nobody is paid twice."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine_support import cli, confirmed, created, outcomes, sent_for, write_job
from http_servers import Rewriter, Rule

from runner.provider.transport import MAX_ANSWER

MT = "/v1/money-transfer"
CONFIRM_B = f"POST {MT}/transactions/ext-pay-b/confirm"


HEADS: list[int] = []


def trickle(head: bytes, body: bytes) -> Iterator[bytes]:
    """The sandbox's head, then its body a byte every 0.2 s (a minute for 300 bytes)."""
    HEADS.append(len(head) + 4)
    yield head + b"\r\n\r\n"
    for byte in body:
        threading.Event().wait(0.2)
        yield bytes([byte])


def test_an_answer_that_trickles_in_ends_at_its_deadline_and_is_looked_up(
        sandbox_factory: Any, tmp_path: Path) -> None:
    sandbox = sandbox_factory(submit_delay=0, complete_delay=0)
    rule = Rule(CONFIRM_B, trickle)
    state = tmp_path / "s.sqlite"
    with Rewriter(sandbox.url, [rule]) as proxy:
        job = write_job(tmp_path, proxy.url, timeout="1s", concurrency=1)
        ran = cli("run", str(job), "--yes", "--state", str(state))
    assert ran.exit_code == 0, ran.output
    assert rule.hits == 1 and rule.cut  # runner hung up on it
    # Of a body of several hundred bytes, a few came before the deadline cut the call.
    assert rule.sent - HEADS[-1] < 20
    assert outcomes(state) == {"pay-a": "settled", "pay-b": "settled", "pay-c": "settled"}
    assert confirmed(sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    sent = [(step, result) for step, _, result, _ in sent_for(state, "pay-b", "transaction")]
    assert ("confirm", "in_doubt") in sent  # then found confirmed by its lookup
    assert f"GET {MT}/transactions/ext-pay-b" in [f"{c.method} {c.path}" for c in proxy.calls]


def endless(declared: bool) -> Any:
    """An answer of 700 MiB: declared by its Content-Length, or chunked with no length."""
    size = 700 * 1024 * 1024

    def make(head: bytes, body: bytes) -> Iterator[bytes]:
        status = head.split(b"\r\n", 1)[0]
        if declared:
            yield status + b"\r\nContent-Type: application/json\r\nContent-Length: " + \
                str(size).encode() + b"\r\n\r\n"
        else:
            yield status + b"\r\nContent-Type: application/json\r\n" \
                           b"Transfer-Encoding: chunked\r\n\r\n"
        piece = b"[" + b" " * (1024 * 1024 - 1)
        for _ in range(700):
            yield piece if declared else b"%x\r\n%s\r\n" % (len(piece), piece)
            piece = b" " * len(piece)
    return make


def run_measured(job: Path, state: Path) -> tuple[int, int, str]:
    """`runner run JOB --yes` in a process of its own: its exit code, its peak RSS (bytes,
    from ``os.wait4``) and its stderr. It is killed if it has not ended in 5 minutes."""
    err = state.with_suffix(".err")
    with err.open("w") as sink:
        process = subprocess.Popen([sys.executable, "-m", "runner", "run", str(job), "--yes",
                                    "--state", str(state)], stdout=subprocess.DEVNULL,
                                   stderr=sink)
    killer = threading.Timer(300, process.kill)
    killer.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        killer.cancel()
        if process.returncode is None and process.poll() is None:
            process.kill()
            process.wait()
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_maxrss * 1024, err.read_text()


def test_a_700_mib_answer_is_refused_unread_in_flat_memory(
        sandbox_factory: Any, tmp_path: Path) -> None:
    """Both forms of a huge answer to a confirm that went through: the call is in doubt,
    looked up, and settled; the run's peak memory stays far below the answer's size."""
    assert MAX_ANSWER < 1024 * 1024
    sandbox = sandbox_factory(submit_delay=0, complete_delay=0)
    for declared in (True, False):
        folder = tmp_path / ("declared" if declared else "chunked")
        folder.mkdir()
        rule = Rule(CONFIRM_B.replace("pay-b", f"{folder.name}-b"), endless(declared))
        with Rewriter(sandbox.url, [rule]) as proxy:
            job = write_job(folder, proxy.url, name=folder.name, prefix=folder.name,
                            concurrency=1)
            code, peak, err = run_measured(job, folder / "s.sqlite")
        assert code == 0, err
        assert rule.hits == 1 and rule.cut
        assert rule.sent < 64 * 1024 * 1024  # it stopped reading long before the end
        assert outcomes(folder / "s.sqlite", folder.name) == dict.fromkeys(
            (f"{folder.name}-{n}" for n in "abc"), "settled")
        assert created(sandbox)[f"{folder.name}-b"] == 1
        assert confirmed(sandbox)[f"{folder.name}-b"] == 1
        results = [r for s, _, r, _ in sent_for(folder / "s.sqlite", f"{folder.name}-b",
                                                "transaction") if s == "confirm"]
        assert results == ["in_doubt"]
        assert peak < 200 * 1024 * 1024, peak
