"""The merchant payment service (document 3, part A): payment methods, debit parties,
quotations, payments and their confirmation, under ``/v1/merchant-payment/``. The rules
(pricing, payment details, merchant balances) are models.py's; the
quote-create-confirm pattern is core/quotes.py's.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from runner.sandbox.core.bounds import Id
from runner.sandbox.core.catalogue import COUNTRY_NAMES
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
from runner.sandbox.core.statuses import PAYMENT_PLANS, plan_for, status_fields
from runner.sandbox.merchant_payment import catalogue as cat
from runner.sandbox.merchant_payment import schemas as s
from runner.sandbox.merchant_payment.models import FLOW, price_merchant_payment, show_details

router = APIRouter(prefix="/v1/merchant-payment", route_class=DecimalRoute,
                   tags=["merchant payment"])
METHODS = {m.id: cat.method_resource(m) for m in cat.PAYMENT_METHODS}
CONSUMER_ENUMS = ("gender", "id_type", "source_of_funds")
Page = int | None


def _method(method_id: int) -> cat.MethodSpec:
    return FLOW.open(cat.METHODS_BY_ID.get(method_id), f"payment method {method_id}")


@router.get("/countries", response_model=list[Country])
async def countries(page: Page = None, per_page: Page = None) -> JSON:
    codes = sorted({m.country for m in cat.PAYMENT_METHODS})
    return paginate([{"iso_code": c, "name": COUNTRY_NAMES[c]} for c in codes], page,
                    per_page, merchant=True)


@router.get("/payment-methods", response_model=list[s.PaymentMethod])
async def payment_methods(page: Page = None, per_page: Page = None,
                          country_iso_code: str | None = None,
                          currency: str | None = None) -> JSON:
    found = [METHODS[m.id] for m in cat.PAYMENT_METHODS
             if country_iso_code in (None, m.country) and currency in (None, m.currency)]
    return paginate(found, page, per_page, merchant=True)


@router.get("/payment-methods/{method_id}", response_model=s.PaymentMethod)
async def payment_method(method_id: Id) -> JSON:
    if method_id not in METHODS:
        raise ApiError("1000404", f"payment method {method_id}", merchant=True)
    return JSON(METHODS[method_id])


@router.get("/balances", response_model=list[s.MerchantBalance])
async def balances(request: Request, page: Page = None, per_page: Page = None) -> JSON:
    store = sandbox(request).store
    with store.lock:
        found = [{"id": b["id"], "currency": c, "balance": b["balance"],
                  "available_balance": b["balance"]}
                 for c, b in sorted(store.merchant_balances.items())]
    return paginate(found, page, per_page, merchant=True)


def _debit_party(spec: cat.MethodSpec, ident: s.DebitPartyIdentifier,
                 alternatives: list[list[str]] | None = None) -> dict[str, Any]:
    values = ident.model_dump(exclude_none=True)
    require_alternatives(values, spec.identifiers if alternatives is None else alternatives,
                         "debit_party_identifier", merchant=True)
    check_party(values, "debit_party_identifier", merchant=True, enums=("account_type",))
    return values


def _checked_party(spec: cat.MethodSpec, ident: s.DebitPartyIdentifier) -> dict[str, Any]:
    """The identifier of a debit party check (information, verification)."""
    if not spec.checked:
        raise ApiError("1007100", f"payment method {spec.id} offers no debit party check",
                       merchant=True)
    values = _debit_party(spec, ident, spec.checked)
    fail_on_test_value(values, merchant=True)
    return values


@router.post("/payment-methods/{method_id}/debit-party-information",
             response_model=s.DebitPartyInformation)
async def debit_party_information(request: Request, method_id: Id,
                                  body: s.DebitPartyRequest) -> JSON:
    spec = _method(method_id)
    ident = _checked_party(spec, body.debit_party_identifier)
    store = sandbox(request).store
    with store.lock:
        known = holder_of(store.parties, ident)
    if known is None:
        raise ApiError("1000404", "no party with this identifier", merchant=True)
    consumer = s.Consumer(firstname=known[0], lastname=known[1], country_iso_code=spec.country)
    return JSON({"id": method_id, "consumer": consumer.model_dump()})


@router.post("/payment-methods/{method_id}/debit-party-verification",
             response_model=AccountStatus)
async def debit_party_verification(request: Request, method_id: Id,
                                   body: s.DebitPartyVerificationRequest) -> JSON:
    spec = _method(method_id)
    ident = _checked_party(spec, body.debit_party_identifier)
    consumer = body.consumer.model_dump()
    check_party(consumer, "consumer", merchant=True, enums=CONSUMER_ENUMS)
    holder = named_holder(ident, consumer)
    store = sandbox(request).store
    with store.lock:
        if holder is not None and holder_of(store.parties, ident) is None:
            store.hold_account(account_key(ident), holder)
    return JSON({"id": method_id, "account_status": account_status(ident)})


@router.post("/quotations", status_code=201, response_model=s.MerchantQuotation)
async def create_quotation(request: Request, body: s.MerchantQuotationRequest) -> JSON:
    sb = sandbox(request)
    with sb.store.lock:
        FLOW.fresh(sb.store, FLOW.quotations, body.external_id)
        spec = _method(body.payment_method_id)
        if body.payment.country_iso_code != spec.country:
            raise ApiError("1000999", f"payment.country_iso_code must be {spec.country}",
                           merchant=True)
        if body.payment.currency != spec.currency:
            raise ApiError("1000999", f"payment.currency must be {spec.currency}", merchant=True)
        collect = body.collection.currency
        price = price_merchant_payment(spec, body.mode, collect, body.payment.amount,
                                       body.collection.amount)
        expires, dates = FLOW.dates(sb)
        quotation = s.MerchantQuotation(
            id=sb.store.next_id(FLOW.quotations), external_id=body.external_id, mode=body.mode,
            payment_method=METHODS[spec.id],
            payment={"country_iso_code": spec.country, "currency": spec.currency,
                     "amount": price.payment_amount},
            collection={"currency": collect, "amount": price.collection_amount},
            collection_in_payment_currency={"currency": spec.currency,
                                            "amount": price.collection_in_payment_currency},
            fee={"currency": collect, "amount": price.fee}, wholesale_fx_rate=price.rate,
            **dates,
        ).model_dump()
        FLOW.keep_quotation(sb.store, quotation, expires, method_id=spec.id)
    return JSON(quotation, status_code=201)


@router.get("/quotations/{ref}", response_model=s.MerchantQuotation)
async def get_quotation(request: Request, ref: str) -> JSON:
    return JSON(FLOW.quotation(sandbox(request).store, ref)[0])


@router.post("/quotations/{ref}/payments", status_code=201, response_model=s.Payment)
async def create_payment(request: Request, ref: str, body: s.PaymentRequest) -> JSON:
    sb = sandbox(request)
    store = sb.store
    with store.lock:
        quotation, qmeta = FLOW.usable_quotation(sb, ref, body.external_id)
        spec = _method(qmeta["method_id"])
        ident = _debit_party(spec, body.debit_party_identifier)
        party = body.consumer or body.sender or s.Consumer()
        consumer = party.model_dump()
        require_alternatives(consumer, spec.consumer, "consumer", merchant=True)
        check_party(consumer, "consumer", merchant=True, enums=CONSUMER_ENUMS)
        purpose = body.purpose_of_payment or body.purpose_of_remittance
        if purpose is not None and purpose != "OTHER":
            raise ApiError("1000999", "purpose_of_payment must be OTHER", merchant=True)
        first, plan = plan_for(PAYMENT_PLANS, ident)
        fee, collection = quotation["fee"], quotation["collection"]
        payment = s.Payment(
            id=store.next_id(FLOW.items), **status_fields(first),
            external_id=body.external_id, external_code=body.external_code,
            creation_date=FLOW.stamp(sb.clock.now()),
            expiration_date=quotation["expiration_date"],
            debit_party_identifier=ident, details=s.PaymentDetails(),
            payment=quotation["payment"], collection=collection,
            payment_method=quotation["payment_method"], consumer=consumer,
            callback_url=body.callback_url,
            collection_in_payment_currency=quotation["collection_in_payment_currency"],
            wholesale_fx_rate=quotation["wholesale_fx_rate"], fee=fee,
            purpose_of_payment=purpose,
            additional_information_1=body.additional_information_1,
            additional_information_2=body.additional_information_2,
            additional_information_3=body.additional_information_3,
            payment_method_payment_reference=None, payment_method_payment_code=None,
        ).model_dump()
        meta = {"quotation_id": quotation["id"], "net": collection["amount"] - fee["amount"],
                "currency": collection["currency"], "plan": plan, "step": 0, "due": None}
        store.add(FLOW.items, payment, meta)
    return JSON(FLOW.shown(sb, payment), status_code=201)


@router.post("/payments/{ref}/confirm", response_model=s.Payment)
async def confirm_payment(request: Request, ref: str) -> JSON:
    with current(request) as sb:
        return JSON(FLOW.shown(sb, FLOW.confirm(sb, ref, show_details)))


@router.get("/payments/{ref}", response_model=s.Payment)
async def get_payment(request: Request, ref: str) -> JSON:
    with current(request) as sb:
        return JSON(FLOW.shown(sb, FLOW.item(sb.store, ref)))


busy_first(router, "/quotations", "/quotations/{ref}/payments", "/payments/{ref}/confirm",
           "/payments/{ref}", "/quotations/{ref}")
