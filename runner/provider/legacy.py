"""Client of the legacy single-call Pay (POST /Rest/V40/PaymentOrder/Pay), in JSON or XML."""

from __future__ import annotations

from runner.provider.http import ProviderClient


class LegacyPayClient(ProviderClient):
    prefix = ""
