"""The sandbox's state file: what one sandbox did is there when the next one starts on the same
file, after a clean stop (compacted) or a crash (the journal as it was written, even with a
last line cut short). Also the OpenAPI document of every provider route."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import requests
import simplejson
from conftest import KEY, SECRET, Admin, Api, body, error_of
from fastapi.routing import APIRoute

from runner.provider.auth import digest_headers
from runner.sandbox import RunningSandbox

MT = "/v1/money-transfer"
MP = "/v1/merchant-payment"
NAMES = {"firstname": "Ada", "lastname": "Lovelace"}
Factory = Callable[..., RunningSandbox]


# ---------------------------------------------------------------- helpers
class Client:
    """Provider and admin calls to one sandbox."""

    def __init__(self, sb: RunningSandbox) -> None:
        self.sb = sb
        self.api = Api(sb.url, (KEY, SECRET))
        self.admin = Admin(sb.url)

    def close(self) -> None:
        self.api.session.close()
        self.admin.api.session.close()

    def created(self, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        r = self.api.post(path, payload)
        assert r.status_code in (200, 201), r.text
        return body(r)  # type: ignore[no-any-return]

    def quotation(self, name: str) -> dict[str, Any]:
        return self.created(f"{MT}/quotations", {
            "external_id": f"q-{name}", "payer_id": 1, "mode": "SOURCE_AMOUNT",
            "source": {"country_iso_code": "FRA", "currency": "EUR",
                       "amount": Decimal("100.00")},
            "destination": {"currency": "KES"}})

    def transaction(self, name: str, quotation: str | None = None) -> dict[str, Any]:
        return self.created(f"{MT}/quotations/ext-q-{quotation or name}/transactions", {
            "external_id": f"t-{name}", "credit_party_identifier": {"msisdn": "+254700100200"},
            "sender": NAMES, "beneficiary": NAMES, "purpose_of_remittance": "SALARY"})

    def mquotation(self, name: str) -> dict[str, Any]:
        return self.created(f"{MP}/quotations", {
            "external_id": f"mq-{name}", "payment_method_id": 1, "mode": "PAYMENT_AMOUNT",
            "payment": {"country_iso_code": "KEN", "currency": "KES", "amount": Decimal(1000)},
            "collection": {"currency": "EUR"}})

    def payment(self, name: str, quotation: str | None = None) -> dict[str, Any]:
        return self.created(f"{MP}/quotations/ext-mq-{quotation or name}/payments", {
            "external_id": f"p-{name}", "debit_party_identifier": {"msisdn": "+254700100200"},
            "consumer": NAMES, "purpose_of_payment": "OTHER"})

    def flow(self, name: str) -> None:
        """A confirmed transaction (100.00 EUR + 1.50 fee reserved) and a confirmed merchant
        payment (7.13 EUR collected, 0.30 fee), each with its quotation."""
        self.quotation(name)
        self.transaction(name)
        self.created(f"{MT}/transactions/ext-t-{name}/confirm")
        self.mquotation(name)
        self.payment(name)
        self.created(f"{MP}/payments/ext-p-{name}/confirm")

    def get(self, path: str) -> Any:
        r = self.api.get(path)
        assert r.status_code == 200, (path, r.text)
        return body(r)

    def snapshot(self, name: str) -> dict[str, Any]:
        return {"quotation": self.get(f"{MT}/quotations/ext-q-{name}"),
                "transaction": self.get(f"{MT}/transactions/ext-t-{name}"),
                "mquotation": self.get(f"{MP}/quotations/ext-mq-{name}"),
                "payment": self.get(f"{MP}/payments/ext-p-{name}"),
                "balances": self.get(f"{MT}/balances"),
                "merchant_balances": self.get(f"{MP}/balances")}

    def statuses(self, name: str) -> tuple[str, str]:
        return (self.get(f"{MT}/transactions/ext-t-{name}")["status"],
                self.get(f"{MP}/payments/ext-p-{name}")["status"])

    def eur(self) -> tuple[Decimal, Decimal, Decimal]:
        """(balance, available balance, merchant balance) in EUR."""
        mt = {b["currency"]: b for b in self.get(f"{MT}/balances")}["EUR"]
        mp = {b["currency"]: b for b in self.get(f"{MP}/balances")}["EUR"]
        return mt["balance"], mt["available_balance"], mp["balance"]


def start(factory: Factory, path: Path, **overrides: Any) -> Client:
    return Client(factory(state_file=path, **overrides))


def stop(client: Client) -> None:
    client.close()
    client.sb.stop()


def journal_lines(path: Path) -> list[dict[str, Any]]:
    return [simplejson.loads(line, use_decimal=True)
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


RESERVED = (Decimal("10000000.00"), Decimal("9999898.50"), Decimal("0.00"))
SETTLED = (Decimal("9999898.50"), Decimal("9999898.50"), Decimal("6.83"))


def assert_refused_as_reused(c: Client, name: str) -> None:
    """Every external_id of ``flow(name)`` is still taken."""
    other = f"{name}-new"
    c.quotation(other)
    c.mquotation(other)
    api = c.api
    mt_quote = {"external_id": f"q-{name}", "payer_id": 1, "mode": "SOURCE_AMOUNT",
                "source": {"country_iso_code": "FRA", "currency": "EUR",
                           "amount": Decimal("5.00")},
                "destination": {"currency": "KES"}}
    assert error_of(api.post(f"{MT}/quotations", mt_quote)) == (400, "1007001")
    txn = {"external_id": f"t-{name}", "credit_party_identifier": {"msisdn": "+254700100200"},
           "sender": NAMES, "beneficiary": NAMES, "purpose_of_remittance": "SALARY"}
    assert error_of(api.post(f"{MT}/quotations/ext-q-{other}/transactions", txn)) == \
        (400, "1007001")
    mp_quote = {"external_id": f"mq-{name}", "payment_method_id": 1, "mode": "PAYMENT_AMOUNT",
                "payment": {"country_iso_code": "KEN", "currency": "KES",
                            "amount": Decimal(500)},
                "collection": {"currency": "EUR"}}
    assert error_of(api.post(f"{MP}/quotations", mp_quote)) == (400, "1007001")
    payment = {"external_id": f"p-{name}", "debit_party_identifier": {"msisdn": "+254700100200"},
               "consumer": NAMES, "purpose_of_payment": "OTHER"}
    assert error_of(api.post(f"{MP}/quotations/ext-mq-{other}/payments", payment)) == \
        (400, "1007001")
    # confirmed before the restart: still confirmed
    assert error_of(api.post(f"{MT}/transactions/ext-t-{name}/confirm")) == (400, "1007002")
    assert error_of(api.post(f"{MP}/payments/ext-p-{name}/confirm")) == (400, "1007002")


# ---------------------------------------------------------------- clean restart
def test_clean_restart_keeps_everything(sandbox_factory: Factory, tmp_path: Path) -> None:
    path = tmp_path / "state.jsonl"
    first = start(sandbox_factory, path)
    first.flow("a")
    before = first.snapshot("a")
    assert first.statuses("a") == ("20000", "20000")
    assert first.eur() == RESERVED
    stop(first)
    # a clean stop compacts the journal: one line per record
    lines = journal_lines(path)
    keys = [(rec["k"], rec["id"]) for rec in lines]
    assert len(keys) == len(set(keys))

    second = start(sandbox_factory, path)
    assert second.snapshot("a") == before
    assert second.eur() == RESERVED  # the reservation is kept
    assert_refused_as_reused(second, "a")
    # sequences carry on: new ids are larger than any from before the restart
    assert second.get(f"{MT}/quotations/ext-q-a-new")["id"] > before["quotation"]["id"]
    assert second.get(f"{MP}/quotations/ext-mq-a-new")["id"] > before["mquotation"]["id"]
    assert second.transaction("b", "a-new")["id"] > before["transaction"]["id"]
    assert second.payment("b", "a-new")["id"] > before["payment"]["id"]
    # and the lifecycle goes on where it was
    second.admin.advance(60)
    assert second.statuses("a") == ("50000", "50000")
    second.admin.advance(60)
    assert second.statuses("a") == ("70000", "70000")
    assert second.eur() == SETTLED
    stop(second)


def test_clock_does_not_go_back_across_a_restart(sandbox_factory: Factory,
                                                  tmp_path: Path) -> None:
    path = tmp_path / "state.jsonl"
    first = start(sandbox_factory, path)
    first.flow("a")
    first.admin.advance(60)
    assert first.statuses("a") == ("50000", "50000")
    first.mquotation("late")
    first.admin.advance(3601)  # past the quotation's expiry (the TTL is 3600 s)
    offset = first.admin.api.get("/clock")
    assert offset.status_code == 200
    stop(first)

    second = start(sandbox_factory, path)
    assert body(second.admin.api.get("/clock"))["offset"] >= body(offset)["offset"]
    # an expired quotation stays expired
    r = second.api.post(f"{MP}/quotations/ext-mq-late/payments", {
        "external_id": "p-late", "debit_party_identifier": {"msisdn": "+254700100200"},
        "consumer": NAMES, "purpose_of_payment": "OTHER"})
    assert error_of(r) == (400, "1008003")
    assert second.statuses("a") == ("70000", "70000")
    stop(second)


def test_lifecycle_half_way_resumes_after_restart(sandbox_factory: Factory,
                                                   tmp_path: Path) -> None:
    path = tmp_path / "state.jsonl"
    first = start(sandbox_factory, path)
    first.flow("a")
    first.admin.advance(60)
    assert first.statuses("a") == ("50000", "50000")
    stop(first)

    second = start(sandbox_factory, path)
    assert second.statuses("a") == ("50000", "50000")
    second.admin.advance(60)  # the complete delay, counted from the submission
    assert second.statuses("a") == ("70000", "70000")
    assert second.eur() == SETTLED
    stop(second)


def test_used_nonce_is_still_refused_after_a_clean_restart(sandbox_factory: Factory,
                                                           tmp_path: Path) -> None:
    path = tmp_path / "state.jsonl"
    signed = digest_headers(KEY, SECRET)
    first = start(sandbox_factory, path, nonce_check="strict")
    with requests.Session() as http:
        assert http.get(first.sb.url + "/ping", headers=signed, timeout=60).status_code == 200
        replay = http.get(first.sb.url + "/ping", headers=signed, timeout=60)
        assert error_of(replay) == (401, "1000401")
        stop(first)

        second = start(sandbox_factory, path, nonce_check="strict")
        replay = http.get(second.sb.url + "/ping", headers=signed, timeout=60)
        assert error_of(replay) == (401, "1000401")
        assert "nonce" in body(replay)["errors"][0]["message"]
        fresh = http.get(second.sb.url + "/ping", headers=digest_headers(KEY, SECRET),
                         timeout=60)
        assert fresh.status_code == 200
    stop(second)


# ---------------------------------------------------------------- crash
def test_crash_replays_the_journal(sandbox_factory: Factory, tmp_path: Path) -> None:
    path = tmp_path / "state.jsonl"
    running = start(sandbox_factory, path)
    running.flow("a")
    running.admin.advance(60)
    before = running.snapshot("a")
    # the file as a crash would leave it: written while running, never compacted
    crashed = tmp_path / "crashed.jsonl"
    shutil.copyfile(path, crashed)
    lines = journal_lines(crashed)
    assert len(lines) > len({(rec["k"], rec["id"]) for rec in lines})  # not compacted

    after = start(sandbox_factory, crashed)
    assert after.snapshot("a") == before
    assert_refused_as_reused(after, "a")
    after.admin.advance(60)
    assert after.statuses("a") == ("70000", "70000")
    assert after.eur() == SETTLED
    stop(after)
    stop(running)


def test_a_last_line_cut_short_is_tolerated(sandbox_factory: Factory, tmp_path: Path) -> None:
    path = tmp_path / "state.jsonl"
    running = start(sandbox_factory, path)
    running.flow("a")
    before = running.snapshot("a")
    crashed = tmp_path / "crashed.jsonl"
    shutil.copyfile(path, crashed)
    stop(running)
    text = crashed.read_text(encoding="utf-8")
    last = text.splitlines()[-1]
    with crashed.open("a", encoding="utf-8") as f:
        f.write(last[: len(last) // 2])  # a record half written when the process died

    second = start(sandbox_factory, crashed)
    assert second.snapshot("a") == before
    # what this sandbox does is journalled after the broken line, and survives a crash too
    second.flow("b")
    after_b = second.snapshot("b")
    crashed_again = tmp_path / "crashed-again.jsonl"
    shutil.copyfile(crashed, crashed_again)

    third = start(sandbox_factory, crashed_again)
    assert third.snapshot("b") == after_b
    assert third.get(f"{MT}/transactions/ext-t-a")["status"] == "20000"
    stop(third)
    stop(second)


def test_a_last_line_without_its_newline_is_kept(sandbox_factory: Factory,
                                                 tmp_path: Path) -> None:
    path = tmp_path / "state.jsonl"
    running = start(sandbox_factory, path)
    running.flow("a")
    crashed = tmp_path / "crashed.jsonl"
    shutil.copyfile(path, crashed)
    stop(running)
    crashed.write_bytes(crashed.read_bytes().rstrip(b"\n"))  # died before the newline

    second = start(sandbox_factory, crashed)
    second.quotation("b")
    crashed_again = tmp_path / "crashed-again.jsonl"
    shutil.copyfile(crashed, crashed_again)

    third = start(sandbox_factory, crashed_again)
    assert third.get(f"{MT}/quotations/ext-q-b")["external_id"] == "q-b"
    assert third.statuses("a") == ("20000", "20000")
    stop(third)
    stop(second)


# ---------------------------------------------------------------- OpenAPI
def api_routes(routes: list[Any], prefix: str = "") -> list[tuple[str, str]]:
    """(path, method) of every API route; FastAPI 0.16x keeps each included router as one
    entry of ``app.routes``, older versions list its routes."""
    found = []
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            context = getattr(route, "include_context", None)
            found += api_routes(included.routes, prefix + getattr(context, "prefix", ""))
        elif isinstance(route, APIRoute):
            found += [(prefix + route.path, method) for method in sorted(route.methods)]
    return found


def test_openapi_describes_every_provider_route(sandbox: RunningSandbox) -> None:
    with requests.Session() as http:
        r = http.get(sandbox.url + "/openapi.json", timeout=60)
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    routes = [(path, method) for path, method in api_routes(sandbox.app.routes)
              if path == "/ping" or path.startswith((f"{MT}/", f"{MP}/"))]
    assert len({path for path, _ in routes if path.startswith(MP)}) == 11  # ext- shares {ref}
    assert len({path for path, _ in routes if path.startswith(MT)}) >= 24
    assert ("/ping", "GET") in routes
    for path, method in routes:
        assert path in doc["paths"], path
        operation = doc["paths"][path].get(method.lower())
        assert operation is not None, (method, path)
        assert operation["security"] == [{"basic": []}, {"digest": []}]
    schemas = doc["components"]["schemas"]
    with_body = 0
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            if "requestBody" not in operation:
                continue
            with_body += 1
            ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.startswith("#/components/schemas/"), (method, path)
            assert ref.rsplit("/", 1)[1] in schemas
    assert with_body >= 8
    quotation = doc["paths"][f"{MP}/quotations"]["post"]
    assert quotation["requestBody"]["content"]["application/json"]["schema"]["$ref"] == \
        "#/components/schemas/MerchantQuotationRequest"
    assert set(schemas["MerchantQuotationRequest"]["required"]) >= {
        "external_id", "payment_method_id", "mode", "payment", "collection"}
    security = doc["components"]["securitySchemes"]
    assert security["basic"] == {"type": "http", "scheme": "basic"}
    assert (security["digest"]["type"], security["digest"]["in"],
            security["digest"]["name"]) == ("apiKey", "header", "X-Svc-hmac")
