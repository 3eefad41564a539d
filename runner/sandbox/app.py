"""Wires the sandbox together: the shared machinery (core/) and one package per service, as
moto's backends and server wire its services.

Errors are answered in each family's words (core/errors.py's dialects): a wrong type or
missing field, or a body outside core/bounds.py's limits, is 1000999 naming the field
(2001101 in document 1), an unknown path is 1000404, anything unexpected is 1009001 (1000500;
the legacy Pay's ReturnCodes on /Rest/), answered by core/guard.py, which every request
meets first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException
from starlette.responses import Response

from runner import __version__
from runner.sandbox.accounts import models as ledger
from runner.sandbox.accounts.responses import router as accounts
from runner.sandbox.core import admin
from runner.sandbox.core.auth import Authenticator
from runner.sandbox.core.bounds import BodyRefused
from runner.sandbox.core.callbacks import CallbackQueue
from runner.sandbox.core.clock import SandboxClock
from runner.sandbox.core.config import SandboxConfig
from runner.sandbox.core.errors import (
    COLLECTION,
    JSON,
    ApiError,
    Dialect,
    dialect_of,
    error_response,
)
from runner.sandbox.core.faults import FaultState
from runner.sandbox.core.guard import Guard
from runner.sandbox.core.lifecycle import Lifecycle
from runner.sandbox.core.middleware import ProviderMiddleware
from runner.sandbox.core.store import Store
from runner.sandbox.legacy_pay.exceptions import LEGACY
from runner.sandbox.legacy_pay.responses import router as legacy_pay
from runner.sandbox.legacy_pay.schemas import openapi_schemas as legacy_schemas
from runner.sandbox.merchant_payment import catalogue as merchant_catalogue
from runner.sandbox.merchant_payment import models as merchant_payment
from runner.sandbox.merchant_payment.responses import router as merchant_payments
from runner.sandbox.money_transfer import catalogue as transfer_catalogue
from runner.sandbox.money_transfer import models as money_transfer
from runner.sandbox.money_transfer.responses import router as money_transfers
from runner.sandbox.onboarding.responses import router as onboarding
from runner.sandbox.payment_orders.models import PaymentOrders
from runner.sandbox.payment_orders.responses import router as payment_orders

# Families of paths with words of their own; the rest speak the provider's (documents 2, 3A).
DIALECTS = (LEGACY, COLLECTION)
ROUTERS = (money_transfers, merchant_payments, payment_orders, accounts, onboarding,
           legacy_pay, admin.router)


class Sandbox:
    """Everything one running sandbox holds; routers reach it through ``app.state``."""

    def __init__(self, config: SandboxConfig, clock: SandboxClock | None = None) -> None:
        self.config = config
        self.clock = clock or SandboxClock()
        balances = config.balances
        self.store = Store(transfer_catalogue.BALANCES if balances is None else balances,
                           merchant_catalogue.BALANCES, config.state_file)
        self.clock.advance(self.store.clock_offset)  # a restart never turns the clock back
        self.store.clock = self.clock
        self.callbacks = CallbackQueue(config)
        self.lifecycle = Lifecycle(self.store, self.clock, config)
        self.faults = FaultState(config.faults, config.slow_seconds, config.fault_seed,
                                 clock=self.clock.now)
        self.auth = Authenticator(config, self.store)
        self.balances = money_transfer.Balances(self.store)
        money_transfer.FLOW.attach(self.lifecycle, self.callbacks, self.balances.settle)
        merchant_payment.FLOW.attach(self.lifecycle, self.callbacks,
                                     merchant_payment.settler(self.store))
        self.payment_orders = PaymentOrders(self.store, self.clock, config, self.callbacks,
                                            self.lifecycle)
        ledger.attach(self.lifecycle)  # collection accounts: catalogue seed, validations
        if config.demo_orders:
            self.payment_orders.seed()  # demo orders of the catalogue's merchant

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(self.config.tick)
            self.lifecycle.advance()


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    return ".".join(parts) or "body"


def build_app(config: SandboxConfig, clock: SandboxClock | None = None) -> FastAPI:
    sb = Sandbox(config, clock)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sb.callbacks.start()
        ticker = asyncio.create_task(sb.tick())
        try:
            yield
        finally:
            ticker.cancel()
            sb.callbacks.stop()
            sb.store.compact()

    app = FastAPI(title="runner sandbox", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url="/openapi.json",
                  redirect_slashes=False)  # core/guard.py serves ``path/`` as ``path``
    app.state.sandbox = sb

    @app.get("/ping", tags=["health"])
    async def ping() -> JSON:
        return JSON({"status": "up"})

    for router in ROUTERS:
        app.include_router(router)

    def words(request: Request) -> tuple[Dialect, str | None]:
        """The dialect of the request's path, and its content type (the legacy Pay answers
        in the request's format)."""
        return dialect_of(DIALECTS, request.url.path), request.headers.get("content-type")

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0]
        field = _field(tuple(first.get("loc", ())))
        if first.get("type") == "json_invalid":
            field = "body"
        dialect, kind = words(request)
        return dialect.invalid(kind, str(first.get("type")), field, str(first.get("msg")))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        dialect, kind = words(request)
        if isinstance(exc, BodyRefused):
            return dialect.invalid(kind, exc.kind, exc.field, exc.problem)
        if exc.status_code == 400:  # a body FastAPI could not read
            return dialect.invalid(kind, "json_invalid", "body", "the body cannot be read")
        return dialect.http_error(kind, request.url.path, exc.status_code)

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.add_middleware(ProviderMiddleware, faults=sb.faults, auth=sb.auth, dialects=DIALECTS)
    # Added last, so outermost: it sees every request first and every answer last.
    app.add_middleware(Guard, dialects=DIALECTS, max_body_bytes=config.max_body_bytes)
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, routes=app.routes,
                         description="Emulator of the provider's money transfer, merchant "
                                     "payment and collection services and of the legacy Pay. "
                                     "Every path outside /_admin requires authentication: "
                                     "Basic or digest (HMAC); the collection service "
                                     "(/v1/payment, /v1/account, /v1/onboarding) and the "
                                     "legacy Pay (/Rest) take Basic only.")
    brand = app.state.sandbox.config.header_brand
    schema.setdefault("components", {})["securitySchemes"] = {
        "basic": {"type": "http", "scheme": "basic"},
        "digest": {"type": "apiKey", "in": "header", "name": f"X-{brand}-hmac",
                   "description": f"Base64 HMAC-SHA-256 of apikey + nonce + Date, keyed with the "
                                  f"API secret; with X-{brand}-apikey, X-{brand}-nonce and Date"},
    }
    schema["components"].setdefault("schemas", {}).update(legacy_schemas())
    for path, ops in schema["paths"].items():
        if not path.startswith("/_admin"):
            # Document 1 and the legacy Pay take Basic only.
            basic_only = dialect_of(DIALECTS, path).basic_only
            for op in ops.values():
                op["security"] = [{"basic": []}] if basic_only else [{"basic": []}, {"digest": []}]
    app.openapi_schema = schema
    return schema
