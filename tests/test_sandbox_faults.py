"""Fault injection of the sandbox, over real HTTP: latency, errors and 503s that do nothing,
lost and slow answers whose work is done, seeded rates, the ``*`` rule, the admin API, and
the ``runner sandbox serve`` flags (parsed, and one real process)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from decimal import Decimal
from typing import Any

import requests
from click.testing import CliRunner
from conftest import KEY, PATIENCE, SECRET, Api, body, ending, error_of

import runner.sandbox.server
from runner.cli import main
from runner.provider.auth import DigestAuth
from runner.sandbox import FaultRule, SandboxConfig

MT = "/v1/money-transfer"
SERVICES = f"{MT}/services"
QUOTATION = {"external_id": "q-1", "payer_id": 1, "mode": "SOURCE_AMOUNT",
             "source": {"country_iso_code": "FRA", "currency": "EUR",
                        "amount": Decimal("100.00")},
             "destination": {"currency": "KES"}}
TRANSACTION = {"external_id": "t-1", "credit_party_identifier": {"msisdn": "+254700100200"},
               "sender": {"firstname": "Ada", "lastname": "Lovelace"},
               "beneficiary": {"firstname": "Wanjiru", "lastname": "Kamau"},
               "purpose_of_remittance": "SALARY"}
CREATE = f"{MT}/quotations/ext-q-1/transactions"
CONFIRM = f"{MT}/transactions/ext-t-1/confirm"
UNEXPECTED = "Unexpected error, contact support"
UNAVAILABLE = "Service temporarily unavailable, retry later"


def message(response: requests.Response) -> str:
    return body(response)["errors"][0]["message"]


def eur_available(api: Api) -> Decimal:
    balances = body(api.get(f"{MT}/balances"))
    return next(b["available_balance"] for b in balances if b["currency"] == "EUR")


def quote(api: Api) -> dict[str, Any]:
    r = api.post(f"{MT}/quotations", QUOTATION)
    assert r.status_code == 201, r.text
    return body(r)


# ---------------------------------------------------------------- latency
def test_latency_delays_calls_of_its_group(sandbox, api, admin):
    admin.faults({"discovery": {"latency_ms": 30.5}})  # a fraction, as JSON sends it
    rule = body(admin.api.get("/faults"))["rules"]
    assert set(rule) == {"discovery"}
    assert rule["discovery"]["latency_ms"] == Decimal("30.5")
    for _ in range(2):
        start = time.perf_counter()
        r = api.get(SERVICES)
        assert r.status_code == 200
        assert time.perf_counter() - start >= 0.0305
    # Other groups have no rule of their own and no `*` rule: answered, and normally.
    assert api.get("/ping").status_code == 200
    assert api.get(f"{MT}/balances").status_code == 200


def test_latency_from_the_config_applies_to_every_group(sandbox_factory):
    sb = sandbox_factory(faults={"*": FaultRule(latency_ms=25)})
    with requests.Session() as s:
        for path in ("/ping", SERVICES, f"{MT}/balances"):
            start = time.perf_counter()
            assert s.get(sb.url + path, auth=(KEY, SECRET), timeout=60).status_code == 200
            assert time.perf_counter() - start >= 0.025, path


# ---------------------------------------------------------------- error, unavailable
def test_error_next_answers_500_and_does_nothing(sandbox, api, admin):
    admin.faults({"quotations": {"error_next": 2}})
    for _ in range(2):
        r = api.post(f"{MT}/quotations", QUOTATION)
        assert error_of(r) == (500, "1009001")
        assert message(r) == UNEXPECTED
    assert error_of(api.get(f"{MT}/quotations/ext-q-1")) == (404, "1008002")
    # Only the next two calls: the third one quotes, and the external id was still free.
    assert quote(api)["external_id"] == "q-1"


def test_unavailable_next_answers_503_with_retry_after_and_does_nothing(sandbox, api, admin):
    quote(api)
    admin.faults({"create": {"unavailable_next": 1}})
    r = api.post(CREATE, TRANSACTION)
    assert error_of(r) == (503, "1009001")
    assert message(r) == UNAVAILABLE
    assert int(r.headers["Retry-After"]) >= 0
    assert error_of(api.get(f"{MT}/transactions/ext-t-1")) == (404, "1008004")
    r = api.post(CREATE, TRANSACTION)
    assert r.status_code == 201, r.text
    assert body(r)["status"] == "10000"


def test_error_fault_on_confirm_reserves_nothing(sandbox, api, admin):
    quote(api)
    assert api.post(CREATE, TRANSACTION).status_code == 201
    before = eur_available(api)
    admin.faults({"confirm": {"error_next": 1}})
    assert error_of(api.post(CONFIRM)) == (500, "1009001")
    assert body(api.get(f"{MT}/transactions/ext-t-1"))["status"] == "10000"
    assert eur_available(api) == before


# ---------------------------------------------------------------- lost
def test_lost_answers_do_the_work(sandbox, api, admin):
    before = eur_available(api)

    admin.faults({"quotations": {"lost_next": 1}})
    try:
        api.post(f"{MT}/quotations", QUOTATION)
    except requests.ConnectionError:
        pass
    else:
        raise AssertionError("the quotation's answer was not lost")
    r = api.get(f"{MT}/quotations/ext-q-1")
    assert r.status_code == 200
    quotation = body(r)
    assert error_of(api.post(f"{MT}/quotations", QUOTATION)) == (400, "1007001")

    admin.faults({"create": {"lost_next": 1}})
    try:
        api.post(CREATE, TRANSACTION)
    except requests.ConnectionError:
        pass
    else:
        raise AssertionError("the transaction's answer was not lost")
    txn = body(api.get(f"{MT}/transactions/ext-t-1"))
    assert txn["status"] == "10000"
    assert eur_available(api) == before

    admin.faults({"confirm": {"lost_next": 1}})
    try:
        api.post(CONFIRM)
    except requests.ConnectionError:
        pass
    else:
        raise AssertionError("the confirmation's answer was not lost")
    assert body(api.get(f"{MT}/transactions/ext-t-1"))["status"] == "20000"
    cost = quotation["sent_amount"]["amount"] + quotation["fee"]["amount"]
    assert cost > quotation["sent_amount"]["amount"] > 0
    assert eur_available(api) == before - cost
    assert error_of(api.post(CONFIRM)) == (400, "1007002")

    # The same session goes on normally, and the counters are spent.
    assert api.get("/ping").status_code == 200
    assert body(admin.api.get("/faults"))["rules"]["confirm"]["lost_next"] == 0


def test_lost_answer_is_not_a_http_answer(sandbox, admin):
    admin.faults({"ping": {"lost_next": 1}})
    with requests.Session() as s:
        s.auth = (KEY, SECRET)
        try:
            s.get(sandbox.url + "/ping", timeout=60)
        except requests.ConnectionError as exc:
            assert not isinstance(exc, requests.Timeout)
            assert exc.response is None
        else:
            raise AssertionError("the answer was not lost")
        assert s.get(sandbox.url + "/ping", timeout=60).status_code == 200


# ---------------------------------------------------------------- slow
def test_slow_answer_times_the_client_out_but_the_work_is_done(sandbox, api, admin):
    admin.faults({"quotations": {"slow_next": 1}}, slow_seconds=0.3)
    try:
        api.post(f"{MT}/quotations", QUOTATION, timeout=0.05)
    except requests.ReadTimeout:
        pass
    else:
        raise AssertionError("the slow answer came in time")
    assert body(api.get(f"{MT}/quotations/ext-q-1"))["external_id"] == "q-1"
    assert api.get("/ping").status_code == 200


def test_slow_answer_arrives_after_slow_seconds(sandbox, api, admin):
    admin.faults({"ping": {"slow_next": 1}}, slow_seconds=0.04)
    start = time.perf_counter()
    r = api.get("/ping", timeout=60)
    assert r.status_code == 200
    assert body(r) == {"status": "up"}
    assert time.perf_counter() - start >= 0.04


# ---------------------------------------------------------------- rates
def statuses(sandbox: Any, n: int = 200) -> list[int]:
    with requests.Session() as s:
        s.auth = (KEY, SECRET)
        return [s.get(sandbox.url + SERVICES, timeout=60).status_code for _ in range(n)]


def test_seeded_rates_are_deterministic(sandbox_factory):
    def run(seed: int) -> list[int]:
        sb = sandbox_factory(fault_seed=seed, faults={"discovery": FaultRule(error_rate=0.5)})
        try:
            return statuses(sb)
        finally:
            sb.stop()

    first = run(7)
    assert set(first) == {200, 500}
    assert 50 < first.count(500) < 150
    second = run(7)
    assert second.count(500) == first.count(500)
    assert second == first
    assert run(8) != first


def test_config_rule_objects_are_not_consumed(sandbox_factory):
    faults = {"ping": FaultRule(error_next=1)}
    for _ in range(2):
        sb = sandbox_factory(faults=faults)
        r = requests.get(sb.url + "/ping", auth=(KEY, SECRET), timeout=60)
        assert error_of(r) == (500, "1009001")
    assert faults["ping"].error_next == 1


# ---------------------------------------------------------------- `*` and precedence
def test_star_rule_applies_to_every_group(sandbox, api, admin):
    admin.faults({"*": {"error_next": 4}})
    assert error_of(api.get("/ping")) == (500, "1009001")
    assert error_of(api.get(SERVICES)) == (500, "1009001")
    assert error_of(api.get(f"{MT}/balances")) == (500, "1009001")
    assert error_of(api.post(f"{MT}/quotations", QUOTATION)) == (500, "1009001")
    assert api.get("/ping").status_code == 200
    quote(api)


def test_group_rule_takes_precedence_over_star(sandbox, api, admin):
    admin.faults({"*": {"error_next": 2}, "ping": {"unavailable_next": 1}})
    assert error_of(api.get("/ping")) == (503, "1009001")
    # The ping rule is spent, and `*` still does not apply to ping.
    assert api.get("/ping").status_code == 200
    assert api.get("/ping").status_code == 200
    assert error_of(api.get(SERVICES)) == (500, "1009001")
    assert error_of(api.get(f"{MT}/balances")) == (500, "1009001")
    assert api.get(SERVICES).status_code == 200


# ---------------------------------------------------------------- admin API
def test_admin_refuses_unknown_groups_and_settings(sandbox, api, admin):
    cases = [
        ({"rules": {"bogus": {"error_next": 1}}}, "unknown endpoint group 'bogus'"),
        ({"rules": {"ping": {"explode_rate": 1}}}, "unknown fault settings: explode_rate"),
        ({"rules": {"ping": {"lost_next": "x"}}}, "lost_next must be a non-negative integer"),
        ({"rules": {"ping": {"lost_next": None}}}, "lost_next must be a non-negative integer"),
        ({"rules": {"ping": {"lost_next": Decimal("1.5")}}},
         "lost_next must be a non-negative integer"),
        ({"rules": {"ping": {"error_rate": -1}}}, "error_rate must be a non-negative number"),
        ({"rules": {"ping": {"latency_ms": True}}}, "latency_ms must be a non-negative number"),
        ({"rulez": {}}, "rulez"),
    ]
    for payload, reason in cases:
        r = admin.api.post("/faults", payload)
        assert error_of(r) == (400, "1000999"), (payload, r.text)
        assert reason in message(r), (payload, message(r))
    assert body(admin.api.get("/faults"))["rules"] == {}
    assert api.get("/ping").status_code == 200


def test_admin_delete_faults_clears_every_rule(sandbox, api, admin):
    described = admin.faults({"ping": {"error_next": 5}, "*": {"lost_next": 5}},
                             slow_seconds=0.5)
    assert set(described["rules"]) == {"ping", "*"}
    assert described["slow_seconds"] == Decimal("0.5")
    assert error_of(api.get("/ping")) == (500, "1009001")
    r = admin.api.call("DELETE", "/faults")
    assert r.status_code == 200
    assert body(r)["rules"] == {}
    assert body(admin.api.get("/faults"))["rules"] == {}
    assert api.get("/ping").status_code == 200
    assert api.get(SERVICES).status_code == 200


def test_admin_counts_requests_by_method_and_group(sandbox, api, admin):
    api.get("/ping")
    api.get(SERVICES)
    api.get(f"{MT}/balances")
    api.post(f"{MT}/quotations", QUOTATION)
    requests.get(sandbox.url + "/ping", timeout=60).close()  # refused (401), still counted
    admin.api.get("/clock")  # not a provider call
    seen = admin.requests()
    assert seen["counts"] == {"GET": 4, "GET ping": 2, "GET discovery": 1, "GET balances": 1,
                              "POST": 1, "POST quotations": 1}
    assert [c["path"] for c in seen["recent"]] == ["/ping", SERVICES, f"{MT}/balances",
                                                   f"{MT}/quotations", "/ping"]
    assert seen["recent"][3] == {"method": "POST", "path": f"{MT}/quotations",
                                 "group": "quotations"}
    assert seen["peak_in_flight"] == 1  # one call after the other
    latest = body(admin.api.get("/requests?latest=2"))
    assert [c["path"] for c in latest["recent"]] == [f"{MT}/quotations", "/ping"]
    assert body(admin.api.get("/requests?latest=0"))["recent"] == []

    r = admin.api.call("DELETE", "/requests")
    assert r.status_code == 200
    assert body(r) == {"counts": {}}
    assert admin.requests() == {"counts": {}, "recent": [], "peak_in_flight": 0}
    api.get(f"{MT}/quotations/ext-q-1")
    assert admin.requests()["counts"] == {"GET": 1, "GET lookups": 1}


# ---------------------------------------------------------------- CLI flags
def parse(monkeypatch: Any, args: list[str]) -> tuple[Any, list[SandboxConfig]]:
    captured: list[SandboxConfig] = []
    monkeypatch.setattr(runner.sandbox.server, "serve", captured.append)
    result = CliRunner().invoke(main, ["sandbox", "serve", *args])
    return result, captured


def test_cli_flags_build_the_config(monkeypatch):
    result, captured = parse(monkeypatch, [
        "--port", "0", "--latency-ms", "5", "--fault", "confirm:lost_rate=0.2",
        "--fault", "create:lost_next=2", "--balance", "EUR=100.50:10",
        "--header-brand", "Acme", "--api-key", "K", "--api-secret", "S",
        "--slow-seconds", "0.5", "--fault-seed", "3"])
    assert result.exit_code == 0, result.output
    [config] = captured
    assert config.port == 0
    assert config.api_key == "K"
    assert config.api_secret == "S"
    assert config.header_brand == "Acme"
    assert config.slow_seconds == 0.5
    assert config.fault_seed == 3
    rules = config.faults
    assert set(rules) == {"*", "confirm", "create"}
    assert rules["*"] == FaultRule(latency_ms=5)
    assert rules["confirm"] == FaultRule(latency_ms=5, lost_rate=0.2)
    assert rules["create"] == FaultRule(latency_ms=5, lost_next=2)
    assert isinstance(rules["create"].lost_next, int)
    assert config.balances == {"EUR": (Decimal("100.50"), Decimal("10"))}


def test_cli_defaults(monkeypatch):
    monkeypatch.delenv("RUNNER_API_KEY", raising=False)
    monkeypatch.delenv("RUNNER_API_SECRET", raising=False)
    result, captured = parse(monkeypatch, [])
    assert result.exit_code == 0, result.output
    [config] = captured
    assert config.faults == {}
    assert config.balances is None
    assert (config.host, config.port, config.header_brand) == ("127.0.0.1", 8765, "Svc")
    assert (config.api_key, config.api_secret) == ("sandbox-key", "sandbox-secret")


def test_cli_refuses_bad_fault_and_balance_values(monkeypatch):
    bad = [
        ["--fault", "confirm:lost_rate=abc"],
        ["--fault", "confirm"],
        ["--fault", "confirm:explode_rate=0.2"],
        ["--fault", "confirm:is_quiet=1"],
        ["--fault", "confirms:lost_rate=0.2"],
        ["--balance", "EUR=lots"],
    ]
    for args in bad:
        result, captured = parse(monkeypatch, args)
        assert result.exit_code == 2, (args, result.output)
        assert captured == [], args


# ---------------------------------------------------------------- a real process
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_in_a_real_process():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with ending(subprocess.Popen(
            [sys.executable, "-m", "runner", "sandbox", "serve", "--port", str(port),
             "--api-key", "K", "--api-secret", "S", "--lost-rate", "0", "--submit-delay", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)) as proc:
        try:
            deadline = time.monotonic() + PATIENCE
            with requests.Session() as s:
                while True:
                    assert proc.poll() is None, proc.communicate()
                    try:
                        r = s.get(url + "/ping", auth=("K", "S"), timeout=30)
                        break
                    except requests.ConnectionError:
                        assert time.monotonic() < deadline, "the sandbox did not come up"
                        time.sleep(0.02)
                assert r.status_code == 200
                r = s.get(url + SERVICES, auth=DigestAuth("K", "S"), timeout=60)
                assert r.status_code == 200
                assert len(body(r)) == 3
                assert error_of(s.get(url + SERVICES, auth=(KEY, SECRET), timeout=60)) == \
                    (401, "1000401")
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=PATIENCE)
    # A graceful stop; uvicorn then re-raises the SIGTERM it caught, hence -15 rather than 0.
    assert proc.returncode in (0, -signal.SIGTERM), err
    assert f"sandbox serving on {url}".encode() in err
