"""What a run of a job would do now: the plan, made from the job, the state and the provider,
with nothing written and nothing sent (but ``quote``'s ``dryrun-`` quotations).

``make_plan`` validates the job (the provider is only read), pairs each valid item with its
state record and says what a run would do with it (``PlannedItem.action``: ``new``,
``resume`` at the step reached, ``in_doubt``, ``retry`` under a new external_id; or skipped:
``settled``, ``failed``, ``review`` (a person decides), ``changed`` (after its payment
started), ``duplicate`` (held: it pays what another item of the batch pays), ``refused``
(another job holds it), ``invalid``; ``held`` by the payee check). With
``verify`` (``run.verify_payees``, ``runner plan --verify``) each item to pay whose money has
not moved yet has its payee checked (``runner.payees``): its finding goes with it, and under
``hold`` an item with no match, an account not available or a check that failed, unless a
person accepted it, is ``held`` instead of paid. It prices what is to be paid (the
state's amounts once quoted; real quotations with ``quote``; else what validation estimates
from the provider's published rates) and adds up what each balance must cover against what it
holds (``Need``). `runner plan`, `runner run --dry-run`, the question asked on a terminal,
`runner run` (its funds-first check and the items it works on) and `runner apply` (which
compares a plan file with the plan made again) all read it; ``runner.engine.plan_text``
renders it. With ``quote``, an item whose quotation the provider refuses is
``quote_refused``, with the provider's code and message: not paid, and recorded as refused
by the run that applies the plan. Its reads and dry runs (the catalogue, the balances, the
quotations, the fee estimates) are retried as the run's calls are (the flow's policy); a
provider that still cannot answer them stops the plan (75, 78), nothing paid.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from runner import lifecycle
from runner.engine.duplicates import Duplicates
from runner.engine.flow import Flow, Run, fingerprint
from runner.engine.funds import Need, available, draw, estimate_fees, needs
from runner.errors import ProviderError, stop_if_down
from runner.job import Job, ValidItem
from runner.job.rows import RowValues
from runner.kinds import Price, kind_named
from runner.lifecycle import LISTED, SKIPPED, TO_PAY, UNPAID_STEPS, PlanAction, State, Step
from runner.payees.checks import Finding, PayeeChecks
from runner.provider import Provider
from runner.provider.retry import RetryPolicy
from runner.state import ItemRecord, StateStore, derived_ref
from runner.summary.lines import identifier_text
from runner.summary.model import Scrubber
from runner.validation import QUOTATIONS, Report, dry_run_stamp, policy_of, validate_job

CHUNK = 500  # items of a streamed plan looked up in the state at once
CHANGED = "the item changed after its payment started; check it by hand"


@dataclass
class PlannedItem:
    """One row of the job and what a run would do with it. ``ref`` is the external_id its
    next call goes out under; ``step`` how far it went; ``changed`` the row differs from the
    one the state recorded; ``why`` the reason it is skipped, in doubt or sent again."""

    external_id: str
    row: int
    action: PlanAction
    ref: str = ""
    fingerprint: str = ""
    step: str = ""
    changed: bool = False
    why: str = ""
    price: Price | None = None
    balance: str | None = None  # the balance it draws on (``Flow.draws``)
    paid_to: str = ""  # who its item paid (or is paying), when its row asks otherwise now
    code: str = ""  # the provider's code, of a quotation it refused (``why``: its message)
    payee: Finding | None = None  # its payee check's finding
    lineage: int = 1  # the item's ``-fN`` (``runner.state.derived_ref``) its ``ref`` is of
    # Who is paid (``Flow.summary_of``: names and masked identifiers), for a plan kept whole.
    who: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    content: str | None = None  # what it pays, as a digest (``runner.engine.duplicates``)
    valid: ValidItem | None = field(default=None, repr=False, compare=False)
    record: ItemRecord | None = field(default=None, repr=False, compare=False)

    @property
    def pays(self) -> bool:
        return self.action in TO_PAY

    @property
    def left_unpaid(self) -> bool:
        """Its row asks another payment than the one made or on its way: not paid again."""
        return self.action is PlanAction.CHANGED or (
            self.action is PlanAction.SETTLED and self.changed)

    def as_dict(self) -> dict[str, Any]:
        price = self.price
        return {"external_id": self.external_id, "row": self.row, "action": self.action,
                "ref": self.ref, "lineage": self.lineage, "step": self.step,
                "changed": self.changed, "why": self.why,
                **({"code": self.code} if self.code else {}),
                "fingerprint": self.fingerprint, "balance": self.balance, **people(self.who),
                **({k: _text(v) for k, v in asdict(price).items()} if price else {}),
                **({"payee": self.payee.as_dict()} if self.payee is not None else {})}

    @property
    def verified(self) -> bool:
        """True when its payee is checked: to pay, and its money not moved yet."""
        return self.valid is not None and (
            self.action in (PlanAction.NEW, PlanAction.RETRY) or
            (self.action is PlanAction.RESUME and self.step in UNPAID_STEPS))


def people(who: dict[str, Any] | None) -> dict[str, str]:
    """Who an item pays, as a plan file lists it: the beneficiary's name, the payer (or the
    payment method) and the account, masked as every report masks it."""
    if who is None:
        return {}
    payer = who.get("payer_id", who.get("payment_method_id"))
    return {"beneficiary": str(who.get("beneficiary") or ""),
            "payer": "" if payer is None else str(payer), "account": identifier_text(who),
            **({k: who[k] for k in ("account_key", "accept_as") if who.get(k)})}


@dataclass
class Plan:
    """The plan of a job. ``items``: every row (``runner plan``, ``runner apply``), or, for a
    run (``streamed``: its items are staged in the state instead), only those a person
    looks at (``LISTED``); the counts and totals are kept as the items are added."""

    job: str
    kind: str
    file: str
    items: list[PlannedItem]
    needs: list[Need]
    report: Report
    quoted: bool = False
    retry_failed: bool = False
    include_unchanged: bool = False  # with retry_failed: unchanged refusals sent again too
    allow_duplicates: bool = False
    on_invalid: str = "stop"
    made_by: str = ""
    made_on: str = ""
    state: str = ""  # where the state read is, as the plan shows it
    made_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    streamed: bool = False
    tally: Counter[PlanAction] = field(default_factory=Counter)  # of a streamed plan
    steps: Counter[str] = field(default_factory=Counter)  # where resumed items are
    money: dict[str, Decimal] = field(default_factory=dict)  # to pay, per currency
    left_unpaid: int = 0  # rows asking another payment than the one made or on its way
    fee_samples: int = 0  # quotations sent to estimate fees (``runner.engine.fees``)
    # Payee checks: the policy they were made under ("" none), whether the kind has one,
    # the findings by result, and how many accounts were asked of the provider.
    verify: str = ""
    payee_offered: bool = True
    payees: Counter[str] = field(default_factory=Counter)
    asked: int = 0

    def add(self, p: PlannedItem) -> None:
        if p.left_unpaid:
            self.left_unpaid += 1
        if not self.streamed or p.action in LISTED or p.left_unpaid \
                or (p.payee is not None and p.payee.notable):
            self.items.append(p)
        if p.payee is not None:
            self.payees[p.payee.result.value] += 1
        if self.streamed:
            self.tally[p.action] += 1
            if p.action is PlanAction.RESUME:
                self.steps[p.step] += 1
            if p.pays and p.price is not None:
                self.money[p.price.currency] = self.money.get(p.price.currency, Decimal(0)) \
                    + p.price.amount

    def of(self, *actions: PlanAction) -> list[PlannedItem]:
        return [p for p in self.items if p.action in actions]

    @property
    def to_pay(self) -> list[PlannedItem]:
        return self.of(*TO_PAY)

    @property
    def paying(self) -> int:
        """How many items a run would pay."""
        return sum(self.counts.get(a, 0) for a in TO_PAY)

    @property
    def rows(self) -> int:
        return sum(self.counts.values())

    @property
    def counts(self) -> dict[str, int]:
        counts = {a: 0 for a in (*TO_PAY, *SKIPPED)}
        if self.streamed:
            counts.update(self.tally)
        else:
            for p in self.items:
                counts[p.action] += 1
        return {a: n for a, n in counts.items() if n}

    def resumed_at(self) -> Counter[str]:
        """Where the items to resume are: step -> how many."""
        if self.streamed:
            return self.steps
        return Counter(p.step for p in self.items if p.action is PlanAction.RESUME)

    @property
    def stops(self) -> bool:
        """Invalid items stop the run (``on_invalid: stop``): nothing would be sent."""
        return bool(self.counts.get(PlanAction.INVALID)) and self.on_invalid == "stop"

    @property
    def short(self) -> list[Need]:
        return [n for n in self.needs if n.short]

    def shortfall(self) -> str:
        """'' when the balances cover the items to pay, else what each one lacks."""
        return "; ".join(n.shortfall() for n in self.short)

    def totals(self) -> dict[str, Decimal]:
        """The amounts to pay per currency (fees apart), for the question before a run."""
        if self.streamed:
            return dict(self.money)
        totals: dict[str, Decimal] = {}
        for p in self.to_pay:
            if p.price is not None:
                totals[p.price.currency] = totals.get(p.price.currency, Decimal(0)) + \
                    p.price.amount
        return totals

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.job, "kind": self.kind, "file": self.file, "state": self.state,
                "quoted": self.quoted, "retry_failed": self.retry_failed,
                "include_unchanged": self.include_unchanged,
                "allow_duplicates": self.allow_duplicates, "made_by": self.made_by,
                "made_on": self.made_on, "made_at": _iso(self.made_at),
                "counts": self.counts, "left_unpaid": self.left_unpaid, "stops": self.stops,
                "shortfall": self.shortfall(),
                "balances": [n.as_dict() for n in self.needs],
                **({"payee_checks": self.payee_checks()} if self.verify else {}),
                "items": [p.as_dict() for p in self.items]}

    def payee_checks(self) -> dict[str, Any]:
        """The payee checks in short: the policy, the findings by result, the accounts
        asked of the provider (the others' answers were kept from earlier)."""
        return {"policy": self.verify, "offered": self.payee_offered,
                "findings": dict(sorted(self.payees.items())), "asked": self.asked}


def who() -> tuple[str, str]:
    """(user, host) of whoever runs this process, for plans and approvals."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        user = f"uid {os.getuid()}"
    return user, socket.gethostname()


def flow_for(job: Job, provider: Provider, state: StateStore,
             clock: Callable[[], float] = time.time) -> Flow[Any, Any]:
    """The job's flow for reading only (no run: it must not write)."""
    kind = kind_named(job.kind)
    return kind.flow(kind.client(provider), Run(state, 0, job.name, policy_of(job), clock))


def make_plan(job: Job, provider: Provider, state: StateStore, flow: Flow[Any, Any], *,
              quote: bool = False, retry_failed: bool = False,
              include_unchanged: bool = False, allow_duplicates: bool = False,
              sink: Callable[[PlannedItem], None] | None = None, verify: str = "off",
              workers: int | None = None) -> Plan:
    """What a run would do now with every row of ``job`` (see the module's docstring).

    With ``sink`` the plan streams: each planned item goes to ``sink`` as it is made (a
    run stages it in the state) and the plan keeps only its counts, its totals and the
    items a person looks at; memory does not grow with the batch. ``verify`` (warn, hold)
    checks the payees, ``workers`` at a time (default: the job's concurrency). Possible
    duplicates are held (``runner.engine.duplicates``) unless ``allow_duplicates``."""
    made_by, made_on = who()
    plan = Plan(job.name, job.kind, str(job.path), [], [], Report(str(job.path), job.kind),
                quoted=quote, retry_failed=retry_failed,
                include_unchanged=retry_failed and include_unchanged,
                allow_duplicates=allow_duplicates, on_invalid=job.run.on_invalid,
                made_by=made_by, made_on=made_on, state=state.location,
                streamed=sink is not None)
    clean = Scrubber(job.credentials())  # provider messages may echo what they were sent
    found: dict[str, Need] = {}
    pending: list[tuple[ValidItem, Price | None]] = []
    payees = None
    if verify != "off":
        plan.verify = verify
        payees = PayeeChecks(job.name, kind_named(job.kind).payee, provider, state, verify,
                             float(job.run.verify_for), flow.policy,
                             workers or job.run.concurrency, flow.clock,
                             job.rules.under(state.rules.of(job.name)))
        plan.payee_offered = payees.offered
    duplicates = Duplicates(state, job, allow_all=allow_duplicates)

    def flush() -> None:
        ids = [v.external_id for v, _ in pending]
        known = {i: r for i, r in state.items_by_id(ids).items() if r.job_name == job.name}
        retries = [derived_ref(r.external_id, r.lineage + 1) for r in known.values()
                   if retry_failed and flow.retryable(r)]
        owners = state.owners([i for i in ids if i not in known] + retries)
        planned = [classify(v, price, known.get(v.external_id), owners, flow, retry_failed,
                            plan.include_unchanged) for v, price in pending]
        duplicates.check(planned)  # first: a possible duplicate's payee is not asked about
        if payees is not None and payees.offered:
            check(payees, planned)
        for p in planned:
            p.why = clean(p.why)
            if sink is None and p.valid is not None:  # a plan kept whole says who it pays
                p.who = flow.summary_of(p.valid.item)
            if sink is not None:
                draw(flow, p, found)
                sink(p)
                p.valid = p.record = None  # the state has it now
            plan.add(p)
        pending.clear()

    def keep(valid: ValidItem, price: Price | None) -> None:
        pending.append((_lean(valid), price))
        if len(pending) >= CHUNK:
            flush()

    try:
        plan.report = validate_job(job, provider, check_balances=False, state=state,
                                   keep=keep, policy=flow.policy)
        flush()
    finally:
        duplicates.close()
        if payees is not None:
            payees.close()
            plan.asked = payees.asked
    by_row: dict[int, list[str]] = {}
    for problem in plan.report.problems:
        if problem.row is not None:
            by_row.setdefault(problem.row, []).append(
                f"{problem.field}: {problem.message}" if problem.field else problem.message)
    for row, why in by_row.items():
        if row in plan.report.invalid_rows:
            plan.add(PlannedItem("", row, PlanAction.INVALID, why="; ".join(why)))
    plan.items.sort(key=lambda p: p.row)
    if quote and kind_named(job.kind).quote is not None:
        _quote(job, provider, plan, flow.policy)
    balances(plan, flow, provider, found if sink is not None else None)
    return plan


def balances(plan: Plan, flow: Flow[Any, Any], provider: Provider,
             found: dict[str, Need] | None = None) -> None:
    """What each balance must cover, against what it holds (``found``: what a streamed plan
    drew, else its items'), with the fees not quoted estimated where they could make it
    short (``runner.engine.fees``: a few ``dryrun-fees-`` quotations)."""
    plan.needs = available(flow, found) if found is not None else needs(flow, plan.items)
    quote = kind_named(plan.kind).quote
    plan.fee_samples = estimate_fees(plan.needs, None if quote is None else
                                     lambda valid, namespace: quote(valid, provider, namespace,
                                                                    flow.policy))


def check(payees: PayeeChecks, planned: list[PlannedItem]) -> None:
    """Each item's payee finding; under hold, the items it holds become ``held``."""
    todo = [p for p in planned if p.verified]
    findings = payees.findings((p.external_id, p.valid.item) for p in todo if p.valid)
    for p in todo:
        p.payee = findings[p.external_id]
        if payees.holding and p.payee.holds:
            p.action, p.why = PlanAction.HELD, f"payee check: {p.payee.text()}, for " \
                f"{p.payee.name or 'no name'} ({p.payee.identifier}); fix the row, or " \
                f"accept the payee (runner resolve --accept-payee)"


def _lean(valid: ValidItem) -> ValidItem:
    """The item without the row it was made from (read once by validation, not kept for
    the whole batch)."""
    return replace(valid, values=RowValues())


def classify(valid: ValidItem, price: Price | None, record: ItemRecord | None,
             owners: dict[str, str], flow: Flow[Any, Any], retry_failed: bool,
             include_unchanged: bool = False) -> PlannedItem:
    """What a run does with one valid item, given its state record (None: new to the state)
    and who holds the external_ids concerned (rule 7)."""
    request = fingerprint(flow.fingerprinted(valid.item))
    p = PlannedItem(valid.external_id, valid.row, PlanAction.NEW, valid.external_id, request,
                    Step.NEW, price=price, valid=valid, record=record)
    if record is None:
        if valid.external_id in owners:
            p.action = PlanAction.REFUSED
            p.why = f"already handled by job {owners[valid.external_id]}; not paid again"
        return p
    p.ref, p.step, p.changed = record.ref, record.step, record.fingerprint != request
    p.lineage = record.lineage
    if record.source_currency and record.source_amount is not None and \
            record.step not in (Step.NEW, Step.FINAL):
        p.price = Price(record.source_currency, record.source_amount, record.fee,
                        price.rate if price else None, rate_name=price.rate_name if price
                        else "", received_currency=record.destination_currency or "",
                        received=record.destination_amount)
    failure = " ".join(x for x in (record.error_code, record.error_message) if x)
    state = lifecycle.state(record)
    if state in lifecycle.FINAL:
        p.action, p.why = _final(record, failure, owners, flow, retry_failed,
                                 include_unchanged, p.changed)
        if p.action is PlanAction.RETRY:
            p.lineage = record.lineage + 1
            p.ref, p.step, p.price = derived_ref(record.external_id, p.lineage), Step.NEW, price
    elif p.changed and (record.step != Step.NEW or state is State.IN_DOUBT):
        p.action, p.why = PlanAction.CHANGED, CHANGED
    elif state is State.IN_DOUBT:
        p.action = PlanAction.IN_DOUBT
        p.why = f"the {record.intent} was sent and its answer lost: looked up first"
    else:
        p.action = PlanAction.RESUME
        p.why = f"last refused: {failure}" if state is State.REFUSED and failure else ""
    if p.left_unpaid:
        p.paid_to = str(json.loads(record.summary or "{}").get("beneficiary") or "")
    return p


def _final(record: ItemRecord, failure: str, owners: dict[str, str], flow: Flow[Any, Any],
           retry_failed: bool, include_unchanged: bool, changed: bool
           ) -> tuple[PlanAction, str]:
    """The action and why of a final item (unknown and conflict ones are a person's). A
    failed one is sent again (``--retry-failed``) when the provider may pay it: its row
    changed, or its refusal was of the moment (``Flow.transient``); an unchanged one refused
    for good only with ``--include-unchanged``."""
    since = "changed since it failed" if changed else "unchanged since it failed"
    state = lifecycle.state(record)
    if state is State.SETTLED:
        return PlanAction.SETTLED, ""
    if state is State.FAILED and record.paid_before:
        return PlanAction.SETTLED, f"paid by its earlier attempt {record.paid_before[0].ref} " \
                                   f"(found by reconcile); not paid again"
    if state is not State.FAILED:
        return PlanAction.REVIEW, record.error_message or record.outcome
    if not flow.retryable(record):
        return PlanAction.FAILED, f"{failure}; {since}"
    following = derived_ref(record.external_id, record.lineage + 1)
    if following in owners:
        return PlanAction.FAILED, (f"{failure}; not sent again: {following} is held by job "
                                   f"{owners[following]}; {since}")
    again = changed or flow.transient(record)
    if not retry_failed:
        how = "--retry-failed" if again else "--retry-failed --include-unchanged"
        return PlanAction.FAILED, f"{failure}; {how} sends it again as {following}; {since}"
    if not again and not include_unchanged:
        return PlanAction.FAILED, (f"{failure}; {since}: not sent again (--include-unchanged "
                                   f"sends it as {following})")
    return PlanAction.RETRY, f"{failure}; {since}"


def _quote(job: Job, provider: Provider, plan: Plan, policy: RetryPolicy) -> None:
    """Real quotations (``dryrun-<stamp>-`` external_ids, never confirmed) for the items to
    pay that are not quoted yet, asked as ``policy`` retries a run's calls; one the provider
    refuses is not paid (``quote_refused``), and says the provider's code and message, as a
    run that quoted it would. A provider that cannot answer them stops the plan
    (``runner.errors.down``: 75, or 78 for the configuration), no plan made."""
    kind = kind_named(job.kind)
    assert kind.quote is not None
    stamp = dry_run_stamp()
    clean = Scrubber(job.credentials())
    todo = [p for p in plan.to_pay if p.valid is not None and p.step == Step.NEW]

    def one(p: PlannedItem) -> None:
        assert p.valid is not None and kind.quote is not None
        try:
            quoted = kind.quote(p.valid, provider, stamp, policy)
        except ProviderError as exc:  # its message may echo what it was sent
            stop_if_down(exc, QUOTATIONS, read=True)  # the provider's state, not the item's
            p.action, p.code, p.why = PlanAction.QUOTE_REFUSED, exc.code or "", clean(exc.message)
            return
        p.price = replace(quoted, rate=p.price.rate if p.price else None,
                          rate_name=quoted.rate_name or (p.price.rate_name if p.price else ""))

    pool = ThreadPoolExecutor(max_workers=job.run.concurrency, thread_name_prefix="quote")
    try:
        list(pool.map(one, todo))
    finally:  # after a stop, the quotations not started are not asked
        pool.shutdown(wait=True, cancel_futures=True)
    plan.report.quoted = True


def _text(value: Any) -> Any:
    return str(value) if isinstance(value, Decimal) else value


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")
