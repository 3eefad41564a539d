"""What a job came to, read from the state: the batch's one read model.

``Summary`` answers finance's questions after a run: who was paid, what it cost (per
currency), what failed and why (the provider's code and message), what needs a person and
what to check, and what is still pending. Every view of a batch reads it: the closing lines
of ``runner run`` and ``runner status`` (``status_lines``), ``runner report`` in every format,
the summary files and the email, and the run's own exit code (``problems``). It is built from
the job's items and its latest run (read, never written), so it can be built at any time.

Nothing secret reaches it: beneficiaries come from the items' ``summary`` column (names and
masked identifiers), and every text taken from the provider is scrubbed of the job's
credentials and of anything shaped like a card number (``scrub``).

An item's ``details`` column (JSON: what the provider gave to finish or show the item, like a
merchant payment's QR code and instructions, a payment order's ``payment_url``, the ids of an
onboarding chain) becomes ``Detail`` lines, whatever the kind: a name and a text, or, for a
list of ``{channel, steps}`` objects, the instructions by channel.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from runner.cards import luhn
from runner.state import Approval, ItemRecord, RunRecord, StateStore

STATES = ("settled", "pending", "awaiting_confirm", "failed", "refused", "invalid",
          "conflict", "unknown", "in_doubt")
# The states that make a run exit 1: an item that did not end well, or may not have.
PROBLEMS = ("failed", "refused", "invalid", "conflict", "unknown", "in_doubt")
REVIEW = ("conflict", "unknown", "in_doubt")
# Exit codes besides 0, 1, 2: a run stopped because the balances cannot cover what it would
# pay (nothing was paid), and `runner status` while items are still on their way.
FUNDS_SHORT = 4
PENDING = 5
NEEDS_PERSON = {"conflict": "the provider holds a different payment under this external_id, "
                            "or the item changed after its payment started",
                "unknown": "the outcome of a call could not be learnt: check the payment at "
                           "the provider before anything else"}
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")


@dataclass(frozen=True)
class Instruction:
    """How to pay through one channel (USSD, an app ...): steps in order."""

    channel: str
    steps: tuple[str, ...]


@dataclass(frozen=True)
class Detail:
    """One entry of an item's details: ``value`` text, or ``instructions`` by channel."""

    name: str
    value: str = ""
    instructions: tuple[Instruction, ...] = ()


@dataclass(frozen=True)
class ItemLine:
    """One item as reports show it; amounts are None until the provider quoted them."""

    external_id: str
    row: int
    state: str
    beneficiary: str
    identifier: str
    payer_id: int | None
    step: str
    status: str
    source_currency: str
    source_amount: Decimal | None
    fee: Decimal | None
    destination_currency: str
    destination_amount: Decimal | None
    transaction_id: int | str | None
    code: str
    message: str
    check: str  # what a person should look at, or ""
    details: tuple[Detail, ...] = ()
    intent: str = ""  # the call whose answer is not known yet (in doubt)


@dataclass(frozen=True)
class CurrencyTotal:
    """Settled items only: sent and fees in a source currency, received in a destination.
    ``fees_known``: some item sent in this currency has a fee from the provider (the kinds
    whose provider shows none leave fees and cost unsaid, rather than claim 0)."""

    currency: str
    sent: Decimal = Decimal(0)
    fees: Decimal = Decimal(0)
    received: Decimal = Decimal(0)
    fees_known: bool = False
    senders: int = 0  # settled items sent in this currency


    @property
    def cost(self) -> Decimal:
        return self.sent + self.fees


@dataclass(frozen=True)
class RunTimes:
    id: int
    started_at: datetime
    ended_at: datetime | None
    exit_code: int | None
    state: str  # ended, running, interrupted
    message: str = ""  # why it stopped (for a run stopped short of funds: what lacked)
    approval: Approval | None = None  # who planned and approved it (`runner apply`)

    @property
    def duration(self) -> timedelta | None:
        return None if self.ended_at is None else self.ended_at - self.started_at


