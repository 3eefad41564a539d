"""Client of the collection service's quotations, payment orders and operations (charge,
refund, cancel), under ``/v1/payment`` (docs/sandbox.md: the collection service).

``order_ref`` arguments take a payment order's id (``PO`` and 10 digits) or
``ext(external_id)``; an external id is always sent in its ``ext-`` form, so one that looks
like an id (or starts with ``ext-``) is still read as an external id.

The service answers a reused external id with its generic 2001201 ("External ID has already
been used"): ``runner.provider.errors`` makes it a ``DuplicateExternalId`` for quotations and
payment orders, which a lookup resolves (as the money transfer service's 1007001), and a
``DuplicateWithoutLookup`` for operations, which have no lookup by external id.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from runner.errors import DuplicateWithoutLookup, ProviderError
from runner.provider.http import ProviderClient, ext
from runner.provider.lookups import own

OPERATION_PATHS = {"charge": "charges", "refund": "refunds", "cancel": "cancellations"}


def reused_external_id(error: ProviderError) -> bool:
    """True when an operation was refused because its external id is used already."""
    return isinstance(error, DuplicateWithoutLookup)


class CollectionClient(ProviderClient):
    prefix = "/v1/payment"

    def ping(self) -> Any:
        return self.get("/ping")

    # ------------------------------------------------------------ quotations
    def create_quotation(self, body: dict[str, Any]) -> Any:
        return self.request("POST", "/quotations", body=body,
                            external_id=body.get("external_id")).body

    # ------------------------------------------------------------ payment orders
    def create_payment_order(self, body: dict[str, Any]) -> Any:
        """A payment order created directly (its page does not convert currency)."""
        return self.request("POST", "/payment-orders", body=body,
                            external_id=body.get("external_id")).body

    def create_payment_order_from_quotation(self, quotation_ref: str,
                                            body: dict[str, Any]) -> Any:
        """A payment order from a quotation (its id, or ``ext(external_id)``)."""
        return self.request("POST", f"/quotations/{quotation_ref}/payment-orders", body=body,
                            external_id=body.get("external_id")).body

    def payment_order(self, order_ref: str) -> Any:
        return self.get(f"/payment-orders/{order_ref}")

    def find_payment_order(self, order_ref: str) -> Any | None:
        """The order, or None when the provider clearly answers that it does not exist."""
        return self.find(f"/payment-orders/{order_ref}")

    def find_payment_order_by_external_id(self, external_id: str) -> Any | None:
        """The order of that external id, None when there is clearly none; OtherRecord
        when the provider answers an order of another external id."""
        return own(self.find_payment_order(ext(external_id)), "external_id", external_id,
                   "payment order")

    def find_named_order(self, order_id: str | None, external_id: str | None) -> Any | None:
        """The order an item names, by its id or else its external id; None when there is
        clearly none; OtherRecord when the provider answers another order."""
        found = self.find_payment_order(order_ref(order_id, external_id))
        if order_id is not None:
            return own(found, "id", order_id, "payment order")
        assert external_id is not None
        return own(found, "external_id", external_id, "payment order")

    # ------------------------------------------------------------ operations
    def operate(self, operation: str, order_ref: str, body: dict[str, Any]) -> Any:
        """A charge, refund or cancel (``OPERATION_PATHS``) on an order: 200 and the
        payment operation."""
        return self.request("POST", f"/payment-orders/{order_ref}/{OPERATION_PATHS[operation]}",
                            body=body, external_id=body.get("external_id")).body

    def charge(self, order_ref: str, body: dict[str, Any]) -> Any:
        return self.operate("charge", order_ref, body)

    def refund(self, order_ref: str, body: dict[str, Any]) -> Any:
        return self.operate("refund", order_ref, body)

    def cancel(self, order_ref: str, body: dict[str, Any]) -> Any:
        return self.operate("cancel", order_ref, body)

    def charge_operation(self, operation_id: int | str) -> Any:
        """A charge or a cancellation (the document gives this path for both)."""
        return self.get(f"/charges/{quote(str(operation_id), safe='')}")

    def refund_operation(self, operation_id: int | str) -> Any:
        return self.get(f"/refunds/{quote(str(operation_id), safe='')}")



def order_ref(order_id: str | None, external_id: str | None) -> str:
    """The path segment of an order given by its id or by its external id."""
    if order_id is not None:
        return quote(order_id, safe="")
    assert external_id is not None
    return ext(external_id)
