"""Wires the sandbox together: state, clock, lifecycle, callbacks, faults, auth, routers.

Errors are answered in the provider's body everywhere: a wrong type or missing field is 1000999
naming the field, an unknown path is 1000404, anything unexpected is 1009001.
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

from runner import __version__
from runner.sandbox import (
    accounts,
    admin,
    collection,
    ledger,
    legacy,
    merchant_payment,
    money_transfer,
    onboarding,
)
from runner.sandbox.auth import Authenticator
from runner.sandbox.callbacks import CallbackQueue
from runner.sandbox.clock import SandboxClock
from runner.sandbox.config import SandboxConfig
from runner.sandbox.errors import (
    JSON,
    ApiError,
    collection_invalid,
    error_response,
    is_collection,
)
from runner.sandbox.faults import FaultState, ProviderMiddleware
from runner.sandbox.lifecycle import Lifecycle
from runner.sandbox.payment_orders import PaymentOrders
from runner.sandbox.store import Store


class Sandbox:
    """Everything one running sandbox holds; routers reach it through ``app.state``."""

    def __init__(self, config: SandboxConfig, clock: SandboxClock | None = None) -> None:
        self.config = config
        self.clock = clock or SandboxClock()
        self.store = Store(config.balances, config.state_file)
        self.clock.advance(self.store.clock_offset)  # a restart never turns the clock back
        self.store.clock = self.clock
        self.callbacks = CallbackQueue(config)
        self.lifecycle = Lifecycle(self.store, self.clock, config, self.callbacks)
        self.faults = FaultState(config.faults, config.slow_seconds, config.fault_seed)
        self.auth = Authenticator(config, self.store)
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
                  docs_url=None, redoc_url=None, openapi_url="/openapi.json")
    app.state.sandbox = sb

    @app.get("/ping", tags=["health"])
    async def ping() -> JSON:
        return JSON({"status": "up"})

    app.include_router(money_transfer.router)
    app.include_router(merchant_payment.router)
    app.include_router(collection.router)
    app.include_router(accounts.router)
    app.include_router(onboarding.router)
    app.include_router(legacy.router)
    app.include_router(admin.router)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSON:
        return error_response(exc)  # type: ignore[return-value]

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSON:
        first = exc.errors()[0]
        field = _field(tuple(first.get("loc", ())))
        if first.get("type") == "json_invalid":
            field = "body"
        if is_collection(request.url.path):  # document 1 has codes of its own
            return error_response(collection_invalid(  # type: ignore[return-value]
                str(first.get("type")), field, str(first.get("msg"))))
        return error_response(ApiError("1000999", f"{field}: {first.get('msg')}"))  # type: ignore[return-value]

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSON:
        if request.url.path.startswith(legacy.PREFIX):
            return legacy.http_error(request, exc.status_code)  # type: ignore[return-value]
        if exc.status_code == 405 and is_collection(request.url.path):
            return error_response(ApiError("1000400", "method not allowed", status=405))  # type: ignore[return-value]
        if exc.status_code == 405:
            return error_response(ApiError("1000999", "method not allowed", status=405))  # type: ignore[return-value]
        return error_response(ApiError("1000404", request.url.path))  # type: ignore[return-value]

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSON:
        if request.url.path.startswith(legacy.PREFIX):
            return legacy.http_error(request, 500)  # type: ignore[return-value]
        if is_collection(request.url.path):
            return error_response(ApiError("1000500"))  # type: ignore[return-value]
        return error_response(ApiError("1009001"))  # type: ignore[return-value]

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.add_middleware(ProviderMiddleware, faults=sb.faults, auth=sb.auth)
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
    schema["components"].setdefault("schemas", {}).update(legacy.openapi_schemas())
    for path, ops in schema["paths"].items():
        if not path.startswith("/_admin"):
            # Document 1 and the legacy Pay take Basic only.
            basic_only = is_collection(path) or path.startswith(legacy.PREFIX)
            for op in ops.values():
                op["security"] = [{"basic": []}] if basic_only else [{"basic": []}, {"digest": []}]
    app.openapi_schema = schema
    return schema
