"""Client of the collection service's quotations, payment orders and operations (charge,
refund, cancel)."""

from __future__ import annotations

from runner.provider.http import ProviderClient


class CollectionClient(ProviderClient):
    prefix = "/v1/payment"
