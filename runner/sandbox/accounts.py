"""The collection service's accounts (document 1): balances, entries, transfer requests and payout requests, under /v1/account/."""

from __future__ import annotations

from fastapi import APIRouter

from runner.sandbox.routing import DecimalRoute

router = APIRouter(route_class=DecimalRoute)
