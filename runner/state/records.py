"""What the state database holds, as typed records: an item, one call made for it, a run.

These (and ``history``'s) are the only shapes in which the state leaves ``runner.state``: the
engine, the validation, the summary and the command line read attributes, never column
names. An
``ItemRecord`` is changed through ``ItemChanges`` (checked by mypy: a misspelt column or an
amount given as text is a type error), in memory by ``apply`` and in the database by the
store's ``update_item``/``end_attempt``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

from runner.lifecycle import Changes, Outcome, Step
from runner.state.history import Approval, EarlierPaid, derived_ref

# Provider ids are numbers in the money transfer service (transactions, quotations) and text
# in the collection service (``PO0000000001``, ``QT0000000001``).
ProviderId = int | str
AMOUNTS = ("source_amount", "fee", "destination_amount")
PROVIDER_IDS = ("quotation_id", "transaction_id")
_WHOLE_NUMBER = re.compile(r"-?\d+")


def now_iso() -> str:
    """A record's stamp: now, in UTC, to the microsecond."""
    # On every write: isoformat is several times cheaper than strftime.
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def provider_id(value: Any) -> ProviderId | None:
    """A provider's id as the state gives it back: a whole number as ``int`` (the money
    transfer service's ids, which SQLite's column affinity keeps as numbers and PostgreSQL's
    text column as text), anything else as it is (``PO0000000001``)."""
    if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value):
        return int(value)
    return value  # type: ignore[no-any-return]


class ItemChanges(Changes, total=False):
    """The columns of an item a flow may change (all but its identity and stamps): those of
    its life (``runner.lifecycle.Changes``, which only its moves write) and its facts."""

    row: int
    fingerprint: str
    provider_ref: str | None
    quotation_id: ProviderId | None
    expires_at: str | None
    transaction_id: ProviderId | None
    source_currency: str | None
    source_amount: Decimal | None
    fee: Decimal | None
    destination_currency: str | None
    destination_amount: Decimal | None
    status: str | None
    status_class: str | None
    status_message: str | None
    summary: str | None
    details: str | None
    changed_to: str | None
    payee: str | None
    earlier_paid: str | None


@dataclass(slots=True)
class ItemRecord:
    """One item of a job as the state holds it, keyed by its external_id.

    ``step`` is how far it went (new, quoted, created, confirmed, final, or a kind's own
    steps); ``intent`` the call sent whose answer is not known yet (not None: in doubt);
    ``attempt`` 1, or N for the ``-rN`` attempt after an expiry; ``summary`` (who and how
    much, masked) and ``details`` (what the provider gave to finish or show it) are JSON;
    ``changed_to``: the fingerprint of what the job's row asks now, when it is not what was
    paid (or is on its way): the item is not paid again, and is listed as changed;
    ``earlier_paid``: the earlier attempts (before ``-fN``) the provider shows paid after all
    (JSON, ``history.EarlierPaid``), as `runner reconcile` found them.
    """

    external_id: str
    job_name: str
    kind: str
    row: int
    fingerprint: str = ""
    step: str = Step.NEW
    intent: str | None = None
    attempt: int = 1
    lineage: int = 1
    provider_ref: str | None = None
    quotation_id: ProviderId | None = None
    expires_at: str | None = None
    transaction_id: ProviderId | None = None
    source_currency: str | None = None
    source_amount: Decimal | None = None
    fee: Decimal | None = None
    destination_currency: str | None = None
    destination_amount: Decimal | None = None
    status: str | None = None
    status_class: str | None = None
    status_message: str | None = None
    outcome: str = Outcome.PENDING
    error_code: str | None = None
    error_message: str | None = None
    summary: str | None = None
    details: str | None = None
    changed_to: str | None = None
    earlier_paid: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    payee: str | None = None  # the payee check's finding (JSON), when one was made
    polls: int = 0  # how many times its final status was read since it was confirmed

    @property
    def ref(self) -> str:
        """The external_id of the current attempt: E, then E-r2, E-r3 ...; after a retry of
        the failed item, E-f2 (then E-f2-r2 ...)."""
        return derived_ref(self.external_id, self.lineage, self.attempt)

    @property
    def paid_before(self) -> list[EarlierPaid]:
        """The earlier attempts the provider shows paid after all (``earlier_paid``)."""
        return [EarlierPaid(**e) for e in json.loads(self.earlier_paid or "[]")]

    def apply(self, changes: Changes) -> None:
        for name, value in changes.items():
            setattr(self, name, value)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ItemRecord:
        """A record from the database's columns, on either backend (amounts are stored as
        exact text, provider ids as ``provider_id`` reads them; the columns of cooperating
        workers' claims are not the item's)."""
        row = {name: row[name] for name in COLUMNS if name in row}
        for name in AMOUNTS:
            value = row.get(name)
            if value is not None:
                row[name] = Decimal(value)
        for name in PROVIDER_IDS:
            row[name] = provider_id(row.get(name))
        return cls(**row)


