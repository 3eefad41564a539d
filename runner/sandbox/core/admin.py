"""The sandbox's own control API, under ``/_admin`` (outside the provider's ``/v1``).

Unauthenticated, for tests and demos on loopback: move the clock, change faults and timings
at run time, set balances, act as the provider's customer care (a status given to a record
outside the API), and read what was asked of the sandbox (request counts, callback
deliveries). The timings it changes are the knobs of core/config.py marked ``timing``; its
Timing model is made from them, with their bounds. A value out of bounds is refused
(1000999) and changes nothing.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, create_model

from runner.sandbox.core.bounds import Bounded
from runner.sandbox.core.clock import iso
from runner.sandbox.core.config import SandboxConfig, timing_settings
from runner.sandbox.core.errors import JSON, ApiError
from runner.sandbox.core.knobs import Setting, settings
from runner.sandbox.core.routing import DecimalRoute, sandbox

router = APIRouter(prefix="/_admin", route_class=DecimalRoute, tags=["sandbox admin"])
SLOW = next(s for s in settings(SandboxConfig) if s.name == "slow_seconds")


class Strict(Bounded):
    model_config = ConfigDict(extra="forbid")


class Advance(Strict):
    seconds: float = Field(ge=0, allow_inf_nan=False)


def _bounded(s: Setting) -> Any:
    """A knob's type, with its bounds: never negative, at most its ``maximum``."""
    if s.type is int:
        return Annotated[int, Field(ge=0, le=s.knob.maximum)]
    number = Annotated[float, Field(ge=0, le=s.knob.maximum, allow_inf_nan=False)]
    return tuple[number, ...] if s.type == tuple[float, ...] else number  # type: ignore[valid-type]


class Faults(Strict):
    slow_seconds: float | None = Field(default=None, ge=0, le=SLOW.knob.maximum,
                                       allow_inf_nan=False)
    rules: dict[str, dict[str, Any]] = {}


def _timing_model() -> type[BaseModel]:
    """Every timing knob, optional and bounded: a PATCH changes the ones it names."""
    fields: dict[str, Any] = {
        s.name: (_bounded(s) | None,
                 Field(default=None, description=f"{s.knob.help} ({s.knob.unit})"))
        for s in timing_settings()}
    return create_model("Timing", __config__=ConfigDict(extra="forbid"), **fields)


if TYPE_CHECKING:
    Timing = BaseModel
else:
    Timing = _timing_model()


class StatusChange(Strict):
    status: str


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
    try:
        sb.clock.advance(body.seconds)
    except ValueError as exc:
        raise ApiError("1000999", f"seconds: {exc}") from None
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
        return JSON(sb.balances.set(currency, body.balance, body.credit_facility))


@router.post("/customer-care/{table}/{external_id}")
async def customer_care(request: Request, table: str, external_id: str,
                        body: StatusChange) -> JSON:
    """What the provider's customer care does outside the API (the provider documents 20000 ->
    40000 CANCELLED and 70000 -> 80000 REVERSED are "customer care only"): the record of
    ``table`` (transactions, payments, payment_orders, transfer_requests, payout_requests)
    with that external id takes ``status``, with what the status does to the money, and no
    planned status follows. A difference for a reconciliation to find."""
    sb = sandbox(request)
    with sb.store.lock:
        found = sb.store.get(table, f"ext-{external_id}") \
            if table in sb.lifecycle.appliers else None
        if found is None:
            raise ApiError("1000404", f"no {table} record {external_id}", status=404)
        sb.store.meta[table][found["id"]]["due"] = None  # its plan ends here
        sb.lifecycle.set_status(table, found["id"], body.status)
        return JSON(dict(sb.store.tables[table][found["id"]]))


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
