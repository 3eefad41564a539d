"""The merchant payment service (document 3, part A): payment methods, debit parties,
quotations, payments and their confirmation, under ``/v1/merchant-payment/``.

Payment details (QR code, QR URL, instructions, redirect URL) are null until the payment is
confirmed, then filled for the fields the payment method lists.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from runner.sandbox import catalogue as cat
from runner.sandbox import schemas as s
from runner.sandbox.clock import iso
from runner.sandbox.errors import JSON, ApiError
from runner.sandbox.pagination import paginate
from runner.sandbox.pricing import price_merchant_payment
from runner.sandbox.routing import (
    DecimalRoute,
    busy_first,
    check_party,
    require_alternatives,
    sandbox,
)
from runner.sandbox.statuses import (
    PAYMENT_PLANS,
    UNAVAILABLE,
    UNREGISTERED,
    plan_for,
    status_fields,
    trigger_of,
)

router = APIRouter(prefix="/v1/merchant-payment", route_class=DecimalRoute,
                   tags=["merchant payment"])
METHODS = {m.id: cat.method_resource(m) for m in cat.PAYMENT_METHODS}
CONSUMER_ENUMS = ("gender", "id_type", "source_of_funds")
Page = int | None


def _method(method_id: int) -> cat.MethodSpec:
    spec = cat.METHODS_BY_ID.get(method_id)
    if spec is None:
        raise ApiError("1003002", f"payment method {method_id}", merchant=True)
    if not spec.active:
        raise ApiError("1003001", merchant=True)
    if not spec.available:
        raise ApiError("1003007", merchant=True)
    return spec


@router.get("/countries", response_model=list[s.Country])
async def countries(page: Page = None, per_page: Page = None) -> JSON:
    codes = sorted({m.country for m in cat.PAYMENT_METHODS})
    return paginate([{"iso_code": c, "name": cat.COUNTRY_NAMES[c]} for c in codes], page,
                    per_page, merchant=True)


@router.get("/payment-methods", response_model=list[s.PaymentMethod])
async def payment_methods(page: Page = None, per_page: Page = None,
                          country_iso_code: str | None = None,
                          currency: str | None = None) -> JSON:
    found = [METHODS[m.id] for m in cat.PAYMENT_METHODS
             if country_iso_code in (None, m.country) and currency in (None, m.currency)]
    return paginate(found, page, per_page, merchant=True)


@router.get("/payment-methods/{method_id}", response_model=s.PaymentMethod)
async def payment_method(method_id: int) -> JSON:
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


def _debit_party(spec: cat.MethodSpec, ident: s.DebitPartyIdentifier) -> dict[str, Any]:
    values = ident.model_dump(exclude_none=True)
    require_alternatives(values, spec.identifiers, "debit_party_identifier", merchant=True)
    check_party(values, "debit_party_identifier", merchant=True, enums=("account_type",))
    return values


@router.post("/payment-methods/{method_id}/debit-party-information",
             response_model=s.DebitPartyInformation)
async def debit_party_information(method_id: int, body: s.DebitPartyRequest) -> JSON:
    spec = _method(method_id)
    ident = _debit_party(spec, body.debit_party_identifier)
    if trigger_of(ident) != UNREGISTERED:
        for value in ident.values():
            if value in cat.KNOWN_PARTIES:
                first, last = cat.KNOWN_PARTIES[value]
                consumer = s.Consumer(firstname=first, lastname=last,
                                      country_iso_code=spec.country)
                return JSON({"id": method_id, "consumer": consumer.model_dump()})
    raise ApiError("1000404", "no party with this identifier", merchant=True)


@router.post("/payment-methods/{method_id}/debit-party-verification",
             response_model=s.AccountStatus)
async def debit_party_verification(method_id: int, body: s.DebitPartyVerificationRequest
                                   ) -> JSON:
    spec = _method(method_id)
    ident = _debit_party(spec, body.debit_party_identifier)
    consumer = body.consumer.model_dump()
    check_party(consumer, "consumer", merchant=True, enums=CONSUMER_ENUMS)
    status = "UNAVAILABLE" if trigger_of(ident) == UNAVAILABLE else "AVAILABLE"
    return JSON({"id": method_id, "account_status": status})


@router.post("/quotations", status_code=201, response_model=s.MerchantQuotation)
async def create_quotation(request: Request, body: s.MerchantQuotationRequest) -> JSON:
    sb = sandbox(request)
    store = sb.store
    with store.lock:
        if body.external_id in store.by_ext["mquotations"]:
            raise ApiError("1007001", body.external_id, merchant=True)
        spec = _method(body.payment_method_id)
        if body.payment.country_iso_code != spec.country:
            raise ApiError("1000999", f"payment.country_iso_code must be {spec.country}",
                           merchant=True)
        if body.payment.currency != spec.currency:
            raise ApiError("1000999", f"payment.currency must be {spec.currency}", merchant=True)
        collect = body.collection.currency
        price = price_merchant_payment(spec, body.mode, collect, body.payment.amount,
                                       body.collection.amount)
        now = sb.clock.now()
        quotation = s.MerchantQuotation(
            id=store.next_id("mquotations"), external_id=body.external_id, mode=body.mode,
            payment_method=METHODS[spec.id],
            payment={"country_iso_code": spec.country, "currency": spec.currency,
                     "amount": price.payment_amount},
            collection={"currency": collect, "amount": price.collection_amount},
            collection_in_payment_currency={"currency": spec.currency,
                                            "amount": price.collection_in_payment_currency},
            fee={"currency": collect, "amount": price.fee}, wholesale_fx_rate=price.rate,
            creation_date=iso(now), expiration_date=iso(now + sb.config.quotation_ttl),
        ).model_dump()
        store.add("mquotations", quotation, {"expires": now + sb.config.quotation_ttl,
                                             "method_id": spec.id})
    return JSON(quotation, status_code=201)


def _quotation(request: Request, ref: str) -> tuple[dict[str, Any], dict[str, Any]]:
    store = sandbox(request).store
    found = store.get("mquotations", ref)
    if found is None:
        raise ApiError("1008002", ref, merchant=True)
    return found, store.meta["mquotations"][found["id"]]


@router.get("/quotations/{ref}", response_model=s.MerchantQuotation)
async def get_quotation(request: Request, ref: str) -> JSON:
    return JSON(_quotation(request, ref)[0])


@router.post("/quotations/{ref}/payments", status_code=201, response_model=s.Payment)
async def create_payment(request: Request, ref: str, body: s.PaymentRequest) -> JSON:
    sb = sandbox(request)
    store = sb.store
    with store.lock:
        quotation, qmeta = _quotation(request, ref)
        if body.external_id in store.by_ext["payments"]:
            raise ApiError("1007001", body.external_id, merchant=True)
        if sb.clock.now() > qmeta["expires"]:
            raise ApiError("1008003", ref, merchant=True)
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
            id=store.next_id("payments"), **status_fields(first),
            external_id=body.external_id, external_code=body.external_code,
            creation_date=iso(sb.clock.now()), expiration_date=quotation["expiration_date"],
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
        store.add("payments", payment, meta)
    return JSON(payment, status_code=201)


def _payment(request: Request, ref: str) -> dict[str, Any]:
    found = sandbox(request).store.get("payments", ref)
    if found is None:
        raise ApiError("1008004", ref, merchant=True)
    return found


def _details(spec: cat.MethodSpec, payment: dict[str, Any]) -> dict[str, Any]:
    pid, amount = payment["id"], payment["payment"]["amount"]
    fields = set(spec.details)
    reference = f"SBX{pid:08d}"
    return s.PaymentDetails(
        qr_code=f"000201010212{spec.country}{spec.currency}{amount}{reference}"
        if "qr_code" in fields else None,
        qr_url=f"https://pay.sandbox.invalid/qr/{reference}" if "qr_url" in fields else None,
        instructions=[{"channel": "USSD", "steps": ["Dial *500#", f"Enter reference {reference}",
                                                   f"Approve {amount} {spec.currency}"]},
                      {"channel": "APP", "steps": ["Open the app", "Choose Pay",
                                                   f"Enter reference {reference}"]}]
        if "instructions" in fields else None,
        redirect_url=f"https://pay.sandbox.invalid/checkout/{reference}" if spec.redirect
        else None,
        merchant_id="SBX-MERCHANT", invoice_id=reference, amount=amount, currency=spec.currency,
    ).model_dump()


@router.post("/payments/{ref}/confirm", response_model=s.Payment)
async def confirm_payment(request: Request, ref: str) -> JSON:
    sb = sandbox(request)
    with sb.store.lock:
        sb.lifecycle.advance()
        payment = _payment(request, ref)
        meta = sb.store.meta["payments"][payment["id"]]
        if meta.get("confirmed"):
            raise ApiError("1007002", ref, merchant=True)
        if payment["status"] != "10000":
            raise ApiError("1007003", f"status {payment['status_message']}", merchant=True)
        if sb.clock.now() > sb.store.meta["mquotations"][meta["quotation_id"]]["expires"]:
            raise ApiError("1007004", ref, merchant=True)
        meta["confirmed"] = True
        payment["details"] = _details(cat.METHODS_BY_ID[payment["payment_method"]["id"]],
                                      payment)
        payment["payment_method_payment_reference"] = payment["details"]["invoice_id"]
        sb.lifecycle.start("payments", payment["id"], "20000", meta["plan"])
        answer = dict(payment)
    return JSON(answer)


@router.get("/payments/{ref}", response_model=s.Payment)
async def get_payment(request: Request, ref: str) -> JSON:
    sandbox(request).lifecycle.advance()
    return JSON(_payment(request, ref))


busy_first(router, "/quotations", "/quotations/{ref}/payments", "/payments/{ref}/confirm",
           "/payments/{ref}", "/quotations/{ref}")
