"""Payee checks end to end against a loopback sandbox: `runner plan --verify` and
`run.verify_payees` (warn, hold), the findings in the plan, the plan file, the summary and
status, `hold` paying exactly the matching payees and those a person accepted, the answers
kept for next month (the sandbox counts the checks), a failing check never letting an item
through, merchant payments, and the kinds with no check."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, SECRET, Admin
from engine_support import MT, cli, err_lines, out_lines, outcomes, transactions
from http_servers import Rewriter, Rule, answer
from mail_server import Authority

from runner.payees.checks import plan_file_lines
from runner.sandbox import RunningSandbox
from runner.state import open_state

JOB = """\
version: 1
name: {name}
kind: remittance
provider: {{base_url: "{url}", auth: hmac, api_key: {key}, api_secret: {secret}}}
defaults:
  mode: SOURCE_AMOUNT
  source: {{country_iso_code: FRA, currency: EUR}}
  purpose_of_remittance: SALARY
  sender: {{firstname: Ada, lastname: Acme}}
items:
  from: {rows}
  external_id: "{name}-{{{{ row.id }}}}"
  template:
    payer_id: "{{{{ row.payer }}}}"
    source: {{amount: "{{{{ row.amount }}}}"}}
    destination: {{currency: "{{{{ row.currency }}}}"}}
    credit_party_identifier: {{msisdn: "{{{{ row.msisdn }}}}"}}
    beneficiary: {{firstname: "{{{{ row.first }}}}", lastname: "{{{{ row.last }}}}",
                  msisdn: "{{{{ row.msisdn }}}}"}}
run:
  concurrency: 2
  verify_payees: {policy}
  wait_for_final: 2s
  retry: {{attempts: 2, max_wait: 0.01}}
