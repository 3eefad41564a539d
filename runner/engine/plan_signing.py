"""A plan file's signatures: its planner's (``runner plan JOB -o PLAN --sign KEY``) and its
approvers' (``runner approve PLAN --sign KEY``), checked by `runner apply` against the keys of
the job's ``run.approvers`` (``runner.signatures``).

A signature is an SSH signature (namespace ``runner-plan``) of three lines that name the plan
by its digest, the signer's role and when they signed::

    runner plan sha256:<digest>
    role: approve
    signed at: 2026-11-25T10:02:11Z

The digest covers every byte `runner apply` relies on (``runner.engine.plan_file``), so an
edit of any of them, or of a signature's role or time, makes the signature fail. The file
keeps its signatures in its ``signatures`` list (``role``, ``signed_at``, ``signature``);
who signed is not written there but found: the principal that the approvers file names for
the signature's key. ``ssh-keygen -Y verify -f APPROVERS -I PRINCIPAL -n runner-plan -s SIG``
checks one by hand, given those three lines on its input.

Four eyes holds when the planner's key signed (as planner: the plan's ``planned_by`` is
that key's principal, or, for a plan the executor made unsigned, ``runner approve PLAN
--as-planner`` signed it without changing it) and as many other keys approved as the rules
ask (``runner.policy``: the executor's policy, the job, the state's memory of the batch):
each key counts once, the planner's never as an approver, and any signature that does not
hold refuses the plan. Who may sign is a ``runner.policy.Trust``: every list of allowed
signers the rules name must let the key sign.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from runner.engine.plan_file import (
    SIGNATURES,
    digest_of,
    iso,
    passkeys_sha256,
    read_plan,
    sha256_of,
    valid_until,
    write_plan,
)
from runner.engine.plan_listing import Listing, SignatureView
from runner.errors import (
    FileUnreadable,
    JobError,
    JobErrors,
    PlanRefused,
    PolicyRefused,
    SigningError,
)
from runner.job import approval_rules
from runner.policy import Trust, policy_path, read_policy
from runner.signatures import (
    fingerprint,
    key_blob,
    load_signing_key,
    read_allowed_signers,
    sign,
)
from runner.state import Approval, Signer

NAMESPACE = "runner-plan"
PLAN, APPROVE, DENY = "plan", "approve", "deny"
ROLES = (PLAN, APPROVE, DENY)
NO_PLANNER = ("it is not signed by its planner (`runner plan JOB -o PLAN --sign KEY` signs a "
              "plan as it is made; `runner approve PLAN --sign KEY --as-planner` one the "
              "executor made)")


def message(digest: str, role: str, signed_at: str, reason: str = "") -> bytes:
    """What a signature of the plan ``digest`` signs (a denial: with its reason)."""
    return (f"runner plan sha256:{digest}\nrole: {role}\nsigned at: {signed_at}\n"
            + (f"reason: {reason}\n" if role == DENY else "")).encode()


def signature_of(entry: dict[str, Any]) -> str | dict[str, Any] | None:
    """What an entry of the plan's ``signatures`` is signed with: an SSH signature's text,
    or a passkey's assertion (``passkey``); None for neither."""
    if isinstance(entry.get("signature"), str):
        return str(entry["signature"])
    passkey = entry.get("passkey")
    return passkey if isinstance(passkey, dict) else None


