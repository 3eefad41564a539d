"""No credential runner holds, in any form, appears in anything runner writes: the provider
quoting it in its refusals (plain, percent-encoded, in base64 as an HTTP basic header, or
inside a longer base64 text; the API secret, and the PostgreSQL password of a state there),
a mail server quoting the AUTH PLAIN it refused, a summary
template printing a ``vars`` value taken from the environment. Each run is read back whole:
its standard output and error (text and JSON logs), every file under its folder (the state
database and its journal, the reports), and what the mail server received."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, quote_plus

import psycopg
import pytest
from engine_support import MT, cli, write_job
from http_servers import Rewriter, Rule, answer
from mail_server import PASSWORD, USER, Authority, refuse_quoting, start
from summary_support import SETTLED
from summary_support import write_job as summary_job

from runner.credentials import MASK, Credential, Redactor, forms
from runner.sandbox import RunningSandbox

KEY = "echo-key-4Lp"
PG_PASSWORD = "pg-Pass:w0rd@state"
SECRET = 'echo-Secret/+=9x&y"q\\z'  # characters that each encoding writes its own way


def spellings(secret: str, login: str | None = None) -> list[str]:
    """What a reader would find of ``secret`` if it leaked: as it is, percent-encoded,
    JSON-escaped, in base64 alone and with its login (HTTP basic, SMTP AUTH PLAIN)."""
    found = [secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1],
             base64.b64encode(secret.encode()).decode().rstrip("=")]
    if login is not None:
        found += [base64.b64encode(f"{login}:{secret}".encode()).decode(),
                  base64.b64encode(f"\0{login}\0{secret}".encode()).decode()]
    return found


def leaks(texts: list[str], folder: Path, secret: str, login: str | None = None,
          also: tuple[str, ...] = ()) -> list[str]:
    """Each spelling of ``secret`` found in ``texts`` or in any file under ``folder``."""
    written = [*texts, *(p.read_bytes().decode("latin-1") for p in folder.rglob("*")
                         if p.is_file() and p.suffix not in (".yaml", ".csv", ".pem", ".key")
                         or p.parent.name == "reports")]
    return [s for s in (*spellings(secret, login), *also) for text in written if s in text]


# ---------------------------------------------------------------- the forms, one by one
def test_every_form_of_a_credential_is_masked_wherever_it_starts() -> None:
    redact = Redactor([Credential(SECRET, KEY), Credential(PASSWORD, USER)])
    for secret, login in ((SECRET, KEY), (PASSWORD, USER)):
        for text in spellings(secret, login):
            assert redact(f"said {text}!") == f"said {MASK}!", text
    # Inside a longer base64 text, at each of the three places a byte can start in a group.
    for prefix in (b"", b"a", b"ab", b"abc", b"user\0"):
        for suffix in (b"", b"x", b"xy"):
            inner = base64.b64encode(prefix + SECRET.encode() + suffix).decode()
            assert inner not in redact(inner) and MASK in redact(inner), (prefix, suffix)
    assert redact("nothing secret here") == "nothing secret here"
    assert forms(Credential("abc")) == set()  # too short to tell from a word


# ---------------------------------------------------------------- a provider that quotes them
def test_a_provider_quoting_the_credentials_shows_them_nowhere(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path, where: Path | str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = sandbox_factory(api_key=KEY, api_secret=SECRET, submit_delay=0,
                              complete_delay=0)
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)  # libpq's (the test server trusts anyone)
    basic = base64.b64encode(f"{KEY}:{SECRET}".encode()).decode()
    inside = base64.b64encode(b"token=" + SECRET.encode() + b";").decode()
    said = (f"refused: Authorization: Basic {basic}; secret {SECRET}, as a form field "
            f"{quote_plus(SECRET)}, in a token {inside}")
    if isinstance(where, str):
        said += f"; the database's {PG_PASSWORD}"
    refusal = json.dumps({"errors": [{"code": "1000400", "message": said}]}).encode()
    rules = [Rule(f"POST {MT}/quotations", lambda head, body: answer("400 Bad Request",
                                                                      refusal),
                  count=100, forward=False)]
    with Rewriter(sandbox.url, rules) as proxy:
        job = write_job(tmp_path, proxy.url)
        job.write_text(job.read_text().replace("auth: hmac", "auth: basic").replace(
            "test-secret", "${RUNNER_API_SECRET}").replace("test-key", KEY))
        monkeypatch.setenv("RUNNER_API_SECRET", SECRET)
        state = where
        text = cli("run", str(job), "--state", str(state), "--yes")
        logged = cli("run", str(job), "--state", str(state), "--yes", "--log-format",
                     "json", "--verbose")
        status = cli("status", str(job), "--state", str(state), "--format", "json")
        report = cli("report", str(job), "--state", str(state), "--format", "csv")
    assert text.exit_code == 1  # every item refused by the provider
    assert json.loads(status.stdout)["counts"]["failed"] == 3
    failed = json.loads(status.stdout)["failed"][0]
    assert failed["code"] == "1000400" and failed["message"].startswith(
        f"refused: Authorization: Basic {MASK}; secret {MASK}, as a form field {MASK}, in a "
        f"token {inside[:8]}{MASK}{inside[-3:]}")
    outputs = [r.stdout + r.stderr for r in (text, logged, status, report)]
    if isinstance(where, str):  # what the database holds, every text of every row
        assert failed["message"].endswith(f"; the database's {MASK}")
        with psycopg.connect(where) as db:
            outputs += [str(row) for table in ("items", "attempts", "runs", "approvals")
                        for row in db.execute(f"SELECT * FROM {table}").fetchall()]
        assert leaks(outputs, tmp_path, PG_PASSWORD) == []
    assert leaks(outputs, tmp_path, SECRET, KEY) == []


# ---------------------------------------------------------------- a mail server that quotes them
def test_a_mail_server_quoting_the_login_it_refused_shows_it_nowhere(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from summary_support import start_sandbox

    sandbox = start_sandbox(sandbox_factory)
    authority = Authority.make(tmp_path)
    server = start("starttls", authority, refuse_quoting)
    try:
        monkeypatch.setenv("SMTP_PASSWORD", PASSWORD)
        job = summary_job(tmp_path, sandbox, SETTLED, summary=f"""\
