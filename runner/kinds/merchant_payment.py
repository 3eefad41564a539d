"""Merchant payment collections: quotation, payment, confirm; the consumer pays.

Checked against the payment method (read once per method) and the merchant's accounts.
"""

from __future__ import annotations

from decimal import Decimal

from runner.engine.merchant_payment import MerchantPaymentFlow
from runner.job.merchant_payment import MerchantPaymentItem
from runner.kinds import Kind, Problems, same
from runner.payees.checks import Payee, full_name
from runner.validation.catalogue import Catalogue
from runner.validation.rules import check_merchant_payment


def _check(item: MerchantPaymentItem, catalogue: Catalogue) -> Problems:
    return check_merchant_payment(item, catalogue.once(*catalogue.method(item.payment_method_id)),
                                  catalogue.merchant_accounts())


def _wants(item: MerchantPaymentItem, catalogue: Catalogue) -> None:
    catalogue.want(*catalogue.method(item.payment_method_id))
    catalogue.want(*catalogue.merchant_balances())


def _amount(item: MerchantPaymentItem, catalogue: Catalogue | None
            ) -> tuple[str, Decimal] | None:
    # The side the mode names carries the amount (the other is the provider's to price).
    side = item.payment if item.mode == "PAYMENT_AMOUNT" else item.collection
    return (side.currency, side.amount) if side.amount is not None else None


def _payee(item: MerchantPaymentItem) -> Payee:
    """The consumer and the account debited (debit party verification)."""
    party = {k: v for k, v in item.consumer.model_dump().items() if v}
    identifier = {k: v for k, v in item.debit_party_identifier.model_dump().items() if v}
    identifier.pop("account_type", None)  # not an identifier of the consumer
    return Payee("merchant_payment", item.payment_method_id, identifier, party,
                 (full_name(party), party.get("bank_account_holder_name") or ""))


KIND = Kind("merchant_payment", MerchantPaymentItem, MerchantPaymentFlow,
            lambda p: p.merchant_payment, "jobs/merchant-payments.yaml", check=_check,
            wants=_wants, amount=_amount, payee=_payee,
            same_payment=same.merchant_payment,
            same_payment_is="consumer account, card or msisdn, amount and currency")
