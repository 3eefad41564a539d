"""The quote-create-confirm pattern the money transfer and merchant payment services share.

A quotation is kept with its expiry (``quotation_ttl`` on the sandbox clock); an item (a
transaction, a payment) is created from a quotation that has not expired, under an external
id not used before for its kind; confirming the item starts its plan on the sandbox clock,
once, and only while its quotation holds. Each status change then updates the item's status
fields, lets the service settle the money, and is POSTed to the item's ``callback_url``.

The codes are the same in both services, worded by each (``merchant``): 1007001 a reused
external id, 1008002 no such quotation, 1008003 an expired one at creation, 1008004 no such
item, 1007002 confirmed already, 1007003 not in a status to confirm, 1007004 an expired
quotation at confirm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from runner.sandbox.core.callbacks import CallbackQueue
from runner.sandbox.core.clock import iso
from runner.sandbox.core.errors import ApiError
from runner.sandbox.core.lifecycle import Lifecycle
from runner.sandbox.core.statuses import status_fields, with_numbers
from runner.sandbox.core.store import Store

if TYPE_CHECKING:
    from runner.sandbox.app import Sandbox

TWO = 2
CENT = Decimal("0.01")
Record = dict[str, Any]
Settle = Callable[[Record, str], None]  # (the item's meta, its new status) -> None


class Offered(Protocol):
    """A payer or a payment method, as far as quoting goes."""

    @property
    def active(self) -> bool: ...

    @property
    def available(self) -> bool: ...


OfferedT = TypeVar("OfferedT", bound=Offered)


def amount_given(value: Decimal | None, field: str) -> Decimal:
    """The input amount of a quotation's mode: present and positive."""
    if value is None:
        raise ApiError("1000999", f"{field} is required for this mode")
    if not value.is_finite() or value <= 0:
        raise ApiError("1000999", f"{field} must be a positive amount")
    return value


@dataclass(frozen=True)
class QuoteFlow:
    """One service's quotations and items: their tables, the wording of its codes, how its
    timestamps end (``zone``: document 3's examples end with ``Z``, document 2's have no
    zone) and whether its callbacks carry the status fields as numbers (``numeric_callbacks``:
    the money transfer service's public reference shows ``"status": 70000``)."""

    quotations: str
    items: str
    merchant: bool = False
    zone: str = ""
    numeric_callbacks: bool = False

    def stamp(self, ts: float) -> str:
        return iso(ts) + self.zone

    def shown(self, sb: Sandbox, item: Record) -> Record:
        """An item as an answer shows it: status fields as text (the documents), or as
        numbers with ``--numeric-statuses``."""
        return with_numbers(item) if sb.config.numeric_statuses else item

    def refuse(self, code: str, detail: str | None = None) -> ApiError:
        return ApiError(code, detail, merchant=self.merchant)

    def open(self, offered: OfferedT | None, ref: str) -> OfferedT:
        """The payer (payment method) a quotation names: 1003002 unknown, 1003001 inactive,
        1003007 unavailable for now."""
        if offered is None:
            raise self.refuse("1003002", ref)
        if not offered.active:
            raise self.refuse("1003001")
        if not offered.available:
            raise self.refuse("1003007")
        return offered

    def fresh(self, store: Store, table: str, external_id: str) -> None:
        if external_id in store.by_ext[table]:
            raise self.refuse("1007001", external_id)

    # ------------------------------------------------------------ quotations
    def dates(self, sb: Sandbox) -> tuple[float, dict[str, str]]:
        """When a quotation made now expires, and its two dates as the answer shows them."""
        now = sb.clock.now()
        expires = now + sb.config.quotation_ttl
        return expires, {"creation_date": self.stamp(now), "expiration_date": self.stamp(expires)}

    def keep_quotation(self, store: Store, quotation: Record, expires: float,
                       **meta: Any) -> None:
        store.add(self.quotations, quotation, {"expires": expires, **meta})

    def quotation(self, store: Store, ref: str) -> tuple[Record, Record]:
        found = store.get(self.quotations, ref)
        if found is None:
            raise self.refuse("1008002", ref)
        return found, store.meta[self.quotations][found["id"]]

    def usable_quotation(self, sb: Sandbox, ref: str, external_id: str,
                         ) -> tuple[Record, Record]:
        """The quotation an item is created from, for an external id not used yet."""
        quotation, meta = self.quotation(sb.store, ref)
        self.fresh(sb.store, self.items, external_id)
        if sb.clock.now() > meta["expires"]:
            raise self.refuse("1008003", ref)
        return quotation, meta

    # ------------------------------------------------------------ items
    def item(self, store: Store, ref: str) -> Record:
        found = store.get(self.items, ref)
        if found is None:
            raise self.refuse("1008004", ref)
        return found

    def confirm(self, sb: Sandbox, ref: str, accept: Callable[[Record, Record], None],
                ) -> Record:
        """Confirm an item once; ``accept`` (item, meta) does what the service does on
        confirm, or refuses. Call with the sandbox ``current`` (core/routing.py)."""
        item = self.item(sb.store, ref)
        meta = sb.store.meta[self.items][item["id"]]
        if meta.get("confirmed"):
            raise self.refuse("1007002", ref)
        if item["status"] != "10000":
            raise self.refuse("1007003", f"status {item['status_message']}")
        if sb.clock.now() > sb.store.meta[self.quotations][meta["quotation_id"]]["expires"]:
            raise self.refuse("1007004", ref)
        accept(item, meta)
        meta["confirmed"] = True
        sb.lifecycle.start(self.items, item["id"], "20000", meta["plan"])
        return dict(item)

    def attach(self, lifecycle: Lifecycle, callbacks: CallbackQueue, settle: Settle) -> None:
        """Let the sandbox clock change the items' statuses: status fields, money, callback."""
        store = lifecycle.store
        config = lifecycle.config

        def apply(rid: int, status: str) -> None:
            item = store.tables[self.items][rid]
            item.update(status_fields(status))
            settle(store.meta[self.items][rid], status)
            store.save(self.items, rid)
            if item.get("callback_url"):
                numbers = self.numeric_callbacks or config.numeric_statuses
                callbacks.enqueue(item["callback_url"],
                                  with_numbers(item) if numbers else dict(item))

        lifecycle.appliers[self.items] = apply
