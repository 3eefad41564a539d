"""The rules money obeys, and where they come from: the executor's policy first, the job file
only to make them stricter, and the state's memory of how a batch was planned.

Whoever holds the provider's credentials (the executor: cron, a container) holds the policy,
a YAML file named by its environment (``RUNNER_POLICY``), so that whoever can edit a job's
folder cannot take four eyes off it. Its rules are keyed by provider account::

    version: 1
    accounts:
      - name: payroll-live                 # how messages and plans name this account
        base_url: https://api.example.com  # a job's provider.base_url, as it is written
        api_key: live-payroll              # optional: only the jobs with this provider.api_key
        four_eyes: true                    # money moves only through approved plan files
        approvals: 2                       # approvers besides the planner
        approvers: approvers               # allowed signers, relative to the policy file
        payee_approvals: 1                 # keys that sign the acceptance of a held payee
    default:                               # every other account; without it, a job of an
      four_eyes: true                      # account the policy does not name is refused
      approvers: approvers

A job's ``run.four_eyes``, ``run.approvals`` and ``run.approvers`` may make them stricter
(its approvers file is then a second list every signing key must also be in), never looser:
a job that says ``four_eyes: false`` or fewer approvals than its account's rules is refused
(exit 2), naming the field. ``MoneyRules`` is what a job is held to (``Job.rules``, set when
it is loaded); ``BatchRules`` is what the state remembers of a batch planned under four eyes
(``runner.state.rules``), which no later job file lifts (``MoneyRules.under``).

Who may sign is a ``Trust``: every list of allowed signers the rules name (the policy's, the
job's, the state's memory of them) must let the key sign; the first names its holder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runner.errors import (
    FieldProblem,
    FileUnreadable,
    JobError,
    JobErrors,
    PolicyRefused,
    SigningError,
)

if TYPE_CHECKING:
    from runner.signatures import AllowedSigner

ENV = "RUNNER_POLICY"
POLICY_FILE_LIMIT = 1 << 20


class _Model(BaseModel):
    # As a job file's models (runner.job.fields.JobModel), which import this module: an
    # unknown key is an error.
    model_config = ConfigDict(extra="forbid", frozen=True)


class StepUp(_Model):
    """A rule that asks more approvals of a plan where it fires: a batch paying more than
    ``batch_over`` in a currency, an item paying more than ``item_over``, a payee never paid
    on this state before (``new_payee``), a person paid to another account than last time
    (``changed_account``). ``approvals`` keys of ``group`` (or of any approver) approve it."""

    name: str = Field(min_length=1, max_length=80, description="how plans name the rule")
    batch_over: dict[str, Decimal] = Field(default_factory=dict, description="currency -> "
                                           "the batch's total above which the rule fires")
    item_over: dict[str, Decimal] = Field(default_factory=dict, description="currency -> "
                                          "one item's amount above which the rule fires")
    new_payee: bool = Field(default=False, description="fires for a payee never paid on "
                            "this state before")
    changed_account: bool = Field(default=False, description="fires for a person paid to "
                                  "another account than last time")
    approvals: int = Field(default=1, ge=1, le=20, description="approvals the rule asks, "
                           "of keys of its group")
    group: str | None = Field(default=None, description="who may give them: a group of "
                              "the policy's groups (by default any approver)")

    @model_validator(mode="after")
    def _fires(self) -> Self:
        if not (self.batch_over or self.item_over or self.new_payee or self.changed_account):
            raise FieldProblem("name", "a step-up rule says when it fires: batch_over, "
                               "item_over, new_payee or changed_account")
        return self


class Rules(_Model):
    four_eyes: bool = Field(default=False, description="money moves only through plan "
                            "files signed by a planner and approved by other keys")
    approvals: int = Field(default=1, ge=1, le=20, description="approvers besides the "
                           "planner, each with a key of their own")
    approvers: str | None = Field(default=None, min_length=1, description="the keys that "
                                  "may plan and approve: an allowed-signers file, relative "
                                  "to the policy file")
    payee_approvals: int = Field(default=1, ge=1, le=20, description="keys that sign the "
                                 "acceptance of a payee the payee check held")
    groups: dict[str, list[str]] = Field(default_factory=dict, description="group -> the "
                                         "principals (of the approvers) in it")
    step_up: list[StepUp] = Field(default_factory=list, description="more approvals where "
                                  "a plan pays more, or pays someone new")

    @model_validator(mode="after")
    def _signers(self) -> Self:
        if self.four_eyes and self.approvers is None:
            raise FieldProblem("approvers", "four_eyes needs the keys that may plan and "
                               "approve: an allowed-signers file the executor keeps")
        for rule in self.step_up:
            if rule.group is not None and rule.group not in self.groups:
                raise FieldProblem("step_up", f"the rule {rule.name!r} names the group "
                                   f"{rule.group!r}, which groups does not define")
        return self


class Account(Rules):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
                      description="how messages and plans name the account")
    base_url: str = Field(min_length=1, description="a job's provider.base_url, as written")
    api_key: str | None = Field(default=None, min_length=1,
                                description="only the jobs with this provider.api_key")


class PolicyFile(_Model):
    version: Literal[1]
    accounts: list[Account] = Field(default_factory=list)
    default: Rules | None = None


@dataclass(frozen=True)
class Policy:
    """The executor's policy file, read."""

    path: Path
    accounts: tuple[Account, ...]
    default: Rules | None

    def account(self, base_url: str, api_key: str) -> tuple[str, Rules] | None:
        """The rules of the provider account at ``base_url`` with ``api_key`` (the first
        entry that names it, else ``default``), and the name plans give them."""
        for entry in self.accounts:
            if entry.base_url.rstrip("/") == base_url.rstrip("/") and \
                    entry.api_key in (None, api_key):
                return entry.name, entry
        return ("default", self.default) if self.default is not None else None

    def named(self, name: str) -> Rules | None:
        """The rules of the account plans name so (``account``'s name)."""
        if name == "default":
            return self.default
        return next((a for a in self.accounts if a.name == name), None)

    def approvers_path(self, rules: Rules) -> Path | None:
        return None if rules.approvers is None else self.path.parent / rules.approvers


