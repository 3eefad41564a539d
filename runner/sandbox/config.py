"""Every knob of the sandbox, with the defaults of ``runner sandbox serve``.

Durations are seconds (Decimal-free: they are times, not money). The fault settings are the
start-up values; the admin API changes them at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from runner.provider.auth import DEFAULT_BRAND


@dataclass
class FaultRule:
    """Faults for one endpoint group: rates are probabilities per call, ``*_next`` counters
    hit the next N calls deterministically (tests use those)."""

    latency_ms: float = 0.0
    error_rate: float = 0.0  # 500 before any work is done
    unavailable_rate: float = 0.0  # 503 with Retry-After, before any work
    lost_rate: float = 0.0  # work done and committed, then the connection is dropped
    slow_rate: float = 0.0  # work done, answer held for ``slow_seconds``
    error_next: int = 0
    unavailable_next: int = 0
    lost_next: int = 0
    slow_next: int = 0

    def is_quiet(self) -> bool:
        return not any(
            (self.latency_ms, self.error_rate, self.unavailable_rate, self.lost_rate,
             self.slow_rate, self.error_next, self.unavailable_next, self.lost_next,
             self.slow_next)
        )


@dataclass
class SandboxConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    api_key: str = "sandbox-key"
    api_secret: str = "sandbox-secret"
    header_brand: str = DEFAULT_BRAND
    state_file: Path | None = None
    # Auth
    date_tolerance: float = 300.0  # a Date header further off than this is refused
    # Lifecycle, on the sandbox clock
    quotation_ttl: float = 3600.0
    submit_delay: float = 1.0  # CONFIRMED -> SUBMITTED
    complete_delay: float = 1.0  # SUBMITTED -> COMPLETED (and each later step)
    tick: float = 0.05  # how often due status changes are applied, real seconds
    # Callbacks, real time
    callback_attempts: int = 5
    callback_spacing: float = 1.0  # first retry after this, doubling each time
    callback_timeout: float = 5.0
    # Faults
    faults: dict[str, FaultRule] = field(default_factory=dict)
    slow_seconds: float = 30.0
    fault_seed: int | None = None
    # Starting balances: currency -> (balance, credit facility)
    balances: dict[str, tuple[Decimal, Decimal]] | None = None
    log_level: str = "warning"
    # Demo payment orders at the first start (payment_catalogue.DEMO_ORDERS), for examples
    # of charges, refunds and cancellations that need orders made before them.
    demo_orders: bool = True
    # Collection service: payment orders and the legacy Pay (sandbox clock, but notifications)
    payment_quotation_ttl: float = 86400.0  # a quotation's rate is secured for 24 hours
    payment_abort_delay: float = 7200.0  # an abandoned payment page: Payment_In_Progress -> Aborted
    authorization_period: float = 604800.0  # an uncharged authorization lapses after 7 days
    # Real seconds: a ping not answered 2xx is repeated after each of these (10 min, 1 h).
    notification_delays: tuple[float, ...] = (600.0, 3600.0)
    # Collection service: accounts (sandbox clock). A transfer or payout request, and its
    # entries, wait this long for validation.
    validation_delay: float = 2.0
