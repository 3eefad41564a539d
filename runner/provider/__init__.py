"""Provider clients: one per service, plus auth, errors, retries and pagination.

``Provider`` holds the clients of one provider over one pooled session; ``runner.connect``
builds it from a job (and starts the embedded sandbox when the job asks for it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import requests

from runner.provider.accounts import AccountClient
from runner.provider.collection import CollectionClient
from runner.provider.http import ProviderClient
from runner.provider.legacy import LegacyPayClient
from runner.provider.merchant_payment import MerchantPaymentClient
from runner.provider.money_transfer import MoneyTransferClient
from runner.provider.onboarding import OnboardingClient


@dataclass
class Provider:
    """The clients of one provider, sharing one pooled session."""

    base_url: str
    money_transfer: MoneyTransferClient
    merchant_payment: MerchantPaymentClient
    collection: CollectionClient
    accounts: AccountClient
    onboarding: OnboardingClient
    legacy: LegacyPayClient
    session: requests.Session

    @property
    def clients(self) -> tuple[ProviderClient, ...]:
        return (self.money_transfer, self.merchant_payment, self.collection, self.accounts,
                self.onboarding, self.legacy)

    def close(self) -> None:
        """Close every connection the clients and their session hold."""
        for client in self.clients:
            client.close()
        self.session.close()


def session_for(base_url: str, pool: int) -> requests.Session:
    """A pooled session whose proxy and CA settings are read from the environment once, not
    on every call (requests does that per request, a measurable cost at thousands of calls).
    TLS verification stays on: only the CA bundle can be chosen."""
    session = requests.Session()
    session.proxies = requests.utils.get_environ_proxies(base_url)
    session.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get(
        "CURL_CA_BUNDLE") or True
    session.trust_env = False
    adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=max(pool, 10))
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
