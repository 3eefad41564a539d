"""One item as every report shows it (``ItemLine``), made from its state record: who (names
and masked identifiers), how much, where it is (the provider's status, as a name and, where
the provider has one, a numeric code), when (recorded, confirmed, final), what went wrong and
what a person should check. The read model (``model.Summary``) holds a list of these.

Nothing secret reaches a line: beneficiaries come from the items' ``summary`` column, and
every text taken from the provider is scrubbed of the job's credentials and of anything
shaped like a card number (``Scrubber``).

An item's ``details`` column (JSON: what the provider gave to finish or show the item, like a
merchant payment's QR code and instructions, a payment order's ``payment_url``, the ids of an
onboarding chain) becomes ``Detail`` lines, whatever the kind: a name and a text, or, for a
list of ``{channel, steps}`` objects, the instructions by channel.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from runner import lifecycle
from runner.cards import luhn
from runner.credentials import HELD, Credential, Redactor
from runner.lifecycle import Outcome, Shown, Step
from runner.payees.checks import Finding
from runner.state import ItemRecord

NEEDS_PERSON = {Shown.CONFLICT: "the provider holds a different payment under this external_id, "
                            "or the item changed after its payment started",
                Shown.UNKNOWN: "the outcome of a call could not be learnt: check the payment at "
                           "the provider before anything else",
                Shown.HELD: "held by the payee check: fix the row, or accept the payee "
                        "(`runner resolve JOB ID --accept-payee`)"}
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
    """One item as reports show it; amounts are None until the provider quoted them.

    ``status`` is what the provider's record says as the state keeps it; ``status_code`` and
    ``status_name`` split it for a reader (the money transfer service's ``70000`` is
    ``COMPLETED``; a payment order's ``Authorized`` has no code)."""

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
    status_code: str = ""
    status_name: str = ""
    created_at: datetime | None = None  # first recorded
    confirmed_at: datetime | None = None  # the provider answered the call that moves money
    final_at: datetime | None = None  # it ended settled or failed (as runner learnt it)
    # What the provider made of it, where ``state`` says more (``changed``: paid or on its
    # way, its row asking another payment since): where its money is.
    outcome: str = ""
    payee: str = ""  # its payee check's finding, when not a plain match
    # What earlier attempts paid beside it (``paid_twice``: found paid after all by
    # `runner reconcile`), in the source currency.
    twice_amount: Decimal | None = None
    twice_fee: Decimal | None = None
    # What its plan priced it at (currency, amount), for an item not quoted yet: a held one's
    # money is in the batch's figures before the provider states it.
    planned: tuple[str, Decimal] | None = None

    @property
    def money(self) -> tuple[str, Decimal] | None:
        """(currency, amount) of what it sends: the provider's once quoted, else its plan's
        price; None when neither is known."""
        if self.source_currency and self.source_amount is not None:
            return self.source_currency, self.source_amount
        return self.planned


def stage(item: ItemLine) -> str:
    """How far a pending item went: ``confirmed`` (its money-moving call answered: on its
    way), ``created`` (started, not confirmed), ``not started`` (nothing made yet)."""
    if item.confirmed_at is not None or item.step == Step.CONFIRMED:
        return "confirmed"
    return "not started" if not item.step or item.step == Step.NEW else "created"


def identifier_text(who: dict[str, Any]) -> str:
    """An item's masked identifiers (``Flow.summary_of``'s) as one text: ``msisdn
    *********0001``."""
    return ", ".join(f"{k} {v}" for k, v in sorted((who.get("identifier") or {}).items()))


def item_line(r: ItemRecord, clean: Scrubber, confirmed_at: str | None = None) -> ItemLine:
    who = json.loads(r.summary or "{}")
    ident = identifier_text(who)
    status = r.status or ""
    coded = status.isdigit()
    state = lifecycle.shown(r)
    amounts = r.source_currency, r.source_amount, r.fee, r.destination_amount
    earlier = r.paid_before
    if state is Shown.SETTLED and earlier:  # what the earlier attempt paid is the item's
        first, earlier = earlier[0], earlier[1:]
        amounts = first.currency, Decimal(first.amount), _amount(first.fee), None
    return ItemLine(
        external_id=r.external_id, row=r.row, state=state,
        beneficiary=clean(who.get("beneficiary") or ""), identifier=clean(ident),
        payer_id=who.get("payer_id"), step=r.step or "", status=status,
        source_currency=amounts[0] or "", source_amount=amounts[1], fee=amounts[2],
        destination_currency=r.destination_currency or "", destination_amount=amounts[3],
        transaction_id=r.transaction_id, code=clean(r.error_code or ""),
        message=clean(r.error_message or r.status_message or ""),
        check=clean(_check(r)), details=_details(r.details, clean), intent=r.intent or "",
        status_code=status if coded else "",
        status_name=clean((r.status_message or "") if coded else status),
        created_at=when(r.created_at), confirmed_at=when(confirmed_at),
        final_at=when(r.updated_at) if not r.intent and r.outcome in (
            Outcome.SETTLED, Outcome.FAILED) else None,
        outcome=r.outcome, payee=clean(_payee(r.payee)),
        twice_amount=sum((Decimal(e.amount) for e in earlier), Decimal(0)) if earlier else None,
        twice_fee=sum((_amount(e.fee) or Decimal(0) for e in earlier), Decimal(0))
        if earlier else None, planned=_planned(who.get("planned")))


def _planned(value: Any) -> tuple[str, Decimal] | None:
    """The plan's price of an item (``[currency, amount]`` in its summary), if it has one."""
    if isinstance(value, list) and len(value) == 2:
        return str(value[0]), Decimal(str(value[1]))
    return None


def _amount(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)


def _payee(text: str | None) -> str:
    """The payee check's finding as a person reads it; '' for none, or a plain match."""
    if not text:
        return ""
    try:
        finding = Finding.from_json(text)
    except (ValueError, TypeError, KeyError):
        return ""
    return finding.text() if finding.notable else ""


def when(text: str | None) -> datetime | None:
    return None if not text else datetime.fromisoformat(text.replace("Z", "+00:00"))


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
    state = lifecycle.shown(r)
    earlier = ", ".join(f"{e.ref} ({e.currency} {e.amount}, status {e.status})"
                        for e in r.paid_before)
    if state is Shown.PAID_TWICE:
        return (f"paid twice: the provider shows the earlier attempt {earlier} paid after "
                f"all, beside {r.ref}: ask the beneficiary, or the provider's customer care, "
                f"for one payment back")
    if state is Shown.SETTLED and earlier:
        return (f"paid by its earlier attempt {earlier}, found paid after all; {r.ref} "
                f"({r.status or r.outcome}) did not pay: not paid again")
    if state is Shown.FAILED and r.status_class == "8":
        return ("reversed after it was paid: the money came back; fix its row, then "
                "`runner run --retry-failed` pays it again under a new external_id")
    if state is Shown.CHANGED:
        done = "paid" if r.outcome == Outcome.SETTLED else f"on its way ({r.step})"
        return (f"its row changed after it was {done}: the new request is not paid; a new "
                f"batch needs a new `name` in its job file (the same name is the same batch)")
    if state is Shown.IN_DOUBT:
        return (f"the {r.intent} call was sent and its answer lost: look up the transaction "
                f"with external_id {r.ref} at the provider; the next run does this itself "
                f"before sending anything")
    if state in NEEDS_PERSON:
        return r.error_message or NEEDS_PERSON[state]
    if state is Shown.PENDING and r.step == Step.CONFIRMED:
        return (f"confirmed, status {r.status or 'unknown'}: not final yet; the next run "
                f"follows it")
    if state is Shown.PENDING:
        return f"not confirmed yet (stopped at {r.step}); the next run continues it"
    if state is Shown.AWAITING_CONFIRM:
        return "created, not confirmed: `runner confirm` sends it"
    if state is Shown.FAILED and r.step == Step.NEW:
        return ("refused by the provider before anything was made for it: nothing was paid; "
                "the next run asks again")
    return ""


class Scrubber:
    """Masks the job's credentials in every form (``runner.credentials``), and those the
    process holds, and card-shaped numbers (Luhn-valid, 13-19 digits)."""

    def __init__(self, secrets: Iterable[str | Credential]) -> None:
        self.redact = Redactor(secrets).joined(HELD)

    def __call__(self, text: str) -> str:
        return _CARD.sub(_mask_card, self.redact(text)) if text else text


def _mask_card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match[0])
    if not luhn(digits):
        return match[0]
    return "*" * (len(digits) - 4) + digits[-4:]
