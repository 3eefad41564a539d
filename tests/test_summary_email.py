"""The summary email, end to end: `runner run` against a loopback sandbox, then through a
real SMTP server (aiosmtpd on loopback), and what arrives parsed with the email package.

Plain SMTP carries the content tests; STARTTLS and implicit TLS use a certificate authority
made for the test, trusted through the job's ``smtp.ca_file`` or $SSL_CERT_FILE; the login
comes from the environment. Unreachable servers, refused logins and untrusted certificates
cost the email only: reports are written, item state is kept, and the exit code says so.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterator
from email.message import EmailMessage
from pathlib import Path

import pytest
from conftest import Admin
from mail_server import PASSWORD, USER, Authority, MailServer, free_port, start
from summary_support import (
    FAILING,
    HOSTILE,
    KEY,
    NAME,
    SECRET,
    SETTLED,
    cli,
    reports,
    run,
    start_sandbox,
    write_job,
)

from runner.errors import EmailNotSent
from runner.job import load_job
from runner.sandbox import RunningSandbox
from runner.state import open_state
from runner.summary.mail import send

# aiosmtpd sets its own deprecated Session.login_data after every AUTH (in its thread).
pytestmark = pytest.mark.filterwarnings(
    "ignore:Session.login_data is deprecated:DeprecationWarning")


def email_section(port: int, send: str = "always", smtp: str = ", starttls: false") -> str:
    return f"""\
summary:
  email:
    to: [finance@example.com, payroll@example.com]
    cc: [audit@example.com]
    from: runner@example.com
    send: {send}
    smtp: {{host: 127.0.0.1, port: {port}{smtp}}}
