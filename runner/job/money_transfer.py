"""The item of a ``remittance`` job: one quotation and one transaction of the money transfer
service (docs/kinds.md, "remittance").

An item holds the union of the quotation and transaction create requests, without
``external_id``: runner derives it from ``items.external_id`` and uses it for both. Which
sender, beneficiary and credit party fields are mandatory depends on the payer; that check
needs the provider's payer list and is made at validation, not here.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from runner import rules
from runner.job.fields import Amount, JobModel, ProviderId, Rate, Text, require_amount


class Source(JobModel, rules.CountryAmountFields):
    amount: Amount | None = None


class Destination(JobModel, rules.AmountFields):
    amount: Amount | None = None


class CreditPartyIdentifier(JobModel, rules.CreditPartyIdentifierFields):
    pass


class Party(JobModel, rules.PartyFields):
    """The person fields a sender and a beneficiary share (all optional text)."""


class Sender(Party, rules.SenderFields):
    pass


class Beneficiary(Party, rules.BeneficiaryFields):
    pass


class RemittanceItem(JobModel):
    """A quotation (payer, mode, amounts) and the transaction created from it."""

    payer_id: ProviderId
    mode: Literal["SOURCE_AMOUNT", "DESTINATION_AMOUNT"]
    source: Source
    destination: Destination
    credit_party_identifier: CreditPartyIdentifier
    sender: Sender
    beneficiary: Beneficiary
    purpose_of_remittance: str
    callback_url: Text = None
    external_code: Text = None
    retail_rate: Rate | None = None
    retail_fee: Rate | None = None
    retail_fee_currency: Text = None
    additional_information_1: Text = None
    additional_information_2: Text = None
    additional_information_3: Text = None

    @model_validator(mode="after")
    def _input_amount_given(self) -> Self:
        if self.mode == "SOURCE_AMOUNT":
            require_amount(self.source.amount, "source.amount", self.mode)
        else:
            require_amount(self.destination.amount, "destination.amount", self.mode)
        return self
