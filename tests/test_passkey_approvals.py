"""Passkey approvals as `runner apply` checks them, offline, against a loopback sandbox: a
WebAuthn assertion over the plan's digest, its decision and its time, by a passkey of the
passkeys file beside the approvers file, counts as an approval beside SSH signatures; one
passkey twice, a passkey not registered, an assertion of other bytes or another site, a plan
edited after its approval, a denial, all refused with nothing sent. Step-up rules of the
executor's policy ask more approvals above their threshold and not below it. The passkeys
are made here (``passkey_support``); the browser's are in test_console.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Admin
from conftest import test_config as sandbox_config
from engine_support import cli, err_lines, posts
from passkey_support import SoftPasskey
from plan_support import allowed_signers, make_key, people_job

from runner import passkeys
from runner.engine.plan_file import digest_of
from runner.engine.plan_signing import NAMESPACE, message
from runner.sandbox import RunningSandbox, start_in_thread

# What apply exits with once it paid the three people: 1, for the fourth row, invalid and
# skipped (run.on_invalid: skip).
PAID = 1


@dataclass
class Team:
    folder: Path
    sandbox: RunningSandbox
    planner: Path  # an SSH key
    carol: Path  # an SSH approver
    alice: SoftPasskey
    bob: SoftPasskey
    mallory: SoftPasskey  # registered nowhere


@pytest.fixture
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    # (A sandbox of its own: each test pays the same external_ids.)
    folder = tmp_path_factory.mktemp("passkeys")
    planner, carol = make_key(folder, "planner"), make_key(folder, "carol")
    sandbox = start_in_thread(sandbox_config(submit_delay=0, complete_delay=0))
    try:
        yield Team(folder, sandbox, planner, carol, SoftPasskey("alice@example.com"),
                   SoftPasskey("bob@example.com"), SoftPasskey("mallory@example.com"))
    finally:
        sandbox.stop()


def planned(team: Team, where: Path, approvals: int = 1, policy: str | None = None,
            passkeys: list[str] | None = None, **env: str) -> tuple[Path, Path, dict[str, Any]]:
    """A job under four eyes in ``where`` (its approvers: the planner's and carol's SSH keys,
    alice's and bob's passkeys), planned and signed by its planner: the job, the plan file,
    its content."""
    where.mkdir()
    approvers = allowed_signers(where / "approvers", team.planner, team.carol)
    (where / "approvers.passkeys").write_text("\n".join(
        passkeys if passkeys is not None else [team.alice.line(), team.bob.line()]) + "\n")
    job = people_job(where, team.sandbox, four_eyes="true", approvers=approvers.name,
                     approvals=str(approvals))
    plan = where / "pay.plan.json"
    made = cli("plan", str(job), "--state", str(where / "s.sqlite"), "-o", str(plan),
               "--sign", str(team.planner))
    assert made.exit_code == 0, made.output
    return job, plan, json.loads(plan.read_text())


def with_signatures(plan: Path, content: dict[str, Any], *entries: dict[str, Any]) -> Path:
    content["signatures"] += entries
    plan.write_text(json.dumps(content, indent=1))
    return plan


def applied(plan: Path, team: Team) -> tuple[int, list[str], int]:
    """`runner apply PLAN`: its exit code, what it said, the POSTs it sent."""
    before = posts(Admin(team.sandbox.url))["POST"]
    result = cli("apply", str(plan), "--yes")
    return (result.exit_code, err_lines(result),
            posts(Admin(team.sandbox.url))["POST"] - before)


def test_a_passkey_approval_pays_the_plan(team: Team, tmp_path: Path) -> None:
    _, plan, content = planned(team, tmp_path / "one")
    with_signatures(plan, content, team.alice.sign_plan(content))
    code, said, sent = applied(plan, team)
    assert (code, sent) == (PAID, 9), said  # three people: quotation, transaction, confirm
    show = cli("show", str(plan), "--format", "json")
    assert [(s["role"], s["principal"], s.get("passkey"), s["verdict"])
            for s in json.loads(show.stdout)["signatures"]] == [
        ("plan", "planner@example.com", None, "valid"),
        ("approve", "alice@example.com", True, "valid")]


def test_passkeys_and_ssh_keys_count_together(team: Team, tmp_path: Path) -> None:
    _, plan, content = planned(team, tmp_path / "two", approvals=2)
    with_signatures(plan, content, team.alice.sign_plan(content))
    code, said, sent = applied(plan, team)
    assert (code, sent) == (2, 0)
    assert said[-1].endswith("1 of 2 approval(s): `runner approve PLAN --sign KEY` by 1 more "
                             "key(s) of run.approvers, not the planner's; nothing was sent")
    approved = cli("approve", str(plan), "--sign", str(team.carol), "--yes")
    assert approved.exit_code == 0, approved.output
    code, said, sent = applied(plan, team)
    assert (code, sent) == (PAID, 9), said


@pytest.mark.parametrize("case", ["twice", "not registered", "other plan", "other site",
                                  "not verified", "expired line", "edited"])
def test_a_passkey_approval_that_does_not_hold_is_refused(team: Team, tmp_path: Path,
                                                          case: str) -> None:
    lines = None
    if case == "expired line":
        lines = [team.alice.line('valid-before="20200101Z"'), team.bob.line()]
    _, plan, content = planned(team, tmp_path / "p", passkeys=lines)
    entry = team.alice.sign_plan(content)
    if case == "twice":
        entries = [entry, team.alice.sign_plan(content, at="2026-11-25T10:05:00Z")]
    elif case == "not registered":
        entries = [team.mallory.sign_plan(content)]
    elif case == "other plan":
        entries = [team.alice.sign_plan({**content, "id": "another"})]
    elif case in ("other site", "not verified"):  # a phishing page's; the user not verified
        challenge = passkeys.challenge(NAMESPACE, message(digest_of(content), "approve",
                                                          entry["signed_at"]))
        entry["passkey"] = team.alice.assertion(challenge, "https://evil.example") \
            if case == "other site" else team.alice.assertion(challenge, flags=0x01)
        entries = [entry]
    else:
        entries = [entry]
    with_signatures(plan, content, *entries)
    if case == "edited":
        content["items"][1]["amount"] = "2000.00"
        plan.write_text(json.dumps(content, indent=1))
    code, said, sent = applied(plan, team)
    assert (code, sent) == (2, 0), said
    why = {
        "twice": "this key signed the plan already (role approve)",
        "not registered": "does not verify: its passkey is not registered (in no passkeys "
                          "file of the approvers)",
        "other plan": "does not verify: the passkey's assertion does not hold: it was made "
                      "for other bytes (another plan, decision or time)",
        "other site": "does not verify: made at https://evil.example, which is not a page "
                      "of localhost",
        "not verified": "does not verify: the passkey's assertion does not hold: User "
                        "verification is required but user was not verified during "
                        "authentication",
        "expired line": "its line made it valid only before 2020-01-01 00:00",
        "edited": "the plan file was edited since it was made",
    }[case]
    assert why in said[-1], said


def test_a_plan_denied_with_a_passkey_is_refused_with_its_reason(team: Team,
                                                                 tmp_path: Path) -> None:
    _, plan, content = planned(team, tmp_path / "deny")
    with_signatures(plan, content, team.bob.sign_plan(content),
                    team.alice.sign_plan(content, "deny", "2026-11-25T10:03:00Z",
                                         "the November bonus is missing"))
    code, said, sent = applied(plan, team)
    assert (code, sent) == (2, 0)
    assert said[-1] == ("the plan is refused: denied by alice@example.com at "
                        "2026-11-25T10:03:00Z: the November bonus is missing; nothing was sent")
    # The reason is signed: another one does not verify.
    content["signatures"][-1]["reason"] = "fine after all"
    plan.write_text(json.dumps(content, indent=1))
    code, said, sent = applied(plan, team)
    assert (code, sent) == (2, 0)
    assert "the deny signature signed at 2026-11-25T10:03:00Z is refused: does not verify" \
        in said[-1]


def policy_file(team: Team, where: Path, batch_over: str) -> Path:
    """The executor's policy: four eyes, one approval, and above ``batch_over`` EUR a
    second one of the finance group (bob, carol)."""
    where.mkdir()
    allowed_signers(where / "approvers", team.planner, team.carol)
    (where / "approvers.passkeys").write_text(team.alice.line() + "\n" + team.bob.line() + "\n")
    policy = where / "policy.yaml"
    policy.write_text(f"""version: 1