"""


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return start_sandbox(sandbox_factory)


@pytest.fixture
def servers() -> Iterator[list[MailServer]]:
    started: list[MailServer] = []
    yield started
    for server in started:
        server.stop()


@pytest.fixture
def mail(servers: list[MailServer]) -> MailServer:
    server = start()
    servers.append(server)
    return server


@pytest.fixture
def authority(tmp_path: Path) -> Authority:
    return Authority.make(tmp_path)


def parts(message: EmailMessage) -> tuple[str, str, list[dict[str, str]], str]:
    """(text part, HTML part, attached CSV rows, attachment name)."""
    text = message.get_body(("plain",))
    html = message.get_body(("html",))
    assert text is not None and html is not None
    attachments = list(message.iter_attachments())
    assert len(attachments) == 1
    csv_text = attachments[0].get_content()
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    return (_lf(text.get_content()), _lf(html.get_content()), rows,
            attachments[0].get_filename() or "")


def _lf(content: str) -> str:
    return content.replace("\r\n", "\n")  # as it came over the wire: CRLF


def test_the_summary_arrives_by_email(sandbox: RunningSandbox, mail: MailServer,
                                      tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sandbox, summary=email_section(mail.port))
    result = run(job, state)
    assert result.exit_code == 1  # two items failed: that code, not the email's
    [arrived] = mail.arrived
    assert arrived.sender == "runner@example.com"
    assert arrived.recipients == ["finance@example.com", "payroll@example.com",
                                  "audit@example.com"]
    message = arrived.message
    assert message["Subject"] == f"{NAME}: 2 paid (EUR 350.50), 2 failed (EUR 150.00)"
    assert (message["From"], message["To"], message["Cc"]) == (
        "runner@example.com", "finance@example.com, payroll@example.com", "audit@example.com")
    assert message.get_content_type() == "multipart/mixed"
    alternative = message.get_payload()[0]
    assert [p.get_content_type() for p in alternative.iter_parts()] == [
        "text/plain", "text/html"]
    text, html, rows, filename = parts(message)
    files = reports(state)
    assert filename == files[".csv"].name

    assert text.splitlines()[0] == f"{NAME}: 2 paid (EUR 350.50), 2 failed (EUR 150.00)"
    assert "  EUR  sent 350.50  fees 3.00  cost 353.50" in text
    assert "  KES  received 49,158.00" in text
    assert (f"  pay-E3 (row 4), {HOSTILE} Smith & Sons (msisdn *********9302), EUR 80.00: "
            "30200 REJECTED-INVALID-BENEFICIARY") in text  # plain text is not markup
    assert ("  pay-E4 (row 5), Old Wallet (msisdn *********0005), EUR 70.00 (planned): 1003001 "
            "Payer is inactive in your account") in text
    assert f"Full list of items: {files['.csv'].resolve()}" in text
    assert text == files[".txt"].read_text(encoding="utf-8")

    assert "<td>1003001</td><td>Payer is inactive in your account</td>" in html
    assert "<td>30200</td><td>REJECTED-INVALID-BENEFICIARY</td>" in html
    assert '<td align="right">350.50</td><td align="right">3.00</td>' in html
    assert html == files[".html"].read_text(encoding="utf-8")

    assert [(r["external_id"], r["state"], r["source_amount"], r["code"]) for r in rows] == [
        ("pay-E1", "settled", "100.00", ""), ("pay-E2", "settled", "250.50", ""),
        ("pay-E3", "failed", "80.00", "30200"), ("pay-E4", "failed", "", "1003001")]
    assert rows[2]["beneficiary"] == f"{HOSTILE} Smith & Sons"  # CSV is data, not markup
    assert rows[1]["beneficiary"] == "'=1+2 Doe"  # not a formula in a spreadsheet
    assert files[".csv"].read_text(encoding="utf-8").splitlines() == \
        message.get_payload()[1].get_content().splitlines()


def test_hostile_names_are_escaped_in_the_html_part(sandbox: RunningSandbox, mail: MailServer,
                                                    tmp_path: Path, state: Path) -> None:
    run(write_job(tmp_path, sandbox, summary=email_section(mail.port)), state)
    _, html, _, _ = parts(mail.arrived[0].message)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; Smith &amp; Sons" in html
    assert "<script>" not in html and "Smith & Sons" not in html
    assert "<script>" not in reports(state)[".html"].read_text(encoding="utf-8")


def test_no_secret_in_any_report_or_email(sandbox: RunningSandbox, tmp_path: Path,
                                          state: Path, authority: Authority,
                                          servers: list[MailServer],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    server = start("starttls", authority)
    servers.append(server)
    monkeypatch.setenv("SMTP_USER", USER)
    monkeypatch.setenv("SMTP_PASSWORD", PASSWORD)
    login = ', username: "${SMTP_USER}", password: "${SMTP_PASSWORD}", ca_file: ca.pem'
    job = write_job(tmp_path, sandbox, summary=email_section(server.port, smtp=login))
    assert run(job, state).exit_code == 1
    everything = [server.arrived[0].raw.decode()]
    everything += [f.read_text(encoding="utf-8") for f in reports(state).values()]
    for fmt in ("text", "html", "json", "csv"):
        everything.append(cli("report", str(job), "--state", str(state), "--format", fmt).stdout)
    for content in everything:
        for secret in (KEY, SECRET, PASSWORD):
            assert secret not in content


@pytest.mark.parametrize(("send", "rows", "sent"), [
    ("always", SETTLED, True), ("problems", SETTLED, False),
    ("problems", SETTLED + FAILING, True), ("never", SETTLED + FAILING, False)])
def test_when_to_send(sandbox: RunningSandbox, mail: MailServer, tmp_path: Path, state: Path,
                      send: str, rows: str, sent: bool) -> None:
    job = write_job(tmp_path, sandbox, rows, summary=email_section(mail.port, send=send))
    result = run(job, state)
    assert result.exit_code == (0 if rows == SETTLED else 1)
    assert len(mail.arrived) == (1 if sent else 0)
    assert len(reports(state)) == 3  # written whether emailed or not


def test_an_unreachable_server_costs_the_email_only(sandbox: RunningSandbox, tmp_path: Path,
                                                    state: Path) -> None:
    port = free_port()  # nobody listens there
    job = write_job(tmp_path, sandbox, SETTLED, summary=email_section(port))
    result = run(job, state)
    assert result.exit_code == 3
    files = reports(state)
    assert [line.split(" ", 2)[2] for line in result.stderr.splitlines()
            if " ERROR " in line] == [
        f"summary email not sent: cannot send through the mail server 127.0.0.1:{port}: "
        f"Connection refused; the summary is in {files['.txt']}"]
    assert files[".txt"].read_text(encoding="utf-8").startswith(
        f"{NAME}: 2 paid (EUR 350.50)\n")
    # Item state is whole: status reads it, and a second run pays nobody again.
    assert cli("status", str(job), "--state", str(state)).stdout.splitlines()[0] == \
        f"{NAME}: 2 items: 2 settled"
    assert run(job, state).exit_code == 3
    # Each run is recorded with the exit code it exited with, not the one before its email.
    with open_state(state) as store:
        assert [r.exit_code for r in store.runs(NAME)] == [3, 3]


def test_a_worse_exit_code_wins_over_the_email(sandbox: RunningSandbox, tmp_path: Path,
                                               state: Path) -> None:
    job = write_job(tmp_path, sandbox, summary=email_section(free_port()))
    assert run(job, state).exit_code == 1
    assert len(reports(state)) == 3


def test_login_over_starttls(sandbox: RunningSandbox, tmp_path: Path, state: Path,
                             authority: Authority, servers: list[MailServer],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    server = start("starttls", authority)
    servers.append(server)
    monkeypatch.setenv("SMTP_USER", USER)
    monkeypatch.setenv("SMTP_PASSWORD", PASSWORD)
    login = ', username: "${SMTP_USER}", password: "${SMTP_PASSWORD}", ca_file: ca.pem'
    job = write_job(tmp_path, sandbox, SETTLED,  # STARTTLS is the default
                    summary=email_section(server.port, smtp=login))
    assert run(job, state).exit_code == 0
    [arrived] = server.arrived
    assert arrived.login == USER
    assert arrived.message["Subject"] == f"{NAME}: 2 paid (EUR 350.50)"


def test_a_refused_login(sandbox: RunningSandbox, tmp_path: Path, state: Path,
                         authority: Authority, servers: list[MailServer],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    server = start("starttls", authority)
    servers.append(server)
    monkeypatch.setenv("SMTP_PASSWORD", "not-the-password")
    login = f', username: {USER}, password: "${{SMTP_PASSWORD}}", ca_file: ca.pem'
    job = write_job(tmp_path, sandbox, SETTLED,
                    summary=email_section(server.port, smtp=", starttls: true" + login))
    result = run(job, state)
    assert result.exit_code == 3
    assert (f"summary email not sent: the mail server 127.0.0.1:{server.port} refused the "
            f"login of {USER}: 535 5.7.8 Authentication credentials invalid") in result.stderr
    assert "not-the-password" not in result.output
    assert server.arrived == []
    assert len(reports(state)) == 3


def test_implicit_tls(sandbox: RunningSandbox, tmp_path: Path, state: Path,
                      authority: Authority, servers: list[MailServer]) -> None:
    server = start("implicit", authority)
    servers.append(server)
    login = f", username: {USER}, password: {PASSWORD}, ca_file: ca.pem"
    job = write_job(tmp_path, sandbox, SETTLED,
                    summary=email_section(server.port, smtp=", implicit_tls: true" + login))
    assert run(job, state).exit_code == 0
    assert [a.login for a in server.arrived] == [USER]


def test_a_ca_file_made_a_fifo_after_the_run_costs_the_email_only(
        sandbox: RunningSandbox, tmp_path: Path, state: Path, authority: Authority,
        servers: list[MailServer]) -> None:
    server = start("implicit", authority)
    servers.append(server)
    job = write_job(tmp_path, sandbox, SETTLED, summary=email_section(
        server.port, smtp=f", implicit_tls: true, username: {USER}, password: {PASSWORD}, "
                          "ca_file: ca.pem"))
    assert run(job, state).exit_code == 0
    # The CA file becomes a FIFO that no one writes: read as it was, sending would wait for
    # ever. `runner report --email` refuses the job at once (its files are checked first),
    # and a send that finds it so (changed since its run started) costs the email only.
    authority.ca_file.unlink()
    os.mkfifo(authority.ca_file)
    result = cli("report", str(job), "--state", str(state), "--email",
                 "--output", str(tmp_path / "again.txt"))
    assert (result.exit_code, result.stderr.splitlines()[0]) == (
        2, f"{job}:27: summary.email.smtp.ca_file: not a regular file (a FIFO)")
    summary = load_job(job).summary
    assert summary is not None and summary.email is not None
    with pytest.raises(EmailNotSent) as caught:
        send(EmailMessage(), summary.email, job.parent)
    assert str(caught.value) == ("summary.email.smtp.ca_file: ca.pem: not a regular file (a "
                                 "FIFO)")
    assert [a.login for a in server.arrived] == [USER]  # the run's only


def test_the_certificate_is_always_verified(sandbox: RunningSandbox, tmp_path: Path,
                                            state: Path, authority: Authority,
                                            servers: list[MailServer],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    server = start("starttls", authority)
    servers.append(server)
    login = f", username: {USER}, password: {PASSWORD}"
    job = write_job(tmp_path, sandbox, SETTLED,
                    summary=email_section(server.port, smtp=", starttls: true" + login))
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    result = run(job, state)
    assert result.exit_code == 3
    assert "certificate verify failed" in result.stderr
    assert server.arrived == []
    # The authority trusted through the environment, as the default context reads it.
    monkeypatch.setenv("SSL_CERT_FILE", str(authority.ca_file))
    assert run(job, state).exit_code == 0
    assert len(server.arrived) == 1


def test_report_email_sends_it_again(sandbox: RunningSandbox, tmp_path: Path,
                                     state: Path) -> None:
    port = free_port()
    job = write_job(tmp_path, sandbox, SETTLED, summary=email_section(port))
    assert run(job, state).exit_code == 3
    server = start()
    try:
        job.write_text(job.read_text().replace(f"port: {port}", f"port: {server.port}"))
        result = cli("report", str(job), "--state", str(state), "--email",
                     "--output", str(tmp_path / "again.txt"))
        assert result.exit_code == 0, result.output
        assert result.stderr == ("emailed to finance@example.com, payroll@example.com, "
                                 "audit@example.com\n")
        [arrived] = server.arrived
        assert arrived.message["Subject"] == f"{NAME}: 2 paid (EUR 350.50)"
    finally:
        server.stop()


def test_one_email_per_change(sandbox: RunningSandbox, mail: MailServer, tmp_path: Path,
                              state: Path) -> None:
    job = write_job(tmp_path, sandbox, summary=email_section(mail.port))  # send: always
    assert run(job, state).exit_code == 1
    again = run(job, state)  # the batch is as the first run left it: nothing changed
    assert again.exit_code == 1
    assert len(mail.arrived) == 1
    assert len(list((state.parent / "reports").iterdir())) == 3  # not written again either
    assert "nothing changed since the previous run's summary" in again.stderr
    text = cli("report", str(job), "--state", str(state)).stdout
    assert "Money moved in run 1: started " in text
    assert "\nSince then: 1 run(s), none changing the batch; the latest, run 2: " in text
    # On demand, whatever changed.
    assert cli("report", str(job), "--state", str(state), "--email").exit_code == 0
    assert len(mail.arrived) == 2
    # A new row paid is a change: mailed, and the run that moved money is the new one.
    (tmp_path / "rows.csv").write_text(
        (tmp_path / "rows.csv").read_text() + "E5,1,10.00,+254700000007,New,Hire\n")
    assert run(job, state).exit_code == 1
    [*_, third] = mail.arrived
    assert third.message["Subject"] == (f"{NAME}: 3 paid (EUR 360.50), 2 failed (EUR 150.00)")
    text = parts(third.message)[0]
    assert "Money moved in run 3: started " in text and "Since then" not in text


def test_the_run_that_pays_after_a_funds_stop_is_mailed(
        sandbox: RunningSandbox, mail: MailServer, tmp_path: Path, state: Path) -> None:
    """The balance is short: nothing paid, funds short (mailed). Topped up, the plan is
    applied and pays everyone: that run moved money, and its summary is mailed too."""
    admin = Admin(sandbox.url)
    admin.balance("EUR", "100.00", "0")
    job = write_job(tmp_path, sandbox, SETTLED, summary=email_section(mail.port))
    assert run(job, state).exit_code == 4
    assert [str(m.message["Subject"]).strip() for m in mail.arrived] == [
        f"{NAME}: nothing paid, funds short: EUR 350.50 needed, 100.00 available"]
    admin.balance("EUR", "10000.00", "0")
    plan = tmp_path / "plan.json"
    assert cli("plan", str(job), "--state", str(state), "-o", str(plan)).exit_code == 0
    applied = cli("apply", str(plan), "--yes", "--state", str(state))
    assert applied.exit_code == 0, applied.output
    assert [str(m.message["Subject"]).strip() for m in mail.arrived][1:] == [
        f"{NAME}: 2 paid (EUR 350.50)"]


def test_a_plan_applied_again_after_a_funds_stop_mails_the_run_that_paid(
        sandbox: RunningSandbox, mail: MailServer, tmp_path: Path, state: Path) -> None:
    """The plan's apply stops short of funds (mailed); topped up, the same plan applied
    again resumes its run and pays everyone: mailed again, since it says something else."""
    admin = Admin(sandbox.url)
    job = write_job(tmp_path, sandbox, SETTLED, summary=email_section(mail.port))
    plan = tmp_path / "plan.json"
    assert cli("plan", str(job), "--state", str(state), "-o", str(plan)).exit_code == 0
    admin.balance("EUR", "100.00", "0")
    assert cli("apply", str(plan), "--yes", "--state", str(state)).exit_code == 4
    admin.balance("EUR", "10000.00", "0")
    assert cli("apply", str(plan), "--yes", "--state", str(state)).exit_code == 0
    assert [str(m.message["Subject"]).strip() for m in mail.arrived] == [
        f"{NAME}: nothing paid, funds short: EUR 350.50 needed, 100.00 available",
        f"{NAME}: 2 paid (EUR 350.50)"]
