"""The payee check of each item to pay, before money moves (``runner plan --verify``,
``run.verify_payees``): the account's status (credit or debit party verification) and the
name of who holds it (party information), compared with the row's name (``names``).

A kind that has such a check says who its item pays (``Kind.payee``: a ``Payee``); the
payer (or payment method) says which identifiers its checks take. Each account is asked once
per plan, at ``workers`` calls at once (the provider's rate limit holds, as for every call),
and the answer is kept in the state (``StateStore.keep_payee_checks``) for
``run.verify_for``: next month's batch asks only about accounts that are new, changed, or
last asked longer ago. An identifier with card data is asked every time and never kept.

Findings (``Finding``), one per item: match, close match (the provider's name shown), no
match, account not available, not verifiable (the payer, or this identifier, offers no
check), not verified (the check was refused or failed; it is asked again next time). Under
``hold``, no match, an unavailable account and not verified hold the item (``holds``)
unless its payee (the same account and name, in any batch on the state) was accepted
(``runner resolve JOB ID --accept-payee``) by as many people as the rules ask, each
acceptance checked again here (``runner.payees.trust``).

Only the provider's answer about a payee is that payee's finding. A provider that cannot be
reached, answers "later" after every retry, or refuses the configuration (credentials, an
untrusted certificate) stops the checks, and the plan or run, before anything is paid, as it
stops a run: exit 75 (try later) or 78 (a person fixes it); nobody is held for it.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from runner.cards import luhn, mask
from runner.errors import NotFound, ProviderError, stop_if_down
from runner.identifiers import canonical
from runner.lifecycle import PlanAction
from runner.payees.names import Verdict, compare
from runner.payees.trust import Accepted, standing
from runner.policy import MoneyRules
from runner.provider import Provider
from runner.provider.retry import RetryPolicy
from runner.rules import describe, missing
from runner.state import StateStore
from runner.state.records import PayeeCheck

POLICIES = ("off", "warn", "hold")
AVAILABLE = "AVAILABLE"
# A provider that cannot be reached, says "later" after every retry, or refuses the
# configuration says nothing of the payee, who is not held for it (``runner.errors.down``).
STOPPED = "the payee checks stopped before anything was paid"


class Result(StrEnum):
    MATCH = "match"
    CLOSE = "close_match"
    NO_MATCH = "no_match"
    UNAVAILABLE = "unavailable"
    NOT_VERIFIABLE = "not_verifiable"
    NOT_VERIFIED = "not_verified"


LABELS = {Result.MATCH: "match", Result.CLOSE: "close match", Result.NO_MATCH: "no match",
          Result.UNAVAILABLE: "account not available", Result.NOT_VERIFIABLE: "not verifiable",
          Result.NOT_VERIFIED: "not verified"}
HOLDS = frozenset({Result.NO_MATCH, Result.UNAVAILABLE, Result.NOT_VERIFIED})
_VERDICTS = {Verdict.MATCH: Result.MATCH, Verdict.CLOSE: Result.CLOSE,
             Verdict.NO_MATCH: Result.NO_MATCH}
_CARD = re.compile(r"\d{13,19}")


def full_name(party: dict[str, Any]) -> str:
    return " ".join(str(party[k]) for k in ("firstname", "middlename", "lastname", "lastname2")
                    if party.get(k))


@dataclass(frozen=True)
class Payee:
    """Who an item pays, as its check asks the provider: the service, the payer (or payment
    method), the identifier (the fields given), the party sent with the verification, and
    the names to compare (the full name, then the account holder's name if the row has it)."""

    service: str  # "money_transfer" | "merchant_payment"
    payer: int
    identifier: dict[str, str]
    party: dict[str, Any]
    names: tuple[str, ...]

    @property
    def name(self) -> str:
        return next((n for n in self.names if n), "")

    @property
    def card_like(self) -> bool:
        return "card_number" in self.identifier or any(
            _CARD.fullmatch(re.sub(r"[ -]", "", v)) and luhn(re.sub(r"[ -]", "", v))
            for v in self.identifier.values())

    @property
    def masked(self) -> str:
        return ", ".join(f"{k} {mask(v)}" for k, v in sorted(self.identifier.items()))

    @property
    def account(self) -> str | None:
        """The account as the state keeps it (a hash); None for card data, never kept."""
        if self.card_like:
            return None
        # (one account however it is spelt: ``runner.identifiers``)
        text = json.dumps([self.service, self.payer, sorted(
            (k, canonical(k, v)) for k, v in self.identifier.items())])
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def accepted_as(self) -> str:
        """What an acceptance binds to: the account, or for card data its masked form."""
        return self.account or self.masked


@dataclass(frozen=True)
class Finding:
    """What the check found for one item (see the module's docstring)."""

    result: Result
    name: str  # the row's
    identifier: str  # masked
    holder: str = ""  # the provider's name for the account
    status: str = ""  # the account's status
    why: str = ""  # why it is not verifiable, or not verified
    checked_at: str = ""  # when the provider answered
    accepted_by: str = ""
    accepted_at: str = ""

    @property
    def holds(self) -> bool:
        """True when it keeps the item from being paid, under ``hold``."""
        return self.result in HOLDS and not self.accepted_by

    @property
    def notable(self) -> bool:
        """Anything but a plain match: what a person is shown."""
        return self.result is not Result.MATCH

    def text(self) -> str:
        """``no match: the provider holds Ines Valderrama``, for a person."""
        r = self.result
        if r in (Result.CLOSE, Result.NO_MATCH):
            said = f"{LABELS[r]}: the provider holds {self.holder}"
        elif r is Result.UNAVAILABLE:
            said = f"{LABELS[r]} ({self.status})"
        elif r is Result.MATCH:
            said = LABELS[r]
        else:
            said = f"{LABELS[r]}: {self.why}"
        if self.accepted_by:
            said += f"; accepted by {self.accepted_by} at {self.accepted_at}"
        return said

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v != ""}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Finding:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Finding:
        """A finding as ``as_dict`` wrote it (a plan file's item ``payee``, the state's)."""
        known = {f: values[f] for f in cls.__dataclass_fields__ if f in values}
        return cls(**{**known, "result": Result(values["result"])})


