"""Client of the collection service's onboarding: companies, merchants, accounts (document 1),
each created by a POST and found again by the name that identifies it.

Lookups (None only on a clear 404; any other failure raises, since it proves nothing):
a company by name (``GET /v1/onboarding/companies/{nameId}``), a merchant by its
merchant_external_id (``GET /v1/onboarding/merchants/{nameId}``), and an account by label.
The document gives no retrieval of an account; its balances
(``GET /v1/account/accounts/{label}/balances``) are the one call that tells whether an account
of that label exists, so ``account_balances`` reaches outside this client's prefix for it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from runner.errors import NotFound
from runner.provider.http import ProviderClient

ACCOUNTS_PREFIX = "/v1/account"


def _segment(value: str) -> str:
    return quote(value, safe="")


class OnboardingClient(ProviderClient):
    prefix = "/v1/onboarding"

    def create_company(self, body: dict[str, Any]) -> Any:
        return self.request("POST", "/companies", body=body, external_id=body.get("name")).body

    def find_company(self, name: str) -> Any | None:
        """The company of that name (or id), or None."""
        return self.find(f"/companies/{_segment(name)}")

    def create_merchant(self, body: dict[str, Any]) -> Any:
        return self.request("POST", "/merchants", body=body,
                            external_id=body.get("merchant_external_id")).body

    def find_merchant(self, merchant_external_id: str) -> Any | None:
        """The merchant of that merchant_external_id (or id, or name), or None."""
        return self.find(f"/merchants/{_segment(merchant_external_id)}")

    def create_account(self, body: dict[str, Any]) -> Any:
        return self.request("POST", "/accounts", body=body, external_id=body.get("label")).body

    def account_balances(self, label: str) -> Any | None:
        """The balances of the account of that label (or id), or None when there is none."""
        try:
            return self.request("GET", f"/accounts/{_segment(label)}/balances",
                                prefix=ACCOUNTS_PREFIX).body
        except NotFound:
            return None