default:
  four_eyes: true
  approvals: 1
  approvers: approvers
  groups:
    finance: [bob@example.com, carol@example.com]
  step_up:
    - name: large batch
      batch_over: {{EUR: "{batch_over}"}}
      approvals: 2
      group: finance
""")
    return policy


@pytest.mark.parametrize("threshold,fires", [("50", True), ("100", False)])
def test_a_step_up_rule_asks_a_second_approver_above_its_threshold_only(
        team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threshold: str,
        fires: bool) -> None:
    policy = policy_file(team, tmp_path / "executor", threshold)
    monkeypatch.setenv("RUNNER_POLICY", str(policy))
    where = tmp_path / "job"
    where.mkdir()
    job = people_job(where, team.sandbox)  # three people: EUR 60 in all
    plan = where / "pay.plan.json"
    made = cli("plan", str(job), "--state", str(where / "s.sqlite"), "-o", str(plan),
               "--sign", str(team.planner))
    assert made.exit_code == 0, made.output
    content = json.loads(plan.read_text())
    assert content["rules_fired"] == ([{
        "rule": "large batch", "why": "the batch pays EUR 60.00, over 50", "approvals": 2,
        "group": "finance"}] if fires else [])
    if fires:
        assert ("step-up rule 'large batch' fires (the batch pays EUR 60.00, over 50): 2 "
                "approval(s) of finance") in err_lines(made)
    with_signatures(plan, content, team.alice.sign_plan(content))
    code, said, sent = applied(plan, team)
    if not fires:
        assert (code, sent) == (PAID, 9), said
        return
    assert (code, sent) == (2, 0)
    assert said[-1] == ("the plan is refused: the rule 'large batch' (the batch pays EUR "
                        "60.00, over 50) asks 2 approval(s) of the group finance; 0 given; "
                        "nothing was sent")
    with_signatures(plan, content, team.bob.sign_plan(content, at="2026-11-25T10:01:00Z"))
    code, said, sent = applied(plan, team)
    assert "1 given" in said[-1] and (code, sent) == (2, 0), said
    approved = cli("approve", str(plan), "--sign", str(team.carol), "--yes")
    assert approved.exit_code == 0, approved.output
    code, said, sent = applied(plan, team)
    assert (code, sent) == (PAID, 9), said
