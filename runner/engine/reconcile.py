"""Reconciliation: the state of a job against the provider's own records, reading only.

``reconcile_job`` looks every item of the job's state up at the provider by the external_id
of its current attempt (``Flow.found``: GETs only, at bounded concurrency), and each attempt
that failed before the item was sent again (``-fN``: it must still be final and unpaid
there). Rows of the job the state does not hold are looked up too: found, they are unknown to
the state. For each item it compares status, provider id, amounts and fee; then, per
currency, the settled items' total in the state against the same items' total in the
provider's records (those still showing the state's status: a payment reversed since is not
counted), and where the service keeps statements (the accounts of payouts and transfers),
against the debits the batch's requests booked there. A kind the provider cannot find by
external_id says what was compared instead (``NoLookup``). Nothing is POSTed: safe at any
time, also while a run is going on.

What it finds that changes what the batch is, it records in the state (and only there), so
that `runner status`, the summary and the exit codes say it: a final item whose money the
provider now shows otherwise (a payment reversed after it settled: failed, and ``--retry-
failed`` pays it again once its row is fixed; one failed that the provider shows paid:
settled), and an earlier attempt paid after all beside its retry (``earlier_paid``: a
double payment, its amount in the totals). Each is written with an attempt row (step
``reconcile``) and only while the item is still as it was read (``StateStore.note_found``):
a run that moved it on since wins.

An item on its way in the state (not final) whose status the provider shows further on
(confirmed then, completed now) is progress, not a difference: it is listed as such
(``progressed``), and the next run's poll records it. The totals count the money of the
double payments too (the earlier attempts paid after all beside their retry): the state's
recorded amounts against the provider's records of those attempts.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal
from typing import Any

from runner import lifecycle
from runner.engine.flow import Flow
from runner.errors import ItemInDoubt, NoLookup, OtherRecord
from runner.job import Job, ValidItem, iter_items
from runner.lifecycle import Outcome, State, Step
from runner.state import (
    EarlierPaid,
    ItemChanges,
    ItemRecord,
    RetryRecord,
    StateStore,
    now_iso,
)
from runner.summary.items_csv import csv_cell
from runner.summary.model import Scrubber

# The columns compared, as the state and ``Flow.found`` name them.
COMPARED = ("status", "transaction_id", "source_currency", "source_amount", "fee",
            "destination_currency", "destination_amount")
UNKNOWN, MISSING = "unknown to the state", "missing at the provider"
Twice = tuple[EarlierPaid, Decimal]  # an earlier attempt paid after all; what it shows paid
OTHER = "another's record"  # the lookup by external_id answered a record that is not it


@dataclass(frozen=True)
class Difference:
    """One way the state and the provider disagree: ``what`` differs (a column, or
    UNKNOWN, MISSING, ``earlier attempt``, ``not compared``, ``total``), and each side."""

    external_id: str
    row: int | None
    ref: str
    what: str
    state: str
    provider: str

    def line(self) -> str:
        where = f"{self.external_id} (row {self.row})" if self.row else self.external_id
        if self.ref and self.ref != self.external_id:
            where += f" as {self.ref}"
        return f"{where}: {self.what}: the state says {self.state}, the provider {self.provider}"


@dataclass(frozen=True)
class Total:
    """A currency's settled items: their total (sent + fee) in the state and in the
    provider's records of the same items."""

    currency: str
    items: int
    state: Decimal
    provider: Decimal
    paid_twice_items: int = 0  # earlier attempts paid after all (their money included)


@dataclass(frozen=True)
class Booked:
    """A balance's settled items: what they took as the state says, and as the service's
    statement of it shows (the entries their requests booked)."""

    balance: str
    state: Decimal
    statement: Decimal


@dataclass
class Reconciliation:
    job: str
    kind: str
    compared: int = 0
    differences: list[Difference] = field(default_factory=list)
    totals: list[Total] = field(default_factory=list)
    booked: list[Booked] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)  # what was written to the state
    progressed: list[str] = field(default_factory=list)  # on their way, further on now

    @property
    def ok(self) -> bool:
        return not self.differences

    def lines(self) -> list[str]:
        verdict = "all agree" if self.ok else f"{len(self.differences)} difference(s)"
        lines = [f"{self.job} ({self.kind}): {self.compared} item(s) compared with the "
                 f"provider's records: {verdict}"]
        lines += [f"  {d.line()}" for d in self.differences
                  if d.what not in ("total", "statement")]
        lines += [f"  progressed: {what}" for what in self.progressed]
        for t in self.totals:
            agree = "agree" if t.state == t.provider else "DIFFER"
            twice = f" and {t.paid_twice_items} paid twice" if t.paid_twice_items else ""
            lines.append(f"  {t.currency}: {t.items} settled item(s){twice}: {t.state:,} in "
                         f"the state, {t.provider:,} in the provider's records: {agree}")
        for b in self.booked:
            agree = "agree" if b.state == b.statement else "DIFFER"
            lines.append(f"  {b.balance}: {b.state:,} in the state, {b.statement:,} debited "
                         f"on the account's statement: {agree}")
        lines += [f"  recorded in the state: {what}" for what in self.recorded]
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.job, "kind": self.kind, "compared": self.compared, "ok": self.ok,
                "differences": [asdict(d) for d in self.differences],
                "totals": [{**asdict(t), "state": str(t.state), "provider": str(t.provider)}
                           for t in self.totals],
                "progressed": self.progressed,
                "booked": [{"balance": b.balance, "state": str(b.state),
                            "statement": str(b.statement)} for b in self.booked],
                "recorded": self.recorded}

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["external_id", "row", "ref", "what", "state", "provider"])
        for d in self.differences:
            writer.writerow([csv_cell(v) for v in (d.external_id, d.row, d.ref, d.what,
                                                   d.state, d.provider)])
        return out.getvalue()


