"""One remittance, exactly once: quotation -> transaction -> confirm -> final status.

The exactly-once machinery is ``runner.engine.quoted``'s; this module says what is a
remittance's: the transaction as the created object, the payer's quotation fields, what a
matching quotation and transaction are (payer, mode, currencies and input amount; the
amount and the credit party), and the pre-flight: sent amount + fee per source currency
against the available balance and credit facility.
"""

from __future__ import annotations

from collections.abc import Collection
from decimal import Decimal
from typing import Any

from runner.cards import mask
from runner.engine import answers
from runner.engine.answers import same_amount
from runner.engine.flow import Entry
from runner.engine.quoted import QuotedFlow
from runner.job.money_transfer import RemittanceItem
from runner.lifecycle import Call
from runner.provider.money_transfer import MoneyTransferClient
from runner.state import ItemChanges
from runner.validation import BALANCES


class RemittanceFlow(QuotedFlow[RemittanceItem, MoneyTransferClient]):
    created = Call.TRANSACTION
    quotation_fields = frozenset({"payer_id", "mode", "source", "destination"})
    sides = ("source", "destination")
    identified, named = "credit_party_identifier", "beneficiary"
    def summary_of(self, item: RemittanceItem) -> dict[str, Any]:
        ident = item.credit_party_identifier.model_dump(exclude_none=True)
        return {"beneficiary": " ".join(x for x in (item.beneficiary.firstname,
                                                     item.beneficiary.lastname) if x),
                "payer_id": item.payer_id,
                "identifier": {k: mask(v) for k, v in ident.items()}}

    def cost(self, entry: Entry[RemittanceItem]) -> tuple[str, Decimal] | None:
        r = entry.record
        assert r.source_currency is not None and r.source_amount is not None
        return r.source_currency, r.source_amount + (r.fee or 0)

    def draws(self, item: RemittanceItem) -> str | None:
        return item.source.currency

    def usable(self, balances: Collection[str]) -> dict[str, Decimal]:
        return {b["currency"]: b["available_balance"] + b.get("credit_facility", 0)
                for b in self.read(self.client.balances, BALANCES)}

    # ------------------------------------------------------------ what is this item's
    def quotation_matches(self, entry: Entry[RemittanceItem], quotation: dict[str, Any]) -> bool:
        item = entry.item
        same = (quotation["payer"]["id"] == item.payer_id and quotation["mode"] == item.mode
                and quotation["source"]["currency"] == item.source.currency
                and quotation["destination"]["currency"] == item.destination.currency)
        if item.mode == "SOURCE_AMOUNT":
            return same and same_amount(quotation["source"]["amount"], item.source.amount)
        return same and same_amount(quotation["destination"]["amount"],
                                    item.destination.amount)

    def quoted(self, quotation: dict[str, Any]) -> ItemChanges:
        return {"source_currency": quotation["sent_amount"]["currency"],
                "source_amount": Decimal(quotation["sent_amount"]["amount"]),
                "fee": Decimal(quotation["fee"]["amount"]),
                "destination_currency": quotation["destination"]["currency"],
                "destination_amount": Decimal(quotation["destination"]["amount"])}

    def compared(self, entry: Entry[RemittanceItem], txn: dict[str, Any]
                 ) -> list[answers.Compared]:
        compared = super().compared(entry, txn)
        if entry.read:
            compared.append(("payer.id", entry.item.payer_id, answers.at(txn, "payer", "id"),
                             answers.TEXT))
        return compared