def sign_plan(content: dict[str, Any], role: str, key_file: Path,
              passphrase: Callable[[], str | None], trust: Trust, now: datetime,
              as_made: bool = False) -> SignatureView:
    """Sign the plan ``content`` (in place) with the key in ``key_file`` as its planner
    (``PLAN``) or an approver. A plan its planner signs as it is made (``as_made``: `runner
    plan -o --sign`) names the key's principal as its planner; a plan made unsigned (by
    the executor) is signed by its planner as it is (its digest is the state's). SigningError
    when the key may not: not trusted, or it signed this plan already (a planner does not
    approve his own plan), or the plan has its planner's signature already."""
    key = load_signing_key(key_file, passphrase)
    blob = key_blob(key.public_key())
    found = fingerprint(blob)
    line, why = trust.signer(blob, NAMESPACE, now)
    if line is None:
        raise SigningError(f"the key {key_file} ({found}) cannot sign this job's plans: {why}")
    views = check_signatures(content, digest_of(content), trust, now) \
        if content[SIGNATURES] else []
    done = [v for v in views if v.key == found]
    if done:
        signed = "planned" if done[0].role == PLAN else "approved"
        raise SigningError(f"the key {key_file} ({found}, {line.principals}) {signed} "
                           f"this plan already: another key approves it")
    if role == PLAN and any(v.role == PLAN for v in views):
        raise SigningError("the plan has its planner's signature already")
    if role == PLAN and as_made:
        content["planned_by"] = {**content["planned_by"], "user": line.principals,
                                 "key": found}
    signed_at = iso(now)
    content[SIGNATURES].append({"role": role, "signed_at": signed_at, "signature": sign(
        key, message(digest_of(content), role, signed_at), NAMESPACE)})
    return SignatureView(role, line.principals, found, signed_at, "valid")


def check_signatures(content: dict[str, Any], digest: str, trust: Trust,
                     now: datetime) -> list[SignatureView]:
    """Each signature of the plan as it holds: "valid", or why not (it does not verify, its
    key is not an approver's or signed before, a second planner). An SSH signature and a
    passkey's assertion are read alike (``Trust.signed_by``)."""
    views: list[SignatureView] = []
    seen: dict[str, str] = {}  # key -> the role it signed first
    for n, entry in enumerate(content[SIGNATURES], 1):
        signed = signature_of(entry) if isinstance(entry, dict) else None
        if signed is None or not all(isinstance(entry.get(k), str)
                                     for k in ("role", "signed_at")) or \
                not isinstance(entry.get("reason", ""), str):
            views.append(SignatureView("?", "", "", "", f"signature {n} is not a role, a time "
                                                        f"and a signature"))
            continue
        role, at, reason = entry["role"], entry["signed_at"], entry.get("reason", "")
        try:
            blob = trust.signed_by(signed, message(digest, role, at, reason), NAMESPACE)
        except SigningError as exc:
            views.append(SignatureView(role, "", "", at, f"does not verify: {exc}",
                                       reason, isinstance(signed, dict)))
            continue
        key = fingerprint(blob)
        line, verdict = trust.signer(blob, NAMESPACE, now)
        principal = line.principals if line is not None else ""
        if role not in ROLES:
            verdict = f"an unknown role {role!r}"
        elif key in seen:
            verdict = f"this key signed the plan already (role {seen[key]})"
        elif role == PLAN and PLAN in seen.values():
            verdict = "a second planner's signature"
        elif role == PLAN and line is not None and "key" in content["planned_by"] and \
                content["planned_by"].get("user") != principal:
            # (A plan signed as it was made names its planner; one the executor made
            # unsigned is its planner's who signs it so.)
            verdict = f"the plan names {content['planned_by'].get('user')} as its planner"
        seen.setdefault(key, role)
        views.append(SignatureView(role, principal, key, at, verdict or "valid", reason,
                                   isinstance(signed, dict)))
    return views


@dataclass(frozen=True)
class Standing:
    """Where a plan's signatures stand under four eyes: what refuses it whatever else is
    signed (a signature that does not hold, a denial, no planner's), the approvals still
    wanted by count and by each step-up rule, and how many there are ("1 of 2 approval(s)")."""

    refused: list[str]
    counted: str  # the approvals wanted by count ("" when there are enough)
    text: str
    rules_wanting: tuple[str, ...] = ()  # those each step-up rule still wants

    @property
    def wanting(self) -> str:
        """Every approval still wanted ("" when there are enough)."""
        return "; ".join([*([self.counted] if self.counted else []), *self.rules_wanting])

    @property
    def reasons(self) -> list[str]:
        """Why the plan may not be applied yet ([] when it may)."""
        return [*self.refused, *([self.wanting] if self.wanting else [])]


