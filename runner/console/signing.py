"""What people sign in the console, with passkeys (``runner.passkeys``): signing in, a
passkey registered (the line its holder adds to the passkeys file), a plan approved or
denied with a reason, a held payee accepted.

Each act is two steps: ``*_options`` makes the challenge (for a plan: the digest, the
decision and the time, as an SSH signature signs them) and keeps what it covers in the
person's session (a ``Pending``); the browser's assertion comes back to ``*_done``, which
checks it exactly as `runner apply` will (``runner.engine.plan_signing.check_signatures``,
``runner.payees.trust``), keeps it in the state, and records who did it with their key.
Nothing here holds or reads the provider's credentials.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from runner import passkeys
from runner.console.views import content_of, standing_of
from runner.engine.plan_file import iso, valid_until
from runner.engine.plan_signing import (
    APPROVE,
    DENY,
    NAMESPACE,
    NO_PLANNER,
    PLAN,
    approvers_of,
    check_signatures,
    message,
)
from runner.errors import ConsoleRefused, JobError, JobErrors, PlanRefused, SigningError
from runner.payees import trust as payee_trust
from runner.policy import Trust, policy_path, read_policy
from runner.signatures import AllowedSigner, fingerprint, read_allowed_signers
from runner.state import StateStore
from runner.state.plans import ConsoleEvent
from runner.state.records import PayeeAcceptance

REASON_LIMIT = 500


@dataclass(frozen=True)
class Site:
    """Where the console is, as passkeys see it: its origin and relying party id."""

    origin: str
    rp_id: str
    approvers: tuple[Path, ...] = ()  # more lists of keys that may sign in


@dataclass(frozen=True)
class User:
    """Who is signed in: the principal and the key (fingerprint) they signed in with."""

    principal: str
    key: str


def user_of(session: dict[str, Any]) -> User | None:
    found = session.get("user")
    return User(**found) if isinstance(found, dict) else None


# ---------------------------------------------------------------- the keys
def sign_in_keys(site: Site, state: StateStore) -> list[AllowedSigner]:
    """The passkeys that may sign in: those of the lists ``site`` names, of the executor's
    policy (``RUNNER_POLICY``), and of every kept plan's approvers."""
    found: list[AllowedSigner] = []
    for path in site.approvers:
        found += read_allowed_signers(path)
    policy = policy_path()
    if policy is not None:
        read = read_policy(policy)
        for rules in (*read.accounts, *([read.default] if read.default else [])):
            listed = read.approvers_path(rules)
            if listed is not None:
                found += read_allowed_signers(listed)
    for head in state.plans.heads():
        try:
            trust = approvers_of(content_of(head, state)).trust
        except (PlanRefused, JobError, JobErrors):
            continue
        for _, signers in trust.lists:
            found += signers
    unique = {s.key: s for s in found if s.passkey}
    return list(unique.values())


def _usable(lines: list[AllowedSigner], principal: str, now: datetime) -> list[AllowedSigner]:
    return [s for s in lines if s.principals == principal and not s.refuses(NAMESPACE, now)]


# ---------------------------------------------------------------- registration
def register_options(site: Site, session: dict[str, Any], principal: str) -> str:
    principal = principal.strip()
    if not principal or any(c.isspace() or c in '",' for c in principal) or \
            len(principal) > 200:
        raise ConsoleRefused("give your name as the approvers file names you (an e-mail "
                             "address)")
    challenge = secrets.token_bytes(32)
    session["pending"] = {"act": "register", "principal": principal,
                          "challenge": passkeys.b64url(challenge)}
    return passkeys.registration_options(site.rp_id, "runner console", principal, challenge)


def register_done(site: Site, session: dict[str, Any], credential: dict[str, Any]) -> str:
    """The passkeys file's line for the passkey just made."""
    pending = _pending(session, "register")
    line = passkeys.registered(credential, passkeys.from_b64url(pending["challenge"]),
                               site.rp_id, site.origin, pending["principal"])
    return line