@dataclass
class Summary:
    job: str
    run: RunTimes | None
    items: list[ItemLine]
    totals: list[CurrencyTotal]
    counts: dict[str, int]
    refused: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    csv_path: str | None = None
    generated_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def _of(self, *states: str) -> list[ItemLine]:
        return [i for i in self.items if i.state in states]

    @property
    def failed(self) -> list[ItemLine]:
        return self._of("failed", "refused")

    @property
    def needs_person(self) -> list[ItemLine]:
        return self._of(*REVIEW)

    @property
    def pending(self) -> list[ItemLine]:
        return self._of("pending")

    @property
    def awaiting_confirm(self) -> list[ItemLine]:
        return self._of("awaiting_confirm")

    @property
    def with_details(self) -> list[ItemLine]:
        """Items the provider gave details for (QR code, instructions, payment URL ...)."""
        return [i for i in self.items if i.details]

    @property
    def items_problems(self) -> bool:
        """An item did not end well, or may not have: what makes a run exit 1."""
        return any(self.counts.get(k) for k in PROBLEMS)

    @property
    def problems(self) -> bool:
        """Anything a person should hear about: what makes a run exit non-zero."""
        bad_run = self.run is not None and self.run.exit_code not in (None, 0)
        return bad_run or self.items_problems

    @property
    def status_code(self) -> int:
        """`runner status`'s exit code: 1 when an item did not end well (or may not have),
        else PENDING while any is on its way (or none was made yet), else 0."""
        if self.items_problems:
            return 1
        if not self.items or self.counts.get("pending") or self.counts.get("awaiting_confirm"):
            return PENDING
        return 0

    @property
    def headline(self) -> str:
        """``payroll-2026-11: 248 paid, 2 failed, 1 needs review``: the default subject;
        ``payroll-2026-11: nothing paid, funds short: EUR 2,626,416.48 needed, ...`` when the
        latest run stopped because the balances could not cover the batch."""
        c = self.counts
        review = sum(c.get(k, 0) for k in REVIEW)
        if self.run is not None and self.run.exit_code == FUNDS_SHORT:
            before = f" ({c['settled']} paid before)" if c.get("settled") else ""
            return f"{self.job}: nothing paid, funds short: {self.run.message}{before}"
        parts = [f"{c.get('settled', 0)} paid"]
        parts += [f"{c[k]} {k}" for k in ("failed", "refused", "invalid") if c.get(k)]
        if review:
            parts.append(f"{review} {'needs' if review == 1 else 'need'} review")
        if c.get("pending"):
            parts.append(f"{c['pending']} pending")
        if c.get("awaiting_confirm"):
            parts.append(f"{c['awaiting_confirm']} awaiting confirmation")
        return f"{self.job}: {', '.join(parts)}"

    def as_dict(self) -> dict[str, Any]:
        run = None
        if self.run is not None:
            duration = self.run.duration
            approval = self.run.approval
            run = {"id": self.run.id, "state": self.run.state,
                   "started_at": _iso(self.run.started_at), "ended_at": _iso(self.run.ended_at),
                   "duration_seconds": None if duration is None else duration.total_seconds(),
                   "exit_code": self.run.exit_code, "message": self.run.message or None,
                   "approval": asdict(approval) if approval is not None else None}
        return {
            "job": self.job, "headline": self.headline, "generated_at": _iso(self.generated_at),
            "run": run, "counts": {**{k: 0 for k in STATES}, **self.counts},
            "totals": [{"currency": t.currency, "sent": t.sent,
                        "fees": t.fees if t.fees_known else None, "received": t.received}
                       for t in self.totals],
            "failed": [asdict(i) for i in self.failed],
            "needs_person": [asdict(i) for i in self.needs_person],
            "pending": [asdict(i) for i in self.pending],
            "awaiting_confirm": [asdict(i) for i in self.awaiting_confirm],
            "details": [{"external_id": i.external_id, "beneficiary": i.beneficiary,
                         "state": i.state, "details": [asdict(d) for d in i.details]}
                        for i in self.with_details],
            "refused": [{"external_id": e, "why": w} for e, w in self.refused],
            "notes": self.notes, "csv": self.csv_path, "items": len(self.items)}


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat().replace("+00:00", "Z")


def build_summary(store: StateStore, job_name: str, *, secrets: Iterable[str] = (),
                  refused: Iterable[tuple[str, str]] = (),
                  notes: Iterable[str] = ()) -> Summary:
    """The summary of ``job_name`` as the state holds it now.

    ``secrets`` (the job's credentials) are blanked out of every text; ``refused`` and
    ``notes`` are what only the run that just ended knows (the items another job holds,
    with why; its closing message): the state keeps only their count."""
    clean = Scrubber(secrets)
    items = [_item(r, clean) for r in store.items(job_name)]
    run = store.latest_run(job_name)
    counts = {k: 0 for k in STATES}
    for i in items:
        counts[i.state] += 1
    # Refused (rule 7) and invalid items never reach this job's rows: the run counted them.
    for key in ("refused", "invalid"):
        if run is not None:
            counts[key] = int(run.counts.get(key, 0))
    return Summary(job_name, run_times(run), items, _totals(items),
                   {k: n for k, n in counts.items() if n},
                   [(e, clean(w)) for e, w in refused],
                   [clean(n) for n in notes if n])


