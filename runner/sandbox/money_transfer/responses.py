"""The money transfer service (document 2): discovery, balances, credit parties, quotations,
transactions and their confirmation, under ``/v1/money-transfer/``. The rules (pricing,
balances) are models.py's; the quote-create-confirm pattern is core/quotes.py's.
"""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import APIRouter, Request

from runner.sandbox.core.bounds import Id
from runner.sandbox.core.catalogue import COUNTRY_NAMES
from runner.sandbox.core.clock import iso
from runner.sandbox.core.errors import JSON, ApiError
from runner.sandbox.core.pagination import paginate
from runner.sandbox.core.parties import (
    account_key,
    account_status,
    check_party,
    fail_on_test_value,
    holder_of,
    named_holder,
    require_alternatives,
)
from runner.sandbox.core.routing import DecimalRoute, busy_first, current, sandbox
from runner.sandbox.core.schemas import AccountStatus, Country
from runner.sandbox.core.statuses import TRANSFER_PLANS, plan_for, status_fields
from runner.sandbox.money_transfer import catalogue as cat
from runner.sandbox.money_transfer import schemas as s
from runner.sandbox.money_transfer.models import FLOW, price_remittance

router = APIRouter(prefix="/v1/money-transfer", route_class=DecimalRoute,
                   tags=["money transfer"])
PAYERS = {p.id: cat.payer_resource(p) for p in cat.PAYERS}
Page = int | None
T = TypeVar("T")


def _list(model: Any) -> dict[str, Any]:
    return {"response_model": list[model]}


def _payer(payer_id: int) -> cat.PayerSpec:
    return FLOW.open(cat.PAYERS_BY_ID.get(payer_id), f"payer {payer_id}")


def _found(table: dict[int, T], key: int, what: str) -> T:
    if key not in table:
        raise ApiError("1000404", f"{what} {key}")
    return table[key]


def _country(iso_code: str) -> str:
    if iso_code not in COUNTRY_NAMES:
        raise ApiError("1000404", f"country {iso_code}")
    return iso_code


# ---------------------------------------------------------------- discovery
@router.get("/services", **_list(s.Service))
async def services(page: Page = None, per_page: Page = None,
                   country_iso_code: str | None = None) -> JSON:
    ids = {p.service for p in cat.PAYERS if country_iso_code in (None, p.country)}
    return paginate([x for x in cat.SERVICES if x["id"] in ids], page, per_page)


@router.get("/payers", **_list(s.Payer))
async def payers(page: Page = None, per_page: Page = None, service_id: int | None = None,
                 country_iso_code: str | None = None, currency: str | None = None) -> JSON:
    found = [PAYERS[p.id] for p in cat.PAYERS
             if service_id in (None, p.service) and country_iso_code in (None, p.country)
             and currency in (None, p.currency)]
    return paginate(found, page, per_page)


@router.get("/payers/{payer_id}", response_model=s.Payer)
async def payer(payer_id: Id) -> JSON:
    return JSON(_found(PAYERS, payer_id, "payer"))


@router.get("/payers/{payer_id}/rates", response_model=s.PayerRates)
async def payer_rates(payer_id: Id) -> JSON:
    spec = _found(cat.PAYERS_BY_ID, payer_id, "payer")
    return JSON({"destination_currency": spec.currency, "rates": cat.rate_bands(spec.currency)})


@router.get("/countries", **_list(Country))
async def countries(page: Page = None, per_page: Page = None) -> JSON:
    return paginate([{"iso_code": c, "name": n} for c, n in sorted(COUNTRY_NAMES.items())],
                    page, per_page)


@router.get("/countries/{iso_code}/administrative-division-categories", **_list(s.Named))
async def division_categories(iso_code: str, page: Page = None, per_page: Page = None) -> JSON:
    return paginate(cat.DIVISION_CATEGORIES.get(_country(iso_code), []), page, per_page)


def _division(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != "country_iso_code"}


@router.get("/countries/{iso_code}/administrative-divisions", **_list(s.Division))
async def divisions(iso_code: str, page: Page = None, per_page: Page = None) -> JSON:
    _country(iso_code)
    found = [_division(d) for d in cat.DIVISIONS.values() if d["country_iso_code"] == iso_code]
    return paginate(found, page, per_page)


@router.get("/administrative-divisions/{division_id}", response_model=s.Division)
async def division(division_id: Id) -> JSON:
    return JSON(_division(_found(cat.DIVISIONS, division_id, "administrative division")))


@router.get("/administrative-divisions/{division_id}/administrative-divisions",
            **_list(s.Division))
async def division_children(division_id: Id, page: Page = None, per_page: Page = None) -> JSON:
    _found(cat.DIVISIONS, division_id, "administrative division")
    found = [_division(d) for d in cat.DIVISIONS.values() if d["parent_id"] == division_id]
    return paginate(found, page, per_page)


