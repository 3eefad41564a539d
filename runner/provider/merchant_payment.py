"""Client of the merchant payment service (document 3, part A): payment methods, debit
parties, quotations, payments. ``ref`` arguments take a numeric id or ``ext(external_id)``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from runner.provider.http import ProviderClient, ext


class MerchantPaymentClient(ProviderClient):
    prefix = "/v1/merchant-payment"

    def ping(self) -> Any:
        return self.request("GET", "/ping", prefix="").body

    def countries(self) -> Iterator[Any]:
        return self.pages("/countries")

    def payment_methods(self, country_iso_code: str | None = None,
                        currency: str | None = None) -> Iterator[Any]:
        return self.pages("/payment-methods", country_iso_code=country_iso_code,
                          currency=currency)

    def payment_method(self, method_id: int) -> Any:
        return self.get(f"/payment-methods/{method_id}")

    def balances(self) -> list[Any]:
        return list(self.pages("/balances"))

    def debit_party_information(self, method_id: int, identifier: dict[str, Any]) -> Any:
        return self.request("POST", f"/payment-methods/{method_id}/debit-party-information",
                            body={"debit_party_identifier": identifier}).body

    def debit_party_verification(self, method_id: int, identifier: dict[str, Any],
                                 consumer: dict[str, Any]) -> Any:
        return self.request("POST", f"/payment-methods/{method_id}/debit-party-verification",
                            body={"debit_party_identifier": identifier,
                                  "consumer": consumer}).body

    def create_quotation(self, body: dict[str, Any]) -> Any:
        return self.request("POST", "/quotations", body=body,
                            external_id=body.get("external_id")).body

    def quotation(self, ref: int | str) -> Any:
        return self.get(f"/quotations/{ref}")

    def create_payment(self, quotation_ref: int | str, body: dict[str, Any]) -> Any:
        return self.request("POST", f"/quotations/{quotation_ref}/payments", body=body,
                            external_id=body.get("external_id")).body

    def confirm_payment(self, ref: int | str, external_id: str | None = None) -> Any:
        return self.request("POST", f"/payments/{ref}/confirm", external_id=external_id).body

    def payment(self, ref: int | str) -> Any:
        return self.get(f"/payments/{ref}")

    def find_quotation(self, external_id: str) -> Any | None:
        return self.find(f"/quotations/{ext(external_id)}")

    def find_payment(self, external_id: str) -> Any | None:
        return self.find(f"/payments/{ext(external_id)}")
