"""The ``legacy_pay`` kind end to end against a loopback sandbox: Pay in JSON and in XML, the
ReturnCodes (1000 paid; 3000 refused; 5000 and a lost answer unknown, never sent again; 5050
retried), a run killed with a Pay in flight, card data kept out of the state, the logs and the
reports, credentials from the environment, and the offline checks.

The judge is the sandbox: the payment orders each Pay made (``MerchantOrder.Id`` is the
order's external id) and the calls it received.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, PATIENCE, SECRET, Admin, Api, body
from engine_support import cli, err_lines, items, out_lines, run

from runner.errors import (
    AuthenticationError,
    BusinessRefusal,
    InvalidRequest,
    NotFound,
    PayRefused,
    PayStatusUnknown,
    ServerError,
    ServiceUnavailable,
    UnexpectedAnswer,
)
from runner.provider.errors import error_from_answer
from runner.provider.legacy import PAY as PAY_PATH
from runner.provider.legacy import LegacyPayClient, read_answer, xml_request
from runner.sandbox import RunningSandbox
from runner.state import open_state

NAME = "shop-2026-11"
CARD = "5555555555554444"  # a valid test number that is no sandbox trigger: Authorized
CVV = "7319"
REFUSED, ERROR, UNAVAILABLE = "4000000000000002", "4000000000000119", "4000000000000259"
PAY = "POST legacy"  # the sandbox counts calls by endpoint group
JOB = """\
version: 1
name: {name}
kind: legacy_pay
provider: {{base_url: {url}, api_key: {key}, api_secret: {secret}, timeout: {timeout}}}
defaults:
  MerchantId: MER0001
  Currency: EUR
  PaymentPageId: card-eur
  MerchantUrls: {{ReturnUrl: "https://shop.example/return"}}
items:
  from: rows.csv
  external_id: "lp-{{{{ row.id }}}}"
  template:
    Amount: "{{{{ row.amount }}}}"
    format: "{{{{ row.format }}}}"
    MerchantOrder: {{Customer: {{Email: "{{{{ row.id }}}}@example.com"}}}}
    Credentials:
      - {{name: CardNumber, {card}}}
      - {{name: Cvv, credential: "{cvv}"}}
      - {{name: Exp, credential: "209912"}}
run:
  concurrency: {concurrency}
  retry: {{attempts: 3, max_wait: 10ms}}
"""


@pytest.fixture
def sb(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return sandbox_factory()


def write_job(folder: Path, sb: RunningSandbox, rows: list[tuple[str, str, str, str]], *,
              card: str = 'credential: "{{ row.card }}"', concurrency: int = 2,
              timeout: str = "60s") -> Path:
    """A legacy_pay job over ``rows`` of (id, amount, format, card)."""
    lines = ["id,amount,format,card"] + [",".join(r) for r in rows]
    (folder / "rows.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = folder / "job.yaml"
    path.write_text(JOB.format(name=NAME, url=sb.url, key=KEY, secret=SECRET, card=card,
                               cvv=CVV, concurrency=concurrency, timeout=timeout),
                    encoding="utf-8")
    return path


def orders(sb: RunningSandbox) -> dict[str, dict[str, Any]]:
    """The sandbox's payment orders by external id (MerchantOrder.Id)."""
    store = sb.state.store
    with store.lock:
        return {o["external_id"]: dict(o) for o in store.tables["payment_orders"].values()}


def pays(adm: Admin) -> int:
    return int(adm.requests()["counts"].get(PAY, 0))


def attempts(state: Path, external_id: str) -> list[tuple[str, str, str | None]]:
    store = open_state(state)
    try:
        return [(a.step, a.result, a.code) for a in store.attempts(external_id)]
    finally:
        store.close()


def runner(command: str, job: Path, state: Path, *more: str) -> tuple[int, list[str],
                                                                      list[str]]:
    extra = ["--yes"] if command == "run" else []
    result = cli(command, str(job), "--state", str(state), *extra, *more)
    return result.exit_code, out_lines(result), err_lines(result)


