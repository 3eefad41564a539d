"""`runner validate` end to end: the real command line against a sandbox over loopback.

Every problem line is asserted verbatim (``FILE:ROW: FIELD: message``), with the closing
line and the exit code, and the sandbox's request log proves what was (not) sent.
Job files are written into ``tmp_path`` and named relative to it, so messages are short.
"""

from __future__ import annotations

import json
import socket
import threading
from functools import partial
from pathlib import Path
from typing import cast

import pytest
from click.testing import CliRunner, Result
from conftest import KEY, SECRET, Admin, Api, body
from job_files import REMITTANCE, replace, write

from runner.cli import main
from runner.provider import Provider
from runner.sandbox import RunningSandbox
from runner.validation.catalogue import Catalogue

REPO = Path(__file__).resolve().parent.parent

# A remittance job whose rows choose every field that matters to the provider checks;
# an empty cell leaves the field to `defaults` (or out of the item).
REMITTANCE_JOB = """\
version: 1
name: checks-2026-11
kind: remittance
provider:
  base_url: {url}
  auth: {auth}
  api_key: {key}
  api_secret: {secret}
defaults:
  mode: SOURCE_AMOUNT
  source: {{country_iso_code: FRA, currency: EUR}}
  purpose_of_remittance: SALARY
  sender:
    firstname: Ada
    lastname: Acme
    address: 1 rue de la Paix
    city: Paris
    country_iso_code: FRA
items:
  from: rows.csv
  external_id: "chk-{{{{ row.id }}}}"
  template:
    payer_id: "{{{{ row.payer }}}}"
    mode: "{{{{ row.mode }}}}"
    source:
      amount: "{{{{ row.amount }}}}"
      currency: "{{{{ row.src_cur }}}}"
      country_iso_code: "{{{{ row.country }}}}"
    destination: {{currency: "{{{{ row.cur }}}}", amount: "{{{{ row.dest_amount }}}}"}}
    credit_party_identifier:
      msisdn: "{{{{ row.msisdn }}}}"
      bank_account_number: "{{{{ row.bank }}}}"
      swift_bic_code: "{{{{ row.swift }}}}"
    sender: {{date_of_birth: "{{{{ row.dob }}}}"}}
    beneficiary:
      firstname: Jo
      lastname: Doe
      bank_account_holder_name: "{{{{ row.holder }}}}"
"""
HEADER = "id,payer,mode,amount,src_cur,country,cur,dest_amount,msisdn,bank,swift,dob,holder\n"

