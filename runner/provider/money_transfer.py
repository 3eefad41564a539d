"""Client of the money transfer service (document 2): discovery, balances, credit parties,
quotations, transactions. Methods return the provider's objects as dicts with Decimal
amounts; ``ref`` arguments take a numeric id or ``ext(external_id)``."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partialmethod
from typing import Any

from runner.provider.quoted import QuotedServiceClient


class MoneyTransferClient(QuotedServiceClient):
    prefix = "/v1/money-transfer"
    made = "transactions"
    made_noun = "transaction"

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

    def country_list(self, iso_code: str, name: str) -> Iterator[Any]:
        """One of the lists the document gives per country, by its path's last segment."""
        return self.pages(f"/countries/{iso_code}/{name}")

    division_categories = partialmethod(country_list, name="administrative-division-categories")
    divisions = partialmethod(country_list, name="administrative-divisions")
    entity_categories = partialmethod(country_list, name="entity-categories")
    entity_identifiers = partialmethod(country_list, name="entity-identifiers")
    payment_systems = partialmethod(country_list, name="payment-systems")

    def division(self, division_id: int) -> Any:
        return self.get(f"/administrative-divisions/{division_id}")

    def division_children(self, division_id: int) -> Iterator[Any]:
        return self.pages(f"/administrative-divisions/{division_id}/administrative-divisions")

    def entities(self, country_iso_code: str | None = None, category_id: int | None = None,
                 service_id: int | None = None, payer_id: int | None = None) -> Iterator[Any]:
        return self.pages("/entities", country_iso_code=country_iso_code,
                          category_id=category_id, service_id=service_id, payer_id=payer_id)

    def entity(self, entity_id: int) -> Any:
        return self.get(f"/entities/{entity_id}")

    def entity_children(self, entity_id: int) -> Iterator[Any]:
        return self.pages(f"/entities/{entity_id}/entities")

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

    # transactions, by the document's names (quotations: QuotedServiceClient)
    create_transaction = QuotedServiceClient.create_from_quotation
    confirm_transaction = QuotedServiceClient.confirm
    transaction = QuotedServiceClient.retrieve
    find_transaction = QuotedServiceClient.find_made
