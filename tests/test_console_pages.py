"""The console's pages as served, read over loopback by a person signed in with a passkey
(made in the test: ``passkey_support``): what rows hold is escaped, no secret is on any
page, the items are searched, sorted and paged, the step-up rules that fire are shown, the
plan file comes with its signatures, and approvals given by the console's calls are kept
and counted as `runner apply` counts them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import KEY, SECRET
from conftest import test_config as sandbox_config
from console_support import console, signed_in
from engine_support import cli
from passkey_support import SoftPasskey
from plan_support import allowed_signers, make_key
from test_payee_checks import write

from runner.sandbox import start_in_thread

HOSTILE = '<script>alert("x")</script>'
ROWS = "".join(f"r{i:03},1,KES,{10 + i}.00,+2547000{i:05},Person{i:03},Payee\n"
               for i in range(1, 151)) + \
    f"h,1,KES,7.00,+254799000001,{HOSTILE},O'Neil & Sons\n"


@dataclass
class Served:
    url: str
    plan: dict[str, object]
    session: object
    headers: dict[str, str]
    alice: SoftPasskey
    folder: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("pages")
    planner = make_key(folder, "planner")
    allowed_signers(folder / "approvers", planner)
    alice = SoftPasskey("alice@example.com")
    (folder / "approvers.passkeys").write_text(alice.line() + "\n")
    sandbox = start_in_thread(sandbox_config(submit_delay=0, complete_delay=0))
    try:
        job = write(folder, sandbox, ROWS, "pay-2026-11", "off")
        job.write_text(job.read_text().replace(
            "run:\n", "run:\n  four_eyes: true\n  approvers: approvers\n"))
        plan = folder / "pay.plan.json"
        made = cli("plan", str(job), "--state", str(folder / "s.sqlite"), "-o", str(plan),
                   "--sign", str(planner))
        assert made.exit_code == 0, made.output
        with console(folder / "s.sqlite") as c:
            session, headers = signed_in(c.url, alice)
            yield Served(c.url, json.loads(plan.read_text()), session, headers, alice,
                         folder)
    finally:
        sandbox.stop()


def get(served: Served, path: str) -> str:
    answer = served.session.get(served.url + path, timeout=60)  # type: ignore[attr-defined]
    assert answer.status_code == 200, answer.text
    return str(answer.text)


def test_what_rows_hold_is_escaped_and_no_secret_is_shown(served: Served) -> None:
    page = get(served, f"/plans/{served.plan['id']}?q=O%27Neil")
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; O&#39;Neil &amp; Sons" in page
    for path in ("/", f"/plans/{served.plan['id']}", "/activity",
                 f"/plans/{served.plan['id']}/file"):
        shown = get(served, path)
        assert KEY not in shown and SECRET not in shown, path


def test_items_are_searched_sorted_and_paged(served: Served) -> None:
    first = get(served, f"/plans/{served.plan['id']}")
    assert "Items <span class=\"count\">151</span>" in first and "Page 1 of 2" in first
    assert first.count("<tr class=\"pays\">") == 100
    second = get(served, f"/plans/{served.plan['id']}?page=2")
    assert second.count("<tr class=\"pays\">") == 51 and "Person150" in second
    richest = get(served, f"/plans/{served.plan['id']}?sort=amount&order=desc")
    assert richest.index("EUR 160.00") < richest.index("EUR 159.00")
    found = get(served, f"/plans/{served.plan['id']}?q=person12")
    assert "Items <span class=\"count\">10</span>" in found  # Person120 to Person129
    assert "Person129" in found and "Person130" not in found


def test_an_approval_given_by_the_calls_is_kept_and_counted(served: Served) -> None:
    s, h = served.session, served.headers
    options = s.post(served.url + "/api/decide-options",  # type: ignore[attr-defined]
                     json={"plan": served.plan["id"], "decision": "approve"}, headers=h,
                     timeout=60).json()
    from runner import passkeys

    credential = served.alice.credential(passkeys.from_b64url(options["challenge"]))
    done = s.post(served.url + "/api/decide",  # type: ignore[attr-defined]
                  json={"plan": served.plan["id"], "credential": credential}, headers=h,
                  timeout=60)
    assert done.json() == {"done": "approve"}
    # The same assertion again: nothing waits for it any more.
    again = s.post(served.url + "/api/decide",  # type: ignore[attr-defined]
                   json={"plan": served.plan["id"], "credential": credential}, headers=h,
                   timeout=60)
    assert (again.status_code, again.json()) == (400, {
        "error": "nothing waits for a passkey here: start again"})
    kept = json.loads(get(served, f"/plans/{served.plan['id']}/file"))
    assert [(e["role"], "passkey" in e) for e in kept["signatures"]] == [
        ("plan", False), ("approve", True)]
    page = get(served, f"/plans/{served.plan['id']}")
    assert "status-approved" in page and "1 of 1 approval(s)" in page
    activity = get(served, "/activity")
    assert "approved" in activity and "alice@example.com" in activity
    # A denial asks for a reason.
    refused = s.post(served.url + "/api/decide-options",  # type: ignore[attr-defined]
                     json={"plan": served.plan["id"], "decision": "deny", "reason": " "},
                     headers=h, timeout=60)
    assert refused.json() == {"error": "a denial says why: give a reason"}


def test_a_person_from_another_site_cannot_sign_in_with_an_assertion_made_there(
        served: Served) -> None:
    import requests

    session = requests.Session()
    page = session.get(served.url + "/sign-in", timeout=60).text
    token = page.split('name="csrf" content="')[1].split('"')[0]
    headers = {"X-CSRF-Token": token}
    options = session.post(served.url + "/api/sign-in-options",
                           json={"name": "alice@example.com"}, headers=headers,
                           timeout=60).json()
    from runner import passkeys

    credential = served.alice.credential(passkeys.from_b64url(options["challenge"]),
                                   "https://evil.example")
    answer = session.post(served.url + "/api/sign-in", json={"credential": credential},
                          headers=headers, timeout=60)
    assert answer.json() == {"error": "made at https://evil.example, which is not a page of "
                                      "localhost"}
    home = session.get(served.url + "/", allow_redirects=False, timeout=60)
    assert home.status_code == 303


def decide(base: str, passkey: SoftPasskey, plan_id: str, decision: str) -> object:
    """Sign in with ``passkey`` and give ``decision`` on the plan through the console's
    calls, as its script does; the answer."""
    from runner import passkeys

    session, headers = signed_in(base, passkey)
    options = session.post(base + "/api/decide-options", json={
        "plan": plan_id, "decision": decision}, headers=headers, timeout=60)
    if options.status_code != 200:
        return options.json()
    credential = passkey.credential(passkeys.from_b64url(options.json()["challenge"]))
    return session.post(base + "/api/decide", json={"plan": plan_id, "credential": credential},
                        headers=headers, timeout=60).json()


def test_the_executors_unsigned_plan_is_signed_by_its_planner_then_approved_and_paid(
        tmp_path: Path) -> None:
    planner, alice = SoftPasskey("planner@example.com"), SoftPasskey("alice@example.com")
    (tmp_path / "approvers").write_text("# passkeys only\n")
    (tmp_path / "approvers.passkeys").write_text(planner.line() + "\n" + alice.line() + "\n")
    sandbox = start_in_thread(sandbox_config(submit_delay=0, complete_delay=0))
    try:
        job = write(tmp_path, sandbox, "a,1,KES,10.00,+254700000001,Amina,Otieno\n",
                    "pay-2026-11", "off")
        job.write_text(job.read_text().replace(
            "run:\n", "run:\n  four_eyes: true\n  approvers: approvers\n"))
        plan, state = tmp_path / "pay.plan.json", tmp_path / "s.sqlite"
        assert cli("plan", str(job), "--state", str(state), "-o", str(plan)).exit_code == 0
        plan_id = json.loads(plan.read_text())["id"]
        with console(state) as c:
            # Not before its planner signed it.
            assert decide(c.url, alice, plan_id, "approve") == {"error": (
                "it is not signed by its planner (`runner plan JOB -o PLAN --sign KEY` signs "
                "a plan as it is made; `runner approve PLAN --sign KEY --as-planner` one the "
                "executor made)")}
            assert decide(c.url, planner, plan_id, "plan") == {"done": "plan"}
            assert decide(c.url, planner, plan_id, "approve") == {
                "error": "not kept: this key signed the plan already (role plan)"}
            assert decide(c.url, alice, plan_id, "approve") == {"done": "approve"}
        paid = cli("apply", str(plan), "--yes")
        assert paid.exit_code == 0, paid.output
    finally:
        sandbox.stop()