"""
HEADER = "id,payer,currency,amount,msisdn,first,last\n"
MATCH = "a,1,KES,10.00,+254700100200,Wanjiru,Kamau\n"  # a known party, named as she is
CLOSE = "b,1,KES,11.00,+254711999411,Ada,Kamau\n"  # held as Ada Kamao
NO_MATCH = "c,1,KES,12.00,+254722999412,Peter,Otieno\n"  # held by Ines Valderrama
CLOSED = "d,1,KES,13.00,+254700999402,Awa,Diop\n"  # UNAVAILABLE
NO_CHECK = "e,10,PHP,20.00,+639171234567,Maria,Santos\n"  # cash pick-up: no check offered
MONTH = MATCH + CLOSE + NO_MATCH + CLOSED + NO_CHECK


def write(folder: Path, sb: RunningSandbox | str, rows: str, name: str = "pay-2026-11",
          policy: str = "hold", attempts: int = 2) -> Path:
    """The job (and its rows) for the sandbox, or for a base URL in front of it."""
    (folder / f"{name}.csv").write_text(HEADER + rows, encoding="utf-8")
    job = folder / f"{name}.yaml"
    url = sb if isinstance(sb, str) else sb.url
    job.write_text(JOB.format(name=name, url=url, key=KEY, secret=SECRET, policy=policy,
                              rows=f"{name}.csv").replace("attempts: 2",
                                                          f"attempts: {attempts}"),
                   encoding="utf-8")
    return job


def checks(adm: Admin) -> tuple[int, int]:
    """(verifications, information calls) the sandbox answered; counted afresh after."""
    counts = adm.requests()["counts"]
    adm.api.call("DELETE", "/requests")
    return (counts.get("POST parties verification", 0),
            counts.get("POST parties information", 0))


def paid(sb: RunningSandbox) -> list[str]:
    return sorted(ext for ext, _, _ in transactions(sb))


def test_a_month_under_hold_then_the_next(sb: RunningSandbox, adm: Admin, tmp_path: Path,
                                          state: Path) -> None:
    job = write(tmp_path, sb, MONTH)
    result = cli("plan", str(job), "--state", str(state), "-o", str(tmp_path / "plan.json"))
    out = out_lines(result)
    assert (result.exit_code, out[2:]) == (0, [
        "to pay: 3 item(s)",
        "  new: 3",
        "skipped: 2 item(s)",
        "  held by the payee check (needs a person): 2",
        "    pay-2026-11-c (row 4): payee check: no match: the provider holds Ines "
        "Valderrama, for Peter Otieno (msisdn *********9412); fix the row, or accept the "
        "payee (runner resolve --accept-payee)",
        "    pay-2026-11-d (row 5): payee check: account not available (UNAVAILABLE), for "
        "Awa Diop (msisdn *********9402); fix the row, or accept the payee (runner resolve "
        "--accept-payee)",
        "payee checks (hold): 5 item(s): 1 match, 1 close match, 1 no match, 1 account not "
        "available, 1 not verifiable; 4 account(s) asked of the provider, the others' "
        "answers kept from earlier checks",
        "  pay-2026-11-b (row 3) Ada Kamau (msisdn *********9411): close match: the provider "
        "holds Ada Kamao",
        "  pay-2026-11-e (row 6) Maria Santos (msisdn *********4567): not verifiable: payer "
        "10 offers no check",
        "balances:",
        "  EUR: 3 item(s), 41.00 needed, and fees (--quote asks them); 10,000,000.00 "
        "available: covered",
        "a run would pay 3 item(s): EUR 41.00"])
    assert checks(adm) == (4, 3)  # the closed account's holder is not asked
    # The plan file: each item's finding, for whoever approves it.
    planned = json.loads((tmp_path / "plan.json").read_text())
    found = {i["external_id"][-1]: (i["action"], i["payee"]["result"], i["payee"].get("holder"))
             for i in planned["items"]}
    assert found == {"a": ("new", "match", "Wanjiru Kamau"),
                     "b": ("new", "close_match", "Ada Kamao"),
                     "c": ("held", "no_match", "Ines Valderrama"),
                     "d": ("held", "unavailable", None), "e": ("new", "not_verifiable", None)}
    assert planned["payee_checks"] == {
        "policy": "hold", "offered": True, "asked": 4, "findings": {
            "close_match": 1, "match": 1, "no_match": 1, "not_verifiable": 1,
            "unavailable": 1}}
    assert "9412" in json.dumps(planned) and "+254722999412" not in json.dumps(planned)
    # What `runner show PLAN` says of them.
    assert plan_file_lines(planned) == [
        "payee checks (hold): 1 match, 1 close match, 1 no match, 1 account not available, "
        "1 not verifiable",
        "  pay-2026-11-b (row 3) Ada Kamau (msisdn *********9411): close match: the provider "
        "holds Ada Kamao",
        "  pay-2026-11-c (row 4) Peter Otieno (msisdn *********9412): no match: the provider "
        "holds Ines Valderrama [held]",
        "  pay-2026-11-d (row 5) Awa Diop (msisdn *********9402): account not available "
        "(UNAVAILABLE) [held]",
        "  pay-2026-11-e (row 6) Maria Santos (msisdn *********4567): not verifiable: payer 10 "
        "offers no check"]

    # The run pays the match, the close match and the payer with no check; the answers are
    # the plan's, asked again of nobody.
    result = cli("run", str(job), "--state", str(state), "--yes")
    assert result.exit_code == 1  # two items need a person
    assert checks(adm) == (0, 0)
    assert paid(sb) == ["pay-2026-11-a", "pay-2026-11-b", "pay-2026-11-e"]
    assert outcomes(state, "pay-2026-11") == {
        "pay-2026-11-a": "settled", "pay-2026-11-b": "settled", "pay-2026-11-c": "held",
        "pay-2026-11-d": "held", "pay-2026-11-e": "settled"}
    status = cli("status", str(job), "--state", str(state))
    assert out_lines(status)[0] == "pay-2026-11: 5 items: 3 settled, 2 held"
    assert "  payee check pay-2026-11-b (row 3) Ada Kamau (msisdn *********9411): close " \
           "match: the provider holds Ada Kamao" in out_lines(status)
    report = json.loads(cli("report", str(job), "--state", str(state), "--format",
                            "json").stdout)
    assert [(f["external_id"], f["state"], f["finding"]) for f in report["payee_findings"]] \
        == [("pay-2026-11-b", "settled", "close match: the provider holds Ada Kamao"),
            ("pay-2026-11-c", "held", "no match: the provider holds Ines Valderrama"),
            ("pay-2026-11-d", "held", "account not available (UNAVAILABLE)"),
            ("pay-2026-11-e", "settled", "not verifiable: payer 10 offers no check")]
    summary = next((tmp_path / "reports").glob("pay-2026-11-*.txt")).read_text()
    assert "Payee checks: anything but a match (4):" in summary

    # A person accepts c's payee: the next run pays it, and only it.
    accepted = cli("resolve", str(job), "pay-2026-11-c", "--accept-payee", "--note",
                   "Ines is Peter's legal name", "--state", str(state))
    assert accepted.exit_code == 0 and out_lines(accepted)[0].startswith(
        "pay-2026-11-c: payee Peter Otieno accepted by ")
    plan = "\n".join(out_lines(cli("plan", str(job), "--state", str(state))))
    assert "  to resume: 1 (1 at new)\n" in plan
    assert "  pay-2026-11-c (row 4) Peter Otieno (msisdn *********9412): no match: the " \
           "provider holds Ines Valderrama; accepted by " in plan
    assert cli("run", str(job), "--state", str(state), "--yes").exit_code == 1  # d still held
    assert paid(sb) == ["pay-2026-11-a", "pay-2026-11-b", "pay-2026-11-c", "pay-2026-11-e"]
    assert outcomes(state, "pay-2026-11")["pay-2026-11-d"] == "held"
    assert checks(adm) == (0, 0)

    # Next month: d's account fixed, one person more; only those two accounts are asked.
    fixed = CLOSED.replace("+254700999402", "+254700000402")
    job2 = write(tmp_path, sb, MONTH.replace(CLOSED, fixed) +
                 "f,1,KES,14.00,+254733000001,Kofi,Mensah\n", name="pay-2026-12")
    result = cli("run", str(job2), "--state", str(state), "--yes")
    assert checks(adm) == (2, 2)
    # c's payee was accepted for its account and name: December's batch trusts them, and
    # nobody is asked to accept him again.
    assert outcomes(state, "pay-2026-12") == {
        "pay-2026-12-a": "settled", "pay-2026-12-b": "settled", "pay-2026-12-c": "settled",
        "pay-2026-12-d": "settled", "pay-2026-12-e": "settled", "pay-2026-12-f": "settled"}
    assert result.exit_code == 0
    # Until the name (or the account) changes: January's row names him otherwise, and he is
    # held again.
    renamed = NO_MATCH.replace("Peter,Otieno", "Pete,Otieno")
    job3 = write(tmp_path, sb, MONTH.replace(NO_MATCH, renamed).replace(CLOSED, fixed),
                 name="pay-2027-01")
    assert cli("run", str(job3), "--state", str(state), "--yes").exit_code == 1
    assert outcomes(state, "pay-2027-01")["pay-2027-01-c"] == "held"


def test_a_failing_check_never_lets_an_item_through(sb: RunningSandbox, adm: Admin,
                                                     tmp_path: Path, state: Path) -> None:
    failing = "g,1,KES,15.00,+254700999403,Kofi,Mensah\n"
    job = write(tmp_path, sb, MATCH + failing)
    result = cli("run", str(job), "--state", str(state), "--yes")
    assert result.exit_code == 1
    assert paid(sb) == ["pay-2026-11-a"]
    assert checks(adm) == (3, 1)  # the failing check asked twice (run.retry.attempts)
    with open_state(state, create=False) as store:
        held = store.item("pay-2026-11-g")
        assert held is not None and held.outcome == "held"
        assert held.error_message is not None and "not verified: the check failed: 1009001" \
            in held.error_message
    # Every check failing (the provider's fault): nothing is paid, and the answers that
    # were kept (a's) are used; a check that failed is asked again next time.
    adm.faults({"parties": {"error_rate": 1}})
    more = write(tmp_path, sb, "h,1,KES,16.00,+254700000016,Ama,Owusu\n" + failing,
                 name="pay-2026-12")
    assert cli("run", str(more), "--state", str(state), "--yes").exit_code == 1
    assert paid(sb) == ["pay-2026-11-a"]
    assert outcomes(state, "pay-2026-12") == {"pay-2026-12-g": "held",
                                              "pay-2026-12-h": "held"}
    adm.api.call("DELETE", "/faults")
    assert cli("run", str(more), "--state", str(state), "--yes").exit_code == 1
    assert paid(sb) == ["pay-2026-11-a", "pay-2026-12-h"]


def test_warn_pays_and_lists_and_verify_on_a_job_that_is_off(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write(tmp_path, sb, MATCH + NO_MATCH, policy="off")
    plain = out_lines(cli("plan", str(job), "--state", str(state)))
    assert not any(line.startswith("payee checks") for line in plain)
    assert checks(adm) == (0, 0) and not state.exists()  # off: nothing asked, nothing made
    verified = cli("plan", str(job), "--state", str(state), "--verify", "--format", "json")
    body: dict[str, Any] = json.loads(verified.stdout)
    assert body["payee_checks"]["policy"] == "warn"
    assert [i["action"] for i in body["items"]] == ["new", "new"]
    warn = write(tmp_path, sb, MATCH + NO_MATCH, policy="warn")
    result = cli("run", str(warn), "--state", str(state), "--yes")
    assert result.exit_code == 0, err_lines(result)
    assert paid(sb) == ["pay-2026-11-a", "pay-2026-11-c"]
    assert "  payee check pay-2026-11-c (row 3) Peter Otieno (msisdn *********9412): no " \
           "match: the provider holds Ines Valderrama" in out_lines(result)
    assert checks(adm) == (2, 2)  # the plan's answers, kept: the run asked none again


MERCHANT = """\
version: 1
name: collect-2026-11
kind: merchant_payment
provider: {{base_url: "{url}", auth: hmac, api_key: {key}, api_secret: {secret}}}
defaults:
  mode: PAYMENT_AMOUNT
  collection: {{currency: EUR}}
