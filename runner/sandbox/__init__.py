"""The sandbox: a faithful emulator of the provider's HTTP APIs, served over real HTTP.

It is the default target of job files (``base_url: sandbox``) and what every test talks to.
It is laid out by service, as getmoto/moto is: one package per emulated service, each with
its ``models`` (state and rules), ``responses`` (the routes), ``schemas`` (request and
resource shapes) and, where it has one, ``catalogue`` (deterministic data):

- ``money_transfer/`` (document 2), ``merchant_payment/`` (document 3, part A);
- ``payment_orders/`` (document 1: quotations, payment orders and their operations, with
  ``checks``), ``accounts/`` (document 1: entries, balances, transfer and payout requests),
  ``onboarding/`` (document 1: companies, merchants, accounts);
- ``legacy_pay/`` (document 3, part B: the single-call Pay, with ``exceptions``, its
  ReturnCodes).

``core/`` holds what they share: every knob (``config``, ``knobs``, and ``faults`` for the
fault rules), the clock, the store, auth, errors and their dialects, pagination, routing,
callbacks, the status lifecycle and codes, parties, the quote-create-confirm pattern
(``quotes``), the shared catalogue and shapes, the limits of a request (``bounds``), the
guard every request meets first (``guard``), the fault middleware and the admin API.
``app`` wires them; ``server`` serves them with uvicorn, in the foreground or in a thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runner.sandbox.core.config import SandboxConfig
from runner.sandbox.core.faults import FaultRule

if TYPE_CHECKING:
    from runner.sandbox.server import RunningSandbox, serve, start_in_thread

__all__ = ["FaultRule", "RunningSandbox", "SandboxConfig", "serve", "start_in_thread"]


def __getattr__(name: str) -> Any:
    # The server (FastAPI, uvicorn) is imported when first asked for, so that a run against
    # a real provider, or the command line's start-up, does not pay for it.
    if name in ("RunningSandbox", "serve", "start_in_thread"):
        from runner.sandbox import server

        return getattr(server, name)
    raise AttributeError(name)
