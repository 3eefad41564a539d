"""The money of the collection service's accounts: entries, the four balances, and the
validation of transfer and payout requests on the sandbox clock (the accounts themselves are
onboarding/models.py's records).

Balances are sums over the account's entries, kept as entries are posted and validated (an
account's ``Ledger``: its entries and their sums, summed afresh from the entries at the first
use after a start, so that the two cannot drift apart across a restart): a request costs the
same however many entries came before it. An entry's amount is positive and
``credit_debit_indicator`` gives its way, as on a bank statement. With V the validated and W
the waiting entries:

    UP_TO_DATE             = V credits - V debits
    WAITING_FOR_VALIDATION = W credits - W debits
    EXPECTED               = UP_TO_DATE + WAITING_FOR_VALIDATION
    AVAILABLE              = UP_TO_DATE - W debits  (a debit asked is reserved at once; a
                                                     waiting credit is not available yet)

A transfer request writes its two entries at once, both waiting; a payout request writes one
debit (its counterpart is the payout bank account) under a transfer request of its own, of
type ``Payout``. ``validation_delay`` seconds later on the sandbox clock, ``Lifecycle`` hands
the request to ``validate``: entries VALIDATED, transfer ``Validated``, payout ``charged``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from runner.sandbox.core.clock import iso
from runner.sandbox.core.lifecycle import Lifecycle
from runner.sandbox.core.store import Store
from runner.sandbox.onboarding import catalogue
from runner.sandbox.onboarding import models as records

CENT = Decimal("0.01")
WAITING, VALIDATED = "WAITINGFORVALIDATION", "VALIDATED"
CREDIT, DEBIT = "credit", "debit"
BALANCE_TYPES = ("AVAILABLE", "EXPECTED", "WAITING_FOR_VALIDATION", "UP_TO_DATE")
# What the sandbox clock does to a request, in Lifecycle's plan form: (SandboxConfig field
# holding the delay, next status); ``attach`` makes Lifecycle hand these to ``validate``.
PLANS = {"transfer_requests": [("validation_delay", "Validated")],
         "payout_requests": [("validation_delay", "charged")]}


def post_entry(store: Store, account_rid: int, indicator: str, amount: Decimal,
               counterpart: str | None, label: str, transfer_id: str | None, when: float,
               validated: bool = False) -> int:
    owner = store.tables["accounts"][account_rid]
    entry = {"account_id": owner["id"],
             "entry": {"amount": amount, "currency": owner["currency"]},
             "counterpart_account_id": counterpart, "creation_date": iso(when),
             "credit_debit_indicator": indicator, "label": label,
             "status": VALIDATED if validated else WAITING, "transfer_request_id": transfer_id,
             "validation_date": iso(when) if validated else None}
    ledgers = _ledgers(store)  # summed before the entry is added: it is counted once
    rid = store.next_id("entries")
    store.add("entries", entry, {}, rid=rid)
    _ledger(ledgers, owner["id"]).post(rid, entry)
    return rid


@dataclass
class Ledger:
    """One account's entries (internal numbers, oldest first), the sums of their amounts by
    (status, way) and the last time each balance changed (ISO text: text order is time)."""

    rids: list[int] = field(default_factory=list)
    sums: dict[tuple[str, str], Decimal] = field(default_factory=lambda: {
        (s, way): Decimal(0) for s in (WAITING, VALIDATED) for way in (CREDIT, DEBIT)})
    changed: dict[str, str] = field(default_factory=lambda: dict.fromkeys(BALANCE_TYPES, ""))

    def post(self, rid: int, e: dict[str, Any]) -> None:
        self.rids.append(rid)
        self.count(e, 1)

    def count(self, e: dict[str, Any], sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) an entry's amount; note its dates."""
        way = e["credit_debit_indicator"]
        self.sums[(e["status"], way)] += sign * Decimal(e["entry"]["amount"])
        created, validated = e["creation_date"], e["validation_date"]
        self._touch(("EXPECTED", "WAITING_FOR_VALIDATION"), created)
        self._touch(("UP_TO_DATE", "WAITING_FOR_VALIDATION"), validated)
        self._touch(("AVAILABLE",), created if way == DEBIT else validated)

    def _touch(self, kinds: tuple[str, ...], when: str | None) -> None:
        for kind in kinds:
            if when is not None and when > self.changed[kind]:
                self.changed[kind] = when


