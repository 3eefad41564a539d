"""Validation of a whole job against the provider: every problem, before a cent moves.

``validate_job`` streams the job's items (``runner.job.iter_items``), checks each valid item
against the provider's data its kind's check reads (``runner.kinds``; each piece fetched once
per run, see ``catalogue``), adds up what the batch sends per currency and compares it with
the balances. With ``quote``, it also asks
real quotations in a ``dryrun-`` external_id namespace (they expire; nothing is confirmed) to
show the true cost with fees. Nothing else is POSTed.

The balances and the quotations are asked as a run asks its calls (``policy``: the job's
``run.retry``, honouring Retry-After). A provider that still cannot answer them, says
"later", or refuses the configuration stops the validation with 75 or 78
(``runner.errors.down``, ``stop_if_down``): it says nothing of the rows. Only the provider's
refusal of one row's quotation is that row's problem.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from runner.errors import JobError, ProviderError, stop_if_down
from runner.job import Job, ValidItem, iter_items
from runner.kinds import Kind, Price, kind_named
from runner.provider import Provider
from runner.provider.retry import RetryPolicy
from runner.state import StateStore
from runner.validation.catalogue import LOOKAHEAD, Catalogue


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


Keep = Callable[[ValidItem, Price | None], None]
# What stops a validation or a plan that the provider cannot answer (``stop_if_down``).
QUOTATIONS = "the dry-run quotations stopped before anything was paid"
BALANCES = "reading the balances of the payer account"


def dry_run_stamp() -> str:
    """The namespace of one command's dry-run quotations (``dryrun-<stamp>-``): the UTC time
    to the microsecond, so that two commands never share one; within it, a quotation asked
    again after an answer in doubt finds the one it made."""
    now = time.time()
    return f"{time.strftime('%Y%m%d%H%M%S', time.gmtime(now))}{int(now % 1 * 1e6):06d}"


def policy_of(job: Job) -> RetryPolicy:
    """The retry policy of the job's calls (``run.retry``), as a run has it."""
    return RetryPolicy(job.run.retry.attempts, float(job.run.retry.max_wait))


def validate_job(job: Job, provider: Provider | None, quote: bool = False,
                 stamp: str | None = None, check_balances: bool = True,
                 keep: Keep | None = None, state: StateStore | None = None,
                 policy: RetryPolicy | None = None) -> Report:
    """Check every item; ``provider`` None checks the file alone (kinds without provider data).

    ``keep`` receives each item that passed every check (the engine runs those) with what it
    sends (its amount, with the fee when quoted, and the rate the provider publishes for it);
    ``check_balances`` compares the batch's totals with the balances (the engine does its
    own pre-flight over what is still to be confirmed); ``state`` is the run's, whose records
    of what was sent the checks take into account; ``policy`` retries the balances and the
    quotations (by default the job's, ``policy_of``)."""
    kind = kind_named(job.kind)
    policy = policy or policy_of(job)
    report = Report(str(job.path), job.kind, quoted=quote and kind.quote is not None)
    catalogue = (Catalogue(provider, job.run.concurrency, state, job.name)
                 if provider is not None else None)
    stamp = stamp or dry_run_stamp()
    ahead: deque[Any] = deque()
    try:
        for result in iter_items(job):
            if kind.wants is not None and catalogue is not None \
                    and isinstance(result, ValidItem):
                kind.wants(result.item, catalogue)
            ahead.append(result)
            if len(ahead) > LOOKAHEAD:
                _one(kind, ahead.popleft(), catalogue, provider, stamp, report, keep, policy)
        while ahead:
            _one(kind, ahead.popleft(), catalogue, provider, stamp, report, keep, policy)
    finally:
        if catalogue is not None:
            catalogue.close()
    if provider is not None and kind.funds is not None and check_balances:
        funds = kind.funds
        try:
            held = policy.call(lambda: funds(provider), idempotent=True)
        except ProviderError as exc:
            stop_if_down(exc, f"{BALANCES} failed", read=True)
            raise
        _balances(job, held, report)
    return report


def _one(kind: Kind, result: Any, catalogue: Catalogue | None, provider: Provider | None,
         stamp: str, report: Report, keep: Keep | None, policy: RetryPolicy) -> None:
    report.items += 1
    if not result.ok:
        report.invalid_rows.add(result.row)
        report.problems.extend(result.errors)
        return
    assert isinstance(result, ValidItem)
    found = [] if catalogue is None or kind.check is None else \
        list(kind.check(result.item, catalogue))
    if found:
        report.invalid_rows.add(result.row)
        report.problems.extend(JobError(result.file, result.row, f, m) for f, m in found)
        return
    price = None
    if report.quoted and provider is not None and kind.quote is not None:
        try:
            price = kind.quote(result, provider, stamp, policy)
        except ProviderError as exc:
            stop_if_down(exc, QUOTATIONS, read=True)  # the provider's state, not the row's
            report.invalid_rows.add(result.row)
            field, message = quotation_problem(exc)
            report.problems.append(JobError(result.file, result.row, field, message))
            return
    elif kind.amount is not None:
        sent = kind.amount(result.item, catalogue)
        price = None if sent is None else Price(*sent)
    if price is not None:
        rate = kind.rate(result.item, catalogue) if kind.rate and catalogue else None
        if rate is not None:
            price = replace(price, rate_name=rate[0], rate=rate[1])
        received = kind.receives(result.item, catalogue) \
            if kind.receives and catalogue and price.received is None else None
        if received is not None:
            price = replace(price, received_currency=received[0], received=received[1])
        report.add(price.currency, price.amount, price.fee or Decimal(0))
    if keep is not None:
        keep(result, price)


# Where a refused quotation points in the item.
QUOTATION_FIELDS = {"1003001": "payer_id", "1003002": "payer_id", "1003007": "payer_id",
                    "1003010": "destination.currency", "1000998": "source.country_iso_code",
                    "1003008": "destination.amount"}


def quotation_problem(exc: ProviderError) -> tuple[str, str]:
    """The field and message of a quotation the provider refused."""
    return (QUOTATION_FIELDS.get(exc.code or "", "quotation"),
            f"provider refused the quotation: {exc.code} {exc.message}")


def _balances(job: Job, funds: dict[str, Decimal], report: Report) -> None:
    for currency, t in sorted(report.totals.items()):
        needed = t.amount + t.fee
        usable = funds.get(currency)
        if usable is None:
            report.problems.append(JobError(str(job.path), None, "totals",
                                            f"no {currency} balance to send {needed:,} from"))
            continue
        if needed > usable:
            report.problems.append(JobError(
                str(job.path), None, "totals",
                f"{currency} {needed:,} needed, {usable:,} available (with credit facility)"))
