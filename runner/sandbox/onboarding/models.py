"""The records behind the collection service's onboarding and accounts: companies, merchants,
and accounts with their payout bank accounts; how a path or a body names one (its id, or the
name that addresses it), and which are another integrator's.

Ids are a prefix and digits (``CMP0001``, ``MER0001``, ``ACC0001``; payout bank accounts
``PBA0001-1``). Resources of another integrator (the catalogue's Globex) exist but are
forbidden: 1000403. An account's money is accounts/models.py's (entries and balances).
"""

from __future__ import annotations

import re
from typing import Any

from runner.sandbox.core.bounds import DIGITS
from runner.sandbox.core.clock import iso
from runner.sandbox.core.errors import ApiError
from runner.sandbox.core.store import Store
from runner.sandbox.onboarding import catalogue as cat
from runner.sandbox.onboarding.schemas import PayoutBankAccountCreate

PREFIXES = {"companies": "CMP", "merchants": "MER", "accounts": "ACC",
            "transfer_requests": "TRF", "payout_requests": "PYT"}
BANK_ID = re.compile(rf"PBA({DIGITS})-{DIGITS}")
BANK_FIELDS = tuple(PayoutBankAccountCreate.model_fields)


# ---------------------------------------------------------------- finding resources
def public_id(table: str, rid: int) -> str:
    return f"{PREFIXES[table]}{rid:04d}"


def looks_like_id(table: str, value: str) -> bool:
    return re.fullmatch(PREFIXES[table] + DIGITS, value) is not None


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
    _index_merchant(merchant_index(store), rid, merchant)
    return merchant


MerchantIndex = tuple[set[str], dict[str, int]]


def merchant_index(store: Store) -> MerchantIndex:
    """The company ids that have a merchant, and the first merchant (internal number) of each
    name: made from the merchants at the first use after a start, kept as merchants are made,
    so that neither question costs a scan of every merchant."""
    found: MerchantIndex | None = store.derived.get("merchants")
    if found is None:
        found = store.derived["merchants"] = (set(), {})
        for rid, merchant in store.tables["merchants"].items():
            _index_merchant(found, rid, merchant)
    return found


def _index_merchant(index: MerchantIndex, rid: int, merchant: dict[str, Any]) -> None:
    companies, names = index
    companies.add(merchant["company_id"])
    names.setdefault(merchant["name"], rid)


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
    """The catalogue's companies, merchants and accounts (the accounts' opening balances are
    accounts/models.py's)."""
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