def _ledgers(store: Store) -> dict[str, Ledger]:
    """Account id -> its Ledger; summed from the entries at the first use after a start."""
    found: dict[str, Ledger] | None = store.derived.get("ledgers")
    if found is None:
        found = store.derived["ledgers"] = {}
        for rid, e in store.tables["entries"].items():
            _ledger(found, e["account_id"]).post(rid, e)
    return found


def _ledger(ledgers: dict[str, Ledger], account_id: str) -> Ledger:
    return ledgers.setdefault(account_id, Ledger())


def entries_of(store: Store, account_rid: int) -> list[dict[str, Any]]:
    """The account's entries, oldest first."""
    ledger = _ledgers(store).get(store.tables["accounts"][account_rid]["id"])
    entries = store.tables["entries"]
    return [] if ledger is None else [entries[rid] for rid in ledger.rids]


def balances(store: Store, account_rid: int, now: float) -> list[dict[str, Any]]:
    """The four Balance objects, each with the last time its amount changed."""
    owner = store.tables["accounts"][account_rid]
    ledger = _ledgers(store).get(owner["id"]) or Ledger()
    sums = ledger.sums
    changed = {kind: max(owner["creation_date"], ledger.changed[kind])
               for kind in BALANCE_TYPES}
    up_to_date = sums[(VALIDATED, CREDIT)] - sums[(VALIDATED, DEBIT)]
    waiting = sums[(WAITING, CREDIT)] - sums[(WAITING, DEBIT)]
    amounts = {"AVAILABLE": up_to_date - sums[(WAITING, DEBIT)],
               "EXPECTED": up_to_date + waiting, "WAITING_FOR_VALIDATION": waiting,
               "UP_TO_DATE": up_to_date}
    return [{"type": kind, "date": iso(now), "last_change_date": changed[kind],
             "balance": {"amount": amounts[kind].quantize(CENT), "currency": owner["currency"]}}
            for kind in BALANCE_TYPES]


def available(store: Store, account_rid: int, now: float) -> Decimal:
    return Decimal(balances(store, account_rid, now)[0]["balance"]["amount"])


def await_validation(store: Store, table: str, rid: int, request: dict[str, Any],
                     meta: dict[str, Any], due: float, reference: str) -> None:
    """Keep a new transfer or payout request, validated at ``due`` on the sandbox clock."""
    store.add(table, request, {**meta, "plan": PLANS[table], "step": 0, "due": due}, rid=rid,
              ext=reference)
    store.schedule_at(due, table, rid)


def validate(store: Store, table: str, rid: int, status: str, when: float) -> None:
    """The request is validated: so are its entries (a payout's, through its transfer)."""
    meta = store.meta[table][rid]
    stamp = iso(when)
    if meta.get("transfer") is not None:
        validate(store, "transfer_requests", meta["transfer"], "Validated", when)
    ledgers = _ledgers(store)
    for entry_rid in meta.get("entries", ()):
        entry = store.tables["entries"][entry_rid]
        ledger = _ledger(ledgers, entry["account_id"])
        ledger.count(entry, -1)
        entry.update(status=VALIDATED, validation_date=stamp)
        ledger.count(entry, 1)
        store.save("entries", entry_rid)
    store.tables[table][rid].update(status=status, validation_date=stamp)
    store.save(table, rid)


def seed(store: Store, when: float) -> None:
    """The catalogue's companies, merchants and accounts with their opening balances, once
    (a replayed state has them)."""
    if store.seq["companies"] or store.seq["accounts"]:
        return
    records.seed(store, when)
    for spec in catalogue.COLLECTION_ACCOUNTS:
        if spec["opening_balance"]:
            post_entry(store, store.by_ext["accounts"][spec["label"]], CREDIT,
                       spec["opening_balance"], None, "Opening balance", None, when,
                       validated=True)


def attach(lifecycle: Lifecycle) -> None:
    """Seed the catalogue (once), and let the sandbox clock validate requests."""
    store, clock = lifecycle.store, lifecycle.clock

    def applier(table: str) -> Callable[[int, str], None]:
        return lambda rid, status: validate(store, table, rid, status, clock.now())

    for table in PLANS:
        lifecycle.appliers[table] = applier(table)
    with store.lock:
        seed(store, clock.now())
