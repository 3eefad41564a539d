"""The items of the collection service's kinds (docs/kinds.md): ``payout``,
``account_transfer``, ``payment_order``, the operations ``charge``, ``refund`` and
``cancel``, and ``onboarding``.

Each item is its create request without the identity field (``external_id`` or
``external_reference``): runner derives that from ``items.external_id``. An ``onboarding``
item is one merchant with its company (created, or an existing ``company_id``) and,
optionally, a collection account; runner derives ``merchant_external_id`` the same way.
Rules the document states as conditions (exactly one of two fields, what the integration
mode or the quotation mode requires) are checked here; those that depend on the payment
method's configuration are the provider's.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from runner import rules
from runner.bank_accounts import compact_bic, compact_iban
from runner.errors import FieldProblem
from runner.job.fields import Amount, JobModel, Text


class Money(JobModel):
    """The document's Amount object."""

    amount: Amount
    currency: str


class RequestedMoney(JobModel):
    """``requested`` of a payment order: the amount may be left to a quotation."""

    amount: Amount | None = None
    currency: str


class PayoutItem(JobModel):
    """A payout request: money from a collection account to one of its bank accounts."""

    payout: Money
    label: str
    source_account_id: str
    payout_bank_account_id: str
    custom_data: Text = None


class AccountTransferItem(JobModel):
    """A transfer request between two accounts."""

    transfer: Money
    label: str
    source_account_id: str
    target_account_id: str
    type: Literal["ScheduledTransferOut"] = Field(
        default="ScheduledTransferOut",
        description="the only value the document shows, and the only one the provider takes")
    custom_data: Text = None


class MerchantUrls(JobModel, rules.MerchantUrlsFields):
    pass


class PaymentInformation(JobModel, rules.PaymentInformationFields):
    pass


class Address(JobModel, rules.AddressFields):
    pass


class Customer(JobModel, rules.CustomerFields):
    pass


class Delivery(JobModel, rules.DeliveryFields):
    pass


class CartItem(JobModel, rules.CartItemFields[Money, Delivery]):
    pass


class MerchantOrder(JobModel, rules.MerchantOrderFields[Money, Address, Customer, CartItem]):
    pass


class Processed(JobModel):
    amount: Amount | None = None
    currency: str


class CurrencyConversion(JobModel):
    """Asks for a quotation first; the payment order is then created from it."""

    quotation_mode: Literal["REQUESTED_AMOUNT", "PROCESSED_AMOUNT"]
    processed: Processed


OPTIONAL_OBJECTS = ("quotation", "payment_information", "merchant_order")


class PaymentOrderItem(JobModel):
    """A payment order, created directly or, with ``quotation``, from a quotation."""

    type: Literal["B2B", "C2B"]
    requested: RequestedMoney
    merchant_id: Text = None
    merchant_external_id: Text = None
    payment_page_id: str
    integration_mode: Literal["REDIRECT", "HOST_TO_HOST"]
    merchant_urls: MerchantUrls
    merchant_order: MerchantOrder | None = None
    payment_information: PaymentInformation | None = None
    quotation: CurrencyConversion | None = None

    @model_validator(mode="before")
    @classmethod
    def _empty_objects_are_absent(cls, data: Any) -> Any:
        # One rows file may hold orders with and without a quotation (or payment data): an
        # optional object whose every cell rendered empty is left out, as an empty cell is.
        if not isinstance(data, dict):
            return data
        kept = dict(data)
        for name in OPTIONAL_OBJECTS:
            value = kept.get(name)
            if isinstance(value, dict):
                value = _without_empty(value)
                if value:
                    kept[name] = value
                else:
                    del kept[name]
        return kept

    @model_validator(mode="after")
    def _document_conditions(self) -> Self:
        if self.quotation is not None:
            # The quotation request knows the merchant only by merchant_id.
            if self.merchant_id is None:
                raise FieldProblem("merchant_id", "required when a quotation is asked for")
            if self.merchant_external_id is not None:
                raise FieldProblem(
                    "merchant_external_id", "not allowed with a quotation; use merchant_id"
                )
        elif (self.merchant_id is None) == (self.merchant_external_id is None):
            raise FieldProblem("merchant_id", "give exactly one of merchant_id and "
                               "merchant_external_id")
        _require_input_amount(self)
        if self.integration_mode == "HOST_TO_HOST":
            if self.merchant_urls.notification_url is None:
                raise FieldProblem("merchant_urls.notification_url",
                                   "required in HOST_TO_HOST mode")
            if self.payment_information is None:
                raise FieldProblem("payment_information", "required in HOST_TO_HOST mode")
        else:
            for name, url in self.merchant_urls:
                if url is None:
                    raise FieldProblem(f"merchant_urls.{name}", "required in REDIRECT mode")
        return self


