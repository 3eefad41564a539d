"""The dry runs of `runner validate --quote` and `runner plan` (its quotations with --quote,
its fee estimates): calls that move no money and say nothing of a row unless the provider
refuses that row. They are retried as a run's calls are (the job's run.retry, Retry-After
honoured, a quotation in doubt looked up first); a provider that still cannot answer them
stops the command, 75 or 78, one line, no plan file, nothing that moves money sent. The
policy's waits are stood still (``runner.provider.retry.pause``) and counted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Admin
from engine_support import MT, ROWS, cli, created, err_lines, out_lines, write_job
from http_servers import Rewriter, Rule, answer

import runner.provider.retry
from runner.sandbox import RunningSandbox

QUOTATIONS = f"(POST {MT}/quotations)"
STOPPED = "error: the dry-run quotations stopped before anything was paid: "
LATER = "1009001 Service temporarily unavailable, retry later"
INACTIVE = "d,13,40.00,+254700000004\n"  # payer 13 is inactive: only a quotation tells


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waited: list[float] = []
    monkeypatch.setattr(runner.provider.retry, "pause", waited.append)
    return waited


@pytest.fixture
def sb(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return sandbox_factory(submit_delay=0, complete_delay=0)


def posts(adm: Admin) -> dict[str, int]:
    """The calls the sandbox answered since the last count, by method and group."""
    seen: dict[str, int] = adm.requests()["counts"]
    adm.api.call("DELETE", "/requests")
    return {k: v for k, v in seen.items() if " " in k}


def dry_runs(sb: RunningSandbox) -> list[str]:
    return sorted(sb.state.store.by_ext["quotations"])


def test_a_passing_failure_of_a_dry_run_quotation_is_asked_again(
        sb: RunningSandbox, tmp_path: Path, waits: list[float]) -> None:
    """A 503 or a 429 (after its Retry-After), a 500 or a lost answer (looked up by its
    external_id first, adopted when it was made): the quotation is asked again and the
    command goes on as if nothing happened, one dry-run quotation per item."""
    adm = Admin(sb.url)
    job = write_job(tmp_path, sb)
    state = str(tmp_path / "s.sqlite")
    posts(adm)
    # (command, fault, quotations asked, lookups, waits)
    cases = [("validate", "unavailable_next", 4, 0, [1.0]),
             ("plan", "throttled_next", 4, 0, [1.0]),
             ("validate", "error_next", 4, 1, []),
             ("plan", "lost_next", 3, 1, [])]
    for n, (command, fault, sent, looked_up, waited) in enumerate(cases, start=1):
        adm.faults({"quotations": {fault: 1}})
        waits.clear()
        done = cli(command, str(job), "--quote", "--state", state)
        assert (done.exit_code, err_lines(done)) == (0, []), (fault, done.output)
        if command == "validate":
            assert out_lines(done) == [
                f"{job}: 3 items, 3 valid, 0 invalid; EUR 60.00 + fees 4.50 over 3 items"]
        else:
            assert "  EUR: 3 item(s), 60.00 + fees 4.50 = 64.50 needed; 10,000,000.00 " \
                "available: covered" in out_lines(done), done.output
        seen = posts(adm)
        assert (seen.get("POST quotations"), seen.get("GET lookups", 0)) == (
            sent, looked_up), (fault, seen)
        assert not {"POST create", "POST confirm"} & set(seen), seen
        assert waits == waited, fault  # Retry-After: 1, longer than the backoff
        assert len(dry_runs(sb)) == 3 * n  # one per item and command, none lost
    assert created(sb) == {}


def test_a_provider_that_cannot_answer_the_dry_runs_stops_the_command_with_75(
        sb: RunningSandbox, tmp_path: Path, waits: list[float]) -> None:
    """"Later" after every retry: the provider's state, not the rows'. validate and plan end
    75 with one line, no plan file, nothing sent that moves money; the fee estimates a plan
    (or a run) takes when a balance could be short stop it the same way."""
    adm = Admin(sb.url)
    adm.faults({"quotations": {"unavailable_rate": 1}})
    job = write_job(tmp_path, sb)
    state, plan_file = str(tmp_path / "s.sqlite"), tmp_path / "p.json"
    posts(adm)
    validated = cli("validate", str(job), "--quote", "--state", state)
    assert (validated.exit_code, validated.stdout, err_lines(validated)) == (
        75, "", [f"{STOPPED}{LATER} {QUOTATIONS}"])
    assert posts(adm) == {"GET discovery": 2, "POST quotations": 3}  # attempts: 3
    assert waits == [1.0, 1.0]
    planned = cli("plan", str(job), "--quote", "--state", state, "-o", str(plan_file))
    assert (planned.exit_code, planned.stdout, err_lines(planned)) == (
        75, "", [f"{STOPPED}{LATER} {QUOTATIONS}"])
    assert not plan_file.exists()
    # The balance covers the amounts (60.00) but not twice over: fees are estimated.
    adm.balance("EUR", "100", "0")
    estimated = f"error: the fee estimates stopped before anything was paid: {LATER} " \
                f"{QUOTATIONS}"
    planned = cli("plan", str(job), "--state", state, "-o", str(plan_file))
    assert (planned.exit_code, planned.stdout, err_lines(planned)) == (75, "", [estimated])
    assert not plan_file.exists()
    ran = cli("run", str(job), "--state", state, "--yes")
    assert (ran.exit_code, err_lines(ran)[-1:]) == (75, [estimated])
    seen = posts(adm)
    assert {k for k in seen if k.startswith("POST")} == {"POST quotations"}, seen
    assert created(sb) == {} and dry_runs(sb) == []


def test_a_refused_configuration_is_78_and_a_refused_row_the_rows_problem(
        sb: RunningSandbox, tmp_path: Path, waits: list[float]) -> None:
    """A 401 to the quotations: a person fixes the configuration (78, one line). The
    provider's refusal of one row's quotation (an inactive payer), even after a 503, is
    that row's problem, named by file, row and field: exit 2."""
    refused = answer("401 Unauthorized",
                     b'{"errors": [{"code": "1000401", "message": "Unauthorized"}]}')
    state = str(tmp_path / "s.sqlite")
    with Rewriter(sb.url, [Rule(f"POST {MT}/quotations", lambda head, body: refused,
                                count=99, forward=False)]) as proxy:
        job = write_job(tmp_path, proxy.url)
        for command, most in (("validate", 1), ("plan", 3)):
            proxy.calls.clear()
            stopped = cli(command, str(job), "--quote", "--state", state)
            assert (stopped.exit_code, stopped.stdout, err_lines(stopped)) == (
                78, "", [f"{STOPPED}1000401 Unauthorized {QUOTATIONS}"]), command
            # Never asked again: validate stops at its first, a plan's two workers at theirs.
            assert 1 <= sum(c.rewritten for c in proxy.calls) <= most, command
    Admin(sb.url).faults({"quotations": {"unavailable_next": 1}})
    job = write_job(tmp_path, sb, ROWS + INACTIVE)
    validated = cli("validate", str(job), "--quote", "--state", state)
    assert (validated.exit_code, err_lines(validated), out_lines(validated)) == (2, [], [
        f"{tmp_path}/rows.csv:5: payer_id: provider refused the quotation: 1003001 Payer is "
        "inactive in your account",
        f"{job}: 4 items, 3 valid, 1 invalid; EUR 60.00 + fees 4.50 over 3 items"])
    assert waits == [1.0] and created(sb) == {}
