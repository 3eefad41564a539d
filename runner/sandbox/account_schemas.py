"""Shapes of the collection service's accounts and onboarding (document 1), field by field.

Request models validate what clients send (a wrong type or a missing field is 2001101 naming
the field); resource models feed the OpenAPI document. Resources are kept as plain dicts.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

from pydantic import Field

from runner.sandbox.schemas import Money, Request, Resource

Str = str | None
Text = Annotated[str, Field(min_length=1)]  # required, and not empty


# ---------------------------------------------------------------- accounts
class MoneyIn(Request):
    """The document's Amount object, as sent."""

    amount: Decimal
    currency: Text


class AccountBalance(Resource):
    type: str = Field(description="AVAILABLE, EXPECTED, WAITING_FOR_VALIDATION or UP_TO_DATE")
    date: str
    last_change_date: str
    balance: Money


class AccountBalances(Resource):
    balances: list[AccountBalance]


class Entry(Resource):
    account_id: str
    entry: Money = Field(description="always positive; credit_debit_indicator gives the way")
    counterpart_account_id: str | None
    creation_date: str
    credit_debit_indicator: str = Field(description="credit or debit")
    label: str
    status: str = Field(description="WAITINGFORVALIDATION, then VALIDATED")
    transfer_request_id: str | None
    validation_date: str | None


class TransferRequestCreate(Request):
    transfer: MoneyIn
    external_reference: Text
    label: Text
    source_account_id: Text
    target_account_id: Text
    type: Text = Field(description="ScheduledTransferOut (the only value the document shows)")
    custom_data: Str = None


class Related(Resource):
    resource_type: str
    resource_id: str


class TransferRequest(Resource):
    id: str
    transfer: Money
    external_reference: str
    label: str
    source_account_id: str
    target_account_id: str
    type: str
    custom_data: str | None
    creation_date: str
    status: str = Field(description="WaitingForValidation, then Validated")
    validation_date: str | None
    related: list[Related]


class PayoutRequestCreate(Request):
    payout: MoneyIn
    external_reference: Text
    label: Text
    source_account_id: Text
    payout_bank_account_id: Text
    custom_data: Str = None


class PayoutRequest(Resource):
    id: str
    payout: Money
    creation_date: str
    external_reference: str
    label: str
    payout_bank_account_id: str
    source_account_id: str
    status: str = Field(description="WaitingForValidation, then charged")
    target: Money
    transfer_request_id: str
    validation_date: str | None
    custom_data: str | None


# ---------------------------------------------------------------- onboarding
class CompanyCreate(Request):
    template_id: Text
    name: Text


class Company(Resource):
    id: str
    name: str
    creation_date: str
    update_date: str


class MerchantCreate(Request):
    company_id: Text
    merchant_external_id: Text
    name: Text
    template_id: Text
    custom_data: Any = None


class Merchant(Resource):
    id: str
    company_id: str
    currency: str
    merchant_external_id: str
    name: str
    template_id: str
    custom_data: Any
    creation_date: str
    update_date: str


class PayoutBankAccountCreate(Request):
    address_line_1: Str = None
    address_line_2: Str = None
    bank_name: Str = None
    bank_address: Str = None
    bank_country_iso_code: Str = None
    bank_routing_code: Str = None
    bank_branch_code: Str = None
    bic: Text
    card_number: Str = None
    external_id: Str = None
    external_account_id: Str = None
    external_account_type: Str = None
    iban: Text
    holder_name: Str = None
    holder_email: Str = None
    holder_phone: Str = None
    format: Text = Field(description="IBAN (the only value the document shows)")
    label: Text
    registration_number: Str = None
    representative_id_number: Str = None
    representative_name: Str = None
    target_currency: Str = None
    tax_id: Str = None


class PayoutBankAccount(PayoutBankAccountCreate):
    id: str
    status: str
    is_blocked: bool
    is_default: bool
    creation_date: str
    update_date: str


class AccountCreate(Request):
    template_id: Text
    label: Text
    company_id: Text
    recipient_email: Str = None
    fees: list[str] | None = None
    payout_bank_accounts: list[PayoutBankAccountCreate] | None = None


class Account(Resource):
    id: str
    template_id: str
    label: str
    company_id: str
    currency: str
    recipient_email: str | None
    fees: list[str] | None
    payout_bank_accounts: list[PayoutBankAccount] | None
    creation_date: str
    update_date: str
    balances: list[AccountBalance]
