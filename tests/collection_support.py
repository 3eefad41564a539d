"""Helpers for the tests of the collection kinds (payment_order, charge, refund, cancel): job
files for a loopback sandbox, orders made straight at the sandbox, what the sandbox (not the
runner) holds, and ``runner run`` as a subprocess that a test may kill.

Job files are written as JSON, which is YAML too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from conftest import KEY, PATIENCE, SECRET, Admin, Api, body, ending

from runner.sandbox import RunningSandbox

PAY = "/v1/payment"
ORDERS = f"{PAY}/payment-orders"
ROOT = Path(__file__).resolve().parent.parent
URLS = {"aborted_url": "https://shop.example/aborted", "error_url": "https://shop.example/error",
        "return_url": "https://shop.example/return",
        "notification_url": "https://shop.example/notify"}
CARD = {"card_number": "4111111111111111", "card_cvv": "123", "card_expiration_month": "12",
        "card_expiration_year": "2099", "card_holder_name": "Ada Lovelace"}
REFUSED_CARD, ERROR_CARD, UNAVAILABLE_CARD = ("4000000000000002", "4000000000000119",
                                              "4000000000000259")


def write_job(folder: Path, sandbox: RunningSandbox, kind: str, rows: list[dict[str, Any]],
              template: dict[str, Any], *, name: str = "col-2026-11",
              external_id: str = "{{ row.id }}", defaults: dict[str, Any] | None = None,
              concurrency: int = 2, wait: str = "2s", attempts: int = 3,
              timeout: str = "60s", file: str = "job.yaml",
              run: dict[str, Any] | None = None) -> Path:
    job = {
        "version": 1, "name": name, "kind": kind,
        "provider": {"base_url": sandbox.url, "auth": "basic", "api_key": KEY,
                     "api_secret": SECRET, "timeout": timeout},
        "defaults": defaults or {},
        "items": {"rows": rows, "external_id": external_id, "template": template},
        "run": {"concurrency": concurrency, "wait_for_final": wait,
                "retry": {"attempts": attempts, "max_wait": "50ms"}, **(run or {})},
    }
    path = folder / file
    path.write_text(json.dumps(job, indent=1), encoding="utf-8")
    return path


# ---------------------------------------------------------------- at the sandbox
def order_body(external_id: str, amount: str = "50.00", page: str = "card-eur",
               currency: str = "EUR", **extra: Any) -> dict[str, Any]:
    info: dict[str, Any] = dict(CARD)
    if page == "wallet-kes":
        info = {"msisdn": "+254700100200"}
    elif page == "openbanking-eur":
        info = {"bank_id": "BNPAFRPP"}
    elif page == "bnpl-eur":
        info = {"email": "ada@example.com"}
        extra.setdefault("merchant_order", {
            "customer": {"first_name": "Ada", "last_name": "Lovelace",
                         "email": "ada@example.com"},
            "billing_address": {"address_line_1": "1 Rue de la Paix", "city": "Paris",
                                "zip_code": "75002", "country_iso_code": "FRA"}})
    return {"type": "C2B", "external_id": external_id, "merchant_id": "MER0001",
            "requested": {"amount": Decimal(amount), "currency": currency},
            "payment_page_id": page, "integration_mode": "HOST_TO_HOST",
            "merchant_urls": dict(URLS), "payment_information": info, **extra}


def create_order(sandbox: RunningSandbox, external_id: str, amount: str = "50.00",
                 **kw: Any) -> dict[str, Any]:
    answer = Api(sandbox.url, (KEY, SECRET)).post(ORDERS, order_body(external_id, amount, **kw))
    assert answer.status_code == 201, answer.text
    return body(answer)  # type: ignore[no-any-return]


def order_at(sandbox: RunningSandbox, ref: str) -> dict[str, Any]:
    answer = Api(sandbox.url, (KEY, SECRET)).get(f"{ORDERS}/{ref}")
    assert answer.status_code == 200, answer.text
    return body(answer)  # type: ignore[no-any-return]


def orders(sandbox: RunningSandbox) -> dict[str, dict[str, Any]]:
    """The sandbox's payment orders by external id (an external id is never used twice)."""
    store = sandbox.state.store
    with store.lock:
        return {o["external_id"]: dict(o) for o in store.tables["payment_orders"].values()}


def order_counts(sandbox: RunningSandbox) -> Counter[str]:
    store = sandbox.state.store
    with store.lock:
        return Counter(o["external_id"] for o in store.tables["payment_orders"].values())


def quotations(sandbox: RunningSandbox) -> list[str]:
    store = sandbox.state.store
    with store.lock:
        return sorted(q["external_id"] for q in store.tables["cquotations"].values())


def operations(sandbox: RunningSandbox) -> list[dict[str, Any]]:
    store = sandbox.state.store
    with store.lock:
        return [dict(op) for _, op in sorted(store.tables["operations"].items())]


def posts(admin: Admin, group: str) -> int:
    return int(admin.requests()["counts"].get(f"POST {group}", 0))


# ---------------------------------------------------------------- runner as a process
def runner_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def run_process(job: Path, state: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "runner", "run", str(job), "--yes",
                             "--state", str(state)], cwd=job.parent,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=runner_env())


def kill_when(proc: subprocess.Popen[bytes], ready: Callable[[], bool]) -> None:
    """SIGKILL ``proc`` as soon as ``ready()`` (checked every few milliseconds) holds (and
    whatever happens: should the moment never come, the test fails with ``proc`` ended)."""
    with ending(proc):
        deadline = time.monotonic() + PATIENCE
        while not ready():
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "the moment to kill never came"
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL


def run_to_end(job: Path, state: Path) -> int:
    with ending(run_process(job, state)) as proc:
        return proc.wait(timeout=PATIENCE)
