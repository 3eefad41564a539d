"""The provider's field rules, read one way everywhere.

Requirement lists are "arrays of arrays": the outer list holds alternatives; an inner list
holds fields that must all be present; a party is complete when one alternative is. Dates are
ISO 8601, countries ISO 3166-1 alpha-3, currencies ISO 4217. Job validation and the sandbox
both use this module, so runner refuses exactly what the provider would.

The documents' request objects that are lists of optional text (parties, identifiers, a
payment order's customer, address and payment information, a payout bank account) are
declared here once, as ``...Fields`` models without configuration: the job's item models
(runner/job) and the sandbox's request models (runner/sandbox) each add their own (unknown
keys refused in a job file, ignored by the provider) and narrow what they check more closely.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import date
from decimal import Decimal
from functools import cache
from typing import Any, Generic, TypeVar

import pycountry
from pydantic import BaseModel, Field

Text = str | None  # optional text, as the documents give most request fields
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# pycountry finds codes whatever their case; the provider takes upper case only.
ALPHA3 = re.compile(r"^[A-Z]{3}$")
DATE_FIELDS = ("date_of_birth", "id_delivery_date", "id_expiration_date")
COUNTRY_FIELDS = ("country_iso_code", "nationality_country_iso_code", "country_of_birth_iso_code",
                  "id_country_iso_code")
ENUMS = {
    "gender": {"MALE", "FEMALE"},
    "id_type": {"PASSPORT", "NATIONAL_ID", "DRIVING_LICENSE", "SOCIAL_SECURITY", "TAX_ID",
                "SENIOR_CITIZEN_ID", "BIRTH_CERTIFICATE", "VILLAGE_ELDER_ID", "RESIDENT_CARD",
                "ALIEN_REGISTRATION", "PAN_CARD", "VOTERS_ID", "HEALTH_CARD", "EMPLOYER_ID",
                "OTHER"},
    "source_of_funds": {"CASH", "BUSINESS", "GIFT", "SALARY", "LOTTERY", "SAVINGS", "OTHER"},
    "account_type": {"CHECKING", "SAVINGS"},
}


# The longest text a field takes. The documents give no lengths ("size limits ... not shown"):
# these are runner's, as docs/job-files.md ("Limits") lists them. Identifiers by their
# standards (with room for the spaces people type in them), names and references 100
# characters, free text 1,000, URLs 2,048, e-mail addresses 254 (RFC 5321), any other field
# 255.
TEXT_MAX = 255
NAME_MAX = 100
PHONE_FIELDS = frozenset({"msisdn", "phone_number", "home_phone", "mobile_phone",
                          "holder_phone"})
TEXT_LIMITS: dict[str, int] = {
    **dict.fromkeys(PHONE_FIELDS, 32),
    "iban": 42, "swift_bic_code": 11, "bic": 11, "card_number": 23, "card_cvv": 4,
    **dict.fromkeys(("email", "holder_email", "recipient_email", "Email"), 254),
    **dict.fromkeys(("firstname", "lastname", "lastname2", "middlename", "nativename",
                     "first_name", "last_name", "name", "label", "holder_name",
                     "bank_account_holder_name", "account_holder_name", "card_holder_name",
                     "company_name", "bank_name", "representative_name", "occupation",
                     "city", "region", "province_state", "external_code", "id_number",
                     "merchant_item_id", "Id", "MerchantId", "PaymentPageId"), NAME_MAX),
    **dict.fromkeys(("custom_data", "searchable_custom_data_1", "searchable_custom_data_2",
                     "additional_information_1", "additional_information_2",
                     "additional_information_3"), 1_000),
    **dict.fromkeys(("callback_url", "notification_url", "return_url", "aborted_url",
                     "error_url", "url", "ReturnUrl", "AbortedUrl", "ErrorUrl",
                     "ServerNotificationUrl"), 2_048),
}


def text_limit(field: str) -> int:
    """The most characters the provider takes in a text field of that name."""
    return TEXT_LIMITS.get(field, TEXT_MAX)


def present(value: Any) -> bool:
    return value is not None and str(value).strip() != ""


def satisfied(values: Mapping[str, Any], alternatives: Sequence[Sequence[str]]) -> bool:
    if not alternatives:
        return True
    return any(all(present(values.get(f)) for f in alt) for alt in alternatives)


def missing(values: Mapping[str, Any], alternatives: Sequence[Sequence[str]]) -> list[str]:
    """The fields still missing from the alternative closest to complete ([] when satisfied)."""
    if satisfied(values, alternatives):
        return []
    gaps = [[f for f in alt if not present(values.get(f))] for alt in alternatives]
    return min(gaps, key=len)


def describe(alternatives: Sequence[Sequence[str]]) -> str:
    """``msisdn`` or ``bank_account_number + swift_bic_code`` alternatives, in words."""
    return " or ".join(" + ".join(alt) for alt in alternatives)


@cache
def is_country(code: str) -> bool:
    return bool(ALPHA3.match(code)) and pycountry.countries.get(alpha_3=code) is not None


@cache
def is_currency(code: str) -> bool:
    return bool(ALPHA3.match(code)) and pycountry.currencies.get(alpha_3=code) is not None


def is_iso_date(value: str) -> bool:
    if not ISO_DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def party_problems(values: Mapping[str, Any], enums: Sequence[str] = ()
                   ) -> Iterator[tuple[str, str]]:
    """(field, message) for each date, country or enumerated value the provider would refuse."""
    for name in DATE_FIELDS:
        value = values.get(name)
        if present(value) and not is_iso_date(str(value)):
            yield name, f"{value!r} is not an ISO 8601 date (YYYY-MM-DD)"
    for name in COUNTRY_FIELDS:
        value = values.get(name)
        if present(value) and not is_country(str(value)):
            yield name, f"{value!r} is not an ISO 3166-1 alpha-3 country code"
    for name in enums:
        value = values.get(name)
        if present(value) and value not in ENUMS[name]:
            yield name, f"must be one of {', '.join(sorted(ENUMS[name]))}"


# ---------------------------------------------------------------- the documents' objects
class CountryAmountFields(BaseModel):
    """A quotation's side with a country (document 2's source, document 3A's payment); the
    amount is given on the side the quotation's mode names."""

    country_iso_code: str
    currency: str
    amount: Decimal | None = None


