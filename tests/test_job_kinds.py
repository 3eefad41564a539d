"""The ten kinds' item models: fields from the documents, and the conditions they state."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from job_files import write
from pydantic import ValidationError

from runner.job import ValidItem, iter_items, load_job
from runner.job.problems import explain
from runner.kinds import MODULES as KINDS
from runner.kinds import kind_named

URLS = {"return_url": "https://m.example/r", "aborted_url": "https://m.example/a",
        "error_url": "https://m.example/e", "notification_url": "https://m.example/n"}
MONEY = {"amount": "10.00", "currency": "EUR"}

EXAMPLES: dict[str, dict[str, Any]] = {
    "remittance": {
        "payer_id": 1, "mode": "SOURCE_AMOUNT",
        "source": {"country_iso_code": "FRA", "currency": "EUR", "amount": "10"},
        "destination": {"currency": "KES"},
        "credit_party_identifier": {"msisdn": "+254700000001"},
        "sender": {"firstname": "Ada"}, "beneficiary": {"firstname": "Jo"},
        "purpose_of_remittance": "SALARY",
    },
    "merchant_payment": {
        "payment_method_id": 1, "mode": "COLLECTION_AMOUNT",
        "payment": {"country_iso_code": "KEN", "currency": "KES"},
        "collection": {"currency": "EUR", "amount": "25.5"},
        "debit_party_identifier": {"msisdn": "+254700000001", "account_type": "SAVINGS"},
        "consumer": {"firstname": "Jo", "gender": "FEMALE", "id_type": "PASSPORT"},
        "purpose_of_payment": "OTHER",
    },
    "payout": {"payout": MONEY, "label": "November", "source_account_id": "acc-1",
               "payout_bank_account_id": "pba-1"},
    "account_transfer": {"transfer": MONEY, "label": "Float", "source_account_id": "acc-1",
                         "target_account_id": "acc-2"},
    "payment_order": {"type": "C2B", "requested": MONEY, "merchant_id": "m-1",
                      "payment_page_id": "pp-1", "integration_mode": "REDIRECT",
                      "merchant_urls": URLS},
    "charge": {"payment_order_id": "po-1", "requested": MONEY},
    "refund": {"payment_order_external_id": "shop-42", "requested": MONEY},
    "cancel": {"payment_order_id": "po-1", "requested": MONEY, "custom_data": "oops"},
    "legacy_pay": {
        "MerchantId": "m-1", "Amount": "15.00", "Currency": "EUR", "PaymentPageId": "card",
        "MerchantUrls": {"ServerNotificationUrl": "https://m.example/n"},
        "MerchantOrder": {"Id": "order-1", "Customer": {"Email": "jo@example.com"}},
        "Credentials": [{"name": "CardNumber", "credential": "4111111111111111"},
                        {"name": "Cvv", "credential": "123"}],
    },
    "onboarding": {
        "company": {"template_id": "t-1", "name": "Acme"},
        "merchant": {"name": "Acme Shop", "template_id": "t-2", "custom_data": {"tier": 1}},
        "account": {"template_id": "t-3", "label": "Main", "payout_bank_accounts": [
            {"bic": "BNPAFRPP", "iban": "FR7630006000011234567890189", "format": "IBAN",
             "label": "Main account"}]},
    },
}


def problems(kind: str, item: dict[str, Any]) -> list[str]:
    model = kind_named(kind).item
    with pytest.raises(ValidationError) as caught:
        model.model_validate(item)
    return [f"{'.'.join(map(str, loc))}: {msg}" for loc, msg in explain(caught.value, model)]


def test_every_kind_has_an_example() -> None:
    assert set(EXAMPLES) == set(KINDS)
    assert len(KINDS) == 10


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_accepts_its_documented_fields(kind: str) -> None:
    item = kind_named(kind).item.model_validate(EXAMPLES[kind])
    assert item.model_dump(exclude_none=True, exclude_defaults=False)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_refuses_unknown_fields(kind: str) -> None:
    [message] = problems(kind, {**EXAMPLES[kind], "colour": "blue"})
    assert message.startswith("colour: unknown key")


def test_remittance_amounts_are_decimal_and_floats_are_refused() -> None:
    item = kind_named("remittance").item.model_validate(EXAMPLES["remittance"])
    assert item.source.amount == Decimal("10")  # type: ignore[attr-defined]
    example = {**EXAMPLES["remittance"], "source": {
        "country_iso_code": "FRA", "currency": "EUR", "amount": 12.5}}
    assert problems("remittance", example) == [
        "source.amount: amounts must be written exactly, not as a binary float: 12.5"]


def test_merchant_payment_enumerations_and_mode() -> None:
    example = {**EXAMPLES["merchant_payment"], "mode": "PAYMENT_AMOUNT",
               "consumer": {"gender": "M"}}
    assert problems("merchant_payment", example) == [
        "consumer.gender: 'M' is not one of MALE, FEMALE",
    ]
    example["consumer"] = {}
    assert problems("merchant_payment", example) == [
        "payment.amount: required when mode is PAYMENT_AMOUNT"]


def test_payment_order_conditions() -> None:
    base = EXAMPLES["payment_order"]
    both = {**base, "merchant_external_id": "ext-m"}
    assert problems("payment_order", both) == [
        "merchant_id: give exactly one of merchant_id and merchant_external_id"]
    host = {**base, "integration_mode": "HOST_TO_HOST", "merchant_urls": {}}
    assert problems("payment_order", host) == [
        "merchant_urls.notification_url: required in HOST_TO_HOST mode"]
    host["merchant_urls"] = {"notification_url": "https://m.example/n"}
    assert problems("payment_order", host) == [
        "payment_information: required in HOST_TO_HOST mode"]
    host["payment_information"] = {"msisdn": "+254700000001"}
    assert kind_named("payment_order").item.model_validate(host)
    redirect = {**base, "merchant_urls": {"notification_url": "https://m.example/n"}}
    assert problems("payment_order", redirect) == [
        "merchant_urls.aborted_url: required in REDIRECT mode"]


def test_payment_order_with_a_currency_conversion_quotation() -> None:
    base = {**EXAMPLES["payment_order"], "requested": {"currency": "EUR"}}
    processed = {**base, "quotation": {"quotation_mode": "PROCESSED_AMOUNT",
                                       "processed": {"currency": "KES", "amount": "1500"}}}
    assert kind_named("payment_order").item.model_validate(processed)
    requested = {**base, "quotation": {"quotation_mode": "REQUESTED_AMOUNT",
                                       "processed": {"currency": "KES"}}}
    assert problems("payment_order", requested) == [
        "requested.amount: required when quotation_mode is REQUESTED_AMOUNT"]
    by_external = {**processed, "merchant_id": None, "merchant_external_id": "ext-m"}
    assert problems("payment_order", by_external) == [
        "merchant_id: required when a quotation is asked for"]


def test_operations_name_exactly_one_order() -> None:
    for kind in ("charge", "refund", "cancel"):
        assert problems(kind, {"requested": MONEY}) == [
            "payment_order_id: give exactly one of payment_order_id and "
            "payment_order_external_id"]


def test_operation_amounts_must_be_positive() -> None:
    example = {**EXAMPLES["refund"], "requested": {"amount": "-1", "currency": "EUR"}}
    assert problems("refund", example) == [
        "requested.amount: must be greater than 0, got -1"]


def test_legacy_pay_credential_names_are_unique() -> None:
    example = {**EXAMPLES["legacy_pay"], "Credentials": [
        {"name": "Cvv", "credential": "1"}, {"name": "Exp", "credential": "202612"},
        {"name": "Cvv", "credential": "2"}]}
    assert problems("legacy_pay", example) == [
        "Credentials.2.name: credential name 'Cvv' is used twice (also at index 0)"]


def test_legacy_pay_format() -> None:
    model = kind_named("legacy_pay").item
    assert model.model_validate(EXAMPLES["legacy_pay"]).format == "json"  # type: ignore[attr-defined]
    xml = model.model_validate({**EXAMPLES["legacy_pay"], "format": "xml"})
    assert xml.format == "xml"  # type: ignore[attr-defined]
    assert problems("legacy_pay", {**EXAMPLES["legacy_pay"], "format": "soap"}) == [
        "format: 'soap' is not one of json, xml"]


def test_onboarding_needs_one_company() -> None:
    example = {**EXAMPLES["onboarding"], "company_id": "c-1"}
    assert problems("onboarding", example) == [
        "company: give exactly one of company and company_id"]


LEGACY_JOB = """\
version: 1
name: shop-pay
kind: legacy_pay
provider: {base_url: sandbox, api_key: k, api_secret: s}
defaults:
  MerchantId: m-1
  Currency: EUR
  PaymentPageId: card
  format: xml
  MerchantUrls: {ServerNotificationUrl: "https://m.example/n"}
items:
  rows:
    - {order: A1, amount: 15.00, card: "4111111111111111", cvv: "123"}
  external_id: "{{ job.name }}-{{ row.order }}"
  template:
    Amount: "{{ row.amount }}"
    MerchantOrder: {Id: "{{ row.order }}"}
    Credentials:
      - {name: CardNumber, credential: "{{ row.card }}"}
      - {name: Cvv, credential: "{{ row.cvv }}"}
"""


def test_a_legacy_pay_job_renders_lists_of_credentials(tmp_path: Path) -> None:
    [result] = iter_items(load_job(write(tmp_path, LEGACY_JOB, {}), {}))
    assert isinstance(result, ValidItem)
    assert result.external_id == "shop-pay-A1"
    assert result.item.model_dump(exclude_none=True) == {
        "MerchantId": "m-1", "Amount": Decimal("15.00"), "Currency": "EUR",
        "PaymentPageId": "card", "format": "xml",
        "MerchantUrls": {"ServerNotificationUrl": "https://m.example/n"},
        "MerchantOrder": {"Id": "A1"},
        "Credentials": [{"name": "CardNumber", "credential": "4111111111111111"},
                        {"name": "Cvv", "credential": "123"}],
    }
