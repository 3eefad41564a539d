"""Shapes every service of the sandbox shares: the request and resource bases, money, and the
person fields of document 2's parties (which document 3A's consumer reuses).

Request models validate what clients send (a wrong type is 1000999 naming the field, or
2001101 in the collection service); resource models build the answers and feed the OpenAPI
document. Resources are stored as plain dicts dumped from these models, so a GET costs no
validation. Each service's own shapes are in its package's schemas.py.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from runner import rules
from runner.sandbox.core.bounds import Bounded

Str = str | None
Text = Annotated[str, Field(min_length=1)]  # required, and not empty


class Request(Bounded):
    # The provider ignores fields it does not know (new optional fields are non-breaking).
    model_config = ConfigDict(extra="ignore")


class Resource(BaseModel):
    model_config = ConfigDict(extra="allow")


class Money(Resource):
    currency: str
    amount: Decimal


class AmountIn(Request):
    """Document 1's Amount object, as sent."""

    amount: Decimal
    currency: Text


class Confirmable(Resource):
    """What a transaction and a payment both begin with: their id, status and references."""

    id: int
    status: str
    status_message: str
    status_class: str
    status_class_message: str
    external_id: str
    external_code: str | None


class Country(Resource):
    iso_code: str
    name: str


class AccountStatus(Resource):
    id: int
    account_status: str


class Status(Resource):
    status: str


class Party(Request, rules.PartyFields):
    """Document 2's person fields (runner/rules.py declares them for the job files too)."""
