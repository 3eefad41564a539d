"""The plan file: a plan (``runner plan JOB -o PLAN``) written for someone else to approve,
and what `runner apply PLAN` checks before it pays exactly what the plan lists.

The file is JSON (``"format": "runner plan"``, ``"version": 2``): its ``id``, the job (its
name, kind, file and rows file with their sha256, the approvers file's, and each summary
template's: everything that decides what is paid or reported), the rules it was made under
(four eyes, how many approvals, the executor's policy account), the state it was planned
against, who planned it (user and host) and when, until when it may be applied
(``run.plan_valid_for``), and every row: its action, the external_id it goes out under
(``ref``, of ``lineage``), its request's fingerprint, who it pays (beneficiary, payer,
account masked to its last four), its amount, fee (with ``--quote``), rate and what the
beneficiary receives, and the balance it draws on; then the balances; last the
``signatures`` (``runner.engine.approvals``). Amounts are exact decimals written as text.
Nothing secret is in it: the job file is hashed, not read into it, fingerprints leave card
data out, and accounts are masked.

The plan's ``digest`` is the sha256 of its canonical JSON (sorted keys, no spaces, ASCII),
``signatures`` left out: the same for any layout of the same content, different for any
edit of it. ``runner plan -o`` keeps the plan in the state under its id; signatures sign it.

``precheck`` refuses without reading the provider (expiry, another job, the job file, its
approvers file or a summary template changed); ``compare`` refuses what the plan made again
shows changed (a row, an amount, a rate moved by more than ``run.max_rate_change`` percent,
the rows file); ``restrict`` leaves the run only what the plan lists to pay, under the
external_ids it lists.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from runner.engine.plan import Plan, PlannedItem
from runner.errors import FileUnreadable, PlanRefused
from runner.job import Job
from runner.job.sources import open_regular
from runner.job.strict_json import strict_loads
from runner.lifecycle import TO_PAY, PlanAction
from runner.policy import MoneyRules
from runner.state import Approval
from runner.state.files import write_private

FORMAT, VERSION = "runner plan", 2
SIGNATURES = "signatures"  # the one part of the file its digest leaves out
SHOWN = 10  # reasons listed before "and N more"


@dataclass(frozen=True)
class AppliedPlan:
    """A plan file being applied: its content, its digest, who approved it, and the run
    that applied it already (None: this is its first application)."""

    document: dict[str, Any]
    sha256: str
    approval: Approval
    run_id: int | None = None


def sha256_of(path: Path) -> str:
    """The sha256 of the file at ``path``, read as a job's files are (``open_regular``: a
    plan file may name any path, and a FIFO or a device would never end); FileUnreadable
    when it is not a regular file."""
    digest = hashlib.sha256()
    with open_regular(path) as file:
        for chunk in iter(lambda: file.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def document(plan: Plan, job: Job, state: str, rules: MoneyRules) -> dict[str, Any]:
    """The plan as the file holds it (unsigned), under ``rules`` (the job's on this state)."""
    rows, approvers = job.rows_path, job.approvers_path
    valid_until = plan.made_at + timedelta(seconds=float(job.run.plan_valid_for))
    return {
        "format": FORMAT, "version": VERSION, "id": uuid.uuid4().hex,
        "job": {"name": job.name, "kind": job.kind, "file": str(job.path.resolve()),
                "sha256": sha256_of(job.path),
                "rows_file": str(rows.resolve()) if rows is not None else None,
                "rows_sha256": sha256_of(rows) if rows is not None else None,
                "approvers_sha256": sha256_of(approvers) if approvers is not None else None,
                "passkeys_sha256": passkeys_sha256(approvers),
                "templates": templates_of(job)},
        "state": state,
        "planned_by": {"user": plan.made_by, "host": plan.made_on},
        "planned_at": iso(plan.made_at), "valid_until": iso(valid_until),
        "quoted": plan.quoted, "retry_failed": plan.retry_failed,
        "include_unchanged": plan.include_unchanged,
        "allow_duplicates": plan.allow_duplicates,
        "max_rate_change": str(job.run.max_rate_change), "four_eyes": rules.four_eyes,
        "approvals": rules.approvals if rules.four_eyes else None, "policy": rules.account,
        "counts": plan.counts, "stops": plan.stops, "shortfall": plan.shortfall(),
        "balances": [n.as_dict() for n in plan.needs],
        **({"payee_checks": plan.payee_checks()} if plan.verify else {}),
        "items": [p.as_dict() for p in plan.items], SIGNATURES: []}



def passkeys_sha256(approvers: Path | None) -> str | None:
    """The sha256 of the passkeys file beside the approvers file (``runner.passkeys``);
    None when there is none."""
    from runner.signatures import passkeys_of

    if approvers is None or not passkeys_of(approvers).is_file():
        return None
    return sha256_of(passkeys_of(approvers))


def templates_of(job: Job) -> list[dict[str, str]]:
    """The job's own summary templates as a plan covers them: each by name, with its file
    and sha256 (``runner.summary.render.summary_files``: the named one, its sibling, and
    every template they use)."""
    from runner.summary.render import summary_files

    return [{"name": f.name, "file": str(f.path.resolve()), "sha256": f.sha256}
            for f in summary_files(job).values()]


def canonical(content: dict[str, Any]) -> bytes:
    """The plan's content as the bytes its digest is of: everything but its signatures,
    keys sorted, no spaces, ASCII."""
    body = {k: v for k, v in content.items() if k != SIGNATURES}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def digest_of(content: dict[str, Any]) -> str:
    """The plan's digest: the sha256 of its canonical content, in hex."""
    return hashlib.sha256(canonical(content)).hexdigest()


def write_plan(content: dict[str, Any], path: Path) -> str:
    """Write the plan file (whole or not at all, private: ``write_private``); its digest."""
    text = json.dumps(content, indent=1) + "\n"
    write_private(path, text)
    return digest_of(content)


def read_plan(path: Path) -> tuple[dict[str, Any], str]:
    """The plan file's content and digest; PlanRefused when it is not one."""
    try:
        with open_regular(path) as file:  # never a FIFO or a device
            raw = file.read()
        content = strict_loads(raw)  # a key twice, a lone surrogate, a deep nest: refused
    except OSError as exc:
        raise PlanRefused([f"{path}: cannot read a plan from it: {exc.strerror}"]) from None
    except (FileUnreadable, ValueError) as exc:
        raise PlanRefused([f"{path}: cannot read a plan from it: {exc}"]) from None
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise PlanRefused([f"{path}: not a runner plan file"])
    if content.get("version") != VERSION:
        raise PlanRefused([f"{path}: plan file version {content.get('version')!r}; this "
                           f"runner reads version {VERSION} (make the plan again)"])
    missing = _incomplete(content)
    if missing:
        raise PlanRefused([f"{path}: an incomplete plan file: {missing}"])
    return content, digest_of(content)


def _incomplete(content: dict[str, Any]) -> str:
    """What apply reads of a plan file that is missing or of the wrong shape; '' if none."""
    try:
        job, planner = content["job"], content["planned_by"]
        texts = [content["id"], job["file"], job["sha256"], job["name"], planner["user"],
                 planner["host"], content["state"], content["planned_at"],
                 content["valid_until"]]
        fields = [(i["external_id"], i["row"], i["action"], i["fingerprint"], i["lineage"])
                  for i in content["items"]]
        signatures = content[SIGNATURES]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if not all(isinstance(t, str) for t in texts) or not isinstance(signatures, list) or \
            not all(isinstance(f[1], int) and isinstance(f[4], int) for f in fields):
        return "a value of the wrong type"
    return ""


def job_file(content: dict[str, Any]) -> Path:
    return Path(content["job"]["file"])


def precheck(content: dict[str, Any], job: Job, now: datetime) -> None:
    """What is refused before anything is read from the provider: a plan past its validity,
    of another job, or made from a job file (or an approvers file) changed since (a rows file
    changed is ``compare``'s, which names the rows)."""
    reasons = []
    if now > valid_until(content):
        reasons.append(f"the plan expired at {content['valid_until']} (run.plan_valid_for "
                       f"{job.run.plan_valid_for}s after it was made); make a new one")
    if content["job"]["name"] != job.name or content["job"]["kind"] != job.kind:
        reasons.append(f"the plan is of job {content['job']['name']}, not {job.name}")
    if sha256_of(job.path) != content["job"]["sha256"]:
        reasons.append(f"the job file {job.path} changed since the plan")
    approvers = job.approvers_path
    if approvers is not None and sha256_of(approvers) != content["job"].get("approvers_sha256"):
        reasons.append(f"the approvers file {approvers} changed since the plan")
    if approvers is not None and passkeys_sha256(approvers) != content["job"].get(
            "passkeys_sha256"):
        reasons.append(f"the passkeys beside the approvers file {approvers} changed since "
                       "the plan")
    reasons += _templates_changed(content, job)
    if reasons:
        raise PlanRefused(reasons)


def _templates_changed(content: dict[str, Any], job: Job) -> list[str]:
    """The summary templates (``templates_of``) added, removed or edited since the plan."""
    planned = content["job"].get("templates")
    then = {t.get("name"): t for t in planned if isinstance(t, dict)} \
        if isinstance(planned, list) else {}
    now = {t["name"]: t for t in templates_of(job)}
    changed = [f"the summary template {t['file']} changed since the plan"
               for name, t in now.items() if name in then and then[name].get("sha256") !=
               t["sha256"]]
    changed += [f"the summary template {t['file']} is new since the plan"
                for name, t in now.items() if name not in then]
    changed += [f"the summary template {t.get('file')} is gone since the plan"
                for name, t in then.items() if name not in now]
    return changed


def valid_until(content: dict[str, Any]) -> datetime:
    """Until when the plan may be applied; PlanRefused when its ``valid_until`` is no time."""
    try:
        return datetime.fromisoformat(content["valid_until"].replace("Z", "+00:00"))
    except ValueError:
        raise PlanRefused([f"valid_until {content['valid_until']!r} is not a time"]) from None


def compare(content: dict[str, Any], plan: Plan, job: Job) -> list[str]:
    """How the plan made now differs from the file's: rows added, gone or changed, amounts
    and rates moved (by more than ``run.max_rate_change`` percent); [] when it may be paid."""
    planned = {p["external_id"]: p for p in content["items"] if p["external_id"]}
    rows = {p["row"]: p["external_id"] for p in planned.values()}
    reasons: list[str] = []
    rates: dict[str, str] = {}
    limit = job.run.max_rate_change
    for p in plan.items:
        if not p.external_id:
            if p.row in rows and rows[p.row] in planned:  # valid then, invalid now
                reasons.append(f"row {p.row} ({rows[p.row]}) is now invalid: {p.why}")
                del planned[rows[p.row]]
            continue
        then = planned.pop(p.external_id, None)
        if then is None:
            reasons.append(f"{_name(p)} is not in the plan")
        elif then["fingerprint"] != p.fingerprint:
            reasons.append(f"{_name(p)} changed since the plan")
        elif p.pays and then["action"] in TO_PAY:
            reasons += _amount(p, then)
            moved = _rate_moved(p, then, limit)
            if moved is not None and p.price is not None:
                rates.setdefault(p.price.rate_name or p.price.currency, moved)
    reasons += [f"row {then['row']} ({external_id}) of the plan is no longer in the job"
                for external_id, then in planned.items()]
    reasons += [f"the rate {name} {moved}" for name, moved in rates.items()]
    rows_file = job.rows_path
    if not reasons and rows_file is not None and \
            sha256_of(rows_file) != content["job"]["rows_sha256"]:
        reasons.append(f"the rows file {rows_file} changed since the plan")
    if len(reasons) > SHOWN:
        reasons = [*reasons[:SHOWN], f"and {len(reasons) - SHOWN} more"]
    return reasons


def restrict(content: dict[str, Any], plan: Plan) -> None:
    """Leave to pay only what the plan lists to pay, under the external_id it lists (an item
    is sent again only when the plan says so, as the plan says: applied again, a plan goes
    on with what it started and never sends anything under a later ``-fN``); the others
    become ``unplanned``, but those whose quotation the provider refused when the plan was
    made, which stay refused (``quote_refused``), with the provider's code and message, for
    the run to record."""
    listed = {p["external_id"]: p for p in content["items"] if p["external_id"]}
    for p in plan.to_pay:
        then = listed.get(p.external_id, {})
        action = then.get("action")
        if action == PlanAction.QUOTE_REFUSED:
            p.action, p.code, p.why = PlanAction.QUOTE_REFUSED, str(then.get("code") or ""), \
                str(then["why"])
        elif action not in TO_PAY:
            p.action, p.why = PlanAction.UNPLANNED, \
                f"the plan says {action or 'nothing of it'}"
        elif then["lineage"] != p.lineage:
            p.action, p.why = PlanAction.UNPLANNED, (f"the plan pays it as {then['ref']}; "
                                                     f"sending it as {p.ref} needs a new plan")


def approval(content: dict[str, Any], sha256: str, approved_by: str, applied_by: str,
             applied_on: str, now: datetime) -> Approval:
    """Who planned and who approved a plan applied without four eyes: names as given."""
    planner = content["planned_by"]
    return Approval(sha256, str(planner["user"]), str(planner["host"]),
                    str(content["planned_at"]), approved_by, applied_by, applied_on,
                    iso(now))


def _amount(p: PlannedItem, then: dict[str, Any]) -> list[str]:
    # Amounts of one source only: a quoted plan's are the quotation's, and an item that went
    # on since (a run quoted it) has the state's; apply compares the rates instead.
    if p.price is None or then.get("quoted_rate") is not None or then.get("amount") is None \
            or then.get("step") != p.step:
        return []
    if (then["currency"], _decimal(then["amount"])) != (p.price.currency, p.price.amount):
        return [f"{_name(p)}: the amount is now {p.price.currency} {p.price.amount:,}, the "
                f"plan says {then['currency']} {then['amount']}"]
    return []


def _rate_moved(p: PlannedItem, then: dict[str, Any], limit: Decimal) -> str | None:
    was, now = _decimal(then.get("rate")), p.price.rate if p.price else None
    if was is None or now is None or was == 0:
        return None
    change = (now - was) / was * 100
    if abs(change) <= limit:
        return None
    return (f"moved from {was} to {now} ({change:+.2f}%), more than run.max_rate_change "
            f"{limit}%")


def _decimal(value: Any) -> Decimal | None:
    try:
        return None if value is None else Decimal(str(value))
    except InvalidOperation:
        return None


def _name(p: PlannedItem) -> str:
    return f"row {p.row} ({p.external_id})"


def iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
