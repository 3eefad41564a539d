"""Payment orders of the collection service: creation, statuses on the sandbox clock,
operations with their arithmetic, and the bare-ping notifications. Shared by the collection
API (responses.py) and the legacy Pay (legacy_pay/), whose orders are the same records.

Amounts are tracked in the merchant's currency (the order's ``requested``), exactly: with A
the amount, C charged, X cancelled and R refunded, a charge or a cancellation may take at
most ``A - C - X`` and a refund at most ``C - R``. Afterwards, when nothing is left
authorized (``C + X == A``), the order is Cancelled if nothing was charged, Refunded if all
that was charged was refunded, else Charged; otherwise its status stays.

Status plans use ``Lifecycle``'s schedule: steps name the SandboxConfig field holding their
delay; ``lapse`` is the end of the authorization period (what is left authorized is
cancelled). The checks of what a request sends are checks.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from runner.sandbox.core.bounds import number
from runner.sandbox.core.callbacks import CallbackQueue
from runner.sandbox.core.clock import SandboxClock, iso
from runner.sandbox.core.config import SandboxConfig
from runner.sandbox.core.errors import ApiError
from runner.sandbox.core.lifecycle import Lifecycle
from runner.sandbox.core.statuses import Plan
from runner.sandbox.core.store import Store
from runner.sandbox.payment_orders import catalogue as pc
from runner.sandbox.payment_orders.checks import (
    ORDER_ID,
    Card,
    amount,
    find,
    merchant,
    page,
    reused,
)

TABLE, QUOTATIONS, OPERATIONS = "payment_orders", "cquotations", "operations"
CREATED, IN_PROGRESS, ABORTED = "Created", "Payment_In_Progress", "Aborted"
REFUSED, ERROR, AUTHORIZING, AUTHORIZED = "Refused", "Error", "Authorizing", "Authorized"
CANCELLED, CHARGED, REFUNDED = "Cancelled", "Charged", "Refunded"
LAPSE = "lapse"
# Statuses after which the sandbox clock has nothing more to do.
SETTLED = {ABORTED, REFUSED, ERROR, CANCELLED, CHARGED, REFUNDED}


def plan_for(p: pc.PaymentPage, redirect: bool, test: str | None) -> tuple[str, Plan]:
    """First status and the steps that follow on the sandbox clock."""
    lapse = ("authorization_period", LAPSE)
    if redirect:
        start: Plan = [("submit", IN_PROGRESS)]
        if test == "Aborted":
            return CREATED, start + [("payment_abort_delay", ABORTED)]
        if test in (REFUSED, ERROR):
            return CREATED, start + [("complete", test)]
        if not p.needs_charge:
            return CREATED, start + [("complete", CHARGED)]
        if p.vertical == pc.BNPL:
            return CREATED, start + [("complete", AUTHORIZING), ("complete", AUTHORIZED), lapse]
        return CREATED, start + [("complete", AUTHORIZED), lapse]
    if test in (REFUSED, ERROR):
        return test, []
    if not p.needs_charge:
        return IN_PROGRESS, [("complete", CHARGED)]
    if p.vertical == pc.BNPL:
        return AUTHORIZING, [("submit", AUTHORIZED), lapse]
    return AUTHORIZED, [lapse]


def round_to(value: Decimal, currency: str) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-pc.digits(currency)), rounding=ROUND_HALF_UP)


@dataclass
class Draft:
    """A payment order about to be created, as both APIs describe it."""

    merchant: dict[str, Any]
    page: pc.PaymentPage
    external_id: str
    type: str
    integration_mode: str
    requested: dict[str, Any]
    processed: dict[str, Any]
    rate: Decimal
    merchant_urls: dict[str, Any]
    merchant_order: dict[str, Any] | None = None
    quotation_id: str | None = None
    card: Card | None = None
    holder_id: str | None = None
    holder_email: str | None = None
    legacy: bool = False


class PaymentOrders:
    def __init__(self, store: Store, clock: SandboxClock, config: SandboxConfig,
                 callbacks: CallbackQueue, lifecycle: Lifecycle) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.callbacks = callbacks
        self.lifecycle = lifecycle
        lifecycle.appliers[TABLE] = self._apply

    # ------------------------------------------------------------ lookups
    def order(self, ref: str) -> dict[str, Any]:
        rid = find(self.store, TABLE, ref, ORDER_ID)
        if rid is None:
            raise ApiError("1000404", f"payment order {ref!r}")
        return self.store.tables[TABLE][rid]

    def external_id_free(self, external_id: str) -> None:
        if external_id in self.store.by_ext[TABLE]:
            raise reused(external_id)

    # ------------------------------------------------------------ demo orders
    def seed(self) -> None:
        """Card orders of the catalogue's merchant, made once (a replayed state has them):
        charges, refunds and cancellations can be tried on them with nothing made first."""
        if self.store.seq[TABLE]:
            return
        shop = merchant(self.store, None, pc.DEMO_MERCHANT)
        card_page = page(pc.DEMO_PAGE)
        for external_id, value, charged in pc.DEMO_ORDERS:
            requested = {"amount": value, "currency": card_page.currency}
            first, plan = plan_for(card_page, False, None)
            self.create(Draft(shop, card_page, external_id, "C2B", "HOST_TO_HOST", requested,
                              dict(requested), Decimal(1), {}, card=Card("4242", "VISA", None)),
                        first, plan)
            if charged:
                self.operate(external_id, "charge", requested, None, "demo order")

    # ------------------------------------------------------------ creation
    def create(self, d: Draft, first: str, plan: Plan) -> dict[str, Any]:
        self.external_id_free(d.external_id)
        now = self.clock.now()
        rid = self.store.next_id(TABLE)
        order_id = f"PO{rid:010d}"
        redirect = d.integration_mode == "REDIRECT"
        order = {
            "id": order_id, "external_id": d.external_id, "type": d.type, "status": first,
            "requested": d.requested, "processed": d.processed, "creation_date": iso(now),
            "update_date": iso(now), "quotation_id": d.quotation_id,
            "merchant_id": d.merchant["id"],
            "merchant_external_id": d.merchant["merchant_external_id"],
            "merchant_urls": {k: d.merchant_urls.get(k) for k in
                              ("aborted_url", "error_url", "return_url", "notification_url")},
            "payment_integrator_id": pc.INTEGRATOR_ID, "payment_page_id": d.page.id,
            "payment_url": pc.PAYMENT_URL.format(page=d.page.id, order=order_id)
            if redirect else None,
            "merchant_order": d.merchant_order, "integration_mode": d.integration_mode,
            "payment_methods": [],
        }
        zero = Decimal(0)
        meta = {"page": d.page.id, "rate": d.rate, "legacy": d.legacy,
                "amount": Decimal(d.requested["amount"]),
                "last4": d.card.last4 if d.card else None,
                "brand": d.card.brand if d.card else d.page.brand,
                "holder_id": d.holder_id, "holder_email": d.holder_email,
                "charged": zero, "cancelled": zero, "refunded": zero,
                "charged_processed": zero, "cancelled_processed": zero,
                "refunded_processed": zero}
        if not redirect:
            order["payment_methods"] = [self._method_entry(order, meta)]
        self._entered(rid, order, meta)
        self.store.add(TABLE, order, meta, rid=rid, ext=d.external_id)
        self.lifecycle.start(TABLE, rid, first, plan)
        self.store.save(TABLE, rid)
        self.notify(order)  # the first status is a change too: from nothing
        return order

    def _method_entry(self, order: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
        p = pc.PAGES[meta["page"]]
        holder = f"{'*' * 12}{meta['last4']}" if meta.get("last4") else meta.get("holder_id")
        message = {pc.WALLET: "Approve the payment on your phone",
                   pc.OPEN_BANKING: "Approve the payment in your bank's app"}.get(p.vertical)
        return {"amounts": {"authorizing": dict(order["processed"])}, "brand": meta["brand"],
                "custom_data": None, "holder_id": holder, "holder_email": meta["holder_email"],
                "payment_instruction": {"url": order["payment_url"], "display_message": message},
                "payment_method_order_id": "PM" + order["id"][2:],
                "payment_method_reference": None, "type": p.vertical}

    # ------------------------------------------------------------ statuses
    def _apply(self, rid: int, status: str) -> None:
        """A status the sandbox clock (or an operation) gives the order."""
        order = self.store.tables[TABLE][rid]
        meta = self.store.meta[TABLE][rid]
        if status == LAPSE:
            if order["status"] != AUTHORIZED:
                return
            left = self._left(meta)
            meta["cancelled"] = Decimal(meta["cancelled"]) + left
            meta["cancelled_processed"] = Decimal(order["processed"]["amount"]) - \
                Decimal(meta["charged_processed"])
            status = self._status_after(meta, AUTHORIZED)
        if status == order["status"]:
            self.store.save(TABLE, rid)  # its schedule may have moved on
            return
        order["status"] = status
        order["update_date"] = iso(self.clock.now())
        self._entered(rid, order, meta)
        self.store.save(TABLE, rid)
        self.notify(order)

    def _entered(self, rid: int, order: dict[str, Any], meta: dict[str, Any]) -> None:
        """What comes with the status the order has just taken."""
        status = order["status"]
        if status == IN_PROGRESS and not order["payment_methods"]:
            order["payment_methods"] = [self._method_entry(order, meta)]
        if status == CHARGED and Decimal(meta["charged"]) == 0:  # settled by itself
            meta["charged"] = Decimal(order["requested"]["amount"])
            meta["charged_processed"] = Decimal(order["processed"]["amount"])
        if status in (AUTHORIZED, CHARGED) and order["payment_methods"]:
            order["payment_methods"][0]["payment_method_reference"] = f"AUTH{rid:06d}"
        if status in SETTLED:
            meta["due"] = None  # whatever was scheduled no longer applies

    def notify(self, order: dict[str, Any]) -> None:
        """A bare ping: nothing but the fact that the order changed."""
        url = order["merchant_urls"].get("notification_url")
        if url:
            self.callbacks.enqueue(url, {}, status=f"{order['id']} {order['status']}",
                                   delays=tuple(self.config.notification_delays),
                                   signed=False)

    # ------------------------------------------------------------ operations
    @staticmethod
    def _left(meta: dict[str, Any]) -> Decimal:
        return Decimal(meta["amount"]) - Decimal(meta["charged"]) - Decimal(meta["cancelled"])

    @staticmethod
    def _status_after(meta: dict[str, Any], current: str) -> str:
        charged, refunded = Decimal(meta["charged"]), Decimal(meta["refunded"])
        if PaymentOrders._left(meta) > 0:
            return current
        if charged == 0:
            return CANCELLED
        return REFUNDED if refunded == charged else CHARGED

    def operate(self, ref: str, kind: str, requested: dict[str, Any], external_id: str | None,
                custom_data: str | None) -> dict[str, Any]:
        """A charge, cancel or refund: checked, applied, recorded. Call under the lock."""
        self.lifecycle.advance()
        order = self.order(ref)
        rid = int(order["id"][2:])
        meta = self.store.meta[TABLE][rid]
        p = pc.PAGES[meta["page"]]
        if external_id is not None and external_id in self.store.by_ext[OPERATIONS]:
            raise reused(external_id)
        currency = order["requested"]["currency"]
        if requested["currency"] != currency:
            raise ApiError("2001101", f"requested.currency must be {currency}, the payment "
                                      f"order's currency")
        value = amount(requested["amount"], currency, "requested.amount")
        status, noun = order["status"], {"charge": "a charge", "cancel": "a cancellation",
                                         "refund": "a refund"}[kind]
        if kind == "charge" and not p.needs_charge:
            raise ApiError("2001201", f"payment page {p.id} settles by itself: there is "
                                      f"nothing to charge")
        if kind == "cancel" and not p.cancels:
            raise ApiError("2001201", f"payment page {p.id} does not support cancellations")
        if kind == "refund" and not p.refunds:
            raise ApiError("2001201", f"payment page {p.id} does not support refunds")
        allowed = {"charge": {AUTHORIZED}, "refund": {CHARGED, AUTHORIZED},
                   "cancel": {AUTHORIZED} | ({AUTHORIZING} if p.cancel_while_authorizing
                                             else set())}[kind]
        if status not in allowed:
            raise ApiError("2001201", f"{noun} is not allowed on a payment order with status "
                                      f"{status}")
        if kind == "refund":
            left = Decimal(meta["charged"]) - Decimal(meta["refunded"])
            what = "refund"
        else:
            left = self._left(meta)
            what = "charge or cancel"
        if value > left:
            raise ApiError("2001201", f"{noun} of {value} {currency} exceeds what remains to "
                                      f"{what}: {left} {currency}")
        processed = self._book(order, meta, kind, value)
        after = self._status_after(meta, status)
        op = self._record(order, kind, value, processed, external_id, custom_data)
        if after != status:
            self._apply(rid, after)
        else:
            order["update_date"] = iso(self.clock.now())
            self.store.save(TABLE, rid)
        return op

    def _book(self, order: dict[str, Any], meta: dict[str, Any], kind: str,
              value: Decimal) -> dict[str, Any]:
        """Add the operation to the order's totals; its amount in the buyer's currency (the
        operation that closes a total takes exactly what remains of it)."""
        buyer = order["processed"]["currency"]
        total = {"charge": "charged", "cancel": "cancelled", "refund": "refunded"}[kind]
        meta[total] = Decimal(meta[total]) + value
        converted = round_to(value * Decimal(meta["rate"]), buyer)
        if kind != "refund" and self._left(meta) == 0:
            converted = Decimal(order["processed"]["amount"]) - sum(
                Decimal(meta[f"{t}_processed"]) for t in ("charged", "cancelled"))
        elif kind == "refund" and meta["refunded"] == meta["charged"]:
            converted = Decimal(meta["charged_processed"]) - Decimal(meta["refunded_processed"])
        meta[f"{total}_processed"] = Decimal(meta[f"{total}_processed"]) + converted
        return {"amount": converted, "currency": buyer}

    def _record(self, order: dict[str, Any], kind: str, value: Decimal,
                processed: dict[str, Any], external_id: str | None,
                custom_data: str | None) -> dict[str, Any]:
        op_id = self.store.next_id(OPERATIONS)
        when = iso(self.clock.now())
        op = {"id": op_id, "payment_order_id": order["id"], "type": kind.upper(),
              "status": "DONE",
              "requested": {"amount": value, "currency": order["requested"]["currency"]},
              "processed": processed, "external_id": external_id, "creation_date": when,
              "update_date": when, "custom_data": custom_data,
              "payment_methods_responses": [{
                  "operation_id": str(op_id), "payment_method_operation_id": f"PMO{op_id:010d}",
                  "response_code": "00", "response_message": "Approved"}]}
        self.store.add(OPERATIONS, op, {"kind": kind}, rid=op_id, ext=external_id)
        return op

    def operation(self, ref: str, kinds: tuple[str, ...]) -> dict[str, Any]:
        rid = number(ref)
        op = None if rid is None else self.store.tables[OPERATIONS].get(rid)
        if op is None or self.store.meta[OPERATIONS][op["id"]]["kind"] not in kinds:
            raise ApiError("1000404", f"{' or '.join(kinds)} operation {ref!r}")
        return op
