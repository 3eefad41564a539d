"""Shapes of the collection service's onboarding (document 1), field by field: companies,
merchants, accounts and their payout bank accounts.

Request models validate what clients send (a wrong type or a missing field is 2001101 naming
the field); resource models feed the OpenAPI document. Resources are kept as plain dicts.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from runner import rules
from runner.sandbox.accounts.schemas import AccountBalance
from runner.sandbox.core.bounds import Reference
from runner.sandbox.core.schemas import Request, Resource, Str, Text


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
    merchant_external_id: Reference
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


class PayoutBankAccountCreate(Request, rules.PayoutBankAccountFields):
    bic: Text
    iban: Text
    format: Text = Field(description="IBAN (the only value the document shows)")
    label: Text


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
