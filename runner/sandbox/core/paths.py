"""The families of the provider's paths, which answer in words of their own (core/errors.py's
dialects) and fall in their own endpoint groups (core/faults.py)."""

from __future__ import annotations

COLLECTION = ("/v1/payment/", "/v1/account/", "/v1/onboarding/")  # document 1
LEGACY = "/Rest/"  # document 3B, the single-call Pay
