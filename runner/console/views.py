"""What the console's pages show, as plain data for their templates (a template gets
values, never live objects: house style 22): the plans and where they stand, one plan's
totals, balances, changes since the batch before, held payees and duplicates, a page of its
items (searched, sorted), and one person's earlier payments.

Nothing here writes: the approvals are ``runner.console.signing``'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from runner.engine.plan_listing import Listing, SignatureView, totals
from runner.engine.plan_signing import (
    DENY,
    NO_PLANNER,
    approvers_of,
    check_signatures,
    standing,
)
from runner.engine.review import Changes, EarlierPlan, changes, earlier_plans, history
from runner.errors import JobError, JobErrors, PlanRefused
from runner.lifecycle import TO_PAY, PlanAction
from runner.state import StateStore
from runner.state.records import PlanFileRecord
from runner.summary.amounts import money_text

PAGE = 100  # items a page
SHOWN_CHANGES = 50  # people listed of each change (all are counted)
SORTS = ("row", "beneficiary", "amount", "external_id", "action", "account")


@lru_cache(maxsize=16)
def _kept(state: StateStore, plan_id: str, digest: str
          ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The plan as the state kept it, and its totals to pay (a kept plan never changes,
    its digest being of its content: read and added up once per plan)."""
    record = state.plan_file(plan_id)
    assert record is not None and record.digest == digest
    content: dict[str, Any] = json.loads(record.content)
    return content, totals(Listing(content, digest, [], "").to_pay)


def content_of(record: PlanFileRecord, state: StateStore) -> dict[str, Any]:
    """The plan as the state kept it, with the signatures given in the console (``record``:
    its head is enough)."""
    content, _ = _kept(state, record.id, record.digest)
    return {**content, "signatures": [*content.get("signatures", []),
                                      *state.plans.signatures(record.id)]}


@dataclass(frozen=True)
class Standing:
    """Where a plan stands for the list and its page."""

    status: str  # waiting | approved | denied | applied | expired | refused
    approvals: str
    reasons: list[str]
    signatures: list[SignatureView]
    refused: tuple[str, ...] = ()  # what refuses it whatever else is signed


def standing_of(record: PlanFileRecord, content: dict[str, Any], now: datetime,
                groups: dict[str, tuple[str, ...]] | None = None) -> Standing:
    """Where the plan stands: its signatures checked against its approvers (the job's, and
    the executor's policy's where ``RUNNER_POLICY`` names a copy), its step-up rules."""
    if record.run_id is not None:
        status = "applied"
    elif now > datetime.fromisoformat(content["valid_until"].replace("Z", "+00:00")):
        status = "expired"
    else:
        status = ""
    if not content.get("four_eyes"):
        return Standing(status or "waiting", "not under four eyes", [], [])
    try:
        approvers = approvers_of(content)
    except (PlanRefused, JobError, JobErrors) as exc:
        why = "; ".join(exc.reasons) if isinstance(exc, PlanRefused) else str(exc)
        return Standing(status or "refused", "", [why], [], (why,))
    views = check_signatures(content, record.digest, approvers.trust, now)
    stands = standing(views, approvers.approvals, content.get("rules_fired") or [], groups)
    if not status:
        status = "denied" if any(v.valid and v.role == DENY for v in views) else \
            "refused" if [r for r in stands.refused if r != NO_PLANNER] else \
            "waiting" if stands.wanting or stands.refused else "approved"
    # What the page says: what refuses the plan, the step-up rules' wants, and whether more
    # approvals are wanted (the command line's own hint left out).
    shown = [*stands.refused, *stands.rules_wanting,
             *(["it waits for more approvals"] if stands.counted else [])]
    return Standing(status, stands.text, shown, views, tuple(stands.refused))


