"""Four eyes end to end against a loopback sandbox: under ``run.four_eyes`` no command moves
money but the application of an approved plan file. The provider's request log is the judge
of what was sent."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Admin
from conftest import test_config as sandbox_config
from engine_support import (
    cli,
    confirmed,
    err_lines,
    out_lines,
    posts,
    run,
    transactions,
    write_job,
)
from plan_support import (
    FIELDS,
    allowed_signers,
    edit,
    four_eyes,
    leaves,
    make_key,
    people_job,
    with_run,
)

from runner.engine.plan_file import digest_of
from runner.errors import JobErrors, NeedsApproval
from runner.job import load_job
from runner.sandbox import RunningSandbox, start_in_thread
from runner.state import open_state


def test_under_four_eyes_run_retry_and_confirm_are_refused_with_nothing_sent(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    approvers = allowed_signers(tmp_path / "approvers", make_key(tmp_path, "alice"))
    job = four_eyes(write_job(tmp_path, sb), approvers)
    refusal = [f"error: {job} has run.four_eyes: money moves only through an approved plan: "
               f"`runner plan {job} -o PLAN`, signed by its planner (`--sign KEY`, or "
               f"`runner approve PLAN --sign KEY --as-planner`), `runner approve PLAN --sign "
               f"KEY` by another key of the approvers, then `runner apply PLAN`; nothing was "
               f"sent"]
    for command in (["run", "--yes"], ["run"], ["run", "--yes", "--retry-failed"],
                    ["confirm", "--yes"]):
        result = cli(command[0], str(job), "--state", str(state), *command[1:])
        assert (result.exit_code, out_lines(result), err_lines(result)) == (2, [], refusal), \
            command
    assert not state.exists()  # refused before the state was opened
    with pytest.raises(NeedsApproval):  # the library too, whoever calls it (and opens it)
        run(job, state)
    assert posts(adm) == {}
    # What sends nothing still goes.
    dry = cli("run", str(job), "--state", str(state), "--dry-run")
    assert dry.exit_code == 0 and out_lines(dry)[-2:] == [
        "a run would pay 3 item(s): EUR 60.00",
        "under four eyes (run.four_eyes) a run is refused: money moves only through an "
        "approved plan file (-o PLAN)"]
    assert posts(adm) == {}


def problems(job: Path) -> list[str]:
    with pytest.raises(JobErrors) as caught:
        load_job(job, {"APPROVERS": "other"})
    return [str(e) for e in caught.value]


def test_four_eyes_settings_that_make_an_invalid_job(tmp_path: Path) -> None:
    approvers = allowed_signers(tmp_path / "approvers", make_key(tmp_path, "alice"))
    url = "http://127.0.0.1:9"  # never called: the job is refused as it loads
    job = four_eyes(write_job(tmp_path, url, confirm=False), approvers)
    assert problems(job) == [
        f"{job}:29: run.confirm: run.four_eyes: the approved plan's apply confirms what it "
        f"pays and `runner confirm` is refused, so confirm: false would leave every item "
        f"unconfirmed; set it true"]
    job = with_run(write_job(tmp_path, url), four_eyes="true")
    assert problems(job) == [
        f"{job}:25: run.approvers: run.four_eyes needs the keys that may plan and approve: an "
        f"allowed-signers file (see docs/finance-loop.md)"]
    job = with_run(write_job(tmp_path, url), approvals="2")
    assert problems(job) == [f"{job}:26: run.approvals: goes with run.four_eyes: true"]
    # Who approves is written in the job file, never taken from the environment.
    job = four_eyes(write_job(tmp_path, url), Path("${APPROVERS}"))
    assert problems(job) == [
        f"{job}:27: run.approvers: written in the job file itself, not taken from the "
        f"environment (no ${{...}} here)"]
    approvers.write_text(approvers.read_text() + "bob@example.com ssh-ed25519 AAAA-not-a-key\n")
    job = four_eyes(write_job(tmp_path, url), approvers)
    assert problems(job) == [
        f"{approvers}:3: the ssh-ed25519 key is not valid base64 of such a key"]


# ---------------------------------------------------------------- a plan file that cannot be edited
@dataclass(frozen=True)
class Made:
    """A plan file made once for this module (with quotations), and its state."""

    job: Path
    state: Path
    plan: Path
    content: dict[str, Any]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    folder = tmp_path_factory.mktemp("made")
    sandbox = start_in_thread(sandbox_config())
    try:
        job, state, plan = people_job(folder, sandbox), folder / "s.sqlite", \
            folder / "pay.plan.json"
        # A summary template of its own: the plan covers it (job.templates).
        (folder / "pay.txt.j2").write_text('{% extends "runner/summary.txt.j2" %}\n')
        job.write_text(job.read_text() + "summary: {template: pay.txt.j2}\n")
        result = cli("plan", str(job), "--state", str(state), "--quote", "-o", str(plan))
        assert result.exit_code == 0, result.output
        yield Made(job, state, plan, json.loads(plan.read_text()))
    finally:
        sandbox.stop()


def test_every_field_of_a_plan_file_is_among_those_edited(made: Made) -> None:
    assert leaves(made.content) == {*FIELDS, "format", "version", "id", "signatures"}


@pytest.mark.parametrize("field", FIELDS)
def test_each_field_of_a_plan_file_edited_is_refused(made: Made, tmp_path: Path,
                                                    field: str) -> None:
    content = json.loads(made.plan.read_text())
    was, now = edit(content, field)
    plan = tmp_path / "edited.json"
    plan.write_text(json.dumps(content, indent=2))
    result = cli("apply", str(plan), "--state", str(made.state), "--yes")
    name = field.replace("items[1]", "items[1] (row 3, pay-b)")
    why = f"the plan file was edited since it was made: {name} {json.dumps(was)} became " \
          f"{json.dumps(now)}"
    if field == "rules_fired":  # a list, one entry longer
        why = "the plan file was edited since it was made: rules_fired[0] added"
    if field == "state":  # a plan is applied on its own state: the one it names now
        why = f"the plan {plan} was made on the state {now}, and --state (or " \
              f"RUNNER_STATE) names {made.state}: a plan is applied on the state it was made " \
              f"on (make a new plan on the other state)"
    assert (result.exit_code, out_lines(result), err_lines(result)) == (2, [], [
        f"the plan is refused: {why}; nothing was sent"])


def test_a_plan_file_with_an_item_removed_or_another_id_is_refused(made: Made,
                                                                   tmp_path: Path) -> None:
    content = json.loads(made.plan.read_text())
    del content["items"][0]
    plan = tmp_path / "edited.json"
    plan.write_text(json.dumps(content))
    assert err_lines(cli("apply", str(plan), "--state", str(made.state), "--yes")) == [
        "the plan is refused: the plan file was edited since it was made: items[0] (row 2, "
        "pay-a) removed; nothing was sent"]
    content = json.loads(made.plan.read_text())
    content["id"] = "another"
    plan.write_text(json.dumps(content))
    assert err_lines(cli("apply", str(plan), "--state", str(made.state), "--yes")) == [
        f"the plan is refused: plan another was not made against the state {made.state} "
        f"(`runner plan -o` keeps each plan in the state it plans against): apply it with "
        f"that state, or make a new plan; nothing was sent"]
    # Laid out anew, the same content is the same plan.
    relaid = json.loads(json.dumps(made.content, sort_keys=True, indent=4))
    assert digest_of(relaid) == digest_of(made.content)


# ---------------------------------------------------------------- the approver sees people
def test_show_lists_the_people_a_plan_pays_in_each_format(made: Made) -> None:
    c = made.content
    text = cli("show", str(made.plan))
    assert text.exit_code == 0
    assert out_lines(text) == [
        f"plan {c['id']} of pay-2026-11 (remittance, {made.job})",
        f"digest sha256:{digest_of(c)}",
        f"planned by {c['planned_by']['user']} on {c['planned_by']['host']} at "
        f"{c['planned_at']}, with quotations; valid until {c['valid_until']}",
        f"state: {made.state}",
        "rules: no four eyes; covers the job file, the rows file, summary template(s) "
        "pay.txt.j2",
        "to pay: 3 item(s)",
        "  row  external_id  beneficiary    payer  account                    sent   fee      "
        "rate      received",
        "    2  pay-a        Amina Otieno   1      msisdn *********0001  EUR 10.00  1.50  "
        "140.2515  KES 1,402.00",
        "    3  pay-b        Brian Kamau    1      msisdn *********0002  EUR 20.00  1.50  "
        "140.2515  KES 2,805.00",
        "    4  pay-c        Coumba Ndiaye  2      msisdn *********0003  EUR 30.00  1.00   "
        "655.957    XOF 19,675",
        "totals:",
        "  EUR: 3 item(s), sent EUR 60.00, fees EUR 4.00: EUR 64.00 in all",
        "  received KES 4,207.00 (2 item(s))",
        "  received XOF 19,675 (1 item(s))",
        "not paid by this plan: 1 item(s)",
        "  invalid: 1",
        "    row 5: source.amount: not a decimal amount: 'abc'",
        "balances, when the plan was made:",
        "  EUR: 3 item(s), 60.00 + fees 4.00 = 64.00 needed; 10,000,000.00 available: covered",
        "signatures: none (an unsigned plan)"]
    as_json = json.loads(cli("show", str(made.plan), "--format", "json").stdout)
    assert [(i["beneficiary"], i["payer"], i["account"], i["amount"], i["fee"],
             i["received_currency"], i["received"]) for i in as_json["items"]] == [
        ("Amina Otieno", "1", "msisdn *********0001", "10.00", "1.50", "KES", "1402"),
        ("Brian Kamau", "1", "msisdn *********0002", "20.00", "1.50", "KES", "2805"),
        ("Coumba Ndiaye", "2", "msisdn *********0003", "30.00", "1.00", "XOF", "19675")]
    assert as_json["totals"][0] == {"kind": "sent", "currency": "EUR", "items": 3,
                                    "amount": "60.00", "fee": "4.00", "fees_not_quoted": 0}
    assert cli("show", str(made.plan), "--format", "csv").stdout.splitlines() == [
        "row,external_id,ref,action,beneficiary,payer,account,sent_currency,sent_amount,fee,"
        "rate,quoted_rate,received_currency,received_amount,payee_check",
        "2,pay-a,pay-a,new,Amina Otieno,1,msisdn *********0001,EUR,10.00,1.50,140.2515,"
        "140.2515,KES,1402.00,",
        "3,pay-b,pay-b,new,Brian Kamau,1,msisdn *********0002,EUR,20.00,1.50,140.2515,"
        "140.2515,KES,2805.00,",
        "4,pay-c,pay-c,new,Coumba Ndiaye,2,msisdn *********0003,EUR,30.00,1.00,655.957,"
        "655.957,XOF,19675,"]
    # The file names people, masked: no account number is in it whole.
    assert "+254700000001" not in made.plan.read_text()
    bad = made.plan.with_name("not-a-plan.json")
    bad.write_text("[]")
    assert (cli("show", str(bad)).exit_code, err_lines(cli("show", str(bad)))) == (
        2, [f"error: {bad}: not a runner plan file"])


# ---------------------------------------------------------------- applied once
def test_a_plan_applied_again_resumes_its_run_and_never_sends_more(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = people_job(tmp_path, sb)
    plan = tmp_path / "pay.plan.json"
    assert cli("plan", str(job), "--state", str(state), "-o", str(plan)).exit_code == 0
    # pay-a's confirm is done but its answer lost, and every lookup of it fails: in doubt.
    adm.faults({"confirm": {"lost_next": 1}, "lookups": {"error_next": 3}})
    first = cli("apply", str(plan), "--state", str(state), "--yes")
    assert first.exit_code == 1 and "1 in doubt" in first.stdout
    adm.api.call("DELETE", "/faults")
    again = cli("apply", str(plan), "--state", str(state), "--yes")
    assert (again.exit_code, out_lines(again)) == (1, [  # 1: the invalid row
        "pay-2026-11: 3 items: 3 settled", "  EUR: sent 60.00, fees 4.00",
        "  invalid: 1 item(s) not sent; `runner validate` lists the problems"])
    with open_state(state) as store:
        runs = store.runs("pay-2026-11")
        kept = store.plan_file(json.loads(plan.read_text())["id"])
    assert [(r.id, r.exit_code) for r in runs] == [(1, 1)]  # one run, resumed
    assert kept is not None and kept.run_id == 1
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    # Applied a third time: nothing is sent, the same run says so.
    before = posts(adm)
    assert cli("apply", str(plan), "--state", str(state), "--yes").exit_code == 1
    assert posts(adm) == before
    with open_state(state) as store:
        assert [r.id for r in store.runs("pay-2026-11")] == [1]


def test_an_apply_started_while_the_lease_is_held_is_refused_before_its_plan_is_admitted(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    """The state opened once per apply, and the job's lease taken on it first: a second apply
    (or an edited plan's) exits 75 before its plan is read against the state, recorded or
    sent; once the lease is free the plan is paid, once."""
    job = people_job(tmp_path, sb)
    plan = tmp_path / "pay.plan.json"
    assert cli("plan", str(job), "--state", str(state), "-o", str(plan)).exit_code == 0
    plan_id = json.loads(plan.read_text())["id"]
    edited = tmp_path / "edited.json"
    content = json.loads(plan.read_text())
    content["items"][0]["amount"] = "1000.00"
    edited.write_text(json.dumps(content))
    held = [f"error: job pay-2026-11 is being run by pid {os.getpid()} on "
            f"{socket.gethostname()} (run 41); try later"]
    before = posts(adm)
    with open_state(state) as holder, holder.join("pay-2026-11") as worker:
        worker.started(41)
        for applied in (plan, edited):  # the edited plan's refusal (exit 2) is not reached
            result = cli("apply", str(applied), "--state", str(state), "--yes")
            assert (result.exit_code, out_lines(result), err_lines(result)) == (75, [], held)
    assert posts(adm) == before
    with open_state(state) as store:
        kept = store.plan_file(plan_id)
        assert store.runs("pay-2026-11") == [] and list(store.items("pay-2026-11")) == []
    assert kept is not None and kept.run_id is None
    assert err_lines(cli("apply", str(edited), "--state", str(state), "--yes"))[0].startswith(
        "the plan is refused: the plan file was edited since it was made: items[0] ")
    assert cli("apply", str(plan), "--state", str(state), "--yes").exit_code == 1  # row 5
    assert confirmed(sb) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    with open_state(state) as store:
        assert [r.id for r in store.runs("pay-2026-11")] == [1]


def test_a_plan_sends_a_failed_item_again_once_under_the_external_id_it_lists(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    barred = "b,1,20.00,+254700999301\n"  # REJECTED at creation (30201), each time
    job = write_job(tmp_path, sb, "a,1,10.00,+254700000001\n" + barred)
    assert run(job, state).counts == {"settled": 1, "failed": 1}
    plan = tmp_path / "retry.plan.json"
    assert cli("plan", str(job), "--state", str(state), "--retry-failed",
               "--include-unchanged", "-o", str(plan)).exit_code == 0
    assert [(i["external_id"], i["action"], i["ref"]) for i in
            json.loads(plan.read_text())["items"]] == [
        ("pay-a", "settled", "pay-a"), ("pay-b", "retry", "pay-b-f2")]
    assert cli("apply", str(plan), "--state", str(state), "--yes").exit_code == 1
    assert sorted(e for e, _, _ in transactions(sb)) == ["pay-a", "pay-b", "pay-b-f2"]
    # pay-b-f2 failed too: applied again, the plan sends nothing under pay-b-f3.
    again = cli("apply", str(plan), "--state", str(state), "--yes")
    assert again.exit_code == 1
    assert sorted(e for e, _, _ in transactions(sb)) == ["pay-a", "pay-b", "pay-b-f2"]
