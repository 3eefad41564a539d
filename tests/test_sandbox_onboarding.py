"""The collection service's onboarding (document 1) over real HTTP: companies, merchants and
accounts with payout bank accounts, in the documented order; their retrieval by id or name
(201, as the document shows); every refusal with its code; Basic-only authentication; faults
of the ``onboarding`` group; the OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
import requests
from account_support import (
    ACCOUNT,
    BALANCE_TYPES,
    ONBOARDING,
    bank,
    consistent,
    created,
    fetched,
    iban,
    payout,
    refused,
    transfer,
)
from conftest import KEY, SECRET, Admin, Api, body, error_of

from runner.provider.auth import DigestAuth
from runner.sandbox import RunningSandbox

COMPANIES = f"{ONBOARDING}/companies"
MERCHANTS = f"{ONBOARDING}/merchants"
ACCOUNTS = f"{ONBOARDING}/accounts"
BANK_FIELDS = {
    "address_line_1", "address_line_2", "bank_name", "bank_address", "bank_country_iso_code",
    "bank_routing_code", "bank_branch_code", "bic", "card_number", "external_id",
    "external_account_id", "external_account_type", "iban", "holder_name", "holder_email",
    "holder_phone", "format", "label", "registration_number", "representative_id_number",
    "representative_name", "target_currency", "tax_id"}


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    """Validation waits 60 s on the sandbox clock: tests move it with ``admin.advance``."""
    return sandbox_factory(validation_delay=60.0)


def company(api: Api, name: str, template: str = "TPL-STANDARD") -> dict[str, Any]:
    return created(api, COMPANIES, {"template_id": template, "name": name})


def merchant_body(company_id: str, external_id: str, **extra: Any) -> dict[str, Any]:
    return {"company_id": company_id, "merchant_external_id": external_id,
            "name": f"Shop {external_id}", "template_id": "TPL-STANDARD", **extra}


def account_body(company_id: str, label: str, **extra: Any) -> dict[str, Any]:
    return {"template_id": "TPL-STANDARD", "label": label, "company_id": company_id, **extra}


# ---------------------------------------------------------------- the documented order
def test_company_then_merchant_then_account(api: Api, admin: Admin) -> None:
    r = api.post(COMPANIES, {"template_id": "TPL-MARKETPLACE", "name": "Initech"})
    assert r.status_code == 201
    made = body(r)
    assert made == {"id": "CMP0003", "name": "Initech", "creation_date": made["creation_date"],
                    "update_date": made["creation_date"]}
    assert fetched(api, f"{COMPANIES}/CMP0003") == made
    assert fetched(api, f"{COMPANIES}/Initech") == made

    shop = created(api, MERCHANTS, merchant_body(
        "CMP0003", "initech-shop", template_id="TPL-MARKETPLACE",
        custom_data={"tier": 1, "tags": ["b2b"], "rate": Decimal("0.5")}))
    assert shop == {
        "id": "MER0003", "company_id": "CMP0003", "currency": "EUR",
        "merchant_external_id": "initech-shop", "name": "Shop initech-shop",
        "template_id": "TPL-MARKETPLACE",
        "custom_data": {"tier": 1, "tags": ["b2b"], "rate": Decimal("0.5")},
        "creation_date": shop["creation_date"], "update_date": shop["creation_date"]}
    for name_id in ("MER0003", "initech-shop", "Shop initech-shop"):
        assert fetched(api, f"{MERCHANTS}/{name_id}") == shop

    banks = [bank("initech-main", holder_name="Initech SA", bank_country_iso_code="FRA",
                  external_account_type="CHECKING", holder_email="pay@initech.example",
                  target_currency="EUR"),
             bank("initech-spare", "30006000019999999999932")]
    r = api.post(ACCOUNTS, account_body("CMP0003", "initech-main", fees=["FEE-PAYOUT-SEPA"],
                                        recipient_email="books@initech.example",
                                        payout_bank_accounts=banks))
    assert r.status_code == 201, r.text
    account = body(r)
    assert {k: account[k] for k in ("id", "template_id", "label", "company_id", "currency",
                                    "recipient_email", "fees")} == {
        "id": "ACC0004", "template_id": "TPL-STANDARD", "label": "initech-main",
        "company_id": "CMP0003", "currency": "EUR", "recipient_email": "books@initech.example",
        "fees": ["FEE-PAYOUT-SEPA"]}
    assert account["creation_date"] == account["update_date"]
    first, second = account["payout_bank_accounts"]
    assert set(first) == BANK_FIELDS | {"id", "status", "is_blocked", "is_default",
                                        "creation_date", "update_date"}
    assert {k: first[k] for k in ("id", "iban", "holder_name", "address_line_1", "status",
                                  "is_blocked", "is_default")} == {
        "id": "PBA0004-1", "iban": banks[0]["iban"], "holder_name": "Initech SA",
        "address_line_1": None, "status": "ACTIVE", "is_blocked": False, "is_default": True}
    assert (second["id"], second["is_default"], second["is_blocked"]) == \
        ("PBA0004-2", False, False)
    assert [b["type"] for b in account["balances"]] == BALANCE_TYPES
    assert all(b["balance"] == {"amount": Decimal("0.00"), "currency": "EUR"}
               for b in account["balances"])
    assert consistent(api, "initech-main")["EXPECTED"] == Decimal("0.00")

    # The new account works at once: funded by a transfer, then paid out.
    transfer(api, "fund-initech", "80.00", target="initech-main")
    admin.advance(60)
    payout(api, "po-initech", "30.00", source="ACC0004", bank="PBA0004-2")
    assert consistent(api, "ACC0004") == {
        "AVAILABLE": Decimal("50.00"), "EXPECTED": Decimal("50.00"),
        "WAITING_FOR_VALIDATION": Decimal("-30.00"), "UP_TO_DATE": Decimal("80.00")}


def test_an_account_without_optional_fields(api: Api) -> None:
    account = created(api, ACCOUNTS, account_body("CMP0001", "acme-usd", template_id="TPL-US"))
    assert (account["currency"], account["recipient_email"], account["fees"],
            account["payout_bank_accounts"]) == ("USD", None, None, None)
    assert {b["balance"]["currency"] for b in account["balances"]} == {"USD"}
    empty = created(api, ACCOUNTS, account_body("CMP0001", "acme-empty", fees=[],
                                                payout_bank_accounts=[]))
    assert (empty["fees"], empty["payout_bank_accounts"]) == ([], [])


def test_the_seeded_company_and_merchants(api: Api) -> None:
    acme = fetched(api, f"{COMPANIES}/Acme")
    assert (acme["id"], acme["name"]) == ("CMP0001", "Acme")
    shop = fetched(api, f"{MERCHANTS}/acme-shop")
    assert (shop["id"], shop["company_id"], shop["currency"], shop["name"]) == \
        ("MER0001", "CMP0001", "EUR", "Acme Shop")
    assert fetched(api, f"{MERCHANTS}/Acme Shop") == shop
    dollars = created(api, MERCHANTS, merchant_body("CMP0001", "acme-us", template_id="TPL-US"))
    assert dollars["currency"] == "USD"  # from the template
    assert dollars["custom_data"] is None


# ---------------------------------------------------------------- refusals
def test_company_refusals(api: Api) -> None:
    refused(api.post(COMPANIES, {"template_id": "TPL-NONE", "name": "X"}), 400, "1001001",
            "TPL-NONE", "TPL-STANDARD")
    refused(api.post(COMPANIES, {"template_id": "TPL-STANDARD", "name": "Acme"}), 400,
            "2001201", "Acme", "already exists")
    refused(api.post(COMPANIES, {"template_id": "TPL-STANDARD"}), 400, "2001101", "name",
            "required")
    refused(api.post(COMPANIES, {"template_id": "TPL-STANDARD", "name": ""}), 400, "2001101",
            "name")
    refused(api.post(COMPANIES, {"template_id": 7, "name": "Y"}), 400, "2001101",
            "template_id")
    refused(api.post(COMPANIES, {"template_id": "TPL-STANDARD", "name": "CMP0042"}), 400,
            "2001101", "name", "form of an id")
    refused(api.get(f"{COMPANIES}/Nobody"), 404, "1000404", "Nobody")
    refused(api.get(f"{COMPANIES}/CMP0999"), 404, "1000404")


def test_merchant_refusals(api: Api) -> None:
    refused(api.post(MERCHANTS, merchant_body("CMP0999", "m-1")), 400, "1001001", "CMP0999")
    refused(api.post(MERCHANTS, merchant_body("Acme", "m-1")), 400, "1001001", "Acme")
    refused(api.post(MERCHANTS, merchant_body("CMP0002", "m-1")), 403, "1000403",
            "another integrator")
    refused(api.post(MERCHANTS, merchant_body("CMP0001", "m-1", template_id="TPL-X")), 400,
            "1001001", "TPL-X")
    refused(api.post(MERCHANTS, merchant_body("CMP0001", "acme-shop")), 400, "2001201",
            "acme-shop", "already used")
    refused(api.post(MERCHANTS, merchant_body("CMP0001", "MER0007")), 400, "2001101",
            "merchant_external_id", "form of an id")
    missing = merchant_body("CMP0001", "m-1")
    del missing["name"]
    refused(api.post(MERCHANTS, missing), 400, "2001101", "name", "required")
    refused(api.get(f"{MERCHANTS}/m-1"), 404, "1000404", "m-1")  # nothing was made
    for name_id in ("MER0002", "globex-store", "Globex Store"):
        refused(api.get(f"{MERCHANTS}/{name_id}"), 403, "1000403")
    for name_id in ("CMP0002", "Globex"):
        refused(api.get(f"{COMPANIES}/{name_id}"), 403, "1000403")


def test_an_account_needs_a_company_that_has_a_merchant(api: Api) -> None:
    bare = company(api, "Vandelay")
    refused(api.post(ACCOUNTS, account_body(bare["id"], "vandelay-main")), 400, "2001201",
            "no merchant yet", "company, then a merchant")
    created(api, MERCHANTS, merchant_body(bare["id"], "vandelay-imports"))
    assert created(api, ACCOUNTS, account_body(bare["id"], "vandelay-main"))["company_id"] == \
        bare["id"]


@pytest.mark.parametrize("change, status, code, words", [
    ({"template_id": "TPL-NONE"}, 400, "1001001", ["template_id", "TPL-NONE"]),
    ({"company_id": "CMP0999"}, 400, "1001001", ["company_id", "CMP0999"]),
    ({"company_id": "CMP0002"}, 403, "1000403", ["another integrator"]),
    ({"label": "acme-eur-main"}, 400, "2001201", ["acme-eur-main", "already exists"]),
    ({"label": "ACC0077"}, 400, "2001101", ["label", "form of an id"]),
    ({"label": ""}, 400, "2001101", ["label"]),
    ({"recipient_email": "not-an-address"}, 400, "2001101", ["recipient_email"]),
    ({"fees": ["FEE-NONE"]}, 400, "1001001", ["FEE-NONE", "FEE-PAYOUT-SEPA"]),
    ({"fees": "FEE-MONTHLY"}, 400, "2001101", ["fees"]),
    ({"payout_bank_accounts": {"bic": "X"}}, 400, "2001101", ["payout_bank_accounts"]),
])
def test_account_refusals(api: Api, change: dict[str, Any], status: int, code: str,
                          words: list[str]) -> None:
    refused(api.post(ACCOUNTS, {**account_body("CMP0001", "acme-new"), **change}), status,
            code, *words)
    refused(api.get(f"{ACCOUNT}/accounts/acme-new/balances"), 404, "1000404")


@pytest.mark.parametrize("change, field, words", [
    ({}, "bic", ["payout_bank_accounts.1.bic", "required"]),
    ({}, "iban", ["payout_bank_accounts.1.iban", "required"]),
    ({}, "format", ["payout_bank_accounts.1.format", "required"]),
    ({}, "label", ["payout_bank_accounts.1.label", "required"]),
    ({"format": "CLABE"}, None, ["payout_bank_accounts.1.format", "IBAN"]),
    ({"iban": "FR7630006000011234567890188"}, None, ["payout_bank_accounts.1.iban",
                                                     "not a valid IBAN"]),
    ({"iban": "FR76 3000 6000 0112 3456 7890 189"}, None, ["not a valid IBAN",
                                                           "electronic form"]),
    ({"iban": "FR39300060000112345"}, None, ["not a valid IBAN", "27 characters"]),
    ({"bic": "AGRI"}, None, ["payout_bank_accounts.1.bic", "not a BIC"]),
    ({"bic": "DEUTZZFF"}, None, ["payout_bank_accounts.1.bic", "'ZZ' is not a country"]),
    ({"bic": "agrifrpp"}, None, ["payout_bank_accounts.1.bic", "electronic form"]),
    ({"bank_country_iso_code": "FR"}, None, ["bank_country_iso_code", "alpha-3"]),
    ({"external_account_type": "CURRENT"}, None, ["external_account_type", "SAVINGS"]),
    ({"target_currency": "USD"}, None, ["target_currency", "EUR"]),
    ({"holder_email": "nobody"}, None, ["holder_email"]),
    ({"iban": 76}, None, ["payout_bank_accounts.1.iban"]),
])
def test_payout_bank_account_refusals(api: Api, change: dict[str, Any], field: str | None,
                                      words: list[str]) -> None:
    second = {**bank("second"), **change}
    if field:
        del second[field]
    sent = account_body("CMP0001", "acme-banked", payout_bank_accounts=[bank("first"), second])
    refused(api.post(ACCOUNTS, sent), 400, "2001101", *words)
    refused(api.get(f"{ACCOUNT}/accounts/acme-banked/balances"), 404, "1000404")


def test_iban_check_digits_are_checked_in_every_country(api: Api) -> None:
    banks = [bank("de", bic="COBADEFFXXX") | {"iban": iban("DE", "370400440532013000")},
             bank("gb", bic="NWBKGB2L") | {"iban": "GB29NWBK60161331926819"}]
    made = created(api, ACCOUNTS, account_body("CMP0001", "acme-europe",
                                               payout_bank_accounts=banks))
    assert [b["iban"] for b in made["payout_bank_accounts"]] == \
        ["DE89370400440532013000", "GB29NWBK60161331926819"]


# ---------------------------------------------------------------- auth, faults, OpenAPI
def test_basic_authentication_only(sandbox: RunningSandbox) -> None:
    with requests.Session() as s:
        for auth in (None, ("intruder", SECRET), DigestAuth(KEY, SECRET)):
            refused(s.get(f"{sandbox.url}{COMPANIES}/Acme", auth=auth, timeout=60), 401,
                    "1000401")
            refused(s.post(f"{sandbox.url}{COMPANIES}", json={"template_id": "TPL-STANDARD",
                                                              "name": "Sneaky"},
                           auth=auth, timeout=60), 401, "1000401")
        r = s.get(f"{sandbox.url}{COMPANIES}/Sneaky", auth=(KEY, SECRET), timeout=60)
        refused(r, 404, "1000404")


def test_malformed_bodies(sandbox: RunningSandbox, api: Api) -> None:
    r = api.session.post(sandbox.url + COMPANIES, data=b"name=Acme",
                         headers={"Content-Type": "application/json"}, timeout=60)
    refused(r, 400, "1000400")
    refused(api.post(MERCHANTS, "a string"), 400, "1000400")


def test_a_lost_onboarding_call_is_done_nevertheless(api: Api, admin: Admin) -> None:
    admin.faults({"onboarding": {"lost_next": 1}})
    with pytest.raises(requests.ConnectionError):
        api.post(COMPANIES, {"template_id": "TPL-STANDARD", "name": "Lost Ltd"})
    found = fetched(api, f"{COMPANIES}/Lost Ltd")  # looked up by name, as a client would
    refused(api.post(COMPANIES, {"template_id": "TPL-STANDARD", "name": "Lost Ltd"}), 400,
            "2001201")
    admin.faults({"onboarding": {"lost_next": 1}})
    with pytest.raises(requests.ConnectionError):
        api.post(MERCHANTS, merchant_body(found["id"], "lost-shop"))
    assert fetched(api, f"{MERCHANTS}/lost-shop")["company_id"] == found["id"]


def test_onboarding_errors_and_unavailability_do_nothing(api: Api, admin: Admin) -> None:
    admin.faults({"onboarding": {"error_next": 1, "unavailable_next": 1}})
    refused(api.post(COMPANIES, {"template_id": "TPL-STANDARD", "name": "Err"}), 500,
            "1000500")
    r = api.post(MERCHANTS, merchant_body("CMP0001", "busy-shop"))
    refused(r, 503, "2001501", "retry later")
    assert r.headers["Retry-After"] == "1"
    admin.faults({"lookups": {"error_next": 1}})
    refused(api.get(f"{COMPANIES}/Err"), 500, "1000500")
    refused(api.get(f"{COMPANIES}/Err"), 404, "1000404")
    refused(api.get(f"{MERCHANTS}/busy-shop"), 404, "1000404")
    counts = admin.requests()["counts"]
    assert (counts["POST onboarding"], counts["GET lookups"]) == (2, 3)


def test_openapi_describes_the_onboarding_endpoints(sandbox: RunningSandbox) -> None:
    with requests.Session() as http:
        doc = http.get(sandbox.url + "/openapi.json", timeout=60).json()
    for path, method, schema in ((COMPANIES, "post", "CompanyCreate"),
                                 (MERCHANTS, "post", "MerchantCreate"),
                                 (ACCOUNTS, "post", "AccountCreate"),
                                 (f"{COMPANIES}/{{name_id}}", "get", None),
                                 (f"{MERCHANTS}/{{name_id}}", "get", None)):
        operation = doc["paths"][path][method]
        assert "201" in operation["responses"], path
        assert operation["security"] == [{"basic": []}], path
        if schema:
            ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert ref == f"#/components/schemas/{schema}"
    schemas = doc["components"]["schemas"]
    assert set(schemas["AccountCreate"]["required"]) == {"template_id", "label", "company_id"}
    assert set(schemas["PayoutBankAccountCreate"]["required"]) == {"bic", "iban", "format",
                                                                   "label"}
    assert set(schemas["Account"]["properties"]) >= {"id", "payout_bank_accounts", "balances"}


def test_an_account_is_read_by_id_or_label_with_its_payout_bank_accounts(api: Api) -> None:
    by_id = api.get("/v1/onboarding/accounts/ACC0001")
    by_label = api.get("/v1/onboarding/accounts/acme-eur-main")
    assert by_id.status_code == by_label.status_code == 201
    found = body(by_id)
    assert found == body(by_label)
    assert [(b["id"], b["is_blocked"], b["is_default"])
            for b in found["payout_bank_accounts"]] == [
        ("PBA0001-1", False, True), ("PBA0001-2", True, False)]
    assert {b["type"] for b in found["balances"]} == {
        "AVAILABLE", "EXPECTED", "WAITING_FOR_VALIDATION", "UP_TO_DATE"}
    assert error_of(api.get("/v1/onboarding/accounts/ACC0999")) == (404, "1000404")
    assert error_of(api.get("/v1/onboarding/accounts/ACC0003")) == (403, "1000403")
