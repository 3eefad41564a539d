"""Payee checks in the state (``runner.payees``), for both backends (``?`` parameters, SQL
that SQLite and PostgreSQL read alike): the provider's answers per account, kept to be asked
again only once they are older than ``run.verify_for``, and the acceptances a person gave.

An account is a hash of the service, the payer and the identifier; the identifier itself is
kept masked (its last four characters), for a person to read. No identifier with card data
is kept at all (``runner.payees`` never hands one in).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from runner.state.passes import chunks
from runner.state.records import PayeeAcceptance, PayeeCheck
from runner.state.store import StateStore

ROWS = 100  # accounts in one INSERT (each a different one: an upsert changes a row once)


class PayeeBook(StateStore):
    """The payee methods of ``StateStore`` over ``_run`` and ``_rows``."""

    def _run(self, *statements: Any) -> int:
        raise NotImplementedError

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    def payee_checks(self, accounts: Sequence[str]) -> dict[str, PayeeCheck]:
        found: dict[str, PayeeCheck] = {}
        for chunk in chunks(accounts):
            for r in self._rows(f"SELECT * FROM payee_checks WHERE account IN "
                                f"({', '.join('?' * len(chunk))})", chunk):
                holder = json.loads(r["holder"]) if r["holder"] is not None else None
                found[r["account"]] = PayeeCheck(
                    r["account"], r["service"], int(r["payer"]), r["identifier"],
                    r["account_status"], tuple(holder) if holder is not None else None,
                    float(r["checked_at"]))
        return found

    def keep_payee_checks(self, checks: Sequence[PayeeCheck]) -> None:
        if not checks:
            return
        statements: list[Any] = []
        for start in range(0, len(checks), ROWS):
            chunk = checks[start:start + ROWS]
            statements += [
                "INSERT INTO payee_checks (account, service, payer, identifier, "
                "account_status, holder, checked_at) VALUES "
                f"{', '.join(['(?, ?, ?, ?, ?, ?, ?)'] * len(chunk))} ON CONFLICT (account) "
                "DO UPDATE SET service = excluded.service, payer = excluded.payer, "
                "identifier = excluded.identifier, account_status = excluded.account_status, "
                "holder = excluded.holder, checked_at = excluded.checked_at",
                [x for c in chunk for x in (
                    c.account, c.service, c.payer, c.identifier, c.account_status,
                    None if c.holder is None else json.dumps(list(c.holder)), c.checked_at)]]
        self._run(*statements)

    def accept_payee(self, acceptance: PayeeAcceptance) -> None:
        a = acceptance
        self._run(
            "INSERT INTO payee_acceptances (job_name, external_id, account, name, "
            "accepted_by, accepted_on, accepted_at, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (job_name, external_id) DO UPDATE SET account = excluded.account, "
            "name = excluded.name, accepted_by = excluded.accepted_by, accepted_on = "
            "excluded.accepted_on, accepted_at = excluded.accepted_at, note = excluded.note",
            [a.job_name, a.external_id, a.account, a.name, a.accepted_by, a.accepted_on,
             a.accepted_at, a.note])

    def payee_acceptances(self, job_name: str, external_ids: Sequence[str]
                          ) -> dict[str, PayeeAcceptance]:
        found: dict[str, PayeeAcceptance] = {}
        for chunk in chunks(external_ids):
            for r in self._rows(f"SELECT * FROM payee_acceptances WHERE job_name = ? AND "
                                f"external_id IN ({', '.join('?' * len(chunk))})",
                                [job_name, *chunk]):
                found[r["external_id"]] = PayeeAcceptance(
                    r["job_name"], r["external_id"], r["account"], r["name"],
                    r["accepted_by"], r["accepted_on"], r["accepted_at"], r["note"])
        return found

