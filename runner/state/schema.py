"""What the two backends' schemas share: runner's tables and their columns (``TABLES``),
which a database is checked against before it is used (``refuse_missing``), and the
statements of the migrations that both dialects run as they are.

Each backend makes the tables with its own named migrations, step for step
(``runner.state.sqlite_schema``, ``runner.state.pg_schema``). ``TABLES`` is what they make,
written out, so that opening a database checks it without making one in memory first; a
test applies each backend's migrations and holds what they make equal to it (a new
migration changes it too). The record of migrations is each backend's own, and not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from runner import lifecycle
from runner.errors import StateUnusable

TABLES: dict[str, frozenset[str]] = {  # in the order the migrations make them
    "runs": frozenset({
        "id", "job_name", "job_file", "started_at", "ended_at", "host", "pid", "exit_code",
        "counts", "message", "digest", "mailed", "inputs", "lines", "allow_duplicates"
    }),
    "items": frozenset({
        "external_id", "job_name", "kind", "row", "fingerprint", "step", "intent",
        "attempt", "provider_ref", "quotation_id", "expires_at", "transaction_id",
        "source_currency", "source_amount", "fee", "destination_currency",
        "destination_amount", "status", "status_class", "status_message", "outcome",
        "error_code", "error_message", "summary", "created_at", "updated_at", "details",
        "lineage", "claimed_by", "changed_to", "payee", "earlier_paid", "content", "state",
        "due_at", "polls"
    }),
    "attempts": frozenset({
        "id", "run_id", "external_id", "step", "request", "started_at", "finished_at",
        "result", "http_status", "code", "message"
    }),
    "retries": frozenset({
        "id", "external_id", "job_name", "run_id", "lineage", "ref", "previous_ref",
        "previous_status", "previous_code", "previous_message", "changed", "at"
    }),
    "approvals": frozenset({
        "run_id", "plan_sha256", "planned_by", "planned_on", "planned_at", "approved_by",
        "applied_by", "applied_on", "approved_at", "planner_key", "signers"
    }),
    "job_steps": frozenset({"job_name", "step", "digest", "done_by", "done_at"}),
    "rate_slots": frozenset({"job_name", "next_at"}),
    "plan_items": frozenset({
        "job_name", "external_id", "row", "action", "ref", "fingerprint", "changed",
        "summary", "balance", "cost", "why", "payee", "content"
    }),
    "job_rest": frozenset({"job_name", "balance", "amount", "fees"}),
    "payee_checks": frozenset({
        "account", "service", "payer", "identifier", "account_status", "holder",
        "checked_at"
    }),
    "plan_files": frozenset({"id", "job_name", "digest", "content", "made_at", "run_id"}),
    "workers": frozenset({
        "worker_id", "job_name", "run_id", "host", "pid", "boot_id", "pid_ns", "locked",
        "heartbeat_at"
    }),
    "batch_rules": frozenset({
        "job_name", "four_eyes", "approvals", "payee_approvals", "signers", "plan_id",
        "recorded_at"
    }),
    "accepted_payees": frozenset({
        "account", "name", "signer", "job_name", "external_id", "accepted_by",
        "accepted_on", "accepted_at", "note", "signature"
    }),
    "plan_signatures": frozenset({"plan_id", "signer", "role", "entry", "recorded_at"}),
    "console_events": frozenset({
        "id", "at", "principal", "key", "action", "plan_id", "detail"
    }),
    "state_keys": frozenset({"name", "value"}),
}


def refuse_missing(found: Mapping[str, AbstractSet[str]], location: str) -> None:
    """StateUnusable when a table of ``TABLES`` or one of its columns is not ``found``."""
    for table, columns in sorted(TABLES.items()):
        if table not in found:
            raise StateUnusable(f"{location}: the table {table!r} is missing; this is not a "
                                "runner state database, or it was damaged")
        missing = sorted(columns - found[table])
        if missing:
            raise StateUnusable(f"{location}: the table {table!r} has no column "
                                f"{missing[0]!r}; it was damaged")


# The migrations whose statements are the same in both dialects (named as in both).
MIGRATION_0008 = (
    "CREATE TABLE plan_items (job_name text, external_id text, row bigint, action text, "
    "ref text, fingerprint text, changed bigint, summary text, balance text, cost text, "
    "why text, PRIMARY KEY (job_name, external_id))",
    "CREATE INDEX idx_plan_items_job_name_action ON plan_items (job_name, action)",
    "CREATE TABLE job_passes (job_name text, pass text, next_row bigint, "
    "PRIMARY KEY (job_name, pass))",
    "CREATE TABLE job_rest (job_name text, balance text, amount text, "
    "PRIMARY KEY (job_name, balance))",
    "CREATE TABLE worker_leases (token text PRIMARY KEY, job_name text, run_id bigint, "
    "host text, pid bigint, heartbeat_at double precision)",
    "CREATE INDEX idx_items_claims ON items (job_name, claim_expires) "
    "WHERE claimed_by IS NOT NULL",
)

MIGRATION_0011 = (
    "CREATE TABLE payee_checks (account text PRIMARY KEY, service text, payer bigint, "
    "identifier text, account_status text, holder text, checked_at double precision)",
    "CREATE TABLE payee_acceptances (job_name text, external_id text, account text, "
    "name text, accepted_by text, accepted_on text, accepted_at text, note text, "
    "PRIMARY KEY (job_name, external_id))",
    "ALTER TABLE items ADD COLUMN payee text",
    "ALTER TABLE plan_items ADD COLUMN payee text",
)

MIGRATION_0013 = (
    "CREATE TABLE plan_files (id text PRIMARY KEY, job_name text, digest text, "
    "content text, made_at text, run_id bigint)",
    "ALTER TABLE approvals ADD COLUMN planner_key text",
    "ALTER TABLE approvals ADD COLUMN signers text",
)

MIGRATION_0014 = tuple(
    f"ALTER TABLE {table} ADD COLUMN {column}"
    for table in ("leases", "worker_leases")
    for column in ("boot_id text", "pid_ns text", "locked bigint NOT NULL DEFAULT 0"))

MIGRATION_0015 = (
    "ALTER TABLE items ADD COLUMN content text",
    "ALTER TABLE plan_items ADD COLUMN content text",
    "CREATE INDEX idx_items_job_name_content ON items (job_name, content) "
    "WHERE content IS NOT NULL",
    "ALTER TABLE runs ADD COLUMN allow_duplicates bigint NOT NULL DEFAULT 0",
)

MIGRATION_0016 = (
    "ALTER TABLE items ADD COLUMN state text",
    "ALTER TABLE items ADD COLUMN due_at double precision",
    "ALTER TABLE items ADD COLUMN polls bigint NOT NULL DEFAULT 0",
    f"UPDATE items SET state = {lifecycle.backfill()}",
)

MIGRATION_0017 = (
    "CREATE TABLE workers (worker_id text PRIMARY KEY, job_name text NOT NULL, "
    "run_id bigint, host text, pid bigint, boot_id text, pid_ns text, "
    "locked bigint NOT NULL DEFAULT 0, heartbeat_at double precision)",
    "CREATE INDEX idx_workers_job_name ON workers (job_name)",
    "DROP TABLE leases",
    "DROP TABLE worker_leases",
    "DROP TABLE job_passes",
    "DROP INDEX idx_items_claims",
    "ALTER TABLE items DROP COLUMN claim_expires",
    "UPDATE items SET claimed_by = NULL",
    "CREATE INDEX idx_items_due ON items (job_name, due_at, row) WHERE due_at IS NOT NULL",
    "CREATE INDEX idx_items_claimed ON items (job_name, claimed_by) "
    "WHERE claimed_by IS NOT NULL",
)

MIGRATION_0018 = (
    "CREATE TABLE batch_rules (job_name text PRIMARY KEY, four_eyes bigint NOT NULL, "
    "approvals bigint NOT NULL, payee_approvals bigint NOT NULL, signers text, "
    "plan_id text, recorded_at text)",
    "CREATE TABLE accepted_payees (account text, name text, signer text, job_name text, "
    "external_id text, accepted_by text, accepted_on text, accepted_at text, note text, "
    "signature text, PRIMARY KEY (account, name, signer))",
    "INSERT INTO accepted_payees (account, name, signer, job_name, external_id, "
    "accepted_by, accepted_on, accepted_at, note) SELECT account, name, accepted_by, "
    "job_name, external_id, accepted_by, accepted_on, accepted_at, note "
    "FROM payee_acceptances WHERE account IS NOT NULL ORDER BY accepted_at "
    "ON CONFLICT DO NOTHING",
    "DROP TABLE payee_acceptances",
)

MIGRATION_0019 = (
    "CREATE TABLE plan_signatures (plan_id text NOT NULL, signer text NOT NULL, "
    "role text NOT NULL, entry text NOT NULL, recorded_at text, "
    "PRIMARY KEY (plan_id, signer, role))",
    "CREATE TABLE console_events (id {serial} PRIMARY KEY, at text NOT NULL, "
    "principal text, key text, action text NOT NULL, plan_id text, detail text)",
    "CREATE TABLE state_keys (name text PRIMARY KEY, value text NOT NULL)",
)
