"""Every knob of the sandbox, declared once, with the defaults of ``runner sandbox serve``.

Each field carries its ``Knob`` (core/knobs.py): help, unit, option, and whether
``PATCH /_admin/timing`` changes it at run time. The command line builds its options from
these fields and hands their values back to ``SandboxConfig.from_options``; the admin API
builds its Timing model from the fields marked ``timing``. Durations are seconds
(Decimal-free: they are times, not money). The fault settings are the start-up values;
the admin API changes them at run time.

``SandboxConfig.embedded`` is the preset of the runner's embedded sandbox (``base_url:
sandbox``, runner/connect.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import MappingProxyType
from typing import Any

from runner.provider.auth import DEFAULT_BRAND
from runner.sandbox.core.faults import SETTINGS as FAULT_SETTINGS
from runner.sandbox.core.faults import FaultRule, fault_rules, read_setting
from runner.sandbox.core.knobs import Setting, knob, settings

SECONDS = "seconds on the sandbox clock"  # which the admin API moves
REAL_SECONDS = "seconds of real time"
# The longest duration a knob takes: timestamps stay within the calendar however the
# sandbox clock is moved (core/clock.py bounds that).
LONGEST = 10 * 365 * 86400.0
DAY = 86400.0
NONCE_CHECKS = ("lenient", "strict")


def read_balance(text: str) -> tuple[str, Decimal, Decimal]:
    """``EUR=100.50:10`` (a ``--balance`` value) as (currency, balance, credit facility)."""
    currency, _, amounts = text.partition("=")
    amount, _, facility = amounts.partition(":")
    try:
        return currency.upper(), Decimal(amount), Decimal(facility or "0")
    except InvalidOperation:
        raise ValueError(f"{text!r}: expected CUR=AMOUNT[:CREDIT_FACILITY]") from None


def nonce_check(text: str) -> str:
    """A ``--nonce-check`` value (core/auth.py applies it)."""
    if text not in NONCE_CHECKS:
        raise ValueError(f"{text!r}: expected {' or '.join(NONCE_CHECKS)}")
    return text


def read_delays(text: str) -> tuple[float, ...]:
    """``600,3600`` as the waits before each repeat."""
    try:
        delays = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"{text!r}: expected seconds separated by commas") from None
    if any(not 0 <= d <= LONGEST for d in delays):
        raise ValueError(f"{text!r}: delays must be from 0 to {LONGEST:g} seconds")
    return delays


@dataclass
class SandboxConfig:
    host: str = knob("127.0.0.1")
    port: int = knob(8765, maximum=65535)
    api_key: str = knob("sandbox-key", envvar="RUNNER_API_KEY")
    api_secret: str = knob("sandbox-secret", envvar="RUNNER_API_SECRET", show_default=False,
                           help="Default: sandbox-secret, or $RUNNER_API_SECRET.")
    header_brand: str = knob(DEFAULT_BRAND,
                             help="Brand in the digest header names: X-<Brand>-apikey ...")
    nonce_check: str = knob(
        "lenient", read=nonce_check, metavar="lenient|strict",
        help="lenient: a digest nonce may come again (real clients send the Unix time in "
        "seconds); strict: never twice for one key.")
    max_body_bytes: int = knob(1_048_576, help="Largest request body; larger is 413.",
                               unit="bytes", maximum=1 << 30)
    # The documents show a transaction's and a payment's status fields as text; the public
    # reference's callback shows numbers. Clients meet both: this answers the other way.
    numeric_statuses: bool = knob(
        False, help="Answer status and status_class as JSON numbers (as the money transfer "
        "callbacks always are), not as text.")
    state_file: Path | None = knob(None, option="--state",
                                   help="Keep state across restarts in this file.")
    # Lifecycle, on the sandbox clock
    quotation_ttl: float = knob(3600.0, help="Seconds a quotation can be used.", unit=SECONDS,
                                timing=True, maximum=LONGEST)
    submit_delay: float = knob(1.0, help="Seconds from CONFIRMED to SUBMITTED.", unit=SECONDS,
                               timing=True, maximum=LONGEST)
    complete_delay: float = knob(
        1.0, help="Seconds from SUBMITTED to COMPLETED (and each later step).", unit=SECONDS,
        timing=True, maximum=LONGEST)
    # Collection service: accounts (sandbox clock). A transfer or payout request, and its
    # entries, wait this long for validation.
    validation_delay: float = knob(
        2.0, help="Seconds before a collection transfer or payout request is validated.",
        unit=SECONDS, timing=True, maximum=LONGEST)
    # Collection service: payment orders and the legacy Pay (sandbox clock, but notifications)
    payment_quotation_ttl: float = knob(
        86400.0, help="Seconds a collection quotation's rate is secured.", unit=SECONDS,
        timing=True, maximum=LONGEST)
    payment_abort_delay: float = knob(
        7200.0, help="Seconds before an abandoned payment page turns Aborted.", unit=SECONDS,
        timing=True, maximum=LONGEST)
    authorization_period: float = knob(
        604800.0, help="Seconds before an uncharged authorization lapses.", unit=SECONDS,
        timing=True, maximum=LONGEST)
    # A ping not answered 2xx is repeated after each of these (10 min, 1 h).
    notification_delays: tuple[float, ...] = knob(
        (600.0, 3600.0), help="Real seconds before each repeat of an unanswered payment "
        "order ping.", unit=REAL_SECONDS, timing=True, metavar="S,S", read=read_delays,
        maximum=LONGEST)
    # Auth: a Date header further off than this is refused
    date_tolerance: float = knob(
        300.0, help="Largest accepted clock difference of the Date header, seconds.",
        unit=REAL_SECONDS, maximum=DAY)
    # Callbacks, real time
    callback_attempts: int = knob(5, help="Deliveries of a callback in all, retries included.",
                                  unit="deliveries", timing=True, maximum=100)
    callback_spacing: float = knob(
        1.0, help="Seconds before the first callback retry; doubles each time.",
        unit=REAL_SECONDS, timing=True, maximum=DAY)
    callback_timeout: float = knob(5.0, help="Seconds a callback receiver has to answer.",
                                   unit=REAL_SECONDS, timing=True, maximum=3600)
    tick: float = knob(0.05, help="Seconds between two applications of due status changes.",
                       unit=REAL_SECONDS, maximum=60)
    # Faults. The options of FaultRule's rates and latency set the "*" rule (from_options).
    faults: dict[str, FaultRule] = knob(
        factory=dict, option="--fault", repeat=True, metavar="GROUP:SETTING=N",
        read=read_setting,
        help="Per endpoint group, e.g. confirm:lost_rate=0.2 (repeatable).")
    slow_seconds: float = knob(30.0, help="Seconds a slow answer is held.", unit=REAL_SECONDS,
                               maximum=3600)
    fault_seed: int | None = knob(None, help="Seed for the fault draws.")
    # Starting balances: currency -> (balance, credit facility)
    balances: dict[str, tuple[Decimal, Decimal]] | None = knob(
        None, option="--balance", repeat=True, metavar="CUR=AMOUNT[:FACILITY]",
        read=read_balance,
        help="Starting balance (repeatable; replaces the default balances).")
    # Demo payment orders at the first start (payment_orders/catalogue.DEMO_ORDERS), for
    # examples of charges, refunds and cancellations that need orders made before them.
    demo_orders: bool = knob(True, help="Make five demo payment orders at the first start.")
    # The documents read a transfer or payout request by its external reference only, and a
    # payment order by id or external id at one path (how the two are told apart is not
    # shown). A provider that matches its own ids there answers another's record to a
    # lookup: this emulates one, for the client's guard against adopting it.
    lookups_match_ids: bool = knob(
        False, help="Lookups of transfer and payout requests by external reference, and of "
        "payment orders by ext-external id, also answer the one whose id it is when none "
        "carries it.")
    log_level: str = knob("warning")

    @classmethod
    def from_options(cls, values: Mapping[str, Any]) -> SandboxConfig:
        """The config the serve options give: one value per option, as ``Knob.read`` or the
        field's type reads it (the repeatable ones as sequences); FaultRule's options, under
        their own names, make the ``*`` rule."""
        star = {name: values[name] for name in star_options() if values.get(name)}
        given = {s.name: values[s.name] for s in settings(cls) if s.name in values}
        given["faults"] = fault_rules(star, values.get("faults", ()))
        given["balances"] = {c: (a, f) for c, a, f in values.get("balances", ())} or None
        return cls(**given)

    @classmethod
    def embedded(cls, **values: Any) -> SandboxConfig:
        """The preset of ``base_url: sandbox``, with ``values`` on top (credentials, state)."""
        return cls(**{**EMBEDDED, **values})


# The runner's embedded sandbox: a free port, and status changes within a second or two, so
# that a run waiting for final statuses ends soon after its last confirm.
EMBEDDED: Mapping[str, Any] = MappingProxyType(
    {"port": 0, "submit_delay": 0.5, "complete_delay": 0.5, "validation_delay": 0.5})


def star_options() -> Iterator[str]:
    """The FaultRule settings that have a serve option of their own (the ``*`` rule's)."""
    return (name for name, s in FAULT_SETTINGS.items() if s.option is not None)


def timing_settings() -> Iterator[Setting]:
    """The knobs ``PATCH /_admin/timing`` changes at run time."""
    return (s for s in settings(SandboxConfig) if s.knob.timing)