@router.get("/countries/{iso_code}/entity-categories", **_list(s.Named))
async def entity_categories(iso_code: str, page: Page = None, per_page: Page = None) -> JSON:
    used = {e["category"]["id"] for e in cat.ENTITIES.values()
            if e["country_iso_code"] == _country(iso_code)}
    return paginate([c for c in cat.ENTITY_CATEGORIES if c["id"] in used], page, per_page)


@router.get("/countries/{iso_code}/entity-identifiers", **_list(s.Coded))
async def entity_identifiers(iso_code: str, page: Page = None, per_page: Page = None) -> JSON:
    return paginate(cat.ENTITY_IDENTIFIERS.get(_country(iso_code), []), page, per_page)


@router.get("/countries/{iso_code}/payment-systems", **_list(s.Coded))
async def payment_systems(iso_code: str, page: Page = None, per_page: Page = None) -> JSON:
    return paginate(cat.PAYMENT_SYSTEMS.get(_country(iso_code), []), page, per_page)


def _entities(country: str | None, category_id: int | None, service_id: int | None,
              payer_id: int | None) -> list[dict[str, Any]]:
    out = []
    for e in cat.ENTITIES.values():
        payer_ids = [p["id"] for p in e["payers"]]
        services = {cat.PAYERS_BY_ID[p].service for p in payer_ids}
        if (country in (None, e["country_iso_code"]) and category_id in (None, e["category"]["id"])
                and service_id in (None, *services) and payer_id in (None, *payer_ids)):
            out.append(e)
    return out


@router.get("/countries/{iso_code}/entities", **_list(s.Entity))
async def country_entities(iso_code: str, page: Page = None, per_page: Page = None,
                           category_id: int | None = None, service_id: int | None = None,
                           payer_id: int | None = None) -> JSON:
    found = _entities(_country(iso_code), category_id, service_id, payer_id)
    return paginate(found, page, per_page)


@router.get("/entities", **_list(s.Entity))
async def entities(page: Page = None, per_page: Page = None, country_iso_code: str | None = None,
                   category_id: int | None = None, service_id: int | None = None,
                   payer_id: int | None = None) -> JSON:
    return paginate(_entities(country_iso_code, category_id, service_id, payer_id), page,
                    per_page)


@router.get("/entities/{entity_id}", response_model=s.Entity)
async def entity(entity_id: Id) -> JSON:
    return JSON(_found(cat.ENTITIES, entity_id, "entity"))


@router.get("/entities/{entity_id}/entities", **_list(s.Entity))
async def entity_children(entity_id: Id, page: Page = None, per_page: Page = None) -> JSON:
    _found(cat.ENTITIES, entity_id, "entity")
    return paginate([e for e in cat.ENTITIES.values() if e["parent_id"] == entity_id], page,
                    per_page)


@router.get("/balances", **_list(s.Balance))
async def balances(request: Request, page: Page = None, per_page: Page = None) -> JSON:
    with current(request) as sb:  # money moved by status changes now due, as a read shows
        found = [sb.balances.view(c) for c in sorted(sb.store.balances)]
    return paginate(found, page, per_page)


# ---------------------------------------------------------------- credit parties
def _identifier(spec: cat.PayerSpec, body: s.CreditPartyRequest) -> dict[str, Any]:
    ident = body.credit_party_identifier.model_dump(exclude_none=True)
    if not spec.checked:
        raise ApiError("1007100", f"payer {spec.id} offers no credit party check")
    require_alternatives(ident, spec.checked, "credit_party_identifier")
    fail_on_test_value(ident)
    return ident


@router.post("/payers/{payer_id}/credit-party-information", response_model=s.Beneficiary)
async def credit_party_information(request: Request, payer_id: Id,
                                   body: s.CreditPartyRequest) -> JSON:
    spec = _payer(payer_id)
    ident = _identifier(spec, body)
    store = sandbox(request).store
    with store.lock:
        known = holder_of(store.parties, ident)
    if known is None:
        raise ApiError("1000404", "no party with this identifier")
    beneficiary = s.Beneficiary(firstname=known[0], lastname=known[1],
                                country_iso_code=spec.country)
    return JSON(beneficiary.model_dump())


@router.post("/payers/{payer_id}/credit-party-verification", response_model=AccountStatus)
async def credit_party_verification(request: Request, payer_id: Id,
                                    body: s.CreditPartyRequest) -> JSON:
    spec = _payer(payer_id)
    ident = _identifier(spec, body)
    holder = named_holder(ident, body.beneficiary.model_dump()) if body.beneficiary else None
    store = sandbox(request).store
    with store.lock:
        if holder is not None and holder_of(store.parties, ident) is None:
            store.hold_account(account_key(ident), holder)
    return JSON({"id": payer_id, "account_status": account_status(ident)})