Offer = tuple[list[list[str]], list[list[str]]]  # identifiers verification, information take


class Parties:
    """One service's party checks: what a payer offers, the status, the holder."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider

    def offer(self, service: str, payer: int) -> Offer:
        if service == "money_transfer":
            p = self.provider.money_transfer.payer(payer)
            return (p["credit_party_verification"]["credit_party_identifiers_accepted"],
                    p["credit_party_information"]["credit_party_identifiers_accepted"])
        m = self.provider.merchant_payment.payment_method(payer)
        return (m["debit_party_verification"]["debit_party_identifiers_accepted"],
                m["debit_party_information"]["debit_party_identifiers_accepted"])

    def status(self, p: Payee) -> str:
        if p.service == "money_transfer":
            answer = self.provider.money_transfer.credit_party_verification(
                p.payer, p.identifier, p.party)
        else:
            answer = self.provider.merchant_payment.debit_party_verification(
                p.payer, p.identifier, p.party)
        return str(answer["account_status"])

    def holder(self, p: Payee) -> tuple[str, ...]:
        if p.service == "money_transfer":
            party = self.provider.money_transfer.credit_party_information(p.payer, p.identifier)
        else:
            party = self.provider.merchant_payment.debit_party_information(
                p.payer, p.identifier)["consumer"]
        return tuple(n for n in (full_name(party), party.get("bank_account_holder_name"))
                     if n)


class PayeeChecks:
    """The checks of one plan (see the module's docstring). ``asked`` counts the accounts
    asked of the provider."""

    def __init__(self, job_name: str, payee_of: Callable[[Any], Payee] | None,
                 provider: Provider, state: StateStore, policy: str, verify_for: float,
                 retry: RetryPolicy, workers: int, clock: Callable[[], float] = time.time,
                 rules: MoneyRules | None = None) -> None:
        self.job_name = job_name
        self.rules = rules or MoneyRules()  # whose acceptance of a payee holds
        self.payee_of = payee_of
        self.parties = Parties(provider)
        self.state = state
        self.policy = policy
        self.verify_for = verify_for
        self.retry = retry
        self.workers = max(1, workers)
        self.clock = clock
        self.asked = 0
        self._offers: dict[tuple[str, int], Offer | str] = {}
        self._pool: ThreadPoolExecutor | None = None

    @property
    def offered(self) -> bool:
        """False for a kind that has no check (payouts, payment orders ...)."""
        return self.payee_of is not None

    @property
    def holding(self) -> bool:
        return self.policy == "hold"

    def close(self) -> None:
        """Wait for the checks in flight; those not started (after one stopped the checks)
        are dropped."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def findings(self, items: Iterable[tuple[str, Any]]) -> dict[str, Finding]:
        """external_id -> the finding of its item, for each (external_id, item)."""
        assert self.payee_of is not None
        payees = {eid: self.payee_of(item) for eid, item in items}
        if not payees:
            return {}
        accepted = standing(self.state.payees.acceptances(
            sorted({p.accepted_as for p in payees.values()})), self.rules)
        kept = self.state.payee_checks(sorted({a for p in payees.values()
                                               if (a := p.account) is not None}))
        now = self.clock()
        answers: dict[str, PayeeCheck | str] = {
            k: c for k, c in kept.items() if now - c.checked_at < self.verify_for}
        todo: dict[str, Payee] = {}
        for eid, p in payees.items():
            key = p.account or f"item {eid}"
            if key not in answers and key not in todo and self._usable(p) is None:
                todo[key] = p
        if todo:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="payee")
            asked = dict(zip(todo, self._pool.map(self._ask, todo.values()), strict=True))
            self.asked += len(asked)
            self.state.keep_payee_checks([a for k, a in asked.items()
                                          if isinstance(a, PayeeCheck) and
                                          not k.startswith("item ")])
            answers.update(asked)
        return {eid: self._finding(p, answers.get(p.account or f"item {eid}"),
                                   accepted.get((p.accepted_as, p.name)))
                for eid, p in payees.items()}

    # ------------------------------------------------------------ asking
    def _offer(self, p: Payee) -> Offer | str:
        key = (p.service, p.payer)
        if key not in self._offers:
            try:
                self._offers[key] = self.retry.call(
                    lambda: self.parties.offer(p.service, p.payer), idempotent=True)
            except ProviderError as exc:
                stop_if_down(exc, STOPPED)
                self._offers[key] = f"the payer could not be read: {exc.code} {exc.message}"
        return self._offers[key]

    def _usable(self, p: Payee) -> Finding | None:
        """The finding when the check cannot be asked (not offered, or the payer could
        not be read); None when it can."""
        offer = self._offer(p)
        who = "payer" if p.service == "money_transfer" else "payment method"
        if isinstance(offer, str):
            return Finding(Result.NOT_VERIFIED, p.name, p.masked, why=offer)
        if not offer[0]:
            return Finding(Result.NOT_VERIFIABLE, p.name, p.masked,
                           why=f"{who} {p.payer} offers no check")
        if missing(p.identifier, offer[0]):
            return Finding(Result.NOT_VERIFIABLE, p.name, p.masked,
                           why=f"{who} {p.payer} checks {describe(offer[0])} only")
        return None

    def _ask(self, p: Payee) -> PayeeCheck | str:
        """The provider's answer about the account, or why there is none."""
        offer = self._offer(p)
        assert not isinstance(offer, str)
        try:
            status = self.retry.call(lambda: self.parties.status(p), idempotent=True)
            holder: tuple[str, ...] | None = None
            if status == AVAILABLE and offer[1] and not missing(p.identifier, offer[1]):
                holder = self.retry.call(lambda: self.parties.holder(p), idempotent=True)
        except NotFound:
            return "the provider holds no name for this account"
        except ProviderError as exc:
            stop_if_down(exc, STOPPED)
            return f"the check failed: {' '.join(x for x in (exc.code, exc.message) if x)}"
        return PayeeCheck(p.account or "", p.service, p.payer, p.masked, status, holder,
                          self.clock())

    # ------------------------------------------------------------ judging
    def _finding(self, p: Payee, answer: PayeeCheck | str | None,
                 accepted: Accepted | None) -> Finding:
        found = self._judge(p, answer)
        if accepted is not None and accepted.holds and found.result in HOLDS:
            found = Finding(**{**asdict(found), "accepted_by": ", ".join(accepted.by),
                               "accepted_at": accepted.at})
        return found

    def _judge(self, p: Payee, answer: PayeeCheck | str | None) -> Finding:
        if answer is None:
            unusable = self._usable(p)
            assert unusable is not None
            return unusable
        if isinstance(answer, str):
            return Finding(Result.NOT_VERIFIED, p.name, p.masked, why=answer)
        when = _iso(answer.checked_at)
        if answer.account_status != AVAILABLE:
            return Finding(Result.UNAVAILABLE, p.name, p.masked, status=answer.account_status,
                           checked_at=when)
        if answer.holder is None:
            who = "payer" if p.service == "money_transfer" else "payment method"
            return Finding(Result.NOT_VERIFIABLE, p.name, p.masked, status=AVAILABLE,
                           why=f"the account is available; {who} {p.payer} tells no holder's "
                               f"name", checked_at=when)
        if not answer.holder:
            return Finding(Result.NOT_VERIFIED, p.name, p.masked, status=AVAILABLE,
                           why="the provider holds no name for this account", checked_at=when)
        best = max((compare(given, held) for given in p.names if given
                    for held in answer.holder),
                   key=lambda m: (m.verdict is Verdict.MATCH, m.verdict is Verdict.CLOSE,
                                  m.score), default=None)
        result = _VERDICTS[best.verdict] if best is not None else Result.NO_MATCH
        return Finding(result, p.name, p.masked, holder=answer.holder[0], status=AVAILABLE,
                       checked_at=when)


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


def plan_file_lines(document: dict[str, Any]) -> list[str]:
    """A plan file's payee checks as a person reads them (`runner show PLAN`): the counts,
    then every finding but a match, by person; [] when the plan checked none."""
    checks = document.get("payee_checks")
    if not isinstance(checks, dict):
        return []
    if not checks.get("offered", True):
        return [f"payee checks ({checks.get('policy')}): no check offered"]
    counts = checks.get("findings") or {}
    said = ", ".join(f"{counts[r.value]} {LABELS[r]}" for r in Result if counts.get(r.value))
    lines = [f"payee checks ({checks.get('policy')}): {said or 'none'}"]
    for item in document.get("items") or []:
        payee = item.get("payee") if isinstance(item, dict) else None
        if not isinstance(payee, dict) or payee.get("result") == Result.MATCH.value:
            continue
        finding = Finding.from_dict(payee)
        lines.append(f"  {item.get('external_id')} (row {item.get('row')}) {finding.name} "
                     f"({finding.identifier}): {finding.text()}"
                     f"{' [held]' if item.get('action') == PlanAction.HELD else ''}")
    return lines
