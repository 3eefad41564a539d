"""The collection service (document 1): quotations, payment orders and their operations (charge, refund, cancel), under /v1/payment/."""

from __future__ import annotations

from fastapi import APIRouter

from runner.sandbox.routing import DecimalRoute

router = APIRouter(route_class=DecimalRoute)
