"""Shapes of the legacy single-call Pay (document 3, part B), in the document's own (Pascal
case) names. The route reads its body itself (JSON or XML), so ``openapi_schemas`` hands the
request's schema to the OpenAPI document.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import ConfigDict, Field

from runner import rules
from runner.sandbox.core.bounds import Bounded, Reference


class Legacy(Bounded):
    model_config = ConfigDict(extra="ignore")


class LegacyMerchantUrls(Legacy, rules.LegacyMerchantUrlsFields):
    pass


class LegacyCustomer(Legacy):
    Email: str | None = None


class LegacyMerchantOrder(Legacy):
    Id: Reference = Field(description="the payment order's external id")
    Customer: LegacyCustomer | None = None


class LegacyPaymentOrder(Legacy):
    MerchantId: str = Field(min_length=1, description="merchant id or merchant_external_id")
    Amount: Decimal
    Currency: str = Field(min_length=1)
    PaymentPageId: str = Field(min_length=1)
    MerchantUrls: LegacyMerchantUrls | None = None
    MerchantOrder: LegacyMerchantOrder


class LegacyCredential(Legacy):
    name: str = Field(min_length=1, json_schema_extra={"xml": {"attribute": True}})
    credential: str = Field(description="in XML, the Credential element's text")


class LegacyPayRequest(Legacy):
    """JSON: ``{"PaymentOrder": {...}, "Credentials": [{"name", "credential"}]}``. XML: root
    ``Request``, ``<Credentials><Credential name="CardNumber">...</Credential></Credentials>``.
    """

    PaymentOrder: LegacyPaymentOrder
    Credentials: list[LegacyCredential] = Field(
        default_factory=list, description="unique names: CardNumber, Cvv and Exp (YYYYMM); "
                                          "or qrcode, or technicalTransactionId")


class LegacyPayResponse(Legacy):
    ReturnCode: int
    ReturnMessage: str
    RequestId: str
    PaymentOrderId: int | None = None
    Status: str | None = Field(default=None, description="Authorized, Charged (point of "
                                                         "sale), Refused or Error")


def openapi_schemas() -> dict[str, Any]:
    """The request's schemas for /openapi.json: the route reads its body itself (JSON or
    XML), so FastAPI does not see the model."""
    schema = LegacyPayRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    found: dict[str, Any] = schema.pop("$defs", {})
    schema["xml"] = {"name": "Request"}
    found["LegacyPayRequest"] = schema
    return found
