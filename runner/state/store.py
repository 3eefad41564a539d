"""The state store's interface: every read and write of runner's own state goes through it.

The engine commits an item's intent before each non-idempotent call and the outcome after
(exactly-once rule 2), works a job as one of its workers (``join``: the job's lease,
rule 6), and asks who else holds an
external_id (rule 7); the validation asks what operations were already sent; the summary
reads items and the latest run. Nothing outside ``runner.state`` writes SQL.

One class for both backends, composed: a ``Connector`` (``runner.state.connector``: SQLite
or PostgreSQL, each with its SQL in its own dialect, ``runner/state/sql``), the job's lease
(``runner.state.leases``: one run per job on SQLite, shared on PostgreSQL), and the parts
that hold the queries: ``runs``, ``items``, ``payees``, ``workers`` (claims and the job's
steps) and ``passes`` (the staged plan, the passes, the job's outstanding cost). The parts
added since are handed out rather than forwarded to: ``rules`` (what a batch was planned
under, ``runner.state.rules``), ``payees`` (the payee checks and acceptances) and ``plans``
(the plan files kept, and the console's approvals, ``runner.state.plans``). ``dump`` and
``load`` move a whole state (``runner state copy``).

Each method that changes something is one committed transaction: when it returns, the change
survives the process being killed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, Unpack

from runner.errors import LeaseHeld, StateError
from runner.state.connector import Connector, Row
from runner.state.history import Approval, RetryRecord
from runner.state.holders import LEASE_TTL
from runner.state.items import ItemBook
from runner.state.leases import CLAIM_TTL, Leases, Worker
from runner.state.payees import PayeeBook
from runner.state.plans import PlanBook
from runner.state.queue import Queue
from runner.state.records import (
    AttemptRecord,
    ItemChanges,
    ItemRecord,
    PayeeCheck,
    PlanFileRecord,
    RunRecord,
    Staged,
    WorkLeft,
    now_iso,
)
from runner.state.rules import BatchRulesBook
from runner.state.runs import RunBook
from runner.state.workers import Workers

__all__ = ["CLAIM_TTL", "LEASE_TTL", "StateStore", "Worker", "now_iso"]


class StateStore:
    """Thread-safe: the engine's workers share one store."""

    def __init__(self, db: Connector, leases: Leases) -> None:
        self.db = db
        self.leases = leases
        self.location = db.location  # for messages (a path, or a URL without password)
        self._runs = RunBook(db, leases)
        self._items = ItemBook(db)
        self._payees = PayeeBook(db)
        self._workers = Workers(db, leases)
        self._queue = Queue(db)
        # Parts handed out (a store of parts: ``StateStore.rules.of(job_name)``).
        self.rules = BatchRulesBook(db)
        self.payees = self._payees
        self.plans = PlanBook(db)

    @property
    def shared(self) -> bool:
        """Several processes (on several hosts) may work one job at once on this state: the
        job's lease does not refuse a second run, and the steps of the whole job are
        shared."""
        return self.leases.shared

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------ runs and the lease
    def start_run(self, job_name: str, job_file: str) -> int:
        return self._runs.start_run(job_name, job_file)

    def note_checks(self, run_id: int, invalid: int, refused: int) -> None:
        """What the run's checks found before anything was sent: how many items are
        invalid, and how many are refused because another job holds them (rule 7)."""
        self._runs.note_checks(run_id, invalid, refused)

    def end_run(self, run_id: int, exit_code: int, counts: Mapping[str, int],
                message: str = "", digest: str | None = None) -> None:
        """The run's end: its exit code, the item states, its closing message (why it
        stopped, e.g. what the balances lacked), which later summaries show, and the digest
        of the summary it ended with."""
        self._runs.end_run(run_id, exit_code, counts, message, digest)

    def stop_run(self, run_id: int, exit_code: int, message: str) -> None:
        """The end of a run stopped by an error (the provider unreachable, credentials
        refused, a signal before it could stop gracefully ...): its exit code and why, so
        that it reads as ended, not as a process that died; nothing when it had ended."""
        self._runs.stop_run(run_id, exit_code, message)

    def note_exit(self, run_id: int, exit_code: int) -> None:
        """The exit code the run's process exited with, when it is not the one ``end_run``
        wrote: decided after it (the summary's email failed, 3; a signal, 130 or 143)."""
        self._runs.note_exit(run_id, exit_code)

    def note_inputs(self, run_id: int, digest: str) -> None:
        """The digest of the inputs (job, rows, templates) the run validated in full and
        worked on; ``RunRecord.inputs``."""
        self._runs.note_inputs(run_id, digest)

    def note_lines(self, run_id: int, lines: Sequence[str]) -> None:
        """The closing lines the run printed (its status); ``RunRecord.lines``."""
        self._runs.note_lines(run_id, lines)

    def work_left(self, job_name: str) -> WorkLeft:
        """One aggregate over the job's items: how many, how many are neither final nor a
        conflict (a run would work on them), and the latest ``updated_at``."""
        return self._runs.work_left(job_name)

    def note_duplicates_allowed(self, run_id: int) -> None:
        """The run pays possible duplicates (``--allow-duplicates``); ``RunRecord``."""
        self._runs.note_duplicates_allowed(run_id)

    def note_mailed(self, run_id: int) -> None:
        """The run's summary was emailed."""
        self._runs.note_mailed(run_id)

    def runs(self, job_name: str) -> list[RunRecord]:
        """Every run of the job, oldest first, with the calls each sent (by step)."""
        return self._runs.runs(job_name)

    def note_approval(self, run_id: int, approval: Approval) -> None:
        """Who planned and who approved the plan this run applies."""
        self._runs.note_approval(run_id, approval)

    def reopen_run(self, run_id: int) -> bool:
        """Run ``run_id`` again, by this process (its end cleared); False, and nothing
        changed, while a live process holds a lease for it."""
        return self._runs.reopen_run(run_id)

    def note_plan_file(self, plan: PlanFileRecord) -> None:
        """Keep a plan file as `runner plan -o` made it (a plan id kept already stays)."""
        self._runs.note_plan_file(plan)

    def plan_file(self, plan_id: str) -> PlanFileRecord | None:
        """The plan file kept under ``plan_id``, if any."""
        return self._runs.plan_file(plan_id)

    def forget_run(self, run_id: int) -> None:
        """A run refused before it sent anything (an apply whose plan file was refused): no
        run is left of it; one that sent anything stays."""
        self._runs.forget_run(run_id)

    def note_plan_applied(self, plan_id: str, run_id: int) -> None:
        """``run_id`` applies the plan ``plan_id`` (applying it again resumes that run)."""
        self._runs.note_plan_applied(plan_id, run_id)

    def latest_run(self, job_name: str) -> RunRecord | None:
        """The run in progress (the lease holder) if any, else the latest that ended, else
        the latest started (a start refused by the lease leaves a run with no end)."""
        return self._runs.latest_run(job_name)

    def join(self, job_name: str, claim_ttl: float = CLAIM_TTL) -> Worker:
        """This process as a worker of the job, for the block it is entered in: the job's
        lease taken as the block starts (LeaseHeld when a live run holds it alone), kept
        fresh with the worker's claims (lasting ``claim_ttl`` seconds without a heartbeat)
        until the block ends (``runner.state.leases.Worker``)."""
        return Worker(self, job_name, claim_ttl)

    # ------------------------------------------------------------ items
    def item(self, external_id: str) -> ItemRecord | None:
        return self._items.item(external_id)

    def items(self, job_name: str) -> Iterator[ItemRecord]:
        """The job's items in row order."""
        return self._items.items(job_name)

    def item_pages(self, job_name: str, answered: str, size: int = 500
                   ) -> Iterator[list[tuple[ItemRecord, str | None]]]:
        """The job's items in row order, ``size`` at a time (a read of a batch of any size
        that never holds it all), each with when the provider answered its latest
        ``answered`` call (``confirm``: when it was confirmed; None: never)."""
        return self._items.item_pages(job_name, answered, size)

    def owners(self, external_ids: Sequence[str]) -> dict[str, str]:
        """external_id -> the job holding it, for those of ``external_ids`` in the state."""
        return self._items.owners(external_ids)

    def insert_items(self, records: Sequence[ItemRecord]) -> None:
        """New items in one transaction; each record gets its stamps in place."""
        self._items.insert_items(records)

    def update_item(self, external_id: str, **changes: Unpack[ItemChanges]) -> None:
        self._items.update_item(external_id, changes)

    def start_retry(self, retry: RetryRecord, **changes: Unpack[ItemChanges]) -> None:
        """Begin a failed item's next lineage: the retry is recorded (the attempt that
        failed and the new external_id) and the item reset by ``changes``, in one
        transaction."""
        self._items.start_retry(retry, changes)

    def retries(self, job_name: str) -> list[RetryRecord]:
        """Every retry of the job's failed items, oldest first."""
        return self._items.retries(job_name)

    def operations_sent(self, kinds: Sequence[str],
                        order_id: str | None = None) -> list[ItemRecord]:
        """Items of ``kinds`` (in every job) whose call reached the provider or may have:
        in doubt, settled or unknown, with the order they name in ``provider_ref``."""
        return self._items.operations_sent(kinds, order_id)

    def resolve(self, job_name: str, external_id: str, outcome: str, note: str) -> None:
        """Record what a person found at the provider for an item runner could not settle
        (``unknown`` or ``conflict``): it is final from now on, and the note says why."""
        self._items.resolve(job_name, external_id, outcome, note)

    def note_found(self, record: ItemRecord, note: str, **changes: Unpack[ItemChanges]
                   ) -> bool:
        """What `runner reconcile` found at the provider (a payment reversed after it
        settled, an earlier attempt paid after all), written onto the item with an attempt
        row (step ``reconcile``, the note), in one transaction, only while the item is still
        as ``record`` was read (its lineage, attempt, step and outcome: a run that moved it
        on since wins); True when written."""
        return self._items.note_found(record, note, changes)

    # ------------------------------------------------------------ payee checks
    def payee_checks(self, accounts: Sequence[str]) -> dict[str, PayeeCheck]:
        """account -> what the provider last answered about it, for those of ``accounts``
        it answered about (``runner.payees``)."""
        return self._payees.payee_checks(accounts)

    def keep_payee_checks(self, checks: Sequence[PayeeCheck]) -> None:
        """Keep the provider's answers (each replacing the account's earlier one), in one
        transaction."""
        self._payees.keep_payee_checks(checks)

    def begin_attempt(self, run_id: int, external_id: str, step: str,
                      request: Mapping[str, Any],
                      answered: tuple[int, ItemChanges] | None = None) -> int:
        """Commit the intent before the call: the item is in doubt until ``end_attempt``.
        ``answered``: the item's previous call (its attempt id) answered, and what the
        answer made of the item, committed in the same transaction (as ``end_attempt(id,
        external_id, "ok", http_status=200, resolved=False, **changes)`` would, before)."""
        return self._items.begin_attempt(run_id, external_id, step, request, answered)

    def end_attempt(self, attempt_id: int, external_id: str, result: str, *,
                    http_status: int | None = None, code: str | None = None,
                    message: str | None = None, resolved: bool = True,
                    **changes: Unpack[ItemChanges]) -> None:
        """Commit the outcome, with what the item becomes, in one transaction; ``resolved``
        False leaves the item in doubt (its intent kept) unless ``changes`` clear it."""
        self._items.end_attempt(attempt_id, external_id, result, http_status=http_status,
                                code=code, message=message, resolved=resolved,
                                changes=changes)

    def attempts(self, external_id: str) -> list[AttemptRecord]:
        return self._items.attempts(external_id)

    # ------------------------------------------------------------ cooperating workers
    def job_step(self, job_name: str, step: str,
                 digest: str) -> contextlib.AbstractContextManager[bool]:
        """A step that belongs to the whole job (validation and the plan, the balance check
        before the first confirm), done once for inputs of ``digest``. Yields True to the
        worker that must do it (the step is recorded done, for ``digest``, when its block
        ends without an exception), False when it is done already. While one worker is in
        the block, the others wait at its start; when it fails, the next one does it."""
        return self._workers.job_step(job_name, step, digest)

    def finish_job(self, job_name: str, worker: str, key: str, stale: float) -> bool:
        """The worker has no more work (``claim`` gave it nothing): its claims are given
        back. True for exactly one worker per ``key`` (e.g. the inputs' digest and when the
        plan was recorded): the last to finish, when no other live worker (heard from in
        the last ``stale`` seconds) holds a claim on the job's items. That worker writes
        the summary (and its email); its exit code is the summary's."""
        return self._workers.finish_job(job_name, worker, key, stale)

    def rate_slot(self, job_name: str, interval: float, now: float, count: int = 1) -> float:
        """``run.rate_limit`` for all workers together: take the job's next ``count`` free
        slots, ``interval`` seconds apart, atomically; when the first is (the others follow
        it, ``interval`` apart). ``now`` is the caller's clock (``time.time`` or a test's),
        which cooperating hosts keep in step (NTP); the caller waits until the slot."""
        return self._workers.rate_slot(job_name, interval, now, count)

    # ------------------------------------------------------------ a run's items in pages
    def stage_plan(self, job_name: str, staged: Sequence[Staged]) -> None:
        """Add to the job's staged plan (``clear_plan`` empties it first)."""
        self._queue.stage_plan(job_name, staged)

    def clear_plan(self, job_name: str) -> None:
        """Forget the job's staged plan and its outstanding cost (``set_outstanding``)."""
        self._queue.clear_plan(job_name)

    def record_plan(self, job_name: str, kind: str, conflict: str, looked_up: str = ""
                    ) -> None:
        """Record the staged plan in one transaction, once its checks passed: its new items
        (``action`` new), the rows of resumed items that changed before anything was sent
        for them, the items changed after their payment started (a conflict, with
        ``conflict`` as its message; but those confirmed, which are followed to their final
        status whatever became of their rows, and those in doubt of ``looked_up``, the
        money-moving call the kind looks up from the state alone, which the run looks up
        first: their money may have moved), for the items paid or on their way, what
        their row asks now when it is not what was paid (``ItemRecord.changed_to``), and the
        payee checks' findings: each item's kept with it, an item the check holds
        (``action`` held) recorded ``held`` (with the plan's ``why``) unless it is final or
        in doubt, and one held before that the plan pays now pending again."""
        self._queue.record_plan(job_name, kind, conflict, looked_up)

    def staged(self, job_name: str, external_ids: Sequence[str]) -> dict[str, Staged]:
        """external_id -> its staged plan entry, for those of ``external_ids`` staged."""
        return self._queue.staged(job_name, external_ids)

    def staged_with(self, job_name: str, actions: Sequence[str]) -> Iterator[Staged]:
        """The staged entries of ``actions``, in row order (read in pages)."""
        return self._queue.staged_with(job_name, actions)

    def same_payments(self, job_name: str, contents: Collection[str]
                      ) -> dict[str, list[tuple[str, int, str]]]:
        """content -> the first two of the job's items in the state paying it (the digest of
        what it pays, ``runner.engine.duplicates``), in row order, as (external_id, row,
        outcome): those failed with nothing paid, and those held (never paid), left out.
        Two: one of them may be the item asking."""
        return self._items.same_payments(job_name, contents)

    def items_by_id(self, external_ids: Sequence[str]) -> dict[str, ItemRecord]:
        """external_id -> its record, for those of ``external_ids`` in the state."""
        return self._items.items_by_id(external_ids)

    def claim(self, job_name: str, worker: str, size: int, stale: float,
              until: float = float("inf")) -> list[ItemRecord]:
        """Up to ``size`` of the job's items due now (and at ``until`` at the latest, on the
        database's clock: ``clock``), claimed by ``worker``, in row order: no other live
        worker works them until ``release``, ``polled`` or ``give_up``. An item another
        worker holds is free once that worker's heartbeat is ``stale`` seconds old (it
        died: its calls in doubt are looked up first, rule 3). The earliest due first:
        calls in doubt, then what the plan pays, then what is polled. With several live
        workers, fewer than ``size`` near the end of what is due: a fair share of what is
        left to start (due, or claimed by another live worker and not started), so that
        they end together."""
        return self._queue.claim(job_name, worker, size, stale, until)

    def release(self, job_name: str, worker: str, worked: Sequence[str],
                again: Sequence[str] = (), polled: Mapping[float, Sequence[str]] | None = None
                ) -> None:
        """Give back the worker's claims on items it worked, in one transaction: those of
        ``worked`` are done for this round (due again when a plan makes them due), but
        one polling stays due when it was and one of ``again`` stays due (the next claim
        takes it); ``polled`` (delay in seconds -> external_ids) were just polled: one still
        polling is due again after its delay."""
        self._queue.release(job_name, worker, worked, again, polled)

    def give_up(self, job_name: str, worker: str) -> None:
        """Give back every claim of the worker, unfinished (it stops: an error, a signal):
        each item stays due as it was, for another worker or the next run."""
        self._queue.give_up(job_name, worker)

    def next_due(self, job_name: str, until: float = float("inf")) -> float | None:
        """Seconds until the job's next item is due (0 or less: one is due now), counting
        only those due at ``until`` at the latest; None when none is."""
        return self._queue.next_due(job_name, until)

    def clock(self) -> float:
        """The database's clock (seconds since the epoch), on which items are due."""
        return self._queue.clock()

    def claimants(self, job_name: str, stale: float = CLAIM_TTL) -> list[str]:
        """The live workers (heard from in the last ``stale`` seconds) holding a claim on
        one of the job's items."""
        return self._queue.claimants(job_name, stale)

    def forget_worker(self, job_name: str, worker: str) -> None:
        """``worker`` is known dead (its process is gone from this host): its claims are
        anyone's at once, as they would be once its heartbeat went stale."""
        self.leases.release(job_name, worker)

    def step_done_at(self, job_name: str, step: str) -> str | None:
        """When the job's ``step`` (``job_step``) was last done; None: not done."""
        return self._workers.step_done_at(job_name, step)

    def forget_step(self, job_name: str, step: str) -> None:
        """The job's ``step`` is to be done again (by the next worker to come)."""
        self._workers.forget_step(job_name, step)

    def set_outstanding(self, job_name: str, amounts: Mapping[str, Decimal],
                        fees: Mapping[str, Decimal] | None = None) -> None:
        """The job's outstanding cost, per balance, as the plan estimates it: what its items
        to pay are estimated to cost, and the fees estimated for those not quoted yet
        (``runner.engine.fees``)."""
        self._queue.set_outstanding(job_name, amounts, fees)

    def reduce_outstanding(self, job_name: str, estimated: Mapping[str, Decimal]
                           ) -> dict[str, Decimal]:
        """Take ``estimated`` (what a window's items were estimated to cost, per balance:
        their quotations cost them now) off the job's outstanding cost, with their share of
        the estimated fees (in proportion to the amounts), atomically for every worker;
        what is still outstanding (the later windows' estimated cost), fees included."""
        return self._queue.reduce_outstanding(job_name, estimated)

    # ------------------------------------------------------------ a whole state
    def require_idle(self) -> None:
        """LeaseHeld when a run is live on this state (a worker of any job is alive)."""
        for worker in self.db.read(self.db.sql("all_workers")):
            if self.leases.alive(worker):
                raise LeaseHeld(f"{self.location}: job {worker['job_name']} is being run (pid "
                                f"{worker['pid']} on {worker['host']}); copy when it has "
                                "ended")

    def require_empty(self, tables: Collection[str]) -> None:
        """StateError when one of ``tables`` has a row: this state holds something."""
        for table in tables:
            if self.db.read(self.db.sql("any_row", table=table)):
                raise StateError(f"{self.location}: already holds a state (its {table} "
                                 "table has rows); copy into a new, empty one")

    def dump(self, tables: Mapping[str, Collection[str]]
             ) -> Iterator[tuple[str, tuple[str, ...], Iterator[list[Row]]]]:
        """Each of ``tables`` (name -> columns) as (table, columns, its rows a page at a
        time); the pages of one table are read before the next table's."""
        for table, columns in tables.items():
            names = tuple(sorted(columns))
            yield table, names, self.db.stream(self.db.sql("dump", table=table, columns=names))

    def load(self, tables: Iterator[tuple[str, tuple[str, ...], Iterator[list[Row]]]]
             ) -> dict[str, int]:
        """The rows of ``dump`` (another state's) written here, in one transaction: all or
        none. How many rows each table had."""
        counts: dict[str, int] = {}

        def work(tx: Any) -> None:
            for table, columns, pages in tables:
                counts[table] = 0
                for page in pages:
                    tx.load(self.db.sql("load", table=table, columns=columns),
                            [[row[c] for c in columns] for row in page])
                    counts[table] += len(page)
            if self.db.dialect == "postgresql":
                for table in ("runs", "attempts", "retries"):  # the next id after the copies
                    tx.read(self.db.sql("reset_ids", table=table))
        self.db.transaction(work)
        return counts

