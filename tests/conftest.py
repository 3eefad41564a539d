"""Fixtures: a real sandbox on a free loopback port, in a thread, per test, and small HTTP
helpers to talk to it. Timings are shrunk so nothing waits for real more than milliseconds.

No test bounds how long anything takes: a busy machine may be slow. ``PATIENCE`` is how long
a test waits for a process or a condition before it calls it hung; ``ending`` ends a
process a test starts, whatever happens."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests
import simplejson
from notification_receiver import Receiver
from pg_support import Cluster

from runner.provider.auth import DigestAuth
from runner.sandbox import RunningSandbox, SandboxConfig, start_in_thread
from runner.sandbox.core.clock import SandboxClock

KEY, SECRET = "test-key", "test-secret"
PATIENCE = 120.0  # seconds: a wait for what should come at once, never a measure of speed
# A money transfer quotation of 100.00 EUR to payer 1 (M-Wallet Kenya).
QUOTATION = {"external_id": "q-1", "payer_id": 1, "mode": "SOURCE_AMOUNT",
             "source": {"country_iso_code": "FRA", "currency": "EUR",
                        "amount": Decimal("100.00")},
             "destination": {"currency": "KES"}}


class Api:
    """A thin test client: JSON in, exact decimals out, no retries."""

    def __init__(self, base: str, auth: Any, timeout: float = 60.0) -> None:
        self.base = base
        self.session = requests.Session()
        self.session.auth = auth
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, **kw: Any) -> requests.Response:
        data = None if body is None else simplejson.dumps(body, use_decimal=True)
        headers = {"Content-Type": "application/json"} if data is not None else {}
        kw.setdefault("timeout", self.timeout)
        return self.session.request(method, self.base + path, data=data, headers=headers, **kw)

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.call("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> requests.Response:
        return self.call("POST", path, body, **kw)


def body(response: requests.Response) -> Any:
    return simplejson.loads(response.content, use_decimal=True)


def error_of(response: requests.Response) -> tuple[int, str]:
    """(HTTP status, provider code) of an error answer."""
    return response.status_code, body(response)["errors"][0]["code"]


class Admin:
    def __init__(self, base: str) -> None:
        self.api = Api(base + "/_admin", None)

    def advance(self, seconds: float) -> Any:
        return body(self.api.post("/clock/advance", {"seconds": seconds}))

    def faults(self, rules: dict[str, dict[str, Any]], slow_seconds: float | None = None) -> Any:
        payload: dict[str, Any] = {"rules": rules}
        if slow_seconds is not None:
            payload["slow_seconds"] = slow_seconds
        return body(self.api.post("/faults", payload))

    def timing(self, **values: Any) -> Any:
        return body(self.api.call("PATCH", "/timing", values))

    def balance(self, currency: str, amount: str, facility: str | None = None) -> Any:
        payload: dict[str, Any] = {"balance": Decimal(amount)}
        if facility is not None:
            payload["credit_facility"] = Decimal(facility)
        return body(self.api.call("PUT", f"/balances/{currency}", payload))

    def requests(self) -> Any:
        return body(self.api.get("/requests"))

    def callbacks(self) -> Any:
        return body(self.api.get("/callbacks"))

    def deliveries(self, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The delivery log once it holds ``count`` entries and nothing waits: a delivery is
        logged after its answer, so a receiver may see a request before the log does."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.callbacks()
            log: list[dict[str, Any]] = seen["deliveries"]
            if len(log) >= count and seen["pending"] == 0:
                return log
            assert time.monotonic() < deadline, f"{len(log)} of {count} deliveries logged"
            time.sleep(0.005)


def test_config(**overrides: Any) -> SandboxConfig:
    values: dict[str, Any] = dict(port=0, api_key=KEY, api_secret=SECRET, tick=0.005,
                                  submit_delay=60.0, complete_delay=60.0,
                                  callback_spacing=0.005, callback_timeout=30.0,
                                  demo_orders=False)
    values.update(overrides)
    return SandboxConfig(**values)


@pytest.fixture(scope="session")
def stopping() -> Iterator[list[RunningSandbox]]:
    """Sandboxes asked to stop; joined once at the end instead of after every test."""
    finished: list[RunningSandbox] = []
    yield finished
    for sb in finished:
        sb.stop()


@contextlib.contextmanager
def ending(process: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """``process`` for the block; when it is left, however, the process is killed if it is
    still running, its pipes are closed and its end is waited for."""
    with process:
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()


def still_clock() -> SandboxClock:
    """A sandbox clock that stands still but for ``advance``: what a test counts on it
    (a rate limit's allowance, a delay) does not move with a machine's load."""
    start = time.time()
    return SandboxClock(source=lambda: start)


@pytest.fixture
def sandbox_factory(stopping: list[RunningSandbox]) -> Iterator[Callable[..., RunningSandbox]]:
    started: list[RunningSandbox] = []

    def make(clock: SandboxClock | None = None, **overrides: Any) -> RunningSandbox:
        """A sandbox of ``test_config(**overrides)``; ``clock``: its clock (by default real
        time, moved on by ``admin.advance``)."""
        sb = start_in_thread(test_config(**overrides), clock)
        started.append(sb)
        return sb

    yield make
    for sb in started:
        sb.stop(wait=False)
    stopping.extend(started)


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    """Status changes wait 60 s on the sandbox clock: tests move it with ``admin.advance``."""
    return sandbox_factory()


@pytest.fixture
def api(sandbox: RunningSandbox) -> Api:
    return Api(sandbox.url, (KEY, SECRET))


@pytest.fixture
def hmac_api(sandbox: RunningSandbox) -> Api:
    return Api(sandbox.url, DigestAuth(KEY, SECRET))


@pytest.fixture
def admin(sandbox: RunningSandbox) -> Admin:
    return Admin(sandbox.url)


@pytest.fixture(autouse=True)
def own_logging() -> Iterator[None]:
    """`runner run` points the "runner" logger at its stderr; put it back afterwards."""
    logger = logging.getLogger("runner")
    handlers, level = logger.handlers[:], logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


@pytest.fixture
def sb(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    """A sandbox whose confirmed items move on its next tick (engine tests)."""
    return sandbox_factory(submit_delay=0, complete_delay=0)


@pytest.fixture
def adm(sb: RunningSandbox) -> Admin:
    return Admin(sb.url)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """Where a test's state database goes."""
    return tmp_path / "s.sqlite"


@pytest.fixture
def receivers() -> Iterator[Callable[..., Receiver]]:
    """Partner endpoints for callbacks and notifications, closed after the test."""
    made: list[Receiver] = []

    def make(script: list[int] | None = None) -> Receiver:
        made.append(Receiver(script))
        return made[-1]

    yield make
    for r in made:
        r.close()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """One throwaway PostgreSQL server for the whole session (``pg_support``); never skipped:
    without PostgreSQL's binaries it fails."""
    cluster = Cluster()
    yield cluster
    cluster.remove()


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """A new, empty database of the session's server, for one test: its URL."""
    return pg_cluster.new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a test's state is: a new SQLite file, or a new PostgreSQL database (its URL)."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    return tmp_path / "state" / "runner.sqlite"
