"""The composition root: from a job to the provider's clients. ``base_url: sandbox`` starts
the embedded sandbox in a thread of this process (with the job's own credentials), anything
else is used as it is. Only this module (and the command line) knows both the provider
clients and the sandbox.

The embedded sandbox keeps its state in ``<state dir>/sandbox.jsonl``, so the provider a
resumed run talks to remembers what the killed run did, exactly as a real provider would;
the file is its owner's only, as the state database is (``runner.state.files``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from runner.job import Job
from runner.provider import Provider
from runner.provider.accounts import AccountClient
from runner.provider.collection import CollectionClient
from runner.provider.http import ProviderClient
from runner.provider.legacy import LegacyPayClient
from runner.provider.merchant_payment import MerchantPaymentClient
from runner.provider.money_transfer import MoneyTransferClient
from runner.provider.onboarding import OnboardingClient
from runner.provider.throttle import Throttle
from runner.provider.transport import Urllib3Transport
from runner.state.files import PRIVATE_FILE, private_file, private_folder

Client = TypeVar("Client", bound=ProviderClient)


def _clients(job: Job, base_url: str, pool: int) -> Provider:
    p = job.provider
    # One transport for the provider's clients: its proxy, CA and pool, chosen once.
    transport = Urllib3Transport.from_environment(base_url, timeout=(5.0, float(p.timeout)),
                                                  pool_size=max(pool, 10))
    key, secret = p.api_key.get_secret_value(), p.api_secret.get_secret_value()

    def make(cls: type[Client], auth: str = p.auth) -> Client:
        return cls(base_url, key, secret, auth=auth, transport=transport, brand=p.brand)

    # The collection service and legacy Pay take Basic authentication only.
    provider = Provider(
        base_url, make(MoneyTransferClient), make(MerchantPaymentClient),
        make(CollectionClient, "basic"), make(AccountClient, "basic"),
        make(OnboardingClient, "basic"), make(LegacyPayClient, "basic"), transport)
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
            provider.close()
        return
    from runner.extras import require

    require("sandbox", "base_url: sandbox (the embedded provider sandbox)")
    from runner.sandbox import SandboxConfig, start_in_thread
    from runner.state.opening import state_error

    journal = state_dir / "sandbox.jsonl"
    try:  # what the provider was asked, names and all: for the owner's eyes only
        private_folder(state_dir)
        private_file(journal)
    except OSError as exc:
        raise state_error(exc, str(journal), "the embedded sandbox's journal") from None
    config = SandboxConfig.embedded(
        api_key=job.provider.api_key.get_secret_value(),
        api_secret=job.provider.api_secret.get_secret_value(), header_brand=job.provider.brand,
        state_file=journal)
    try:
        with start_in_thread(config) as sandbox:
            provider = _clients(job, sandbox.url, pool)
            try:
                yield provider
            finally:
                provider.close()
    finally:
        if journal.exists():  # the sandbox rewrites it when it stops
            journal.chmod(PRIVATE_FILE)
