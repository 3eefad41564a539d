"""Client of the collection service's onboarding: companies, merchants, accounts."""

from __future__ import annotations

from runner.provider.http import ProviderClient


class OnboardingClient(ProviderClient):
    prefix = "/v1/onboarding"
