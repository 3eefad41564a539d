"""Client of the money transfer service (document 2): discovery, balances, credit parties,
quotations, transactions. Methods return the provider's objects as dicts with Decimal
amounts; ``ref`` arguments take a numeric id or ``ext(external_id)``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from runner.provider.http import ProviderClient, ext


class MoneyTransferClient(ProviderClient):
    prefix = "/v1/money-transfer"

    def ping(self) -> Any:
        return self.request("GET", "/ping", prefix="").body

    # discovery
    def services(self, country_iso_code: str | None = None) -> Iterator[Any]:
        return self.pages("/services", country_iso_code=country_iso_code)

    def payers(self, service_id: int | None = None, country_iso_code: str | None = None,
               currency: str | None = None) -> Iterator[Any]:
        return self.pages("/payers", service_id=service_id, country_iso_code=country_iso_code,
                          currency=currency)

    def payer(self, payer_id: int) -> Any:
        return self.get(f"/payers/{payer_id}")

    def payer_rates(self, payer_id: int) -> Any:
        return self.get(f"/payers/{payer_id}/rates")

    def countries(self) -> Iterator[Any]:
        return self.pages("/countries")

    def division_categories(self, iso_code: str) -> Iterator[Any]:
        return self.pages(f"/countries/{iso_code}/administrative-division-categories")

    def divisions(self, iso_code: str) -> Iterator[Any]:
        return self.pages(f"/countries/{iso_code}/administrative-divisions")

    def division(self, division_id: int) -> Any:
        return self.get(f"/administrative-divisions/{division_id}")

    def division_children(self, division_id: int) -> Iterator[Any]:
        return self.pages(f"/administrative-divisions/{division_id}/administrative-divisions")

    def entity_categories(self, iso_code: str) -> Iterator[Any]:
        return self.pages(f"/countries/{iso_code}/entity-categories")

    def entity_identifiers(self, iso_code: str) -> Iterator[Any]:
        return self.pages(f"/countries/{iso_code}/entity-identifiers")

    def payment_systems(self, iso_code: str) -> Iterator[Any]:
        return self.pages(f"/countries/{iso_code}/payment-systems")

    def entities(self, country_iso_code: str | None = None, category_id: int | None = None,
                 service_id: int | None = None, payer_id: int | None = None) -> Iterator[Any]:
        return self.pages("/entities", country_iso_code=country_iso_code,
                          category_id=category_id, service_id=service_id, payer_id=payer_id)

    def entity(self, entity_id: int) -> Any:
        return self.get(f"/entities/{entity_id}")

    def entity_children(self, entity_id: int) -> Iterator[Any]:
        return self.pages(f"/entities/{entity_id}/entities")

    def balances(self) -> list[Any]:
        return list(self.pages("/balances"))

    # credit parties
    def credit_party_information(self, payer_id: int, identifier: dict[str, Any]) -> Any:
        return self.request("POST", f"/payers/{payer_id}/credit-party-information",
                            body={"credit_party_identifier": identifier}).body

    def credit_party_verification(self, payer_id: int, identifier: dict[str, Any],
                                  beneficiary: dict[str, Any] | None = None) -> Any:
        body: dict[str, Any] = {"credit_party_identifier": identifier}
        if beneficiary is not None:
            body["beneficiary"] = beneficiary
        return self.request("POST", f"/payers/{payer_id}/credit-party-verification",
                            body=body).body

    # quotations and transactions
    def create_quotation(self, body: dict[str, Any]) -> Any:
        return self.request("POST", "/quotations", body=body,
                            external_id=body.get("external_id")).body

    def quotation(self, ref: int | str) -> Any:
        return self.get(f"/quotations/{ref}")

    def create_transaction(self, quotation_ref: int | str, body: dict[str, Any]) -> Any:
        return self.request("POST", f"/quotations/{quotation_ref}/transactions", body=body,
                            external_id=body.get("external_id")).body

    def confirm_transaction(self, ref: int | str, external_id: str | None = None) -> Any:
        return self.request("POST", f"/transactions/{ref}/confirm",
                            external_id=external_id).body

    def transaction(self, ref: int | str) -> Any:
        return self.get(f"/transactions/{ref}")

    # lookups by external id: None means the provider clearly has no such resource
    def find_quotation(self, external_id: str) -> Any | None:
        return self.find(f"/quotations/{ext(external_id)}")

    def find_transaction(self, external_id: str) -> Any | None:
        return self.find(f"/transactions/{ext(external_id)}")
