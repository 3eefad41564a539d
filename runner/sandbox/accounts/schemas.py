"""Shapes of the collection service's accounts (document 1), field by field: balances,
entries, transfer requests and payout requests.

Request models validate what clients send (a wrong type or a missing field is 2001101 naming
the field); resource models feed the OpenAPI document. Resources are kept as plain dicts.
"""

from __future__ import annotations

from pydantic import Field

from runner.sandbox.core.bounds import Reference
from runner.sandbox.core.schemas import AmountIn, Money, Request, Resource, Str, Text


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
    transfer: AmountIn
    external_reference: Reference
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
    payout: AmountIn
    external_reference: Reference
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
