"""Odd answers to calls that went through: a reverse proxy in front of the sandbox
(``http_servers.Rewriter``) lets the sandbox do the work, then gives the runner something
else than its answer: an HTML page, a gzip body (asked for, or not labelled), an encoding not
asked for, a redirect, 100 Continue before the answer, an interim 1xx given as the answer
(the real answer behind it, waiting to be read by the next call), a body cut short. Nobody is
paid twice, nobody is marked failed, every item ends settled; what was not the promised
answer is looked up by external_id, and its connection is never used again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import Admin
from engine_support import (
    cli,
    confirmed,
    created,
    err_lines,
    items,
    outcomes,
    sent_for,
    write_job,
)
from http_servers import Rewriter, Rule, answer, odd_answers

MT = "/v1/money-transfer"


def test_odd_answers_after_a_create_or_a_confirm_that_went_through(
        sandbox_factory: Any, tmp_path: Path) -> None:
    odd = list(odd_answers())
    sandbox = sandbox_factory(submit_delay=0, complete_delay=0)
    rules, rows = [], []
    for n, kind in enumerate(odd):
        for step in ("create", "confirm"):
            name = f"{step[:3]}{n}"
            rows.append(f"{name},1,{10 + n}.00,+2547000{n:02d}{len(rows):03d}\n")
            call = (f"POST {MT}/quotations/ext-odd-{name}/transactions" if step == "create"
                    else f"POST {MT}/transactions/ext-odd-{name}/confirm")
            rules.append(Rule(call, kind.make, close=kind.close))
    with Rewriter(sandbox.url, rules) as proxy:
        job = write_job(tmp_path, proxy.url, "".join(rows), prefix="odd", concurrency=4)
        ran = cli("run", str(job), "--yes", "--state", str(tmp_path / "s.sqlite"))
    assert ran.exit_code == 0, ran.output
    names = [f"odd-{step[:3]}{n}" for n in range(len(odd)) for step in ("create", "confirm")]
    assert outcomes(tmp_path / "s.sqlite") == dict.fromkeys(names, "settled")
    assert created(sandbox) == confirmed(sandbox) == dict.fromkeys(names, 1)
    assert all(rule.hits == 1 for rule in rules)
    for n, kind in enumerate(odd):
        for step, sent in (("create", "transaction"), ("confirm", "confirm")):
            name = f"odd-{step[:3]}{n}"
            results = [r for s, _, r, _ in sent_for(tmp_path / "s.sqlite", name, "transaction")
                       if s == sent]
            # Settled from the answer itself, or in doubt first and settled by the lookup.
            assert results == (["ok"] if kind.settles else ["in_doubt"]), (kind.name, step)
    # No connection that carried an answer in doubt carried anything after it.
    for i, call in enumerate(proxy.calls):
        rule = next((r for r in rules if call.rewritten and call.path in r.call), None)
        kind = odd[rules.index(rule) // 2] if rule else None
        if kind is not None and not kind.settles:
            later = [c for c in proxy.calls[i + 1:] if c.connection == call.connection]
            assert later == [], (kind.name, call.path)
    lookups = [c.path for c in proxy.calls if c.method == "GET"]
    assert f"{MT}/transactions/ext-odd-con0" in lookups  # the HTML page, looked up


def test_credentials_refused_mid_run_stop_it_with_exit_78_and_nothing_failed(
        sandbox_factory: Any, tmp_path: Path) -> None:
    """A 401 to a confirm (the provider did nothing): the run stops as for a provider that
    cannot be reached, but with 78, a configuration error; no item is marked failed, and the
    next run, the credentials fixed, pays every item once."""
    sandbox = sandbox_factory(submit_delay=0, complete_delay=0)
    refused = answer("401 Unauthorized",
                     b'{"errors": [{"code": "1000401", "message": "Unauthorized"}]}')
    rule = Rule(f"POST {MT}/transactions/ext-pay-b/confirm", lambda h, b: refused,
                forward=False)
    state = tmp_path / "s.sqlite"
    with Rewriter(sandbox.url, [rule]) as proxy:
        job = write_job(tmp_path, proxy.url, concurrency=1)
        stopped = cli("run", str(job), "--yes", "--state", str(state))
        assert stopped.exit_code == 78, stopped.output
        assert "the provider refuses runner's credentials, or its certificate is not " \
               "trusted: fix the configuration, then run again to resume" in err_lines(stopped)
        assert "failed" not in outcomes(state).values()
        assert confirmed(sandbox)["pay-b"] == 0
        again = cli("run", str(job), "--yes", "--state", str(state))
    assert again.exit_code == 0, again.output
    assert outcomes(state) == {"pay-a": "settled", "pay-b": "settled", "pay-c": "settled"}
    assert confirmed(sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}


def test_an_answer_runner_cannot_read_outside_a_run_ends_the_command_with_75(
        sandbox_factory: Any, tmp_path: Path) -> None:
    """validate and plan read the balances for no item, retried as a run's reads are: a
    page (a portal's, a proxy's) in place of their JSON after every retry, or the
    provider's 500, is no item failing (exit 1) but "try later": exit 75, one line saying
    what was read, nothing sent."""
    sandbox = sandbox_factory(submit_delay=0, complete_delay=0)
    page = next(odd for odd in odd_answers() if odd.name == "html")
    state = str(tmp_path / "s.sqlite")
    with Rewriter(sandbox.url, [Rule(f"GET {MT}/balances.*", page.make, count=99)]) as proxy:
        job = write_job(tmp_path, proxy.url, max_wait="0.01")
        validated = cli("validate", str(job), "--state", state)
        planned = cli("plan", str(job), "--state", state, "--verify")
    unread = "error: reading the balances of the payer account failed: an unexpected " \
             f"answer: HTTP 200 text/html, not the application/json asked for (GET {MT}/balances)"
    assert (validated.exit_code, validated.stdout, err_lines(validated)) == (75, "", [unread])
    assert (planned.exit_code, planned.stdout, err_lines(planned)) == (75, "", [unread])
    assert sum(c.rewritten for c in proxy.calls) == 6  # 3 tries each (run.retry.attempts)
    Admin(sandbox.url).faults({"balances": {"error_rate": 1}})
    failed = cli("validate", str(write_job(tmp_path, sandbox, max_wait="0.01")), "--state",
                 state)
    assert (failed.exit_code, err_lines(failed)) == (75, [
        "error: reading the balances of the payer account failed: 1009001 Unexpected error, "
        f"contact support (GET {MT}/balances)"])
    assert created(sandbox) == confirmed(sandbox) == {}


def rewritten(change: Any) -> Any:
    """An odd answer: the sandbox's own, its JSON body changed by ``change``."""
    def make(head: bytes, body: bytes) -> bytes:
        data = json.loads(body)
        change(data)
        status = head.split(b"\r\n", 1)[0].decode().partition(" ")[2]
        return answer(status, json.dumps(data).encode())
    return make