COLUMNS = tuple(f.name for f in fields(ItemRecord))


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One call made for an item: its step, what was asked (a summary of the request, no
    secrets), when, and what came of it (ok, error, in_doubt; or by hand: settled, failed)."""

    id: int
    run_id: int | None
    external_id: str
    step: str
    request: str | None
    started_at: str
    finished_at: str | None
    result: str | None
    http_status: int | None
    code: str | None
    message: str | None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run of a job. ``state``: ``running`` while its lease is alive, ``ended``, or
    ``interrupted`` (no end, no live lease). ``counts`` are the item states at its end (and,
    from its checks on, how many items it refused or found invalid); ``approval`` who
    planned and approved it, for a run of ``runner apply``."""

    id: int
    job_name: str
    started_at: str
    ended_at: str | None
    exit_code: int | None
    state: Literal["running", "ended", "interrupted"]
    counts: dict[str, int] = field(default_factory=dict)
    message: str = ""  # its closing message (why it stopped, when it did)
    approval: Approval | None = None
    # What its summary said, as a digest (None: it ended with no summary), and whether that
    # summary was emailed: a run whose summary says what the last one mailed said mails
    # nothing. ``calls``: the calls it sent to the provider (the attempts table), by step.
    digest: str | None = None
    mailed: bool = False
    calls: dict[str, int] = field(default_factory=dict)
    # The digest of its inputs (job, rows, templates) once they were validated, and the
    # closing lines it printed (None: not kept).
    inputs: str | None = None
    lines: tuple[str, ...] | None = None
    allow_duplicates: bool = False  # it ran with --allow-duplicates (or applied such a plan)


@dataclass(frozen=True, slots=True)
class PlanFileRecord:
    """A plan file as `runner plan -o` made it (``content``: its JSON, without signatures),
    its digest, and the run that applies it (None: not applied yet)."""

    id: str
    job_name: str
    digest: str
    content: str
    made_at: str
    run_id: int | None = None


@dataclass(frozen=True, slots=True)
class WorkLeft:
    """A job's items in the state: how many, how many a run would still work on (not final
    and not a conflict), and when the latest of them changed."""

    items: int
    open: int
    last_update: str | None


@dataclass(slots=True)
class Staged:
    """One valid item of a run's plan, staged in the state before anything is recorded of
    it (``StateStore.stage_plan``): what the run does with it (``action``, as
    ``runner.engine.plan`` names it), the external_id its next call goes out under, the
    fingerprint of its request and whether it differs from the recorded one, its summary for
    reports (JSON; a new item's), the balance it draws on with its estimated cost, why it
    is skipped, in doubt, held or sent again, and the digest of what it pays."""

    external_id: str
    row: int
    action: str
    ref: str = ""
    fingerprint: str = ""
    changed: bool = False
    summary: str | None = None
    balance: str | None = None
    cost: Decimal | None = None
    why: str = ""
    payee: str | None = None  # the payee check's finding (JSON)
    content: str | None = None  # what it pays, as a digest (``runner.engine.duplicates``)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Staged:
        values = {name: row[name] for name in STAGED}
        values["changed"] = bool(values["changed"])
        values["cost"] = None if values["cost"] is None else Decimal(values["cost"])
        return cls(**values)


STAGED = tuple(f.name for f in fields(Staged))


@dataclass(frozen=True, slots=True)
class PayeeCheck:
    """What the provider answered about one account (``runner.payees``): its status, and the
    names of who holds it (None: not asked, or the payer tells no name), when it answered.
    ``account`` is a hash of the service, payer and identifier; ``identifier`` the
    identifier masked, for reading."""

    account: str
    service: str
    payer: int
    identifier: str
    account_status: str
    holder: tuple[str, ...] | None
    checked_at: float


@dataclass(frozen=True, slots=True)
class PayeeAcceptance:
    """One person's acceptance of a payee despite its check (``runner resolve
    --accept-payee``): the account and name accepted (trusted in every later batch on this
    state while the account and the name are these), the item it was accepted for, who
    (``signer``: the key's fingerprint under four eyes, else the user), where, when and why,
    and the signature (``runner.payees.accept``) of a signed one."""

    account: str
    name: str
    signer: str
    job_name: str
    external_id: str
    accepted_by: str
    accepted_on: str
    accepted_at: str
    note: str
    signature: str | None = None
