"""A remittance takes four committed transactions (the quotation's intent; its answer with
the transaction's intent; the transaction's answer with the confirm's intent; the confirm's
answer): a runner killed with SIGKILL between any two of them, then run again, pays the item
exactly once.

One item, every call held 150 ms by the sandbox so that the kill lands while the call named
is in flight; the runner is a process of its own (``runner run``), killed as the sandbox
receives that call. Killed during the funds check before the confirm (its balance read),
the transaction's answer has come back but is not recorded yet (it goes with the confirm's
intent): the next run finds the transaction in doubt, looks it up and confirms it once.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from conftest import PATIENCE, Admin, ending
from engine_support import (
    confirmed,
    cost_confirmed,
    created,
    eur,
    items,
    outcomes,
    quotations,
    run,
    runner_process,
    write_job,
)

from runner.sandbox import RunningSandbox

ITEM = "pay-a"
ROW = "a,1,10.00,+254700000001\n"

# (the calls the sandbox receives, one after the other, the last of which is in flight when
# the runner is killed; what the state says of the item then: its step, the call in doubt)
KILLS = {
    "quotation in flight": (["POST quotations"], ("new", "quotation")),
    "transaction in flight": (["POST create"], ("quoted", "transaction")),
    "transaction answered, funds being checked": (["POST create", "GET balances"],
                                                  ("quoted", "transaction")),
    "confirm in flight": (["POST confirm"], ("created", "confirm")),
    "confirm answered, status being read": (["POST confirm", "GET lookups"],
                                            ("confirmed", None)),
}


@pytest.mark.parametrize("point", list(KILLS))
def test_a_kill_between_any_two_transactions_of_an_item_pays_it_once(
        point: str, sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    calls, (step, doubt) = KILLS[point]
    before = eur(sb)["balance"]
    adm.faults({"*": {"latency_ms": 150}})
    job = write_job(tmp_path, sb, ROW, concurrency=1)
    log = tmp_path / "first.log"
    with ending(runner_process(job, state, log)) as first:
        deadline = time.monotonic() + PATIENCE
        for call in calls:
            seen = sb.state.faults.counts[call]
            while sb.state.faults.counts[call] == seen:
                assert first.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "the runner never got that far"
                time.sleep(0.001)
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=PATIENCE) == -signal.SIGKILL
    time.sleep(0.1)  # the call in flight ends at the sandbox
    killed = items(state)[ITEM]
    assert (killed["step"], killed["intent"]) == (step, doubt)

    adm.faults({})
    result = run(job, state)
    assert result.exit_code == 0, result.message
    assert quotations(sb) == [ITEM]  # no -r2: nothing was sent twice
    assert created(sb) == {ITEM: 1}
    assert confirmed(sb) == {ITEM: 1}
    assert outcomes(state) == {ITEM: "settled"}
    assert before - eur(sb)["balance"] == cost_confirmed(sb)