def reconcile_job(job: Job, store: StateStore, flow: Flow[Any, Any],
                  concurrency: int) -> Reconciliation:
    records = list(store.items(job.name))
    earlier: dict[str, list[RetryRecord]] = {}
    for retry in store.retries(job.name):
        earlier.setdefault(retry.external_id, []).append(retry)
    known = {r.external_id for r in records}
    unseen = [v for v in _valid(job) if v.external_id not in known]
    owners = store.owners([v.external_id for v in unseen])
    unseen = [v for v in unseen if v.external_id not in owners]
    stubs = [ItemRecord(v.external_id, job.name, job.kind, v.row) for v in unseen]
    result = Reconciliation(job.name, job.kind)

    def one(record: ItemRecord) -> tuple[ItemChanges | None, list[Difference], list[Twice]]:
        return (*_compare(flow, record, earlier.get(record.external_id, []), result),
                list(_paid_twice(flow, record)))

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="reconcile") as pool:
        found = list(pool.map(one, [*records, *stubs]))
    result.recorded.sort()  # written by the pool's threads as they came
    result.progressed.sort()
    sums: dict[str, list[Any]] = {}
    for record, (held, differences, twice) in zip([*records, *stubs], found, strict=True):
        result.compared += 1
        result.differences += differences
        if record.outcome == Outcome.SETTLED and record.source_currency:
            total = sums.setdefault(record.source_currency, [0, Decimal(0), Decimal(0), 0])
            total[0] += 1
            total[1] += _cost(record.source_amount, record.fee)
            # The provider's side counts what it still shows as the state does: a payment
            # reversed since (or missing) is not in it.
            if held is not None and _same(held.get("status", record.status), record.status):
                total[2] += _cost(held.get("source_amount", record.source_amount),
                                  held.get("fee", record.fee))
        for paid, shown_paid in twice:
            total = sums.setdefault(paid.currency, [0, Decimal(0), Decimal(0), 0])
            total[1] += _cost(paid.amount, paid.fee)
            total[2] += shown_paid
            total[3] += 1
    for currency, (count, in_state, at_provider, twice) in sorted(sums.items()):
        result.totals.append(Total(currency, count, in_state, at_provider, twice))
        if in_state != at_provider:
            result.differences.append(Difference(currency, None, "", "total",
                                                 f"{in_state:,}", f"{at_provider:,}"))
    for balance, in_state, booked in flow.booked([r for r in records
                                                  if r.outcome == Outcome.SETTLED]):
        result.booked.append(Booked(balance, in_state, booked))
        if in_state != booked:
            result.differences.append(Difference(balance, None, "", "statement",
                                                 f"{in_state:,}", f"{booked:,}"))
    clean = Scrubber(job.credentials())  # a provider's message may echo what it was sent
    result.differences = [replace(d, state=clean(d.state), provider=clean(d.provider))
                          for d in result.differences]
    return result


def _paid_twice(flow: Flow[Any, Any], record: ItemRecord) -> Iterator[Twice]:
    """The item's earlier attempts recorded paid after all, each with what the provider's
    records of it show paid now (0 once it shows it unpaid, or cannot say)."""
    for paid in record.paid_before:
        try:
            held = flow.found(record, paid.ref)
        except (NoLookup, ItemInDoubt, OtherRecord):
            held = None
        if held is None or flow.outcome_of(held) != Outcome.SETTLED:
            yield paid, Decimal(0)
        else:
            yield paid, _cost(held.get("source_amount"), held.get("fee"))


