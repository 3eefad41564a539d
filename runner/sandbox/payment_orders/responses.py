"""The collection service (document 1): quotations, payment orders and their operations
(charge, refund, cancel), under ``/v1/payment/``. The rules live in models.py and checks.py.

Addressing: a payment order's ref of the id form (``PO`` and 10 digits) is its id, ``ext-X``
is the external id X, anything else is an external id as it stands; quotations alike (``QT``
and 10 digits). A quotation secures its rate for ``payment_quotation_ttl`` seconds and makes
one payment order.
"""

from __future__ import annotations

from decimal import ROUND_DOWN, ROUND_UP, Decimal
from typing import Any

from fastapi import APIRouter, Request

from runner.sandbox.core.clock import iso
from runner.sandbox.core.errors import JSON, ApiError
from runner.sandbox.core.routing import DecimalRoute, current, sandbox
from runner.sandbox.core.schemas import Status
from runner.sandbox.payment_orders import catalogue as pc
from runner.sandbox.payment_orders import checks
from runner.sandbox.payment_orders import models as po
from runner.sandbox.payment_orders import schemas as ps

router = APIRouter(prefix="/v1/payment", route_class=DecimalRoute,
                   tags=["collection service: payment orders"])


@router.get("/ping", response_model=Status)
async def ping() -> JSON:
    return JSON({"status": "up"})


# ---------------------------------------------------------------- quotations
def _to_unit(value: Decimal, currency: str, rounding: str) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-pc.digits(currency)), rounding=rounding)


@router.post("/quotations", status_code=201, response_model=ps.PaymentQuotation)
async def create_quotation(request: Request, body: ps.PaymentQuotationCreate) -> JSON:
    """REQUESTED_AMOUNT: the buyer pays the requested amount converted, rounded up to the
    buyer currency's unit; PROCESSED_AMOUNT: the merchant is paid the processed amount
    converted back, rounded down. Either way the merchant gets at least what it asked."""
    sb = sandbox(request)
    store = sb.store
    with store.lock:
        if body.external_id is not None and body.external_id in store.by_ext[po.QUOTATIONS]:
            raise checks.reused(body.external_id)
        merchant = checks.merchant(store, body.merchant_id, None)
        page = checks.page(body.payment_page_id)
        if page.merchant_currency is None:
            raise ApiError("2001201", f"payment page {page.id} does not convert currency: "
                                      f"create the payment order directly")
        if merchant["currency"] != page.merchant_currency:
            raise ApiError("2001201", f"payment page {page.id} pays out in "
                                      f"{page.merchant_currency}, not in the merchant's "
                                      f"{merchant['currency']}")
        if body.requested.currency != merchant["currency"]:
            raise ApiError("2001101", f"requested.currency must be {merchant['currency']}, the "
                                      f"merchant's currency")
        if body.processed.currency != page.currency:
            raise ApiError("2001101", f"processed.currency must be {page.currency}, the "
                                      f"currency of payment page {page.id}")
        rate = pc.rate(merchant["currency"], page.currency)
        if rate is None:
            raise ApiError("2001201", f"no rate from {merchant['currency']} to {page.currency}")
        mine, theirs = body.requested.currency, page.currency
        if body.quotation_mode == "REQUESTED_AMOUNT":
            if body.requested.amount is None:
                raise ApiError("2001101", "requested.amount is required when quotation_mode "
                                          "is REQUESTED_AMOUNT")
            requested = checks.amount(body.requested.amount, mine, "requested.amount")
            processed = _to_unit(requested * rate, theirs, ROUND_UP)
        else:
            if body.processed.amount is None:
                raise ApiError("2001101", "processed.amount is required when quotation_mode "
                                          "is PROCESSED_AMOUNT")
            processed = checks.amount(body.processed.amount, theirs, "processed.amount")
            requested = _to_unit(processed / rate, mine, ROUND_DOWN)
            if requested <= 0:
                raise ApiError("2001101", "processed.amount converts to nothing")
        now = sb.clock.now()
        ttl = sb.config.payment_quotation_ttl
        rid = store.next_id(po.QUOTATIONS)
        quotation = ps.PaymentQuotation(
            id=f"QT{rid:010d}", external_id=body.external_id, merchant_id=merchant["id"],
            payment_page_id=page.id, requested={"amount": requested, "currency": mine},
            processed={"amount": processed, "currency": theirs}, wholesale_fx_rate=rate,
            creation_date=iso(now), expiration_date=iso(now + ttl),
            quotation_mode=body.quotation_mode,
        ).model_dump()
        store.add(po.QUOTATIONS, quotation, {"expires": now + ttl, "order": None}, rid=rid,
                  ext=body.external_id)
    return JSON(quotation, status_code=201)


