"""What a job came to, read from the state: the batch's one read model.

``Summary`` answers finance's questions after a run: what happened to the money (per
currency: planned = paid + failed + pending, and what was not paid), who was paid and at
what rate, what failed and why (the provider's code and message), what needs a person and
what to check, what is still pending, and which run moved the money (and the runs since).
Every view of a batch reads it: the closing lines of ``runner run`` and ``runner status``
(``status_lines``), ``runner report`` in every format, the summary files and the email, and
the run's own exit code (``problems``). It is built from the job's items and runs (read,
never written), so it can be built at any time.

Its ``digest`` says what it says, in a form that stays the same while nothing a reader
cares about changes (a provider status moving along inside "pending" does not count); the
run's end keeps it (``runs.digest``), and a run whose summary's digest is the one the last
emailed summary had mails nothing (``changed``).

Items are ``lines.ItemLine``: names and masked identifiers only, provider text scrubbed of
the job's credentials and of card numbers (``Scrubber``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from runner.credentials import Credential
from runner.exit_codes import ExitCode
from runner.kinds import kind_named
from runner.lifecycle import Call, PlanAction, Shown
from runner.state import Approval, RunRecord, StateStore
from runner.summary.amounts import money_text
from runner.summary.lines import Detail, Instruction, ItemLine, item_line, when
from runner.summary.lines import Scrubber as Scrubber
from runner.summary.tally import LIST_LIMIT, PROBLEMS, REVIEW, STAGES, STATES, Listed, Tally
from runner.summary.totals import CurrencyTotal, Rate

if TYPE_CHECKING:
    from runner.summary.items_csv import Spool

# Exit codes besides 0, 1, 2: a run stopped because the balances cannot cover what it would
# pay (nothing was paid), and `runner status` while items are still on their way.

__all__ = ["LIST_LIMIT", "PROBLEMS", "REVIEW", "STATES", "CurrencyTotal", "Detail",
           "Instruction", "ItemLine", "Listed", "Rate", "Scrubber"]
# Reads the job's items again, in row order, from an open store (for the CSV).
Reader = Callable[[StateStore], Iterator[ItemLine]]


@dataclass(frozen=True)
class RunTimes:
    id: int
    started_at: datetime
    ended_at: datetime | None
    exit_code: int | None
    state: str  # ended, running, interrupted
    message: str = ""  # why it stopped (for a run stopped short of funds: what lacked)
    approval: Approval | None = None  # who planned and approved it (`runner apply`)
    moved: int = 0  # the calls it sent that move money (the kind's commit step: confirm ...)
    changed: bool = True  # its summary said something the one before it did not
    digest: str | None = None
    mailed: bool = False

    @property
    def duration(self) -> timedelta | None:
        return None if self.ended_at is None else self.ended_at - self.started_at


@dataclass
class Summary:
    """``items`` and the lists hold their first ``limit`` items and count every one
    (``tally.Listed``); ``lines`` reads them all again from the state, for the CSV (a run's
    reports copy its ``spool`` instead, written as the summary read them)."""

    job: str
    run: RunTimes | None
    items: Listed | Sequence[ItemLine]  # a Listed once made
    totals: list[CurrencyTotal]
    counts: dict[str, int]
    refused: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    csv_path: str | None = None
    generated_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    runs: list[RunTimes] = field(default_factory=list)  # every run of the job, oldest first
    rates: list[Rate] = field(default_factory=list)
    commit_step: str = Call.CONFIRM  # the call that moves money, for the run history
    limit: int = LIST_LIMIT
    tally: Tally | None = field(default=None, repr=False, compare=False)
    reader: Reader | None = field(default=None, repr=False, compare=False)
    store: StateStore | None = field(default=None, repr=False, compare=False)
    # Every line as CSV, written as the summary read them (the run's reports copy it).
    spool: Spool | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.tally is None:  # made from a list of lines (an empty summary, a test)
            self.tally = Tally(self.limit)
            for line in self.items:
                self.tally.add(line)
        self.items = self.tally.items

    @property
    def _tally(self) -> Tally:
        assert self.tally is not None
        return self.tally

    def lines(self, store: StateStore | None = None) -> Iterator[ItemLine]:
        """Every item, in row order, read again from ``store`` (by default the one the
        summary was built from, which must still be open), never all held at once."""
        if self.reader is None:
            yield from self._tally.items
            return
        source = store or self.store
        assert source is not None
        yield from self.reader(source)

    @property
    def failed(self) -> Listed:
        return self._tally.failed

    @property
    def needs_person(self) -> Listed:
        return self._tally.needs_person

    @property
    def pending(self) -> Listed:
        return self._tally.pending

    @property
    def left_unpaid(self) -> Listed:
        """Items paid (or on their way) whose job row asks another payment since (state
        ``changed``): the new request is not paid (a new batch needs a new job name)."""
        return self._tally.left_unpaid

    @property
    def payees(self) -> Listed:
        """Items whose payee check found anything but a match (paid or not)."""
        return self._tally.payees

    @property
    def awaiting_confirm(self) -> Listed:
        return self._tally.awaiting_confirm

    @property
    def with_details(self) -> Listed:
        """Items the provider gave details for (QR code, instructions, payment URL ...)."""
        return self._tally.with_details

    @property
    def stages(self) -> dict[str, int]:
        """The pending items by how far they went (confirmed, created, not started): after
        an interruption, what was confirmed is on its way and the rest waits for a run."""
        return {k: n for k, n in self._tally.stages.items() if n}

    @property
    def funds_stop(self) -> bool:
        """The latest run stopped because the balances could not cover what it would pay
        (before anything was confirmed)."""
        return self.run is not None and self.run.exit_code == ExitCode.FUNDS_SHORT

    @property
    def unpriced(self) -> int:
        """Items not settled whose amount the provider has not stated yet (not quoted)."""
        return self._tally.unpriced

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
        """`runner status`'s exit code: PROBLEMS (1) when an item did not end well (or may
        not have), else FUNDS_SHORT (4) when the latest run stopped short of funds, else
        PENDING (5) while any is on its way (or none was made yet), else OK (0)."""
        if self.items_problems:
            return ExitCode.PROBLEMS
        if self.funds_stop:
            return ExitCode.FUNDS_SHORT
        if not self.items or self.counts.get(Shown.PENDING) or \
                self.counts.get(Shown.AWAITING_CONFIRM):
            return ExitCode.PENDING
        return ExitCode.OK

    @property
    def money_run(self) -> RunTimes | None:
        """The latest run that sent calls moving money (its kind's commit step)."""
        return next((r for r in reversed(self.runs) if r.moved), None)

    @property
    def runs_since(self) -> list[RunTimes]:
        """The runs after ``money_run`` (all of them when none moved money)."""
        moved = self.money_run
        return [r for r in self.runs if moved is None or r.id > moved.id]

    @property
    def digest(self) -> str:
        """What this summary says, hashed: each item's state, step, amounts, provider id and,
        once it is final, the provider's code and message; the run's counts, refusals and
        notes. Not its times, nor a pending item's provider status."""
        return self._tally.digest(sorted(self.counts.items()), self.refused, self.notes)

    @property
    def changed(self) -> bool:
        """Says something the last summary emailed did not (True when none was)."""
        mailed = next((r.digest for r in reversed(self.runs) if r.mailed), None)
        return self.digest != mailed

    def _amounts(self, group: str) -> str:
        sums = self._tally.groups.get(group, {})
        return ", ".join(money_text(a, c) for c, a in sorted(sums.items()))

    @property
    def headline(self) -> str:
        """``payroll-2026-11: 248 paid (EUR 24,800.00), 2 failed (EUR 200.00)``: the default
        subject; ``payroll-2026-11: nothing paid, funds short: EUR 2,626,416.48 needed, ...``
        when the latest run stopped because the balances could not cover the batch."""
        c = self.counts
        review = sum(c.get(k, 0) for k in REVIEW)
        if self.run is not None and self.run.exit_code == ExitCode.FUNDS_SHORT:
            before = f" ({c[Shown.SETTLED]} paid before)" if c.get(Shown.SETTLED) else ""
            return f"{self.job}: nothing paid, funds short: {self.run.message}{before}"

        def part(n: int, words: str, group: str = "") -> str:
            amounts = self._amounts(group) if group else ""
            return f"{n:,} {words}" + (f" ({amounts})" if amounts else "")

        parts = [part(self._tally.paid, "paid", "paid")]
        parts += [part(c[k], k, "failed" if k == Shown.FAILED else "") for k in
                  (Shown.FAILED, PlanAction.REFUSED, PlanAction.INVALID) if c.get(k)]
        if c.get(Shown.CHANGED):
            parts.append(f"{c[Shown.CHANGED]:,} changed after being paid or sent (not paid "
                         f"again)")
        if c.get(Shown.PAID_TWICE):
            parts.append(part(c[Shown.PAID_TWICE], "paid twice", "twice"))
        if review:
            parts.append(f"{review} {'needs' if review == 1 else 'need'} review")
        if c.get(Shown.PENDING):
            parts.append(part(c[Shown.PENDING], "pending"))
        if c.get(Shown.AWAITING_CONFIRM):
            parts.append(f"{c[Shown.AWAITING_CONFIRM]} awaiting confirmation")
        return f"{self.job}: {', '.join(parts)}"

    def as_dict(self) -> dict[str, Any]:
        moved = self.money_run
        return {
            "job": self.job, "headline": self.headline, "generated_at": _iso(self.generated_at),
            "run": _run_dict(self.run), "money_run": _run_dict(moved),
            "runs_since": len(self.runs_since) if moved else None,
            "counts": {**{k: 0 for k in STATES}, **self.counts},
            "pending_stages": {**{k: 0 for k in STAGES}, **self.stages},
            "totals": [{"currency": t.currency, "sent": t.sent,
                        "fees": t.fees if t.fees_known else None, "received": t.received,
                        "planned": t.planned, "failed": t.failed, "pending": t.pending,
                        "held": t.held, "to_check": t.review, "not_paid": t.not_paid,
                        "paid_twice": t.twice}
                       for t in self.totals],
            "rates": [{"source": r.source, "destination": r.destination, "sent": r.sent,
                       "received": r.received, "items": r.items, "rate": r.rate}
                      for r in self.rates],
            "not_priced": self.unpriced,
            "failed": [_item_dict(i) for i in self.failed],
            "changed": [_item_dict(i) for i in self.left_unpaid],
            "needs_person": [_item_dict(i) for i in self.needs_person],
            "pending": [_item_dict(i) for i in self.pending],
            "awaiting_confirm": [_item_dict(i) for i in self.awaiting_confirm],
            "details": [{"external_id": i.external_id, "beneficiary": i.beneficiary,
                         "state": i.state, "details": [asdict(d) for d in i.details]}
                        for i in self.with_details],
            "refused": [{"external_id": e, "why": w} for e, w in self.refused],
            "payee_findings": [{"external_id": i.external_id, "row": i.row,
                                "beneficiary": i.beneficiary, "identifier": i.identifier,
                                "state": i.state, "finding": i.payee} for i in self.payees],
            "notes": self.notes, "csv": self.csv_path, "items": len(self.items),
            "listed": {"limit": self.limit, "failed": len(self.failed),
                       "needs_person": len(self.needs_person), "pending": len(self.pending),
                       "changed": len(self.left_unpaid),
                       "payee_findings": len(self.payees),
                       "awaiting_confirm": len(self.awaiting_confirm),
                       "details": len(self.with_details)}}


def _item_dict(item: ItemLine) -> dict[str, Any]:
    return {k: _iso(v) if isinstance(v, datetime) else v for k, v in asdict(item).items()}


def _run_dict(run: RunTimes | None) -> dict[str, Any] | None:
    if run is None:
        return None
    duration = run.duration
    return {"id": run.id, "state": run.state, "started_at": _iso(run.started_at),
            "ended_at": _iso(run.ended_at),
            "duration_seconds": None if duration is None else duration.total_seconds(),
            "exit_code": run.exit_code, "message": run.message or None,
            "approval": asdict(run.approval) if run.approval is not None else None,
            "money_calls": run.moved}


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat().replace("+00:00", "Z")


def build_summary(store: StateStore, job_name: str, *,
                  secrets: Iterable[str | Credential] = (),
                  refused: Iterable[tuple[str, str]] = (),
                  notes: Iterable[str] = (),
                  each: Callable[[ItemLine], None] | None = None) -> Summary:
    """The summary of ``job_name`` as the state holds it now, read a page of items at a
    time: what it holds does not grow with the batch.

    ``secrets`` (the job's credentials) are masked in every text, in every form; ``refused`` and
    ``notes`` are what only the run that just ended knows (the items another job holds,
    with why; its closing message): the state keeps only their count. ``each`` is handed
    every item's line as it is read (a run's ``items_csv.Spool``)."""
    clean = Scrubber(secrets)
    first = next(store.item_pages(job_name, Call.CONFIRM, size=1), [])
    commit = kind_named(first[0][0].kind).flow.commit_call if first else Call.CONFIRM

    def reader(source: StateStore) -> Iterator[ItemLine]:
        for page in source.item_pages(job_name, commit):
            for record, confirmed_at in page:
                yield item_line(record, clean, confirmed_at)

    tally = Tally()
    for line in reader(store):
        tally.add(line)
        if each is not None:
            each(line)
    run = store.latest_run(job_name)
    counts = dict(tally.counts)
    # Refused (rule 7) and invalid items never reach this job's rows: the run counted them.
    for key in (PlanAction.REFUSED, PlanAction.INVALID):
        if run is not None:
            counts[key] = int(run.counts.get(key, 0))
    summary = Summary(job_name, None, (), tally.sums.totals(),
                      {k: n for k, n in counts.items() if n},
                      [(e, clean(w)) for e, w in refused],
                      [clean(n) for n in notes if n], rates=tally.sums.rates(),
                      commit_step=commit, tally=tally, reader=reader, store=store)
    read_runs(summary, store)
    return summary


def read_runs(summary: Summary, store: StateStore) -> None:
    """Read the run history and the latest run into ``summary`` (again, once a run's end
    is written)."""
    # The latest first: a worker sharing the job may start a run meanwhile, and the history
    # read after it holds the latest whatever it is.
    latest = store.latest_run(summary.job)
    summary.runs, digest = [], None
    for record in store.runs(summary.job):
        times = run_times(record, summary.commit_step)
        assert times is not None
        if record.digest is not None:
            times = replace(times, changed=record.digest != digest)
            digest = record.digest
        summary.runs.append(times)
    summary.run = None if latest is None else next(r for r in summary.runs if r.id == latest.id)


def run_times(run: RunRecord | None, commit_step: str = Call.CONFIRM) -> RunTimes | None:
    if run is None:
        return None
    started = when(run.started_at)
    assert started is not None
    return RunTimes(run.id, started, when(run.ended_at), run.exit_code, run.state,
                    run.message, run.approval, run.calls.get(commit_step, 0),
                    digest=run.digest, mailed=run.mailed)
