"""The rules money obeys belong to the executor and to the state, not to the job's folder,
end to end against a loopback sandbox: a batch planned under four eyes stays under it
whatever a copy of its job file says; the executor's policy (``RUNNER_POLICY``) puts a job
under four eyes that says nothing of it, and a job file that would loosen it is refused;
every summary template is covered by the plan; a refused apply leaves no run, and every run
that moved money says who approved it; a payee the check held is accepted by the keys the
policy names, and trusted next month. What was paid is read at the sandbox."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Admin
from engine_support import cli, confirmed, err_lines, out_lines, outcomes, posts
from plan_support import allowed_signers, make_key, people_job
from test_payee_checks import MATCH, NO_MATCH, paid
from test_payee_checks import write as payee_job
from test_plan_signatures import fingerprint_of

from runner.engine.plan_file import digest_of
from runner.engine.plan_signing import NO_PLANNER
from runner.engine.rerun import inputs_digest
from runner.job import load_job
from runner.sandbox import RunningSandbox
from runner.state import open_state

NAME = "pay-2026-11"
ONE_MORE = ("0 of 1 approval(s): `runner approve PLAN --sign KEY` by 1 more key(s) of "
            "run.approvers, not the planner's")


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return sandbox_factory(submit_delay=0, complete_delay=0)


@pytest.fixture
def admin(sandbox: RunningSandbox) -> Admin:
    return Admin(sandbox.url)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    folder = tmp_path_factory.mktemp("keys")
    yield {name: make_key(folder, name) for name in ("alice", "bob", "carol", "mallory",
                                                     "trudy")}


def write_policy(folder: Path, base_url: str, approvers: Path, **more: str) -> Path:
    """The executor's policy: one account (the sandbox's) under four eyes, ``approvers`` its
    keys; ``more`` rules of that account."""
    folder.mkdir(parents=True, exist_ok=True)
    rules = "".join(f"    {k}: {v}\n" for k, v in more.items())
    path = folder / "policy.yaml"
    path.write_text(f"version: 1\naccounts:\n  - name: payroll-live\n    base_url: {base_url}\n"
                    f"    four_eyes: true\n    approvers: {approvers}\n{rules}")
    return path


def under_policy(tmp_path: Path, base_url: str, signers: list[Path],
                 monkeypatch: pytest.MonkeyPatch, **rules: str) -> Path:
    """The executor's folder: its approvers (``signers``' keys) and its policy, which
    RUNNER_POLICY names from now on; the policy file."""
    executor = tmp_path / "executor"
    executor.mkdir()
    allowed_signers(executor / "approvers", *signers)
    policy = write_policy(executor, base_url, executor / "approvers", **rules)
    monkeypatch.setenv("RUNNER_POLICY", str(policy))
    return policy


def line_of(job: Path, text: str) -> int:
    return next(n for n, line in enumerate(job.read_text().splitlines(), 1) if text in line)


# ---------------------------------------------------------------- the state remembers
def test_a_batch_planned_under_four_eyes_stays_under_it_whatever_its_job_file_says(
        sandbox: RunningSandbox, admin: Admin, tmp_path: Path, keys: dict[str, Path]) -> None:
    allowed_signers(tmp_path / "approvers", keys["alice"], keys["bob"])
    job = people_job(tmp_path, sandbox, four_eyes="true", approvers="approvers")
    state, plan = tmp_path / "s.sqlite", tmp_path / "pay.plan.json"
    assert cli("plan", str(job), "--state", str(state), "-o", str(plan), "--sign",
               str(keys["alice"])).exit_code == 0
    content = json.loads(plan.read_text())
    # The approver has not approved yet. A copy of the job file without its four-eyes lines:
    # the same name, the same state.
    copy = tmp_path / "copy.yaml"
    copy.write_text(job.read_text().replace("  four_eyes: true\n", "").replace(
        "  approvers: approvers\n", ""))
    assert "four_eyes" not in copy.read_text() and "approvers" not in copy.read_text()
    planned = f"batch {NAME} was planned under four eyes (plan {content['id']}, " \
              f"{content['planned_at']}), whatever {copy} says now"
    for command in (["run", "--yes"], ["run", "--yes", "--retry-failed"],
                    ["confirm", "--yes"]):
        refused = cli(command[0], str(copy), "--state", str(state), *command[1:])
        assert (refused.exit_code, out_lines(refused), err_lines(refused)) == (2, [], [
            f"error: {planned}: money moves only through an approved plan: `runner plan "
            f"{copy} -o PLAN`, signed by its planner (`--sign KEY`, or `runner approve PLAN "
            f"--sign KEY --as-planner`), `runner approve PLAN --sign KEY` by another key of "
            f"the approvers, then `runner apply PLAN`; nothing was sent"]), command
    dry = cli("run", str(copy), "--state", str(state), "--dry-run")
    assert out_lines(dry)[-2:] == [
        "a run would pay 3 item(s): EUR 60.00",
        f"under four eyes (the batch was planned so, plan {content['id']}) a run is "
        f"refused: money moves only through an approved plan file (-o PLAN)"]
    # A plan of the copy is a four-eyes plan too: unsigned, it is not paid.
    unsigned = tmp_path / "copy.plan.json"
    assert cli("plan", str(copy), "--state", str(state), "-o", str(unsigned)).exit_code == 0
    assert json.loads(unsigned.read_text())["four_eyes"] is True
    refused = cli("apply", str(unsigned))
    assert (refused.exit_code, err_lines(refused)) == (2, [
        f"the plan is refused: {NO_PLANNER}; {ONE_MORE}; nothing was sent"])
    # A copy naming approvers of its own (two keys of one person): the batch's signers are
    # the ones it was planned with, and these keys are not among them.
    allowed_signers(tmp_path / "theirs", keys["mallory"], keys["trudy"])
    theirs = tmp_path / "theirs.yaml"
    theirs.write_text(job.read_text().replace("approvers: approvers", "approvers: theirs"))
    forged = cli("plan", str(theirs), "--state", str(state), "-o",
                 str(tmp_path / "theirs.plan.json"), "--sign", str(keys["mallory"]))
    assert forged.exit_code == 2
    assert re.search(r"cannot sign this job's plans: its key is not in the approvers batch "
                     rf"{NAME} was planned with \(.*approvers\)", forged.stderr), forged.stderr
    assert posts(admin) == {}  # nothing was sent, not even a quotation
    # The plan its approver approves is paid, once.
    assert cli("approve", str(plan), "--sign", str(keys["bob"])).exit_code == 0
    assert cli("apply", str(plan)).exit_code == 1  # 1: the invalid row
    assert confirmed(sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}


# ---------------------------------------------------------------- the executor's policy
def test_the_executors_policy_puts_a_job_under_four_eyes_that_says_nothing_of_it(
        sandbox: RunningSandbox, admin: Admin, tmp_path: Path, keys: dict[str, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    policy = under_policy(tmp_path, sandbox.url, [keys["alice"], keys["bob"]], monkeypatch)
    executor = policy.parent
    team = tmp_path / "team"
    team.mkdir()
    job = people_job(team, sandbox)  # not a word of four eyes
    for fresh in ("a.sqlite", "b.sqlite"):  # whatever state it is run on
        refused = cli("run", str(job), "--state", str(tmp_path / fresh), "--yes")
        assert refused.exit_code == 2 and err_lines(refused)[0].startswith(
            f"error: the executor's policy ({policy}, account payroll-live) asks four eyes "
            f"for {job}: money moves only through an approved plan: ")
    assert posts(admin) == {}
    # The executor makes the plan (it holds the credentials); the planner signs it as it
    # is, then an approver approves, each where they are, with a copy of the policy.
    state, plan = tmp_path / "s.sqlite", tmp_path / "pay.plan.json"
    made = cli("plan", str(job), "--state", str(state), "-o", str(plan))
    assert made.exit_code == 0
    assert err_lines(made)[-1] == (
        f"under four eyes its planner signs it (`runner approve {plan} --sign KEY "
        f"--as-planner`), then 1 other key(s) approve it (`runner approve {plan} --sign KEY`)")
    content = json.loads(plan.read_text())
    assert (content["four_eyes"], content["approvals"], content["policy"]) == (
        True, 1, "payroll-live")
    assert err_lines(cli("apply", str(plan))) == [
        f"the plan is refused: {NO_PLANNER}; {ONE_MORE}; nothing was sent"]
    outsider = cli("approve", str(plan), "--sign", str(keys["carol"]), "--as-planner")
    assert outsider.exit_code == 2 and "cannot sign this job's plans: its key is not in " \
        f"the policy's approvers ({executor / 'approvers'})" in outsider.stderr
    signed = cli("approve", str(plan), "--sign", str(keys["alice"]), "--as-planner")
    assert signed.exit_code == 0, signed.output
    assert json.loads(plan.read_text())["planned_by"] == content["planned_by"]  # as made
    with monkeypatch.context() as elsewhere:  # an approver's machine without the policy
        elsewhere.delenv("RUNNER_POLICY")
        blind = cli("approve", str(plan), "--sign", str(keys["bob"]))
        assert (blind.exit_code, err_lines(blind)) == (2, [
            "not approved: the plan's approvers are the executor's policy's (account "
            "payroll-live): set RUNNER_POLICY to (a copy of) that policy file to check them "
            "here"])
    assert cli("approve", str(plan), "--sign", str(keys["bob"])).exit_code == 0
    applied = cli("apply", str(plan))
    assert applied.exit_code == 1  # 1: the invalid row
    assert confirmed(sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    report = cli("report", str(job), "--state", str(state)).stdout
    assert "Planned by alice@example.com (key " in report and "; approved by bob@example.com " \
        "(key " in report and f"(plan sha256:{digest_of(content)[:16]})." in report


def test_a_job_file_that_loosens_the_policy_is_refused(
        sandbox: RunningSandbox, admin: Admin, tmp_path: Path, keys: dict[str, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    policy = under_policy(tmp_path, sandbox.url, [keys["alice"], keys["bob"], keys["carol"]],
                          monkeypatch, approvals="2")
    executor = policy.parent
    said = f"the executor's policy ({policy}, account payroll-live)"
    allowed_signers(tmp_path / "approvers", keys["alice"], keys["bob"])
    cases = [({"four_eyes": "false"}, "four_eyes", "asks four eyes; a job may make its "
                                                   "rules stricter, never looser"),
             ({"four_eyes": "true", "approvers": "approvers", "approvals": "1"}, "approvals",
              "asks 2 approval(s); a job may ask more, never fewer"),
             ({}, "confirm", "asks four eyes: the approved plan's apply "
                                               "confirms what it pays, so confirm: false would "
                                               "leave every item unconfirmed; set it true")]
    for n, (run, field, why) in enumerate(cases):
        folder = tmp_path / f"job{n}"
        folder.mkdir()
        (folder / "approvers").write_text((tmp_path / "approvers").read_text())
        job = people_job(folder, sandbox, **run)
        if field == "confirm":
            job.write_text(job.read_text().replace("  confirm: true", "  confirm: false"))
        for command in ("validate", "run"):
            refused = cli(command, str(job), "--state", str(tmp_path / "s.sqlite"),
                          *(["--yes"] if command == "run" else []))
            assert (refused.exit_code, err_lines(refused)) == (2, [
                f"{job}:{line_of(job, f'  {field}: ')}: run.{field}: {said} {why}",
                "1 problem(s); nothing was sent."]), (command, run)
    # Stricter is welcome: three approvals, and the job's own approvers a second list.
    stricter = people_job(tmp_path, sandbox, four_eyes="true", approvers="approvers",
                          approvals="3")
    rules = load_job(stricter).rules
    assert (rules.four_eyes, rules.approvals, rules.policy_approvers, rules.job_approvers) == (
        True, 3, executor / "approvers", tmp_path / "approvers")
    # An account the policy does not name, with no default: nothing is paid through it.
    (tmp_path / "other").mkdir()
    other = people_job(tmp_path / "other", sandbox)
    other.write_text(other.read_text().replace(sandbox.url, "http://127.0.0.1:9"))
    unnamed = cli("validate", str(other))
    assert unnamed.exit_code == 2 and f"provider.base_url: the executor's policy ({policy}) " \
        "has no rules for this provider account and no default" in unnamed.stderr
    # A policy that cannot be read stops everything, as the executor's configuration.
    monkeypatch.setenv("RUNNER_POLICY", str(executor / "gone.yaml"))
    gone = cli("run", str(stricter), "--yes", "--state", str(tmp_path / "s.sqlite"))
    assert (gone.exit_code, err_lines(gone)) == (78, [
        f"error: {executor / 'gone.yaml'}: RUNNER_POLICY names a policy that cannot be read: "
        f"no such file"])
    policy.write_text(policy.read_text().replace(f"    approvers: {executor / 'approvers'}\n",
                                                 ""))
    monkeypatch.setenv("RUNNER_POLICY", str(policy))
    broken = cli("validate", str(stricter))
    assert (broken.exit_code, err_lines(broken)) == (78, [
        f"error: {policy}:3: accounts.0.approvers: four_eyes needs the keys that may plan "
        f"and approve: an allowed-signers file the executor keeps"])
    assert posts(admin) == {}


# ---------------------------------------------------------------- templates, covered
def test_a_summary_template_edited_after_approval_is_refused(
        sandbox: RunningSandbox, admin: Admin, tmp_path: Path, keys: dict[str, Path]) -> None:
    allowed_signers(tmp_path / "approvers", keys["alice"], keys["bob"])
    job = people_job(tmp_path, sandbox, four_eyes="true", approvers="approvers")
    (tmp_path / "pay.txt.j2").write_text('{% extends "runner/summary.txt.j2" %}\n'
                                         '{% block footer %}{% include "footer.j2" %}'
                                         '{% endblock %}\n')
    footer = tmp_path / "footer.j2"
    footer.write_text("Questions: payroll@example.com\n")
    job.write_text(job.read_text() + "summary: {template: pay.txt.j2}\n")
    state, plan = tmp_path / "s.sqlite", tmp_path / "pay.plan.json"
    assert cli("plan", str(job), "--state", str(state), "-o", str(plan), "--sign",
               str(keys["alice"])).exit_code == 0
    assert cli("approve", str(plan), "--sign", str(keys["bob"])).exit_code == 0
    covered = json.loads(plan.read_text())["job"]["templates"]
    assert sorted(t["name"] for t in covered) == ["footer.j2", "pay.txt.j2"]
    # After the approval, the footer a template includes says something else.
    footer.write_text("Questions: attacker@example.net\n")
    refused = cli("apply", str(plan))
    assert (refused.exit_code, out_lines(refused), err_lines(refused)) == (2, [], [
        f"the plan is refused: the summary template {footer.resolve()} changed since the "
        f"plan; nothing was sent"])
    (tmp_path / "extra.txt.j2").write_text("{{ summary.job }}\n")  # not used: not covered
    footer.write_text("Questions: payroll@example.com\n")
    assert posts(admin) == {}
    assert cli("apply", str(plan)).exit_code == 1  # as approved: paid (1: the invalid row)
    assert confirmed(sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    report = next((tmp_path / "reports").glob(f"{NAME}-*.txt")).read_text()
    assert report.endswith("Questions: payroll@example.com\n")


# ---------------------------------------------------------------- the record of approvals
def test_a_refused_apply_leaves_no_run_and_every_run_that_paid_says_who_approved_it(
        sandbox: RunningSandbox, admin: Admin, tmp_path: Path) -> None:
    job = people_job(tmp_path, sandbox)
    state, plan = tmp_path / "s.sqlite", tmp_path / "pay.plan.json"
    assert cli("plan", str(job), "--state", str(state), "-o", str(plan)).exit_code == 0
    content = json.loads(plan.read_text())
    rows = tmp_path / "rows.csv"
    approved = rows.read_text()
    rows.write_text(approved.replace("b,1,20.00", "b,1,21.00"))  # changed after approval
    refused = cli("apply", str(plan), "--approved-by", "Grace Hopper")
    assert (refused.exit_code, err_lines(refused)) == (2, [
        "the plan is refused: row 3 (pay-b) changed since the plan; nothing was sent"])
    with open_state(state) as store:
        assert store.runs(NAME) == []  # no run, and the plan bound to none
        kept = store.plan_file(content["id"])
        assert kept is not None and kept.run_id is None
    rows.write_text(approved)
    applied = cli("apply", str(plan), "--approved-by", "Grace Hopper")
    assert applied.exit_code == 1  # 1: the invalid row
    assert confirmed(sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    with open_state(state) as store:
        [run] = store.runs(NAME)
        kept = store.plan_file(content["id"])
        assert kept is not None and kept.run_id == run.id == 1
    assert run.approval is not None and (run.approval.plan_sha256, run.approval.approved_by) \
        == (digest_of(content), "Grace Hopper")
    # A run of a job file, with no plan file: its approval is whoever ran it, and how.
    (tmp_path / "dec").mkdir()
    december = people_job(tmp_path / "dec", sandbox)
    december.write_text(december.read_text().replace(f"name: {NAME}", "name: pay-2026-12"))
    assert cli("run", str(december), "--state", str(state), "--yes").exit_code == 1
    with open_state(state) as store:
        [plain] = store.runs("pay-2026-12")
    a = plain.approval
    assert a is not None
    assert (a.plan_sha256, a.approved_by, a.applied_by) == (
        inputs_digest(load_job(december)), f"{a.planned_by} (--yes)", a.planned_by)
    summary = next((tmp_path / "reports").glob("pay-2026-12-*.txt")).read_text()
    assert f"; approved by {a.planned_by} (--yes); applied by {a.planned_by} on " in summary


# ---------------------------------------------------------------- a payee, accepted with keys
def test_a_payee_accepted_by_the_policys_keys_is_trusted_next_month(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, keys: dict[str, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    executor = under_policy(tmp_path, sb.url, [keys["alice"], keys["bob"], keys["carol"]],
                            monkeypatch, payee_approvals="2").parent
    job = payee_job(tmp_path, sb, MATCH + NO_MATCH)
    state, held = tmp_path / "s.sqlite", f"{NAME}-c"

    def accept(*sign: str) -> tuple[int, list[str], list[str]]:
        result = cli("resolve", str(job), held, "--accept-payee", "--note",
                     "Ines Valderrama is his legal name", "--state", str(state), *sign)
        return result.exit_code, out_lines(result), err_lines(result)

    assert cli("plan", str(job), "--state", str(state)).exit_code == 0  # checks kept
    assert accept() == (2, [], [
        f"error: under four eyes (the executor's policy ({executor / 'policy.yaml'}, account "
        f"payroll-live)) a payee is accepted with a key the approvers hold: add --sign KEY "
        f"(your SSH private key)"])
    code, _, said = accept("--sign", str(keys["mallory"]))
    assert code == 2 and said[0].endswith(
        f"cannot accept payees of this job: its key is not in the policy's approvers "
        f"({executor / 'approvers'})")
    code, told, _ = accept("--sign", str(keys["alice"]))
    assert code == 0 and told[0].endswith(
        ": 1 of 2 acceptance(s); another key of the approvers accepts it too (the same "
        "command) before it is paid")
    # Rows written into the state by hand count for nothing: one unsigned, and one naming
    # carol's key with alice's signature.
    with sqlite3.connect(state) as db:
        columns = "account, name, signer, job_name, external_id, accepted_by, accepted_on, " \
                  "accepted_at, note, signature"
        [row] = db.execute(f"SELECT {columns} FROM accepted_payees").fetchall()
        db.execute(f"INSERT INTO accepted_payees ({columns}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                   (*row[:2], "mallory@host", *row[3:9], None))
        db.execute(f"INSERT INTO accepted_payees ({columns}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                   (*row[:2], fingerprint_of(keys["carol"]), *row[3:5], "carol", *row[6:]))
    one = "\n".join(out_lines(cli("plan", str(job), "--state", str(state))))
    assert "held by the payee check (needs a person): 1" in one
    code, told, _ = accept("--sign", str(keys["bob"]))
    assert code == 0 and told[0].endswith("; the next run pays it while its row names the "
                                          "same account and name, and later batches trust "
                                          "them")
    plan = tmp_path / "pay.plan.json"
    assert cli("plan", str(job), "--state", str(state), "-o", str(plan), "--sign",
               str(keys["carol"])).exit_code == 0
    assert cli("approve", str(plan), "--sign", str(keys["bob"])).exit_code == 0
    assert cli("apply", str(plan)).exit_code in (0, 5)  # paid; its status may be on its way
    assert paid(sb) == [f"{NAME}-a", f"{NAME}-c"]
    # Next month: the same person, account and name; nobody is asked to accept him again.
    december = payee_job(tmp_path, sb, MATCH + NO_MATCH, name="pay-2026-12")
    plan2 = tmp_path / "dec.plan.json"
    made = cli("plan", str(december), "--state", str(state), "-o", str(plan2), "--sign",
               str(keys["carol"]))
    assert made.exit_code == 0 and "held by the payee check" not in made.stdout
    assert [i["action"] for i in json.loads(plan2.read_text())["items"]] == ["new", "new"]
    assert cli("approve", str(plan2), "--sign", str(keys["alice"])).exit_code == 0
    assert cli("apply", str(plan2)).exit_code in (0, 5)
    assert outcomes(state, "pay-2026-12")["pay-2026-12-c"] != "held"
    assert paid(sb) == [f"{NAME}-a", f"{NAME}-c", "pay-2026-12-a", "pay-2026-12-c"]
