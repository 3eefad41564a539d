"""The sandbox's own control API, under ``/_admin`` (outside the provider's ``/v1``).

Unauthenticated, for tests and demos on loopback: move the clock, change faults and timings
at run time, set balances, and read what was asked of the sandbox (request counts, callback
deliveries).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from runner.sandbox.clock import iso
from runner.sandbox.errors import JSON, ApiError
from runner.sandbox.routing import DecimalRoute, sandbox

router = APIRouter(prefix="/_admin", route_class=DecimalRoute, tags=["sandbox admin"])


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Advance(Strict):
    seconds: float


class Faults(Strict):
    slow_seconds: float | None = None
    rules: dict[str, dict[str, Any]] = {}


class Timing(Strict):
    quotation_ttl: float | None = None
    submit_delay: float | None = None
    complete_delay: float | None = None
    callback_attempts: int | None = None
    callback_spacing: float | None = None
    callback_timeout: float | None = None
    # collection service: payment orders, operations, notifications
    payment_quotation_ttl: float | None = None
    payment_abort_delay: float | None = None
    authorization_period: float | None = None
    notification_delays: tuple[float, ...] | None = None
    # collection service: accounts (transfer and payout requests)
    validation_delay: float | None = None


class BalanceSetting(Strict):
    balance: Decimal
    credit_facility: Decimal | None = None


@router.get("/clock")
async def clock(request: Request) -> JSON:
    c = sandbox(request).clock
    return JSON({"now": iso(c.now()), "offset": c.offset})


@router.post("/clock/advance")
async def advance(request: Request, body: Advance) -> JSON:
    sb = sandbox(request)
    if body.seconds < 0:
        raise ApiError("1000999", "seconds must not be negative")
    sb.clock.advance(body.seconds)
    applied = sb.lifecycle.advance()
    return JSON({"now": iso(sb.clock.now()), "offset": sb.clock.offset, "applied": applied})


@router.get("/faults")
async def faults(request: Request) -> JSON:
    return JSON(sandbox(request).faults.describe())


@router.post("/faults")
async def change_faults(request: Request, body: Faults) -> JSON:
    state = sandbox(request).faults
    try:
        state.set_rules(body.rules)
    except (TypeError, ValueError) as exc:
        raise ApiError("1000999", str(exc)) from None
    if body.slow_seconds is not None:
        state.slow_seconds = body.slow_seconds
    return JSON(state.describe())


@router.delete("/faults")
async def clear_faults(request: Request) -> JSON:
    state = sandbox(request).faults
    state.clear()
    return JSON(state.describe())


def _timing(request: Request) -> dict[str, Any]:
    c = sandbox(request).config
    return {name: getattr(c, name) for name in Timing.model_fields}


@router.get("/timing")
async def timing(request: Request) -> JSON:
    return JSON(_timing(request))


@router.patch("/timing")
async def change_timing(request: Request, body: Timing) -> JSON:
    config = sandbox(request).config
    for name, value in body.model_dump(exclude_none=True).items():
        setattr(config, name, value)
    return JSON(_timing(request))


@router.put("/balances/{currency}")
async def set_balance(request: Request, currency: str, body: BalanceSetting) -> JSON:
    sb = sandbox(request)
    with sb.store.lock:
        b = sb.store.balances.setdefault(currency, {
            "id": len(sb.store.balances) + 1, "currency": currency, "balance": Decimal(0),
            "pending": Decimal(0), "credit_facility": Decimal(0)})
        b["balance"] = body.balance
        if body.credit_facility is not None:
            b["credit_facility"] = body.credit_facility
        sb.store.save_balance(currency)
        return JSON(sb.lifecycle.balance_view(currency))


@router.get("/requests")
async def requests_seen(request: Request, latest: int | None = None) -> JSON:
    """Counts, peak, and the latest calls (all that are kept, or the ``latest`` N)."""
    f = sandbox(request).faults
    recent = list(f.recent)
    if latest is not None:
        recent = recent[-latest:] if latest > 0 else []
    return JSON({"counts": dict(f.counts), "recent": recent,
                 "peak_in_flight": f.peak_in_flight})


@router.delete("/requests")
async def forget_requests(request: Request) -> JSON:
    sandbox(request).faults.forget()
    return JSON({"counts": {}})


@router.get("/callbacks")
async def callbacks(request: Request) -> JSON:
    q = sandbox(request).callbacks
    return JSON({"pending": q.pending(), "deliveries": list(q.log)})
