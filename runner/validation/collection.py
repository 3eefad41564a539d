"""Checks of the collection service's kinds against what the provider exposes: payment orders
(``payment_order``) and the operations on them (``charge``, ``refund``, ``cancel``).

Payment orders. The service has no catalogue endpoint for payment pages: which currency a
page takes, which ``payment_information`` fields it needs in HOST_TO_HOST mode, whether it
converts currency are the provider's to say, and a refusal (2001101, 2001201, 1001001) fails
the item with the provider's code and message. What can be checked here is: the merchant
exists (``GET /v1/onboarding/merchants/{id}``) and, for an order from a quotation, the
requested currency is the merchant's; ISO 4217 currencies and their decimals; absolute
http(s) URLs; e-mail addresses and phone numbers; card data (Luhn, CVV, month, an expiry not
past). No message ever repeats a card number or a CVV.

Operations. The order must exist (by id or external id), the operation be in the order's
currency, and its amount within what remains: ``A - C - X`` for a charge or a cancel,
``C - R`` for a refund (A the order's amount, C charged, X cancelled, R refunded), the job's
earlier rows on the same order counted. The order's answer does not carry C, X or R: they
are what runner's own state database records of the operations it sent (``SentOperations``,
given by the engine for a run), and what the status implies (Charged: ``C = A - X``).
Operations made elsewhere are not seen: the provider's refusal is then the last word.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from runner import rules
from runner.cards import luhn
from runner.errors import AuthenticationError, NotFound, ProviderHTTPError, Retry
from runner.job.collection import (
    CancelItem,
    ChargeItem,
    OperationItem,
    PaymentOrderItem,
    RefundItem,
)
from runner.lifecycle import Outcome
from runner.provider.collection import order_ref

if TYPE_CHECKING:
    from runner.state import StateStore
    from runner.validation.catalogue import Catalogue, Read

Problems = Iterator[tuple[str, str]]
OPERATIONS: dict[type[OperationItem], str] = {
    ChargeItem: "charge", RefundItem: "refund", CancelItem: "cancel"}
NOUNS = {"charge": "a charge", "refund": "a refund", "cancel": "a cancellation"}
# Where an operation's requested amount (the order's currency) stands in the state: the
# source columns hold what leaves the payer, so a charge's requested amount (what the merchant
# gets) is its destination, a refund's or a cancellation's (given back) its source.
REQUESTED_SIDE = {"charge": "destination", "refund": "source", "cancel": "source"}
# ISO 4217 minor units, where they are not 2.
MINOR_UNITS = {**dict.fromkeys(("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG",
                                "RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF"), 0),
               **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3)}
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
MSISDN = re.compile(r"\+?\d{8,15}")


def fits_currency(amount: Decimal, currency: str) -> bool:
    places = MINOR_UNITS.get(currency, 2)
    return amount == amount.quantize(Decimal(1).scaleb(-places))


def fingerprint(item: Any) -> str:
    """The engine's fingerprint of an item (``runner.engine.batch``), to know it again."""
    return hashlib.sha256(item.model_dump_json().encode()).hexdigest()[:32]


def _guarded(fetch: Callable[[], Any]) -> Callable[[], Any]:
    """``fetch``, with a refusal of the provider (403 ...) as a ``ProviderHTTPError`` value
    instead of an exception; failures to reach it still raise."""
    def guarded() -> Any:
        try:
            return fetch()
        except (NotFound, AuthenticationError):
            raise
        except ProviderHTTPError as exc:
            if exc.retry is not Retry.UNSAFE:
                raise
            return exc

    return guarded


def _merchant(catalogue: Catalogue, item: PaymentOrderItem) -> Read:
    ref = item.merchant_id or item.merchant_external_id
    assert ref is not None
    return ("merchant", ref), _guarded(lambda: catalogue.provider.onboarding.get(
        f"/merchants/{quote(ref, safe='')}"))


def _order(catalogue: Catalogue, item: OperationItem) -> Read:
    ref = order_ref(item.payment_order_id, item.payment_order_external_id)
    return ("payment order", ref), _guarded(lambda: catalogue.provider.collection.payment_order(
        ref))


def want_payment_order(item: PaymentOrderItem, catalogue: Catalogue) -> None:
    catalogue.want(*_merchant(catalogue, item))


def want_operation(item: OperationItem, catalogue: Catalogue) -> None:
    catalogue.want(*_order(catalogue, item))


# ---------------------------------------------------------------- payment orders
def check_payment_order(item: PaymentOrderItem, catalogue: Catalogue) -> Problems:
    yield from _order_fields(item)
    ref = item.merchant_id or item.merchant_external_id
    where = "merchant_id" if item.merchant_id is not None else "merchant_external_id"
    merchant = catalogue.once(*_merchant(catalogue, item))
    if merchant is None:
        yield where, f"no merchant {ref!r} at the provider"
    elif isinstance(merchant, ProviderHTTPError):
        yield where, f"merchant {ref!r}: the provider answers {merchant.code} {merchant.message}"
    elif item.quotation is not None and merchant.get("currency") and \
            item.requested.currency != merchant["currency"]:
        yield ("requested.currency", f"must be {merchant['currency']}, the currency of merchant "
                                     f"{ref} (the quotation converts into it)")