def _without_empty(data: dict[str, Any]) -> dict[str, Any]:
    kept = {}
    for key, value in data.items():
        if isinstance(value, dict):
            value = _without_empty(value)
            if not value:
                continue
        kept[key] = value
    return kept


def _require_input_amount(order: PaymentOrderItem) -> None:
    conversion = order.quotation
    if conversion is None or conversion.quotation_mode == "REQUESTED_AMOUNT":
        if order.requested.amount is None:
            raise FieldProblem("requested.amount", "required" if conversion is None
                               else "required when quotation_mode is REQUESTED_AMOUNT")
    elif conversion.processed.amount is None:
        raise FieldProblem("quotation.processed.amount",
                           "required when quotation_mode is PROCESSED_AMOUNT")


class OperationItem(JobModel):
    """A charge, refund or cancellation on an existing payment order."""

    payment_order_id: Text = Field(default=None, description="the provider's id of the order")
    payment_order_external_id: Text = Field(
        default=None, description="the order's external_id, when its id is not known"
    )
    requested: Money
    custom_data: Text = None

    @model_validator(mode="after")
    def _one_order(self) -> Self:
        if (self.payment_order_id is None) == (self.payment_order_external_id is None):
            raise FieldProblem("payment_order_id", "give exactly one of payment_order_id and "
                               "payment_order_external_id")
        return self


class ChargeItem(OperationItem):
    """Charges the full or a partial authorized amount (cards and buy-now-pay-later)."""


class RefundItem(OperationItem):
    """Refunds the full or a partial charged amount."""


class CancelItem(OperationItem):
    """Cancels the full or a partial authorized amount before it is charged."""


class Company(JobModel):
    template_id: str
    name: str


class Merchant(JobModel):
    name: str
    template_id: str
    custom_data: dict[str, Any] | None = None


class PayoutBankAccount(JobModel, rules.PayoutBankAccountFields):
    external_account_type: Literal["SAVINGS", "DEPOSIT", "CHECKING", "OTHERS"] | None = None
    format: Literal["IBAN"] = Field(
        description="kind of account number stored: IBAN, the only value the document shows "
        "and the provider takes")

    # Written as people print them (spaces, any case); sent in electronic form.
    @field_validator("iban")
    @classmethod
    def _iban(cls, value: str) -> str:
        return compact_iban(value)

    @field_validator("bic")
    @classmethod
    def _bic(cls, value: str) -> str:
        return compact_bic(value)


class Account(JobModel):
    template_id: str
    label: str
    recipient_email: Text = None
    fees: list[str] | None = None
    payout_bank_accounts: list[PayoutBankAccount] | None = None


class OnboardingItem(JobModel):
    """A merchant, its company (new, or an existing ``company_id``) and maybe an account."""

    company: Company | None = None
    company_id: Text = None
    merchant: Merchant
    account: Account | None = None

    @model_validator(mode="after")
    def _one_company(self) -> Self:
        if (self.company is None) == (self.company_id is None):
            raise FieldProblem("company", "give exactly one of company and company_id")
        return self
