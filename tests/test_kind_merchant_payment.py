"""The ``merchant_payment`` kind end to end: quotation -> payment -> confirm -> final status
against a loopback sandbox, judged at the provider (its payments, which were confirmed, the
merchant balance they credited, the calls made) and then in the state database and the
summary, which must show each consumer what the provider gave them to pay with.

The exactly-once cases of tests/test_engine_rules.py, for this kind: lost answers after each
POST, 1007001 adopted or a conflict, quotation expiry, the provider's test triggers, and a
runner killed with SIGKILL (a subprocess) then run again.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from collection_support import kill_when
from conftest import KEY, PATIENCE, SECRET, Admin, Api, body, ending
from engine_support import base_of, cli, items, outcomes, posts, run, runner_process, sent_for

from runner.engine.merchant_payment import payment_details
from runner.job import load_job
from runner.sandbox import RunningSandbox
from runner.state import ItemRecord, open_state
from runner.summary import build_summary
from runner.summary.render import templates_of

REPO = Path(__file__).resolve().parent.parent
MP = "/v1/merchant-payment"
NAME = "shop-2026-11"
JOB = """\
version: 1
name: {name}
kind: merchant_payment
provider: {{base_url: "{url}", auth: hmac, api_key: {key}, api_secret: {secret},
           timeout: {timeout}}}
defaults:
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
    debit_party_identifier:
      msisdn: "{{{{ row.msisdn }}}}"
      bank_account_number: "{{{{ row.bank }}}}"
    consumer:
      firstname: "{{{{ row.first }}}}"
      lastname: "{{{{ row.last }}}}"
      email: "{{{{ row.email }}}}"
      id_type: "{{{{ row.id_type }}}}"
      id_number: "{{{{ row.id_number }}}}"
run:
  concurrency: {concurrency}
  confirm: {confirm}
  wait_for_final: 3s
  retry: {{attempts: 3, max_wait: 0.2s}}
"""
HEADER = "id,method,country,cur,mode,pay,collect,msisdn,bank,email,id_type,id_number,first,last\n"
# Three consumers over three payment methods and both modes: QR details (method 1),
# instructions (method 2), both (method 6).
ROWS = ("a,1,KEN,KES,PAYMENT_AMOUNT,1000,,+254700100200,,,,,Wanjiru,Kamau\n"
        "b,2,NGA,NGN,COLLECTION_AMOUNT,,20.00,,1234567890,adaeze@example.com,,,Adaeze,Nwosu\n"
        "c,6,IND,INR,PAYMENT_AMOUNT,500.00,,+919812345678,,,NATIONAL_ID,IN-1,Priya,Sharma\n")
EVERY = {"shop-a": 1, "shop-b": 1, "shop-c": 1}


def write_job(folder: Path, sandbox: RunningSandbox | str, rows: str = ROWS, *,
              confirm: bool = True, concurrency: int = 2, timeout: str = "60s") -> Path:
    """A merchant payment job for ``sandbox`` (or a base URL) over ``rows``; its path."""
    (folder / "rows.csv").write_text(HEADER + rows, encoding="utf-8")
    path = folder / "job.yaml"
    url = sandbox if isinstance(sandbox, str) else sandbox.url
    path.write_text(JOB.format(name=NAME, url=url, key=KEY, secret=SECRET,
                               timeout=timeout, confirm=str(confirm).lower(),
                               concurrency=concurrency), encoding="utf-8")
    return path


# ---------------------------------------------------------------- what the provider holds
def payments(sb: RunningSandbox) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    store = sb.state.store
    with store.lock:
        return [(p["external_id"], dict(p), dict(store.meta["payments"][pid]))
                for pid, p in sorted(store.tables["payments"].items())]


def created(sb: RunningSandbox) -> Counter[str]:
    return Counter(base_of(e) for e, _, _ in payments(sb))


def confirmed(sb: RunningSandbox) -> Counter[str]:
    """Confirmed payments at the provider per item: exactly once means 1 each."""
    return Counter(base_of(e) for e, _, m in payments(sb) if m.get("confirmed"))


def quotations(sb: RunningSandbox) -> list[str]:
    store = sb.state.store
    with store.lock:
        return sorted(q["external_id"] for q in store.tables["mquotations"].values())


def merchant_eur(sb: RunningSandbox) -> Decimal:
    answer = Api(sb.url, (KEY, SECRET)).get(MP + "/balances")
    assert answer.status_code == 200, answer.text
    return next(b["balance"] for b in body(answer) if b["currency"] == "EUR")  # type: ignore


def calls(admin: Admin) -> list[tuple[str, str]]:
    """The provider calls seen, oldest first, without the job's validation reads."""
    seen = [(c["method"], c["path"].removeprefix(MP)) for c in admin.requests()["recent"]]
    return [c for c in seen if not c[1].startswith(("/payment-methods/", "/balances"))]