def plan_rows(state: StateStore, now: datetime) -> list[dict[str, Any]]:
    """Every plan kept, for the list: id, batch, who planned it and when, items and totals
    to pay, where it stands."""
    rows = []
    for record in state.plans.heads():
        content = content_of(record, state)
        _, sums = _kept(state, record.id, record.digest)
        stands = standing_of(record, content, now)
        rows.append({"id": record.id, "job": content["job"]["name"],
                     "kind": content["job"]["kind"], "planned_at": content["planned_at"],
                     "planned_by": content["planned_by"].get("user", ""),
                     "count": sum(t["items"] for t in sums if t["kind"] == "sent"),
                     "totals": _money(sums), "status": stands.status,
                     "approvals": stands.approvals})
    return rows


def _money(found: list[dict[str, Any]]) -> list[str]:
    return [money_text(t["amount"], t["currency"]) for t in found if t["kind"] == "sent"]


def _amount(value: Any) -> Decimal:
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return Decimal(0)


def _shown(value: Any, currency: str) -> str:
    return money_text(_amount(value), currency) if value not in (None, "") else ""


def _sort_key(sort: str) -> Any:
    if sort == "amount":
        return lambda i: _amount(i.get("amount"))
    if sort == "row":
        return lambda i: int(i.get("row") or 0)
    return lambda i: str(i.get(sort) or "").casefold()