def _totals(items: list[ItemLine]) -> list[CurrencyTotal]:
    sums: dict[str, dict[str, Any]] = {}
    for i in items:
        if i.state != "settled":
            continue
        if i.source_currency and i.source_amount is not None:
            src = sums.setdefault(i.source_currency, {})
            src["sent"] = src.get("sent", Decimal(0)) + i.source_amount
            src["senders"] = src.get("senders", 0) + 1
            if i.fee is not None:
                src["fees"] = src.get("fees", Decimal(0)) + i.fee
                src["fees_known"] = True
        if i.destination_currency and i.destination_amount is not None:
            dst = sums.setdefault(i.destination_currency, {})
            dst["received"] = dst.get("received", Decimal(0)) + i.destination_amount
    return [CurrencyTotal(c, **sums[c]) for c in sorted(sums)]


def _item(r: ItemRecord, clean: Scrubber) -> ItemLine:
    who = json.loads(r.summary or "{}")
    ident = ", ".join(f"{k} {v}" for k, v in sorted((who.get("identifier") or {}).items()))
    return ItemLine(
        external_id=r.external_id, row=r.row, state=r.state,
        beneficiary=clean(who.get("beneficiary") or ""), identifier=clean(ident),
        payer_id=who.get("payer_id"), step=r.step or "", status=r.status or "",
        source_currency=r.source_currency or "", source_amount=r.source_amount,
        fee=r.fee, destination_currency=r.destination_currency or "",
        destination_amount=r.destination_amount,
        transaction_id=r.transaction_id, code=clean(r.error_code or ""),
        message=clean(r.error_message or r.status_message or ""),
        check=clean(_check(r)), details=_details(r.details, clean), intent=r.intent or "")


def _details(text: str | None, clean: Scrubber) -> tuple[Detail, ...]:
    """The details column as lines: scalars as text, nested objects by dotted name, lists of
    ``{channel, steps}`` as instructions, other lists joined."""
    if not text:
        return ()
    try:
        value = json.loads(text)
    except ValueError:
        return (Detail("details", clean(text)),)
    if not isinstance(value, dict):
        return (Detail("details", clean(_text(value))),)
    return tuple(_detail_lines(value, "", clean))


def _detail_lines(values: dict[str, Any], prefix: str, clean: Scrubber) -> Iterable[Detail]:
    for key, value in values.items():
        name = f"{prefix}{key}"
        if value is None or value == "" or value == [] or value == {}:
            continue
        if isinstance(value, dict):
            yield from _detail_lines(value, f"{name}.", clean)
        elif isinstance(value, list) and all(
                isinstance(v, dict) and "steps" in v for v in value):
            yield Detail(name, instructions=tuple(
                Instruction(clean(_text(v.get("channel") or "")),
                            tuple(clean(_text(s)) for s in v.get("steps") or ()))
                for v in value))
        elif isinstance(value, list):
            yield Detail(name, clean(", ".join(_text(v) for v in value)))
        else:
            yield Detail(name, clean(_text(value)))


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _check(r: ItemRecord) -> str:
    state = r.state
    if state == "in_doubt":
        return (f"the {r.intent} call was sent and its answer lost: look up the transaction "
                f"with external_id {r.ref} at the provider; the next run does this itself "
                f"before sending anything")
    if state in NEEDS_PERSON:
        return r.error_message or NEEDS_PERSON[state]
    if state == "pending" and r.step == "confirmed":
        return (f"confirmed, status {r.status or 'unknown'}: not final yet; the next run "
                f"follows it")
    if state == "pending":
        return f"not confirmed yet (stopped at {r.step}); the next run continues it"
    if state == "awaiting_confirm":
        return "created, not confirmed: `runner confirm` sends it"
    return ""


def run_times(run: RunRecord | None) -> RunTimes | None:
    if run is None:
        return None
    return RunTimes(run.id, _when(run.started_at),
                    _when(run.ended_at) if run.ended_at else None, run.exit_code, run.state,
                    run.message, run.approval)


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Scrubber:
    """Blanks the job's secrets and masks card-shaped numbers (Luhn-valid, 13-19 digits)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # Very short values would blank ordinary words; real credentials are longer.
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return _CARD.sub(_mask_card, text)


def _mask_card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match[0])
    if not luhn(digits):
        return match[0]
    return "*" * (len(digits) - 4) + digits[-4:]
