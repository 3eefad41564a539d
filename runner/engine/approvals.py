"""What `runner apply` admits of a plan file, and four eyes: money moves only through a plan
file its planner signed and other keys approved, under the rules of ``runner.policy`` (the
executor's policy, made stricter by the job file, and by what the state remembers of the
batch: ``StateStore.rules``).

``require_plan`` is the gate every path that moves money passes: a run that is not the
application of a plan file (`runner run`, with or without ``--retry-failed``, and `runner
confirm`) of a job or a batch under four eyes is refused before anything is sent.

``keep_plan`` keeps a plan file in the state as `runner plan -o` makes it (its digest is
what an unsigned plan must still have when it is applied) and, under four eyes, that the
batch is planned under it; ``admit`` takes a plan file to apply only when nothing of it
was edited (against the state's copy: ``edits`` names each field changed; or, signed,
against its signatures: ``runner.engine.plan_signing``), then as
``runner.engine.plan_file.precheck`` allows; a plan applied before comes back with its run,
which applying it again resumes. The approvals given in `runner console` (kept in the state
with the plan) count beside the file's own signatures, and the step-up rules
(``runner.engine.review.fired``) ask theirs.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from runner.engine.plan_file import (
    SHOWN,
    SIGNATURES,
    AppliedPlan,
    approval,
    canonical,
    digest_of,
    job_file,
    precheck,
)
from runner.errors import NeedsApproval, PlanRefused
from runner.job import Job, load_job
from runner.policy import BatchRules, MoneyRules
from runner.state import PlanFileRecord, StateStore


def rules_for(job: Job, state: StateStore) -> MoneyRules:
    """The rules ``job``'s money obeys on ``state``: its own (the policy's, made stricter by
    the job file), made as strict as the state remembers its batch was planned."""
    return job.rules.under(state.rules.of(job.name))


def require_plan(job: Job, applying: bool, rules: MoneyRules | None = None) -> None:
    """NeedsApproval unless money may move for ``job`` this way: under four eyes (``rules``,
    by default the job's) only by applying a plan file (``applying``)."""
    rules = rules or job.rules
    if not rules.four_eyes or applying:
        return
    batch = rules.remembered
    if not job.rules.four_eyes and batch is not None:
        why = (f"batch {job.name} was planned under four eyes (plan {batch.plan_id}, "
               f"{batch.recorded_at}), whatever {job.path} says now")
    elif job.run.four_eyes:
        why = f"{job.path} has run.four_eyes"
    else:
        why = f"{rules.source} asks four eyes for {job.path}"
    raise NeedsApproval(
        f"{why}: money moves only through an approved plan: `runner plan {job.path} -o "
        f"PLAN`, signed by its planner (`--sign KEY`, or `runner approve PLAN --sign KEY "
        f"--as-planner`), `runner approve PLAN --sign KEY` by another key of the approvers, "
        f"then `runner apply PLAN`; nothing was sent")


def admit(content: dict[str, Any], digest: str, state: StateStore, approved_by: str | None,
          applied_by: str, applied_on: str, now: datetime) -> tuple[Job, AppliedPlan]:
    """The plan file ``content`` as `runner apply` may pay it, with its job, or PlanRefused
    with every reason (nothing is sent). A plan the state kept must have kept its digest
    (each field edited is named). Under four eyes (``rules_for``: the job's, or the batch's
    as the state remembers it) its signatures must hold (``standing``), and the approvers
    are its signers (``approved_by`` names nobody); else the state must have kept it. Then
    what ``precheck`` refuses. A plan applied before comes with its run."""
    kept = state.plan_file(str(content["id"]))
    # The passkeys' signatures given in the console count beside the file's own (an SSH
    # signature counts where it is: in the file).
    given = [e for e in state.plans.signatures(str(content["id"]))
             if "passkey" in e and e not in content[SIGNATURES]]
    content = {**content, SIGNATURES: [*content[SIGNATURES], *given]}
    if kept is not None and kept.digest != digest:
        raise PlanRefused(["the plan file was edited since it was made: " + "; ".join(
            _shown(edits(json.loads(kept.content), content)) or ["its digest differs"])])
    job = load_job(job_file(content))
    precheck(content, job, now)
    rules = rules_for(job, state)
    if rules.four_eyes:
        # (Signatures are read with cryptography, imported only where a plan is signed.)
        from runner.engine.plan_signing import check_signatures, signed_approval, standing
        from runner.engine.review import fired_on, merged

        if approved_by:
            raise PlanRefused(["--approved-by names nobody under four eyes: the plan's "
                               "approvers are the keys that signed it"])
        views = check_signatures(content, digest, rules.trust(), now)
        # The step-up rules the plan fired when it was made, and those that fire now.
        rules_fired = merged(content.get("rules_fired"), fired_on(rules, content, state))
        reasons = standing(views, rules.approvals, rules_fired, rules.groups).reasons
        if reasons:
            raise PlanRefused(reasons)
        if kept is None:  # signed elsewhere: kept now, so that it is applied once
            keep_plan(state, content, rules)
        record = signed_approval(content, digest, views, applied_by, applied_on, now)
    elif kept is None:
        raise PlanRefused([f"plan {content['id']} was not made against the state "
                           f"{state.location} (`runner plan -o` keeps each plan in the state "
                           f"it plans against): apply it with that state, or make a new plan"])
    else:
        record = approval(content, digest, approved_by or applied_by, applied_by, applied_on,
                          now)
    return job, AppliedPlan(content, digest, record, kept.run_id if kept else None)


def keep_plan(state: StateStore, content: dict[str, Any], rules: MoneyRules) -> None:
    """Keep the plan file ``content`` in the state it was made against, as it is made (its
    digest is what an unsigned plan must still have when it is applied); under four eyes,
    that its batch is planned so (``StateStore.rules``), with the signers it was planned
    with."""
    state.note_plan_file(PlanFileRecord(str(content["id"]), content["job"]["name"],
                                        digest_of(content), canonical(content).decode(),
                                        content["planned_at"]))
    if rules.four_eyes:
        state.rules.remember(BatchRules(content["job"]["name"], True, rules.approvals,
                                        rules.payee_approvals, tuple(rules.signer_texts()),
                                        str(content["id"]), content["planned_at"]))


def edits(made: Any, found: Any, where: str = "") -> list[str]:
    """Where the plan ``found`` differs from the plan ``made`` (its signatures apart): each
    field changed, added or removed, by its path (an item named by its row and
    external_id), with the value made and the value found."""
    if isinstance(made, dict) and isinstance(found, dict):
        changes: list[str] = []
        for key in [*made, *(k for k in found if k not in made)]:
            if not where and key == SIGNATURES:
                continue
            path = f"{where}.{key}" if where else str(key)
            if key not in found:
                changes.append(f"{path} removed")
            elif key not in made:
                changes.append(f"{path} added ({_value(found[key])})")
            else:
                changes += edits(made[key], found[key], path)
        return changes
    if isinstance(made, list) and isinstance(found, list):
        if len(made) != len(found):
            return _entries(made, found, where)
        changes = []
        for i, (a, b) in enumerate(zip(made, found, strict=True)):
            changes += edits(a, b, _entry(where, i, a))
        return changes
    if type(made) is not type(found) or made != found:
        return [f"{where} {_value(made)} became {_value(found)}"]
    return []


def _entries(made: list[Any], found: list[Any], where: str) -> list[str]:
    """Entries removed or added (a list of another length): by their text, named."""
    texts = [json.dumps(e, sort_keys=True) for e in found]
    kept = [json.dumps(e, sort_keys=True) for e in made]
    return [*(f"{_entry(where, i, e)} removed" for i, e in enumerate(made)
              if kept[i] not in texts),
            *(f"{_entry(where, i, e)} added" for i, e in enumerate(found)
              if texts[i] not in kept)] or [f"{where}: {len(made)} entries made, "
                                             f"{len(found)} found"]


def _entry(where: str, i: int, made: Any) -> str:
    if where == "items" and isinstance(made, dict):
        name = ", ".join(str(made[k]) for k in ("external_id",) if made.get(k))
        return f"items[{i}] (row {made.get('row')}{', ' + name if name else ''})"
    return f"{where}[{i}]"


def _value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 100 else text[:97] + "..."


def _shown(reasons: list[str]) -> list[str]:
    return reasons if len(reasons) <= SHOWN else [*reasons[:SHOWN],
                                                   f"and {len(reasons) - SHOWN} more"]
