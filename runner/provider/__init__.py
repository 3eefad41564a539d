"""Provider clients: one per service, plus auth, errors, retries and pagination.

``Provider`` holds the clients of one provider over one transport (``transport.py``);
``runner.connect`` builds it from a job (and starts the embedded sandbox when the job asks
for it).
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.provider.accounts import AccountClient
from runner.provider.collection import CollectionClient
from runner.provider.http import ProviderClient
from runner.provider.legacy import LegacyPayClient
from runner.provider.merchant_payment import MerchantPaymentClient
from runner.provider.money_transfer import MoneyTransferClient
from runner.provider.onboarding import OnboardingClient
from runner.provider.transport import Transport


@dataclass
class Provider:
    """The clients of one provider, sharing one transport (its pool of connections)."""

    base_url: str
    money_transfer: MoneyTransferClient
    merchant_payment: MerchantPaymentClient
    collection: CollectionClient
    accounts: AccountClient
    onboarding: OnboardingClient
    legacy: LegacyPayClient
    transport: Transport

    @property
    def clients(self) -> tuple[ProviderClient, ...]:
        return (self.money_transfer, self.merchant_payment, self.collection, self.accounts,
                self.onboarding, self.legacy)

    def close(self) -> None:
        """Close every connection the clients and their transport hold."""
        for client in self.clients:
            client.close()
        self.transport.close()