# ---------------------------------------------------------------- quotations
@router.post("/quotations", status_code=201, response_model=s.Quotation)
async def create_quotation(request: Request, body: s.QuotationRequest) -> JSON:
    sb = sandbox(request)
    with sb.store.lock:
        FLOW.fresh(sb.store, FLOW.quotations, body.external_id)
        spec = _payer(body.payer_id)
        if body.source.country_iso_code not in cat.SOURCE_COUNTRIES:
            raise ApiError("1000998", body.source.country_iso_code)
        if body.destination.currency != spec.currency:
            raise ApiError("1003010", f"{body.destination.currency} (payer pays {spec.currency})")
        price = price_remittance(spec, body.mode, body.source.currency, body.source.amount,
                                 body.destination.amount)
        expires, dates = FLOW.dates(sb)
        currency = body.source.currency
        quotation = s.Quotation(
            id=sb.store.next_id(FLOW.quotations), external_id=body.external_id,
            payer=PAYERS[spec.id], mode=body.mode,
            source={"country_iso_code": body.source.country_iso_code, "currency": currency,
                    "amount": price.source_amount},
            destination={"currency": spec.currency, "amount": price.destination_amount},
            sent_amount={"currency": currency, "amount": price.source_amount},
            wholesale_fx_rate=price.rate, fee={"currency": currency, "amount": price.fee},
            **dates,
        ).model_dump()
        FLOW.keep_quotation(sb.store, quotation, expires, payer_id=spec.id)
    return JSON(quotation, status_code=201)


@router.get("/quotations/{ref}", response_model=s.Quotation)
async def get_quotation(request: Request, ref: str) -> JSON:
    return JSON(FLOW.quotation(sandbox(request).store, ref)[0])


# ---------------------------------------------------------------- transactions
@router.post("/quotations/{ref}/transactions", status_code=201, response_model=s.Transaction)
async def create_transaction(request: Request, ref: str, body: s.TransactionRequest) -> JSON:
    sb = sandbox(request)
    store = sb.store
    with store.lock:
        quotation, qmeta = FLOW.usable_quotation(sb, ref, body.external_id)
        spec = _payer(qmeta["payer_id"])
        ident = body.credit_party_identifier.model_dump(exclude_none=True)
        sender = body.sender.model_dump()
        beneficiary = body.beneficiary.model_dump()
        require_alternatives(ident, spec.identifiers, "credit_party_identifier")
        require_alternatives(sender, spec.sender, "sender")
        require_alternatives(beneficiary, spec.beneficiary, "beneficiary")
        check_party(sender, "sender")
        check_party(beneficiary, "beneficiary")
        first, plan = plan_for(TRANSFER_PLANS, ident)
        sent, fee = quotation["sent_amount"], quotation["fee"]
        txn = s.Transaction(
            id=store.next_id(FLOW.items), **status_fields(first),
            external_id=body.external_id, external_code=body.external_code,
            payer_transaction_reference=None, payer_transaction_code=None,
            creation_date=iso(sb.clock.now()), expiration_date=quotation["expiration_date"],
            credit_party_identifier=ident, source=quotation["source"],
            destination=quotation["destination"], payer=quotation["payer"], sender=sender,
            beneficiary=beneficiary, callback_url=body.callback_url, sent_amount=sent,
            wholesale_fx_rate=quotation["wholesale_fx_rate"], retail_rate=body.retail_rate,
            retail_fee=body.retail_fee, retail_fee_currency=body.retail_fee_currency, fee=fee,
            purpose_of_remittance=body.purpose_of_remittance,
            additional_information_1=body.additional_information_1,
            additional_information_2=body.additional_information_2,
            additional_information_3=body.additional_information_3,
        ).model_dump()
        meta = {"quotation_id": quotation["id"], "cost": sent["amount"] + fee["amount"],
                "currency": sent["currency"], "plan": plan, "step": 0, "due": None,
                "reserved": False}
        store.add(FLOW.items, txn, meta)
    return JSON(FLOW.shown(sb, txn), status_code=201)


@router.post("/transactions/{ref}/confirm", response_model=s.Transaction)
async def confirm_transaction(request: Request, ref: str) -> JSON:
    with current(request) as sb:
        return JSON(FLOW.shown(sb, FLOW.confirm(sb, ref, sb.balances.reserve_cost)))


@router.get("/transactions/{ref}", response_model=s.Transaction)
async def get_transaction(request: Request, ref: str) -> JSON:
    with current(request) as sb:
        return JSON(FLOW.shown(sb, FLOW.item(sb.store, ref)))


busy_first(router, "/quotations", "/quotations/{ref}/transactions", "/transactions/{ref}/confirm",
           "/transactions/{ref}", "/quotations/{ref}")