def steps(state: Path, external_id: str) -> list[tuple[str, str, str | None, str | None]]:
    return sent_for(state, external_id, "payment")


def credited(sb: RunningSandbox) -> Decimal:
    """What the completed payments credit the merchant: collection less fee."""
    return sum((p["collection"]["amount"] - p["fee"]["amount"] for _, p, m in payments(sb)
                if m.get("confirmed") and p["status"] == "70000"), Decimal(0))


def assert_paid_once(sb: RunningSandbox, state: Path,
                     expected: dict[str, int] = EVERY) -> None:
    """Each item has exactly one confirmed payment at the provider, COMPLETED; the merchant
    balance was credited with exactly their collections less fees; the state database says
    they settled, names that payment and keeps its details."""
    assert confirmed(sb) == expected
    done = {base_of(e): p for e, p, m in payments(sb) if m.get("confirmed")}
    assert {p["status"] for p in done.values()} == {"70000"}
    assert merchant_eur(sb) == credited(sb) > 0
    records = items(state, NAME)
    for external_id in expected:
        r, p = records[external_id], done[external_id]
        assert (r["outcome"], r["step"], r["intent"], r["status"]) == (
            "settled", "final", None, "70000"), r
        assert (r["transaction_id"], r["provider_ref"]) == (p["id"], p["external_id"])
        assert (r["source_currency"], Decimal(r["source_amount"])) == (
            p["payment"]["currency"], p["payment"]["amount"])
        assert (r["destination_currency"], Decimal(r["destination_amount"])) == (
            p["collection"]["currency"], p["collection"]["amount"])
        assert json.loads(r["details"]) == payment_details(p)


def _expected_steps(step: str, result: str, code: str | None
                    ) -> list[tuple[str, str, str | None, str | None]]:
    """shop-a's POSTs: each ok, but ``step``, which ended ``result`` and was not sent again."""
    return [(s, "shop-a", result, code) if s == step else (s, "shop-a", "ok", None)
            for s in ("quotation", "payment", "confirm")]


