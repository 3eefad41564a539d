"""Shapes of the collection service's quotations, payment orders and operations (document 1).

Request models validate what clients send (a wrong type or a missing field is 2001101 naming
the field; the rules that depend on the payment page are models.py's); resource models
build the answers and feed the OpenAPI document.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field

from runner import rules
from runner.sandbox.core.bounds import Reference
from runner.sandbox.core.schemas import AmountIn, Money, Request, Resource, Str

Required = Field(min_length=1)
Mode = Literal["REDIRECT", "HOST_TO_HOST", "REDIRECTION"]
OrderType = Literal["B2B", "C2B"]


# ---------------------------------------------------------------- requests
class QuotationAmountIn(Request):
    """An Amount whose amount is given on the input side of the quotation mode only."""

    amount: Decimal | None = None
    currency: str = Required


class PaymentQuotationCreate(Request):
    external_id: Reference | None = None
    merchant_id: str = Required
    payment_page_id: str = Required
    requested: QuotationAmountIn = Field(description="merchant currency")
    processed: QuotationAmountIn = Field(description="buyer currency")
    quotation_mode: Literal["REQUESTED_AMOUNT", "PROCESSED_AMOUNT"]


class MerchantUrls(Request, rules.MerchantUrlsFields):
    pass


class PaymentInformation(Request, rules.PaymentInformationFields):
    pass


class Address(Request, rules.AddressFields):
    pass


class OrderCustomer(Request, rules.CustomerFields):
    pass


class CartDelivery(Request, rules.DeliveryFields):
    pass


class CartItem(Request, rules.CartItemFields[AmountIn, CartDelivery]):
    pass


class MerchantOrder(Request,
                    rules.MerchantOrderFields[AmountIn, Address, OrderCustomer, CartItem]):
    pass


class QuotationPaymentOrderCreate(Request):
    """A payment order from a quotation: amounts, merchant and page are the quotation's."""

    type: OrderType
    external_id: Reference
    merchant_urls: MerchantUrls
    merchant_order: MerchantOrder | None = None
    integration_mode: Mode = Field(description="REDIRECT or HOST_TO_HOST (REDIRECTION, the "
                                               "document's other spelling, is REDIRECT)")
    payment_information: PaymentInformation | None = Field(
        default=None, description="required in HOST_TO_HOST mode")


class PaymentOrderCreate(QuotationPaymentOrderCreate):
    requested: AmountIn
    merchant_id: Str = Field(default=None, description="exactly one of merchant_id and "
                                                       "merchant_external_id")
    merchant_external_id: Reference | None = None
    payment_page_id: str = Required


class OperationCreate(Request):
    requested: AmountIn
    external_id: Reference | None = None
    custom_data: Str = None


# ---------------------------------------------------------------- resources
class PaymentQuotation(Resource):
    id: str
    external_id: str | None
    merchant_id: str
    payment_page_id: str
    requested: Money
    processed: Money
    wholesale_fx_rate: Decimal
    creation_date: str
    expiration_date: str
    quotation_mode: str


class MerchantUrlsOut(Resource):
    aborted_url: str | None
    error_url: str | None
    return_url: str | None
    notification_url: str | None


class PaymentMethodAmounts(Resource):
    authorizing: Money


class PaymentMethodInstruction(Resource):
    url: str | None
    display_message: str | None


class PaymentMethodEntry(Resource):
    amounts: PaymentMethodAmounts
    brand: str | None
    custom_data: str | None
    holder_id: str | None = Field(description="a card number masked to its last four digits")
    holder_email: str | None
    payment_instruction: PaymentMethodInstruction
    payment_method_order_id: str
    payment_method_reference: str | None
    type: str


class PaymentOrder(Resource):
    id: str = Field(description="PO and 10 digits")
    external_id: str
    type: str
    status: str = Field(description="Created, Payment_In_Progress, Aborted, Refused, Error, "
                                    "Authorizing, Authorized, Cancelled, Charged or Refunded")
    requested: Money
    processed: Money
    creation_date: str
    update_date: str
    quotation_id: str | None
    merchant_id: str
    merchant_external_id: str
    merchant_urls: MerchantUrlsOut
    payment_integrator_id: str
    payment_page_id: str
    payment_url: str | None
    merchant_order: MerchantOrder | None
    integration_mode: str
    payment_methods: list[PaymentMethodEntry]


class PaymentMethodResponse(Resource):
    operation_id: str
    payment_method_operation_id: str
    response_code: str
    response_message: str


class PaymentOperation(Resource):
    id: int
    payment_order_id: str
    type: str = Field(description="CHARGE, CANCEL or REFUND (a sandbox addition)")
    status: str
    requested: Money
    processed: Money
    external_id: str | None
    creation_date: str
    update_date: str
    custom_data: str | None
    payment_methods_responses: list[PaymentMethodResponse]