items:
  rows:
    - {{id: m1, method: 1, country: KEN, currency: KES, amount: "500", msisdn: "+254700100200",
       first: Wanjiru, last: Kamau}}
    - {{id: m2, method: 1, country: KEN, currency: KES, amount: "600", msisdn: "+254744999412",
       first: Jo, last: Doe}}
    - {{id: m3, method: 3, country: MEX, currency: MXN, amount: "70", email: "jo@example.com",
       first: Jo, last: Doe}}
  external_id: "{{{{ row.id }}}}"
  template:
    payment_method_id: "{{{{ row.method }}}}"
    payment: {{country_iso_code: "{{{{ row.country }}}}", currency: "{{{{ row.currency }}}}",
              amount: "{{{{ row.amount }}}}"}}
    debit_party_identifier:
      msisdn: "{{{{ row.msisdn | default('') }}}}"
      email: "{{{{ row.email | default('') }}}}"
    consumer: {{firstname: "{{{{ row.first }}}}", lastname: "{{{{ row.last }}}}",
               email: "jo@example.com"}}
run:
  verify_payees: hold
"""


def test_merchant_payments_and_kinds_with_no_check(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    job = tmp_path / "collect.yaml"
    job.write_text(MERCHANT.format(url=sb.url, key=KEY, secret=SECRET), encoding="utf-8")
    result = cli("plan", str(job), "--state", str(state))
    out = "\n".join(out_lines(result))
    assert result.exit_code == 0, out
    assert "payee checks (hold): 3 item(s): 1 match, 1 no match, 1 not verifiable;" in out
    assert "): payee check: no match: the provider holds Ines Valderrama, for Jo Doe " \
           "(msisdn *********9412)" in out
    assert ") Jo Doe (email **********.com): not verifiable: payment method 3 offers no " \
           "check" in out
    assert checks(adm) == (2, 2)
    # A kind whose provider offers no check says so, and asks nothing.
    jobs = Path(__file__).parent.parent / "jobs"
    for name in ("payouts.yaml", "payouts.csv"):
        (tmp_path / name).write_bytes((jobs / name).read_bytes())
    for name, value in (("RUNNER_BASE_URL", sb.url), ("RUNNER_API_KEY", KEY),
                        ("RUNNER_API_SECRET", SECRET)):
        monkeypatch.setenv(name, value)
    payouts = out_lines(cli("plan", str(tmp_path / "payouts.yaml"), "--state", str(state),
                            "--verify"))
    assert "payee checks (warn): no check offered for payout items" in payouts
    assert checks(adm) == (0, 0)


VERIFICATION = "(POST /v1/money-transfer/payers/1/credit-party-verification)"
STOPPED = "error: the payee checks stopped before anything was paid: "


def test_a_provider_that_cannot_answer_the_checks_stops_them_with_75(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    """No answer after every retry, or "later": the provider's state, not a finding on the
    payees. The plan and the run end 75 with one line, nothing paid, nobody held or kept
    as not verified; once the provider answers, the run pays as ever."""
    job = write(tmp_path, sb, MATCH + CLOSE)
    adm.faults({"parties": {"lost_rate": 1}})  # the answers lost: no HTTP answer at all
    planned = cli("plan", str(job), "--state", str(state), "-o", str(tmp_path / "p.json"))
    assert (planned.exit_code, planned.stdout, err_lines(planned)) == (75, "", [
        f"{STOPPED}connection failed: RemoteDisconnected {VERIFICATION}"])
    assert not (tmp_path / "p.json").exists()
    ran = cli("run", str(job), "--state", str(state), "--yes")
    assert (ran.exit_code, err_lines(ran)[-1:]) == (75, err_lines(planned))
    assert checks(adm)[0] == 8  # by each command, each account asked twice (attempts: 2)
    # 503, "retry later" (one try: its Retry-After would be waited for).
    adm.faults({"parties": {"unavailable_rate": 1}})
    write(tmp_path, sb, MATCH + CLOSE, attempts=1)
    ran = cli("run", str(job), "--state", str(state), "--yes")
    assert (ran.exit_code, err_lines(ran)[-1:]) == (75, [
        f"{STOPPED}1009001 Service temporarily unavailable, retry later {VERIFICATION}"])
    assert paid(sb) == [] and outcomes(state, "pay-2026-11") == {}
    adm.api.call("DELETE", "/faults")
    ran = cli("run", str(job), "--state", str(state), "--yes")
    assert ran.exit_code == 0, err_lines(ran)
    assert paid(sb) == ["pay-2026-11-a", "pay-2026-11-b"]


def test_a_configuration_refused_during_the_checks_stops_them_with_78(
        sb: RunningSandbox, tmp_path: Path, state: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider's certificate renewed, between the plan's first reads and its checks,
    by an authority runner does not trust; the checks' endpoint refusing the credentials: a
    person fixes the configuration. The plan and the run end 78 with one line, nothing
    paid, nobody held or kept as not verified."""
    trusted, other = (Authority.make(folder) for folder in (tmp_path / "ca", tmp_path / "ca2")
                      if not folder.mkdir())
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(trusted.ca_file))
    for command in (("plan", "-o", str(tmp_path / "p.json")), ("run", "--yes")):
        with Rewriter(sb.url, tls=trusted.server) as proxy:

            def renewed(head: bytes, body: bytes, proxy: Rewriter = proxy) -> bytes:
                proxy.tls = other.server  # every connection from now on
                return b""  # and a check on one from before is dropped, unanswered

            proxy.rules.append(Rule(f"POST {MT}/payers/1/credit-party-verification", renewed,
                                    count=99, forward=False, close=True))
            # Each connection from before carries one try at most: enough tries to meet
            # the new certificate.
            job = write(tmp_path, proxy.url, MATCH + CLOSE, attempts=6)
            stopped = cli(command[0], str(job), "--state", str(state), *command[1:])
        assert (stopped.exit_code, err_lines(stopped)[-1:]) == (78, [
            f"{STOPPED}could not connect: the provider's TLS certificate is not trusted "
            f"(unable to get local issuer certificate) {VERIFICATION}"])
    assert not (tmp_path / "p.json").exists()
    refused = answer("401 Unauthorized",
                     b'{"errors": [{"code": "1000401", "message": "Unauthorized"}]}')
    with Rewriter(sb.url, [Rule(f"POST {MT}/payers/1/credit-party-verification",
                                lambda head, body: refused, count=9, forward=False)],
                  tls=trusted.server) as proxy:
        job = write(tmp_path, proxy.url, MATCH + CLOSE)
        stopped = cli("run", str(job), "--state", str(state), "--yes")
    assert (stopped.exit_code, err_lines(stopped)[-1:]) == (78, [
        f"{STOPPED}1000401 Unauthorized {VERIFICATION}"])
    assert paid(sb) == [] and outcomes(state, "pay-2026-11") == {}