# ---------------------------------------------------------------- signing in
def sign_in_options(site: Site, state: StateStore, session: dict[str, Any], principal: str,
                    now: datetime) -> str:
    lines = _usable(sign_in_keys(site, state), principal.strip(), now)
    if not lines:
        raise ConsoleRefused(f"no passkey of {principal.strip() or 'that name'} is registered "
                      "(in a passkeys file beside the approvers file)")
    challenge = secrets.token_bytes(32)
    session["pending"] = {"act": "sign-in", "principal": principal.strip(),
                          "challenge": passkeys.b64url(challenge)}
    return passkeys.request_options(site.rp_id, challenge, [s.credential_id for s in lines])


def sign_in_done(site: Site, state: StateStore, session: dict[str, Any],
                 credential: dict[str, Any], now: datetime) -> User:
    pending = _pending(session, "sign-in")
    assertion = passkeys.Assertion.from_entry(credential)
    lines = [s for s in _usable(sign_in_keys(site, state), pending["principal"], now)
             if passkeys.b64url(s.credential_id) == assertion.credential_id.rstrip("=")]
    if not lines:
        raise ConsoleRefused("that passkey is not one of yours")
    passkeys.verify(assertion, passkeys.from_b64url(pending["challenge"]), lines[0].rp_id,
                    lines[0].public_key)
    user = User(pending["principal"], fingerprint(lines[0].key))
    session.clear()
    session["user"] = asdict(user)
    session["csrf"] = secrets.token_urlsafe(24)
    note(state, user, "signed in", "", "")
    return user


# ---------------------------------------------------------------- plans
def decide_options(site: Site, state: StateStore, session: dict[str, Any], user: User,
                   plan_id: str, decision: str, reason: str, now: datetime) -> str:
    """The assertion options for ``user``'s ``decision`` (approve, deny, plan) on the
    plan."""
    record, content = _plan(state, plan_id)
    if decision not in (APPROVE, DENY, PLAN):
        raise ConsoleRefused("approve, deny or plan")
    reason = " ".join(reason.split())
    if decision == DENY and not reason:
        raise ConsoleRefused("a denial says why: give a reason")
    if len(reason) > REASON_LIMIT:
        raise ConsoleRefused(f"a reason is at most {REASON_LIMIT} characters")
    _may_sign(record, content, state, decision, now)
    trust = _trust(content)
    lines = [s for _, signers in trust.lists[:1] for s in
             _usable(signers, user.principal, now) if s.passkey]
    if not lines:
        raise ConsoleRefused(f"{user.principal} has no passkey among this plan's approvers")
    signed_at = iso(now)
    session["pending"] = {"act": "plan", "plan_id": plan_id, "role": decision,
                          "signed_at": signed_at, "reason": reason if decision == DENY else ""}
    challenge = passkeys.challenge(NAMESPACE, message(record.digest, decision, signed_at,
                                                      reason))
    return passkeys.request_options(site.rp_id, challenge, [s.credential_id for s in lines])


def decide_done(state: StateStore, session: dict[str, Any], user: User, plan_id: str,
                credential: dict[str, Any], now: datetime) -> dict[str, Any]:
    """Check the assertion as `runner apply` will and keep it with the plan; the entry."""
    pending = _pending_for(session, "plan", plan_id)
    record, content = _plan(state, plan_id)
    _may_sign(record, content, state, pending["role"], now)
    entry: dict[str, Any] = {
        "role": pending["role"], "signed_at": pending["signed_at"],
        **({"reason": pending["reason"]} if pending["role"] == DENY else {}),
        "passkey": passkeys.Assertion.from_entry(credential).as_entry()}
    signed = {**content, "signatures": [*content["signatures"], entry]}
    view = check_signatures(signed, record.digest, _trust(content), now)[-1]
    if not view.valid:
        raise ConsoleRefused(f"not kept: {view.verdict}")
    if view.principal != user.principal:
        raise ConsoleRefused(f"that passkey is {view.principal}'s, not {user.principal}'s")
    state.plans.add_signature(plan_id, view.key, entry)
    what = {APPROVE: "approved", DENY: "denied", PLAN: "signed as planner"}[view.role]
    note(state, user, what, plan_id, pending["reason"])
    return entry


def _may_sign(record: Any, content: dict[str, Any], state: StateStore, role: str,
              now: datetime) -> None:
    if record.run_id is not None:
        raise ConsoleRefused("the plan was applied already")
    if now > valid_until(content):
        raise ConsoleRefused(f"the plan expired at {content['valid_until']}; a new plan is made "
                      "and approved instead")
    if not content.get("four_eyes"):
        raise ConsoleRefused("the plan was made without four eyes: it is not signed")
    if role == DENY:
        return
    stands = standing_of(record, content, now)
    refused = [r for r in stands.refused if role == APPROVE or r != NO_PLANNER]
    if refused:
        raise ConsoleRefused("; ".join(refused))


