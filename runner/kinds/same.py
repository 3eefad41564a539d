"""What makes two items of one batch the same payment, for each kind (rule 9 of
docs/exactly-once.md).

Beside its external_id, an item is known by what it pays: to whom, how much, in which
currency. Two items of one batch (one job name, all its history in the state) that pay the
same are a possible duplicate, whatever their external_ids (a spreadsheet re-exported with
``00123`` become ``123``): ``runner.engine.duplicates`` holds the later one. Each function
gives the parts compared, as text, or None when the item names nobody it could be compared
by (a payment order whose buyer is only known at the payment page). ``docs/kinds.md`` says
the same for a reader.

Identifiers are compared as a bank or a phone network reads them, in their canonical form
(``runner.identifiers``: a phone number as E.164, so that ``254700000001`` is
``+254700000001``; any other identifier without spaces, dots and dashes, case aside);
amounts as numbers (``100``, ``100.0`` and ``100.00`` are one amount). No card number is
kept whole, even here: a card is its last four digits and its expiry.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from runner.identifiers import canonical
from runner.identifiers import compact as ident

if TYPE_CHECKING:  # each kind's module imports its own models
    from runner.job.collection import (
        AccountTransferItem,
        OnboardingItem,
        OperationItem,
        PaymentOrderItem,
        PayoutItem,
    )
    from runner.job.merchant_payment import LegacyPayItem, MerchantPaymentItem
    from runner.job.money_transfer import RemittanceItem

Parts = tuple[str, ...]


def amount(value: Decimal | int | str | None) -> str:
    """An amount as compared: ``100.00`` is ``100``."""
    if value is None:
        return ""
    return format(Decimal(str(value)).normalize(), "f")


def _given(fields: dict[str, Any], leave_out: Iterable[str] = (),
           country: str | None = None) -> str:
    """The identifiers given, by name, canonical: ``iban=fr76...;msisdn=+2547...``
    (``country``: the item's, to read a national phone number)."""
    return ";".join(f"{k}={canonical(k, v, country)}" for k, v in sorted(fields.items())
                    if v not in (None, "") and k not in leave_out)


def remittance(item: RemittanceItem) -> Parts | None:
    """The beneficiary's account or msisdn, and the amount and currency the mode names."""
    side = item.source if item.mode == "SOURCE_AMOUNT" else item.destination
    who = _given(item.credit_party_identifier.model_dump(),
                 country=item.beneficiary.country_iso_code)
    return (who, amount(side.amount), side.currency) if who else None


def merchant_payment(item: MerchantPaymentItem) -> Parts | None:
    """The consumer's account, card or msisdn, and the amount and currency the mode names."""
    side = item.payment if item.mode == "PAYMENT_AMOUNT" else item.collection
    who = _given(item.debit_party_identifier.model_dump(), ("account_type", "card_number"),
                 item.consumer.country_iso_code)
    card = item.debit_party_identifier.card_number
    if card:
        who += f";card=*{ident(card)[-4:]}"
    return (who, amount(side.amount), side.currency) if who else None


def payout(item: PayoutItem) -> Parts | None:
    """The payout bank account, the amount and the currency."""
    return (ident(item.payout_bank_account_id), amount(item.payout.amount),
            item.payout.currency)


def account_transfer(item: AccountTransferItem) -> Parts | None:
    """The source and target accounts (as the item names them), the amount, the currency."""
    return (ident(item.source_account_id), ident(item.target_account_id),
            amount(item.transfer.amount), item.transfer.currency)


def payment_order(item: PaymentOrderItem) -> Parts | None:
    """The merchant, the buyer (card, account, msisdn or e-mail, else the customer's id or
    e-mail), the amount and the currency; None for an order whose buyer is not named (a
    REDIRECT order, paid by whoever opens its page)."""
    info = item.payment_information
    who = ""
    if info is not None:
        who = _given(info.model_dump(include={"bank_account_number", "msisdn", "email",
                                               "phone_number"}))
        if info.card_number:
            who += f";card=*{ident(info.card_number)[-4:]}/{info.card_expiration_month}/" \
                   f"{info.card_expiration_year}"
    customer = item.merchant_order.customer if item.merchant_order is not None else None
    if not who and customer is not None:
        who = _given(customer.model_dump(include={"id", "email"}))
    if not who:
        return None
    merchant = item.merchant_id or f"ext:{item.merchant_external_id}"
    return (ident(merchant), who, amount(item.requested.amount), item.requested.currency)


def legacy_pay(item: LegacyPayItem) -> Parts | None:
    """The merchant, the card (last four digits and expiry) or else the customer's e-mail,
    the amount and the currency; None when neither names the payer."""
    values = {c.name: c.value() for c in item.Credentials}
    card = values.get("CardNumber")
    email = item.MerchantOrder.Customer.Email if item.MerchantOrder.Customer else None
    if card:
        who = f"card=*{ident(card)[-4:]}/{values.get('Exp') or ''}"
    elif email:
        who = f"email={ident(email)}"
    else:
        return None
    return (ident(item.MerchantId), who, amount(item.Amount), item.Currency)


def operation(item: OperationItem) -> Parts | None:
    """The payment order (by id or external id), the amount and the currency."""
    order = item.payment_order_id or f"ext:{item.payment_order_external_id}"
    return (ident(order), amount(item.requested.amount), item.requested.currency)


def onboarding(item: OnboardingItem) -> Parts | None:
    """The company (by name or id) and the merchant's name: no money moves, but the same
    merchant made twice is as much a mistake."""
    company = item.company.name if item.company is not None else f"id:{item.company_id}"
    return (ident(company), ident(item.merchant.name))