def _money_is_text(value: object, where: str = "") -> None:
    """Every amount in a JSON output is exact text: a JSON number only for a count (under
    ``counts``, ``pending_stages``, ``listed``, ``findings``), an id, a row, an exit code
    or seconds."""
    if isinstance(value, dict):
        for key, child in value.items():
            _money_is_text(child, f"{where}.{key}")
    elif isinstance(value, list):
        for n, child in enumerate(value):
            _money_is_text(child, f"{where}.{n}")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        *parents, leaf = where.split(".")
        counted = bool(set(parents) & {"counts", "pending_stages", "listed", "findings"})
        assert counted or leaf in NOT_MONEY or (leaf.endswith("_seconds") and
                                                isinstance(value, float)), where
        assert isinstance(value, int) or leaf.endswith("_seconds"), where


NOT_MONEY = {"exit_code", "id", "items", "row", "not_priced", "limit", "runs_since",
             "money_calls", "payer_id", "payment_method_id", "transaction_id",
             "left_unpaid", "invalid", "valid", "paid_twice_items", "compared", "lineage",
             "asked"}


def test_planned_is_paid_plus_every_person_unpaid(sb: RunningSandbox, tmp_path: Path,
                                                  state: Path) -> None:
    """A month with people paid, held by the payee check, failed at the provider and changed
    after being paid: the summary's money line adds up (planned = paid + failed + pending +
    held + to check), with the held people's amounts in it; every JSON money value is text."""
    failed = "f,1,KES,14.00,+254700999301,Jo,Doe\n"  # barred at creation
    job = write(tmp_path, sb, MATCH + NO_MATCH + CLOSED + failed)
    assert cli("run", str(job), "--yes", "--state", str(state)).exit_code == 1
    # a's row asks another amount once it is paid: changed, not paid again.
    (tmp_path / "pay-2026-11.csv").write_text(
        HEADER + MATCH.replace("10.00", "15.00") + NO_MATCH + CLOSED + failed)
    assert cli("run", str(job), "--yes", "--state", str(state)).exit_code == 1
    report = cli("report", str(job), "--state", str(state), "--format", "json")
    document = json.loads(report.stdout)
    _money_is_text(document)
    for command in (("status", str(job), "--state", str(state), "--format", "json"),
                    ("plan", str(job), "--state", str(state), "--format", "json"),
                    ("reconcile", str(job), "--state", str(state), "--format", "json"),
                    ("validate", str(job), "--format", "json")):
        _money_is_text(json.loads(cli(*command).stdout))
    eur = next(t for t in document["totals"] if t["currency"] == "EUR")
    parts = [Decimal(eur[k]) for k in ("sent", "failed", "pending", "held", "to_check")]
    assert Decimal(eur["planned"]) == sum(parts, Decimal(0)) - Decimal(eur["paid_twice"])
    assert (eur["held"], eur["failed"]) == ("25.00", "14.00")  # c and d; f
    assert Decimal(eur["not_paid"]) == Decimal("39.00")
    text = cli("report", str(job), "--state", str(state)).stdout
    assert "  EUR  planned 49.00 = paid 10.00 + failed 14.00 + pending 0.00 + held 25.00; " \
           "not paid 39.00" in text.splitlines()
