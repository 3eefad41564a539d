"""What an approver reviews besides the plan's rows: who is new, who is gone, whose account
or pay changed since the batch before, each person's earlier payments, and which step-up
rules of the executor's policy (``runner.policy.StepUp``) fire for the plan.

Everything is read from the plan files the state kept (``StateStore.plans``): a plan file
lists whom it pays by name, masked account and ``account_key``, a keyed hash of the
account (the parts that say whom a payment is to: ``runner.kinds.same``) under the state's
own key, so that two plans say "the same account" without a plan file saying which one.
The earlier payments are those of the plans applied on the state; the batch before a plan
is the newest applied plan of another batch of the same kind made before it.

``fired`` is one function for the plan (which lists the rules it fires and why) and for
`runner apply` (which holds the plan to them, as the policy and the state are then).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from runner.engine.plan import Plan
from runner.kinds import kind_named
from runner.lifecycle import TO_PAY
from runner.policy import MoneyRules, StepUp
from runner.state import StateStore

KEY_NAME = "accounts"  # the state's key that hashes accounts in plan files
MOVED_PERCENT = Decimal(5)  # pay that moved by more than this is listed


def account_key(secret: bytes, kind: str, item: Any) -> str | None:
    """The keyed hash of whom ``item`` pays (None where its kind names nobody)."""
    same = kind_named(kind).same_payment
    parts = same(item) if same is not None else None
    if not parts:
        return None
    whom = parts[:-2] if len(parts) > 2 else parts  # without the amount and currency
    return hmac.new(secret, json.dumps([kind, *whom]).encode(), hashlib.sha256
                    ).hexdigest()[:24]


def name_key(name: str) -> str:
    return " ".join(name.split()).casefold()


@dataclass(frozen=True)
class Person:
    """One item a plan pays, as the review compares it."""

    name: str
    account: str  # masked
    account_key: str | None
    currency: str
    amount: Decimal | None
    external_id: str
    row: int

    @property
    def key(self) -> str:
        return name_key(self.name) or (self.account_key or self.external_id)


def people_of(content: dict[str, Any]) -> list[Person]:
    """Whom the plan ``content`` pays."""
    return [Person(str(i.get("beneficiary") or ""), str(i.get("account") or ""),
                   i.get("account_key"), str(i.get("currency") or ""), _decimal(i.get("amount")),
                   str(i.get("external_id") or ""), int(i.get("row") or 0))
            for i in content.get("items", []) if i.get("action") in TO_PAY]


@dataclass(frozen=True)
class EarlierPlan:
    """A plan applied on the state before: its id, batch, kind, when it was made, whom it
    paid."""

    id: str
    job_name: str
    kind: str
    made_at: str
    people: list[Person]


def earlier_plans(state: StateStore, content: dict[str, Any]) -> list[EarlierPlan]:
    """The plans applied on ``state`` made before the plan ``content``, newest first."""
    found = []
    for head in state.plans.heads():
        if head.id == content.get("id") or head.run_id is None or \
                head.made_at >= str(content.get("planned_at")):
            continue
        kind, people = _read(state, head.id, head.digest)
        found.append(EarlierPlan(head.id, head.job_name, kind, head.made_at, people))
    return found


@lru_cache(maxsize=32)
def _read(state: StateStore, plan_id: str, digest: str) -> tuple[str, list[Person]]:
    # (A kept plan never changes, its digest being of its content: read once per process,
    # the console reading the same earlier plans for every page.)
    record = state.plan_file(plan_id)
    assert record is not None and record.digest == digest
    content = json.loads(record.content)
    return str(content["job"]["kind"]), people_of(content)


def batch_before(content: dict[str, Any], earlier: list[EarlierPlan]) -> EarlierPlan | None:
    """The newest earlier plan of another batch of the same kind."""
    return next((p for p in earlier if p.kind == content["job"]["kind"]
                 and p.job_name != content["job"]["name"]), None)


@dataclass
class Changes:
    """What changed between the batch before and this plan, person by person."""

    before: EarlierPlan | None
    new: list[Person] = field(default_factory=list)
    gone: list[Person] = field(default_factory=list)
    changed_account: list[tuple[Person, Person]] = field(default_factory=list)
    moved: list[tuple[Person, Person, Decimal]] = field(default_factory=list)  # percent

    @property
    def count(self) -> int:
        return len(self.new) + len(self.gone) + len(self.changed_account) + len(self.moved)


def changes(content: dict[str, Any], earlier: list[EarlierPlan],
            moved_percent: Decimal = MOVED_PERCENT) -> Changes:
    """The plan against the batch before: new people, people gone, accounts changed, pay
    moved by more than ``moved_percent`` (in the same currency)."""
    before = batch_before(content, earlier)
    found = Changes(before)
    if before is None:
        return found
    then = {p.key: p for p in before.people}
    now = {p.key: p for p in people_of(content)}
    found.new = [p for k, p in now.items() if k not in then]
    found.gone = [p for k, p in then.items() if k not in now]
    for key, p in now.items():
        was = then.get(key)
        if was is None:
            continue
        if was.account_key != p.account_key or (was.account_key is None and
                                                 was.account != p.account):
            found.changed_account.append((was, p))
        if was.currency == p.currency and was.amount and p.amount is not None:
            percent = (p.amount - was.amount) / was.amount * 100
            if abs(percent) > moved_percent:
                found.moved.append((was, p, percent.quantize(Decimal("0.1"))))
    return found


def history(earlier: list[EarlierPlan], key: str) -> list[tuple[EarlierPlan, Person]]:
    """Each earlier payment to the person ``key`` (``Person.key``) or to their account."""
    return [(plan, p) for plan in earlier for p in plan.people
            if p.key == key or (p.account_key is not None and p.account_key == key)]


def fired_on(rules: MoneyRules, content: dict[str, Any], state: StateStore
             ) -> list[dict[str, Any]]:
    """``fired`` against the plans applied on ``state`` (read only where a rule may fire)."""
    return fired(rules, content, earlier_plans(state, content)) if rules.step_up else []


def mark_whom(plan: Plan, kind: str, secret: bytes) -> None:
    """Give each item of a plan kept whole its ``account_key``, and each payee the check
    holds the key its acceptance signs (``accept_as``: the state's key of its account), so
    that the plan file compares accounts and accepts payees where the rows are not read."""
    payee_of = kind_named(kind).payee
    for p in plan.items:
        if p.who is not None and p.valid is not None:
            p.who["account_key"] = account_key(secret, kind, p.valid.item)
            if payee_of is not None and p.payee is not None and p.payee.holds:
                p.who["accept_as"] = payee_of(p.valid.item).accepted_as


def fired(rules: MoneyRules, content: dict[str, Any],
          earlier: list[EarlierPlan]) -> list[dict[str, Any]]:
    """The step-up rules of ``rules`` that the plan ``content`` fires, each with why: its
    name, why, the approvals it asks and of which group."""
    people = people_of(content)
    totals: dict[str, Decimal] = {}
    for p in people:
        if p.amount is not None:
            totals[p.currency] = totals.get(p.currency, Decimal(0)) + p.amount
    paid = {p.account_key or p.key for plan in earlier for p in plan.people}
    last_account: dict[str, str | None] = {}
    for plan in reversed(earlier):  # oldest first: the newest account stays
        for p in plan.people:
            last_account[p.key] = p.account_key
    out = []
    for rule in rules.step_up:
        why = _why(rule, totals, people, paid, last_account)
        if why:
            out.append({"rule": rule.name, "why": why, "approvals": rule.approvals,
                        "group": rule.group})
    return out


def _why(rule: StepUp, totals: dict[str, Decimal], people: list[Person], paid: set[str],
         last_account: dict[str, str | None]) -> str:
    reasons = [f"the batch pays {currency} {totals[currency]}, over {limit}"
               for currency, limit in sorted(rule.batch_over.items())
               if totals.get(currency, Decimal(0)) > limit]
    big = [p for p in people if p.amount is not None and p.currency in rule.item_over
           and p.amount > rule.item_over[p.currency]]
    if big:
        rows = ", ".join(str(p.row) for p in big[:5]) + (", ..." if len(big) > 5 else "")
        reasons.append(f"{len(big)} item(s) over {_limits(rule.item_over)} (row {rows})")
    if rule.new_payee:
        new = [p for p in people if (p.account_key or p.key) not in paid]
        if new:
            reasons.append(f"{len(new)} payee(s) never paid on this state before")
    if rule.changed_account:
        moved = [p for p in people if p.key in last_account and
                 last_account[p.key] != p.account_key]
        if moved:
            reasons.append(f"{len(moved)} person(s) paid to another account than last time")
    return "; ".join(reasons)


def _limits(limits: dict[str, Decimal]) -> str:
    return ", ".join(f"{c} {v}" for c, v in sorted(limits.items()))


def merged(recorded: Any, now: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules a plan recorded as fired and those that fire now, once each by name (the
    most approvals)."""
    rules: dict[str, dict[str, Any]] = {}
    for rule in [*(recorded if isinstance(recorded, list) else []), *now]:
        if not isinstance(rule, dict) or "rule" not in rule:
            continue
        kept = rules.get(str(rule["rule"]))
        if kept is None or int(rule.get("approvals", 1)) > int(kept.get("approvals", 1)):
            rules[str(rule["rule"])] = rule
    return list(rules.values())


def _decimal(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value)) if value not in (None, "") else None
    except InvalidOperation:
        return None