class AmountFields(BaseModel):
    """A quotation's other side (document 2's destination, document 3A's collection)."""

    currency: str
    amount: Decimal | None = None


class PartyFields(BaseModel):
    """Document 2's person fields, which a sender, a beneficiary and document 3A's consumer
    share."""

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


class SenderFields(PartyFields):
    beneficiary_relationship: Text = None
    source_of_funds: Text = None
    bank_account_number: Text = None


class BeneficiaryFields(PartyFields):
    bank_account_holder_name: Text = None


class ConsumerFields(PartyFields):
    bank_account_holder_name: Text = None
    source_of_funds: Text = None


class CreditPartyIdentifierFields(BaseModel):
    msisdn: Text = None
    bank_account_number: Text = None
    swift_bic_code: Text = None
    iban: Text = None


class DebitPartyIdentifierFields(BaseModel):
    msisdn: Text = None
    bank_account_number: Text = None
    iban: Text = None
    clabe: Text = None
    swift_bic_code: Text = None
    bik_code: Text = None
    ifs_code: Text = None
    sort_code: Text = None
    aba_routing_number: Text = None
    bsb_number: Text = None
    branch_number: Text = None
    routing_code: Text = None
    account_type: Text = None
    account_number: Text = None
    card_number: Text = None
    email: Text = None


class MerchantUrlsFields(BaseModel):
    """Document 1's merchant URLs of a payment order."""

    aborted_url: Text = None
    error_url: Text = None
    return_url: Text = None
    notification_url: Text = None


