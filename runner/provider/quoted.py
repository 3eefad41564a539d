"""What the money transfer and merchant payment services share (documents 2 and 3 part A): a
quotation, what is made from it (a transaction, a payment), its confirmation, and both found
again by external id; and their ping, countries and balances.

``ref`` arguments take a numeric id or ``ext(external_id)``. The two clients name these calls
as their documents do (``create_transaction``, ``confirm_payment`` ...).

A transaction's or payment's ``status`` and ``status_class`` come as text in the documents'
answers and as JSON numbers in the public reference's callback (``"status": 70000``); what
these calls return carries them as text either way (``read_statuses``, which reads a
callback's body too), so that the engine compares one form.

What is made from a quotation comes back from its creation, its confirm and its lookups as
the object the documents show, or it is no answer at all: a body without its ``id``,
``external_id``, ``status`` or ``status_class`` (a ``200`` carrying an error body, an empty
object) is an ``UnexpectedAnswer`` (``read_made``), in doubt, and looked up like a lost one.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from runner.provider.errors import unexpected
from runner.provider.http import ProviderClient, ext
from runner.provider.lookups import own

STATUS_FIELDS = ("status", "status_class")
# What the engine reads of every transaction or payment: without them, no answer.
MADE_FIELDS = ("id", "external_id", "status", "status_class")


def status_text(value: Any) -> Any:
    """A status code or class as text (``70000`` and ``"70000"`` alike); anything that is not
    a whole number is left as it came."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) or (isinstance(value, Decimal) and value.is_finite()
                                  and value == value.to_integral_value()
                                  and value.adjusted() < 19):
        return str(int(value))
    return value


def read_statuses(obj: Any) -> Any:
    """A transaction or payment (an answer, a lookup, a callback's body) with its status
    fields as text."""
    if isinstance(obj, dict) and any(f in obj for f in STATUS_FIELDS):
        return {**obj, **{f: status_text(obj[f]) for f in STATUS_FIELDS if f in obj}}
    return obj


def read_made(obj: Any, noun: str, endpoint: str, external_id: str | None) -> Any:
    """A transaction or payment answered by ``endpoint``, its statuses as text; an
    ``UnexpectedAnswer`` when the body is not one (``MADE_FIELDS``)."""
    obj = read_statuses(obj)
    lacking = [f for f in MADE_FIELDS if not isinstance(obj, dict) or obj.get(f) in (None, "")]
    if lacking:
        raise unexpected(200, f"a {noun} without {', '.join(lacking)}", endpoint, external_id)
    return obj


class QuotedServiceClient(ProviderClient):
    """Base of the clients of a service whose money moves by quotation, then confirmation."""

    made = ""  # the path of what a quotation is made into: "transactions", "payments"
    made_noun = ""  # and its name: "transaction", "payment"

    def ping(self) -> Any:
        return self.request("GET", "/ping", prefix="").body

    def countries(self) -> Iterator[Any]:
        return self.pages("/countries")

    def balances(self) -> list[Any]:
        return list(self.pages("/balances"))

    def create_quotation(self, body: dict[str, Any]) -> Any:
        return self.request("POST", "/quotations", body=body,
                            external_id=body.get("external_id")).body

    def quotation(self, ref: int | str) -> Any:
        return self.get(f"/quotations/{ref}")

    def find_quotation(self, external_id: str) -> Any | None:
        """The quotation, or None when the provider clearly has none of that external id
        (OtherRecord when it answers one of another external id)."""
        return own(self.find(f"/quotations/{ext(external_id)}"), "external_id", external_id,
                   "quotation")

    def create_from_quotation(self, quotation_ref: int | str, body: dict[str, Any]) -> Any:
        path = f"/quotations/{quotation_ref}/{self.made}"
        external_id = body.get("external_id")
        return self._made(self.request("POST", path, body=body, external_id=external_id).body,
                          f"POST {self.prefix}{path}", external_id)

    def confirm(self, ref: int | str, external_id: str | None = None) -> Any:
        path = f"/{self.made}/{ref}/confirm"
        return self._made(self.request("POST", path, external_id=external_id).body,
                          f"POST {self.prefix}{path}", external_id)

    def retrieve(self, ref: int | str) -> Any:
        path = f"/{self.made}/{ref}"
        return self._made(self.get(path), f"GET {self.prefix}{path}", None)

    def find_made(self, external_id: str) -> Any | None:
        """What the quotation was made into, or None when the provider clearly has none of
        that external id (OtherRecord when it answers one of another external id)."""
        path = f"/{self.made}/{ext(external_id)}"
        found = self.find(path)
        if found is None:
            return None
        return own(self._made(found, f"GET {self.prefix}{path}", external_id), "external_id",
                   external_id, self.made_noun)

    def _made(self, obj: Any, endpoint: str, external_id: str | None) -> Any:
        return read_made(obj, self.made_noun, endpoint, external_id)
