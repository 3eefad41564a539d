"""The job's queue, on either backend: the items table, each item with its state and when it
is next due (``items.due_at``, NULL: final, or parked until the next plan); the staged plan
that makes due what it pays; and the job's outstanding cost (what its items not confirmed
yet are estimated to cost). See ``StateStore``'s docs of each method; the statements are
each dialect's (``runner/state/sql``).

A worker claims the items due, a window at a time, with one statement: calls in doubt first
(the plan makes them due before the rest), then in row order; an item claimed by a worker
whose heartbeat went stale (it died) is free. PostgreSQL skips the rows another worker is
claiming (``FOR UPDATE SKIP LOCKED``); SQLite has one writer. Once worked, an item is
released: a polled one due again after a wait, the rest parked until the next plan (so no
item is worked twice in a round). With several live workers, a window near the end of
what is due is a fair share of what is left to start (``_share``), so that they end
together.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from runner.lifecycle import CLAIMABLE, TO_PAY, Step
from runner.state.connector import Connector, Row, Tx
from runner.state.records import STAGED, ItemRecord, Staged, now_iso

CHUNK = 500  # staged entries read at a time
SHARE_STEP = 8  # items: a window near the end of the work is a multiple of this, at least


class Queue:
    """The job's queue, its staged plan and its outstanding cost: a part of the store."""

    def __init__(self, db: Connector) -> None:
        self.db = db
        self.sql = db.sql

    # ------------------------------------------------------------ the plan, staged
    def stage_plan(self, job_name: str, staged: Sequence[Staged]) -> None:
        if staged:
            self.db.load(self.sql("stage_plan", columns=STAGED),
                         [staged_row(job_name, s) for s in staged])

    def clear_plan(self, job_name: str) -> None:
        self.db.write(self.sql("clear_plan"), job_name=job_name)

    def record_plan(self, job_name: str, kind: str, conflict: str, looked_up: str = ""
                    ) -> None:
        self.db.write(self.sql("record_plan"), job_name=job_name, kind=kind,
                      conflict=conflict, looked_up=looked_up, stamp=now_iso(),
                      to_pay=list(TO_PAY), claimable=list(CLAIMABLE))

    def staged(self, job_name: str, external_ids: Sequence[str]) -> dict[str, Staged]:
        rows = self.db.read(self.sql("staged"), job_name=job_name, ids=list(external_ids))
        return {r["external_id"]: Staged.from_row(r) for r in rows}

    def staged_with(self, job_name: str, actions: Sequence[str]) -> Iterator[Staged]:
        last = -1
        while rows := self.db.read(self.sql("staged_with"), job_name=job_name,
                                   actions=list(actions), after=last, size=CHUNK):
            yield from (Staged.from_row(r) for r in rows)
            last = rows[-1]["row"]

    # ------------------------------------------------------------ the queue
    def claim(self, job_name: str, worker: str, size: int, stale: float, until: float
              ) -> list[ItemRecord]:
        alive = time.time() - stale
        which = dict(job_name=job_name, alive=alive, until=until, claimable=list(CLAIMABLE))

        def work(tx: Tx) -> list[Row]:
            share = self._share(tx, which, worker, size)
            return tx.write(self.sql("claim"), **which, worker=worker, size=share)
        rows = self.db.transaction(work)
        return sorted((ItemRecord.from_row(r) for r in rows), key=lambda r: r.row)

    def _share(self, tx: Tx, which: dict[str, Any], worker: str, size: int) -> int:
        """Near the end of what is due, a window is a fair share of what is left to start:
        one live worker's part (rounded up to ``SHARE_STEP``), when that is less than
        ``size``. What is left to start is what is due and what the other live workers
        claimed and have sent nothing for yet: workers that end their windows together and
        claim one after the other take windows of one size, not each a share of what the
        one before left. The windows shrink as the work ends, and the workers end it
        together instead of one working alone through a last large window (guided
        self-scheduling)."""
        live = int(tx.read(self.sql("live_workers"), job_name=which["job_name"],
                           alive=which["alive"])[0]["n"])
        if live <= 1 or size <= SHARE_STEP:
            return size
        to_start = tx.read(self.sql("to_start"), **which, size=size * live, worker=worker,
                           fresh=Step.NEW)[0]
        share = -(-(int(to_start["due"]) + int(to_start["waiting"])) // live)
        return max(SHARE_STEP, min(size, -(-share // SHARE_STEP) * SHARE_STEP))

    def release(self, job_name: str, worker: str, worked: Sequence[str],
                again: Sequence[str] = (), polled: Mapping[float, Sequence[str]] | None = None
                ) -> None:
        def work(tx: Tx) -> None:
            for delay, ids in (polled or {}).items():
                tx.write(self.sql("polled"), job_name=job_name, worker=worker,
                         ids=list(ids), delay=delay)
            if worked:
                tx.write(self.sql("release"), job_name=job_name, worker=worker,
                         ids=list(worked), again=list(again))
        if worked or polled:
            self.db.transaction(work)

    def give_up(self, job_name: str, worker: str) -> None:
        self.db.write(self.sql("give_up"), job_name=job_name, worker=worker)

    def next_due(self, job_name: str, until: float) -> float | None:
        wait = self.db.read(self.sql("next_due"), job_name=job_name, until=until,
                            claimable=list(CLAIMABLE))[0]["wait"]
        return None if wait is None else float(wait)

    def clock(self) -> float:
        return float(self.db.read(self.sql("now"))[0]["now"])

    def claimants(self, job_name: str, stale: float) -> list[str]:
        return [r["claimed_by"] for r in self.db.read(
            self.sql("claimants"), job_name=job_name, alive=time.time() - stale)]

    # ------------------------------------------------------------ what is outstanding
    def set_outstanding(self, job_name: str, amounts: Mapping[str, Decimal],
                        fees: Mapping[str, Decimal] | None = None) -> None:
        fees = fees or {}
        rows = [[job_name, balance, str(amount), str(fees.get(balance, 0))]
                for balance, amount in amounts.items()]

        def work(tx: Tx) -> None:
            tx.write(self.sql("forget_outstanding"), job_name=job_name)
            if rows:
                tx.load(self.sql("set_outstanding"), rows)
        self.db.transaction(work)

    def reduce_outstanding(self, job_name: str, estimated: Mapping[str, Decimal]
                           ) -> dict[str, Decimal]:
        def work(tx: Tx) -> dict[str, Decimal]:
            outstanding = {r["balance"]: (Decimal(r["amount"]), Decimal(r["fees"] or 0))
                           for r in tx.read(self.sql("outstanding"), job_name=job_name)}
            for balance, amount in estimated.items():
                if balance in outstanding and amount:
                    left, fees = outstanding[balance]
                    # The estimated fees go with the amounts they were estimated for.
                    fees = fees * max(left - amount, Decimal(0)) / left if left > 0 else \
                        Decimal(0)
                    outstanding[balance] = (left - amount, fees.quantize(Decimal("0.01")))
                    tx.write(self.sql("reduce_outstanding"),
                             amount=str(outstanding[balance][0]),
                             fees=str(outstanding[balance][1]), job_name=job_name,
                             balance=balance)
            return {balance: left + fees for balance, (left, fees) in outstanding.items()}
        # The lock's name is older than the method's: runners of either version exclude
        # each other while they share a job.
        return self.db.transaction(work, lock=f"runner:rest:{job_name}")


def staged_row(job_name: str, staged: Staged) -> list[Any]:
    """A staged item as a row of ``plan_items``: the job's name, then ``STAGED``."""
    return [job_name, *(_stored(getattr(staged, n)) for n in STAGED)]


def _stored(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        return str(value)
    return value
