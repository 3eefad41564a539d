"""The items of the state and the calls made for them, on either backend: an item's record
(read, inserted, changed), who holds an external_id (rule 7), a call's intent and outcome
around it (rule 2), a failed item's retries, what a person or `runner reconcile` found, and
the digests of what items pay. The statements are each dialect's (``runner/state/sql``);
an item's change names the columns it sets (``{changes}``), each a parameter ``set_NAME``;
a change that moves the item sets its ``state`` with them (``runner.state.sql``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from runner import lifecycle
from runner.errors import StateError
from runner.lifecycle import Call, Outcome
from runner.state.connector import Connector, Tx
from runner.state.history import RetryRecord
from runner.state.records import COLUMNS, AttemptRecord, ItemChanges, ItemRecord, now_iso

# A call's request as the attempt keeps it (amounts and other values as their text); one
# encoder for every call.
_request_text = json.JSONEncoder(default=str).encode


def _set(changes: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of an item's changed columns (``{changes}`` in the SQL)."""
    return {f"set_{name}": value for name, value in changes.items()}


class ItemBook:
    """The items' part of the store (see ``StateStore``'s docs of each method)."""

    def __init__(self, db: Connector) -> None:
        self.db = db
        self.sql = db.sql

    def item(self, external_id: str) -> ItemRecord | None:
        rows = self.db.read(self.sql("item"), external_id=external_id)
        return ItemRecord.from_row(rows[0]) if rows else None

    def items(self, job_name: str) -> Iterator[ItemRecord]:
        rows = self.db.read(self.sql("items"), job_name=job_name)
        return (ItemRecord.from_row(r) for r in rows)

    def item_pages(self, job_name: str, answered: str, size: int = 500
                   ) -> Iterator[list[tuple[ItemRecord, str | None]]]:
        row, after = -1, ""
        while True:
            rows = self.db.read(self.sql("item_page"), answered=answered, job_name=job_name,
                                row=row, after=after, size=size)
            if rows:
                yield [(ItemRecord.from_row(r), r["answered_at"]) for r in rows]
            if len(rows) < size:
                return
            row, after = rows[-1]["row"], rows[-1]["external_id"]

    def owners(self, external_ids: Sequence[str]) -> dict[str, str]:
        rows = self.db.read(self.sql("owners"), ids=list(external_ids))
        return {r["external_id"]: r["job_name"] for r in rows}

    def items_by_id(self, external_ids: Sequence[str]) -> dict[str, ItemRecord]:
        rows = self.db.read(self.sql("items_by_id"), ids=list(external_ids))
        return {r["external_id"]: ItemRecord.from_row(r) for r in rows}

    def insert_items(self, records: Sequence[ItemRecord]) -> None:
        if not records:
            return
        stamp = now_iso()
        for record in records:
            record.created_at = record.updated_at = stamp
        self.db.load(self.sql("insert_items"),
                     [[*(getattr(r, n) for n in COLUMNS), lifecycle.state(r)] for r in records])

    def update_item(self, external_id: str, changes: ItemChanges) -> None:
        self.db.write(self.sql("update_item", changes=tuple(changes)), **_set(changes),
                      updated_at=now_iso(), external_id=external_id)

    def start_retry(self, retry: RetryRecord, changes: ItemChanges) -> None:
        values = {**changes, "lineage": retry.lineage}
        self.db.write(self.sql("start_retry", changes=tuple(values)), **_set(values),
                      external_id=retry.external_id, job_name=retry.job_name,
                      run_id=retry.run_id, lineage=retry.lineage, ref=retry.ref,
                      previous_ref=retry.previous_ref, previous_status=retry.previous_status,
                      previous_code=retry.previous_code,
                      previous_message=retry.previous_message, changed=int(retry.changed),
                      updated_at=now_iso())

    def retries(self, job_name: str) -> list[RetryRecord]:
        rows = self.db.read(self.sql("retries"), job_name=job_name)
        return [RetryRecord(**{**{k: v for k, v in r.items() if k != "id"},
                               "changed": bool(r["changed"])}) for r in rows]

    def operations_sent(self, kinds: Sequence[str],
                        order_id: str | None = None) -> list[ItemRecord]:
        rows = self.db.read(self.sql("operations_sent"), kinds=list(kinds), order_id=order_id)
        return [ItemRecord.from_row(r) for r in rows]

    def resolve(self, job_name: str, external_id: str, outcome: str, note: str) -> None:
        record = self.item(external_id)
        if record is None or record.job_name != job_name:
            raise StateError(f"{external_id}: no such item in job {job_name}")
        if record.outcome not in (Outcome.UNKNOWN, Outcome.CONFLICT):
            raise StateError(f"{external_id} is {record.outcome}: only unknown or conflict "
                             f"items are resolved by hand")
        values = lifecycle.resolved(record, Outcome(outcome), note)
        self.db.write(self.sql("resolved", changes=tuple(values)), **_set(values),
                      external_id=external_id, step=Call.RESOLVE, updated_at=now_iso(),
                      result=outcome,
                      request=json.dumps({"was": record.outcome, "note": note}), note=note)

    def note_found(self, record: ItemRecord, note: str, changes: ItemChanges) -> bool:
        found, written = self.sql("found", changes=tuple(changes)), self.sql("found_attempt")
        stamp = now_iso()

        def work(tx: Tx) -> bool:
            if not tx.write(found, **_set(changes), updated_at=stamp,
                            external_id=record.external_id, lineage=record.lineage,
                            attempt=record.attempt, step=record.step, outcome=record.outcome):
                return False
            tx.write(written, external_id=record.external_id, updated_at=stamp,
                     request=json.dumps({"was": record.outcome, "ref": record.ref}),
                     result=changes.get("outcome", record.outcome), note=note)
            return True

        return self.db.transaction(work)

    def same_payments(self, job_name: str, contents: Collection[str]
                      ) -> dict[str, list[tuple[str, int, str]]]:
        found: dict[str, list[tuple[str, int, str]]] = {}
        for r in self.db.read(self.sql("same_payments"), job_name=job_name,
                              contents=sorted(contents)):
            found.setdefault(r["content"], []).append((r["external_id"], int(r["row"]),
                                                       r["outcome"]))
        return found

    # ------------------------------------------------------------ attempts (rule 2)
    def begin_attempt(self, run_id: int, external_id: str, step: str,
                      request: Mapping[str, Any],
                      answered: tuple[int, ItemChanges] | None = None) -> int:
        args: dict[str, Any] = dict(run_id=run_id, external_id=external_id, step=step,
                                    request=_request_text(request),
                                    updated_at=now_iso())
        if answered is None:
            return self.db.insert(self.sql("begin_attempt", changes=("intent",)), **args,
                                  set_intent=step)
        attempt_id, changes = answered
        values = {**changes, "intent": step}
        return self.db.insert(self.sql("begin_attempt_answered", changes=tuple(values)),
                              **args, **_set(values), answered=attempt_id)

    def end_attempt(self, attempt_id: int, external_id: str, result: str, *,
                    http_status: int | None, code: str | None, message: str | None,
                    resolved: bool, changes: ItemChanges) -> None:
        values: dict[str, Any] = dict(changes)
        if resolved:
            values["intent"] = None
        self.db.write(self.sql("end_attempt", changes=tuple(values)), **_set(values),
                      updated_at=now_iso(), result=result, http_status=http_status,
                      code=code, message=message, attempt_id=attempt_id,
                      external_id=external_id)

    def attempts(self, external_id: str) -> list[AttemptRecord]:
        rows = self.db.read(self.sql("attempts"), external_id=external_id)
        return [AttemptRecord(**r) for r in rows]
