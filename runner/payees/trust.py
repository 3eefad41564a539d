"""Which payees people accepted despite their check, as every plan and run reads them: by
account and name, for every batch on the state, until either changes.

An acceptance is one person's (a row of ``accepted_payees``). Under four eyes (``runner
.policy.MoneyRules``) it is a signature, like a plan's approval: an SSH signature, or a
passkey's assertion given in `runner console` (``runner.passkeys``) (namespace
``runner-payee``) of the account, the name and when it was signed (``message``), by a key the
rules trust; a payee is accepted once ``payee_approvals`` different keys signed it, each
signature checked again whenever it is read (a key removed from the approvers, or past its
``valid-before``, no longer counts; a row written into the state by hand, or signed by
another key than its own, never does). Without four eyes, one acceptance is enough, and
names the user who gave it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from runner.errors import SigningError
from runner.policy import MoneyRules, Trust
from runner.state.records import PayeeAcceptance

NAMESPACE = "runner-payee"


def message(account: str, name: str, signed_at: str) -> bytes:
    """What the signature of a payee's acceptance signs."""
    return (f"runner payee acceptance\naccount: {account}\nname: {name}\n"
            f"signed at: {signed_at}\n").encode()


@dataclass(frozen=True)
class Accepted:
    """Where the acceptances of one payee (account and name) stand: who gave those that
    hold (principals, or users), when the last was given, how many there are and how many
    the rules ask."""

    by: tuple[str, ...]
    at: str
    needed: int

    @property
    def holds(self) -> bool:
        return len(self.by) >= self.needed

    @property
    def text(self) -> str:
        return f"{len(self.by)} of {self.needed} acceptance(s)"


def standing(rows: Iterable[PayeeAcceptance], rules: MoneyRules,
             trust: Trust | None = None, now: datetime | None = None
             ) -> dict[tuple[str, str], Accepted]:
    """(account, name) -> where its acceptances stand under ``rules`` (``trust``: who may
    sign, by default the rules'; read only when a signed row is met)."""
    by: dict[tuple[str, str], dict[str, str]] = {}
    when: dict[tuple[str, str], str] = {}
    now = now or datetime.now(UTC)
    for row in rows:
        key = (row.account, row.name)
        by.setdefault(key, {})
        who = row.accepted_by
        if rules.four_eyes:
            if row.signature is None:
                continue  # not signed: it does not count under four eyes
            trust = trust or rules.trust()
            principal = _signer(row, trust, now)
            if principal is None:
                continue
            who = principal
        by[key][row.signer] = who
        when[key] = max(when.get(key, ""), row.accepted_at)
    needed = rules.payee_approvals if rules.four_eyes else 1
    return {k: Accepted(tuple(v.values()), when.get(k, ""), needed) for k, v in by.items()}


def _signer(row: PayeeAcceptance, trust: Trust, now: datetime) -> str | None:
    """The principal whose key signed ``row``, when its signature holds; else None."""
    import json

    from runner.signatures import fingerprint

    assert row.signature is not None
    # An SSH signature's text, or a passkey's assertion as JSON (`runner console`).
    signed = json.loads(row.signature) if row.signature.startswith("{") else row.signature
    try:
        blob = trust.signed_by(signed, message(row.account, row.name, row.accepted_at),
                               NAMESPACE)
    except (SigningError, ValueError):
        return None
    if fingerprint(blob) != row.signer:
        return None
    line, _ = trust.signer(blob, NAMESPACE, now)
    return line.principals if line is not None else None