def standing(views: list[SignatureView], needed: int,
             fired: list[dict[str, Any]] | None = None,
             groups: Mapping[str, tuple[str, ...]] | None = None) -> Standing:
    """Where the signatures ``views`` leave a plan that asks ``needed`` approvals, and
    those of each step-up rule ``fired`` (``runner.engine.review``: so many keys of its
    group, ``groups`` saying who is in it). A denial that holds refuses the plan."""
    refused = [f"the {v.role} signature{' by ' + (v.principal or v.key) if v.key else ''} "
               f"{'signed at ' + v.signed_at + ' ' if v.signed_at else ''}is refused: "
               f"{v.verdict}" for v in views if not v.valid]
    refused += [f"denied by {v.principal} at {v.signed_at}: {v.reason}" for v in views
                if v.valid and v.role == DENY]
    approvals = [v for v in views if v.valid and v.role == APPROVE]
    if not any(v.valid and v.role == PLAN for v in views):
        refused.append(NO_PLANNER)
    counted = "" if len(approvals) >= needed else (
        f"{len(approvals)} of {needed} approval(s): `runner approve PLAN --sign KEY` by "
        f"{needed - len(approvals)} more key(s) of run.approvers, not the planner's")
    rules_wanting = []
    for rule in fired or []:
        group = rule.get("group")
        members = (groups or {}).get(group, ()) if group else None
        given = [v for v in approvals if members is None or v.principal in members]
        if len(given) < int(rule["approvals"]):
            rules_wanting.append(f"the rule {rule['rule']!r} ({rule['why']}) asks "
                                 f"{rule['approvals']} approval(s) of "
                                 f"{'the group ' + group if group else 'the approvers'}; "
                                 f"{len(given)} given")
    return Standing(refused, counted, f"{len(approvals)} of {needed} approval(s)"
                    + (f", {len(fired)} step-up rule(s)" if fired else ""),
                    tuple(rules_wanting))


def signed_approval(content: dict[str, Any], digest: str, views: list[SignatureView],
                    applied_by: str, applied_on: str, now: datetime) -> Approval:
    """Who planned and approved a plan applied under four eyes: its signers' principals and
    keys (the plan's ``standing`` allows it)."""
    planner = next(v for v in views if v.valid and v.role == PLAN)
    approvers = [v for v in views if v.valid and v.role == APPROVE]
    return Approval(digest, planner.principal, str(content["planned_by"]["host"]),
                    str(content["planned_at"]), ", ".join(a.principal for a in approvers),
                    applied_by, applied_on, iso(now), planner_key=planner.key,
                    signers=tuple(Signer(v.role, v.principal, v.key, v.signed_at)
                                  for v in (planner, *approvers)))


@dataclass(frozen=True)
class Approvers:
    """Who approves a plan, as `runner approve` and `runner show` read them without the
    state or provider credentials: the lists of allowed signers (the executor's policy's,
    where ``RUNNER_POLICY`` names a copy of it, and the job's), and how many approvals the
    plan asks (`runner apply` holds it to the rules as they are then)."""

    trust: Trust
    approvals: int


def approvers_of(content: dict[str, Any], job_file: Path | None = None) -> Approvers:
    """The approvers of the plan (its job file, or ``job_file`` holding the same bytes; the
    policy account the plan names); PlanRefused when they cannot be read as they were when
    the plan was made."""
    path = job_file or Path(content["job"]["file"])
    try:
        same = sha256_of(path) == content["job"]["sha256"]
    except (OSError, FileUnreadable) as exc:
        raise PlanRefused([f"the plan's job file {path} cannot be read "
                           f"({getattr(exc, 'strerror', None) or exc}): give it with --job"]
                          ) from None
    if not same:
        raise PlanRefused([f"the job file {path} is not the one the plan was made from"])
    if not content.get("four_eyes"):
        raise PlanRefused([f"the plan of {path} was made without four eyes: its plans are "
                           "not signed"])
    rules = approval_rules(path)
    lists = []
    account = content.get("policy")
    if isinstance(account, str):
        lists.append(_policy_signers(account))
    if rules.four_eyes and rules.approvers is not None:
        approvers = path.parent / rules.approvers
        try:
            same = sha256_of(approvers) == content["job"].get("approvers_sha256")
        except (OSError, FileUnreadable):
            same = False
        if not same:
            raise PlanRefused([f"the approvers file {approvers} changed since the plan was "
                               "made"])
        if passkeys_sha256(approvers) != content["job"].get("passkeys_sha256"):
            raise PlanRefused([f"the passkeys beside the approvers file {approvers} changed "
                               "since the plan was made"])
        lists.append(("run.approvers", read_allowed_signers(approvers)))
    needed = content.get("approvals")
    return Approvers(Trust(tuple(lists)),
                     needed if isinstance(needed, int) else rules.approvals)


