"""The legacy single-call Pay (document 3, part B): POST /Rest/V40/PaymentOrder/Pay in JSON or XML."""

from __future__ import annotations

from fastapi import APIRouter

from runner.sandbox.routing import DecimalRoute

router = APIRouter(route_class=DecimalRoute)
