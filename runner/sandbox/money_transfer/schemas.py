"""Shapes of the money transfer service (document 2), field by field: its catalogue, balances,
credit parties, quotations and transactions (see core/schemas.py for the shared ones).
"""

from __future__ import annotations

from decimal import Decimal

from runner import rules
from runner.sandbox.core.bounds import Reference
from runner.sandbox.core.schemas import Confirmable, Money, Party, Request, Resource, Str


class Service(Resource):
    id: int
    name: str


class CreditPartyInformation(Resource):
    credit_party_identifiers_accepted: list[list[str]]


class CreditPartyVerification(Resource):
    credit_party_identifiers_accepted: list[list[str]]
    required_beneficiary_fields: list[list[str]]


class Payer(Resource):
    id: int
    name: str
    precision: int
    increment: Decimal
    currency: str
    country_iso_code: str
    minimum_transaction_amount: Decimal
    maximum_transaction_amount: Decimal | None
    service: Service
    credit_party_identifiers_accepted: list[list[str]]
    required_sender_fields: list[list[str]]
    required_beneficiary_fields: list[list[str]]
    credit_party_information: CreditPartyInformation
    credit_party_verification: CreditPartyVerification


class RateBand(Resource):
    source_amount_min: Decimal
    source_amount_max: Decimal
    wholesale_fx_rate: Decimal


class PayerRates(Resource):
    destination_currency: str
    rates: dict[str, list[RateBand]]


class Named(Resource):
    id: int
    name: str


class Coded(Resource):
    id: int
    code: str


class Division(Resource):
    id: int
    name: str
    depth: int
    parent_id: int | None
    category: Named


class PayerRef(Resource):
    id: int
    name: str
    currency: str


class Entity(Resource):
    id: int
    name: str
    address: str | None
    administrative_division: Division
    category: Named
    country_iso_code: str
    depth: int
    identifiers: list[Coded]
    parent_id: int | None
    payers: list[PayerRef]
    payment_systems: list[Coded]


class Balance(Resource):
    id: int
    currency: str
    balance: Decimal
    available_balance: Decimal
    credit_facility: Decimal


class CreditPartyIdentifier(Request, rules.CreditPartyIdentifierFields):
    pass


class Sender(Party, rules.SenderFields):
    pass


class Beneficiary(Party, rules.BeneficiaryFields):
    pass


class SourceIn(Request, rules.CountryAmountFields):
    pass


class DestinationIn(Request, rules.AmountFields):
    pass


class QuotationRequest(Request):
    external_id: Reference
    payer_id: int
    mode: str
    source: SourceIn
    destination: DestinationIn


class Source(Money):
    country_iso_code: str


class Quotation(Resource):
    id: int
    external_id: str
    payer: Payer
    mode: str
    source: Source
    destination: Money
    sent_amount: Money
    wholesale_fx_rate: Decimal
    fee: Money
    creation_date: str
    expiration_date: str


class TransactionRequest(Request):
    credit_party_identifier: CreditPartyIdentifier
    retail_rate: Decimal | None = None
    retail_fee: Decimal | None = None
    retail_fee_currency: Str = None
    sender: Sender
    beneficiary: Beneficiary
    external_id: Reference
    external_code: Str = None
    callback_url: Str = None
    purpose_of_remittance: str
    additional_information_1: Str = None
    additional_information_2: Str = None
    additional_information_3: Str = None


class Transaction(Confirmable):
    payer_transaction_reference: str | None
    payer_transaction_code: str | None
    creation_date: str
    expiration_date: str
    credit_party_identifier: dict[str, str | None]
    source: Source
    destination: Money
    payer: Payer
    sender: dict[str, str | None]
    beneficiary: dict[str, str | None]
    callback_url: str | None
    sent_amount: Money
    wholesale_fx_rate: Decimal
    retail_rate: Decimal | None
    retail_fee: Decimal | None
    retail_fee_currency: str | None
    fee: Money
    purpose_of_remittance: str
    additional_information_1: str | None
    additional_information_2: str | None
    additional_information_3: str | None


class CreditPartyRequest(Request):
    credit_party_identifier: CreditPartyIdentifier
    beneficiary: Beneficiary | None = None
