"""The money transfer service (document 2): discovery, balances, credit parties, quotations,
transactions and their confirmation, under ``/v1/money-transfer/``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from runner.sandbox import catalogue as cat
from runner.sandbox import schemas as s
from runner.sandbox.clock import iso
from runner.sandbox.errors import JSON, ApiError
from runner.sandbox.pagination import paginate
from runner.sandbox.pricing import price_remittance
from runner.sandbox.routing import (
    DecimalRoute,
    busy_first,
    check_party,
    require_alternatives,
    sandbox,
)
from runner.sandbox.statuses import (
    TRANSFER_PLANS,
    UNAVAILABLE,
    UNREGISTERED,
    plan_for,
    status_fields,
    trigger_of,
)

router = APIRouter(prefix="/v1/money-transfer", route_class=DecimalRoute,
                   tags=["money transfer"])
PAYERS = {p.id: cat.payer_resource(p) for p in cat.PAYERS}
Page = int | None


def _list(model: Any) -> dict[str, Any]:
    return {"response_model": list[model]}


def _payer(payer_id: int) -> cat.PayerSpec:
    spec = cat.PAYERS_BY_ID.get(payer_id)
    if spec is None:
        raise ApiError("1003002", f"payer {payer_id}")
    if not spec.active:
        raise ApiError("1003001")
    if not spec.available:
        raise ApiError("1003007")
    return spec


def _country(iso_code: str) -> str:
    if iso_code not in cat.COUNTRY_NAMES:
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
async def payer(payer_id: int) -> JSON:
    if payer_id not in PAYERS:
        raise ApiError("1000404", f"payer {payer_id}")
    return JSON(PAYERS[payer_id])


@router.get("/payers/{payer_id}/rates", response_model=s.PayerRates)
async def payer_rates(payer_id: int) -> JSON:
    spec = cat.PAYERS_BY_ID.get(payer_id)
    if spec is None:
        raise ApiError("1000404", f"payer {payer_id}")
    return JSON({"destination_currency": spec.currency, "rates": cat.rate_bands(spec.currency)})


@router.get("/countries", **_list(s.Country))
async def countries(page: Page = None, per_page: Page = None) -> JSON:
    return paginate([{"iso_code": c, "name": n} for c, n in sorted(cat.COUNTRY_NAMES.items())],
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


def _one_division(division_id: int) -> dict[str, Any]:
    if division_id not in cat.DIVISIONS:
        raise ApiError("1000404", f"administrative division {division_id}")
    return cat.DIVISIONS[division_id]


@router.get("/administrative-divisions/{division_id}", response_model=s.Division)
async def division(division_id: int) -> JSON:
    return JSON(_division(_one_division(division_id)))


@router.get("/administrative-divisions/{division_id}/administrative-divisions",
            **_list(s.Division))
async def division_children(division_id: int, page: Page = None, per_page: Page = None) -> JSON:
    _one_division(division_id)
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


def _entity(entity_id: int) -> dict[str, Any]:
    if entity_id not in cat.ENTITIES:
        raise ApiError("1000404", f"entity {entity_id}")
    return cat.ENTITIES[entity_id]


@router.get("/entities/{entity_id}", response_model=s.Entity)
async def entity(entity_id: int) -> JSON:
    return JSON(_entity(entity_id))


@router.get("/entities/{entity_id}/entities", **_list(s.Entity))
async def entity_children(entity_id: int, page: Page = None, per_page: Page = None) -> JSON:
    _entity(entity_id)
    return paginate([e for e in cat.ENTITIES.values() if e["parent_id"] == entity_id], page,
                    per_page)


@router.get("/balances", **_list(s.Balance))
async def balances(request: Request, page: Page = None, per_page: Page = None) -> JSON:
    life = sandbox(request).lifecycle
    with life.store.lock:
        life.advance()  # money moved by status changes now due, as a transaction read shows
        found = [life.balance_view(c) for c in sorted(life.store.balances)]
    return paginate(found, page, per_page)


# ---------------------------------------------------------------- credit parties
def _identifier(spec: cat.PayerSpec, body: s.CreditPartyRequest) -> dict[str, Any]:
    ident = body.credit_party_identifier.model_dump(exclude_none=True)
    require_alternatives(ident, spec.identifiers, "credit_party_identifier")
    return ident


@router.post("/payers/{payer_id}/credit-party-information", response_model=s.Beneficiary)
async def credit_party_information(payer_id: int, body: s.CreditPartyRequest) -> JSON:
    spec = _payer(payer_id)
    ident = _identifier(spec, body)
    for value in ident.values():
        if value in cat.KNOWN_PARTIES:
            first, last = cat.KNOWN_PARTIES[value]
            beneficiary = s.Beneficiary(firstname=first, lastname=last,
                                        country_iso_code=spec.country)
            return JSON(beneficiary.model_dump())
    raise ApiError("1000404", "no party with this identifier")


@router.post("/payers/{payer_id}/credit-party-verification", response_model=s.AccountStatus)
async def credit_party_verification(payer_id: int, body: s.CreditPartyRequest) -> JSON:
    spec = _payer(payer_id)
    ident = _identifier(spec, body)
    trigger = trigger_of(ident)
    status = {UNREGISTERED: "UNREGISTERED", UNAVAILABLE: "UNAVAILABLE"}.get(trigger or "",
                                                                          "AVAILABLE")
    return JSON({"id": payer_id, "account_status": status})


# ---------------------------------------------------------------- quotations
@router.post("/quotations", status_code=201, response_model=s.Quotation)
async def create_quotation(request: Request, body: s.QuotationRequest) -> JSON:
    sb = sandbox(request)
    store = sb.store
    with store.lock:
        if body.external_id in store.by_ext["quotations"]:
            raise ApiError("1007001", body.external_id)
        spec = _payer(body.payer_id)
        if body.source.country_iso_code not in cat.SOURCE_COUNTRIES:
            raise ApiError("1000998", body.source.country_iso_code)
        if body.destination.currency != spec.currency:
            raise ApiError("1003010", f"{body.destination.currency} (payer pays {spec.currency})")
        price = price_remittance(spec, body.mode, body.source.currency, body.source.amount,
                                 body.destination.amount)
        now = sb.clock.now()
        currency = body.source.currency
        quotation = s.Quotation(
            id=store.next_id("quotations"), external_id=body.external_id,
            payer=PAYERS[spec.id], mode=body.mode,
            source={"country_iso_code": body.source.country_iso_code, "currency": currency,
                    "amount": price.source_amount},
            destination={"currency": spec.currency, "amount": price.destination_amount},
            sent_amount={"currency": currency, "amount": price.source_amount},
            wholesale_fx_rate=price.rate, fee={"currency": currency, "amount": price.fee},
            creation_date=iso(now), expiration_date=iso(now + sb.config.quotation_ttl),
        ).model_dump()
        store.add("quotations", quotation, {"expires": now + sb.config.quotation_ttl,
                                            "payer_id": spec.id})
    return JSON(quotation, status_code=201)


def _quotation(request: Request, ref: str) -> tuple[dict[str, Any], dict[str, Any]]:
    store = sandbox(request).store
    found = store.get("quotations", ref)
    if found is None:
        raise ApiError("1008002", ref)
    return found, store.meta["quotations"][found["id"]]


@router.get("/quotations/{ref}", response_model=s.Quotation)
async def get_quotation(request: Request, ref: str) -> JSON:
    return JSON(_quotation(request, ref)[0])


# ---------------------------------------------------------------- transactions
@router.post("/quotations/{ref}/transactions", status_code=201, response_model=s.Transaction)
async def create_transaction(request: Request, ref: str, body: s.TransactionRequest) -> JSON:
    sb = sandbox(request)
    store = sb.store
    with store.lock:
        quotation, qmeta = _quotation(request, ref)
        if body.external_id in store.by_ext["transactions"]:
            raise ApiError("1007001", body.external_id)
        if sb.clock.now() > qmeta["expires"]:
            raise ApiError("1008003", ref)
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
            id=store.next_id("transactions"), **status_fields(first),
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
        store.add("transactions", txn, meta)
    return JSON(txn, status_code=201)


def _transaction(request: Request, ref: str) -> dict[str, Any]:
    found = sandbox(request).store.get("transactions", ref)
    if found is None:
        raise ApiError("1008004", ref)
    return found


@router.post("/transactions/{ref}/confirm", response_model=s.Transaction)
async def confirm_transaction(request: Request, ref: str) -> JSON:
    sb = sandbox(request)
    with sb.store.lock:
        sb.lifecycle.advance()
        txn = _transaction(request, ref)
        meta = sb.store.meta["transactions"][txn["id"]]
        if meta.get("confirmed"):
            raise ApiError("1007002", ref)
        if txn["status"] != "10000":
            raise ApiError("1007003", f"status {txn['status_message']}")
        qmeta = sb.store.meta["quotations"][meta["quotation_id"]]
        if sb.clock.now() > qmeta["expires"]:
            raise ApiError("1007004", ref)
        sb.lifecycle.reserve(meta["currency"], meta["cost"])
        meta["reserved"] = meta["confirmed"] = True
        sb.lifecycle.start("transactions", txn["id"], "20000", meta["plan"])
        answer = dict(txn)
    return JSON(answer)


@router.get("/transactions/{ref}", response_model=s.Transaction)
async def get_transaction(request: Request, ref: str) -> JSON:
    sb = sandbox(request)
    sb.lifecycle.advance()
    return JSON(_transaction(request, ref))


busy_first(router, "/quotations", "/quotations/{ref}/transactions", "/transactions/{ref}/confirm",
           "/transactions/{ref}", "/quotations/{ref}")
