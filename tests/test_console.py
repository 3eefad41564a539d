"""The console in a browser, as a payroll team lives with it: `runner console` over the state,
driven in Debian's Chromium with Playwright, each approver with a passkey in a virtual
authenticator. Two approvers register and sign in, review November's plan against October's
(new people, people gone, a changed account, pay that moved), approve it one after the other;
a bonus plan's held payee is accepted, the plan approved once, refused a second approval by
the same passkey, and denied with a reason; then `runner apply` pays the approved plan and
refuses the denied one, a copy approved by one passkey twice, and a copy edited after its
approval, with nothing sent. The planners and approvers are told by mail."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Admin
from conftest import test_config as sandbox_config
from console_support import browser, console, person
from engine_support import cli, err_lines, posts
from mail_server import MailServer
from mail_server import start as start_mail
from plan_support import allowed_signers, make_key
from test_payee_checks import MATCH, NO_MATCH, write

from runner.sandbox import RunningSandbox, start_in_thread
from runner.state import open_state

OCTOBER = ("a,1,KES,10.00,+254700000001,Amina,Otieno\n"
           "b,1,KES,20.00,+254700000002,Brian,Kamau\n"
           "c,1,KES,30.00,+254700000003,Coumba,Ndiaye\n")
NOVEMBER = ("a,1,KES,10.00,+254700000011,Amina,Otieno\n"  # another account
            "b,1,KES,25.00,+254700000002,Brian,Kamau\n"  # 25% more
            "d,1,KES,15.00,+254700000004,Daniel,Mwangi\n")  # new; Coumba is gone
SHOTS = os.environ.get("RUNNER_SCREENSHOTS")  # a folder to keep the pages' pictures in


@dataclass
class Month:
    folder: Path
    state: Path
    sandbox: RunningSandbox
    mail: MailServer
    planner: Path

    def job(self, rows: str, name: str, policy: str = "off", approvals: int = 2) -> Path:
        job = write(self.folder, self.sandbox, rows, name, policy)
        text = job.read_text().replace("run:\n", "run:\n  four_eyes: true\n  approvers: "
                                                 f"approvers\n  approvals: {approvals}\n")
        job.write_text(text + f"""summary:
  email:
    to: [payroll@example.com]
    from: runner@example.com
    smtp: {{host: 127.0.0.1, port: {self.mail.port}, starttls: false}}
""")
        return job

    def plan(self, job: Path) -> Path:
        plan = job.with_suffix(".plan.json")
        made = cli("plan", str(job), "--state", str(self.state), "-o", str(plan), "--sign",
                   str(self.planner))
        assert made.exit_code == 0, made.output
        return plan

    def apply(self, plan: Path) -> tuple[int, list[str], int]:
        admin = Admin(self.sandbox.url)
        before = posts(admin)["POST"]
        result = cli("apply", str(plan), "--yes")
        return result.exit_code, err_lines(result), posts(admin)["POST"] - before

    def mailed(self, subject: str) -> list[tuple[list[str], str]]:
        return [(m.recipients, m.message.get_content()) for m in self.mail.arrived
                if subject in str(m.message["Subject"])]


@pytest.fixture
def month(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Month]:
    planner = make_key(tmp_path, "planner")
    allowed_signers(tmp_path / "approvers", planner)
    sandbox = start_in_thread(sandbox_config(submit_delay=0, complete_delay=0))
    mail = start_mail()
    try:
        yield Month(tmp_path, tmp_path / "state.sqlite", sandbox, mail, planner)
    finally:
        mail.stop()
        sandbox.stop()


def october(month: Month) -> None:
    """October's batch, planned and applied without four eyes: the batch before."""
    job = write(month.folder, month.sandbox, OCTOBER, "pay-2026-10", "off")
    plan = job.with_suffix(".plan.json")
    assert cli("plan", str(job), "--state", str(month.state), "-o", str(plan)).exit_code == 0
    code, said, sent = month.apply(plan)
    assert (code, sent) == (0, 9), said


def shot(page: Any, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / name), full_page=True)


