"""The table of job kinds: each kind declared once, with every part runner needs of it.

A kind's module (``runner.kinds.<name>``) declares ``KIND``: the item's model (what a row
becomes), the provider checks made at validation (and the reads they need, started ahead),
the amount an item sends for the totals, the flow that pays it exactly once, the provider
client that flow drives, the example job in ``jobs/`` that runs as it is, and what makes two
of its items the same payment (``runner.kinds.same``). Adding a kind
is one new module and its line in ``MODULES``; ``tests/test_kinds.py`` checks that every kind
has every part.

The table is read on first use rather than at import: the kinds' parts live in every layer
(job models, validation, engine), and each of those layers asks the table about a job's kind.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.engine.flow import Flow
    from runner.job.fields import JobModel
    from runner.job.loading import ValidItem
    from runner.payees.checks import Payee
    from runner.provider import Provider
    from runner.provider.retry import RetryPolicy
    from runner.validation.catalogue import Catalogue

# One line per kind: the module under runner/kinds/ that declares it.
MODULES = (
    "remittance",
    "merchant_payment",
    "payout",
    "account_transfer",
    "payment_order",
    "charge",
    "refund",
    "cancel",
    "legacy_pay",
    "onboarding",
)

Problems = Iterable[tuple[str, str]]  # (field, message) of one item


@dataclass(frozen=True)
class Price:
    """What one item sends, in ``currency``: the amount, and when known the fee (from a
    quotation) and the rate (``rate``: the provider's published rate for it, read with a
    GET; ``quoted_rate``: a real quotation's), with the name of that rate; and what its
    beneficiary receives (``received`` in ``received_currency``: a quotation's, the row's,
    or what the published rate gives)."""

    currency: str
    amount: Decimal
    fee: Decimal | None = None
    rate: Decimal | None = None
    quoted_rate: Decimal | None = None
    rate_name: str = ""
    received_currency: str = ""
    received: Decimal | None = None


@dataclass(frozen=True)
class Kind:
    name: str
    item: type[JobModel]
    flow: type[Flow[Any, Any]]
    client: Callable[[Provider], Any]
    example: str  # a job in jobs/ that runs as it is against the embedded sandbox
    # Validation against the provider's data: the problems of one item, the reads that
    # check makes (started ahead of it), and the (currency, amount) it sends.
    check: Callable[[Any, Catalogue], Problems] | None = None
    wants: Callable[[Any, Catalogue], None] | None = None
    amount: Callable[[Any, Catalogue | None], tuple[str, Decimal] | None] | None = None
    # What the beneficiary receives, (currency, amount), as the provider will price it.
    receives: Callable[[Any, Catalogue], tuple[str, Decimal] | None] | None = None
    # The provider's published rate an item converts at, (name, rate), for a plan; a plan
    # applied later is refused when it moved too much (run.max_rate_change).
    rate: Callable[[Any, Catalogue], tuple[str, Decimal] | None] | None = None
    # `validate --quote`, `plan --quote`, a plan's fee estimates: a real quotation of one
    # item in a dry-run namespace (its amount, fee and rate), asked as the policy retries a
    # run's calls, or raises the provider's last error.
    quote: Callable[[ValidItem, Provider, str, RetryPolicy], Price] | None = None
    # What each balance the batch draws from can give, for the check of the totals.
    funds: Callable[[Provider], dict[str, Decimal]] | None = None
    # Who an item pays, for the payee check before money moves (runner.payees); None: the
    # provider offers no such check for this kind.
    payee: Callable[[Any], Payee] | None = None
    # What makes two items of one batch the same payment (runner.kinds.same: the parts
    # compared, None when the item names nobody to compare), and those parts in words.
    same_payment: Callable[[Any], tuple[str, ...] | None] | None = None
    same_payment_is: str = ""


def kinds() -> dict[str, Kind]:
    """Every kind, by name, in the order of ``MODULES``."""
    return {name: kind_named(name) for name in MODULES}


@functools.cache
def kind_named(name: str) -> Kind:
    """The kind called ``name`` (the module of that name: a run imports no other kind's
    models, checks and flow); KeyError for an unknown one."""
    if name not in MODULES:
        raise KeyError(name)
    kind: Kind = importlib.import_module(f"runner.kinds.{name}").KIND
    return kind
