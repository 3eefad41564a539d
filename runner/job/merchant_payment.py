"""The items of ``merchant_payment`` and ``legacy_pay`` jobs
(docs/kinds.md, "merchant_payment" and "legacy_pay").

A merchant payment item is one quotation and one payment; the document shows the payment
request in two forms, and runner writes the one of its example (``consumer`` and
``purpose_of_payment``), which matches the debit party verification call. The enumerations
the document lists (gender, ID type, source of funds, account type, purpose of payment) are
checked here.

A legacy Pay item is one call of the single-call webservice, in the document's own field
names. ``format`` (json or xml) picks the body's form; it belongs to the item so that
``defaults`` can set it for the whole job and a row can still override it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from runner import rules
from runner.errors import FieldProblem
from runner.job import fields
from runner.job.fields import Amount, JobModel, ProviderId, Text, require_amount
from runner.job.money_transfer import Party

Gender = Literal["MALE", "FEMALE"]
IdType = Literal[
    "PASSPORT", "NATIONAL_ID", "DRIVING_LICENSE", "SOCIAL_SECURITY", "TAX_ID",
    "SENIOR_CITIZEN_ID", "BIRTH_CERTIFICATE", "VILLAGE_ELDER_ID", "RESIDENT_CARD",
    "ALIEN_REGISTRATION", "PAN_CARD", "VOTERS_ID", "HEALTH_CARD", "EMPLOYER_ID", "OTHER",
]
SourceOfFunds = Literal["CASH", "BUSINESS", "GIFT", "SALARY", "LOTTERY", "SAVINGS", "OTHER"]


class PaymentAmount(JobModel, rules.CountryAmountFields):
    amount: Amount | None = None


class CollectionAmount(JobModel, rules.AmountFields):
    amount: Amount | None = None


class DebitPartyIdentifier(JobModel, rules.DebitPartyIdentifierFields):
    account_type: Literal["CHECKING", "SAVINGS"] | None = None


class Consumer(Party, rules.ConsumerFields):
    """The person fields of document 2's parties, with this document's enumerations."""

    gender: Gender | None = None
    id_type: IdType | None = None
    source_of_funds: SourceOfFunds | None = None


class MerchantPaymentItem(JobModel):
    """A quotation (payment method, mode, amounts) and the payment created from it."""

    payment_method_id: ProviderId
    mode: Literal["PAYMENT_AMOUNT", "COLLECTION_AMOUNT"]
    payment: PaymentAmount
    collection: CollectionAmount
    debit_party_identifier: DebitPartyIdentifier
    consumer: Consumer
    purpose_of_payment: Literal["OTHER"] | None = Field(
        default=None, description="the document's one value")
    callback_url: Text = None
    external_code: Text = None
    additional_information_1: Text = None
    additional_information_2: Text = None
    additional_information_3: Text = None

    @model_validator(mode="after")
    def _input_amount_given(self) -> Self:
        if self.mode == "PAYMENT_AMOUNT":
            require_amount(self.payment.amount, "payment.amount", self.mode)
        else:
            require_amount(self.collection.amount, "collection.amount", self.mode)
        return self


class LegacyMerchantUrls(JobModel, rules.LegacyMerchantUrlsFields):
    pass


class LegacyCustomer(JobModel):
    Email: Text = None


class LegacyMerchantOrder(JobModel):
    Id: Text = Field(
        default=None, description="the merchant's order reference; runner sends the item's "
        "external_id when unset"
    )
    Customer: LegacyCustomer | None = None


class LegacyCredential(JobModel):
    """One ``{name, credential}`` of the call. The value is written in the job (where
    ``${VAR}`` fills it from the environment for the whole job), or named by
    ``credential_env``: an environment variable read only when the call is made, so that a
    row can name its own card without the card being in the rows file."""

    name: str = Field(min_length=1)
    credential: Text = None
    credential_env: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="environment variable holding the value, instead of credential",
    )

    @model_validator(mode="after")
    def _one_value(self) -> Self:
        if (self.credential is None) == (self.credential_env is None):
            raise FieldProblem("credential", "give exactly one of credential and "
                               "credential_env")
        return self

    def value(self, environ: Mapping[str, str] = os.environ) -> str | None:
        """The credential itself (None when its environment variable is not set)."""
        if self.credential_env is None:
            return self.credential
        return environ.get(self.credential_env)


class LegacyPayItem(JobModel):
    """One call of the legacy Pay webservice (``POST /Rest/V40/PaymentOrder/Pay``)."""

    # The document's own (Pascal case) names; the types are aliased so that no field name
    # shadows the type it is annotated with.
    MerchantId: str
    Amount: fields.Amount
    Currency: str
    PaymentPageId: str
    MerchantUrls: LegacyMerchantUrls
    MerchantOrder: LegacyMerchantOrder = Field(default_factory=LegacyMerchantOrder)
    Credentials: list[LegacyCredential] = Field(default_factory=list)
    format: Literal["json", "xml"] = "json"

    @field_validator("Credentials")
    @classmethod
    def _names_unique(cls, credentials: list[LegacyCredential]) -> list[LegacyCredential]:
        seen: dict[str, int] = {}
        for index, credential in enumerate(credentials):
            if credential.name in seen:
                raise FieldProblem(
                    f"{index}.name",
                    f"credential name {credential.name!r} is used twice "
                    f"(also at index {seen[credential.name]})",
                )
            seen[credential.name] = index
        return credentials