# ---------------------------------------------------------------- payment orders
def _draft(request: Request, body: ps.QuotationPaymentOrderCreate, merchant: dict[str, Any],
           page: pc.PaymentPage, requested: dict[str, Any], processed: dict[str, Any],
           rate: Decimal, quotation_id: str | None) -> tuple[po.Draft, str, po.Plan]:
    """Check what depends on the mode and the page; the draft, first status and plan."""
    sb = sandbox(request)
    mode = "REDIRECT" if body.integration_mode == "REDIRECTION" else body.integration_mode
    urls = body.merchant_urls.model_dump()
    needed = ("notification_url",) if mode == "HOST_TO_HOST" else tuple(urls)
    for name in needed:
        if urls[name] is None:
            raise ApiError("2001101", f"merchant_urls.{name} is required in {mode} mode")
    for name, value in urls.items():
        checks.url(value, f"merchant_urls.{name}")
    order = body.merchant_order.model_dump() if body.merchant_order else None
    customer = (order or {}).get("customer") or {}
    checks.email(customer.get("email"), "merchant_order.customer.email")
    if page.vertical == pc.BNPL:
        for name in pc.BNPL_CUSTOMER:
            if not customer.get(name):
                raise ApiError("2001101", f"merchant_order.customer.{name} is required by "
                                          f"payment page {page.id}")
        billing = (order or {}).get("billing_address") or {}
        for name in pc.BNPL_ADDRESS:
            if not billing.get(name):
                raise ApiError("2001101", f"merchant_order.billing_address.{name} is required "
                                          f"by payment page {page.id}")
    info = body.payment_information.model_dump() if body.payment_information else None
    if mode == "HOST_TO_HOST":
        if info is None:
            raise ApiError("2001101", "payment_information is required in HOST_TO_HOST mode")
        for name in page.h2h_fields:
            if not info.get(name):
                raise ApiError("2001101", f"payment_information.{name} is required by payment "
                                          f"page {page.id} in HOST_TO_HOST mode")
    info = info or {}
    checks.email(info.get("email"), "payment_information.email")
    if info.get("msisdn") is not None and not checks.MSISDN.fullmatch(info["msisdn"]):
        raise ApiError("2001101", "payment_information.msisdn must be an international number")
    card = None
    if page.vertical == pc.CARD and info.get("card_number"):
        names = {k: f"payment_information.card_{k}" for k in ("number", "cvv")}
        names.update(month="payment_information.card_expiration_month",
                     year="payment_information.card_expiration_year")
        card = checks.card(info["card_number"], info.get("card_cvv"),
                       info.get("card_expiration_month"), info.get("card_expiration_year"),
                       sb.clock.now(), names)
    test = card.test if card else None
    if test == "unavailable":
        raise ApiError("2001501", "the card issuer did not answer; nothing was created")
    first, plan = po.plan_for(page, mode == "REDIRECT", test)
    draft = po.Draft(
        merchant=merchant, page=page, external_id=body.external_id, type=body.type,
        integration_mode=mode, requested=requested, processed=processed, rate=rate,
        merchant_urls=urls, merchant_order=order, quotation_id=quotation_id, card=card,
        holder_id=info.get("msisdn") or info.get("bank_account_number"),
        holder_email=info.get("email") or customer.get("email"))
    return draft, first, plan


def _created(order: dict[str, Any]) -> JSON:
    """201, or the refusal the order met at once (it exists and can be looked up)."""
    if order["status"] == po.REFUSED:
        raise ApiError("2001301", f"the card was refused; payment order {order['id']} is "
                                  f"{po.REFUSED}")
    if order["status"] == po.ERROR:
        raise ApiError("2001401", f"the card issuer failed; payment order {order['id']} is "
                                  f"{po.ERROR}")
    return JSON(order, status_code=201)


@router.post("/payment-orders", status_code=201, response_model=ps.PaymentOrder)
async def create_payment_order(request: Request, body: ps.PaymentOrderCreate) -> JSON:
    sb = sandbox(request)
    store = sb.store
    with store.lock:
        sb.payment_orders.external_id_free(body.external_id)
        merchant = checks.merchant(store, body.merchant_id, body.merchant_external_id)
        page = checks.page(body.payment_page_id)
        if page.converts:
            raise ApiError("2001201", f"this payment page converts currency: create the order "
                                      f"from a quotation (payment page {page.id})")
        currency = body.requested.currency
        if currency != page.currency:
            raise ApiError("2001101", f"requested.currency must be {page.currency}, the "
                                      f"currency of payment page {page.id}")
        value = checks.amount(body.requested.amount, currency, "requested.amount")
        money = {"amount": value, "currency": currency}
        draft, first, plan = _draft(request, body, merchant, page, money, dict(money),
                                    Decimal(1), None)
        order = sb.payment_orders.create(draft, first, plan)
        return _created(order)


