"""``runner sandbox``: serve the provider emulator."""

from __future__ import annotations

from dataclasses import fields
from decimal import Decimal, InvalidOperation
from pathlib import Path

import click

from runner.sandbox.config import FaultRule, SandboxConfig


@click.group()
def sandbox() -> None:
    """The embedded provider sandbox."""


def _fault(value: str) -> tuple[str, str, float]:
    try:
        group, _, setting = value.partition(":")
        name, _, number = setting.partition("=")
        return group, name, float(number)
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected GROUP:SETTING=NUMBER") from None


def _balance(value: str) -> tuple[str, Decimal, Decimal]:
    try:
        currency, _, amounts = value.partition("=")
        amount, _, facility = amounts.partition(":")
        return currency.upper(), Decimal(amount), Decimal(facility or "0")
    except InvalidOperation:
        raise click.BadParameter(f"{value!r}: expected CUR=AMOUNT[:CREDIT_FACILITY]") from None


def _delays(value: str | tuple[float, ...]) -> tuple[float, ...]:
    if isinstance(value, tuple):
        return value
    try:
        delays = tuple(float(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected seconds separated by commas") from None
    if any(d < 0 for d in delays):
        raise click.BadParameter(f"{value!r}: delays must not be negative")
    return delays


@sandbox.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True, type=int)
@click.option("--api-key", envvar="RUNNER_API_KEY", default="sandbox-key", show_default=True)
@click.option("--api-secret", envvar="RUNNER_API_SECRET", default="sandbox-secret",
              show_default=False, help="Default: sandbox-secret, or $RUNNER_API_SECRET.")
@click.option("--header-brand", default="Svc", show_default=True,
              help="Brand in the digest header names: X-<Brand>-apikey ...")
@click.option("--state", "state_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Keep state across restarts in this file.")
@click.option("--quotation-ttl", default=3600.0, show_default=True, help="Seconds.")
@click.option("--submit-delay", default=1.0, show_default=True,
              help="Seconds from CONFIRMED to SUBMITTED.")
@click.option("--complete-delay", default=1.0, show_default=True,
              help="Seconds from SUBMITTED to COMPLETED (and each later step).")
@click.option("--validation-delay", default=2.0, show_default=True,
              help="Seconds before a collection transfer or payout request is validated.")
@click.option("--payment-quotation-ttl", default=86400.0, show_default=True,
              help="Seconds a collection quotation's rate is secured.")
@click.option("--payment-abort-delay", default=7200.0, show_default=True,
              help="Seconds before an abandoned payment page turns Aborted.")
@click.option("--authorization-period", default=604800.0, show_default=True,
              help="Seconds before an uncharged authorization lapses.")
@click.option("--notification-delays", default="600,3600", show_default=True,
              metavar="S,S", type=_delays,
              help="Real seconds before each repeat of an unanswered payment order ping.")
@click.option("--date-tolerance", default=300.0, show_default=True,
              help="Largest accepted clock difference of the Date header, seconds.")
@click.option("--callback-attempts", default=5, show_default=True)
@click.option("--callback-spacing", default=1.0, show_default=True,
              help="Seconds before the first callback retry; doubles each time.")
@click.option("--latency-ms", default=0.0, help="Added to every provider call.")
@click.option("--error-rate", default=0.0, help="Share of calls answered 500 (nothing done).")
@click.option("--unavailable-rate", default=0.0, help="Share answered 503, retry later.")
@click.option("--lost-rate", default=0.0, help="Share whose answer is lost after the work.")
@click.option("--slow-rate", default=0.0, help="Share answered after --slow-seconds.")
@click.option("--slow-seconds", default=30.0, show_default=True)
@click.option("--fault", "faults", multiple=True, metavar="GROUP:SETTING=N",
              help="Per endpoint group, e.g. confirm:lost_rate=0.2 (repeatable).")
@click.option("--fault-seed", type=int, help="Seed for the fault draws.")
@click.option("--balance", "balances", multiple=True, metavar="CUR=AMOUNT[:FACILITY]",
              help="Starting balance (repeatable; replaces the default balances).")
@click.option("--demo-orders/--no-demo-orders", default=True, show_default=True,
              help="Make five demo payment orders at the first start.")
@click.option("--log-level", default="warning", show_default=True)
def serve(**opts: object) -> None:
    """Serve every provider endpoint on one server until interrupted.

    \b
    Example:
      runner sandbox serve --port 8765 --latency-ms 20 --fault confirm:lost_rate=0.1
    """
    from runner.sandbox.faults import GROUPS
    from runner.sandbox.server import serve as run

    rules: dict[str, FaultRule] = {}
    star = {k: opts[k] for k in ("latency_ms", "error_rate", "unavailable_rate", "lost_rate",
                                 "slow_rate") if opts[k]}
    if star:
        rules["*"] = FaultRule(**star)  # type: ignore[arg-type]
    for group, name, number in map(_fault, opts["faults"]):  # type: ignore[call-overload]
        if group != "*" and group not in GROUPS:
            raise click.BadParameter(f"unknown endpoint group {group!r}", param_hint="--fault")
        base = rules.get(group, FaultRule(**star))  # type: ignore[arg-type]
        if name not in {f.name for f in fields(FaultRule)}:
            raise click.BadParameter(f"unknown fault setting {name!r}", param_hint="--fault")
        setattr(base, name, int(number) if name.endswith("_next") else number)
        rules[group] = base
    balances = {c: (a, f) for c, a, f in map(_balance, opts["balances"])}  # type: ignore[call-overload]
    config = SandboxConfig(
        host=str(opts["host"]), port=int(opts["port"]),  # type: ignore[call-overload]
        api_key=str(opts["api_key"]), api_secret=str(opts["api_secret"]),
        header_brand=str(opts["header_brand"]), state_file=opts["state_file"],  # type: ignore[arg-type]
        quotation_ttl=opts["quotation_ttl"], submit_delay=opts["submit_delay"],  # type: ignore[arg-type]
        complete_delay=opts["complete_delay"],  # type: ignore[arg-type]
        validation_delay=opts["validation_delay"],  # type: ignore[arg-type]
        date_tolerance=opts["date_tolerance"],  # type: ignore[arg-type]
        payment_quotation_ttl=opts["payment_quotation_ttl"],  # type: ignore[arg-type]
        payment_abort_delay=opts["payment_abort_delay"],  # type: ignore[arg-type]
        authorization_period=opts["authorization_period"],  # type: ignore[arg-type]
        notification_delays=opts["notification_delays"],  # type: ignore[arg-type]
        callback_attempts=opts["callback_attempts"],  # type: ignore[arg-type]
        callback_spacing=opts["callback_spacing"],  # type: ignore[arg-type]
        faults=rules, slow_seconds=opts["slow_seconds"],  # type: ignore[arg-type]
        fault_seed=opts["fault_seed"], balances=balances or None,  # type: ignore[arg-type]
        log_level=str(opts["log_level"]), demo_orders=bool(opts["demo_orders"]),
    )
    click.echo(f"sandbox serving on http://{config.host}:{config.port} "
               f"(brand {config.header_brand})", err=True)
    run(config)