def _trust(content: dict[str, Any]) -> Trust:
    try:
        return approvers_of(content).trust
    except PlanRefused as exc:
        raise ConsoleRefused("; ".join(exc.reasons)) from None


# ---------------------------------------------------------------- held payees
def accept_options(site: Site, state: StateStore, session: dict[str, Any], user: User,
                   plan_id: str, external_id: str, note_text: str, now: datetime) -> str:
    _, content = _plan(state, plan_id)
    item = next((i for i in content.get("items", []) if i.get("external_id") == external_id
                 and i.get("accept_as")), None)
    if item is None:
        raise ConsoleRefused(f"{external_id}: the plan holds no payee of that item")
    trust = _trust(content)
    lines = [s for _, signers in trust.lists[:1] for s in
             _usable(signers, user.principal, now) if s.passkey]
    if not lines:
        raise ConsoleRefused(f"{user.principal} has no passkey among this plan's approvers")
    name = str((item.get("payee") or {}).get("name") or item.get("beneficiary") or "")
    stamp = iso(now)
    session["pending"] = {"act": "payee", "plan_id": plan_id, "external_id": external_id,
                          "account": item["accept_as"], "name": name, "signed_at": stamp,
                          "note": " ".join(note_text.split())[:REASON_LIMIT]}
    challenge = passkeys.challenge(payee_trust.NAMESPACE, payee_trust.message(
        item["accept_as"], name, stamp))
    return passkeys.request_options(site.rp_id, challenge, [s.credential_id for s in lines])


def accept_done(state: StateStore, session: dict[str, Any], user: User, plan_id: str,
                credential: dict[str, Any], now: datetime) -> PayeeAcceptance:
    pending = _pending_for(session, "payee", plan_id)
    _, content = _plan(state, plan_id)
    trust = _trust(content)
    assertion = passkeys.Assertion.from_entry(credential)
    try:
        blob = trust.signed_by(assertion.as_entry(), payee_trust.message(
            pending["account"], pending["name"], pending["signed_at"]), payee_trust.NAMESPACE)
    except SigningError as exc:
        raise ConsoleRefused(f"not kept: {exc}") from None
    line, why = trust.signer(blob, payee_trust.NAMESPACE, now)
    if line is None or line.principals != user.principal:
        raise ConsoleRefused(f"not kept: {why or 'that passkey is not yours'}")
    acceptance = PayeeAcceptance(
        pending["account"], pending["name"], fingerprint(blob), content["job"]["name"],
        pending["external_id"], user.principal, "runner console", pending["signed_at"],
        pending["note"], json.dumps(assertion.as_entry(), sort_keys=True))
    state.payees.accept_payee(acceptance)
    note(state, user, "accepted a held payee", plan_id,
         f"{pending['external_id']} ({pending['name']})")
    return acceptance


# ---------------------------------------------------------------- the record
def note(state: StateStore, user: User, action: str, plan_id: str, detail: str) -> None:
    state.plans.note_event(ConsoleEvent(iso(datetime.now().astimezone()), user.principal,
                                        user.key, action, plan_id, detail))


def _plan(state: StateStore, plan_id: str) -> tuple[Any, dict[str, Any]]:
    """The plan kept as ``plan_id`` and its content (with the console's signatures)."""
    record = state.plans.head(plan_id)
    if record is None:
        raise ConsoleRefused(f"no plan {plan_id} in this state")
    return record, content_of(record, state)


def _pending_for(session: dict[str, Any], act: str, plan_id: str) -> dict[str, Any]:
    pending = _pending(session, act)
    if pending["plan_id"] != plan_id:
        raise ConsoleRefused("the passkey signed for another plan")
    return pending


def _pending(session: dict[str, Any], act: str) -> dict[str, Any]:
    pending = session.pop("pending", None)
    if not isinstance(pending, dict) or pending.get("act") != act:
        raise ConsoleRefused("nothing waits for a passkey here: start again")
    return pending
