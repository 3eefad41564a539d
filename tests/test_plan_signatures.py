"""Approvals a person cannot forge, end to end against a loopback sandbox: a plan signed by its
planner's SSH key and approved by other keys of the job's allowed-signers file, checked by
`runner apply`; signatures that ssh-keygen checks, and that ssh-keygen makes; every forged,
missing, repeated or edited signature refused with nothing sent. The keys are made by
ssh-keygen, as a team makes them; the plan is signed once for the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import test_config as sandbox_config
from engine_support import cli, confirmed, err_lines, out_lines
from plan_support import (
    FIELDS,
    SSH_KEYGEN,
    allowed_signers,
    edit,
    make_key,
    people_job,
)
from test_run_terminal import on_terminal

from runner.engine.plan_file import digest_of, read_plan
from runner.engine.plan_signing import NAMESPACE, check_signatures, message
from runner.errors import JobError
from runner.policy import Trust
from runner.sandbox import RunningSandbox, start_in_thread
from runner.signatures import (
    SIGNERS_FILE_LIMIT,
    load_signing_key,
    read_allowed_signers,
    sign,
)
from runner.state import open_state


@dataclass(frozen=True)
class Signed:
    """A plan signed by alice and approved by bob, made once for this module."""

    folder: Path
    job: Path
    state: Path
    plan: Path
    approvers: Path
    keys: dict[str, Path]
    sandbox: RunningSandbox

    @property
    def content(self) -> dict[str, Any]:
        return dict(json.loads(self.plan.read_text()))


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Signed]:
    folder = tmp_path_factory.mktemp("signed")
    keys = {"alice": make_key(folder, "alice"), "bob": make_key(folder, "bob", "ecdsa"),
            "carol": make_key(folder, "carol", "rsa"),
            "dave": make_key(folder, "dave", passphrase="dave's passphrase"),
            "mallory": make_key(folder, "mallory")}  # not an approver
    approvers = allowed_signers(folder / "approvers", *(keys[k] for k in
                                                        ("alice", "bob", "carol", "dave")))
    sandbox = start_in_thread(sandbox_config(submit_delay=0, complete_delay=0))
    try:
        job = people_job(folder, sandbox, four_eyes="true", approvers="approvers")
        # A summary template of its own: the plan covers it (job.templates).
        (folder / "pay.txt.j2").write_text('{% extends "runner/summary.txt.j2" %}\n')
        job.write_text(job.read_text() + "summary: {template: pay.txt.j2}\n")
        state, plan = folder / "s.sqlite", folder / "pay.plan.json"
        made = cli("plan", str(job), "--state", str(state), "-o", str(plan), "--sign",
                   str(keys["alice"]))
        assert made.exit_code == 0, made.output
        approved = cli("approve", str(plan), "--sign", str(keys["bob"]))
        assert approved.exit_code == 0, approved.output
        yield Signed(folder, job, state, plan, approvers, keys, sandbox)
    finally:
        sandbox.stop()


def apply_refused(signed: Signed, content: dict[str, Any], tmp_path: Path) -> list[str]:
    """What `runner apply` says of ``content`` as a plan file (exit 2, nothing sent)."""
    plan = tmp_path / "forged.json"
    plan.write_text(json.dumps(content, indent=1))
    result = cli("apply", str(plan))
    assert (result.exit_code, out_lines(result)) == (2, []), result.output
    return err_lines(result)


def trust_of(approvers: Path) -> Trust:
    """Who may sign, as a job whose run.approvers is ``approvers`` trusts."""
    return Trust((("run.approvers", read_allowed_signers(approvers)),))


def fingerprint_of(key: Path) -> str:
    return subprocess.run([SSH_KEYGEN, "-l", "-f", str(key)], capture_output=True, text=True,
                          check=True, timeout=60).stdout.split()[1]


def signature(content: dict[str, Any], key: Path, role: str, at: str = "2026-11-25T10:00:00Z",
              passphrase: str = "") -> dict[str, str]:
    """A signature entry made with ``key``, whoever it is (as a forger would make one)."""
    signing = load_signing_key(key, lambda: passphrase)
    return {"role": role, "signed_at": at, "signature": sign(
        signing, message(digest_of(content), role, at), NAMESPACE)}


# ---------------------------------------------------------------- signed, approved, applied
def test_signatures_are_ssh_signatures_both_ways(signed: Signed, tmp_path: Path) -> None:
    content = signed.content
    digest = digest_of(content)
    assert [(s["role"]) for s in content["signatures"]] == ["plan", "approve"]
    assert content["planned_by"]["user"] == "alice@example.com"
    assert content["planned_by"]["key"] == fingerprint_of(signed.keys["alice"])
    # ssh-keygen checks runner's signatures, as git checks a commit signed with SSH.
    for entry, who in zip(content["signatures"], ("alice", "bob"), strict=True):
        sig = tmp_path / f"{who}.sig"
        sig.write_text(entry["signature"])
        checked = subprocess.run(
            [SSH_KEYGEN, "-Y", "verify", "-f", str(signed.approvers), "-I",
             f"{who}@example.com", "-n", "runner-plan", "-s", str(sig)],
            input=message(digest, entry["role"], entry["signed_at"]), capture_output=True,
            timeout=60)
        assert checked.returncode == 0 and checked.stdout.startswith(
            f'Good "runner-plan" signature for {who}@example.com'.encode()), checked
    # And runner checks one ssh-keygen makes: carol approves with ssh-keygen itself.
    at = "2026-11-25T11:00:00Z"
    text = tmp_path / "approval"
    text.write_bytes(message(digest, "approve", at))
    subprocess.run([SSH_KEYGEN, "-Y", "sign", "-f", str(signed.keys["carol"]), "-n",
                    "runner-plan", str(text)], check=True, capture_output=True, timeout=60)
    content["signatures"].append({"role": "approve", "signed_at": at,
                                  "signature": text.with_suffix(".sig").read_text()})
    views = check_signatures(content, digest, trust_of(signed.approvers),
                             datetime.now(UTC))
    assert [(v.role, v.principal, v.key, v.verdict) for v in views] == [
        ("plan", "alice@example.com", fingerprint_of(signed.keys["alice"]), "valid"),
        ("approve", "bob@example.com", fingerprint_of(signed.keys["bob"]), "valid"),
        ("approve", "carol@example.com", fingerprint_of(signed.keys["carol"]), "valid")]


def test_show_says_who_signed_and_whether_each_signature_holds(signed: Signed,
                                                               tmp_path: Path) -> None:
    content = signed.content
    lines = out_lines(cli("show", str(signed.plan)))
    alice, bob = content["signatures"]
    assert lines[2].startswith("planned by alice@example.com on ")
    assert lines[-3:] == [
        "signatures: 1 of 1 approval(s):",
        f"  plan: alice@example.com ({fingerprint_of(signed.keys['alice'])}) at "
        f"{alice['signed_at']}: valid",
        f"  approve: bob@example.com ({fingerprint_of(signed.keys['bob'])}) at "
        f"{bob['signed_at']}: valid"]
    content["signatures"][1] = signature(content, signed.keys["mallory"], "approve")
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(content))
    as_json = json.loads(cli("show", str(forged), "--format", "json").stdout)
    assert (as_json["approvals"], as_json["signatures"][1]) == ("0 of 1 approval(s)", {
        "role": "approve", "principal": "", "key": fingerprint_of(signed.keys["mallory"]),
        "signed_at": "2026-11-25T10:00:00Z", "verdict": "its key is not in run.approvers"})


def test_an_approved_plan_is_applied_by_cron_and_records_its_signers(signed: Signed) -> None:
    # Under four eyes a name given by whoever applies identifies nobody.
    assert err_lines(cli("apply", str(signed.plan), "--approved-by", "bob")) == [
        "the plan is refused: --approved-by names nobody under four eyes: the plan's "
        "approvers are the keys that signed it; nothing was sent"]
    # As cron runs it: no terminal, no --yes, nothing asked.
    applied = cli("apply", str(signed.plan))
    assert (applied.exit_code, out_lines(applied)) == (1, [  # 1: the invalid row
        "pay-2026-11: 3 items: 3 settled", "  EUR: sent 60.00, fees 4.00",
        "  invalid: 1 item(s) not sent; `runner validate` lists the problems"])
    assert confirmed(signed.sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    alice, bob = signed.content["signatures"]
    with open_state(signed.state) as store:
        [run] = store.runs("pay-2026-11")
    approval = run.approval
    assert approval is not None
    assert (approval.plan_sha256, approval.planned_by, approval.planner_key,
            approval.approved_by) == (digest_of(signed.content), "alice@example.com",
                                      fingerprint_of(signed.keys["alice"]), "bob@example.com")
    assert [(s.role, s.principal, s.key, s.signed_at) for s in approval.signers] == [
        ("plan", "alice@example.com", fingerprint_of(signed.keys["alice"]),
         alice["signed_at"]),
        ("approve", "bob@example.com", fingerprint_of(signed.keys["bob"]), bob["signed_at"])]
    report = cli("report", str(signed.job), "--state", str(signed.state)).stdout
    assert f"Planned by alice@example.com (key {approval.planner_key}) on " in report
    assert f"approved by bob@example.com (key {fingerprint_of(signed.keys['bob'])}, signed " \
           f"{bob['signed_at']}); applied by " in report


# ---------------------------------------------------------------- forged, missing, repeated
def test_a_forged_or_missing_signature_is_refused(signed: Signed, tmp_path: Path) -> None:
    planner_only = "it is not signed by its planner (`runner plan JOB -o PLAN --sign KEY` " \
                   "signs a plan as it is made; `runner approve PLAN --sign KEY " \
                   "--as-planner` one the executor made)"
    wanting = "0 of 1 approval(s): `runner approve PLAN --sign KEY` by 1 more key(s) of " \
              "run.approvers, not the planner's"
    content = signed.content
    content["signatures"] = []
    assert apply_refused(signed, content, tmp_path) == [
        f"the plan is refused: {planner_only}; {wanting}; nothing was sent"]
    content = signed.content
    del content["signatures"][1]  # bob's approval
    assert apply_refused(signed, content, tmp_path) == [
        f"the plan is refused: {wanting}; nothing was sent"]
    # Mallory's key signs well, but it is no approver's.
    content = signed.content
    content["signatures"][1] = signature(content, signed.keys["mallory"], "approve")
    assert apply_refused(signed, content, tmp_path) == [
        f"the plan is refused: the approve signature by {fingerprint_of(signed.keys['mallory'])}"
        f" signed at 2026-11-25T10:00:00Z is refused: its key is not in run.approvers; "
        f"{wanting}; nothing was sent"]
    # Bob's signature moved to another time, or to the planner's role: it no longer holds.
    content = signed.content
    content["signatures"][1]["signed_at"] = "2026-11-25T10:00:00Z"
    assert apply_refused(signed, content, tmp_path) == [
        "the plan is refused: the approve signature signed at 2026-11-25T10:00:00Z is "
        "refused: does not verify: the signature does not match the plan (edited since it "
        f"was signed, or forged); {wanting}; nothing was sent"]
    content = signed.content
    content["signatures"] = [signature(content, signed.keys["bob"], "plan"),
                             content["signatures"][0] | {"role": "approve"}]
    assert apply_refused(signed, content, tmp_path) == [
        f"the plan is refused: the plan signature by bob@example.com signed at "
        f"2026-11-25T10:00:00Z is refused: the plan names alice@example.com as its planner; "
        f"the approve signature signed at {signed.content['signatures'][0]['signed_at']} is "
        f"refused: does not verify: the signature does not match the plan (edited since it "
        f"was signed, or forged); {planner_only}; {wanting}; nothing was sent"]


def test_the_same_key_signing_twice_is_refused(signed: Signed, tmp_path: Path) -> None:
    copy = tmp_path / "copy.json"
    copy.write_text(signed.plan.read_text())
    alice, bob = fingerprint_of(signed.keys["alice"]), fingerprint_of(signed.keys["bob"])
    # The planner approving her own plan; the approver approving again.
    planner = cli("approve", str(copy), "--sign", str(signed.keys["alice"]), "--job",
                  str(signed.job))
    assert (planner.exit_code, err_lines(planner)) == (2, [
        f"error: the key {signed.keys['alice']} ({alice}, alice@example.com) planned this "
        f"plan already: another key approves it"])
    again = cli("approve", str(copy), "--sign", str(signed.keys["bob"]))
    assert (again.exit_code, err_lines(again)) == (2, [
        f"error: the key {signed.keys['bob']} ({bob}, bob@example.com) approved this plan "
        f"already: another key approves it"])
    assert copy.read_text() == signed.plan.read_text()  # left as it was
    # Signed twice by hand all the same: neither counts twice.
    content = signed.content
    content["signatures"].append(signature(content, signed.keys["bob"], "approve"))
    content["signatures"].append(signature(content, signed.keys["alice"], "approve"))
    refused = apply_refused(signed, content, tmp_path)
    assert refused == [
        "the plan is refused: the approve signature by bob@example.com signed at "
        "2026-11-25T10:00:00Z is refused: this key signed the plan already (role approve); "
        "the approve signature by alice@example.com signed at 2026-11-25T10:00:00Z is "
        "refused: this key signed the plan already (role plan); nothing was sent"]


def test_a_key_or_a_trust_list_that_is_no_regular_file_is_refused_at_once(
        signed: Signed, tmp_path: Path) -> None:
    copy = tmp_path / "copy.json"
    copy.write_text(signed.plan.read_text())
    # A FIFO given as the key, which no one writes, would keep `runner approve` waiting for
    # ever; a link to the process's environment would read its credentials as a key.
    fifo, environ = tmp_path / "key", tmp_path / "environ-key"
    os.mkfifo(fifo)
    environ.symlink_to("/proc/self/environ")
    for key, why in ((fifo, "not a regular file (a FIFO)"),
                     (environ, "a special file of the system (proc); a job reads regular "
                               "files only")):
        done = subprocess.run([sys.executable, "-m", "runner", "approve", str(copy), "--sign",
                               str(key)], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, check=False)
        assert (done.returncode, done.stderr.splitlines()) == (
            2, [f"error: {key}: cannot read the key: {why}"])
    assert copy.read_text() == signed.plan.read_text()  # left as it was
    # An allowed-signers file of more than any team's keys is refused, not read whole.
    huge = tmp_path / "approvers"
    huge.write_bytes(b"#" * (SIGNERS_FILE_LIMIT + 1))
    with pytest.raises(JobError) as caught:
        read_allowed_signers(huge)
    assert str(caught.value) == (f"{huge}: cannot read the approvers' keys: larger than 4 MiB "
                                 "(thousands of keys fit in less)")


def test_a_plan_naming_a_device_or_a_fifo_as_its_job_file_is_read_at_once(
        signed: Signed, tmp_path: Path) -> None:
    # The plan file names its job file; one edited to name /dev/zero, or a FIFO no one
    # writes, would keep `runner show` and `runner approve` reading for ever.
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    for named, why in (("/dev/zero", "a special file of the system (dev); a job reads "
                                     "regular files only"),
                       (str(fifo), "not a regular file (a FIFO)")):
        content = signed.content
        content["job"]["file"] = named
        plan = tmp_path / "named.json"
        plan.write_text(json.dumps(content, indent=1))
        reason = f"the plan's job file {named} cannot be read ({why}): give it with --job"
        for command in (["show", str(plan)], ["approve", str(plan), "--sign",
                                               str(signed.keys["carol"])]):
            done = subprocess.run([sys.executable, "-m", "runner", *command],
                                  capture_output=True, text=True, timeout=120,
                                  stdin=subprocess.DEVNULL, check=False)
            shown = done.stdout + done.stderr
            assert reason in shown, shown
            assert done.returncode == (0 if command[0] == "show" else 2), shown
        assert json.loads(plan.read_text()) == content  # not signed


@pytest.mark.parametrize("field", FIELDS)
def test_each_field_of_a_signed_plan_edited_breaks_every_signature(signed: Signed,
                                                                   field: str) -> None:
    content = signed.content
    edit(content, field)
    views = check_signatures(content, digest_of(content), trust_of(signed.approvers),
                             datetime.now(UTC))
    assert [v.verdict for v in views] == [
        "does not verify: the signature does not match the plan (edited since it was signed, "
        "or forged)"] * 2


def test_a_signed_plan_edited_where_the_state_kept_no_copy_is_refused(
        signed: Signed, tmp_path: Path) -> None:
    content = signed.content
    content["id"] = "not-kept"  # the state's copy is not found: the signatures judge alone
    content["items"][1]["amount"] = "2000.00"
    alice, bob = signed.content["signatures"]
    broken = "is refused: does not verify: the signature does not match the plan (edited " \
             "since it was signed, or forged)"
    assert apply_refused(signed, content, tmp_path) == [
        f"the plan is refused: the plan signature signed at {alice['signed_at']} {broken}; "
        f"the approve signature signed at {bob['signed_at']} {broken}; it is not signed by "
        f"its planner (`runner plan JOB -o PLAN --sign KEY` signs a plan as it is made; "
        f"`runner approve PLAN --sign KEY --as-planner` one the executor made); 0 of "
        f"1 approval(s): `runner approve PLAN --sign KEY` by 1 more key(s) of run.approvers, "
        f"not the planner's; nothing was sent"]


# ---------------------------------------------------------------- more approvals, passphrases
def test_two_approvals_take_two_keys_besides_the_planner(sb: RunningSandbox, signed: Signed,
                                                         tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    approvers = tmp_path / "approvers"
    approvers.write_text(signed.approvers.read_text())
    job = people_job(tmp_path, sb, four_eyes="true", approvers="approvers", approvals="2")
    plan = tmp_path / "two.plan.json"
    keys = signed.keys
    assert cli("plan", str(job), "--state", str(tmp_path / "s.sqlite"), "-o", str(plan),
               "--sign", str(keys["alice"])).exit_code == 0
    assert out_lines(cli("approve", str(plan), "--sign", str(keys["bob"]))) == [
        f"approved by bob@example.com ({fingerprint_of(keys['bob'])}): 1 of 2 approval(s); "
        f"`runner apply {plan}` pays it once enough keys approved it"]
    assert err_lines(cli("apply", str(plan)))[0].endswith(
        "1 of 2 approval(s): `runner approve PLAN --sign KEY` by 1 more key(s) of "
        "run.approvers, not the planner's; nothing was sent")
    # Dave's key is protected by a passphrase: asked of the environment (no terminal here).
    monkeypatch.delenv("RUNNER_KEY_PASSPHRASE", raising=False)
    assert err_lines(cli("approve", str(plan), "--sign", str(keys["dave"]))) == [
        f"error: {keys['dave']} is protected by a passphrase: set RUNNER_KEY_PASSPHRASE, or "
        f"sign on a terminal"]
    monkeypatch.setenv("RUNNER_KEY_PASSPHRASE", "not dave's")
    assert err_lines(cli("approve", str(plan), "--sign", str(keys["dave"]))) == [
        f"error: {keys['dave']}: cannot read the private key: a wrong passphrase, or not a "
        f"key"]
    # On a terminal the approver reads the plan before the question.
    code, shown = on_terminal([sys.executable, "-m", "runner", "approve", str(plan), "--sign",
                               str(keys["dave"])], b"y\n",
                              {"RUNNER_KEY_PASSPHRASE": "dave's passphrase"})
    assert code == 0, shown
    assert "Coumba Ndiaye" in shown and "signatures: 1 of 2 approval(s):" in shown
    assert "Approve this plan? [y/N]" in shown and "passphrase" not in shown
    content, _ = read_plan(plan)
    assert [s["role"] for s in content["signatures"]] == ["plan", "approve", "approve"]
    assert out_lines(cli("show", str(plan)))[-4] == "signatures: 2 of 2 approval(s):"
    # And whoever applies it on a terminal reads the file's own listing before paying.
    code, shown = on_terminal([sys.executable, "-m", "runner", "apply", str(plan)], b"n\n")
    assert code == 1, shown
    assert "plan " + content["id"] in shown and "Amina Otieno" in shown
    assert "approve: dave@example.com (" in shown
    assert "About to pay 3 item(s): EUR 60.00 of this plan" in shown
    assert "cancelled; nothing was sent" in shown