def _compare(flow: Flow[Any, Any], record: ItemRecord, retries: list[RetryRecord],
             result: Reconciliation) -> tuple[ItemChanges | None, list[Difference]]:
    recorded = result.recorded
    def differs(what: str, state: Any, provider: Any, ref: str = record.ref) -> Difference:
        return Difference(record.external_id, record.row, ref, what, _shown(state),
                          _shown(provider))

    try:
        held = flow.found(record)
    except OtherRecord as exc:  # what the lookup answered is another's (rule 8)
        return None, [differs(OTHER, lifecycle.shown(record), str(exc))]
    except (NoLookup, ItemInDoubt) as exc:
        return None, [differs("not compared", lifecycle.shown(record), str(exc))]
    made = record.transaction_id is not None or record.step in (Step.CONFIRMED, Step.FINAL)
    found: list[Difference] = []
    shown: dict[str, Any] = dict(held or {})
    if held is None and made:
        found.append(differs(MISSING, _what(record.status, record.transaction_id),
                             "nothing under this external_id"))
    elif held is not None and not made:
        found.append(differs(UNKNOWN, "nothing made", _what(shown.get("status"),
                                                            shown.get("transaction_id"))))
    elif held is not None:
        found += [differs(name, getattr(record, name), shown[name]) for name in COMPARED
                  if name in shown and not _same(getattr(record, name), shown[name])]
        if lifecycle.state(record) not in lifecycle.FINAL and found and \
                all(d.what == "status" for d in found):
            found = []  # on its way: the provider shows it further on
            result.progressed.append(
                f"{record.external_id} (row {record.row}): {record.status} in the state, "
                f"{shown['status']} {shown.get('status_message') or ''}".rstrip()
                + " at the provider (the next run records it)")
        _note_final(flow, record, held, recorded)
    known = {e.ref for e in record.paid_before}  # paid after all, and recorded so already
    for retry in retries:
        if retry.previous_ref in known:
            continue
        try:
            paid = flow.unpaid(record, retry.previous_ref)
            if paid is not None:
                _note_earlier(flow, record, retry, recorded)
        except (NoLookup, ItemInDoubt, OtherRecord) as exc:
            paid = str(exc)
        if paid is not None:
            found.append(differs("earlier attempt", f"{retry.previous_status} (not paid; "
                                 f"sent again as {retry.ref})", paid, retry.previous_ref))
    return held, found


def _note_final(flow: Flow[Any, Any], record: ItemRecord, held: ItemChanges,
                recorded: list[str]) -> None:
    """A final item whose money the provider shows otherwise now (reversed after it
    settled, or paid after it failed): the state says so from now on."""
    now = flow.outcome_of(held)
    if lifecycle.state(record) not in (State.SETTLED, State.FAILED) or now is None or \
            now == record.outcome:
        return
    status, message = held.get("status"), held.get("status_message")
    paid = now == Outcome.SETTLED
    facts: ItemChanges = {"status": status, "status_class": held.get("status_class"),
                          "status_message": message}
    changes: ItemChanges = {**facts, **lifecycle.reconciled(
        record, now, None if paid else status, None if paid else message)}
    what = "paid after it failed" if paid else "reversed after it settled"
    note = f"{record.ref}: {what}: the provider shows {status} {message or ''}".strip()
    if flow.state.note_found(record, note, **changes):
        recorded.append(f"{record.external_id} (row {record.row}) {what}: {status} "
                        f"{message or ''}".rstrip())


def _note_earlier(flow: Flow[Any, Any], record: ItemRecord, retry: RetryRecord,
                  recorded: list[str]) -> None:
    """An earlier attempt the provider shows paid after all (settled): recorded on the item,
    a double payment while its current attempt is paid too."""
    held = flow.found(record, retry.previous_ref)
    if held is None or flow.outcome_of(held) != Outcome.SETTLED:
        return
    paid = EarlierPaid(retry.previous_ref, str(held.get("status")),
                       str(held.get("source_currency") or record.source_currency or ""),
                       str(held.get("source_amount")),
                       None if held.get("fee") is None else str(held.get("fee")), now_iso())
    earlier = json.dumps([asdict(e) for e in [*record.paid_before, paid]])
    note = f"{retry.previous_ref}: paid after all, beside {record.ref}"
    if flow.state.note_found(record, note, earlier_paid=earlier):
        recorded.append(f"{record.external_id} (row {record.row}): its earlier attempt "
                        f"{retry.previous_ref} was paid after all ({paid.currency} "
                        f"{paid.amount}), beside {record.ref}")


def _valid(job: Job) -> Iterator[ValidItem]:
    for result in iter_items(job):
        if isinstance(result, ValidItem):
            yield result


def _what(status: Any, made: Any) -> str:
    """``70000 (id 12)``: a status and the provider's id, as far as known."""
    if status is None and made is None:
        return "a record (no status shown)"
    return " ".join(x for x in (str(status or ""), f"(id {made})" if made else "") if x)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    try:
        return Decimal(str(a)) == Decimal(str(b))
    except ArithmeticError:
        return str(a) == str(b)


def _cost(amount: Any, fee: Any) -> Decimal:
    return Decimal(str(amount or 0)) + Decimal(str(fee or 0))


def _shown(value: Any) -> str:
    return "nothing" if value is None else str(value)