MERCHANT_JOB = """\
version: 1
name: shop-2026-11
kind: merchant_payment
provider:
  base_url: {url}
  auth: hmac
  api_key: {key}
  api_secret: {secret}
defaults:
  payment_method_id: 1
  mode: COLLECTION_AMOUNT
  payment: {{country_iso_code: KEN, currency: KES}}
  collection: {{currency: EUR}}
  purpose_of_payment: OTHER
items:
  from: rows.csv
  external_id: "shop-{{{{ row.id }}}}"
  template:
    payment_method_id: "{{{{ row.method }}}}"
    mode: "{{{{ row.mode }}}}"
    payment:
      country_iso_code: "{{{{ row.country }}}}"
      currency: "{{{{ row.cur }}}}"
      amount: "{{{{ row.pay }}}}"
    collection: {{amount: "{{{{ row.collect }}}}"}}
    debit_party_identifier: {{msisdn: "{{{{ row.msisdn }}}}"}}
    consumer: {{firstname: Jo, lastname: Doe, email: "{{{{ row.email }}}}"}}
"""
MERCHANT_HEADER = "id,method,mode,country,cur,pay,collect,msisdn,email\n"


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def validate(*args: str) -> Result:
    """``runner validate ARGS`` with its state (and any embedded sandbox's) in the cwd."""
    result = CliRunner().invoke(main, ["validate", *args, "--state", "s.sqlite"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert "Traceback" not in result.output
    return result


def remittance(url: str, rows: str, auth: str = "basic") -> Path:
    job = REMITTANCE_JOB.format(url=url, auth=auth, key=KEY, secret=SECRET)
    return write(Path("."), job, {"rows.csv": HEADER + rows})


def lines(text: str) -> list[str]:
    return text.splitlines()


def counts(admin: Admin) -> dict[str, int]:
    return admin.requests()["counts"]  # type: ignore[no-any-return]


def recent(admin: Admin) -> list[tuple[str, str]]:
    return [(call["method"], call["path"]) for call in admin.requests()["recent"]]


# ---------------------------------------------------------------- the example job
def test_the_payroll_example_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RUNNER_BASE_URL", "RUNNER_API_KEY", "RUNNER_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(main, ["validate", "jobs/payroll.yaml",
                                       "--state", str(tmp_path / "s.sqlite")])
    assert (result.exit_code, result.stderr) == (0, "")
    assert lines(result.stdout) == [
        "jobs/payroll.yaml: 60 items, 60 valid, 0 invalid; EUR 78,688.33 over 60 items"]
    # The embedded sandbox kept its state beside --state, not in the repository's state/.
    assert (tmp_path / "sandbox.jsonl").is_file()


# ---------------------------------------------------------------- every problem, one run
PROBLEM_ROWS = (
    "ok,1,,10.00,,,KES,,+254700000001,,,,\n"               # 2
    "unknown,99,,10.00,,,KES,,+254700000002,,,,\n"         # 3
    "low,1,,0.50,,,KES,,+254700000003,,,,\n"               # 4
    "high,1,,1999.99,,,KES,,+254700000004,,,,\n"           # 5
    "incr,2,DESTINATION_AMOUNT,,,,XOF,1002,+221700000005,,,,\n"  # 6
    "wrongcur,1,,10.00,,,UGX,,+254700000006,,,,\n"         # 7
    "holder,4,,10.00,,,PHP,,,123456,BMNLPHMM,,\n"          # 8
    "swift,4,,10.00,,,PHP,,,123456,,,Jo Doe\n"             # 9
    "dob,1,,10.00,,,KES,,+254700000009,,,12/04/1971,\n"    # 10
    "country,1,,10.00,,XXX,KES,,+254700000010,,,,\n"       # 11
    "gbp,1,,10.00,GBP,,KES,,+254700000011,,,,\n"           # 12
    "neg,1,,-5,,,KES,,+254700000012,,,,\n"                 # 13
    'comma,1,,"12,50",,,KES,,+254700000013,,,,\n'          # 14
    "abc,1,,abc,,,KES,,+254700000014,,,,\n"                # 15
    "ok,1,,20.00,,,KES,,+254700000015,,,,\n"               # 16
    "two,1,,10.00,,XXX,KES,,+254700000017,,,1971-13-01,\n"  # 17
)
PROBLEM_LINES = [
    "rows.csv:3: payer_id: unknown payer 99",
    "rows.csv:4: source.amount: 0.50 EUR gives 70 KES, below the minimum of payer 1 "
    "(M-Wallet Kenya): 100 KES",
    "rows.csv:5: source.amount: 1999.99 EUR gives 281623 KES, over the maximum of payer 1 "
    "(M-Wallet Kenya): 250000 KES",
    "rows.csv:6: destination.amount: 1002 XOF must have at most 0 decimals and be a multiple "
    "of 5",
    "rows.csv:7: destination.currency: payer 1 (M-Wallet Kenya) pays in KES, not UGX",
    "rows.csv:8: beneficiary.bank_account_holder_name: required by payer 4 (Banco de Manila) "
    "(accepted: firstname + lastname + bank_account_holder_name)",
    "rows.csv:9: credit_party_identifier.swift_bic_code: required by payer 4 (Banco de Manila) "
    "(accepted: bank_account_number + swift_bic_code)",
    "rows.csv:10: sender.date_of_birth: '12/04/1971' is not an ISO 8601 date (YYYY-MM-DD)",
    "rows.csv:11: source.country_iso_code: 'XXX' is not an ISO 3166-1 alpha-3 country code",
    "rows.csv:12: source.currency: payer 1 (M-Wallet Kenya) takes no GBP (it takes EUR, USD)",
    "rows.csv:13: source.amount: must be greater than 0, got -5",
    "rows.csv:14: source.amount: not a decimal amount: '12,50'; use a point as the decimal "
    "separator",
    "rows.csv:15: source.amount: not a decimal amount: 'abc'",
    "rows.csv:16: external_id: 'chk-ok' is also the external_id of row 2",
    "rows.csv:17: source.country_iso_code: 'XXX' is not an ISO 3166-1 alpha-3 country code",
    "rows.csv:17: sender.date_of_birth: '1971-13-01' is not an ISO 8601 date (YYYY-MM-DD)",
]


def test_every_problem_of_every_row_in_one_run_and_nothing_posted(
        sandbox: RunningSandbox, admin: Admin) -> None:
    remittance(sandbox.url, PROBLEM_ROWS)
    result = validate("job.yaml")
    assert (result.exit_code, result.stderr) == (2, "")
    assert lines(result.stdout) == [
        *PROBLEM_LINES, "job.yaml: 16 items, 1 valid, 15 invalid; EUR 10.00 over 1 item"]
    seen = counts(admin)
    assert seen.get("POST", 0) == 0, seen
    # Each payer and its rates once (99 is unknown: no rates), then the balances.
    assert seen == {"GET": 8, "GET discovery": 7, "GET balances": 1}


def test_the_reads_of_the_items_ahead_go_out_together(
        sandbox: RunningSandbox, admin: Admin) -> None:
    # Each read takes 5 ms: while the first row's payer is read, the other payers' reads
    # are already out; the rows are still reported in order, and each read is made once.
    admin.faults({"discovery": {"latency_ms": 5}})
    remittance(sandbox.url, PROBLEM_ROWS)
    result = validate("job.yaml")
    assert (result.exit_code, lines(result.stdout)[:len(PROBLEM_LINES)]) == (2, PROBLEM_LINES)
    seen = admin.requests()
    assert seen["counts"] == {"GET": 8, "GET discovery": 7, "GET balances": 1}
    assert seen["peak_in_flight"] >= 2


def test_a_read_waiting_for_another_holds_no_reading_thread() -> None:
    # Two reading threads; each payer's rates are read once the payer is found. Both payers
    # are read at once: the first payer's rates, waiting for it, do not hold the thread the
    # second payer is read on (each payer's read waits here until both have started). Payer
    # 3 is not found: its rates are not read.
    both = threading.Barrier(2, timeout=60)

    def payer(n: int) -> dict[str, int] | None:
        if n == 3:
            return None
        both.wait()
        return {"id": n}

    def rates(n: int) -> dict[str, int]:
        assert n != 3
        return {"payer": n}

    catalogue = Catalogue(cast(Provider, None), workers=2)
    try:
        for n in (1, 2, 3):
            catalogue.want(("payer", n), partial(payer, n))
            catalogue.want(("rates", n), partial(rates, n), after=("payer", n))
        assert [catalogue.once(("rates", n), partial(rates, 0)) for n in (1, 2, 3)] \
            == [{"payer": 1}, {"payer": 2}, None]
    finally:
        both.abort()
        catalogue.close()


def test_json_format(sandbox: RunningSandbox, admin: Admin) -> None:
    remittance(sandbox.url, PROBLEM_ROWS, auth="hmac")
    result = validate("job.yaml", "--format", "json")
    assert (result.exit_code, result.stderr) == (2, "")
    report = json.loads(result.stdout)
    assert list(report) == ["file", "kind", "items", "valid", "invalid", "quoted", "ok",
                            "problems", "totals"]
    assert {k: v for k, v in report.items() if k != "problems"} == {
        "file": "job.yaml", "kind": "remittance", "items": 16, "valid": 1, "invalid": 15,
        "quoted": False, "ok": False, "totals": {"EUR": {"items": 1, "amount": "10.00"}}}
    assert report["problems"][0] == {"file": "rows.csv", "row": 3, "field": "payer_id",
                                     "message": "unknown payer 99"}
    assert [f"{p['file']}:{p['row']}: {p['field']}: {p['message']}"
            for p in report["problems"]] == PROBLEM_LINES
    assert counts(admin).get("POST", 0) == 0


def test_payers_are_fetched_once_per_run(sandbox: RunningSandbox, admin: Admin) -> None:
    remittance(sandbox.url, "".join(f"e{n},1,,{n + 1}0.00,,,KES,,+25470000000{n},,,,\n"
                                    for n in range(10)), auth="hmac")
    result = validate("job.yaml")
    assert (result.exit_code, result.stderr) == (0, "")
    assert lines(result.stdout) == ["job.yaml: 10 items, 10 valid, 0 invalid; "
                                    "EUR 550.00 over 10 items"]
    assert recent(admin) == [("GET", "/v1/money-transfer/payers/1"),
                             ("GET", "/v1/money-transfer/payers/1/rates"),
                             ("GET", "/v1/money-transfer/balances")]


def test_totals_against_the_balance(sandbox: RunningSandbox, admin: Admin) -> None:
    admin.balance("EUR", "100.00")
    remittance(sandbox.url, "a,1,,60.00,,,KES,,+254700000001,,,,\n"
                            "b,1,,50.00,,,KES,,+254700000002,,,,\n")
    result = validate("job.yaml")
    assert (result.exit_code, result.stderr) == (2, "")
    assert lines(result.stdout) == [
        "job.yaml: totals: EUR 110.00 needed, 100.00 available (with credit facility)",
        "job.yaml: 2 items, 2 valid, 0 invalid; EUR 110.00 over 2 items"]
    admin.balance("EUR", "110.00")  # exactly enough
    assert validate("job.yaml").exit_code == 0


# ---------------------------------------------------------------- --quote
def test_quote_asks_dryrun_quotations_only(sandbox: RunningSandbox, admin: Admin) -> None:
    remittance(sandbox.url, "a,1,,10.00,,,KES,,+254700000001,,,,\n"
                            "b,2,DESTINATION_AMOUNT,,,,XOF,1005,+221700000005,,,,\n"
                            "c,13,,10.00,,,KES,,+254700000003,,,,\n"
                            "d,4,,1200.00,,,PHP,,,123456,BMNLPHMM,,Jo Doe\n", auth="hmac")
    result = validate("job.yaml", "--quote")
    assert (result.exit_code, result.stderr) == (2, "")
    # Payer 13 is inactive: only the provider's quotation can tell.
    assert lines(result.stdout) == [
        "rows.csv:4: payer_id: provider refused the quotation: 1003001 Payer is inactive in "
        "your account",
        "job.yaml: 4 items, 3 valid, 1 invalid; EUR 1,211.54 + fees 5.50 over 3 items"]
    seen = counts(admin)
    assert (seen["POST"], seen["POST quotations"]) == (4, 4), seen
    assert "POST create" not in seen and "POST confirm" not in seen
    assert {path for method, path in recent(admin) if method == "POST"} == {
        "/v1/money-transfer/quotations"}
    quoted = sorted(sandbox.state.store.by_ext["quotations"])
    assert len(quoted) == 3 and all(q.startswith("dryrun-") for q in quoted), quoted
    assert [q.rsplit("-", 2)[-2:] for q in quoted] == [["chk", "a"], ["chk", "b"], ["chk", "d"]]
    # The run's own external_ids stay free for the real run.
    lookup = Api(sandbox.url, (KEY, SECRET)).get("/v1/money-transfer/quotations/ext-chk-a")
    assert lookup.status_code == 404, body(lookup)


def test_quote_in_json_gives_fees(sandbox: RunningSandbox) -> None:
    remittance(sandbox.url, "a,1,,10.00,,,KES,,+254700000001,,,,\n")
    result = validate("job.yaml", "--quote", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["quoted"], report["ok"], report["problems"]) == (True, True, [])
    assert report["totals"] == {"EUR": {"items": 1, "amount": "10.00", "fee": "1.50"}}


# ---------------------------------------------------------------- merchant payments
def merchant(url: str, rows: str) -> Path:
    job = MERCHANT_JOB.format(url=url, key=KEY, secret=SECRET)
    return write(Path("."), job, {"rows.csv": MERCHANT_HEADER + rows})


def test_a_valid_merchant_payment_job(sandbox: RunningSandbox, admin: Admin) -> None:
    merchant(sandbox.url, "a,1,,,,,25.50,+254700000001,\n"
                          "b,1,PAYMENT_AMOUNT,,,1500,,+254700000002,\n")
    result = validate("job.yaml")
    assert (result.exit_code, result.stderr) == (0, "")
    # Each item counts in the currency of the amount its mode names.
    assert lines(result.stdout) == [
        "job.yaml: 2 items, 2 valid, 0 invalid; EUR 25.50 over 1 item; KES 1,500 over 1 item"]
    assert counts(admin).get("POST", 0) == 0


def test_merchant_payment_problems(sandbox: RunningSandbox, admin: Admin) -> None:
    merchant(sandbox.url, "a,1,,,,,25.50,+254700000001,\n"
                          "b,2,,NGA,NGN,,30.00,+2348030000003,\n"
                          "c,1,,,UGX,,30.00,+254700000004,\n")
    result = validate("job.yaml")
    assert (result.exit_code, result.stderr) == (2, "")
    assert lines(result.stdout) == [
        "rows.csv:3: consumer.email: required by payment method 2 (Bank Transfer Nigeria) "
        "(accepted: firstname + lastname + email)",
        "rows.csv:4: payment.currency: payment method 1 (M-Wallet QR Kenya) takes KES, not UGX",
        "job.yaml: 3 items, 1 valid, 2 invalid; EUR 25.50 over 1 item"]
    assert counts(admin).get("POST", 0) == 0


# ---------------------------------------------------------------- bad input
UNSET = "RUNNER_TEST_VALIDATE_UNSET"
LATIN1_NAME = "E1,12.50,+254700000001,Jos\xe9\n"
BAD_INPUT = {
    "malformed YAML": (
        replace(REMITTANCE, "kind: remittance", "kind: [remittance"), None,
        ["job.yaml:4: invalid YAML at column 9: expected ',' or ']', but got ':' "
         "(while parsing a flow sequence on line 3, column 7)"]),
    "empty file": ("", None, ["job.yaml: the file is empty; a job file starts with `version: 1`"]),
    "wrong type": (
        REMITTANCE + "run:\n  concurrency: many\n", None,
        ["job.yaml:21: run.concurrency: Input should be a valid integer, unable to parse "
         "string as an integer, got 'many'"]),
    "unknown key": (
        REMITTANCE + "run:\n  concurency: 3\n", None,
        ["job.yaml:21: run.concurency: unknown key; did you mean 'concurrency'?"]),
    "misspelt section": (
        replace(REMITTANCE, "items:\n", "itmes:\n"), None,
        ["job.yaml: items: required, but missing",
         "job.yaml:12: itmes: unknown key; did you mean 'items'?"]),
    "unknown kind": (
        replace(REMITTANCE, "kind: remittance", "kind: remitance"), None,
        ["job.yaml:3: kind: unknown kind 'remitance' (the kinds are: remittance, "
         "merchant_payment, payout, account_transfer, payment_order, charge, refund, cancel, "
         "legacy_pay, onboarding); did you mean 'remittance'?"]),
    "missing CSV": (REMITTANCE, {}, ["job.yaml:13: items.from: payroll.csv: no such file"]),
    "missing column": (
        replace(REMITTANCE, "{{ row.first_name }}", "{{ row.given_name }}"), None,
        ["job.yaml:19: items.template.beneficiary.firstname: column 'given_name' is not in "
         "payroll.csv; did you mean 'first_name'?"]),
    "non-UTF-8 CSV header": (
        REMITTANCE, {"payroll.csv": "employee_id,net_pay,msisdn,first_name,pr\xe9nom\n"
                     .encode("latin-1")},
        ["payroll.csv:1: not UTF-8 text (byte 0xE9 at byte 41 of the line); save the file "
         "as UTF-8"]),
    "template reaching internals": (
        replace(REMITTANCE, "lastname: Doe}", 'lastname: "{{ row.__class__.__mro__ }}"}'), None,
        ["job.yaml:19: items.template.beneficiary.lastname: refused by the template sandbox: "
         "'__class__', '__mro__' cannot be reached from a job file"]),
    "template reaching a class": (
        replace(REMITTANCE, "lastname: Doe}", "lastname: \"{{ ''.__class__ }}\"}"), None,
        ["job.yaml:19: items.template.beneficiary.lastname: refused by the template sandbox: "
         "'__class__' cannot be reached from a job file"]),
    "unset variable": (
        replace(REMITTANCE, "provider: {api_key: k, api_secret: s}",
                f"provider:\n  api_key: ${{{UNSET}}}\n  api_secret: s"), None,
        [f"job.yaml:5: provider.api_key: environment variable {UNSET} is not set "
         f"(write ${{{UNSET}:-default}} to allow a default)"]),
    "no job file": (None, None, ["job.yaml: no such job file"]),
}


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_reported_on_stderr(case: str, debug: bool,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNSET, raising=False)
    job, files, expected = BAD_INPUT[case]
    if job is not None:
        write(Path("."), job, files)
    args = ["validate", "job.yaml", "--state", "s.sqlite", *(["--debug"] if debug else [])]
    result = CliRunner().invoke(main, args)
    assert isinstance(result.exception, SystemExit), result.exc_info
    assert (result.exit_code, result.stdout) == (2, "")
    reported = lines(result.stderr)
    assert reported[:len(expected) + 1] == [
        *expected, f"{len(expected)} problem(s); nothing was sent."]
    if not debug:
        # --debug adds the traceback of the error it reports; without it, none.
        assert reported == [*expected, f"{len(expected)} problem(s); nothing was sent."]
    assert not Path("s.sqlite").exists() and not Path("sandbox.jsonl").exists()


def test_a_row_that_is_not_utf8_is_a_problem_of_that_row(sandbox: RunningSandbox,
                                                          admin: Admin) -> None:
    rows = HEADER.encode() + b"a,1,,10.00,,,KES,,+254700000001,,,,\n" + \
        "b,1,,10.00,,,KES,,+254700000002,,,,Jos\xe9\n".encode("latin-1")
    write(Path("."), REMITTANCE_JOB.format(url=sandbox.url, auth="basic", key=KEY,
                                           secret=SECRET), {"rows.csv": rows})
    result = validate("job.yaml")
    assert (result.exit_code, result.stderr) == (2, "")
    assert lines(result.stdout) == [
        "rows.csv:3: not UTF-8 text (byte 0xE9 at byte 39 of the line); save the file as UTF-8",
        "job.yaml: 2 items, 1 valid, 1 invalid; EUR 10.00 over 1 item"]
    assert counts(admin).get("POST", 0) == 0


# ---------------------------------------------------------------- the provider unreachable
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_provider_exits_75() -> None:
    remittance(f"http://127.0.0.1:{closed_port()}", "a,1,,10.00,,,KES,,+254700000001,,,,\n")
    result = validate("job.yaml")
    assert (result.exit_code, result.stdout) == (75, "")
    assert lines(result.stderr) == [
        "error: connection failed: ConnectionRefusedError (GET /v1/money-transfer/payers/1)"]


def test_wrong_credentials_are_a_configuration_error_exit_78(sandbox: RunningSandbox) -> None:
    """A refusal of the credentials is no "try later" (75), nor a bad job (2): cron must not
    retry it as it stands (EX_CONFIG)."""
    job = REMITTANCE_JOB.format(url=sandbox.url, auth="hmac", key=KEY, secret="wrong")
    write(Path("."), job, {"rows.csv": HEADER + "a,1,,10.00,,,KES,,+254700000001,,,,\n"})
    result = validate("job.yaml")
    assert (result.exit_code, result.stdout) == (78, "")
    assert lines(result.stderr) == [
        "error: 1000401 Unauthorized: invalid signature (GET /v1/money-transfer/payers/1)"]


def test_an_internal_error_exits_70_not_1(sandbox: RunningSandbox,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception runner did not raise on purpose is a bug: exit 70 (EX_SOFTWARE), never
    the 1 of "some items failed", and one line without a traceback unless --debug."""
    import runner.validation

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(runner.validation, "validate_job", broken)
    remittance(sandbox.url, "a,1,,10.00,,,KES,,+254700000001,,,,\n")
    result = validate("job.yaml")
    assert (result.exit_code, lines(result.stderr)) == (
        70, ["internal error: ZeroDivisionError: division by zero"])
    traced = CliRunner().invoke(main, ["validate", "job.yaml", "--debug", "--state", "s.sqlite"])
    assert traced.exit_code == 70 and "Traceback (most recent call last)" in traced.stderr
