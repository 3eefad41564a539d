"""A plan (``runner.engine.plan``) as a person reads it on a terminal: what `runner plan` and
`runner run --dry-run` print, and what a terminal shows before the question. Large groups
(new, resumed, settled) are counted; every item a person may want to look at (in doubt, sent
again, failed, needing a person, changed, held by the payee check, refused, invalid) is
listed with why; then the payee checks, with every finding but a match by person."""

from __future__ import annotations

from runner.engine.fees import MARGIN
from runner.engine.funds import Need
from runner.engine.plan import Plan, PlannedItem
from runner.lifecycle import LISTED, TO_PAY, PlanAction
from runner.payees.checks import LABELS as FINDINGS
from runner.payees.checks import Result

LABELS: dict[str, str] = {
    PlanAction.NEW: "new", PlanAction.RESUME: "to resume",
    PlanAction.IN_DOUBT: "in doubt (looked up first)",
    PlanAction.RETRY: "to send again (--retry-failed)", PlanAction.SETTLED: "settled",
    PlanAction.FAILED: "failed earlier", PlanAction.REVIEW: "needs a person",
    PlanAction.CHANGED: "changed after its payment started",
    PlanAction.HELD: "held by the payee check (needs a person)",
    PlanAction.DUPLICATE: "held: possible duplicate", PlanAction.REFUSED: "refused",
    PlanAction.QUOTE_REFUSED: "refused by the provider (its quotation)",
    PlanAction.INVALID: "invalid", PlanAction.UNPLANNED: "not to pay in the plan"}


def plan_lines(plan: Plan) -> list[str]:
    lines = [f"{plan.job} ({plan.kind}, {plan.file}): {plan.rows} row(s); planned "
             f"{plan.made_at:%Y-%m-%d %H:%M:%S} UTC by {plan.made_by} on {plan.made_on}"
             f"{', with quotations' if plan.quoted else ''}", f"state: {plan.state}"]
    counts = plan.counts
    for heading, paying in (("to pay", True), ("skipped", False)):
        group = [a for a in LABELS if (a in TO_PAY) == paying]
        lines.append(f"{heading}: {sum(counts.get(a, 0) for a in group)} item(s)")
        for action in group:
            if not counts.get(action):
                continue
            lines.append(f"  {LABELS[action]}: {counts[action]}{_steps(plan, action)}")
            lines += [f"    {_item(p)}" for p in plan.items if p.action == action and
                      (action in LISTED or p.left_unpaid)]
    if plan.left_unpaid:
        lines.append(f"{plan.left_unpaid} row(s) ask another payment than the one made or on "
                     f"its way: not paid again; a new batch needs a new `name` in its job "
                     f"file (the same name is the same batch)")
    lines += payee_lines(plan)
    if plan.needs:
        lines.append("balances:")
        lines += [f"  {need_line(n)}" for n in plan.needs]
    lines.append(closing(plan))
    return lines


def payee_lines(plan: Plan) -> list[str]:
    """The payee checks: the findings counted, then each but a match (and those held,
    listed above) by person."""
    if not plan.verify:
        return []
    if not plan.payee_offered:
        return [f"payee checks ({plan.verify}): no check offered for {plan.kind} items"]
    found = sum(plan.payees.values())
    counts = ", ".join(f"{plan.payees[r.value]} {FINDINGS[r]}" for r in Result
                       if plan.payees.get(r.value))
    lines = [f"payee checks ({plan.verify}): {found} item(s){': ' + counts if counts else ''}; "
             f"{plan.asked} account(s) asked of the provider, the others' answers kept from "
             f"earlier checks"]
    for p in plan.items:
        if p.payee is not None and p.payee.notable and p.action is not PlanAction.HELD:
            lines.append(f"  {_name(p)} {p.payee.name} ({p.payee.identifier}): "
                         f"{p.payee.text()}")
    return lines


def closing(plan: Plan) -> str:
    """The plan's verdict in one line."""
    if plan.stops:
        return (f"nothing would be sent: {plan.counts.get(PlanAction.INVALID, 0)} invalid "
                f"item(s) "
                f"(run.on_invalid: stop)")
    if plan.short:
        return f"nothing would be sent, the balance is short: {plan.shortfall()}"
    if not plan.paying:
        return "nothing to pay"
    return f"a run would pay {question(plan)}"


def question(plan: Plan) -> str:
    """``30 item(s): EUR 735.00``: what is asked before money moves."""
    totals = ", ".join(f"{c} {a:,}" for c, a in sorted(plan.totals().items()))
    return f"{plan.paying} item(s){': ' + totals if totals else ''}"


def _steps(plan: Plan, action: str) -> str:
    if action != PlanAction.RESUME:
        return ""
    steps = plan.resumed_at()
    return " (" + ", ".join(f"{n} at {step}" for step, n in sorted(steps.items())) + ")"


def _name(p: PlannedItem) -> str:
    return f"{p.external_id} (row {p.row})" if p.external_id else f"row {p.row}"


def _item(p: PlannedItem) -> str:
    name = _name(p)
    if p.paid_to:
        name += f", {p.paid_to}"
    if p.action is PlanAction.RETRY:
        name += f" as {p.ref}"
    why = p.why
    if p.action is PlanAction.QUOTE_REFUSED:
        why = f"{p.code} {p.why}; not paid"
    elif p.action is PlanAction.SETTLED and p.left_unpaid:
        why = "changed since it was paid: not paid again"
    return f"{name}: {why}" if why else name


def need_line(n: Need) -> str:
    if n.samples:
        fees = n.fee + n.estimated
        needed = f"{n.amount:,} + fees {fees:,} = {n.needed:,} needed ({n.estimated:,} of the " \
                 f"fees estimated from {n.samples} dryrun- quotation(s), with a " \
                 f"{(MARGIN * 100).normalize()}% margin"
        if n.unestimated:
            needed += f"; {n.unestimated} item(s) whose quotations the provider refused not " \
                      f"counted"
        needed += ")"
    elif n.fees_known:
        needed = f"{n.amount:,} + fees {n.fee:,} = {n.needed:,} needed"
    elif n.fee:
        needed = f"{n.amount:,} + fees {n.fee:,} = {n.needed:,} needed, and the fees not " \
                 f"quoted yet (--quote asks them)"
    else:
        needed = f"{n.amount:,} needed, and fees (--quote asks them)"
    verdict = f"SHORT by {n.needed - n.available:,}" if n.short else "covered"
    return f"{n.balance}: {n.items} item(s), {needed}; {n.available:,} available: {verdict}"
