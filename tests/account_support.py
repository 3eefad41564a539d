"""Helpers for the collection service's accounts and onboarding tests: request bodies, IBANs
with valid check digits, and the check that the four balances are what the entries say."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import requests
from conftest import Api, body, error_of
from stdnum import iban as stdnum_iban

ACCOUNT = "/v1/account"
ONBOARDING = "/v1/onboarding"
BALANCE_TYPES = ["AVAILABLE", "EXPECTED", "WAITING_FOR_VALIDATION", "UP_TO_DATE"]
BALANCE_PATHS = {"available": "AVAILABLE", "expected": "EXPECTED",
                 "waitingforvalidation": "WAITING_FOR_VALIDATION", "uptodate": "UP_TO_DATE"}
OPENING = Decimal("50000.00")  # ACC0001's validated opening entry


def refused(response: requests.Response, status: int, code: str, *words: str) -> None:
    """The answer is the document's error ``code`` with ``status``, its message saying
    each of ``words``."""
    assert error_of(response) == (status, code), response.text
    message = body(response)["errors"][0]["message"]
    for word in words:
        assert word in message, message


def iban(country: str, bban: str) -> str:
    """An IBAN with the check digits that make it valid (ISO 13616, mod 97)."""
    return f"{country}{stdnum_iban.calc_check_digits(country + '00' + bban)}{bban}"


def money(amount: str, currency: str = "EUR") -> dict[str, Any]:
    return {"amount": Decimal(amount), "currency": currency}


def transfer_body(reference: str, amount: str = "100.00", source: str = "ACC0001",
                  target: str = "ACC0002", **extra: Any) -> dict[str, Any]:
    return {"transfer": money(amount), "external_reference": reference,
            "label": f"transfer {reference}", "source_account_id": source,
            "target_account_id": target, "type": "ScheduledTransferOut", **extra}


def payout_body(reference: str, amount: str = "100.00", source: str = "ACC0001",
                bank: str = "PBA0001-1", **extra: Any) -> dict[str, Any]:
    return {"payout": money(amount), "external_reference": reference,
            "label": f"payout {reference}", "source_account_id": source,
            "payout_bank_account_id": bank, **extra}


def created(api: Api, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    r = api.post(path, payload)
    assert r.status_code == 201, r.text
    return body(r)  # type: ignore[no-any-return]


def fetched(api: Api, path: str, **params: Any) -> Any:
    """A GET of document 1's accounts or onboarding: 201, as the document shows."""
    r = api.get(path, params=params or None)
    assert r.status_code == 201, (path, r.text)
    return body(r)


def transfer(api: Api, reference: str, amount: str = "100.00", **kw: Any) -> dict[str, Any]:
    return created(api, f"{ACCOUNT}/transfer-requests", transfer_body(reference, amount, **kw))


def payout(api: Api, reference: str, amount: str = "100.00", **kw: Any) -> dict[str, Any]:
    return created(api, f"{ACCOUNT}/payout-requests", payout_body(reference, amount, **kw))


def balances(api: Api, account: str) -> dict[str, Decimal]:
    found = fetched(api, f"{ACCOUNT}/accounts/{account}/balances")["balances"]
    assert [b["type"] for b in found] == BALANCE_TYPES
    return {b["type"]: b["balance"]["amount"] for b in found}


def entries(api: Api, account: str) -> list[dict[str, Any]]:
    return fetched(api, f"{ACCOUNT}/accounts/{account}/entries", per_page=100)  # type: ignore[no-any-return]


def from_entries(found: list[dict[str, Any]]) -> dict[str, Decimal]:
    """The four balances as the definitions make them from the entries."""
    total: dict[tuple[str, str], Decimal] = {}
    for e in found:
        assert e["entry"]["amount"] > 0, e
        key = (e["status"], e["credit_debit_indicator"])
        total[key] = total.get(key, Decimal(0)) + e["entry"]["amount"]

    def part(status: str, way: str) -> Decimal:
        return total.get((status, way), Decimal(0))

    up_to_date = part("VALIDATED", "credit") - part("VALIDATED", "debit")
    waiting = part("WAITINGFORVALIDATION", "credit") - part("WAITINGFORVALIDATION", "debit")
    return {"AVAILABLE": up_to_date - part("WAITINGFORVALIDATION", "debit"),
            "EXPECTED": up_to_date + waiting, "WAITING_FOR_VALIDATION": waiting,
            "UP_TO_DATE": up_to_date}


def consistent(api: Api, account: str) -> dict[str, Decimal]:
    """The account's balances, after checking them against its entries and the four
    single-balance endpoints."""
    found = balances(api, account)
    assert found == from_entries(entries(api, account)), account
    for segment, kind in BALANCE_PATHS.items():
        one = fetched(api, f"{ACCOUNT}/accounts/{account}/balances/{segment}")
        assert (one["type"], one["balance"]["amount"]) == (kind, found[kind])
    return found


def onboard(api: Api, name: str, template: str = "TPL-STANDARD",
            banks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A company, its merchant and an account, in the documented order; the account."""
    company = created(api, f"{ONBOARDING}/companies", {"template_id": template, "name": name})
    created(api, f"{ONBOARDING}/merchants", {
        "company_id": company["id"], "merchant_external_id": f"{name}-shop",
        "name": f"{name} Shop", "template_id": template})
    return created(api, f"{ONBOARDING}/accounts", {
        "template_id": template, "label": f"{name}-main", "company_id": company["id"],
        "payout_bank_accounts": banks})


def bank(label: str, bban: str = "30006000011234567890189", **extra: Any) -> dict[str, Any]:
    return {"bic": "AGRIFRPPXXX", "iban": iban("FR", bban), "format": "IBAN", "label": label,
            **extra}
