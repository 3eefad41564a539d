"""The sandbox: a faithful emulator of the provider's HTTP APIs, served over real HTTP.

It is the default target of job files (``base_url: sandbox``) and what every test talks
to. Its parts: ``config`` (every knob), ``catalogue`` (the deterministic services, payers,
payment methods and balances), ``store`` (in-memory state, optionally journalled to a
file), ``pricing`` (quotations in Decimal), ``lifecycle`` (status changes on the sandbox
clock, with test triggers), ``callbacks`` (signed, retried deliveries), ``faults``
(latency, errors, lost answers), ``auth``, the routers (``money_transfer``,
``merchant_payment``, ``collection``, ``legacy``, ``accounts``, ``onboarding``, ``admin``),
``payment_orders`` (the collection service's orders and operations, with
``payment_catalogue`` and ``payment_schemas``), ``ledger`` (accounts, entries and their four
balances, with ``account_schemas``), ``app`` (wires them) and ``server`` (uvicorn, in the
foreground or in a thread).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runner.sandbox.config import SandboxConfig

if TYPE_CHECKING:
    from runner.sandbox.server import RunningSandbox, serve, start_in_thread

__all__ = ["RunningSandbox", "SandboxConfig", "serve", "start_in_thread"]


def __getattr__(name: str) -> Any:
    # The server (FastAPI, uvicorn) is imported when first asked for, so that a run against
    # a real provider, or the command line's start-up, does not pay for it.
    if name in ("RunningSandbox", "serve", "start_in_thread"):
        from runner.sandbox import server

        return getattr(server, name)
    raise AttributeError(name)