summary:
  email:
    to: [finance@example.com]
    from: runner@example.com
    smtp: {{host: 127.0.0.1, port: {server.port}, starttls: true, username: {USER},
           password: "${{SMTP_PASSWORD}}", ca_file: ca.pem}}
""")
        state = tmp_path / "s.sqlite"
        result = cli("run", str(job), "--yes", "--state", str(state))
        again = cli("report", str(job), "--state", str(state), "--email")
    finally:
        server.stop()
    assert result.exit_code == 3  # paid; the summary's email refused
    assert f"refused the login of {USER}: 535 5.7.8 authentication failed for {MASK}" \
           in result.stderr
    assert server.arrived == []
    assert leaks([result.output, again.output], tmp_path, PASSWORD, USER) == []


# ---------------------------------------------------------------- a template that prints them
def test_a_summary_template_printing_a_credential_prints_a_mask(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from summary_support import SECRET as API_SECRET
    from summary_support import start_sandbox

    sandbox = start_sandbox(sandbox_factory)
    server = start()
    try:
        monkeypatch.setenv("RUNNER_API_SECRET", API_SECRET)
        monkeypatch.setenv("SMTP_PASSWORD", PASSWORD)
        (tmp_path / "pay.txt.j2").write_text(
            "{{ vars.key }} {{ vars.key|urlencode }} {{ vars.key|reverse }} {{ vars.mail }} "
            "{{ vars.mail|upper|lower }} {{ ('said ' ~ vars.key)|title }}\n")
        job = summary_job(tmp_path, sandbox, SETTLED, summary=f"""\
summary:
  template: pay.txt.j2
  email:
    to: [finance@example.com]
    from: runner@example.com
    subject: "{{{{ vars.key }}}} {{{{ vars.mail }}}}"
    smtp: {{host: 127.0.0.1, port: {server.port}, starttls: false,
           password: "${{SMTP_PASSWORD}}"}}
""")
        job.write_text(job.read_text().replace(
            f'api_secret: "{API_SECRET}"', 'api_secret: "${RUNNER_API_SECRET}"').replace(
            'vars: {period: "2026-11"}',
            'vars: {period: "2026-11", key: "k=${RUNNER_API_SECRET}", mail: "${SMTP_PASSWORD}"}'))
        state = tmp_path / "s.sqlite"
        result = cli("run", str(job), "--yes", "--state", str(state))
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    [mail] = server.arrived
    assert mail.message["Subject"] == f"k={MASK} {MASK}"
    body = mail.message.get_body(("plain",))
    assert body is not None and body.get_content().replace("\r\n", "\n").startswith(
        f"k={MASK} k%3D%5Bredacted%5D ]detcader[=k {MASK} {MASK} Said K=[Redacted]\n")
    mailed = mail.raw.decode("latin-1")
    assert leaks([result.output, mailed], tmp_path, API_SECRET, None,
                 also=(API_SECRET[::-1], API_SECRET.title())) == []
    assert leaks([mailed], tmp_path, PASSWORD) == []
