"""The records behind the collection service's accounts and onboarding: companies, merchants,
accounts with their payout bank accounts, entries, and the four balances.

Balances are never stored: each is a sum over the account's entries, so the two cannot drift
apart. An entry's amount is positive and ``credit_debit_indicator`` gives its way, as on a
bank statement. With V the validated and W the waiting entries:

    UP_TO_DATE             = V credits - V debits
    WAITING_FOR_VALIDATION = W credits - W debits
    EXPECTED               = UP_TO_DATE + WAITING_FOR_VALIDATION
    AVAILABLE              = UP_TO_DATE - W debits  (a debit asked is reserved at once; a
                                                     waiting credit is not available yet)

A transfer request writes its two entries at once, both waiting; a payout request writes one
debit (its counterpart is the payout bank account) under a transfer request of its own, of
type ``Payout``. ``validation_delay`` seconds later on the sandbox clock, ``Lifecycle`` hands
the request to ``validate``: entries VALIDATED, transfer ``Validated``, payout ``charged``.

Resources of another integrator (the catalogue's Globex) exist but are forbidden: 1000403.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from runner.sandbox import catalogue as cat
from runner.sandbox.account_schemas import PayoutBankAccountCreate
from runner.sandbox.clock import iso
from runner.sandbox.errors import ApiError
from runner.sandbox.store import Store

if TYPE_CHECKING:
    from runner.sandbox.lifecycle import Lifecycle

CENT = Decimal("0.01")
WAITING, VALIDATED = "WAITINGFORVALIDATION", "VALIDATED"
CREDIT, DEBIT = "credit", "debit"
BALANCE_TYPES = ("AVAILABLE", "EXPECTED", "WAITING_FOR_VALIDATION", "UP_TO_DATE")
# What the sandbox clock does to a request, in Lifecycle's plan form: (SandboxConfig field
# holding the delay, next status); ``attach`` makes Lifecycle hand these to ``validate``.
PLANS = {"transfer_requests": [("validation_delay", "Validated")],
         "payout_requests": [("validation_delay", "charged")]}
PREFIXES = {"companies": "CMP", "merchants": "MER", "accounts": "ACC",
            "transfer_requests": "TRF", "payout_requests": "PYT"}
BANK_ID = re.compile(r"PBA(\d+)-\d+")
BANK_FIELDS = tuple(PayoutBankAccountCreate.model_fields)


# ---------------------------------------------------------------- finding resources
def public_id(table: str, rid: int) -> str:
    return f"{PREFIXES[table]}{rid:04d}"


def looks_like_id(table: str, value: str) -> bool:
    return re.fullmatch(PREFIXES[table] + r"\d+", value) is not None


def find(store: Store, table: str, ref: str) -> int | None:
    """The number of a resource named by its id, else by its external key (an account's
    label, a company's name, a merchant's merchant_external_id, a request's reference)."""
    if looks_like_id(table, ref):
        rid = int(ref[len(PREFIXES[table]):])
        if rid in store.tables[table]:
            return rid
    return store.by_ext[table].get(ref)


def allowed(store: Store, table: str, rid: int, ref: str) -> int:
    """``rid``, unless the resource is another integrator's (1000403)."""
    if store.meta[table][rid].get("foreign"):
        raise ApiError("1000403", f"{ref} belongs to another integrator")
    return rid


def account(store: Store, ref: str, missing: str = "1000404") -> int:
    """An account by id or label: ``missing`` (1000404 in a path, 1001001 in a body) when
    there is none."""
    rid = find(store, "accounts", ref)
    if rid is None:
        raise ApiError(missing, f"account {ref!r} does not exist")
    return allowed(store, "accounts", rid, ref)


def payout_bank_account(store: Store, ref: str) -> tuple[int, dict[str, Any]] | None:
    """(owning account's number, payout bank account) for a payout bank account id."""
    match = BANK_ID.fullmatch(ref)
    if match is None:
        return None
    rid = int(match.group(1))
    for bank in store.tables["accounts"].get(rid, {}).get("payout_bank_accounts") or []:
        if bank["id"] == ref:
            return rid, bank
    return None


# ---------------------------------------------------------------- entries and balances
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
    rid = store.next_id("entries")
    store.add("entries", entry, {}, rid=rid)
    return rid


def entries_of(store: Store, account_rid: int) -> list[dict[str, Any]]:
    """The account's entries, oldest first (a scan: entries are kept in creation order)."""
    account_id = store.tables["accounts"][account_rid]["id"]
    return [e for e in store.tables["entries"].values() if e["account_id"] == account_id]


def balances(store: Store, account_rid: int, now: float) -> list[dict[str, Any]]:
    """The four Balance objects, each with the last time its amount changed."""
    owner = store.tables["accounts"][account_rid]
    sums = {(s, way): Decimal(0) for s in (WAITING, VALIDATED) for way in (CREDIT, DEBIT)}
    changed = dict.fromkeys(BALANCE_TYPES, owner["creation_date"])

    def touch(kinds: tuple[str, ...], when: str | None) -> None:
        for kind in kinds:
            if when is not None and when > changed[kind]:  # same ISO form: text order is time
                changed[kind] = when

    for e in entries_of(store, account_rid):
        way, created, validated = e["credit_debit_indicator"], e["creation_date"], \
            e["validation_date"]
        sums[(e["status"], way)] += Decimal(e["entry"]["amount"])
        touch(("EXPECTED", "WAITING_FOR_VALIDATION"), created)
        touch(("UP_TO_DATE", "WAITING_FOR_VALIDATION"), validated)
        touch(("AVAILABLE",), created if way == DEBIT else validated)
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


def validate(store: Store, table: str, rid: int, status: str, when: float) -> None:
    """The request is validated: so are its entries (a payout's, through its transfer)."""
    meta = store.meta[table][rid]
    stamp = iso(when)
    if meta.get("transfer") is not None:
        validate(store, "transfer_requests", meta["transfer"], "Validated", when)
    for entry_rid in meta.get("entries", ()):
        store.tables["entries"][entry_rid].update(status=VALIDATED, validation_date=stamp)
        store.save("entries", entry_rid)
    store.tables[table][rid].update(status=status, validation_date=stamp)
    store.save(table, rid)


# ---------------------------------------------------------------- onboarded resources
def new_company(store: Store, name: str, template_id: str, when: float,
                foreign: bool = False) -> dict[str, Any]:
    rid = store.next_id("companies")
    company = {"id": public_id("companies", rid), "name": name, "creation_date": iso(when),
               "update_date": iso(when)}
    store.add("companies", company, {"template_id": template_id, "foreign": foreign},
              rid=rid, ext=name)
    return company


def new_merchant(store: Store, fields: dict[str, Any], when: float,
                 foreign: bool = False) -> dict[str, Any]:
    """``fields``: company_id, merchant_external_id, name, template_id, custom_data."""
    rid = store.next_id("merchants")
    merchant = {"id": public_id("merchants", rid), "company_id": fields["company_id"],
                "currency": cat.TEMPLATES[fields["template_id"]],
                "merchant_external_id": fields["merchant_external_id"], "name": fields["name"],
                "template_id": fields["template_id"], "custom_data": fields.get("custom_data"),
                "creation_date": iso(when), "update_date": iso(when)}
    store.add("merchants", merchant, {"foreign": foreign}, rid=rid,
              ext=fields["merchant_external_id"])
    return merchant


def new_account(store: Store, fields: dict[str, Any], banks: list[dict[str, Any]] | None,
                when: float, foreign: bool = False) -> dict[str, Any]:
    """``fields``: template_id, label, company_id, recipient_email, fees; ``banks``: payout
    bank accounts as sent (``is_blocked`` may be set by the catalogue only)."""
    rid = store.next_id("accounts")
    stamp = iso(when)
    kept = [{"id": f"PBA{rid:04d}-{n}", **{f: bank.get(f) for f in BANK_FIELDS},
             "status": "ACTIVE", "is_blocked": bool(bank.get("is_blocked")),
             "is_default": n == 1, "creation_date": stamp, "update_date": stamp}
            for n, bank in enumerate(banks or [], 1)]
    created = {"id": public_id("accounts", rid), "template_id": fields["template_id"],
               "label": fields["label"], "company_id": fields["company_id"],
               "currency": cat.TEMPLATES[fields["template_id"]],
               "recipient_email": fields.get("recipient_email"), "fees": fields.get("fees"),
               "payout_bank_accounts": None if banks is None else kept,
               "creation_date": stamp, "update_date": stamp}
    store.add("accounts", created, {"foreign": foreign}, rid=rid, ext=fields["label"])
    return created


def seed(store: Store, when: float) -> None:
    """The catalogue's companies, merchants and accounts, once (a replayed state has them)."""
    if store.seq["companies"] or store.seq["accounts"]:
        return
    ids: dict[str, str] = {}
    for company in cat.COLLECTION_COMPANIES:
        ids[company["name"]] = new_company(store, company["name"], company["template_id"],
                                           when, foreign=company["foreign"])["id"]
    for spec in cat.COLLECTION_MERCHANTS:
        fields = {**spec, "company_id": ids[spec["company"]]}
        new_merchant(store, fields, when, foreign=spec["foreign"])
    for spec in cat.COLLECTION_ACCOUNTS:
        fields = {**spec, "company_id": ids[spec["company"]]}
        new_account(store, fields, spec["payout_bank_accounts"], when, foreign=spec["foreign"])
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
