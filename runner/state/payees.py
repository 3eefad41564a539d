"""Payee checks in the state (``runner.payees``), on either backend: the provider's answers
per account, kept to be asked again only once they are older than ``run.verify_for``, and
the acceptances people gave, by account and name (for every later batch).

An account is a hash of the service, the payer and the identifier; the identifier itself is
kept masked (its last four characters), for a person to read. No identifier with card data
is kept at all (``runner.payees`` never hands one in).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from runner.state.connector import Connector
from runner.state.records import PayeeAcceptance, PayeeCheck


class PayeeBook:
    """The payee checks' part of the store (see ``StateStore``'s docs of each method)."""

    def __init__(self, db: Connector) -> None:
        self.db = db
        self.sql = db.sql

    def payee_checks(self, accounts: Sequence[str]) -> dict[str, PayeeCheck]:
        found: dict[str, PayeeCheck] = {}
        for r in self.db.read(self.sql("payee_checks"), accounts=list(accounts)):
            holder = json.loads(r["holder"]) if r["holder"] is not None else None
            found[r["account"]] = PayeeCheck(
                r["account"], r["service"], int(r["payer"]), r["identifier"],
                r["account_status"], tuple(holder) if holder is not None else None,
                float(r["checked_at"]))
        return found

    def keep_payee_checks(self, checks: Sequence[PayeeCheck]) -> None:
        if checks:
            self.db.write_many(self.sql("keep_payee_check"), [
                (c.account, c.service, c.payer, c.identifier, c.account_status,
                 None if c.holder is None else json.dumps(list(c.holder)), c.checked_at)
                for c in checks])

    def accept_payee(self, acceptance: PayeeAcceptance) -> None:
        """Record one person's acceptance of a payee (replacing their earlier one of the
        same account and name)."""
        a = acceptance
        self.db.write(self.sql("accept_payee"), account=a.account, name=a.name,
                      signer=a.signer, job_name=a.job_name, external_id=a.external_id,
                      accepted_by=a.accepted_by, accepted_on=a.accepted_on,
                      accepted_at=a.accepted_at, note=a.note, signature=a.signature)

    def acceptances(self, accounts: Sequence[str]) -> list[PayeeAcceptance]:
        """Every acceptance of a payee of ``accounts`` (by any job), the oldest first."""
        rows = self.db.read(self.sql("accepted_payees"), accounts=list(accounts))
        return [PayeeAcceptance(r["account"], r["name"], r["signer"], r["job_name"],
                                r["external_id"], r["accepted_by"], r["accepted_on"],
                                r["accepted_at"], r["note"], r["signature"]) for r in rows]