# ---------------------------------------------------------------- paid, JSON and XML
def test_json_and_xml_items_are_paid_once(sb: RunningSandbox, adm: Admin, tmp_path: Path,
                                          state: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    sent: list[tuple[str, bytes]] = []
    original = LegacyPayClient.send

    def spy(self: LegacyPayClient, method: str, full_path: str, **kw: Any) -> Any:
        sent.append((kw["headers"]["Content-Type"], kw["data"]))
        return original(self, method, full_path, **kw)

    monkeypatch.setattr(LegacyPayClient, "send", spy)
    job = write_job(tmp_path, sb, [("a", "25.50", "json", CARD), ("b", "12.00", "xml", CARD)],
                    concurrency=1)
    first = run(job, state)
    assert (first.exit_code, first.counts) == (0, {"settled": 2})
    # One body of each form, as the item said.
    assert [kind for kind, _ in sent] == ["application/json; charset=utf-8",
                                          "application/xml; charset=utf-8"]
    assert json.loads(sent[0][1])["PaymentOrder"]["MerchantOrder"] == {
        "Id": "lp-a", "Customer": {"Email": "a@example.com"}}
    assert sent[1][1].startswith(b"<?xml") and b"<Amount>12.00</Amount>" in sent[1][1]
    assert b'<Credential name="CardNumber">' in sent[1][1]
    # MerchantOrder.Id is the item's external_id: each is one payment order, Authorized.
    made = orders(sb)
    assert {e: (o["status"], o["requested"]["amount"]) for e, o in made.items()} == {
        "lp-a": ("Authorized", 25.50), "lp-b": ("Authorized", 12.00)}
    records = items(state, NAME)
    for external_id in ("lp-a", "lp-b"):
        r = records[external_id]
        number = int(made[external_id]["id"][2:])
        assert (r["step"], r["outcome"], r["status"], r["intent"], r["transaction_id"],
                r["provider_ref"], r["source_currency"]) == (
            "final", "settled", "Authorized", None, number, external_id, "EUR")
        assert json.loads(r["details"]) == {"MerchantOrder.Id": external_id,
                                            "PaymentOrderId": number}
        assert attempts(state, external_id) == [("pay", "ok", None)]

    again = run(job, state)
    assert (again.exit_code, again.counts) == (0, {"settled": 2})
    assert pays(adm) == 2 and len(orders(sb)) == 2  # nothing sent again


def test_the_item_may_name_its_merchant_order_id(sb: RunningSandbox, tmp_path: Path,
                                                 state: Path) -> None:
    job = write_job(tmp_path, sb, [("a", "5.00", "xml", CARD)])
    text = job.read_text().replace('MerchantOrder: {Customer:',
                                   'MerchantOrder: {Id: "order-{{ row.id }}", Customer:')
    job.write_text(text)
    assert run(job, state).exit_code == 0
    assert list(orders(sb)) == ["order-a"]
    assert items(state, NAME)["lp-a"]["provider_ref"] == "order-a"


# ---------------------------------------------------------------- refusals and doubt
def test_a_refused_card_fails_with_its_code_and_is_not_sent_again(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, [("a", "10.00", "json", CARD), ("r", "10.00", "xml", REFUSED)])
    expected = [f"{NAME}: 2 items: 1 settled, 1 failed", "  EUR: sent 10.00",
                "  failed lp-r (row 3): 3000 Operation refused: the card was refused"]
    assert runner("run", job, state) == (1, expected, [])
    r = items(state, NAME)["lp-r"]
    assert (r["step"], r["outcome"], r["status"], r["error_code"]) == (
        "final", "failed", "Refused", "3000")
    assert orders(sb)["lp-r"]["status"] == "Refused"
    assert runner("run", job, state) == (1, expected, [])
    assert pays(adm) == 2  # the refusal is final: never retried


def test_a_status_unknown_card_is_left_for_a_person_and_never_sent_again(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, [("e", "10.00", "json", ERROR)])
    code, out, err = runner("run", job, state)
    assert (code, out[0], err) == (1, f"{NAME}: 1 items: 1 unknown", [])
    assert out[1].startswith("  needs a person lp-e (row 2): the Pay answered 5000 (Remote "
                             "technical error, status unknown: the card issuer failed): "
                             "whether it paid is unknown. Check the payment order "
                             f"(PaymentOrderId {int(orders(sb)['lp-e']['id'][2:])}, "
                             "MerchantOrder.Id lp-e) at the provider; runner never sends this "
                             "Pay again"), out
    assert attempts(state, "lp-e") == [("pay", "in_doubt", "5000")]
    assert runner("status", job, state) == (1, out, [])
    assert runner("run", job, state)[0] == 1
    assert pays(adm) == 1 and orders(sb)["lp-e"]["status"] == "Error"


def test_a_person_resolves_an_unknown_item_and_runs_are_clean_again(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, [("e", "10.00", "json", ERROR), ("p", "12.00", "json",
                                                                   "4111111111111111")])
    assert runner("run", job, state)[0] == 1
    code, out, err = runner("resolve", job, state, "lp-p", "--outcome", "failed",
                            "--note", "x")
    assert (code, err) == (1, ["error: lp-p is settled: only unknown or conflict items are "
                               "resolved by hand"])
    assert runner("resolve", job, state, "lp-e", "--outcome", "failed", "--note",
                  "order in status Error in the back office") == (
        0, ["lp-e: failed (resolved by hand)"], [])
    assert attempts(state, "lp-e")[-1] == ("resolve", "failed", None)
    code, out, _ = runner("status", job, state)
    assert out[0] == f"{NAME}: 2 items: 1 settled, 1 failed"
    assert any(line.startswith("  failed lp-e (row 2): resolved by hand: order in "
                               "status Error") for line in out), out
    assert runner("run", job, state)[0] == 1  # a failed item still says so
    assert pays(adm) == 2


@pytest.mark.parametrize("fault", ["lost_next", "error_next"])
def test_a_pay_whose_answer_is_lost_or_5xx_is_unknown_and_never_sent_again(
        fault: str, sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    adm.faults({"legacy": {fault: 1}})
    job = write_job(tmp_path, sb, [("a", "10.00", "json", CARD)])
    first = run(job, state)
    assert (first.exit_code, first.counts) == (1, {"unknown": 1})
    r = items(state, NAME)["lp-a"]
    assert (r["step"], r["outcome"], r["intent"]) == ("final", "unknown", None)
    assert "MerchantOrder.Id lp-a" in r["error_message"]
    assert attempts(state, "lp-a") == [("pay", "in_doubt", None if fault == "lost_next"
                                        else "9500")]
    # A lost answer: the Pay was made. An injected 500: it was not. Either way runner
    # cannot know, and a person checks; nothing is sent again.
    assert list(orders(sb)) == (["lp-a"] if fault == "lost_next" else [])
    assert run(job, state).exit_code == 1
    assert pays(adm) == 1


def test_remote_server_unavailable_is_retried_safely(sb: RunningSandbox, adm: Admin,
                                                     tmp_path: Path, state: Path) -> None:
    adm.faults({"legacy": {"unavailable_next": 2}})
    job = write_job(tmp_path, sb, [("a", "10.00", "xml", CARD)])
    result = run(job, state)
    assert (result.exit_code, result.counts) == (0, {"settled": 1})
    assert pays(adm) == 3 and len(orders(sb)) == 1
    assert attempts(state, "lp-a") == [("pay", "ok", None)]


def test_an_issuer_that_stays_unavailable_ends_the_run_with_75_and_nothing_made(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, [("u", "10.00", "json", UNAVAILABLE)], concurrency=1)
    result = run(job, state)
    assert (result.exit_code, result.counts) == (75, {"pending": 1})
    assert pays(adm) == 3 and orders(sb) == {}  # every try said 5050: retried, nothing made
    r = items(state, NAME)["lp-u"]
    assert (r["step"], r["outcome"], r["intent"]) == ("new", "pending", None)
    assert attempts(state, "lp-u") == [("pay", "error", "5050")]


def test_a_run_killed_with_a_pay_in_flight_leaves_it_unknown(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    # The sandbox makes the order, then holds the answer; the runner is killed meanwhile.
    adm.faults({"legacy": {"slow_next": 1}}, slow_seconds=10)
    job = write_job(tmp_path, sb, [("a", "10.00", "json", CARD)], timeout="30s")
    child = subprocess.Popen([sys.executable, "-m", "runner", "run", str(job), "--yes",
                              "--state", str(state), "-q"], cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.monotonic() + PATIENCE
        while "lp-a" not in orders(sb) and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert "lp-a" in orders(sb)
    assert items(state, NAME)["lp-a"]["intent"] == "pay"  # sent, its answer never recorded

    resumed = run(job, state)
    assert (resumed.exit_code, resumed.counts) == (1, {"unknown": 1})
    r = items(state, NAME)["lp-a"]
    assert (r["outcome"], r["intent"]) == ("unknown", None)
    assert "its answer was never recorded" in r["error_message"]
    assert attempts(state, "lp-a") == [("pay", "in_doubt", None)]
    assert pays(adm) == 1  # the resumed run sent nothing


class Died(BaseException):
    """The process ends here (as under SIGKILL, nothing after it runs)."""


def test_a_run_dying_as_it_tells_a_pay_unknown_never_lets_it_be_sent_again(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run dies at the moment it tells why a Pay is unknown, twice: after the Pay's answer
    was lost, and after a Pay left in flight by an earlier run was found. What was written
    before keeps the Pay unknown or in doubt: no later run sends it again."""
    from runner.engine.legacy_pay import LegacyPayFlow

    def dies(*args: Any, **kwargs: Any) -> None:
        raise Died

    adm.faults({"legacy": {"lost_next": 1}})
    lost = write_job(tmp_path, sb, [("a", "10.00", "json", CARD)])
    with monkeypatch.context() as m:
        m.setattr(LegacyPayFlow, "_unknown", dies)
        with pytest.raises(Died):
            run(lost, state)
    assert (items(state, NAME)["lp-a"]["step"], run(lost, state).counts) == (
        "final", {"unknown": 1})
    assert pays(adm) == 1

    pay = LegacyPayClient.pay
    in_flight = tmp_path / "in-flight"
    in_flight.mkdir()
    killed = write_job(in_flight, sb, [("b", "10.00", "json", CARD)])
    with monkeypatch.context() as m:  # sent, and the run gone before its answer is read
        m.setattr(LegacyPayClient, "pay", lambda *a, **k: (pay(*a, **k), dies())[0])
        with pytest.raises(Died):
            run(killed, in_flight / "s.sqlite")
        m.setattr(LegacyPayFlow, "_unknown", dies)
        with pytest.raises(Died):  # the next run finds it, and dies telling why
            run(killed, in_flight / "s.sqlite")
    assert items(in_flight / "s.sqlite", NAME)["lp-b"]["intent"] == "pay"
    again = run(killed, in_flight / "s.sqlite")
    assert (again.exit_code, again.counts) == (1, {"unknown": 1})
    assert pays(adm) == 2 and list(orders(sb)) == ["lp-a", "lp-b"]


def test_a_lost_state_database_cannot_pay_twice(sb: RunningSandbox, adm: Admin,
                                                 tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, [("a", "10.00", "json", CARD)])
    assert run(job, state).exit_code == 0
    for f in tmp_path.glob("s.sqlite*"):
        f.unlink()
    again = run(job, state)
    # The same MerchantOrder.Id was refused as used (2500): maybe this item, paid by a run
    # whose state is gone, maybe not; a person checks.
    assert (again.exit_code, again.counts) == (1, {"unknown": 1})
    r = items(state, NAME)["lp-a"]
    assert (r["error_code"], r["step"]) == ("2500", "final")
    assert r["error_message"].startswith("the provider already holds a payment order with "
                                         "MerchantOrder.Id lp-a")
    assert pays(adm) == 2 and len(orders(sb)) == 1


# ---------------------------------------------------------------- card data
def test_card_data_is_never_stored_logged_or_reported(sb: RunningSandbox, adm: Admin,
                                                      tmp_path: Path, state: Path) -> None:
    adm.faults({"legacy": {"lost_next": 1}})
    job = write_job(tmp_path, sb, [("lost", "1.00", "json", CARD),
                                   ("a", "2.00", "xml", CARD), ("r", "3.00", "json", REFUSED),
                                   ("e", "4.00", "xml", ERROR)], concurrency=1)
    seen = []
    for command, more in (("run", ["-v"]), ("status", []), ("report", ["--format", "json"]),
                          ("report", ["--format", "csv"]), ("report", ["--format", "html"])):
        result = cli(command, str(job), "--state", str(state),
                     *(["--yes"] if command == "run" else []), *more)
        seen.append(result.stdout + result.stderr)
    # The run logged (at debug level too), and the report shows the cards' last four digits.
    assert "INFO pay: 4 item(s)" in seen[0] and "DEBUG pay lp-r: final Refused" in seen[0]
    assert "************4444" in seen[2]
    # Everything runner wrote: the state database (and its WAL) and the reports; the job
    # file and its rows, where the person put the card, are its input.
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name not in ("rows.csv",
                                                                               "job.yaml")]
    assert any(p.suffix == ".html" for p in files) and any(p.name.startswith("s.sqlite")
                                                           for p in files)
    texts = [p.read_bytes() for p in files] + [s.encode() for s in seen]
    for number in (CARD, REFUSED, ERROR, CVV):
        # As a whole token: the state's hex fingerprints and timestamps hold digits too.
        token = re.compile(rb"(?<![0-9A-Fa-f])" + number.encode() + rb"(?![0-9A-Fa-f])")
        leaks = [str(p) for p, t in zip(files + ["output"] * len(seen), texts,
                                        strict=True) if token.search(t)]
        assert leaks == [], number
    store = open_state(state)
    try:
        requests = [json.loads(a.request) for e in ("lp-lost", "lp-a", "lp-r", "lp-e")
                    for a in store.attempts(e)]
    finally:
        store.close()
    assert {json.dumps(r["Credentials"]) for r in requests} == {json.dumps([
        {"name": "CardNumber", "credential": "************4444"}, {"name": "Exp"}]), json.dumps([
        {"name": "CardNumber", "credential": "************0002"}, {"name": "Exp"}]), json.dumps([
        {"name": "CardNumber", "credential": "************0119"}, {"name": "Exp"}])}


def test_the_fingerprint_is_not_a_hash_of_card_data() -> None:
    from runner.engine.flow import fingerprint as _fingerprint
    from runner.engine.legacy_pay import LegacyPayFlow
    from runner.kinds import kind_named

    def item(card: str, cvv: str) -> Any:
        return kind_named("legacy_pay").item.model_validate({
            "MerchantId": "MER0001", "Amount": "1.00", "Currency": "EUR",
            "PaymentPageId": "card-eur", "MerchantUrls": {},
            "Credentials": [{"name": "CardNumber", "credential": card},
                            {"name": "Cvv", "credential": cvv},
                            {"name": "Exp", "credential": "209912"}]})

    flow = LegacyPayFlow.__new__(LegacyPayFlow)  # fingerprinted needs no client or state
    kept = flow.fingerprinted(item(CARD, CVV)).model_dump_json()
    assert CARD not in kept and CVV not in kept and "************4444" in kept
    # Only what may be kept counts: the same last four and another CVV fingerprint alike.
    assert _fingerprint(flow.fingerprinted(item(CARD, CVV))) == _fingerprint(
        flow.fingerprinted(item("4444333322224444", "123")))
    assert _fingerprint(flow.fingerprinted(item(CARD, CVV))) != _fingerprint(
        flow.fingerprinted(item("4111111111111111", CVV)))


# ---------------------------------------------------------------- credentials from the env
def test_each_row_may_name_the_environment_variable_holding_its_card(
        sb: RunningSandbox, tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    monkeypatch.setenv("CARD_SHOP_A", CARD)
    monkeypatch.setenv("CARD_SHOP_R", REFUSED)
    job = write_job(tmp_path, sb, [("a", "10.00", "json", "CARD_SHOP_A"),
                                   ("r", "10.00", "json", "CARD_SHOP_R")],
                    card='credential_env: "{{ row.card }}"')
    result = run(job, state)
    assert (result.exit_code, result.counts) == (1, {"settled": 1, "failed": 1})
    assert orders(sb)["lp-a"]["status"] == "Authorized"
    assert orders(sb)["lp-r"]["status"] == "Refused"
    assert json.loads(items(state, NAME)["lp-a"]["summary"]) == {
        "beneficiary": "MER0001", "identifier": {"card": "************4444"},
        "planned": ["EUR", "10.00"]}


def test_an_unset_card_variable_is_invalid_and_nothing_is_sent(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CARD_NOWHERE", raising=False)
    job = write_job(tmp_path, sb, [("a", "10.00", "json", "CARD_NOWHERE")],
                    card='credential_env: "{{ row.card }}"')
    code, out, _ = runner("validate", job, state)
    assert code == 2
    assert out == [f"{tmp_path / 'rows.csv'}:2: Credentials.0.credential_env: environment "
                   "variable CARD_NOWHERE is not set",
                   f"{job}: 1 items, 0 valid, 1 invalid"]
    assert run(job, state).exit_code == 2 and pays(adm) == 0


def test_offline_checks_name_the_field_and_never_the_card(sb: RunningSandbox, adm: Admin,
                                                          tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, [("luhn", "1.00", "json", "5555555555554443"),
                                   ("cents", "1.005", "json", CARD), ("ok", "1.00", "json", CARD)])
    text = job.read_text().replace('credential: "209912"', 'credential: "202001"')
    job.write_text(text)
    code, out, _ = runner("validate", job, state)
    assert code == 2
    rows = tmp_path / "rows.csv"
    assert out == [
        f"{rows}:2: Credentials.0.credential: CardNumber is not a card number (12 to 19 "
        "digits, Luhn check)",
        f"{rows}:2: Credentials.2.credential: the card has expired (Exp is in the past)",
        f"{rows}:3: Amount: 1.005 has more than 2 decimals",
        f"{rows}:3: Credentials.2.credential: the card has expired (Exp is in the past)",
        f"{rows}:4: Credentials.2.credential: the card has expired (Exp is in the past)",
        f"{job}: 3 items, 0 valid, 3 invalid"]
    assert not any(CARD in line or "5555555555554443" in line for line in out)
    assert pays(adm) == 0


def test_the_example_job_runs_to_exit_0_twice(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RUNNER_BASE_URL", "RUNNER_API_KEY", "RUNNER_API_SECRET", "CARD_NUMBER",
                 "CARD_CVV", "CARD_EXP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    state = tmp_path / "s.sqlite"
    for _ in range(2):
        result = cli("run", "jobs/legacy-pay.yaml", "--yes", "--state", str(state))
        assert (result.exit_code, out_lines(result)) == (0, [
            "legacy-pay-2026-11: 4 items: 4 settled", "  EUR: sent 145.39"])
    records = items(state, "legacy-pay-2026-11")
    assert {r["status"] for r in records.values()} == {"Authorized"}
    forms = [json.loads(a.request)["format"] for e in sorted(records)
             for a in _attempts_of(state, e)]
    assert forms == ["json", "xml", "json", "xml"]


def _attempts_of(state: Path, external_id: str) -> list[dict[str, Any]]:
    store = open_state(state)
    try:
        return store.attempts(external_id)
    finally:
        store.close()


# ---------------------------------------------------------------- the client on its own
@pytest.mark.parametrize(("code", "status", "error", "retry"), [
    (2000, 400, InvalidRequest, "unsafe"), (2500, 400, BusinessRefusal, "unsafe"),
    (3000, 400, PayRefused, "unsafe"), (5000, 400, PayStatusUnknown, "lookup"),
    (5050, 400, ServiceUnavailable, "safe"), (9400, 400, InvalidRequest, "unsafe"),
    (9401, 401, AuthenticationError, "unsafe"), (9403, 403, AuthenticationError, "unsafe"),
    (9404, 404, NotFound, "unsafe"), (9405, 405, InvalidRequest, "unsafe"),
    (9500, 500, ServerError, "lookup")])
def test_return_codes_map_onto_the_error_tree(code: int, status: int, error: type[Exception],
                                              retry: str) -> None:
    found = error_from_answer(status, {"ReturnCode": code, "ReturnMessage": "m",
                                       "PaymentOrderId": 7, "Status": "Refused"},
                              f"POST {PAY_PATH}", "x")
    assert type(found) is error and found.retry.value == retry
    assert (found.code, found.message, found.status) == (str(code), "m", status)
    if isinstance(found, PayRefused | PayStatusUnknown):
        assert (found.payment_order_id, found.order_status) == (7, "Refused")


@pytest.mark.parametrize(("status", "error"), [(502, ServerError), (200, UnexpectedAnswer),
                                               (503, ServiceUnavailable),
                                               (400, UnexpectedAnswer)])
def test_an_unreadable_answer_is_in_doubt_unless_its_status_says(status: int,
                                                                 error: type[Exception]) -> None:
    """A 5xx may have paid, a 503 did nothing; any other answer that cannot be read proves
    nothing either way: it is in doubt, never a refusal (the Pay is then never sent again,
    and a person checks)."""
    assert type(error_from_answer(status, None, f"POST {PAY_PATH}", None)) is error


def test_xml_is_written_and_read_back() -> None:
    from decimal import Decimal

    raw = xml_request({"MerchantId": "M", "Amount": Decimal("1E+1"), "Skipped": None,
                       "MerchantOrder": {"Id": "o&1"}}, [{"name": "Cvv", "credential": "1"}])
    assert raw == (b"<?xml version='1.0' encoding='utf-8'?>\n<Request><PaymentOrder>"
                   b"<MerchantId>M</MerchantId><Amount>10</Amount><MerchantOrder><Id>o&amp;1</Id>"
                   b"</MerchantOrder></PaymentOrder><Credentials><Credential name=\"Cvv\">1"
                   b"</Credential></Credentials></Request>")
    answer = b"<Response><ReturnCode>1000</ReturnCode><Status>Authorized</Status></Response>"
    assert read_answer(answer, "application/xml", "json") == {"ReturnCode": "1000",
                                                              "Status": "Authorized"}
    bomb = b'<!DOCTYPE r [<!ENTITY a "aaaa">]><Response>&a;</Response>'
    assert read_answer(bomb, "text/xml", "xml") is None
    assert read_answer(b'{"ReturnCode": 1000}', None, "json") == {"ReturnCode": 1000}
    assert read_answer(b"<html>", "text/html", "json") is None


def test_the_sandbox_answers_in_the_form_asked(sb: RunningSandbox) -> None:
    client = LegacyPayClient(sb.url, KEY, SECRET)
    order = {"MerchantId": "MER0001", "Amount": "3.10", "Currency": "EUR",
             "PaymentPageId": "card-eur", "MerchantOrder": {"Id": "direct-1"}}
    card = [{"name": "CardNumber", "credential": CARD}, {"name": "Cvv", "credential": CVV},
            {"name": "Exp", "credential": "209912"}]
    answer = client.pay(order, card, "xml")
    assert (answer["ReturnCode"], answer["Status"]) == (1000, "Authorized")
    assert isinstance(answer["PaymentOrderId"], int)
    with pytest.raises(BusinessRefusal) as used:
        client.pay(order, card, "json")
    assert (used.value.code, used.value.status) == ("2500", 400)
    got = Api(sb.url, (KEY, SECRET)).get("/v1/payment/payment-orders/direct-1")
    assert body(got)["payment_methods"][0]["holder_id"] == "************4444"
