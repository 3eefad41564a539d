"""A person accepts an item's payee despite its check (``runner resolve JOB ID
--accept-payee``): the item's row as the job has it now names the account and the name
accepted, recorded with who, where, when and why. A row changed since (another account,
another name) is checked again, as any row; nothing is sent.
"""

from __future__ import annotations

from datetime import UTC, datetime

from runner.errors import StateError
from runner.job import Job, ValidItem, iter_items
from runner.kinds import kind_named
from runner.state import StateStore
from runner.state.records import PayeeAcceptance


def accept_payee(job: Job, state: StateStore, external_id: str, note: str, user: str,
                 host: str, now: datetime | None = None) -> PayeeAcceptance:
    """Record the acceptance of ``external_id``'s payee, as its row is now."""
    payee_of = kind_named(job.kind).payee
    if payee_of is None:
        raise StateError(f"{job.kind} items have no payee check to accept")
    record = state.item(external_id)
    if record is not None and record.job_name != job.name:
        raise StateError(f"{external_id}: no such item in job {job.name}")
    found = next((i for i in iter_items(job, duplicates=False)
                  if isinstance(i, ValidItem) and i.external_id == external_id), None)
    if found is None:
        raise StateError(f"{external_id}: no valid row of job {job.name} makes this item")
    payee = payee_of(found.item)
    stamp = (now or datetime.now(UTC)).isoformat(timespec="seconds").replace("+00:00", "Z")
    acceptance = PayeeAcceptance(job.name, external_id, payee.accepted_as, payee.name, user,
                                 host, stamp, note)
    state.accept_payee(acceptance)
    return acceptance