def item_page(content: dict[str, Any], q: str, sort: str, descending: bool, page: int
              ) -> dict[str, Any]:
    """One page of the plan's items: those whose name, external_id or account holds ``q``,
    sorted by ``sort``."""
    items = content.get("items", [])
    needle = q.strip().casefold()
    if needle:
        items = [i for i in items if any(needle in str(i.get(k) or "").casefold()
                                         for k in ("beneficiary", "external_id", "account",
                                                   "ref"))]
    sort = sort if sort in SORTS else "row"
    items = sorted(items, key=_sort_key(sort), reverse=descending)
    pages = max(1, -(-len(items) // PAGE))
    page = min(max(page, 1), pages)
    shown = items[(page - 1) * PAGE:page * PAGE]
    return {"q": q, "sort": sort, "descending": descending, "page": page, "pages": pages,
            "found": len(items),
            "items": [{"row": i.get("row"), "external_id": i.get("external_id", ""),
                       "action": str(i.get("action", "")),
                       "pays": i.get("action") in TO_PAY,
                       "beneficiary": i.get("beneficiary", ""), "account": i.get("account", ""),
                       "amount": money_text(_amount(i["amount"]), i["currency"])
                       if i.get("currency") and i.get("amount") not in (None, "") else "",
                       "why": i.get("why", ""),
                       "payee": _finding(i.get("payee"))} for i in shown]}


def _finding(payee: Any) -> str:
    if not isinstance(payee, dict):
        return ""
    result = str(payee.get("result", ""))
    holder = payee.get("holder")
    return f"{result.replace('_', ' ')}{': the provider holds ' + holder if holder else ''}"


def _person(p: Any) -> dict[str, Any]:
    return {"name": p.name, "account": p.account, "key": p.key, "row": p.row,
            "external_id": p.external_id,
            "amount": money_text(p.amount, p.currency) if p.amount is not None else ""}


def changes_view(found: Changes) -> dict[str, Any]:
    """The changes, each list to its first ``SHOWN_CHANGES`` (the counts are whole)."""
    before, n = found.before, SHOWN_CHANGES
    return {"before": None if before is None else {"id": before.id, "job": before.job_name,
                                                   "made_at": before.made_at},
            "count": found.count, "shown": n,
            "counts": {"new": len(found.new), "gone": len(found.gone),
                       "changed_account": len(found.changed_account),
                       "moved": len(found.moved)},
            "new": [_person(p) for p in found.new[:n]],
            "gone": [_person(p) for p in found.gone[:n]],
            "changed_account": [{"was": _person(a), "now": _person(b)}
                                for a, b in found.changed_account[:n]],
            "moved": [{"was": _person(a), "now": _person(b), "percent": str(pc)}
                      for a, b, pc in found.moved[:n]]}


@lru_cache(maxsize=16)
def _changes_of(state: StateStore, plan_id: str, digest: str, earlier: tuple[str, ...],
                moved_percent: Decimal) -> dict[str, Any]:
    """The changes of the plan since the batch before, worked out once for the plan and the
    plans applied before it (kept plans never change)."""
    record = state.plan_file(plan_id)
    assert record is not None and record.digest == digest
    content = content_of(record, state)
    return changes_view(changes(content, earlier_plans(state, content), moved_percent))


def plan_view(record: PlanFileRecord, state: StateStore, now: datetime,
              moved_percent: Decimal, q: str = "", sort: str = "row",
              descending: bool = False, page: int = 1,
              groups: dict[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """Everything the plan's page shows."""
    content = content_of(record, state)
    _, sums = _kept(state, record.id, record.digest)
    stands = standing_of(record, content, now, groups)
    earlier = earlier_plans(state, content)
    held = [i for i in content.get("items", []) if i.get("action") == PlanAction.HELD]
    duplicates = [i for i in content.get("items", [])
                  if i.get("action") == PlanAction.DUPLICATE]
    return {
        "id": record.id, "digest": record.digest, "job": content["job"]["name"],
        "kind": content["job"]["kind"], "planned_at": content["planned_at"],
        "planned_by": content["planned_by"].get("user", ""),
        "valid_until": content["valid_until"], "status": stands.status,
        "approvals": stands.approvals, "reasons": stands.reasons,
        "needs_planner": NO_PLANNER in stands.refused,
        "signatures": [{"role": s.role, "principal": s.principal or "a key not trusted",
                        "passkey": s.passkey, "key": s.key, "signed_at": s.signed_at,
                        "verdict": s.verdict, "reason": s.reason} for s in stands.signatures],
        "rules_fired": content.get("rules_fired") or [],
        "to_pay": sum(t["items"] for t in sums if t["kind"] == "sent"),
        "totals": [{"kind": t["kind"], "currency": t["currency"], "count": t["items"],
                    "amount": money_text(t["amount"], t["currency"]),
                    "fee": money_text(t["fee"], t["currency"]) if t.get("fee") else ""}
                   for t in sums],
        "balances": [{"balance": b.get("balance", ""), "currency": b.get("currency", ""),
                      "needed": _shown(b.get("needed"), b.get("currency", "")),
                      "available": _shown(b.get("available"), b.get("currency", "")),
                      "short": bool(b.get("short"))} for b in content.get("balances", [])],
        "shortfall": content.get("shortfall", ""),
        "counts": content.get("counts", {}),
        "changes": _changes_of(state, record.id, record.digest,
                               tuple(p.id for p in earlier), moved_percent),
        "moved_percent": str(moved_percent),
        "held": [{"row": i.get("row"), "external_id": i.get("external_id", ""),
                  "beneficiary": i.get("beneficiary", ""), "account": i.get("account", ""),
                  "finding": _finding(i.get("payee")), "why": i.get("why", "")}
                 for i in held],
        "duplicates": [{"row": i.get("row"), "external_id": i.get("external_id", ""),
                        "beneficiary": i.get("beneficiary", ""), "why": i.get("why", "")}
                       for i in duplicates],
        "page": item_page(content, q, sort, descending, page),
    }


def person_view(state: StateStore, record: PlanFileRecord, key: str) -> dict[str, Any]:
    """One person's (``review.Person.key``) earlier payments, as the plans applied on the
    state paid them, with each item's state now."""
    content = content_of(record, state)
    earlier: list[EarlierPlan] = earlier_plans(state, content)
    rows = []
    for plan, p in history(earlier, key):
        item = state.item(p.external_id)
        rows.append({"job": plan.job_name, "made_at": plan.made_at, **_person(p),
                     "status": (item.outcome or item.status or "") if item
                     else "not in this state"})
    return {"key": key, "plan": record.id, "job": content["job"]["name"], "payments": rows,
            "name": next((r["name"] for r in rows if r["name"]), key)}


def now_utc() -> datetime:
    return datetime.now(UTC)