def _order_fields(item: PaymentOrderItem) -> Problems:
    amounts: list[tuple[str, Decimal | None, str]] = [
        ("requested", item.requested.amount, item.requested.currency)]
    if item.quotation is not None:
        amounts.append(("quotation.processed", item.quotation.processed.amount,
                        item.quotation.processed.currency))
    order = item.merchant_order
    if order is not None:
        for name in ("total", "tax"):
            money = getattr(order, name)
            if money is not None:
                amounts.append((f"merchant_order.{name}", money.amount, money.currency))
        for i, cart in enumerate(order.cart_items or (), start=1):
            for name in ("unit_price", "vat"):
                money = getattr(cart, name)
                if money is not None:
                    amounts.append((f"merchant_order.cart_items.{i}.{name}", money.amount,
                                    money.currency))
    yield from _money(amounts)
    for name, url in item.merchant_urls:
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                yield f"merchant_urls.{name}", "must be an absolute http or https URL"
    info = item.payment_information
    customer = order.customer if order is not None else None
    for where, value in (("payment_information.email", info and info.email),
                         ("merchant_order.customer.email", customer and customer.email)):
        if value and not EMAIL.fullmatch(value):
            yield where, f"{value!r} is not an e-mail address"
    if info is not None and info.msisdn and not MSISDN.fullmatch(info.msisdn):
        yield "payment_information.msisdn", "must be an international phone number (+ and digits)"
    if info is not None and info.card_number:
        yield from _card(info.card_number, info.card_cvv, info.card_expiration_month,
                         info.card_expiration_year)


def _money(amounts: Iterable[tuple[str, Decimal | None, str]]) -> Problems:
    for where, amount, currency in amounts:
        if not rules.is_currency(currency):
            yield f"{where}.currency", f"{currency!r} is not an ISO 4217 currency code"
        elif amount is not None and not fits_currency(amount, currency):
            places = MINOR_UNITS.get(currency, 2)
            yield f"{where}.amount", f"{amount} has more than {places} decimals for {currency}"


def _card(number: str, cvv: str | None, month: str | None, year: str | None) -> Problems:
    """Card data as any card page takes it; the number and the CVV are never repeated."""
    digits = number.replace(" ", "")
    where = "payment_information.card_"
    if not digits.isdigit() or not 12 <= len(digits) <= 19 or not luhn(digits):
        yield f"{where}number", "is not a valid card number"
    if cvv is None or not (cvv.isdigit() and len(cvv) in (3, 4)):
        yield f"{where}cvv", "must be 3 or 4 digits"
    if month is None or not month.isdigit() or not 1 <= int(month) <= 12:
        yield f"{where}expiration_month", "must be a month, 1 to 12"
        return
    if year is None or not year.isdigit() or len(year) not in (2, 4):
        yield f"{where}expiration_year", "must be a year (2 or 4 digits)"
        return
    now = time.gmtime()
    if (int(year) + (2000 if len(year) == 2 else 0), int(month)) < (now.tm_year, now.tm_mon):
        yield f"{where}expiration_year", "the card has expired"


def payment_order_amount(item: PaymentOrderItem, catalogue: Catalogue | None
                         ) -> tuple[str, Decimal] | None:
    """The side the item gives: the merchant's amount, or the buyer's when the quotation
    computes the merchant's."""
    if item.requested.amount is not None:
        return item.requested.currency, item.requested.amount
    processed = item.quotation.processed if item.quotation is not None else None
    if processed is not None and processed.amount is not None:
        return processed.currency, processed.amount
    return None


# ---------------------------------------------------------------- operations
@dataclass
class Sums:
    """What runner knows was taken from an order: ``*_maybe`` adds operations in doubt or
    unknown (which may have been made) to those settled."""

    charged: Decimal = Decimal(0)
    charged_maybe: Decimal = Decimal(0)
    cancelled_maybe: Decimal = Decimal(0)
    refunded_maybe: Decimal = Decimal(0)


@dataclass(frozen=True)
class SentOperation:
    external_id: str
    job_name: str
    operation: str
    order_id: str
    amount: Decimal
    settled: bool  # False: in doubt or unknown (it may have been made)
    fingerprint: str