def test_approvers_review_approve_deny_and_accept_in_the_browser(month: Month) -> None:
    october(month)
    with console(month.state, "--mail-from", "runner@example.com", "--smtp-host",
                 "127.0.0.1", "--smtp-port", str(month.mail.port), "--smtp-plain") as c, \
            browser() as chromium:
        alice = person(chromium, "alice@example.com", c.url)
        bob = person(chromium, "bob@example.com", c.url)
        mallory = person(chromium, "mallory@example.com", c.url)
        lines = [alice.register(), bob.register()]
        assert all(line.startswith(f"{p.name} rp-id=\"localhost\",credential=\"") and
                   " webauthn " in line for p, line in zip((alice, bob), lines, strict=True))
        mallory.register()  # her line is never added: she cannot sign in
        (month.folder / "approvers.passkeys").write_text("\n".join(lines) + "\n")
        mallory.go("/sign-in").fill("#sign-in input[name=name]", mallory.name)
        mallory.page.click("#sign-in button")
        assert mallory.message() == ("no passkey of mallory@example.com is registered (in a "
                                     "passkeys file beside the approvers file)")

        os.environ["RUNNER_CONSOLE_URL"] = c.url
        try:
            november = month.plan(month.job(NOVEMBER, "pay-2026-11"))
            bonus = month.plan(month.job(MATCH + NO_MATCH, "bonus-2026-11", "hold", 1))
        finally:
            del os.environ["RUNNER_CONSOLE_URL"]
        content = json.loads(november.read_text())
        waits = month.mailed("pay-2026-11: a plan waits for your approval")
        assert [to for to, _ in waits] == [["alice@example.com", "bob@example.com"]]
        assert f"Review it: {c.url}/plans/{content['id']}" in waits[0][1]
        assert "3 item(s), EUR 50.00" in waits[0][1]

        # Alice reviews November against October, and approves it.
        alice.sign_in()
        page = alice.go("/")
        shot(page, "console-plans.png")
        listed = page.inner_text("main")
        assert listed.index("Waiting for approval 2") < listed.index("pay-2026-11") < \
            listed.index("Applied 1") < listed.index("pay-2026-10"), listed
        page.click(f"a[href='/plans/{content['id']}']")
        page.wait_for_selector("section.changes")
        changes = page.inner_text("section.changes")
        for expected in ("Compared with pay-2026-10", "New people 1", "Daniel Mwangi",
                         "Gone 1", "Coumba Ndiaye", "Changed accounts 1",
                         "Amina Otieno: msisdn *********0001 → msisdn *********0011",
                         "Pay moved 1", "Brian Kamau: EUR 20.00 → EUR 25.00 (25.0%)"):
            assert expected in changes, changes
        assert "To pay in EUR\nEUR 50.00\n3 item(s)" in page.inner_text("section.cards")
        shot(page, "console-plan.png")
        page.click("button.approve")
        page.wait_for_selector("td:has-text('alice@example.com')")
        assert "1 of 2 approval(s)" in page.inner_text("section.cards")
        approved = month.mailed("pay-2026-11: your plan was approved by alice@example.com")
        assert [to for to, _ in approved] == [["planner@example.com"]]

        # The same passkey does not approve twice.
        page.click("button.approve")
        assert alice.message() == "not kept: this key signed the plan already (role approve)"

        # Bob: the search, a person's history, then the second approval.
        bob.sign_in()
        page = bob.go(f"/plans/{content['id']}?q=brian")
        assert page.inner_text("section.items h2") == "Items 1"
        page.click("section.changes a:has-text('Brian Kamau')")
        history = page.inner_text("main table")
        assert "pay-2026-10" in history and "EUR 20.00" in history and "settled" in history
        page = bob.go(f"/plans/{content['id']}")
        page.click("button.approve")
        page.wait_for_selector(".status-approved")
        shot(page, "console-approval.png")
        assert "2 of 2 approval(s)" in page.inner_text("section.cards")

        # The bonus: its held payee accepted, one approval, then denied with a reason.
        held = json.loads(bonus.read_text())
        page = alice.go(f"/plans/{held['id']}")
        shot(page, "console-held.png")
        assert "Peter Otieno" in page.inner_text("section.held")
        assert "no match: the provider holds Ines Valderrama" in page.inner_text("section.held")
        page.click("button.accept")
        assert alice.message() == "Accepted: Peter Otieno. The next plan pays them."
        page.click("button.approve")
        page.wait_for_selector("td:has-text('alice@example.com')")
        page = bob.go(f"/plans/{held['id']}")
        page.fill("form.deny input[name=reason]", "the bonus waits for the board's minutes")
        page.click("form.deny button")
        page.wait_for_selector(".status-denied")
        denied = month.mailed("bonus-2026-11: your plan was denied by bob@example.com")
        assert "Reason: the bonus waits for the board's minutes" in denied[0][1]
        file = bob.go(f"/plans/{held['id']}")  # the file with every signature, for apply
        downloaded = json.loads(file.request.get(f"{c.url}/plans/{held['id']}/file").text())

        page = alice.go("/activity")
        activity = page.inner_text("main table")
        for expected in ("alice@example.com", "approved", "accepted a held payee",
                         "bob@example.com", "denied", "the bonus waits for the board's"):
            assert expected in activity, activity

    # apply: the approved plan pays (its approvals are in the state, given in the console).
    code, said, sent = month.apply(november)
    assert (code, sent) == (0, 9), said
    assert month.mailed("pay-2026-11: your plan was applied")[0][0] == ["planner@example.com"]
    with open_state(month.state) as state:
        assert sorted((r.external_id, r.outcome) for r in state.items("pay-2026-11")) == [
            ("pay-2026-11-a", "settled"), ("pay-2026-11-b", "settled"),
            ("pay-2026-11-d", "settled")]

    # The denied plan is refused, with its reason.
    code, said, sent = month.apply(bonus)
    assert (code, sent) == (2, 0)
    assert said[-1].startswith("the plan is refused: denied by bob@example.com at ")
    assert said[-1].endswith(": the bonus waits for the board's minutes; nothing was sent")

    # A copy approved by one passkey twice (alice's approval repeated, bob's denial left
    # out) is refused; so is one edited after its approval.
    alices = [s for s in downloaded["signatures"] if s["role"] == "approve"]
    twice = month.folder / "twice.plan.json"
    twice.write_text(json.dumps({**downloaded, "signatures": [
        downloaded["signatures"][0], *alices, {**alices[0]}]}))
    _forget_console_signatures(month.state, held["id"])
    code, said, sent = month.apply(twice)
    assert (code, sent) == (2, 0)
    assert "is refused: this key signed the plan already (role approve)" in said[-1]
    edited = month.folder / "edited.plan.json"
    edited.write_text(json.dumps({**downloaded, "signatures": [
        downloaded["signatures"][0], *alices], "items": [
            {**i, "amount": "1200.00"} if i["row"] == 2 else i for i in downloaded["items"]]}))
    code, said, sent = month.apply(edited)
    assert (code, sent) == (2, 0)
    assert said[-1].startswith("the plan is refused: the plan file was edited since it was "
                               "made: items[0] (row 2, bonus-2026-11-a).amount ")

    # Peter is accepted: the next plan of the bonus pays him.
    again = month.plan(month.job(MATCH + NO_MATCH, "bonus-2026-11", "hold", 1))
    actions = {i["external_id"]: i["action"] for i in json.loads(again.read_text())["items"]}
    assert actions == {"bonus-2026-11-a": "new", "bonus-2026-11-c": "new"}


