"""The SQLite state's schema, as named migrations (sqlite-utils): each change of the schema
is a new migration, never an edit of an applied one; ``runner.state.opening`` refuses a
database whose migrations this runner does not know. A backend of another database mirrors
them, name by name. The statements both backends run as they are, and the tables and columns
the migrations make (``TABLES``, which a database is checked against), are
``runner.state.schema``'s: a new migration adds its own there.
"""

from __future__ import annotations

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from runner.state import schema

migrations = Migrations("runner")


@migrations(name="0001_runs_items_attempts_leases")
def _initial(db: Database) -> None:
    db.table("runs").create({"id": int, "job_name": str, "job_file": str, "started_at": str,
                             "ended_at": str, "host": str, "pid": int, "exit_code": int,
                             "counts": str}, pk="id")
    db.table("leases").create({"job_name": str, "run_id": int, "host": str, "pid": int,
                               "token": str, "heartbeat_at": float}, pk="job_name")
    db.table("items").create({
        "external_id": str, "job_name": str, "kind": str, "row": int, "fingerprint": str,
        "step": str, "intent": str, "attempt": int, "provider_ref": str,
        "quotation_id": int, "expires_at": str, "transaction_id": int, "source_currency": str,
        "source_amount": str, "fee": str, "destination_currency": str,
        "destination_amount": str, "status": str, "status_class": str, "status_message": str,
        "outcome": str, "error_code": str, "error_message": str, "summary": str,
        "created_at": str, "updated_at": str}, pk="external_id",
        defaults={"step": "new", "attempt": 1, "outcome": "pending"})
    db.table("items").create_index(["job_name", "outcome"])
    db.table("attempts").create({
        "id": int, "run_id": int, "external_id": str, "step": str, "request": str,
        "started_at": str, "finished_at": str, "result": str, "http_status": int,
        "code": str, "message": str}, pk="id")
    db.table("attempts").create_index(["external_id"])


@migrations(name="0002_item_details")
def _details(db: Database) -> None:
    # What a person needs to finish or show an item: QR code and instructions of a merchant
    # payment, the payment_url of a REDIRECT order, ids of an onboarding chain (JSON).
    db.table("items").add_column("details", str)


@migrations(name="0003_lineage_retries_approvals")
def _lineage(db: Database) -> None:
    # A failed item paid again goes out as E-f2, E-f3 ...: its lineage, and the history of
    # its retries; who planned and approved an applied run; why a run stopped.
    db.table("items").add_column("lineage", int, not_null_default=1)
    db.table("runs").add_column("message", str)
    db.table("retries").create({
        "id": int, "external_id": str, "job_name": str, "run_id": int, "lineage": int,
        "ref": str, "previous_ref": str, "previous_status": str, "previous_code": str,
        "previous_message": str, "changed": int, "at": str}, pk="id")
    db.table("retries").create_index(["job_name"])
    db.table("approvals").create({
        "run_id": int, "plan_sha256": str, "planned_by": str, "planned_on": str,
        "planned_at": str, "approved_by": str, "applied_by": str, "applied_on": str,
        "approved_at": str}, pk="run_id")


@migrations(name="0004_run_digest_mailed")
def _digest(db: Database) -> None:
    # What a run's summary said (a digest) and whether it was mailed: a run that changed
    # nothing mails nothing. Calls are counted per run for the summary's run history.
    db.table("runs").add_column("digest", str)
    db.table("runs").add_column("mailed", int, not_null_default=0)
    db.table("attempts").create_index(["run_id"])


@migrations(name="0005_worker_claims")
def _workers(db: Database) -> None:
    # Cooperating workers on one job (runner.state.workers): who works an item and until
    # when, the job's steps done once, and the job's next free slot under its rate limit.
    db.table("items").add_column("claimed_by", str)
    db.table("items").add_column("claim_expires", float)
    db.table("job_steps").create({"job_name": str, "step": str, "digest": str,
                                  "done_by": str, "done_at": str}, pk=("job_name", "step"))
    db.table("rate_slots").create({"job_name": str, "next_at": float}, pk="job_name")


@migrations(name="0006_run_inputs_lines")
def _inputs(db: Database) -> None:
    # What a run's inputs were (a digest of the job, its rows and templates, once validated)
    # and the closing lines it printed: a run of unchanged inputs with nothing left to do
    # says them again without validating or reading every item.
    db.table("runs").add_column("inputs", str)
    db.table("runs").add_column("lines", str)


@migrations(name="0007_items_job_row")
def _job_rows(db: Database) -> None:
    # A job's items read in row order a page at a time (the summary of a batch of any
    # size): each page a range of this index, not a sort of the whole batch.
    db.table("items").create_index(["job_name", "row"])


