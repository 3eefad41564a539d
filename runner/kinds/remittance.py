"""Remittances through the money transfer service: quotation, transaction, confirm.

Checked against the payer (its requirements, limits and rates, read once per payer);
``validate --quote`` asks real quotations; the totals are checked against the available
balances with their credit facility.
"""

from __future__ import annotations

from decimal import Decimal

from runner.engine.remittance import RemittanceFlow
from runner.job.loading import ValidItem
from runner.job.money_transfer import RemittanceItem
from runner.kinds import Kind, Price, Problems, same
from runner.payees.checks import Payee, full_name
from runner.provider import Provider
from runner.provider.retry import RetryPolicy, made_once
from runner.validation.catalogue import Catalogue
from runner.validation.rules import (
    check_remittance,
    destination_estimate,
    rate_band,
    source_estimate,
)


def _check(item: RemittanceItem, catalogue: Catalogue) -> Problems:
    payer = catalogue.once(*catalogue.payer(item.payer_id))
    rates = catalogue.once(*catalogue.rates(item.payer_id)) if payer is not None else None
    return check_remittance(item, payer, rates)


def _wants(item: RemittanceItem, catalogue: Catalogue) -> None:
    payer = catalogue.payer(item.payer_id)
    catalogue.want(*payer)
    catalogue.want(*catalogue.rates(item.payer_id), after=payer[0])


def _amount(item: RemittanceItem, catalogue: Catalogue | None) -> tuple[str, Decimal] | None:
    rates = catalogue.once(*catalogue.rates(item.payer_id)) if catalogue is not None else None
    amount = source_estimate(item, rates)
    return (item.source.currency, amount) if amount is not None else None


def _rate_name(item: RemittanceItem) -> str:
    return f"{item.source.currency} to {item.destination.currency}, payer {item.payer_id}"


def _rate(item: RemittanceItem, catalogue: Catalogue) -> tuple[str, Decimal] | None:
    """The payer's published rate for the item's amount (its band of GET .../rates)."""
    band = rate_band(item, catalogue.once(*catalogue.rates(item.payer_id)))
    return None if band is None else (_rate_name(item), band[1])


def _receives(item: RemittanceItem, catalogue: Catalogue) -> tuple[str, Decimal] | None:
    payer = catalogue.once(*catalogue.payer(item.payer_id))
    rates = catalogue.once(*catalogue.rates(item.payer_id)) if payer is not None else None
    amount = destination_estimate(item, payer, rates)
    return None if amount is None else (item.destination.currency, amount)


def _quote(valid: ValidItem, provider: Provider, stamp: str, policy: RetryPolicy) -> Price:
    """A real quotation in the ``dryrun-`` namespace: it expires, nothing is confirmed; one
    in doubt is looked up by its external_id before it is asked again."""
    ref = f"dryrun-{stamp}-{valid.external_id}"
    body = {"external_id": ref,
            **valid.item.model_dump(include=set(RemittanceFlow.quotation_fields),
                                    exclude_none=True)}
    client = provider.money_transfer
    quotation = made_once(policy, lambda: client.create_quotation(body),
                          lambda: client.find_quotation(ref))
    assert isinstance(valid.item, RemittanceItem)
    return Price(quotation["sent_amount"]["currency"], quotation["sent_amount"]["amount"],
                 quotation["fee"]["amount"], quoted_rate=quotation.get("wholesale_fx_rate"),
                 rate_name=_rate_name(valid.item),
                 received_currency=quotation["destination"]["currency"],
                 # An amount without decimals (KES 1402) comes as a JSON integer.
                 received=Decimal(quotation["destination"]["amount"]))


def _payee(item: RemittanceItem) -> Payee:
    """The beneficiary and the account credited (credit party verification)."""
    party = {k: v for k, v in item.beneficiary.model_dump().items() if v}
    identifier = {k: v for k, v in item.credit_party_identifier.model_dump().items() if v}
    return Payee("money_transfer", item.payer_id, identifier, party,
                 (full_name(party), party.get("bank_account_holder_name") or ""))


def funds(provider: Provider) -> dict[str, Decimal]:
    """What each source currency can send: the available balance and the credit facility."""
    return {b["currency"]: b["available_balance"] + b.get("credit_facility", 0)
            for b in provider.money_transfer.balances()}


KIND = Kind("remittance", RemittanceItem, RemittanceFlow, lambda p: p.money_transfer,
            "jobs/payroll.yaml", check=_check, wants=_wants, amount=_amount, rate=_rate,
            receives=_receives, quote=_quote, funds=funds, payee=_payee,
            same_payment=same.remittance,
            same_payment_is="beneficiary account or msisdn, amount and currency")
