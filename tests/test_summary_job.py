"""The job file's ``summary:`` section: its defaults, and every bad value's exact message,
including the checks made before a run (templates, the CA file)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from job_files import REMITTANCE, write
from mail_server import Authority

from runner.errors import JobErrors
from runner.job import load_job
from runner.summary import check_summary
from runner.summary.mail import CA_FILE_LIMIT
from runner.summary.render import TEMPLATE_LIMIT

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
        "'dict object' has no attribute 'nope'"]


ONE_ADDRESS = ("is not one email address: write one address as name@domain; several "
               "addresses are a YAML list (to: [a@example.com, b@example.com])")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("to", '["payroll,attacker@evil.example"]',
     f"summary.email.to.0: 'payroll,attacker@evil.example' {ONE_ADDRESS}"),
    ("to", '["payroll@example.com; attacker@evil.example"]',
     f"summary.email.to.0: 'payroll@example.com; attacker@evil.example' {ONE_ADDRESS}"),
    ("to", '["Payroll <payroll@example.com>"]',
     f"summary.email.to.0: 'Payroll <payroll@example.com>' {ONE_ADDRESS}"),
    ("to", '[finance@example.com, "payroll@example.com (boss)"]',
     f"summary.email.to.1: 'payroll@example.com (boss)' {ONE_ADDRESS}"),
    ("cc", "[audit@]", f"summary.email.cc.0: 'audit@' {ONE_ADDRESS}"),
    ("cc", "['\"a,b\"@example.com']",
     "summary.email.cc.0: '\"a,b\"@example.com' is not one email address: a quoted name is "
     "not taken; several addresses are a YAML list (to: [a@example.com, b@example.com])"),
    ("from", "r\u00e9@example.com",
     "summary.email.from: 'r\u00e9@example.com' is not one email address: write it in ASCII "
     "(an international domain as xn--...); several addresses are a YAML list (to: "
     "[a@example.com, b@example.com])"),
])
def test_each_recipient_is_one_address(field: str, value: str, message: str) -> None:
    given = {key: text for key, text in (("to", "[finance@example.com]"),
                                         ("from", "runner@example.com")) if key != field}
    given[field] = value
    section = "summary:\n  email:\n    smtp: {host: localhost}\n" + "".join(
        f"    {key}: {text}\n" for key, text in given.items())
    line = REMITTANCE.count("\n") + section.count("\n")  # the last line: the field's
    assert problems(section) == [f"job.yaml:{line}: {message}"]


def test_addresses_from_the_environment_are_one_each() -> None:
    section = EMAIL.format(smtp="{host: localhost}").replace(
        "[finance@example.com]", '["${SUMMARY_TO}"]')
    assert problems(section, {"SUMMARY_TO": "payroll@example.com,attacker@evil.example"}) == [
        f"job.yaml:22: summary.email.to.0: 'payroll@example.com,attacker@evil.example' "
        f"{ONE_ADDRESS}"]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _environ(path: Path) -> None:
    path.symlink_to("/proc/self/environ")


@pytest.mark.parametrize(("make", "message"), [
    (_fifo, "not a regular file (a FIFO)"),
    (Path.mkdir, "not a regular file (a folder)"),
    (_environ, "a special file of the system (proc); a job reads regular files only"),
    (lambda p: p.write_text("not a certificate\n"),
     "holds no certificate in PEM form (-----BEGIN CERTIFICATE-----)"),
    (lambda p: p.write_text(""),
     "holds no certificate in PEM form (-----BEGIN CERTIFICATE-----)"),
    (lambda p: p.write_bytes(b"#" * (CA_FILE_LIMIT + 1)),
     "larger than 4 MiB; a CA file holds the certificates of a few authorities"),
])
def test_a_ca_file_is_read_as_the_jobs_files_are_before_anything_is_sent(
        make: Callable[[Path], object], message: str) -> None:
    make(Path("corp-ca.pem"))
    assert problems(EMAIL.format(smtp="{host: mail.example.com, ca_file: corp-ca.pem}")) == [
        f"job.yaml:24: summary.email.smtp.ca_file: {message}"]


def test_a_ca_bundle_whose_comments_are_not_ascii_is_trusted(tmp_path: Path) -> None:
    authority = Authority.make(tmp_path)  # its ca.pem
    Path("corp-ca.pem").write_bytes("# NetLock Arany (Class Gold) Főtanúsítvány\n".encode()
                                    + authority.ca_file.read_bytes())
    write(Path("."), REMITTANCE + EMAIL.format(
        smtp="{host: mail.example.com, ca_file: corp-ca.pem}"))
    check_summary(load_job("job.yaml", {}))


def test_a_summary_template_larger_than_any_is_refused_unread() -> None:
    Path("summary.html.j2").write_text("{# " + "x" * TEMPLATE_LIMIT + " #}\n")
    section = EMAIL.format(smtp="{host: localhost}").replace(
        "summary:\n", "summary:\n  template: summary.html.j2\n")
    assert problems(section) == [
        "job.yaml:21: summary.template: the summary template failed: TemplateError: "
        "summary.html.j2: larger than 1 MiB; a summary template is a few KB"]

