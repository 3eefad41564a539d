"""Reaching the provider a job names: ``base_url: sandbox`` starts the embedded sandbox in a
thread of this process (with the job's own credentials), anything else is used as it is.

The embedded sandbox keeps its state in ``<state dir>/sandbox.jsonl``, so the provider a
resumed run talks to remembers what the killed run did, exactly as a real provider would.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

from runner.job import Job
from runner.provider.accounts import AccountClient
from runner.provider.collection import CollectionClient
from runner.provider.http import ProviderClient
from runner.provider.legacy import LegacyPayClient
from runner.provider.merchant_payment import MerchantPaymentClient
from runner.provider.money_transfer import MoneyTransferClient
from runner.provider.onboarding import OnboardingClient
from runner.provider.throttle import Throttle


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


def _session(base_url: str, pool: int) -> requests.Session:
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


def _clients(job: Job, base_url: str, pool: int) -> Provider:
    session = _session(base_url, pool)
    p = job.provider
    kw = dict(auth=p.auth, session=session, brand=p.brand, timeout=(5.0, float(p.timeout)))
    key, secret = p.api_key.get_secret_value(), p.api_secret.get_secret_value()
    # The collection service and legacy Pay take Basic authentication only.
    basic = {**kw, "auth": "basic"}
    provider = Provider(
        base_url, MoneyTransferClient(base_url, key, secret, **kw),  # type: ignore[arg-type]
        MerchantPaymentClient(base_url, key, secret, **kw),  # type: ignore[arg-type]
        CollectionClient(base_url, key, secret, **basic),  # type: ignore[arg-type]
        AccountClient(base_url, key, secret, **basic),  # type: ignore[arg-type]
        OnboardingClient(base_url, key, secret, **basic),  # type: ignore[arg-type]
        LegacyPayClient(base_url, key, secret, **basic),  # type: ignore[arg-type]
        session)
    if job.run.rate_limit is not None:
        throttle = Throttle(float(job.run.rate_limit))
        for client in provider.clients:
            client.throttle = throttle
    return provider


@contextlib.contextmanager
def connect(job: Job, state_dir: Path, pool: int = 10) -> Iterator[Provider]:
    if job.provider.base_url != "sandbox":
        provider = _clients(job, job.provider.base_url, pool)
        try:
            yield provider
        finally:
            provider.session.close()
        return
    from runner.sandbox import SandboxConfig, start_in_thread

    state_dir.mkdir(parents=True, exist_ok=True)
    config = SandboxConfig(
        port=0, api_key=job.provider.api_key.get_secret_value(),
        api_secret=job.provider.api_secret.get_secret_value(), header_brand=job.provider.brand,
        state_file=state_dir / "sandbox.jsonl", submit_delay=0.5, complete_delay=0.5,
        validation_delay=0.5)
    with start_in_thread(config) as sandbox:
        provider = _clients(job, sandbox.url, pool)
        try:
            yield provider
        finally:
            provider.session.close()