def policy_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """The policy file ``RUNNER_POLICY`` names, if any."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    return Path(value) if value else None


def read_policy(path: Path) -> Policy:
    """The policy file at ``path``; PolicyRefused (exit 78: the executor's configuration)
    with every problem, naming the file, line and field."""
    from runner.job.document import dotted, line_at, read_document
    from runner.job.problems import explain
    from runner.job.sources import read_regular

    file = str(path)
    try:
        text = read_regular(path, POLICY_FILE_LIMIT, f"larger than {POLICY_FILE_LIMIT >> 20} "
                                                     "MiB").decode("utf-8")
    except (FileUnreadable, OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise PolicyRefused([JobError(file, None, None, f"{ENV} names a policy that cannot "
                                                        f"be read: {why}")]) from None
    try:
        tree, lines, errors = read_document(text, file)
    except JobErrors as exc:  # not a mapping, not YAML
        raise PolicyRefused(list(exc)) from None
    try:
        model = PolicyFile.model_validate(tree)
    except ValidationError as exc:
        errors += [JobError(file, line_at(lines, loc), dotted(loc), message)
                   for loc, message in explain(exc, PolicyFile)]
        raise PolicyRefused(errors) from None
    if errors:
        raise PolicyRefused(errors)
    policy = Policy(path, tuple(model.accounts), model.default)
    for where, rules in [*((("accounts", n), a) for n, a in enumerate(model.accounts)),
                         *([(("default",), model.default)] if model.default else [])]:
        approvers = policy.approvers_path(rules)
        if approvers is not None:
            from runner.signatures import read_allowed_signers  # cryptography: only here

            try:
                read_allowed_signers(approvers)
            except JobError as error:
                raise PolicyRefused([JobError(file, line_at(lines, (*where, "approvers")),
                                              dotted((*where, "approvers")), str(error))]
                                    ) from None
    return policy


@dataclass(frozen=True)
class MoneyRules:
    """What one job's money is held to: four eyes or not, how many approvals, who may sign
    (the policy's approvers, and the job's: a key must be in each), how many keys accept a
    held payee, where the rules come from (``source``, for messages; ``account``: the
    policy's account, for plans) and what the state remembers of the batch."""

    four_eyes: bool = False
    approvals: int = 1
    policy_approvers: Path | None = None
    job_approvers: Path | None = None
    payee_approvals: int = 1
    source: str = "the job file"
    account: str | None = None
    remembered: BatchRules | None = None
    step_up: tuple[StepUp, ...] = ()
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def under(self, batch: BatchRules | None) -> MoneyRules:
        """These rules, made as strict as the state remembers the batch was planned under
        (four eyes kept, the most approvals, its signers too)."""
        if batch is None or not batch.four_eyes:
            return self
        return replace(self, four_eyes=True, approvals=max(self.approvals, batch.approvals),
                       payee_approvals=max(self.payee_approvals, batch.payee_approvals),
                       remembered=batch)

    @property
    def files(self) -> list[Path]:
        """The allowed-signers files these rules name, the policy's first."""
        return [p for p in (self.policy_approvers, self.job_approvers) if p is not None]

    def trust(self) -> Trust:
        """Who may sign under these rules: every list they name must let a key sign."""
        from runner.signatures import parse_allowed_signers, read_allowed_signers

        lists: list[tuple[str, list[AllowedSigner]]] = []
        if self.policy_approvers is not None:
            lists.append((f"the policy's approvers ({self.policy_approvers})",
                          read_allowed_signers(self.policy_approvers)))
        if self.job_approvers is not None:
            lists.append(("run.approvers", read_allowed_signers(self.job_approvers)))
        if self.remembered is not None:
            lists += [(f"the approvers batch {self.remembered.job_name} was planned with "
                       f"({where})", parse_allowed_signers(text, where))
                      for where, text in self.remembered.signers]
        return Trust(tuple(lists))

    def signer_texts(self) -> list[tuple[str, str]]:
        """The allowed-signers files these rules name, as text (for the state to keep), and
        those the state kept already."""
        from runner.job.sources import read_regular
        from runner.signatures import SIGNERS_FILE_LIMIT, passkeys_of

        def text(path: Path) -> str:  # with the passkeys beside it, as one list
            found = [path, *([passkeys_of(path)] if passkeys_of(path).is_file() else [])]
            return "\n".join(read_regular(p, SIGNERS_FILE_LIMIT, "too large").decode("utf-8")
                             for p in found)

        files = [(str(p), text(p)) for p in self.files]
        return files + list(self.remembered.signers if self.remembered else ())


@dataclass(frozen=True)
class BatchRules:
    """What the state remembers of a batch planned under four eyes: since which plan, how
    many approvals, and the allowed signers it was planned with (file, text)."""

    job_name: str
    four_eyes: bool
    approvals: int
    payee_approvals: int
    signers: tuple[tuple[str, str], ...] = ()
    plan_id: str = ""
    recorded_at: str = ""


@dataclass(frozen=True)
class Trust:
    """Lists of allowed signers (where each is, its lines), every one of which must let a
    key sign; the first names who holds the key."""

    lists: tuple[tuple[str, list[AllowedSigner]], ...] = field(default_factory=tuple)

    def signer(self, key: bytes, namespace: str, now: datetime
               ) -> tuple[AllowedSigner | None, str]:
        """The line (of the first list) that lets ``key`` sign, and ""; or None and why
        not, naming the list."""
        from runner.signatures import signer_of

        if not self.lists:
            return None, "no list of approvers is known here"
        first: AllowedSigner | None = None
        for where, signers in self.lists:
            line, why = signer_of(signers, key, namespace, now)
            if line is None:
                return None, why.replace("run.approvers", where)
            first = first or line
        return first, ""

    def passkey(self, credential_id: bytes) -> AllowedSigner | None:
        """The registered passkey (of the first list that has it) of ``credential_id``."""
        for _, signers in self.lists:
            for line in signers:
                if line.passkey and line.credential_id == credential_id:
                    return line
        return None

    def signed_by(self, signature: str | dict[str, Any], message: bytes,
                  namespace: str) -> bytes:
        """The key (its blob) that made ``signature`` of ``message`` in ``namespace``: an
        SSH signature (armored text) or a passkey's assertion (``runner.passkeys``); a
        SigningError when it does not verify. Whether the key may sign is ``signer``'s."""
        from runner import passkeys
        from runner.signatures import verify

        if isinstance(signature, str):
            return verify(signature, message, namespace)
        assertion = passkeys.Assertion.from_entry(signature)
        try:
            credential = passkeys.from_b64url(assertion.credential_id)
        except ValueError:
            raise SigningError("the passkey's credential is not base64url") from None
        line = self.passkey(credential)
        if line is None:
            raise SigningError("its passkey is not registered (in no passkeys file of the "
                               "approvers)")
        passkeys.verify(assertion, passkeys.challenge(namespace, message), line.rp_id,
                        line.public_key)
        return line.key


def rules_of(run: Any, fields_set: AbstractSet[str], job_approvers: Path | None,
             policy: Policy | None, base_url: str, api_key: str
             ) -> tuple[MoneyRules, list[tuple[tuple[str, ...], str]]]:
    """The rules of a job whose ``run`` settings are these (``fields_set``: those the job
    file writes), under ``policy`` for the provider account at ``base_url``: the rules, and
    each problem (where in the job file, message) of a job that would loosen them."""
    own = job_approvers if run.four_eyes else None
    if policy is None:
        return MoneyRules(run.four_eyes, run.approvals if run.four_eyes else 1,
                          job_approvers=own), []
    found = policy.account(base_url, api_key)
    if found is None:
        return MoneyRules(), [(("provider", "base_url"), f"the executor's policy "
                               f"({policy.path}) has no rules for this provider account and "
                               "no default: nothing is paid through an account it does not "
                               "name")]
    name, rules = found
    problems: list[tuple[tuple[str, ...], str]] = []
    said = f"the executor's policy ({policy.path}, account {name})"
    if rules.four_eyes and "four_eyes" in fields_set and not run.four_eyes:
        problems.append((("run", "four_eyes"), f"{said} asks four eyes; a job may make its "
                         "rules stricter, never looser"))
    if rules.four_eyes and "approvals" in fields_set and run.approvals < rules.approvals:
        problems.append((("run", "approvals"), f"{said} asks {rules.approvals} "
                         f"approval(s); a job may ask more, never fewer"))
    if rules.four_eyes and not run.confirm:
        problems.append((("run", "confirm"), f"{said} asks four eyes: the approved plan's "
                         "apply confirms what it pays, so confirm: false would leave every "
                         "item unconfirmed; set it true"))
    return MoneyRules(
        four_eyes=rules.four_eyes or run.four_eyes,
        approvals=max(rules.approvals if rules.four_eyes else 1,
                      run.approvals if run.four_eyes else 1),
        policy_approvers=policy.approvers_path(rules) if rules.four_eyes else None,
        job_approvers=own, payee_approvals=rules.payee_approvals, source=said,
        account=name, step_up=tuple(rules.step_up) if rules.four_eyes else (),
        groups={k: tuple(v) for k, v in rules.groups.items()}), problems
