"""The collection service's onboarding (document 1): companies, merchants and accounts, under
``/v1/onboarding/``, in the documented order: a merchant needs its company, an account needs a
company that has a merchant (2001201 otherwise).

A template id (``catalogue.TEMPLATES``) presets the currency of merchants and accounts; an
unknown one is 1001001, as is an unknown company or fee. Names that address a resource are
unique (2001201): a company's name, a merchant's merchant_external_id, an account's label;
none of them may have the form of an id of its kind (2001101), so addressing stays
unambiguous. The retrievals answer 201, as the document shows.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request

from runner import rules
from runner.bank_accounts import bic_problem, compact_bic, compact_iban, iban_problem
from runner.sandbox.accounts import models as ledger
from runner.sandbox.core.errors import JSON, ApiError
from runner.sandbox.core.routing import DecimalRoute, sandbox
from runner.sandbox.core.store import Store
from runner.sandbox.onboarding import catalogue as cat
from runner.sandbox.onboarding import models as records
from runner.sandbox.onboarding import schemas as a

router = APIRouter(prefix="/v1/onboarding", route_class=DecimalRoute,
                   tags=["collection service: onboarding"])
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
FORMATS = ("IBAN",)
ACCOUNT_TYPES = ("SAVINGS", "DEPOSIT", "CHECKING", "OTHERS")


def _iban_problem(value: str) -> str | None:
    """The provider takes the electronic form only (no spaces, capitals)."""
    if value != compact_iban(value):
        return "not in electronic form (no spaces, capitals)"
    return iban_problem(value)


def _template(template_id: str) -> str:
    """The template's currency."""
    if template_id not in cat.TEMPLATES:
        raise ApiError("1001001", f"template_id {template_id!r} does not exist (templates: "
                                  f"{', '.join(cat.TEMPLATES)})")
    return cat.TEMPLATES[template_id]


def _company(store: Store, company_id: str) -> int:
    rid = records.find(store, "companies", company_id)
    if rid is None or not records.looks_like_id("companies", company_id):
        raise ApiError("1001001", f"company_id {company_id!r} does not exist")
    return records.allowed(store, "companies", rid, company_id)


def _not_an_id(table: str, value: str, field: str) -> None:
    if records.looks_like_id(table, value):
        raise ApiError("2001101", f"{field} must not have the form of an id "
                                  f"({records.PREFIXES[table]} and digits)")


def _email(value: str | None, field: str) -> None:
    if value is not None and not EMAIL.fullmatch(value):
        raise ApiError("2001101", f"{field}: {value!r} is not an e-mail address")


def _found(request: Request, table: str, rid: int | None, ref: str) -> JSON:
    if rid is None:
        raise ApiError("1000404", f"{table[:-1]} {ref!r}")
    store = sandbox(request).store
    records.allowed(store, table, rid, ref)
    return JSON(store.tables[table][rid], status_code=201)


# ---------------------------------------------------------------- companies
@router.post("/companies", status_code=201, response_model=a.Company)
async def create_company(request: Request, body: a.CompanyCreate) -> JSON:
    sb = sandbox(request)
    with sb.store.lock:
        _template(body.template_id)
        _not_an_id("companies", body.name, "name")
        if body.name in sb.store.by_ext["companies"]:
            raise ApiError("2001201", f"a company named {body.name!r} already exists")
        company = records.new_company(sb.store, body.name, body.template_id, sb.clock.now())
        return JSON(company, status_code=201)


@router.get("/companies/{name_id}", status_code=201, response_model=a.Company)
async def get_company(request: Request, name_id: str) -> JSON:
    """By id, else by name."""
    store = sandbox(request).store
    with store.lock:
        return _found(request, "companies", records.find(store, "companies", name_id), name_id)


# ---------------------------------------------------------------- merchants
@router.post("/merchants", status_code=201, response_model=a.Merchant)
async def create_merchant(request: Request, body: a.MerchantCreate) -> JSON:
    sb = sandbox(request)
    with sb.store.lock:
        _template(body.template_id)
        _company(sb.store, body.company_id)
        _not_an_id("merchants", body.merchant_external_id, "merchant_external_id")
        if body.merchant_external_id in sb.store.by_ext["merchants"]:
            raise ApiError("2001201", f"merchant_external_id {body.merchant_external_id!r} "
                                      f"is already used")
        merchant = records.new_merchant(sb.store, body.model_dump(), sb.clock.now())
        return JSON(merchant, status_code=201)


