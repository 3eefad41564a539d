"""The money transfer service's rules: quotation pricing, and the balances that
confirmed transactions move.

Pricing, in Decimal, from the catalogue's rates: the source side is in the sender's currency
(2 decimals), the destination in the payer's currency at the payer's precision and
increment. The fee is charged in the source currency; confirming costs ``sent_amount + fee``.

Confirming a transaction reserves its cost against the balance of the source currency:
``available_balance = balance - pending``, and a confirm that would take the available
balance below minus the credit facility is refused (1007005). A completed transaction
settles (balance and pending both drop by the cost); a rejected or declined one releases the
reservation; a reversal gives the money back.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from runner.money import cents, fits, round_down, round_up
from runner.sandbox.core.errors import ApiError
from runner.sandbox.core.quotes import CENT, TWO, QuoteFlow, amount_given
from runner.sandbox.core.statuses import is_final
from runner.sandbox.core.store import Store
from runner.sandbox.money_transfer.catalogue import MAX_SOURCE_AMOUNT, PayerSpec, rate_bands

FLOW = QuoteFlow("quotations", "transactions", numeric_callbacks=True)


@dataclass(frozen=True)
class RemittancePrice:
    source_amount: Decimal
    destination_amount: Decimal
    rate: Decimal
    fee: Decimal


def price_remittance(
    payer: PayerSpec, mode: str, source_currency: str, source_amount: Decimal | None,
    destination_amount: Decimal | None,
) -> RemittancePrice:
    bands = rate_bands(payer.currency).get(source_currency)
    if bands is None:
        raise ApiError("1000999", f"source.currency {source_currency} is not priced by this payer")
    if mode == "SOURCE_AMOUNT":
        source = amount_given(source_amount, "source.amount")
        if not fits(source, TWO, CENT):
            raise ApiError("1000999", "source.amount has more than 2 decimals")
        band = next((b for b in bands
                     if b["source_amount_min"] <= source <= b["source_amount_max"]), None)
        if band is None:
            raise ApiError("1006001", f"source.amount over {MAX_SOURCE_AMOUNT}")
        rate = band["wholesale_fx_rate"]
        destination = round_down(source * rate, payer.precision, payer.increment)
        if destination <= 0:
            raise ApiError("1003008", "the converted amount rounds to zero")
    elif mode == "DESTINATION_AMOUNT":
        destination = amount_given(destination_amount, "destination.amount")
        if not fits(destination, payer.precision, payer.increment):
            raise ApiError("1003008", f"destination.amount must have at most {payer.precision} "
                                      f"decimals and be a multiple of {payer.increment}")
        for band in bands:
            rate = band["wholesale_fx_rate"]
            # The cheapest source amount of this band that delivers the destination amount:
            # between the bands' edges no source amount converts to exactly it.
            source = max(round_up(destination / rate, TWO, CENT), band["source_amount_min"])
            if source <= band["source_amount_max"]:
                break
        else:
            raise ApiError("1006001", f"source amount over {MAX_SOURCE_AMOUNT}")
    else:
        raise ApiError("1000999", "mode must be SOURCE_AMOUNT or DESTINATION_AMOUNT")
    if destination < payer.minimum:
        raise ApiError("1003011", f"{destination} {payer.currency} < {payer.minimum}")
    if payer.maximum is not None and destination > payer.maximum:
        raise ApiError("1003012", f"{destination} {payer.currency} > {payer.maximum}")
    fee = cents(payer.fee_fixed + source * payer.fee_percent / 100)
    return RemittancePrice(source, destination, rate, fee)


class Balances:
    """The partner's balances, one per currency, as confirms and status changes move them."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def available(self, currency: str) -> Decimal:
        b = self.store.balances[currency]
        return Decimal(b["balance"]) - Decimal(b["pending"])

    def view(self, currency: str) -> dict[str, Any]:
        b = self.store.balances[currency]
        return {"id": b["id"], "currency": currency, "balance": b["balance"],
                "available_balance": self.available(currency),
                "credit_facility": b["credit_facility"]}

    def set(self, currency: str, balance: Decimal, credit_facility: Decimal | None,
            ) -> dict[str, Any]:
        """Set a balance (the admin API), opening the currency's account if need be."""
        b = self.store.balances.setdefault(currency, {
            "id": len(self.store.balances) + 1, "currency": currency, "balance": Decimal(0),
            "pending": Decimal(0), "credit_facility": Decimal(0)})
        b["balance"] = balance
        if credit_facility is not None:
            b["credit_facility"] = credit_facility
        self.store.save_balance(currency)
        return self.view(currency)

    def reserve(self, currency: str, cost: Decimal) -> None:
        b = self.store.balances.get(currency)
        if b is None:
            raise ApiError("1005001", f"no {currency} account")
        if cost > self.available(currency) + Decimal(b["credit_facility"]):
            raise ApiError("1007005")
        b["pending"] = Decimal(b["pending"]) + cost
        self.store.save_balance(currency)

    def reserve_cost(self, transaction: dict[str, Any], meta: dict[str, Any]) -> None:
        """What confirming a transaction does: its cost is reserved (or 1007005)."""
        self.reserve(meta["currency"], meta["cost"])
        meta["reserved"] = True

    def _move(self, currency: str, balance: Decimal, pending: Decimal) -> None:
        b = self.store.balances[currency]
        b["balance"] = Decimal(b["balance"]) + balance
        b["pending"] = Decimal(b["pending"]) + pending
        self.store.save_balance(currency)

    def settle(self, meta: dict[str, Any], status: str) -> None:
        """What a transaction's new status does to the money its confirm reserved."""
        if not meta.get("reserved"):
            return
        cost, currency = Decimal(meta["cost"]), meta["currency"]
        klass = status[0]
        if klass == "7" and not meta.get("settled"):
            self._move(currency, -cost, -cost)
            meta["settled"] = True
        elif klass == "8" and meta.get("settled"):
            self._move(currency, cost, Decimal(0))
            meta["reserved"] = False
        elif is_final(status) and not meta.get("settled"):
            self._move(currency, Decimal(0), -cost)
            meta["reserved"] = False