class PaymentInformationFields(BaseModel):
    """Document 1's payment data of a HOST_TO_HOST payment order."""

    card_number: Text = None
    card_cvv: Text = None
    card_expiration_year: Text = None
    card_expiration_month: Text = None
    card_holder_name: Text = None
    email: Text = None
    phone_number: Text = None
    token_id: Text = None
    bank_account_number: Text = None
    account_holder_name: Text = None
    otp: Text = None
    msisdn: Text = None
    qrcode: Text = None
    bank_id: Text = None


class AddressFields(BaseModel):
    """Document 1's billing or shipping address of a merchant order."""

    address_line_1: Text = None
    address_line_2: Text = None
    city: Text = None
    company_name: Text = None
    country_iso_code: Text = None
    custom_data: Text = None
    first_name: Text = None
    home_phone: Text = None
    last_name: Text = None
    mobile_phone: Text = None
    region: Text = None
    title: Text = None
    zip_code: Text = None


class CustomerFields(BaseModel):
    """Document 1's customer of a merchant order."""

    account_creation_date: Text = None
    date_of_birth: Text = None
    company_name: Text = None
    culture: Text = None
    custom_data: Text = None
    email: Text = None
    first_name: Text = None
    home_phone: Text = None
    id: Text = None
    last_name: Text = None
    mobile_phone: Text = None
    title: Text = None


class DeliveryFields(BaseModel):
    """Document 1's delivery of a cart item."""

    label: Text = None
    type: Text = None
    speed: Text = None
    expected_date: Text = None
    expected_delay: int | None = None
    custom_data: Text = None


class LegacyMerchantUrlsFields(BaseModel):
    """Document 3B's merchant URLs of a Pay call (the document's own Pascal case names)."""

    ReturnUrl: Text = None
    AbortedUrl: Text = None
    ErrorUrl: Text = None
    ServerNotificationUrl: Text = None


# The nested objects of a merchant order: each side gives them its own models.
AmountT = TypeVar("AmountT")
DeliveryT = TypeVar("DeliveryT")
AddressT = TypeVar("AddressT")
CustomerT = TypeVar("CustomerT")
CartItemT = TypeVar("CartItemT")


class CartItemFields(BaseModel, Generic[AmountT, DeliveryT]):
    """Document 1's cart item of a merchant order."""

    brand: Text = None
    category: Text = None
    label: Text = None
    custom_data: Text = None
    merchant_category_1: Text = None
    merchant_category_2: Text = None
    merchant_item_id: Text = None
    quantity: int | None = Field(default=None, ge=1)
    type: Text = None
    unit_price: AmountT | None = None
    url: Text = None
    vat: AmountT | None = None
    delivery: DeliveryT | None = None


class MerchantOrderFields(BaseModel, Generic[AmountT, AddressT, CustomerT, CartItemT]):
    """Document 1's merchant order: totals, addresses, customer and cart."""

    total: AmountT | None = None
    tax: AmountT | None = None
    searchable_custom_data_1: Text = None
    searchable_custom_data_2: Text = None
    custom_data: Text = None
    billing_address: AddressT | None = None
    shipping_address: AddressT | None = None
    customer: CustomerT | None = None
    cart_items: list[CartItemT] | None = None


class PayoutBankAccountFields(BaseModel):
    """Document 1's payout bank account of a collection account."""

    address_line_1: Text = None
    address_line_2: Text = None
    bank_name: Text = None
    bank_address: Text = None
    bank_country_iso_code: Text = None
    bank_routing_code: Text = None
    bank_branch_code: Text = None
    bic: str
    card_number: Text = None
    external_id: Text = None
    external_account_id: Text = None
    external_account_type: Text = None
    iban: str
    holder_name: Text = None
    holder_email: Text = None
    holder_phone: Text = None
    format: str
    label: str
    registration_number: Text = None
    representative_id_number: Text = None
    representative_name: Text = None
    target_currency: Text = None
    tax_id: Text = None