def _policy_signers(account: str) -> tuple[str, list[Any]]:
    """The allowed signers of the executor's policy account ``account``, from the copy of
    the policy ``RUNNER_POLICY`` names here."""
    found = policy_path()
    if found is None:
        raise PlanRefused([f"the plan's approvers are the executor's policy's (account "
                           f"{account}): set RUNNER_POLICY to (a copy of) that policy file "
                           "to check them here"])
    try:
        policy = read_policy(found)
    except PolicyRefused as exc:
        raise PlanRefused([str(exc)]) from None
    rules = policy.named(account)
    approvers = policy.approvers_path(rules) if rules is not None else None
    if approvers is None:
        raise PlanRefused([f"the policy {found} names no approvers for account {account}"])
    return f"the policy's approvers ({approvers})", read_allowed_signers(approvers)


def approve_plan(path: Path, key_file: Path, passphrase: Callable[[], str | None],
                 job_file: Path | None, now: datetime,
                 ask: Callable[[Listing], bool] | None = None,
                 role: str = APPROVE) -> tuple[SignatureView, str]:
    """Add an approval (or, ``role`` PLAN, the planner's signature of a plan the executor
    made unsigned) signed with the key in ``key_file`` to the plan file at ``path``
    (rewritten whole), after ``ask`` (shown the plan as it stands) said yes. Refused
    (PlanRefused) for a plan expired, or whose signatures do not hold (an approval: or that
    its planner has not signed); SigningError for a key that may not sign it. The signature,
    and where the approvals now stand."""
    content, digest = read_plan(path)
    approvers = approvers_of(content, job_file)
    views = check_signatures(content, digest, approvers.trust, now)
    stands = standing(views, approvers.approvals)
    refused = [r for r in stands.refused if role == APPROVE or r != NO_PLANNER]
    if refused:
        raise PlanRefused(refused)
    if now > valid_until(content):
        raise PlanRefused([f"the plan expired at {content['valid_until']}; a new plan is "
                           f"made and approved instead"])
    if ask is not None and not ask(Listing(content, digest, views, stands.text)):
        raise PlanRefused(["not approved"])
    before = list(content[SIGNATURES])
    signed = sign_plan(content, role, key_file, passphrase, approvers.trust, now)
    again, _ = read_plan(path)
    if again[SIGNATURES] != before:  # another approval was added meanwhile: keep it
        raise PlanRefused([f"{path} changed while it was being approved: approve it again"])
    write_plan(content, path)
    return signed, standing([*views, signed], approvers.approvals).text


def signature_views(content: dict[str, Any], digest: str, job_file: Path | None,
                    now: datetime) -> tuple[list[SignatureView], str]:
    """The plan's signatures as they hold (for `runner show`), and where its approvals
    stand; each "not checked" (and why) when its job's approvers cannot be read."""
    if not content[SIGNATURES]:
        return [], ""
    try:
        approvers = approvers_of(content, job_file)
    except (PlanRefused, JobErrors, JobError) as exc:
        why = "; ".join(exc.reasons) if isinstance(exc, PlanRefused) else str(exc)
        return [SignatureView(str(e.get("role", "?")) if isinstance(e, dict) else "?", "", "",
                              str(e.get("signed_at", "")) if isinstance(e, dict) else "",
                              f"not checked: {why}") for e in content[SIGNATURES]], ""
    views = check_signatures(content, digest, approvers.trust, now)
    return views, standing(views, approvers.approvals).text