@router.get("/merchants/{name_id}", status_code=201, response_model=a.Merchant)
async def get_merchant(request: Request, name_id: str) -> JSON:
    """By id, else by merchant_external_id, else by name (the first merchant of that name)."""
    store = sandbox(request).store
    with store.lock:
        rid = records.find(store, "merchants", name_id)
        if rid is None:
            rid = records.merchant_index(store)[1].get(name_id)
        return _found(request, "merchants", rid, name_id)


# ---------------------------------------------------------------- accounts
def _bank_problems(bank: a.PayoutBankAccountCreate, currency: str) -> dict[str, str]:
    """Field -> problem, for one payout bank account."""
    problems = {}
    if bank.format not in FORMATS:
        problems["format"] = f"must be one of {', '.join(FORMATS)}"
    elif (problem := _iban_problem(bank.iban)) is not None:
        problems["iban"] = f"{bank.iban!r} is not a valid IBAN: {problem}"
    if bank.bic != compact_bic(bank.bic):
        problems["bic"] = f"{bank.bic!r} is not a BIC: not in electronic form (no spaces, " \
                          "capitals)"
    elif (problem := bic_problem(bank.bic)) is not None:
        problems["bic"] = f"{bank.bic!r} is not a BIC: {problem}"
    country = bank.bank_country_iso_code
    if country is not None and not rules.is_country(country):
        problems["bank_country_iso_code"] = f"{country!r} is not an ISO 3166-1 alpha-3 code"
    kind = bank.external_account_type
    if kind is not None and kind not in ACCOUNT_TYPES:
        problems["external_account_type"] = f"must be one of {', '.join(ACCOUNT_TYPES)}"
    if bank.target_currency not in (None, currency):
        problems["target_currency"] = f"must be {currency}, the account's currency"
    if bank.holder_email is not None and not EMAIL.fullmatch(bank.holder_email):
        problems["holder_email"] = f"{bank.holder_email!r} is not an e-mail address"
    return problems


@router.post("/accounts", status_code=201, response_model=a.Account)
async def create_account(request: Request, body: a.AccountCreate) -> JSON:
    sb = sandbox(request)
    store = sb.store
    with store.lock:
        currency = _template(body.template_id)
        company_rid = _company(store, body.company_id)
        company_id = store.tables["companies"][company_rid]["id"]
        if company_id not in records.merchant_index(store)[0]:
            raise ApiError("2001201", f"company {company_id} has no merchant yet: onboard "
                                      f"the company, then a merchant, then accounts")
        _not_an_id("accounts", body.label, "label")
        if body.label in store.by_ext["accounts"]:
            raise ApiError("2001201", f"an account labelled {body.label!r} already exists")
        _email(body.recipient_email, "recipient_email")
        for fee in body.fees or []:
            if fee not in cat.FEES:
                raise ApiError("1001001", f"fee {fee!r} does not exist (fees: "
                                          f"{', '.join(cat.FEES)})")
        banks = body.payout_bank_accounts
        for n, bank in enumerate(banks or []):
            for field, problem in _bank_problems(bank, currency).items():
                raise ApiError("2001101", f"payout_bank_accounts.{n}.{field}: {problem}")
        fields: dict[str, Any] = {**body.model_dump(exclude={"payout_bank_accounts"}),
                                  "company_id": company_id}
        now = sb.clock.now()
        sent = None if banks is None else [b.model_dump() for b in banks]
        created = records.new_account(store, fields, sent, now)
        balances = ledger.balances(store, store.by_ext["accounts"][body.label], now)
        return JSON({**created, "balances": balances}, status_code=201)


@router.get("/accounts/{name_id}", status_code=201, response_model=a.Account)
async def get_account(request: Request, name_id: str) -> JSON:
    """By id, else by label. Not in the document, which reads companies and merchants this
    way but shows no read of an account: without it a client cannot see which payout bank
    accounts are blocked before it sends a payout."""
    sb = sandbox(request)
    with sb.store.lock:
        rid = records.account(sb.store, name_id)
        found = sb.store.tables["accounts"][rid]
        return JSON({**found, "balances": ledger.balances(sb.store, rid, sb.clock.now())},
                    status_code=201)
