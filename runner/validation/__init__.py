"""Validation of a whole job against the provider: every problem, before a cent moves.

``validate_job`` streams the job's items (``runner.job.iter_items``), checks each valid item
against its payer or payment method (each fetched once per run, see ``rules``), adds up what
the batch sends per currency and compares it with the balances. With ``quote``, it also asks
real quotations in a ``dryrun-`` external_id namespace (they expire; nothing is confirmed) to
show the true cost with fees. Nothing else is POSTed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from runner.engine.policy import RetryPolicy
from runner.errors import JobError
from runner.job import Job, ValidItem, iter_items
from runner.job.merchant_payment import MerchantPaymentItem
from runner.job.money_transfer import RemittanceItem
from runner.provider.connect import Provider
from runner.provider.errors import NotFound, ProviderHTTPError
from runner.validation import accounts, collection, legacy_pay, onboarding
from runner.validation.rules import check_merchant_payment, check_remittance, source_estimate

# Where a refused quotation points in the item.
QUOTATION_FIELDS = {"1003001": "payer_id", "1003002": "payer_id", "1003007": "payer_id",
                    "1003010": "destination.currency", "1000998": "source.country_iso_code",
                    "1003008": "destination.amount"}


@dataclass
class Totals:
    count: int = 0
    amount: Decimal = Decimal(0)
    fee: Decimal = Decimal(0)


@dataclass
class Report:
    file: str
    kind: str
    quoted: bool = False
    items: int = 0
    invalid_rows: set[int] = field(default_factory=set)
    problems: list[JobError] = field(default_factory=list)
    totals: dict[str, Totals] = field(default_factory=dict)

    @property
    def invalid(self) -> int:
        return len(self.invalid_rows)

    @property
    def valid(self) -> int:
        return self.items - self.invalid

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, currency: str, amount: Decimal, fee: Decimal = Decimal(0)) -> None:
        t = self.totals.setdefault(currency, Totals())
        t.count += 1
        t.amount += amount
        t.fee += fee

    def closing_line(self) -> str:
        parts = [f"{self.file}: {self.items} items, {self.valid} valid, {self.invalid} invalid"]
        for currency, t in sorted(self.totals.items()):
            fee = f" + fees {t.fee:,}" if self.quoted else ""
            parts.append(f"{currency} {t.amount:,}{fee} over {t.count} "
                         f"item{'' if t.count == 1 else 's'}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "kind": self.kind, "items": self.items, "valid": self.valid,
            "invalid": self.invalid, "quoted": self.quoted, "ok": self.ok,
            "problems": [{"file": p.file, "row": p.row, "field": p.field, "message": p.message}
                         for p in self.problems],
            "totals": {c: {"items": t.count, "amount": str(t.amount),
                           **({"fee": str(t.fee)} if self.quoted else {})}
                       for c, t in sorted(self.totals.items())},
        }


# Reads of the catalogue: a few quick tries, so that a passing 5xx, 503 or lost answer does not
# end a run before anything is sent, while an unreachable provider is reported within a second.
READS = RetryPolicy(attempts=3, first_wait=0.1, max_wait=0.5)


class Catalogue:
    """The provider data items are checked against, each piece fetched once per run."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self._cache: dict[tuple[str, Any], Any] = {}

    def once(self, key: tuple[str, Any], fetch: Callable[[], Any]) -> Any:
        """``fetch()`` the first time ``key`` is asked, then the same answer (None for a
        resource the provider does not have). A passing failure is retried (these are
        reads); one that lasts ends the validation with the provider's error."""
        if key not in self._cache:
            try:
                self._cache[key] = READS.call(fetch, idempotent=True)
            except NotFound:
                self._cache[key] = None
        return self._cache[key]

    def payer(self, payer_id: int) -> Any:
        return self.once(("payer", payer_id),
                          lambda: self.provider.money_transfer.payer(payer_id))

    def rates(self, payer_id: int) -> Any:
        return self.once(("rates", payer_id),
                          lambda: self.provider.money_transfer.payer_rates(payer_id))

    def method(self, method_id: int) -> Any:
        return self.once(("method", method_id),
                          lambda: self.provider.merchant_payment.payment_method(method_id))

    def merchant_accounts(self) -> list[str]:
        balances = self.once(("merchant balances", None),
                              self.provider.merchant_payment.balances)
        return sorted(b["currency"] for b in balances)


def validate_job(job: Job, provider: Provider | None, quote: bool = False,
                 stamp: str | None = None, check_balances: bool = True,
                 keep: Callable[[ValidItem], None] | None = None) -> Report:
    """Check every item; ``provider`` None checks the file alone (kinds without provider data).

    ``keep`` receives each item that passed every check (the engine runs those);
    ``check_balances`` compares the batch's totals with the balances (the engine does its
    own pre-flight over what is still to be confirmed)."""
    report = Report(str(job.path), job.kind, quoted=quote and job.kind == "remittance")
    catalogue = Catalogue(provider) if provider is not None else None
    stamp = stamp or time.strftime("%Y%m%d%H%M%S", time.gmtime())
    for result in iter_items(job):
        report.items += 1
        if not result.ok:
            report.invalid_rows.add(result.row)
            report.problems.extend(result.errors)  # type: ignore[union-attr]
            continue
        assert isinstance(result, ValidItem)
        found = list(_check(job.kind, result, catalogue))
        if found:
            report.invalid_rows.add(result.row)
            report.problems.extend(JobError(result.file, result.row, f, m) for f, m in found)
            continue
        if report.quoted and provider is not None:
            _quote(result, provider, stamp, report)
        else:
            _count(job.kind, result, catalogue, report)
        if keep is not None and result.row not in report.invalid_rows:
            keep(result)
    if provider is not None and job.kind == "remittance" and check_balances:
        _balances(job, provider, report)
    return report


