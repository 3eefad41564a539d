"""Client of the collection service's accounts: balances, entries, transfer requests and
payout requests."""

from __future__ import annotations

from runner.provider.http import ProviderClient


class AccountClient(ProviderClient):
    prefix = "/v1/account"
