"""What every router shares: exact-decimal request bodies within bounds, route order, the
sandbox handle."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any

from fastapi import Request, Response
from fastapi.routing import APIRoute, APIRouter

from runner.sandbox.core.bounds import read_json

if TYPE_CHECKING:
    from runner.sandbox.app import Sandbox


class DecimalRequest(Request):
    """Parses JSON numbers as Decimal, so an amount is never a binary float on its way in;
    a body outside core/bounds.py's limits is refused (BodyRefused) before any model sees
    it."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = read_json(await self.body())
        return self._json


class DecimalRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(DecimalRequest(request.scope, request.receive))

        return route


def busy_first(router: APIRouter, *paths: str) -> None:
    """Move the routes of ``paths`` (under the router's prefix) to the front. FastAPI tries a
    request against the routes one by one, in order, and each try costs: the calls a batch
    makes for every item are found first, the catalogue's after. No two routes of a service
    match the same path, so the order changes nothing else."""
    wanted = {router.prefix + p for p in paths}
    busy = [r for r in router.routes if getattr(r, "path", None) in wanted]
    if len(busy) != len(wanted):
        raise ValueError(f"no route for some of {sorted(wanted)}")
    router.routes[:] = busy + [r for r in router.routes if r not in busy]


def sandbox(request: Request) -> Sandbox:
    return request.app.state.sandbox  # type: ignore[no-any-return]


@contextlib.contextmanager
def current(request: Request) -> Iterator[Sandbox]:
    """The sandbox with the status changes now due applied, under its store's lock: what a
    call reads or changes is one consistent state, as of now on the sandbox clock."""
    sb = sandbox(request)
    with sb.store.lock:
        sb.lifecycle.advance()
        yield sb
