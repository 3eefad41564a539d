"""The job file's ``summary:`` section: its defaults, and every bad value's exact message,
including the checks made before a run (templates, the CA file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from job_files import REMITTANCE, write

from runner.errors import JobErrors
from runner.job import load_job
from runner.summary import check_summary

EMAIL = """\
summary:
  email:
    to: [finance@example.com]
    from: runner@example.com
    smtp: {smtp}
"""


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def problems(section: str, environ: dict[str, str] | None = None) -> list[str]:
    write(Path("."), REMITTANCE + section)
    with pytest.raises(JobErrors) as caught:
        check_summary(load_job("job.yaml", environ or {}))
    return [str(error) for error in caught.value]


def test_defaults_and_the_environment() -> None:
    smtp = '{host: "${SMTP_HOST}", username: "${SMTP_USER:-}", password: "${SMTP_PASSWORD:-}"}'
    write(Path("."), REMITTANCE + EMAIL.format(smtp=smtp))
    job = load_job("job.yaml", {"SMTP_HOST": "mail.example.com", "SMTP_PASSWORD": "pw-123"})
    assert job.summary is not None and job.summary.email is not None
    email = job.summary.email
    assert (email.send, email.cc, email.subject) == ("always", [], None)
    assert (email.smtp.port, email.smtp.tls, email.smtp.username) == (587, "starttls", "")
    assert email.smtp.password is not None and email.smtp.password.get_secret_value() == "pw-123"
    assert "pw-123" not in repr(job)


@pytest.mark.parametrize(("smtp", "message"), [
    ("{host: mail.example.com, implicit_tls: true, starttls: true}",
     "job.yaml:24: summary.email.smtp.starttls: implicit_tls already encrypts the connection; "
     "set only one of them"),
    ("{host: mail.example.com, starttls: false}",
     "job.yaml:24: summary.email.smtp.starttls: plain SMTP to mail.example.com would send the "
     "summary in the clear; use starttls or implicit_tls (plain SMTP is for a mail server on "
     "this machine only)"),
    ("{host: mail.example.com, ca_file: missing.pem}",
     "job.yaml:24: summary.email.smtp.ca_file: no such file"),
    ("{host: mail.example.com, tls: on}",
     "job.yaml:24: summary.email.smtp.tls: unknown key; expected one of: host, port, starttls, "
     "implicit_tls, ca_file, username, password, timeout"),
])
def test_smtp_problems(smtp: str, message: str) -> None:
    assert problems(EMAIL.format(smtp=smtp)) == [message]


def test_plain_smtp_to_this_machine_is_allowed() -> None:
    write(Path("."), REMITTANCE + EMAIL.format(smtp="{host: localhost, port: 25, "
                                                    "starttls: false}"))
    job = load_job("job.yaml", {})
    assert job.summary is not None and job.summary.email is not None
    assert job.summary.email.smtp.tls == "none"


def test_send_and_template_values() -> None:
    section = EMAIL.format(smtp="{host: localhost}").replace(
        "summary:\n", "summary:\n  template: summary.yaml\n") + "    send: sometimes\n"
    assert problems(section) == [
        "job.yaml:21: summary.template: 'summary.yaml': name a .html.j2 or .txt.j2 template",
        "job.yaml:26: summary.email.send: 'sometimes' is not one of always, problems, never",
    ]


def test_a_subject_template_is_checked_too() -> None:
    section = EMAIL.format(smtp="{host: localhost}") + '    subject: "{{ summary.nope }}"\n'
    assert problems(section) == [
        "job.yaml:25: summary.email.subject: the summary template failed: UndefinedError: "
        "'runner.summary.model.Summary object' has no attribute 'nope'"]
