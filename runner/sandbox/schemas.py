"""Shapes of the money transfer and merchant payment services, field by field.

Request models validate what clients send (a wrong type is 1000999 naming the field);
resource models build the answers and feed the OpenAPI document. Resources are stored as
plain dicts dumped from these models, so a GET costs no validation.
"""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field

Str = str | None


class Request(BaseModel):
    # The provider ignores fields it does not know (new optional fields are non-breaking).
    model_config = ConfigDict(extra="ignore")


class Resource(BaseModel):
    model_config = ConfigDict(extra="allow")


# ---------------------------------------------------------------- money transfer: catalogue
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


class Country(Resource):
    iso_code: str
    name: str


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


# ---------------------------------------------------------------- money transfer: flow
class CreditPartyIdentifier(Request):
    msisdn: Str = None
    bank_account_number: Str = None
    swift_bic_code: Str = None
    iban: Str = None


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


class Sender(Party):
    beneficiary_relationship: Str = None
    source_of_funds: Str = None
    bank_account_number: Str = None


class Beneficiary(Party):
    bank_account_holder_name: Str = None


class SourceIn(Request):
    country_iso_code: str
    currency: str
    amount: Decimal | None = None


class DestinationIn(Request):
    currency: str
    amount: Decimal | None = None


class QuotationRequest(Request):
    external_id: str = Field(min_length=1)
    payer_id: int
    mode: str
    source: SourceIn
    destination: DestinationIn


class Money(Resource):
    currency: str
    amount: Decimal


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
    external_id: str = Field(min_length=1)
    external_code: Str = None
    callback_url: Str = None
    purpose_of_remittance: str
    additional_information_1: Str = None
    additional_information_2: Str = None
    additional_information_3: Str = None


class Transaction(Resource):
    id: int
    status: str
    status_message: str
    status_class: str
    status_class_message: str
    external_id: str
    external_code: str | None
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


class AccountStatus(Resource):
    id: int
    account_status: str


class Status(Resource):
    status: str


# ---------------------------------------------------------------- merchant payment
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


class DebitPartyIdentifier(Request):
    msisdn: Str = None
    bank_account_number: Str = None
    iban: Str = None
    clabe: Str = None
    swift_bic_code: Str = None
    bik_code: Str = None
    ifs_code: Str = None
    sort_code: Str = None
    aba_routing_number: Str = None
    bsb_number: Str = None
    branch_number: Str = None
    routing_code: Str = None
    account_type: Str = None
    account_number: Str = None
    card_number: Str = None
    email: Str = None


class Consumer(Party):
    bank_account_holder_name: Str = None
    source_of_funds: Str = None


class PaymentAmountIn(Request):
    country_iso_code: str
    currency: str
    amount: Decimal | None = None


class CollectionAmountIn(Request):
    currency: str
    amount: Decimal | None = None


class MerchantQuotationRequest(Request):
    external_id: str = Field(min_length=1)
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
    external_id: str = Field(min_length=1)
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


class Payment(Resource):
    id: int
    status: str
    status_message: str
    status_class: str
    status_class_message: str
    external_id: str
    external_code: str | None
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