@migrations(name="0008_plan_passes_rest_workers")
def _passes(db: Database) -> None:
    # A run streams its items (runner.engine.pages): the plan is staged before anything is
    # recorded, each phase is a pass over the job's items in pages (its cursor shared by
    # the workers), the estimated cost of the items not yet confirmed is kept per balance,
    # and, with a shared state, each worker past the first holds a lease of its own.
    for sql in schema.MIGRATION_0008:
        db.execute(sql)


@migrations(name="0009_items_changed_to")
def _changed_to(db: Database) -> None:
    # An item whose job row asks for another payment than the one made (or on its way):
    # the fingerprint of what the row asks now. It is not paid again, and every view of
    # the batch lists it until the row asks what was paid again.
    db.table("items").add_column("changed_to", str)


@migrations(name="0010_job_rest_fees")
def _rest_fees(db: Database) -> None:
    # The fees estimated for a run's items not quoted yet (runner.engine.fees), kept with
    # what is left to confirm per balance: the windows' funds checks count them.
    db.table("job_rest").add_column("fees", str)


@migrations(name="0011_payee_checks")
def _payees(db: Database) -> None:
    # Payee checks (runner.payees): what the provider answered for an account (its status
    # and who holds it), kept per service, payer and identifier (hashed: the masked one is
    # for reading) to be asked again only after run.verify_for; a person's acceptance of an
    # item's payee, with who and when; and each item's finding, in the staged plan and in
    # the item.
    for sql in schema.MIGRATION_0011:
        db.execute(sql)


@migrations(name="0012_items_earlier_paid")
def _earlier_paid(db: Database) -> None:
    # Earlier attempts of an item sent again (-fN) that the provider shows paid after all,
    # as `runner reconcile` found them (JSON): a double payment, in every view of the batch.
    db.table("items").add_column("earlier_paid", str)


@migrations(name="0013_plan_files_signers")
def _plan_files(db: Database) -> None:
    # The plan files made for a job (`runner plan -o`): their content as made, whose digest
    # an unsigned plan must still have when it is applied, and the run that applies each
    # (a plan is applied once: applying it again resumes that run). An approval names who
    # signed the plan, with their keys.
    for sql in schema.MIGRATION_0013:
        db.execute(sql)


@migrations(name="0014_lease_holder_kernel")
def _holders(db: Database) -> None:
    # A lease's holder by the kernel boot and PID namespace its PID belongs to, and whether
    # it holds the job's lock file (runner.state.holders): a PID is asked about only where
    # it names the same process, and a killed container's run is known dead at once.
    for sql in schema.MIGRATION_0014:
        db.execute(sql)


@migrations(name="0015_same_payments")
def _same_payments(db: Database) -> None:
    # What makes an item the payment it is (runner.kinds.same), as a digest kept with the
    # item (indexed per job) and its staged plan: an item paying what another item of the
    # batch pays is found in its history without holding the batch in memory. A run that
    # paid possible duplicates on --allow-duplicates says so.
    for sql in schema.MIGRATION_0015:
        db.execute(sql)


@migrations(name="0016_items_queue")
def _queue(db: Database) -> None:
    # The items table as the job's queue: each item's state (runner.lifecycle.State), read
    # from its columns by the lifecycle's own expression and kept by every write that moves
    # it; when it is next due for a claim (NULL: final, or parked until the next plan); how
    # many times it was polled. The index a claim reads comes with the claim: kept up by
    # every move, it costs a fifth of a write's CPU on SQLite (docs/performance.md).
    for sql in schema.MIGRATION_0016:
        db.execute(sql)


@migrations(name="0017_queue_workers")
def _queue_workers(db: Database) -> None:
    # The items table as the job's queue, worked by workers that each keep one heartbeat
    # row (runner.state.leases): a claim is the claiming worker's name on the item, and
    # lasts while that worker's heartbeat is fresh. The job's lease and the workers' own
    # leases become the workers' rows; the passes' cursors and the claims' expiry go (an
    # item worked in a round is due again only when the next plan makes it due). The
    # queue's index holds the items due (the rest, final or parked, have none).
    for sql in schema.MIGRATION_0017:
        db.execute(sql)


@migrations(name="0018_batch_rules_accepted_payees")
def _batch_rules(db: Database) -> None:
    # The rules a batch was planned under (runner.policy.BatchRules): a batch planned under
    # four eyes stays under it, whatever its job file says later. A payee accepted despite
    # its check is kept by account and name, for every later batch, one row per person who
    # accepted it (with their signature under four eyes): it was kept per item.
    for sql in schema.MIGRATION_0018:
        db.execute(sql)


@migrations(name="0019_plan_signatures_console")
def _plan_signatures(db: Database) -> None:
    # Approvals given in `runner console` (a passkey's assertion over the plan's digest, or
    # a denial), kept with the plan until it is applied; what each person did in the
    # console, with their key; and the state's own keys (the one that hashes accounts in
    # plan files, so that a plan says "the same account" without saying which).
    for sql in schema.MIGRATION_0019:
        db.execute(sql.format(serial="integer"))