@router.post("/quotations/{ref}/payment-orders", status_code=201,
             response_model=ps.PaymentOrder)
async def create_payment_order_from_quotation(request: Request, ref: str,
                                              body: ps.QuotationPaymentOrderCreate) -> JSON:
    """``ref``: the quotation's id, or ``ext-{external_id}``."""
    sb = sandbox(request)
    store = sb.store
    with store.lock:
        sb.payment_orders.external_id_free(body.external_id)
        rid = checks.find(store, po.QUOTATIONS, ref, checks.QUOTATION_ID)
        if rid is None:
            raise ApiError("1001001", f"quotation {ref!r} does not exist")
        quotation, qmeta = store.tables[po.QUOTATIONS][rid], store.meta[po.QUOTATIONS][rid]
        if qmeta.get("order") is not None:
            raise ApiError("2001201", f"quotation {quotation['id']} was used by payment order "
                                      f"{qmeta['order']}")
        if sb.clock.now() > qmeta["expires"]:
            raise ApiError("2001201", f"quotation {quotation['id']} has expired "
                                      f"({quotation['expiration_date']})")
        merchant = checks.merchant(store, quotation["merchant_id"], None)
        page = checks.page(quotation["payment_page_id"])
        draft, first, plan = _draft(request, body, merchant, page, dict(quotation["requested"]),
                                    dict(quotation["processed"]),
                                    Decimal(quotation["wholesale_fx_rate"]), quotation["id"])
        order = sb.payment_orders.create(draft, first, plan)
        qmeta["order"] = order["id"]
        store.save(po.QUOTATIONS, rid)
        return _created(order)


@router.get("/payment-orders/{ref}", response_model=ps.PaymentOrder)
async def get_payment_order(request: Request, ref: str) -> JSON:
    """``ref``: the id (PO and 10 digits), ``ext-{external_id}``, or the external id (with
    ``lookups_match_ids``, ``ext-`` and an id answers the order of that id when none has it
    as its external id)."""
    with current(request) as sb:
        if sb.config.lookups_match_ids and ref.startswith("ext-") and \
                ref[4:] not in sb.store.by_ext[po.TABLE] and checks.ORDER_ID.fullmatch(ref[4:]):
            ref = ref[4:]
        return JSON(sb.payment_orders.order(ref))


# ---------------------------------------------------------------- operations
async def _operate(request: Request, ref: str, kind: str, body: ps.OperationCreate) -> JSON:
    sb = sandbox(request)
    with sb.store.lock:
        op = sb.payment_orders.operate(ref, kind, body.requested.model_dump(), body.external_id,
                                       body.custom_data)
        return JSON(op)


@router.post("/payment-orders/{ref}/cancellations", response_model=ps.PaymentOperation)
async def cancel(request: Request, ref: str, body: ps.OperationCreate) -> JSON:
    """Cancels the full or a partial authorized amount, before the order is Charged."""
    return await _operate(request, ref, "cancel", body)


@router.post("/payment-orders/{ref}/charges", response_model=ps.PaymentOperation)
async def charge(request: Request, ref: str, body: ps.OperationCreate) -> JSON:
    """Charges the full or a partial authorized amount (cards, buy-now-pay-later)."""
    return await _operate(request, ref, "charge", body)


@router.post("/payment-orders/{ref}/refunds", response_model=ps.PaymentOperation)
async def refund(request: Request, ref: str, body: ps.OperationCreate) -> JSON:
    """Refunds the full or a partial charged amount, where the payment page supports it."""
    return await _operate(request, ref, "refund", body)


@router.get("/charges/{ref}", response_model=ps.PaymentOperation)
async def get_charge(request: Request, ref: str) -> JSON:
    """A charge or a cancellation (the document gives this path under the cancel heading)."""
    sb = sandbox(request)
    with sb.store.lock:
        return JSON(sb.payment_orders.operation(ref, ("charge", "cancel")))


@router.get("/refunds/{ref}", response_model=ps.PaymentOperation)
async def get_refund(request: Request, ref: str) -> JSON:
    sb = sandbox(request)
    with sb.store.lock:
        return JSON(sb.payment_orders.operation(ref, ("refund",)))