# ---------------------------------------------------------------- the happy path
def test_every_consumer_pays_once_and_the_summary_shows_their_details(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    path = write_job(tmp_path, sb)
    first = run(path, state)
    assert (first.exit_code, first.message, first.counts) == (0, "", {"settled": 3})
    assert quotations(sb) == ["shop-a", "shop-b", "shop-c"]
    assert posts(adm) == {"POST": 9, "POST quotations": 3, "POST create": 3,
                          "POST confirm": 3}
    for external_id in EVERY:
        assert steps(state, external_id) == [
            (s, external_id, "ok", None) for s in ("quotation", "payment", "confirm")]
    assert_paid_once(sb, state)
    by_item = {e: p for e, p, _ in payments(sb)}
    # What each method gives: QR (1), instructions (2), both (6); no redirect for these.
    assert {e: sorted(json.loads(r["details"])) for e, r in items(state, NAME).items()} == {
        "shop-a": ["qr_code", "qr_url"], "shop-b": ["instructions"],
        "shop-c": ["instructions", "qr_code", "qr_url"]}
    # The consumer is named, with masked identifiers, for reports.
    summary = json.loads(items(state, NAME)["shop-b"]["summary"])
    assert summary == {"beneficiary": "Adaeze Nwosu", "payment_method_id": 2,
                       "identifier": {"bank_account_number": "******7890"},
                       "planned": ["EUR", "20.00"]}

    text = cli("report", str(path), "--state", str(state)).stdout
    a, b = by_item["shop-a"]["details"], by_item["shop-b"]["details"]
    reference = b["invoice_id"]
    at = text.index("Details from the provider (3):\n")
    assert text[at:].splitlines()[:18] == [
        "Details from the provider (3):",
        "  shop-a (row 2), Wanjiru Kamau (msisdn *********0200), KES 1,000.00: paid",
        f"    qr_code: {a['qr_code']}",
        f"    qr_url: {a['qr_url']}",
        "  shop-b (row 3), Adaeze Nwosu (bank_account_number ******7890), "
        f"NGN {by_item['shop-b']['payment']['amount']:,}: paid",
        "    instructions:",
        "      USSD:",
        "        1. Dial *500#",
        f"        2. Enter reference {reference}",
        f"        3. Approve {by_item['shop-b']['payment']['amount']} NGN",
        "      APP:",
        "        1. Open the app",
        "        2. Choose Pay",
        f"        3. Enter reference {reference}",
        "  shop-c (row 4), Priya Sharma (msisdn *********5678), INR 500.00: paid",
        f"    qr_code: {by_item['shop-c']['details']['qr_code']}",
        f"    qr_url: {by_item['shop-c']['details']['qr_url']}",
        "    instructions:"]
    # Consumers sent in their currencies; the merchant received the collections in EUR.
    assert "  EUR  received " in text and "  KES  sent 1,000" in text

    html = cli("report", str(path), "--state", str(state), "--format", "html").stdout
    assert ">Details from the provider (3)</h2>" in html
    assert f"<dt>qr_url</dt>\n<dd><code>{a['qr_url']}</code></dd>" in html
    assert (f"<dd>USSD<ol><li>Dial *500#</li><li>Enter reference {reference}</li>"
            in html)

    second = run(path, state)  # a finished job sends nothing again
    assert (second.exit_code, second.counts) == (0, {"settled": 3})
    assert posts(adm)["POST"] == 9
    assert_paid_once(sb, state)


def test_the_example_job_runs_to_exit_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    for name in ("RUNNER_BASE_URL", "RUNNER_API_KEY", "RUNNER_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(REPO)
    state = tmp_path / "s.sqlite"
    result = cli("run", "jobs/merchant-payments.yaml", "--yes", "--state", str(state))
    assert result.exit_code == 0, result.output
    records = items(state, "merchant-payments-2026-11")
    assert len(records) == 10
    assert {(r["outcome"], r["status"]) for r in records.values()} == {("settled", "70000")}
    methods = {json.loads(r["summary"])["payment_method_id"] for r in records.values()}
    assert methods == {1, 2, 4, 5, 6}
    assert all(json.loads(r["details"]) for r in records.values())
    assert "Details from the provider (10):" in cli(
        "report", "jobs/merchant-payments.yaml", "--state", str(state)).stdout


def test_invalid_items_stop_the_run_before_anything_is_sent(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    rows = ROWS + ("d,1,KEN,KES,PAYMENT_AMOUNT,5,,+254700000004,,,,,Jo,Doe\n"  # below 10 KES
                   "e,6,IND,INR,PAYMENT_AMOUNT,10.00,,+919800000005,,,,,Jo,Doe\n"  # no ID
                   "f,5,PHL,PHP,PAYMENT_AMOUNT,100.00,,,,,,,Jo,Doe\n")  # no identifier
    result = run(write_job(tmp_path, sb, rows), state)
    assert (result.exit_code, result.message) == (2, "3 invalid item(s); nothing was sent")
    assert result.report is not None
    assert [(p.row, p.field) for p in result.report.problems] == [
        (5, "payment.amount"), (6, "consumer.id_type"), (7, "debit_party_identifier.msisdn")]
    assert "POST" not in posts(adm)


# ---------------------------------------------------------------- rules 2 and 3: in doubt
LOST = {
    "quotations": ("quotation", ("POST", "/quotations"), ("GET", "/quotations/ext-shop-a")),
    "create": ("payment", ("POST", "/quotations/ext-shop-a/payments"),
               ("GET", "/payments/ext-shop-a")),
    "confirm": ("confirm", ("POST", "/payments/ext-shop-a/confirm"),
                ("GET", "/payments/ext-shop-a")),
}


@pytest.mark.parametrize("group", list(LOST))
def test_a_lost_answer_is_looked_up_and_never_sent_again(
        group: str, sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    step, post, lookup = LOST[group]
    adm.faults({group: {"lost_next": 1}})
    result = run(write_job(tmp_path, sb, concurrency=1), state)
    assert (result.exit_code, result.counts) == (0, {"settled": 3})
    # The work was done at the provider: one POST per item, the lost one included, and the
    # lookup by external_id came straight after the POST whose answer was lost.
    assert posts(adm)["POST " + group] == 3
    seen = calls(adm)
    assert seen[seen.index(post) + 1] == lookup, seen
    assert steps(state, "shop-a") == _expected_steps(step, "in_doubt", None)
    assert created(sb) == EVERY
    assert_paid_once(sb, state)


# ---------------------------------------------------------------- rule 3: 1007001
def test_what_the_provider_already_holds_is_adopted(sb: RunningSandbox, adm: Admin,
                                                    tmp_path: Path, state: Path) -> None:
    path = write_job(tmp_path, sb, confirm=False)
    first = run(path, state)
    assert (first.exit_code, first.counts) == (0, {"awaiting_confirm": 3})
    assert created(sb) == EVERY and confirmed(sb) == {}
    for f in tmp_path.glob("s.sqlite*"):
        f.unlink()  # the state is lost after the payments were created
    again = run(path, state, confirm=True)
    assert (again.exit_code, again.counts) == (0, {"settled": 3})
    assert steps(state, "shop-b") == [("quotation", "shop-b", "error", "1007001"),
                                      ("payment", "shop-b", "error", "1007001"),
                                      ("confirm", "shop-b", "ok", None)]
    assert quotations(sb) == ["shop-a", "shop-b", "shop-c"]
    assert created(sb) == EVERY
    assert {r["error_code"] for r in items(state, NAME).values()} == {None}
    assert_paid_once(sb, state)


def _quotation(external_id: str, amount: str) -> dict[str, Any]:
    return {"external_id": external_id, "payment_method_id": 2, "mode": "COLLECTION_AMOUNT",
            "payment": {"country_iso_code": "NGA", "currency": "NGN"},
            "collection": {"currency": "EUR", "amount": Decimal(amount)}}


def test_a_quotation_that_is_not_the_item_is_a_conflict(sb: RunningSandbox, adm: Admin,
                                                        tmp_path: Path, state: Path) -> None:
    api = Api(sb.url, (KEY, SECRET))
    assert api.post(MP + "/quotations", _quotation("shop-b", "99.00")).status_code == 201
    path = write_job(tmp_path, sb)
    result = run(path, state)
    assert (result.exit_code, result.counts) == (1, {"settled": 2, "conflict": 1})
    record = items(state, NAME)["shop-b"]
    assert (record["outcome"], record["intent"], record["error_code"],
            record["error_message"]) == (
        "conflict", None, "conflict", "quotation shop-b at the provider does not match this item")
    assert created(sb) == {"shop-a": 1, "shop-c": 1}  # nothing was created for it
    assert_paid_once(sb, state, {"shop-a": 1, "shop-c": 1})
    before = posts(adm)["POST"]
    again = run(path, state)  # a conflict waits for a person: nothing is sent for it
    assert (again.exit_code, again.counts) == (1, {"settled": 2, "conflict": 1})
    assert posts(adm)["POST"] == before


def test_a_payment_from_another_consumer_is_a_conflict(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    """Same external_id, same quotation and amounts, another debit party: not adopted."""
    api = Api(sb.url, (KEY, SECRET))
    assert api.post(MP + "/quotations", _quotation("shop-b", "20.00")).status_code == 201
    other = {"external_id": "shop-b", "debit_party_identifier": {"msisdn": "+2348030000099"},
             "consumer": {"firstname": "Mal", "lastname": "Lory", "email": "m@example.com"},
             "purpose_of_payment": "OTHER"}
    answer = api.post(MP + "/quotations/ext-shop-b/payments", other)
    assert answer.status_code == 201, answer.text
    result = run(write_job(tmp_path, sb), state)
    assert (result.exit_code, result.counts) == (1, {"settled": 2, "conflict": 1})
    record = items(state, NAME)["shop-b"]
    assert (record["outcome"], record["error_message"]) == (
        "conflict", "payment shop-b at the provider does not match this item: "
                    "debit_party_identifier.bank_account_number missing, sent '1234567890'; "
                    "consumer.firstname 'Mal', sent 'Adaeze'; consumer.lastname 'Lory', sent "
                    "'Nwosu'")
    assert steps(state, "shop-b") == [("quotation", "shop-b", "error", "1007001"),
                                      ("payment", "shop-b", "error", "1007001")]
    assert_paid_once(sb, state, {"shop-a": 1, "shop-c": 1})


# ---------------------------------------------------------------- rule 1: -rN after expiry
def test_an_expired_quotation_gets_an_r2_attempt_only_once_unconfirmable(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    path = write_job(tmp_path, sb, confirm=False)
    assert run(path, state).counts == {"awaiting_confirm": 3}
    adm.advance(3601)  # past the quotations' TTL of 3600 s
    second = run(path, state, confirm=True, confirm_only=True)
    assert (second.exit_code, second.counts) == (0, {"settled": 3})
    assert sorted(e for e, _, m in payments(sb) if m.get("confirmed")) == [
        "shop-a-r2", "shop-b-r2", "shop-c-r2"]
    assert created(sb) == {"shop-a": 2, "shop-b": 2, "shop-c": 2}
    assert steps(state, "shop-a") == [
        ("quotation", "shop-a", "ok", None), ("payment", "shop-a", "ok", None),
        ("confirm", "shop-a", "error", "1007004"),
        ("quotation", "shop-a-r2", "ok", None), ("payment", "shop-a-r2", "ok", None),
        ("confirm", "shop-a-r2", "ok", None)]
    assert {r["attempt"] for r in items(state, NAME).values()} == {2}
    assert_paid_once(sb, state)


# ---------------------------------------------------------------- the provider's triggers
def test_triggers_end_failed_as_the_provider_says(sb: RunningSandbox, adm: Admin,
                                                  tmp_path: Path, state: Path) -> None:
    rows = ROWS + ("r,1,KEN,KES,PAYMENT_AMOUNT,1000,,+254700999302,,,,,Re,Jected\n"
                   "d,1,KEN,KES,PAYMENT_AMOUNT,1000,,+254700999309,,,,,De,Clined\n"
                   "x,1,KEN,KES,PAYMENT_AMOUNT,1000,,+254700999301,,,,,At,Creation\n")
    result = run(write_job(tmp_path, sb, rows), state)
    assert (result.exit_code, result.counts) == (1, {"settled": 3, "failed": 3})
    records = items(state, NAME)
    assert {e: (r["step"], r["outcome"], r["error_code"], r["error_message"])
            for e, r in records.items() if r["outcome"] == "failed"} == {
        "shop-r": ("final", "failed", "30260", "REJECTED-INVALID-CONSUMER-DETAILS"),
        "shop-d": ("final", "failed", "90273", "DECLINED-INSUFFICIENT-BALANCE-CONSUMER-ACCOUNT"),
        "shop-x": ("final", "failed", "30250", "REJECTED-INVALID-CONSUMER")}
    # Rejected at creation: never confirmed. The other two were, once, and end failed.
    assert confirmed(sb) == {**EVERY, "shop-r": 1, "shop-d": 1}
    assert [s for s, *_ in steps(state, "shop-x")] == ["quotation", "payment"]
    assert records["shop-x"]["details"] is None
    assert json.loads(records["shop-r"]["details"])["qr_url"]  # given at confirm
    # The merchant is credited for the completed payments only.
    completed = {base_of(e) for e, p, _ in payments(sb) if p["status"] == "70000"}
    assert completed == set(EVERY)
    assert merchant_eur(sb) == credited(sb) > 0
    assert outcomes(state, NAME) == {**{e: "settled" for e in EVERY}, "shop-r": "failed",
                                     "shop-d": "failed", "shop-x": "failed"}
    # The consumer of x fixed in the rows: --retry-failed pays it as shop-x-f2; d (the
    # consumer's balance short: of the moment), unchanged, is sent again (-f2) and refused
    # again; r, refused for good and unchanged, is not sent again.
    (tmp_path / "rows.csv").write_text(HEADER + rows.replace("+254700999301", "+254700999001"))
    again = run(tmp_path / "job.yaml", state, retry_failed=True)
    assert (again.exit_code, again.counts) == (1, {"settled": 4, "failed": 2})
    assert {e: p["status"] for e, p, _ in payments(sb) if e.startswith("shop-x")} == {
        "shop-x": "30250", "shop-x-f2": "70000"}
    assert {e: p["status"] for e, p, m in payments(sb) if m.get("confirmed") and "-f2" in e} \
        == {"shop-x-f2": "70000", "shop-d-f2": "90273"}
    assert merchant_eur(sb) == credited(sb)  # the completed payments only, x's among them


# ---------------------------------------------------------------- kill -9, then resume
KILL_ROWS = "".join(
    f"k{n:02d},1,KEN,KES,PAYMENT_AMOUNT,{100 + n},,+2547001{n:05d},,,,,Jo,Doe{n}\n"
    for n in range(12))


@pytest.mark.parametrize("kill_at", [7, 28], ids=["while preparing", "while confirming"])
def test_a_run_killed_with_sigkill_resumes_and_pays_everyone_once(
        kill_at: int, sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    """12 items make 36 POSTs (24 while preparing, then 12 confirms); the runner is killed
    as POST number ``kill_at`` reaches the sandbox (so it is in flight), then run again."""
    adm.faults({"*": {"latency_ms": 5}})
    job = write_job(tmp_path, sb, KILL_ROWS, concurrency=2)
    log = tmp_path / "first.log"
    first = runner_process(job, state, log)
    kill_when(first, lambda: sb.state.faults.counts["POST"] >= kill_at)
    time.sleep(0.05)  # the call in flight ends at the sandbox
    # Killed in the phase meant, with work left to resume.
    assert (sum(created(sb).values()) == 12) == (kill_at > 24)
    assert sum(confirmed(sb).values()) < 12

    log = tmp_path / "second.log"
    with ending(runner_process(job, state, log)) as second:
        assert second.wait(timeout=PATIENCE) == 0, log.read_text()
    every = {f"shop-k{n:02d}": 1 for n in range(12)}
    assert created(sb) == every  # no item was created twice either
    assert_paid_once(sb, state, every)
    assert set(outcomes(state, NAME).values()) == {"settled"}


# ---------------------------------------------------------------- details in the summary
def test_details_of_any_kind_are_shown_generically_and_escaped(tmp_path: Path) -> None:
    """The summary shows whatever an item's details hold (a payment URL, onboarding ids,
    instructions), scrubbed of secrets and card numbers, and HTML-escaped."""
    store = open_state(tmp_path / "s.sqlite")
    try:
        store.insert_items([ItemRecord(**{
                           "external_id": "o-1", "job_name": NAME, "kind": "payment_order",
                           "row": 2, "fingerprint": "f", "outcome": "pending",
                           "summary": json.dumps({"beneficiary": "<b>Ann</b>"}),
                           "details": json.dumps({
                               "payment_url": "https://pay.example/x?a=1&b=<2>",
                               "ids": {"company": "CMP0003", "merchant": "MER0004"},
                               "tags": ["one", "two"], "empty": None,
                               "note": "secret-XYZ card 4111 1111 1111 1111",
                               "instructions": [{"channel": "<USSD>",
                                                 "steps": ["Dial *1#", "Say \"hi\""]}]})})])
        store.insert_items([ItemRecord(**{
                           "external_id": "o-2", "job_name": NAME, "kind": "payment_order",
                           "row": 3, "fingerprint": "f", "summary": "{}"})])
        summary = build_summary(store, NAME, secrets=["secret-XYZ"])
    finally:
        store.close()
    assert [i.external_id for i in summary.with_details] == ["o-1"]
    job = write_job(tmp_path, "http://127.0.0.1:9", "")
    templates = templates_of(load_job(job))
    text = templates.text_of(summary)
    at = text.index("Details from the provider (1):")
    assert text[at:].splitlines()[:12] == [
        "Details from the provider (1):",
        "  o-1 (row 2), <b>Ann</b>: pending",
        "    payment_url: https://pay.example/x?a=1&b=<2>",
        "    ids.company: CMP0003",
        "    ids.merchant: MER0004",
        "    tags: one, two",
        "    note: [redacted] card ************1111",
        "    instructions:",
        "      <USSD>:",
        "        1. Dial *1#",
        "        2. Say \"hi\"",
        ""]
    html = templates.html_of(summary)
    assert "<dd><code>https://pay.example/x?a=1&amp;b=&lt;2&gt;</code></dd>" in html
    assert "<dd>&lt;USSD&gt;<ol><li>Dial *1#</li><li>Say &#34;hi&#34;</li></ol></dd>" in html
    assert "<b>Ann</b>" not in html and "secret-XYZ" not in html and "4111" not in html
    document = summary.as_dict()["details"]
    assert document[0]["details"][0] == {"name": "payment_url",
                                         "value": "https://pay.example/x?a=1&b=<2>",
                                         "instructions": ()}
