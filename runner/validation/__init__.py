"""Validation of a whole job against the provider: every problem, before a cent moves.

``validate_job`` streams the job's items (``runner.job.iter_items``), checks each valid item
against its payer or payment method (each fetched once per run, see ``rules``), adds up what
the batch sends per currency and compares it with the balances. With ``quote``, it also asks
real quotations in a ``dryrun-`` external_id namespace (they expire; nothing is confirmed) to
show the true cost with fees. Nothing else is POSTed.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from runner.errors import JobError, NotFound, ProviderHTTPError
from runner.job import Job, ValidItem, iter_items
from runner.job.merchant_payment import MerchantPaymentItem
from runner.job.money_transfer import RemittanceItem
from runner.provider import Provider
from runner.provider.retry import RetryPolicy
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
# How many items ahead of the one being checked have their reads started (``want``).
LOOKAHEAD = 256

Key = tuple[str, Any]
Read = tuple[Key, Callable[[], Any]]


def _answer(found: Any) -> Any:
    return found.result() if isinstance(found, Future) else found


def _read(fetch: Callable[[], Any]) -> Any:
    try:
        return READS.call(fetch, idempotent=True)
    except NotFound:
        return None


class Catalogue:
    """The provider data items are checked against, each piece fetched once per run.

    ``want`` starts a read in the background (at most ``workers`` at a time), so that the
    reads the next items need go out together while this one is checked; ``once`` waits for
    it. Only the validating thread calls them."""

    def __init__(self, provider: Provider, workers: int = 8) -> None:
        self.provider = provider
        self.workers = max(1, workers)
        self._cache: dict[Key, Any] = {}
        self._pool: ThreadPoolExecutor | None = None

    def want(self, key: Key, fetch: Callable[[], Any], after: Key | None = None) -> None:
        """Start reading ``key`` unless it is read or being read already; with ``after``
        (a key wanted earlier), only once that read has found something."""
        if key in self._cache:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="catalogue")
        if after is not None:
            first = self._cache[after]
            # Safe in the pool: ``after`` was submitted first, so it runs first.
            self._cache[key] = self._pool.submit(
                lambda: None if _answer(first) is None else _read(fetch))
        else:
            self._cache[key] = self._pool.submit(_read, fetch)

    def once(self, key: Key, fetch: Callable[[], Any]) -> Any:
        """``fetch()`` the first time ``key`` is asked (or the answer of the read ``want``
        started), then the same answer; None for a resource the provider does not have. A
        passing failure is retried (these are reads); one that lasts ends the validation
        with the provider's error."""
        found = self._cache.get(key, _MISSING)
        if found is _MISSING:
            found = _read(fetch)
        elif isinstance(found, Future):
            found = found.result()
        self._cache[key] = found
        return found

    def close(self) -> None:
        """Wait for the reads in flight; those not started are dropped."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def payer(self, payer_id: int) -> Read:
        return ("payer", payer_id), lambda: self.provider.money_transfer.payer(payer_id)

    def rates(self, payer_id: int) -> Read:
        return ("rates", payer_id), lambda: self.provider.money_transfer.payer_rates(payer_id)

    def method(self, method_id: int) -> Read:
        return (("method", method_id),
                lambda: self.provider.merchant_payment.payment_method(method_id))

    def merchant_balances(self) -> Read:
        return ("merchant balances", None), self.provider.merchant_payment.balances

    def merchant_accounts(self) -> list[str]:
        return sorted(b["currency"] for b in self.once(*self.merchant_balances()))


_MISSING = object()


def validate_job(job: Job, provider: Provider | None, quote: bool = False,
                 stamp: str | None = None, check_balances: bool = True,
                 keep: Callable[[ValidItem], None] | None = None) -> Report:
    """Check every item; ``provider`` None checks the file alone (kinds without provider data).

    ``keep`` receives each item that passed every check (the engine runs those);
    ``check_balances`` compares the batch's totals with the balances (the engine does its
    own pre-flight over what is still to be confirmed)."""
    report = Report(str(job.path), job.kind, quoted=quote and job.kind == "remittance")
    catalogue = (Catalogue(provider, workers=job.run.concurrency) if provider is not None
                 else None)
    stamp = stamp or time.strftime("%Y%m%d%H%M%S", time.gmtime())
    want = WANTS.get(job.kind) if catalogue is not None else None
    ahead: deque[Any] = deque()
    try:
        for result in iter_items(job):
            if want is not None and catalogue is not None and isinstance(result, ValidItem):
                want(result.item, catalogue)
            ahead.append(result)
            if len(ahead) > LOOKAHEAD:
                _one(job, ahead.popleft(), catalogue, provider, stamp, report, keep)
        while ahead:
            _one(job, ahead.popleft(), catalogue, provider, stamp, report, keep)
    finally:
        if catalogue is not None:
            catalogue.close()
    if provider is not None and job.kind == "remittance" and check_balances:
        _balances(job, provider, report)
    return report


def _one(job: Job, result: Any, catalogue: Catalogue | None, provider: Provider | None,
         stamp: str, report: Report, keep: Callable[[ValidItem], None] | None) -> None:
    report.items += 1
    if not result.ok:
        report.invalid_rows.add(result.row)
        report.problems.extend(result.errors)
        return
    assert isinstance(result, ValidItem)
    found = list(_check(job.kind, result, catalogue))
    if found:
        report.invalid_rows.add(result.row)
        report.problems.extend(JobError(result.file, result.row, f, m) for f, m in found)
        return
    if report.quoted and provider is not None:
        _quote(result, provider, stamp, report)
    else:
        _count(job.kind, result, catalogue, report)
    if keep is not None and result.row not in report.invalid_rows:
        keep(result)


# Per kind: the provider checks of one item, and the (currency, amount) it sends for the
# totals. Kinds not listed are checked against the job model only.
Check = Callable[[Any, "Catalogue"], Iterable[tuple[str, str]]]
Amount = Callable[[Any, "Catalogue | None"], "tuple[str, Decimal] | None"]


def _check_remittance(item: RemittanceItem, catalogue: Catalogue) -> Iterable[tuple[str, str]]:
    payer = catalogue.once(*catalogue.payer(item.payer_id))
    rates = catalogue.once(*catalogue.rates(item.payer_id)) if payer is not None else None
    return check_remittance(item, payer, rates)


def _want_remittance(item: RemittanceItem, catalogue: Catalogue) -> None:
    payer = catalogue.payer(item.payer_id)
    catalogue.want(*payer)
    catalogue.want(*catalogue.rates(item.payer_id), after=payer[0])


def _check_merchant_payment(item: MerchantPaymentItem, catalogue: Catalogue
                            ) -> Iterable[tuple[str, str]]:
    return check_merchant_payment(item, catalogue.once(*catalogue.method(item.payment_method_id)),
                                  catalogue.merchant_accounts())


def _want_merchant_payment(item: MerchantPaymentItem, catalogue: Catalogue) -> None:
    catalogue.want(*catalogue.method(item.payment_method_id))
    catalogue.want(*catalogue.merchant_balances())


def _remittance_amount(item: RemittanceItem, catalogue: Catalogue | None
                       ) -> tuple[str, Decimal] | None:
    rates = catalogue.once(*catalogue.rates(item.payer_id)) if catalogue is not None else None
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
# Per kind: the reads its check will need, started ahead (``Catalogue.want``).
WANTS: dict[str, Callable[[Any, Catalogue], None]] = {
    "payment_order": collection.want_payment_order,
    "charge": collection.want_operation,
    "refund": collection.want_operation,
    "cancel": collection.want_operation,
    "payout": accounts.want_payout,
    "account_transfer": accounts.want_account_transfer,
    "remittance": _want_remittance,
    "merchant_payment": _want_merchant_payment,
    "onboarding": onboarding.want_onboarding,
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
