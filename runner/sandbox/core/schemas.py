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

Str = str | None
Text = Annotated[str, Field(min_length=1)]  # required, and not empty


class Request(BaseModel):
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


class Country(Resource):
    iso_code: str
    name: str


class AccountStatus(Resource):
    id: int
    account_status: str


class Status(Resource):
    status: str


class Party(Request):
    lastname: Str = None
    lastname2: Str = None
    middlename: Str = None
    firstname: Str = None
    nativename: Str = None
    nationality_country_iso_code: Str = None
    code: Str = None
    date_of_birth: Str = None
    country_of_birth_iso_code: Str = None
    gender: Str = None
    address: Str = None
    postal_code: Str = None
    city: Str = None
    country_iso_code: Str = None
    msisdn: Str = None
    email: Str = None
    id_type: Str = None
    id_country_iso_code: Str = None
    id_number: Str = None
    id_delivery_date: Str = None
    id_expiration_date: Str = None
    occupation: Str = None
    province_state: Str = None
