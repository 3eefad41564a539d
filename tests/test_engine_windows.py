"""Big batches in windows: no quotation outlives its TTL, and the funds check still covers
the whole batch.

Time is what the sandbox has been asked: its clock (and the run's) moves one second per POST
received, so a batch of 160 items takes 480 s of that clock to pay, against quotations that
live 240 s. Prepared all at once, every quotation would be dead by its confirm (1007004, then
a -r2 attempt); in windows (the first of 64 items) each is confirmed within its life.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from conftest import Admin
from engine_support import confirmed_ids, eur, posts, quotations, run, write_job

from runner.sandbox import RunningSandbox

ITEMS = 160
TTL = 240.0


def rows(n: int) -> str:
    return "".join(f"i{k:03d},1,10.00,+2547{k:08d}\n" for k in range(n))


def posts_clock(sb: RunningSandbox) -> Callable[[], float]:
    """A clock that moves one second per POST the sandbox received, from now."""
    start = float(math.floor(time.time()))
    counts = sb.state.faults.counts
    return lambda: start + counts["POST"]


def test_a_batch_longer_than_a_quotation_life_pays_with_three_posts_per_item(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path, state: Path) -> None:
    sb = sandbox_factory(submit_delay=0, complete_delay=0, quotation_ttl=TTL)
    clock = posts_clock(sb)
    sb.state.clock._source = clock
    path = write_job(tmp_path, sb, rows(ITEMS), concurrency=2)
    before = eur(sb)["available"]
    result = run(path, state, clock=clock)
    assert (result.exit_code, result.message, result.counts) == (0, "", {"settled": ITEMS})
    seen = posts(Admin(sb.url))
    assert (seen["POST"], seen["POST confirm"]) == (3 * ITEMS, ITEMS)
    assert quotations(sb) == [f"pay-i{k:03d}" for k in range(ITEMS)]  # no -r2
    assert sorted(confirmed_ids(sb)) == [f"pay-i{k:03d}" for k in range(ITEMS)]
    # 10.00 + a fee of 1.50 each
    assert before - eur(sb)["available"] == ITEMS * Decimal("11.50")


def test_no_window_is_confirmed_unless_the_balance_covers_the_whole_batch(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    # 100 items of 10.00, fee 1.50 each: the check before any POST counts the fees, from a
    # dryrun- quotation (150.00, with 2% and a cent an item: 154.00).
    adm.balance("EUR", "1090.00", "0")
    path = write_job(tmp_path, sb, rows(100), concurrency=2)
    result = run(path, state)
    assert (result.exit_code, result.message) == (
        4, "EUR 1,154.00 needed (154.00 of fees, 154.00 of them estimated), 1,090.00 "
           "available: nothing was sent but 1 dryrun- quotation(s) that estimated the fees "
           "(--allow-partial pays what the balance covers)")
    assert posts(adm) == {"POST": 1, "POST quotations": 1}
    # Covered at the start, but drained while the first window is prepared: its quoted cost
    # (64 x 11.50) and what is outstanding (36 x 10.00 and their share of the fees) stop it.
    adm.balance("EUR", "1160.00", "0")
    drain = {"prepare": 64, "confirm": 64}
    seen: dict[str, int] = {}

    def draining(phase: str, entry: object) -> None:
        seen[phase] = seen.get(phase, 0) + 1
        if seen[phase] == drain.get(phase):
            adm.balance("EUR", "1090.00" if phase == "prepare" else "300.00", "0")

    result = run(path, state, on_progress=draining)
    assert (result.exit_code, result.message) == (
        4, "EUR 1,151.44 needed, 1,090.00 available: funds short; nothing was confirmed "
           "(--allow-partial confirms what the balance covers)")
    assert "POST confirm" not in posts(adm)
    # Drained after the first window is confirmed: the second stops, and the run, having
    # confirmed some of the batch, exits 1, not 4.
    adm.balance("EUR", "1160.00", "0")
    drain["prepare"] = 0
    seen.clear()
    result = run(path, state, on_progress=draining)
    assert result.exit_code == 1
    assert result.message.endswith(": funds short; nothing more was confirmed "
                                   "(--allow-partial confirms what the balance covers)")
    assert posts(adm)["POST confirm"] == 64 and len(confirmed_ids(sb)) == 64
