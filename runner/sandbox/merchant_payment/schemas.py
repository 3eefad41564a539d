"""Shapes of the merchant payment service (document 3, part A), field by field: payment
methods, merchant balances, debit parties, quotations and payments.
"""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field

from runner import rules
from runner.sandbox.core.bounds import Reference
from runner.sandbox.core.schemas import Confirmable, Money, Party, Request, Resource, Str


class PaymentMethod(Resource):
    id: int
    name: str
    description: str
    country_iso_code: str
    currency: str
    precision: int
    increment: Decimal
    minimum_payment_amount: Decimal
    maximum_payment_amount: Decimal
    debit_party_identifiers_accepted: list[list[str]]
    debit_party_information: dict[str, list[list[str]]]
    debit_party_verification: dict[str, list[list[str]]]
    payment_details_fields: list[str]
    required_consumer_fields: list[list[str]]


class MerchantBalance(Resource):
    id: int
    currency: str
    balance: Decimal
    available_balance: Decimal


class DebitPartyIdentifier(Request, rules.DebitPartyIdentifierFields):
    pass


class Consumer(Party, rules.ConsumerFields):
    pass


class PaymentAmountIn(Request, rules.CountryAmountFields):
    pass


class CollectionAmountIn(Request, rules.AmountFields):
    pass


class MerchantQuotationRequest(Request):
    external_id: Reference
    payment_method_id: int
    mode: str
    payment: PaymentAmountIn
    collection: CollectionAmountIn


class PaymentAmount(Money):
    country_iso_code: str


class MerchantQuotation(Resource):
    id: int
    external_id: str
    mode: str
    payment_method: PaymentMethod
    payment: PaymentAmount
    collection: Money
    collection_in_payment_currency: Money
    fee: Money
    wholesale_fx_rate: Decimal
    creation_date: str
    expiration_date: str


class PaymentRequest(Request):
    """Both forms the document shows: ``consumer``/``purpose_of_payment`` (the example) and
    ``sender``/``beneficiary``/``purpose_of_remittance`` (the input table)."""

    debit_party_identifier: DebitPartyIdentifier
    consumer: Consumer | None = None
    sender: Consumer | None = None
    beneficiary: dict[str, str | None] | None = None
    external_id: Reference = Field(description="the partner's reference of the payment")
    external_code: Str = None
    callback_url: Str = None
    purpose_of_payment: Str = None
    purpose_of_remittance: Str = None
    additional_information_1: Str = None
    additional_information_2: Str = None
    additional_information_3: Str = None


class PaymentInstruction(Resource):
    channel: str
    steps: list[str]


class PaymentDetails(Resource):
    qr_code: str | None = None
    qr_url: str | None = None
    instructions: list[PaymentInstruction] | None = None
    merchant_id: str | None = None
    invoice_id: str | None = None
    redirect_url: str | None = None
    amount: Decimal | None = None
    currency: str | None = None


class Payment(Confirmable):
    creation_date: str
    expiration_date: str
    debit_party_identifier: dict[str, str | None]
    details: PaymentDetails
    payment: PaymentAmount
    collection: Money
    payment_method: PaymentMethod
    consumer: dict[str, str | None]
    callback_url: str | None
    collection_in_payment_currency: Money
    wholesale_fx_rate: Decimal
    fee: Money
    purpose_of_payment: str | None
    additional_information_1: str | None
    additional_information_2: str | None
    additional_information_3: str | None
    payment_method_payment_reference: str | None
    payment_method_payment_code: str | None


class DebitPartyRequest(Request):
    debit_party_identifier: DebitPartyIdentifier


class DebitPartyVerificationRequest(Request):
    debit_party_identifier: DebitPartyIdentifier
    consumer: Consumer


class DebitPartyInformation(Resource):
    id: int
    consumer: dict[str, str | None]
