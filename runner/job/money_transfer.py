"""The item of a ``remittance`` job: one quotation and one transaction of the money transfer
service (spec/money-transfer-service.md).

An item holds the union of the quotation and transaction create requests, without
``external_id``: runner derives it from ``items.external_id`` and uses it for both. Which
sender, beneficiary and credit party fields are mandatory depends on the payer; that check
needs the provider's payer list and is made at validation, not here.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from runner.job.fields import Amount, JobModel, Rate, Text, require_amount


class Source(JobModel):
    country_iso_code: str
    currency: str
    amount: Amount | None = None


class Destination(JobModel):
    currency: str
    amount: Amount | None = None


class CreditPartyIdentifier(JobModel):
    msisdn: Text = None
    bank_account_number: Text = None
    swift_bic_code: Text = None
    iban: Text = None


class Party(JobModel):
    """The person fields a sender and a beneficiary share (all optional text)."""

    lastname: Text = None
    lastname2: Text = None
    middlename: Text = None
    firstname: Text = None
    nativename: Text = None
    nationality_country_iso_code: Text = None
    code: Text = None
    date_of_birth: Text = None
    country_of_birth_iso_code: Text = None
    gender: Text = None
    address: Text = None
    postal_code: Text = None
    city: Text = None
    country_iso_code: Text = None
    msisdn: Text = None
    email: Text = None
    id_type: Text = None
    id_country_iso_code: Text = None
    id_number: Text = None
    id_delivery_date: Text = None
    id_expiration_date: Text = None
    occupation: Text = None
    province_state: Text = None


class Sender(Party):
    beneficiary_relationship: Text = None
    source_of_funds: Text = None
    bank_account_number: Text = None


class Beneficiary(Party):
    bank_account_holder_name: Text = None


class RemittanceItem(JobModel):
    """A quotation (payer, mode, amounts) and the transaction created from it."""

    payer_id: int
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