def _forget_console_signatures(state: Path, plan_id: str) -> None:
    """As if the plan were applied on a copy of the state without the console's approvals
    (only the file's signatures count then)."""
    import sqlite3

    with sqlite3.connect(state) as db:
        db.execute("DELETE FROM plan_signatures WHERE plan_id = ?", (plan_id,))


def test_the_console_refuses_to_listen_off_loopback_without_tls(tmp_path: Path) -> None:
    result = cli("console", "--state", str(tmp_path / "s.sqlite"), "--host", "0.0.0.0")
    assert result.exit_code == 2
    assert ("--host 0.0.0.0 is off this machine's loopback: the console is served there only "
            "over TLS (--cert and --key)") in result.stderr


def test_pages_need_a_signed_in_person_and_calls_a_token(tmp_path: Path) -> None:
    import requests

    with console(tmp_path / "s.sqlite") as c:
        home = requests.get(c.url + "/", allow_redirects=False, timeout=60)
        assert (home.status_code, home.headers["location"]) == (303, "/sign-in")
        assert "script-src 'self'" in home.headers["content-security-policy"]
        forged = requests.post(c.url + "/api/decide-options", json={"plan": "x"},
                               timeout=60)
        assert (forged.status_code, forged.json()) == (400, {
            "error": "the page is out of date (its token does not match): reload it"})
        elsewhere = requests.post(c.url + "/api/sign-in-options", json={},
                                  headers={"Origin": "https://evil.example"}, timeout=60)
        assert elsewhere.json() == {"error": "a call from https://evil.example is not the "
                                             "console's"}


def test_over_tls_the_console_is_served_with_its_certificate_and_secure_cookies(
        tmp_path: Path) -> None:
    import requests
    from mail_server import Authority

    authority = Authority.make(tmp_path)
    with console(tmp_path / "s.sqlite", "--cert", str(tmp_path / "server.pem"), "--key",
                 str(tmp_path / "server.key")) as c:
        assert c.url.startswith("https://localhost:")
        page = requests.get(c.url + "/sign-in", verify=str(authority.ca_file), timeout=60)
        assert page.status_code == 200
        cookie = page.headers["set-cookie"]
        assert "secure" in cookie.lower() and "httponly" in cookie.lower() and \
            "samesite=strict" in cookie.lower()
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(c.url + "/sign-in", timeout=60)  # not the system's trust
