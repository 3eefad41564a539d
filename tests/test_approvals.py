"""Four eyes end to end against a loopback sandbox: under ``run.four_eyes`` no command moves
money but the application of an approved plan file. The provider's request log is the judge
of what was sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Admin
from engine_support import cli, err_lines, out_lines, posts, run, write_job

from runner.errors import JobErrors, NeedsApproval
from runner.job import load_job
from runner.sandbox import RunningSandbox


def four_eyes(job: Path, **values: str) -> Path:
    """The job with ``run.four_eyes: true`` (and more ``run:`` settings)."""
    more = "".join(f"  {k}: {v}\n" for k, v in {"four_eyes": "true", **values}.items())
    job.write_text(job.read_text().replace("run:\n", "run:\n" + more))
    return job


def test_under_four_eyes_run_retry_and_confirm_are_refused_with_nothing_sent(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = four_eyes(write_job(tmp_path, sb))
    refusal = [f"error: {job} has run.four_eyes: money moves only through an approved plan: "
               f"`runner plan {job} -o PLAN`, approved by another person, then `runner apply "
               f"PLAN`; nothing was sent"]
    for command in (["run", "--yes"], ["run"], ["run", "--yes", "--retry-failed"],
                    ["confirm", "--yes"]):
        result = cli(command[0], str(job), "--state", str(state), *command[1:])
        assert (result.exit_code, out_lines(result), err_lines(result)) == (2, [], refusal), \
            command
    with pytest.raises(NeedsApproval):  # the library too, whoever calls it
        run(job, state)
    assert posts(adm) == {}
    assert not state.exists()  # refused before the state was opened
    # What sends nothing still goes.
    dry = cli("run", str(job), "--state", str(state), "--dry-run")
    assert dry.exit_code == 0 and out_lines(dry)[-1] == "a run would pay 3 item(s): EUR 60.00"
    assert posts(adm) == {}


def test_four_eyes_with_confirm_false_is_an_invalid_job(sb: RunningSandbox,
                                                        tmp_path: Path) -> None:
    job = four_eyes(write_job(tmp_path, sb, confirm=False))
    with pytest.raises(JobErrors) as caught:
        load_job(job)
    assert [str(e) for e in caught.value] == [
        f"{job}:28: run.confirm: run.four_eyes: the approved plan's apply confirms what it "
        f"pays and `runner confirm` is refused, so confirm: false would leave every item "
        f"unconfirmed; set it true"]
