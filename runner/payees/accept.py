"""A person accepts an item's payee despite its check (``runner resolve JOB ID
--accept-payee``): the account and the name, as the item's row has them now, are accepted,
for this batch and every later one on the state, until the account or the name changes
(``runner.payees.trust``); a row changed since is checked again, as any row. Nothing is sent.

Under four eyes (the executor's policy, the job's, or the batch's as the state remembers it:
``runner.engine.approvals.rules_for``) accepting is a signed act, as approving a plan is: the
person signs with an SSH key the rules trust (``--sign KEY``), and the payee is accepted
once ``payee_approvals`` different keys have; a key the rules do not trust is refused. Else
who (user and host) is recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from runner.engine.approvals import rules_for
from runner.errors import SigningError, StateError
from runner.job import Job, ValidItem, iter_items
from runner.kinds import kind_named
from runner.payees.trust import NAMESPACE, Accepted, message, standing
from runner.state import StateStore
from runner.state.records import PayeeAcceptance


def accept_payee(job: Job, state: StateStore, external_id: str, note: str, user: str,
                 host: str, key: Path | None = None,
                 passphrase: Callable[[], str | None] = lambda: None,
                 now: datetime | None = None) -> tuple[PayeeAcceptance, Accepted]:
    """Record one person's acceptance of ``external_id``'s payee, as its row is now (signed
    with the key in ``key`` under four eyes, where it is required); the acceptance, and where
    the payee's acceptances now stand."""
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
    now = now or datetime.now(UTC)
    stamp = now.isoformat(timespec="seconds").replace("+00:00", "Z")
    rules = rules_for(job, state)
    trust = rules.trust() if rules.four_eyes else None
    if trust is None:
        acceptance = PayeeAcceptance(payee.accepted_as, payee.name, f"{user}@{host}",
                                     job.name, external_id, user, host, stamp, note)
    elif key is None:
        raise SigningError(f"under four eyes ({rules.source}) a payee is accepted with a key "
                           f"the approvers hold: add --sign KEY (your SSH private key)")
    else:
        from runner.signatures import fingerprint, key_blob, load_signing_key, sign

        signing = load_signing_key(key, passphrase)
        blob = key_blob(signing.public_key())
        line, why = trust.signer(blob, NAMESPACE, now)
        if line is None:
            raise SigningError(f"the key {key} ({fingerprint(blob)}) cannot accept payees of "
                               f"this job: {why}")
        acceptance = PayeeAcceptance(
            payee.accepted_as, payee.name, fingerprint(blob), job.name, external_id,
            line.principals, host, stamp, note,
            sign(signing, message(payee.accepted_as, payee.name, stamp), NAMESPACE))
    state.payees.accept_payee(acceptance)
    stands = standing(state.payees.acceptances([payee.accepted_as]), rules, trust, now)
    return acceptance, stands[(payee.accepted_as, payee.name)]