# Per kind: the provider checks of one item, and the (currency, amount) it sends for the
# totals. Kinds not listed are checked against the job model only.
Check = Callable[[Any, "Catalogue"], Iterable[tuple[str, str]]]
Amount = Callable[[Any, "Catalogue | None"], "tuple[str, Decimal] | None"]


def _check_remittance(item: RemittanceItem, catalogue: Catalogue) -> Iterable[tuple[str, str]]:
    payer = catalogue.payer(item.payer_id)
    rates = catalogue.rates(item.payer_id) if payer is not None else None
    return check_remittance(item, payer, rates)


def _check_merchant_payment(item: MerchantPaymentItem, catalogue: Catalogue
                            ) -> Iterable[tuple[str, str]]:
    return check_merchant_payment(item, catalogue.method(item.payment_method_id),
                                  catalogue.merchant_accounts())


def _remittance_amount(item: RemittanceItem, catalogue: Catalogue | None
                       ) -> tuple[str, Decimal] | None:
    rates = catalogue.rates(item.payer_id) if catalogue is not None else None
    amount = source_estimate(item, rates)
    return (item.source.currency, amount) if amount is not None else None


def _merchant_payment_amount(item: MerchantPaymentItem, catalogue: Catalogue | None
                             ) -> tuple[str, Decimal] | None:
    # The side the mode names carries the amount (the other is the provider's to price).
    side = item.payment if item.mode == "PAYMENT_AMOUNT" else item.collection
    return (side.currency, side.amount) if side.amount is not None else None


CHECKS: dict[str, Check] = {
    "payment_order": collection.check_payment_order,
    "charge": collection.check_operation,
    "refund": collection.check_operation,
    "cancel": collection.check_operation,
    "payout": accounts.check_payout,
    "account_transfer": accounts.check_account_transfer,
    "remittance": _check_remittance,
    "merchant_payment": _check_merchant_payment,
    "legacy_pay": legacy_pay.check_legacy_pay,
    "onboarding": onboarding.check_onboarding,
}
AMOUNTS: dict[str, Amount] = {
    "payment_order": collection.payment_order_amount,
    "charge": collection.operation_amount,
    "refund": collection.operation_amount,
    "cancel": collection.operation_amount,
    "payout": accounts.payout_amount,
    "account_transfer": accounts.transfer_amount,
    "remittance": _remittance_amount,
    "merchant_payment": _merchant_payment_amount,
    "legacy_pay": legacy_pay.legacy_pay_amount,
}


def _check(kind: str, result: ValidItem, catalogue: Catalogue | None
           ) -> Iterable[tuple[str, str]]:
    check = CHECKS.get(kind)
    if catalogue is None or check is None:
        return ()
    return check(result.item, catalogue)


def _count(kind: str, result: ValidItem, catalogue: Catalogue | None, report: Report) -> None:
    amount_of = AMOUNTS.get(kind)
    sent = amount_of(result.item, catalogue) if amount_of is not None else None
    if sent is not None:
        report.add(*sent)


def _quote(result: ValidItem, provider: Provider, stamp: str, report: Report) -> None:
    item = result.item
    assert isinstance(item, RemittanceItem)
    body = {"external_id": f"dryrun-{stamp}-{result.external_id}",
            **item.model_dump(include={"payer_id", "mode", "source", "destination"},
                              exclude_none=True)}
    try:
        quotation = provider.money_transfer.create_quotation(body)
    except ProviderHTTPError as exc:
        report.invalid_rows.add(result.row)
        field = QUOTATION_FIELDS.get(exc.code or "", "quotation")
        report.problems.append(JobError(result.file, result.row, field,
                                        f"provider refused the quotation: {exc.code} "
                                        f"{exc.message}"))
        return
    report.add(quotation["sent_amount"]["currency"], quotation["sent_amount"]["amount"],
               quotation["fee"]["amount"])


def _balances(job: Job, provider: Provider, report: Report) -> None:
    balances = {b["currency"]: b for b in provider.money_transfer.balances()}
    for currency, t in sorted(report.totals.items()):
        needed = t.amount + t.fee
        balance = balances.get(currency)
        if balance is None:
            report.problems.append(JobError(str(job.path), None, "totals",
                                            f"no {currency} balance to send {needed:,} from"))
            continue
        usable = balance["available_balance"] + balance.get("credit_facility", 0)
        if needed > usable:
            report.problems.append(JobError(
                str(job.path), None, "totals",
                f"{currency} {needed:,} needed, {usable:,} available (with credit facility)"))