def test_a_confirm_answered_200_with_an_error_body_is_in_doubt_and_looked_up(
        sandbox_factory: Any, tmp_path: Path) -> None:
    """The confirm went through; its answer is ``200`` with an error body. No internal
    error: the call is in doubt, looked up, found confirmed, and the item settles, paid
    once."""
    sandbox = sandbox_factory(submit_delay=0, complete_delay=0)
    error = b'{"errors": [{"code": "1000500", "message": "Internal error"}]}'
    rule = Rule(f"POST {MT}/transactions/ext-pay-b/confirm", lambda h, b: answer("200 OK", error))
    state = tmp_path / "s.sqlite"
    with Rewriter(sandbox.url, [rule]) as proxy:
        ran = cli("run", str(write_job(tmp_path, proxy.url, concurrency=1)), "--yes",
                  "--state", str(state))
    assert ran.exit_code == 0, ran.output
    assert rule.hits == 1
    assert outcomes(state) == {"pay-a": "settled", "pay-b": "settled", "pay-c": "settled"}
    assert confirmed(sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    assert [r for s, _, r, _ in sent_for(state, "pay-b", "transaction") if s == "confirm"] == [
        "in_doubt"]


def test_an_answer_in_another_currency_is_a_conflict_not_a_payment(
        sandbox_factory: Any, tmp_path: Path) -> None:
    """The confirm's answer says USD where EUR was quoted and sent: the item is a conflict
    naming the field (exit 1), never reported settled, and never confirmed again."""
    sandbox = sandbox_factory(submit_delay=0, complete_delay=0)

    def usd(data: dict[str, Any]) -> None:
        data["source"]["currency"] = "USD"
    rule = Rule(f"POST {MT}/transactions/ext-pay-b/confirm", rewritten(usd))
    state = tmp_path / "s.sqlite"
    with Rewriter(sandbox.url, [rule]) as proxy:
        job = write_job(tmp_path, proxy.url, concurrency=1)
        ran = cli("run", str(job), "--yes", "--state", str(state))
        again = cli("run", str(job), "--yes", "--state", str(state))
    assert (ran.exit_code, again.exit_code) == (1, 1), ran.output
    assert outcomes(state) == {"pay-a": "settled", "pay-b": "conflict", "pay-c": "settled"}
    assert items(state)["pay-b"]["error_message"] == (
        "transaction pay-b at the provider does not match this item: source.currency 'USD', "
        "sent 'EUR'")
    assert confirmed(sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}


def test_a_status_class_no_document_names_is_unknown_and_the_run_not_ok(
        sandbox_factory: Any, tmp_path: Path) -> None:
    """The confirm and every lookup of b answer status 42000 of class 42: b is shown
    unknown, named with its status, and the run exits 1. Once the provider shows it
    completed, a run settles it and exits 0. Paid once."""
    sandbox = sandbox_factory(submit_delay=0, complete_delay=0)

    def odd_class(data: dict[str, Any]) -> None:
        data["status"], data["status_class"] = "42000", "42"
        data["status_message"] = "HELD-BY-PARTNER"
    rules = [Rule(f"(POST|GET) {MT}/transactions/ext-pay-b(/confirm)?", rewritten(odd_class),
                  count=1000)]
    state = tmp_path / "s.sqlite"
    with Rewriter(sandbox.url, rules) as proxy:
        job = write_job(tmp_path, proxy.url, concurrency=1)
        ran = cli("run", str(job), "--yes", "--state", str(state))
        status = cli("status", str(job), "--state", str(state))
    assert ran.exit_code == 1, ran.output
    assert status.exit_code == 1
    assert outcomes(state) == {"pay-a": "settled", "pay-b": "unknown", "pay-c": "settled"}
    record = items(state)["pay-b"]
    assert (record["step"], record["error_code"], record["error_message"]) == (
        "confirmed", "status", "transaction pay-b has status '42000' of class '42', which no "
                               "document names: check it at the provider")
    later = cli("run", str(write_job(tmp_path, sandbox, concurrency=1)), "--yes",
                "--state", str(state))
    assert later.exit_code == 0, later.output
    assert outcomes(state)["pay-b"] == "settled"
    assert confirmed(sandbox) == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
