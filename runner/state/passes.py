"""A run's items in pages (``runner.engine.pages``), in one SQLite state: the staged plan,
the passes over the job's items, and the estimated cost of what is still to be confirmed
(see ``StateStore``'s docs of each method). ``runner.state.postgres`` keeps the statements
and replaces the clock (the database's own) and what serialises the workers of one pass (an
advisory lock instead of SQLite's one writer).

A pass is a cursor over the job's items in row order, named by the run (or, with a shared
state, by the round of the job the workers share): each ``claim_next`` takes the next page
after it and moves it on, so the workers of one pass never take an item twice, and an item
a worker gave back after working it is not taken again in the same pass. Items whose claim
expired (their worker died) are taken first, wherever they are. With several workers, the
pages near the end of a pass shrink to a share of what is left (``_share``), so that they
end it together.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, TypeVar

from runner.state.records import STAGED, ItemRecord, Staged
from runner.state.store import now_iso
from runner.state.workers import LocalWorkers

T = TypeVar("T")
CHUNK = 500  # ids in one IN (...) list
_OPEN = "job_name = ? AND step <> 'final' AND outcome <> 'conflict'"
# What a staged row asks, when it is not what its item was paid (or sent) for.
_ASKED = "CASE WHEN plan_items.changed = 1 THEN plan_items.fingerprint END"


class LocalPasses(LocalWorkers):
    """The paging methods over ``_run``, ``_rows`` and ``_transaction`` (``?`` parameters)."""

    def _atomic(self, work: Callable[[Any], T]) -> T:
        """``work(tx)`` in one transaction that holds the write lock from its start."""
        with self._transaction("BEGIN IMMEDIATE") as tx:  # type: ignore[attr-defined]
            return work(tx)

    def _now(self) -> tuple[str, list[Any]]:
        """The SQL for the claims' clock, and its parameters."""
        return "?", [time.time()]

    def _serialize(self, tx: Any, key: str) -> None:
        """The workers of one pass take their pages one at a time (SQLite: one writer)."""

    def _share(self, tx: Any, job_name: str, ahead: str, params: list[Any], size: int) -> int:
        """How many of the items ahead of a pass's cursor (``ahead``: the condition, with
        ``params``) its next page takes, ``size`` at most: all (one worker per job)."""
        return size

    def _dicts(self, tx: Any, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        cursor = tx.execute(sql, params)
        if cursor.description is None:
            return []
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    # ------------------------------------------------------------ the plan, staged
    def stage_plan(self, job_name: str, staged: Sequence[Staged]) -> None:
        if not staged:
            return
        self._atomic(lambda tx: tx.executemany(
            f"INSERT INTO plan_items (job_name, {', '.join(STAGED)}) VALUES "
            f"(?, {', '.join('?' * len(STAGED))})",
            [staged_row(job_name, s) for s in staged]))

    def clear_plan(self, job_name: str) -> None:
        self._run("DELETE FROM plan_items WHERE job_name = ?", [job_name],
                  "DELETE FROM job_rest WHERE job_name = ?", [job_name])

    def record_plan(self, job_name: str, kind: str, conflict: str) -> None:
        stamp = now_iso()
        to_pay = "('new', 'resume', 'in_doubt', 'retry')"
        # What holds an item, by the plan's action: its payee check, or the item of the
        # batch it may duplicate (runner.engine.duplicates).
        held = "plan_items.action IN ('held', 'duplicate')"
        why = "CASE plan_items.action WHEN 'held' THEN 'payee' ELSE 'duplicate' END"
        self._run(
            "INSERT INTO items (external_id, job_name, kind, row, fingerprint, summary, payee, "
            "content, outcome, error_code, error_message, created_at, updated_at) SELECT "
            f"external_id, job_name, ?, row, fingerprint, summary, payee, content, CASE WHEN "
            f"{held} THEN 'held' ELSE 'pending' END, CASE WHEN {held} THEN {why} END, CASE "
            f"WHEN {held} THEN plan_items.why END, ?, ? FROM plan_items WHERE job_name = ? AND "
            f"(action = 'new' OR ({held} AND NOT EXISTS (SELECT 1 FROM items WHERE "
            "items.external_id = plan_items.external_id))) ORDER BY row",
            [kind, stamp, stamp, job_name],
            "UPDATE items SET fingerprint = plan_items.fingerprint, row = plan_items.row, "
            "content = plan_items.content, updated_at = ? FROM plan_items WHERE "
            "plan_items.job_name = ? AND plan_items.action = 'resume' AND "
            "plan_items.changed = 1 AND items.external_id = plan_items.external_id",
            [stamp, job_name],
            "UPDATE items SET outcome = 'conflict', error_code = 'changed', error_message = ?, "
            "updated_at = ? WHERE step <> 'confirmed' AND external_id IN (SELECT external_id "
            "FROM plan_items WHERE job_name = ? AND action = 'changed')",
            [conflict, stamp, job_name],
            # What the row asks now, of an item paid or on its way; cleared when the row asks
            # what was paid again. Rows that stay as they were are not touched (their
            # updated_at tells a run of unchanged inputs that nothing moved).
            f"UPDATE items SET changed_to = {_ASKED}, updated_at = ? FROM plan_items WHERE "
            "plan_items.job_name = ? AND plan_items.action IN ('settled', 'changed') AND "
            "items.external_id = plan_items.external_id AND "
            f"coalesce(items.changed_to, '') <> coalesce({_ASKED}, '')", [stamp, job_name],
            # The payee check's findings: kept with the items. An item held (by its check, or
            # as a possible duplicate) is held with why (not once final), one no longer held
            # is pending again.
            "UPDATE items SET payee = plan_items.payee FROM plan_items WHERE "
            "plan_items.job_name = ? AND plan_items.payee IS NOT NULL AND plan_items.action <> "
            "'new' AND items.external_id = plan_items.external_id", [job_name],
            "UPDATE items SET outcome = 'pending', error_code = NULL, error_message = NULL, "
            "updated_at = ? WHERE outcome = 'held' AND external_id IN (SELECT external_id FROM "
            f"plan_items WHERE job_name = ? AND action IN {to_pay})", [stamp, job_name],
            f"UPDATE items SET outcome = 'held', error_code = {why}, error_message = "
            "plan_items.why, updated_at = ? FROM plan_items WHERE plan_items.job_name = ? AND "
            f"{held} AND items.external_id = plan_items.external_id AND "
            "items.step <> 'final' AND items.intent IS NULL", [stamp, job_name])

    def staged(self, job_name: str, external_ids: Sequence[str]) -> dict[str, Staged]:
        found: dict[str, Staged] = {}
        for chunk in chunks(external_ids):
            rows = self._rows(f"SELECT * FROM plan_items WHERE job_name = ? AND external_id "
                              f"IN ({', '.join('?' * len(chunk))})", [job_name, *chunk])
            found.update((r["external_id"], Staged.from_row(r)) for r in rows)
        return found

    def staged_with(self, job_name: str, actions: Sequence[str]) -> Iterator[Staged]:
        last = -1
        marks = ", ".join("?" * len(actions))
        while rows := self._rows(f"SELECT * FROM plan_items WHERE job_name = ? AND action IN "
                                 f"({marks}) AND row > ? ORDER BY row LIMIT {CHUNK}",
                                 [job_name, *actions, last]):
            yield from (Staged.from_row(r) for r in rows)
            last = rows[-1]["row"]

    def same_payments(self, job_name: str, contents: Collection[str]
                      ) -> dict[str, list[tuple[str, int, str]]]:
        found: dict[str, list[tuple[str, int, str]]] = {}
        for chunk in chunks(sorted(contents)):
            rows = self._rows(
                f"SELECT content, external_id, row, outcome FROM (SELECT content, external_id, "
                f"row, outcome, row_number() OVER (PARTITION BY content ORDER BY row) AS n "
                f"FROM items WHERE job_name = ? AND content IN ({', '.join('?' * len(chunk))}) "
                f"AND outcome NOT IN ('failed', 'held')) AS ranked WHERE n <= 2 "
                f"ORDER BY row", [job_name, *chunk])
            for r in rows:
                found.setdefault(r["content"], []).append((r["external_id"], r["row"],
                                                           r["outcome"]))
        return found

    def items_by_id(self, external_ids: Sequence[str]) -> dict[str, ItemRecord]:
        found: dict[str, ItemRecord] = {}
        for chunk in chunks(external_ids):
            rows = self._rows(f"SELECT * FROM items WHERE external_id IN "
                              f"({', '.join('?' * len(chunk))})", chunk)
            found.update((r["external_id"], ItemRecord.from_row(r)) for r in rows)
        return found

    # ------------------------------------------------------------ passes
    def claim_next(self, job_name: str, worker: str, limit: int, ttl: float, pass_key: str,
                   *, intent: str | None = None, step: str | None = None,
                   before: str | None = None) -> list[ItemRecord]:
        now, clock = self._now()
        where, args = _OPEN, [job_name]
        for sql, value in (("intent = ?", intent), ("step = ?", step),
                           ("updated_at < ?", before)):
            if value is not None:
                where, args = f"{where} AND {sql}", [*args, value]
        claim = (f"UPDATE items SET claimed_by = ?, claim_expires = {now} + ? WHERE "
                 f"external_id IN (SELECT external_id FROM items WHERE {where} AND {{}} "
                 f"ORDER BY row LIMIT ?) RETURNING *")

        def work(tx: Any) -> list[dict[str, Any]]:
            self._serialize(tx, f"runner:pass:{job_name}:{pass_key}")
            got = self._dicts(tx, claim.format(
                f"claimed_by IS NOT NULL AND claim_expires <= {now}"),
                [worker, *clock, ttl, *args, *clock, limit])
            if len(got) >= limit:
                return got
            cursor = self._dicts(tx, "SELECT next_row FROM job_passes WHERE job_name = ? AND "
                                     "pass = ?", [job_name, pass_key])
            after = cursor[0]["next_row"] if cursor else -1
            ahead = f"row > ? AND (claimed_by IS NULL OR claim_expires <= {now})"
            size = self._share(tx, job_name, f"{where} AND {ahead}", [*args, after, *clock],
                               limit - len(got))
            fresh = self._dicts(tx, claim.format(ahead),
                                [worker, *clock, ttl, *args, after, *clock, size])
            if fresh:
                tx.execute("INSERT INTO job_passes (job_name, pass, next_row) VALUES (?, ?, ?) "
                           "ON CONFLICT (job_name, pass) DO UPDATE SET next_row = "
                           "excluded.next_row",
                           [job_name, pass_key, max(r["row"] for r in fresh)])
            return got + fresh
        rows = self._atomic(work)
        return sorted((ItemRecord.from_row(r) for r in rows), key=lambda r: r.row)

    def claimants(self, job_name: str) -> list[str]:
        now, clock = self._now()
        return [r["claimed_by"] for r in self._rows(
            f"SELECT DISTINCT claimed_by FROM items WHERE {_OPEN} AND claimed_by IS NOT NULL "
            f"AND claim_expires > {now}", [job_name, *clock])]

    def expire_claims(self, job_name: str, worker: str) -> None:
        self._run("UPDATE items SET claim_expires = 0 WHERE job_name = ? AND claimed_by = ?",
                  [job_name, worker])

    def drop_claims(self, job_name: str) -> None:
        self._run("UPDATE items SET claimed_by = NULL, claim_expires = NULL WHERE "
                  "job_name = ? AND claimed_by IS NOT NULL", [job_name])

    def end_passes(self, job_name: str) -> None:
        self._run("DELETE FROM job_passes WHERE job_name = ?", [job_name])

    def restart_passes(self, job_name: str, prefix: str) -> None:
        self._run("DELETE FROM job_passes WHERE job_name = ? AND substr(pass, 1, ?) = ?",
                  [job_name, len(prefix), prefix])

    def step_done_at(self, job_name: str, step: str) -> str | None:
        rows = self._rows("SELECT done_at FROM job_steps WHERE job_name = ? AND step = ?",
                          [job_name, step])
        return rows[0]["done_at"] if rows else None

    def forget_step(self, job_name: str, step: str) -> None:
        self._run("DELETE FROM job_steps WHERE job_name = ? AND step = ?", [job_name, step])

    # ------------------------------------------------------------ what is left to confirm
    def set_rest(self, job_name: str, amounts: Mapping[str, Decimal],
                 fees: Mapping[str, Decimal] | None = None) -> None:
        fees = fees or {}
        self._run("DELETE FROM job_rest WHERE job_name = ?", [job_name],
                  *[x for balance, amount in amounts.items() for x in (
                      "INSERT INTO job_rest (job_name, balance, amount, fees) VALUES "
                      "(?, ?, ?, ?)",
                      [job_name, balance, str(amount), str(fees.get(balance, 0))])])

    def take_rest(self, job_name: str, taken: Mapping[str, Decimal]) -> dict[str, Decimal]:
        def work(tx: Any) -> dict[str, Decimal]:
            self._serialize(tx, f"runner:rest:{job_name}")
            rest = {r["balance"]: (Decimal(r["amount"]), Decimal(r["fees"] or 0))
                    for r in self._dicts(tx, "SELECT balance, amount, fees FROM job_rest "
                                             "WHERE job_name = ?", [job_name])}
            for balance, amount in taken.items():
                if balance in rest and amount:
                    left, fees = rest[balance]
                    # The estimated fees go with the amounts they were estimated for.
                    fees = fees * max(left - amount, Decimal(0)) / left if left > 0 else \
                        Decimal(0)
                    rest[balance] = (left - amount, fees.quantize(Decimal("0.01")))
                    tx.execute("UPDATE job_rest SET amount = ?, fees = ? WHERE job_name = ? "
                               "AND balance = ?", [str(rest[balance][0]),
                                                   str(rest[balance][1]), job_name, balance])
            return {balance: left + fees for balance, (left, fees) in rest.items()}
        return self._atomic(work)


def chunks(ids: Sequence[str]) -> Iterator[list[str]]:
    """``ids`` in lists of ``CHUNK``, each one IN (...) list."""
    for start in range(0, len(ids), CHUNK):
        yield list(ids[start:start + CHUNK])


def staged_row(job_name: str, staged: Staged) -> list[Any]:
    """A staged item as a row of ``plan_items``: the job's name, then ``STAGED``."""
    return [job_name, *(_stored(getattr(staged, n)) for n in STAGED)]


def _stored(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        return str(value)
    return value
