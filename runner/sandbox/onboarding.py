"""The collection service's onboarding (document 1): companies, merchants and accounts, under /v1/onboarding/."""

from __future__ import annotations

from fastapi import APIRouter

from runner.sandbox.routing import DecimalRoute

router = APIRouter(route_class=DecimalRoute)
