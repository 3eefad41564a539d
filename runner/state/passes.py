"""A run's items in pages (``runner.engine.pages``), on either backend: the staged plan, the
passes over the job's items, and the job's outstanding cost (what its items not confirmed
yet are estimated to cost); see ``StateStore``'s docs of each method. The statements are
each dialect's (``runner/state/sql``): PostgreSQL counts claims on the database's clock,
SQLite on this host's.

A pass is a cursor over the job's items in row order, named by the run (or, with a shared
state, by the round of the job the workers share): each ``claim_next`` takes the next page
after it and moves it on, so the workers of one pass never take an item twice, and an item
a worker gave back after working it is not taken again in the same pass. Items whose claim
expired (their worker died) are taken first, wherever they are. With several live workers,
the pages near the end of a pass shrink to a share of what is left (``_share``), so that
they end it together. A page is taken in one transaction under the pass's lock (SQLite: its
one writer; PostgreSQL: an advisory lock on the pass).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from runner.state.connector import Connector, Row, Tx
from runner.state.holders import LEASE_TTL
from runner.state.records import STAGED, ItemRecord, Staged, now_iso

CHUNK = 500  # staged entries read at a time
SHARE_STEP = 8  # items: a page near the end of a pass is a multiple of this, at least


class PlanBook:
    """The staged plan, the passes and the outstanding cost: a part of the store."""

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
                      conflict=conflict, looked_up=looked_up, stamp=now_iso())

    def staged(self, job_name: str, external_ids: Sequence[str]) -> dict[str, Staged]:
        rows = self.db.read(self.sql("staged"), job_name=job_name, ids=list(external_ids))
        return {r["external_id"]: Staged.from_row(r) for r in rows}

    def staged_with(self, job_name: str, actions: Sequence[str]) -> Iterator[Staged]:
        last = -1
        while rows := self.db.read(self.sql("staged_with"), job_name=job_name,
                                   actions=list(actions), after=last, size=CHUNK):
            yield from (Staged.from_row(r) for r in rows)
            last = rows[-1]["row"]

    # ------------------------------------------------------------ passes
    def claim_next(self, job_name: str, worker: str, limit: int, ttl: float, pass_key: str,
                   *, intent: str | None = None, step: str | None = None,
                   before: str | None = None) -> list[ItemRecord]:
        which = dict(job_name=job_name, intent=intent, step=step, before=before)

        def work(tx: Tx) -> list[Row]:
            now = time.time()  # SQLite's clock; PostgreSQL's statements read the database's
            got = tx.write(self.sql("claim_expired"), **which, worker=worker, now=now,
                           ttl=ttl, size=limit)
            if len(got) >= limit:
                return got
            cursor = tx.read(self.sql("pass_cursor"), job_name=job_name, pass_key=pass_key)
            after = cursor[0]["next_row"] if cursor else -1
            size = self._share(tx, which, after, now, limit - len(got))
            fresh = tx.write(self.sql("claim_ahead"), **which, worker=worker, now=now,
                             ttl=ttl, after=after, size=size)
            if fresh:
                tx.write(self.sql("move_pass"), job_name=job_name, pass_key=pass_key,
                         next_row=max(r["row"] for r in fresh))
            return got + fresh
        rows = self.db.transaction(work, lock=f"runner:pass:{job_name}:{pass_key}")
        return sorted((ItemRecord.from_row(r) for r in rows), key=lambda r: r.row)

    def _share(self, tx: Tx, which: dict[str, Any], after: int, now: float, size: int
               ) -> int:
        """Near the end of a pass, a page is a fair share of what is left: of the items
        ahead of the cursor, one live worker's part (rounded up to ``SHARE_STEP``), when
        that is less than ``size``. The pages shrink as the pass ends, and its workers end
        it together instead of one working alone through a last large page (guided
        self-scheduling). Live workers: those whose lease is fresh (with SQLite, one)."""
        live = int(tx.read(self.sql("live_workers"), job_name=which["job_name"],
                           alive=time.time() - LEASE_TTL)[0]["n"])
        if live <= 1 or size <= SHARE_STEP:
            return size
        left = int(tx.read(self.sql("count_ahead"), **which, after=after, now=now,
                           size=size * live)[0]["n"])
        share = -(-left // live)
        return max(SHARE_STEP, min(size, -(-share // SHARE_STEP) * SHARE_STEP))

    def claimants(self, job_name: str) -> list[str]:
        return [r["claimed_by"] for r in self.db.read(self.sql("claimants"),
                                                      job_name=job_name, now=time.time())]

    def expire_claims(self, job_name: str, worker: str) -> None:
        self.db.write(self.sql("expire_claims"), job_name=job_name, worker=worker)

    def drop_claims(self, job_name: str) -> None:
        self.db.write(self.sql("drop_claims"), job_name=job_name)

    def end_passes(self, job_name: str) -> None:
        self.db.write(self.sql("end_passes"), job_name=job_name)

    def restart_passes(self, job_name: str, prefix: str) -> None:
        self.db.write(self.sql("restart_passes"), job_name=job_name, prefix=prefix)

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
