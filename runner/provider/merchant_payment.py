"""Client of the merchant payment service (document 3, part A): payment methods, debit
parties, quotations, payments. ``ref`` arguments take a numeric id or ``ext(external_id)``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from runner.provider.quoted import QuotedServiceClient


class MerchantPaymentClient(QuotedServiceClient):
    prefix = "/v1/merchant-payment"
    made = "payments"
    made_noun = "payment"

    def payment_methods(self, country_iso_code: str | None = None,
                        currency: str | None = None) -> Iterator[Any]:
        return self.pages("/payment-methods", country_iso_code=country_iso_code,
                          currency=currency)

    def payment_method(self, method_id: int) -> Any:
        return self.get(f"/payment-methods/{method_id}")

    def debit_party_information(self, method_id: int, identifier: dict[str, Any]) -> Any:
        return self.request("POST", f"/payment-methods/{method_id}/debit-party-information",
                            body={"debit_party_identifier": identifier}).body

    def debit_party_verification(self, method_id: int, identifier: dict[str, Any],
                                 consumer: dict[str, Any]) -> Any:
        return self.request("POST", f"/payment-methods/{method_id}/debit-party-verification",
                            body={"debit_party_identifier": identifier,
                                  "consumer": consumer}).body

    # payments, by the document's names (quotations: QuotedServiceClient)
    create_payment = QuotedServiceClient.create_from_quotation
    confirm_payment = QuotedServiceClient.confirm
    payment = QuotedServiceClient.retrieve
    find_payment = QuotedServiceClient.find_made