class SentOperations:
    """The operations runner has sent (settled, unknown, or in doubt) per payment order, as
    its state database records them, across every job of that database."""

    def __init__(self, operations: Iterable[SentOperation], job_name: str) -> None:
        self.operations = list(operations)
        self.job_name = job_name
        self._claimed: set[str] = set()

    @classmethod
    def from_state(cls, state: StateStore, job_name: str,
                   order_id: str | None = None) -> SentOperations:
        found = []
        for r in state.operations_sent(tuple(REQUESTED_SIDE), order_id):
            amount = r.source_amount if REQUESTED_SIDE[r.kind] == "source" else \
                r.destination_amount
            if amount is None or r.provider_ref is None:
                continue
            found.append(SentOperation(
                r.external_id, r.job_name, r.kind, r.provider_ref, amount,
                r.outcome == Outcome.SETTLED and not r.intent, r.fingerprint))
        return cls(found, job_name)

    def claim(self, order_id: str, operation: str, item_fingerprint: str) -> bool:
        """True when this job has already sent this very item (known by its fingerprint):
        each sent operation answers for one item."""
        for op in self.operations:
            if (op.job_name == self.job_name and op.order_id == order_id
                    and op.operation == operation and op.fingerprint == item_fingerprint
                    and op.external_id not in self._claimed):
                self._claimed.add(op.external_id)
                return True
        return False

    def sums(self, order_id: str, exclude: str | None = None) -> Sums:
        s = Sums()
        for op in self.operations:
            if op.order_id != order_id or op.external_id == exclude:
                continue
            if op.operation == "charge":
                s.charged_maybe += op.amount
                if op.settled:
                    s.charged += op.amount
            elif op.operation == "cancel":
                s.cancelled_maybe += op.amount
            else:
                s.refunded_maybe += op.amount
        return s


# The operations sent, per provider client: the engine gives them for a run (the operations
# flow, from its state), so a resumed run knows its own operations; `runner validate` has
# none and reads the orders alone.
def _sent(catalogue: Catalogue) -> SentOperations | None:
    """The operations this state records as sent, read once per validation; None when the
    validation has no state (`runner validate`: the orders alone tell what remains)."""
    state = catalogue.state
    if state is None:
        return None
    found: SentOperations = catalogue.once(
        ("sent operations", None), lambda: SentOperations.from_state(state, catalogue.job_name))
    return found


def remaining(operation: str, order: dict[str, Any], sums: Sums) -> tuple[Decimal, str | None]:
    """What ``operation`` may still take on ``order`` (its currency), or 0 and why nothing."""
    amount, status, order_id = Decimal(order["requested"]["amount"]), order["status"], \
        order["id"]
    if operation in ("charge", "cancel"):
        allowed = ("Authorized", "Authorizing") if operation == "cancel" else ("Authorized",)
        if status not in allowed:
            return Decimal(0), (f"{NOUNS[operation]} needs the payment order "
                                f"{' or '.join(allowed)}; {order_id} is {status}")
        return amount - sums.charged_maybe - sums.cancelled_maybe, None
    if status == "Charged":
        charged = amount - sums.cancelled_maybe
    elif status == "Authorized" and sums.charged > 0:
        charged = sums.charged
    elif status == "Authorized":
        return Decimal(0), (f"a refund needs a charge first: runner knows of none on payment "
                            f"order {order_id} (Authorized)")
    else:
        return Decimal(0), (f"a refund needs the payment order Charged (or Authorized after a "
                            f"partial charge); {order_id} is {status}")
    return charged - sums.refunded_maybe, None


def check_operation(item: OperationItem, catalogue: Catalogue) -> Problems:
    operation = OPERATIONS[type(item)]
    where = "payment_order_id" if item.payment_order_id else "payment_order_external_id"
    given = item.payment_order_id or item.payment_order_external_id
    order = catalogue.once(*_order(catalogue, item))
    if order is None:
        yield where, f"no payment order {given!r} at the provider"
        return
    if isinstance(order, ProviderHTTPError):
        yield where, f"payment order {given!r}: the provider answers {order.code} " \
                     f"{order.message}"
        return
    currency, money = order["requested"]["currency"], item.requested
    if money.currency != currency:
        yield "requested.currency", f"payment order {order['id']} is in {currency}, not " \
                                    f"{money.currency}"
        return
    if not fits_currency(money.amount, currency):
        yield "requested.amount", f"{money.amount} has more than " \
                                  f"{MINOR_UNITS.get(currency, 2)} decimals for {currency}"
        return
    sent = _sent(catalogue)
    if sent is not None and sent.claim(order["id"], operation, fingerprint(item)):
        return  # already sent by an earlier run of this job: nothing more is sent for it
    left, why = remaining(operation, order, sent.sums(order["id"]) if sent else Sums())
    if why is not None:
        yield where, why
        return
    pool = "refund" if operation == "refund" else "charge or cancel"
    planned: dict[tuple[str, str], Decimal] = catalogue.once(("operations planned", None), dict)
    before = planned.get((order["id"], pool), Decimal(0))
    if before + money.amount > left:
        rows = f" after this job's earlier rows ({before} {currency})" if before else ""
        yield "requested.amount", (f"{NOUNS[operation]} of {money.amount} {currency} exceeds "
                                   f"what remains to {pool} on payment order {order['id']}"
                                   f"{rows}: {max(left - before, Decimal(0))} {currency}")
        return
    planned[(order["id"], pool)] = before + money.amount


def operation_amount(item: OperationItem, catalogue: Catalogue | None
                     ) -> tuple[str, Decimal] | None:
    return item.requested.currency, item.requested.amount

