"""The legacy Pay's rule: one call makes one payment order of the collection service
(payment_orders/models.py), with ``MerchantOrder.Id`` as its external id, checked as the
collection API checks its own (payment_orders/checks.py) but refused in ReturnCodes.

A card is authorized (and lapses after ``authorization_period`` unless charged); a point of
sale credential (a QR code, a technical transaction id) is paid on the spot. Buy-now-pay-later
and currency-converting pages cannot be paid through Pay.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from runner.sandbox.legacy_pay.exceptions import Refusal
from runner.sandbox.legacy_pay.schemas import LegacyMerchantUrls, LegacyPayRequest
from runner.sandbox.onboarding import models as records
from runner.sandbox.payment_orders import catalogue as pc
from runner.sandbox.payment_orders import checks
from runner.sandbox.payment_orders import models as po
from runner.sandbox.payment_orders import schemas as ps

if TYPE_CHECKING:
    from runner.sandbox.app import Sandbox

POINT_OF_SALE = ("qrcode", "technicalTransactionId")


def pay_order(sb: Sandbox, pay: LegacyPayRequest) -> dict[str, Any]:
    """The payment order one Pay makes, or its Refusal. Call under the store's lock."""
    store, order = sb.store, pay.PaymentOrder
    rid = records.find(store, "merchants", order.MerchantId)
    if rid is None:
        raise Refusal(2500, f"PaymentOrder.MerchantId {order.MerchantId!r} does not exist")
    merchant = store.tables["merchants"][records.allowed(store, "merchants", rid,
                                                         order.MerchantId)]
    page = pc.PAGES.get(order.PaymentPageId)
    if page is None:
        raise Refusal(2500, f"PaymentOrder.PaymentPageId {order.PaymentPageId!r} does not "
                            f"exist")
    if page.converts or page.vertical == pc.BNPL:
        raise Refusal(2500, f"payment page {page.id} cannot be paid through Pay")
    sb.payment_orders.external_id_free(order.MerchantOrder.Id)
    if order.Currency != page.currency:
        raise Refusal(2000, f"PaymentOrder.Currency must be {page.currency}, the currency of "
                            f"payment page {page.id}")
    value = checks.amount(order.Amount, order.Currency, "PaymentOrder.Amount")
    urls = order.MerchantUrls or LegacyMerchantUrls()
    for name, link in urls.model_dump().items():
        checks.url(link, f"PaymentOrder.MerchantUrls.{name}")
    email = order.MerchantOrder.Customer.Email if order.MerchantOrder.Customer else None
    checks.email(email, "PaymentOrder.MerchantOrder.Customer.Email")
    credentials = {c.name: c.credential for c in pay.Credentials}
    card = None
    if "CardNumber" in credentials:
        if page.vertical != pc.CARD:
            raise Refusal(2500, f"payment page {page.id} takes no card")
        expiry = credentials.get("Exp") or ""
        if not (len(expiry) == 6 and checks.ascii_digits(expiry)):
            raise Refusal(2000, "Credentials.Exp must be the year and month as six digits "
                                "(YYYYMM)")
        card = checks.card(credentials["CardNumber"], credentials.get("Cvv"), expiry[4:],
                       expiry[:4], sb.clock.now(),
                       {"number": "Credentials.CardNumber", "cvv": "Credentials.Cvv",
                        "month": "Credentials.Exp", "year": "Credentials.Exp"})
        if card.test == "unavailable":
            raise Refusal(5050, "the card issuer did not answer; nothing was created")
        first = card.test if card.test in (po.REFUSED, po.ERROR) else po.AUTHORIZED
    elif any(name in credentials for name in POINT_OF_SALE):
        first = po.CHARGED  # point of sale: paid on the spot
    else:
        raise Refusal(2000, "Credentials: CardNumber (with Cvv and Exp), qrcode or "
                            "technicalTransactionId is required")
    money = {"amount": value, "currency": order.Currency}
    merchant_order = (ps.MerchantOrder(customer=ps.OrderCustomer(email=email)).model_dump()
                      if email else None)
    draft = po.Draft(
        merchant=merchant, page=page, external_id=order.MerchantOrder.Id, type="C2B",
        integration_mode="HOST_TO_HOST", requested=money, processed=dict(money),
        rate=Decimal(1),
        merchant_urls={"return_url": urls.ReturnUrl, "aborted_url": urls.AbortedUrl,
                       "error_url": urls.ErrorUrl,
                       "notification_url": urls.ServerNotificationUrl},
        merchant_order=merchant_order, card=card, holder_email=email, legacy=True)
    plan: po.Plan = [("authorization_period", po.LAPSE)] if first == po.AUTHORIZED else []
    return sb.payment_orders.create(draft, first, plan)
