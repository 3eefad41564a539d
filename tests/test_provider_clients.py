"""The provider clients against the sandbox: both auth schemes, paginated iterators, lookups
by external id, and every failure mapped to its error class and retry rule."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
from conftest import KEY, SECRET, Admin

from runner.errors import (
    AlreadyConfirmed,
    AuthenticationError,
    BusinessRefusal,
    ConnectionRefused,
    DuplicateExternalId,
    InsufficientBalance,
    InvalidRequest,
    NotFound,
    OtherRecord,
    ProviderTimeout,
    QuotationExpired,
    RateLimited,
    ResponseLost,
    Retry,
    ServerError,
    ServiceUnavailable,
    UnexpectedAnswer,
)
from runner.provider.accounts import AccountClient
from runner.provider.collection import CollectionClient
from runner.provider.errors import error_from_answer
from runner.provider.http import ext
from runner.provider.merchant_payment import MerchantPaymentClient
from runner.provider.money_transfer import MoneyTransferClient
from runner.provider.transport import Urllib3Transport

QUOTE = {"payer_id": 1, "mode": "SOURCE_AMOUNT",
         "source": {"country_iso_code": "FRA", "currency": "EUR", "amount": Decimal("100.00")},
         "destination": {"currency": "KES"}}
TXN = {"credit_party_identifier": {"msisdn": "+254700100200"},
       "sender": {"firstname": "Ada", "lastname": "Lovelace"},
       "beneficiary": {"firstname": "Wanjiru", "lastname": "Kamau"},
       "purpose_of_remittance": "SALARY"}


@pytest.fixture(params=["basic", "hmac"])
def mt(request: pytest.FixtureRequest, sandbox: Any) -> MoneyTransferClient:
    return MoneyTransferClient(sandbox.url, KEY, SECRET, auth=request.param)


def remit(mt: MoneyTransferClient, name: str, **txn: Any) -> Any:
    mt.create_quotation({**QUOTE, "external_id": name})
    return mt.create_transaction(ext(name), {**TXN, **txn, "external_id": name})


def test_both_schemes_reach_the_provider(mt: MoneyTransferClient) -> None:
    assert mt.ping() == {"status": "up"}
    assert mt.payer(4)["maximum_transaction_amount"] is None


def test_lists_are_iterated_page_by_page(mt: MoneyTransferClient, admin: Admin) -> None:
    admin.api.call("DELETE", "/requests")
    payers = list(mt.pages("/payers", per_page=5))
    assert [p["id"] for p in payers] == list(range(1, 15))
    assert admin.requests()["counts"]["GET discovery"] == 3
    assert {p["country_iso_code"] for p in mt.payers(country_iso_code="PHL")} == {"PHL"}
    assert [d["name"] for d in mt.division_children(2)] == ["Manila", "Quezon City"]
    assert [e["id"] for e in mt.entities(country_iso_code="MEX", category_id=1)] == [5]


def test_lookups_by_external_id(mt: MoneyTransferClient) -> None:
    created = remit(mt, "pay roll+1")
    assert mt.find_transaction("pay roll+1")["id"] == created["id"]
    assert mt.find_quotation("pay roll+1")["source"]["amount"] == Decimal("100.00")
    assert mt.find_transaction("nobody") is None


def test_a_lookup_answers_only_the_record_carrying_the_key_asked_for(
        sandbox_factory: Any) -> None:
    """A provider that matches its own ids where an external id is asked for: what it
    answers is another's, and the clients say so (rule 8); never None, never the record."""
    sb = sandbox_factory(lookups_match_ids=True, demo_orders=True)
    orders, accounts = CollectionClient(sb.url, KEY, SECRET), AccountClient(sb.url, KEY, SECRET)
    demo = orders.find_payment_order_by_external_id("demo-order-1")
    with pytest.raises(OtherRecord) as raised:
        orders.find_payment_order_by_external_id(demo["id"])
    assert (raised.value.asked, raised.value.found_id, raised.value.found) == (
        demo["id"], demo["id"], "demo-order-1")
    assert orders.find_named_order(demo["id"], None) == demo  # named by its id: it is
    with pytest.raises(OtherRecord):
        orders.find_named_order(None, demo["id"])
    made = accounts.create_transfer_request({
        "transfer": {"amount": Decimal("1.00"), "currency": "EUR"}, "label": "x",
        "external_reference": "t-1", "source_account_id": "ACC0001",
        "target_account_id": "ACC0002", "type": "ScheduledTransferOut"})
    with pytest.raises(OtherRecord, match=f"answered transfer request {made['id']}, whose "
                                          f"external_reference is 't-1'"):
        accounts.find_transfer_request(made["id"])
    assert accounts.find_transfer_request("t-2") is None


def test_duplicate_external_id_says_look_it_up(mt: MoneyTransferClient) -> None:
    mt.create_quotation({**QUOTE, "external_id": "dup"})
    with pytest.raises(DuplicateExternalId) as caught:
        mt.create_quotation({**QUOTE, "external_id": "dup"})
    error = caught.value
    assert (error.status, error.code, error.retry) == (400, "1007001", Retry.LOOKUP)
    assert error.endpoint == "POST /v1/money-transfer/quotations"
    assert error.external_id == "dup"


@pytest.mark.parametrize(("change", "cls", "code"), [
    ({"payer_id": 99}, BusinessRefusal, "1003002"),
    ({"payer_id": 13}, BusinessRefusal, "1003001"),
    ({"mode": "SIDEWAYS"}, InvalidRequest, "1000999"),
    ({"source": {"country_iso_code": "FRA", "currency": "EUR", "amount": Decimal("0.10")}},
     BusinessRefusal, "1003011"),
])
def test_refusals_are_never_retried(mt: MoneyTransferClient, change: dict[str, Any],
                                    cls: type, code: str) -> None:
    with pytest.raises(cls) as caught:
        mt.create_quotation({**QUOTE, **change, "external_id": "x"})
    assert caught.value.code == code
    assert caught.value.retry is Retry.UNSAFE


def test_confirmation_failures(mt: MoneyTransferClient, admin: Admin) -> None:
    with pytest.raises(NotFound) as caught:
        mt.confirm_transaction(ext("missing"))
    assert caught.value.code == "1008004"
    remit(mt, "a")
    admin.balance("EUR", "10.00")
    with pytest.raises(InsufficientBalance):
        mt.confirm_transaction(ext("a"), external_id="a")
    admin.balance("EUR", "1000.00")
    assert mt.confirm_transaction(ext("a"))["status"] == "20000"
    with pytest.raises(AlreadyConfirmed):
        mt.confirm_transaction(ext("a"))
    remit(mt, "b")
    admin.advance(3601)
    with pytest.raises(QuotationExpired) as expired:
        mt.confirm_transaction(ext("b"))
    assert expired.value.code == "1007004"


def test_wrong_credentials(sandbox: Any) -> None:
    for scheme in ("basic", "hmac"):
        client = MoneyTransferClient(sandbox.url, KEY, "not-the-secret", auth=scheme)
        with pytest.raises(AuthenticationError) as caught:
            client.balances()
        assert (caught.value.status, caught.value.code) == (401, "1000401")
        assert "not-the-secret" not in str(caught.value)
        assert "not-the-secret" not in repr(client)


def test_server_faults_map_to_their_retry_rule(mt: MoneyTransferClient, admin: Admin) -> None:
    admin.faults({"quotations": {"unavailable_next": 1, "error_next": 1}})
    with pytest.raises(ServerError) as server:
        mt.create_quotation({**QUOTE, "external_id": "f1"})
    assert (server.value.status, server.value.retry) == (500, Retry.LOOKUP)
    with pytest.raises(ServiceUnavailable) as unavailable:
        mt.create_quotation({**QUOTE, "external_id": "f1"})
    assert (unavailable.value.status, unavailable.value.retry) == (503, Retry.SAFE)
    assert mt.create_quotation({**QUOTE, "external_id": "f1"})["external_id"] == "f1"


def test_lost_answer_is_in_doubt_and_the_lookup_finds_the_work(
        mt: MoneyTransferClient, admin: Admin) -> None:
    admin.faults({"quotations": {"lost_next": 1}})
    with pytest.raises(ResponseLost) as caught:
        mt.create_quotation({**QUOTE, "external_id": "lost"})
    assert caught.value.retry is Retry.LOOKUP
    assert caught.value.external_id == "lost"
    assert mt.find_quotation("lost")["external_id"] == "lost"


def test_timeout_is_in_doubt(sandbox: Any, admin: Admin) -> None:
    admin.faults({"lookups": {"slow_next": 1}}, slow_seconds=0.3)
    client = MoneyTransferClient(sandbox.url, KEY, SECRET, timeout=(1.0, 0.05))
    with pytest.raises(ProviderTimeout) as caught:
        client.find_transaction("t")
    assert caught.value.retry is Retry.LOOKUP


def test_refused_connection_is_safe_to_retry() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = MerchantPaymentClient(f"http://127.0.0.1:{port}", KEY, SECRET)
    with pytest.raises(ConnectionRefused) as caught:
        client.ping()
    assert caught.value.retry is Retry.SAFE
    assert caught.value.exit_code == 75


def test_digest_nonces_stay_unique_across_threads(sandbox: Any) -> None:
    client = MoneyTransferClient(sandbox.url, KEY, SECRET, auth="hmac")
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                client.payer(1)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_merchant_client_flow(sandbox: Any) -> None:
    client = MerchantPaymentClient(sandbox.url, KEY, SECRET, auth="hmac")
    assert [m["id"] for m in client.payment_methods(country_iso_code="KEN")] == [1, 7]
    quotation = client.create_quotation({
        "external_id": "m1", "payment_method_id": 1, "mode": "COLLECTION_AMOUNT",
        "payment": {"country_iso_code": "KEN", "currency": "KES"},
        "collection": {"currency": "EUR", "amount": Decimal("10.00")}})
    client.create_payment(quotation["id"], {
        "external_id": "m1", "debit_party_identifier": {"msisdn": "+254700100200"},
        "consumer": {"firstname": "Wanjiru", "lastname": "Kamau"}})
    confirmed = client.confirm_payment(ext("m1"))
    assert confirmed["details"]["qr_code"]
    assert client.find_payment("m1")["status"] == "20000"
    assert client.find_payment("m2") is None


@pytest.mark.parametrize(("status", "body", "cls", "retry"), [
    (429, None, RateLimited, Retry.SAFE),
    (400, {"errors": [{"code": "2001201", "message": "no"}]}, BusinessRefusal, Retry.UNSAFE),
    (400, {"errors": [{"code": "2001301", "message": "no"}]}, BusinessRefusal, Retry.UNSAFE),
    (400, {"errors": [{"code": "2001101", "message": "no"}]}, InvalidRequest, Retry.UNSAFE),
    (500, {"errors": [{"code": "2001401", "message": "?"}]}, ServerError, Retry.LOOKUP),
    (400, {"errors": [{"code": "2001501", "message": "later"}]}, ServiceUnavailable,
     Retry.SAFE),
    (502, "not json", ServerError, Retry.LOOKUP),
    (404, {}, NotFound, Retry.UNSAFE),
])
def test_one_function_maps_answers(status: int, body: Any, cls: type, retry: Retry) -> None:
    error = error_from_answer(status, body, "POST /x", "e-1")
    assert type(error) is cls
    assert error.retry is retry
    assert error.status == status


def test_the_transport_reads_proxy_and_ca_settings_once() -> None:
    from runner.provider.transport import Urllib3Transport, proxy_for

    environ = {"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": ""}
    assert proxy_for("https://api.provider.example", environ) == "http://proxy.example:3128"
    transport = Urllib3Transport.from_environment("https://api.provider.example",
                                                  environ=environ)
    assert transport.proxy == "http://proxy.example:3128"
    environ["NO_PROXY"] = "provider.example"
    assert proxy_for("https://api.provider.example", environ) is None
    assert Urllib3Transport.from_environment("https://api.provider.example",
                                             environ=environ).proxy is None


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None
            ) -> Iterator[str]:
    """A real HTTP(S) server on a free loopback port, in a thread; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Quiet(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def test_a_redirect_is_not_followed_nor_taken_for_an_answer() -> None:
    class Redirecting(Quiet):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(307)
            self.send_header("Location", "http://127.0.0.1:9/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()

    with serving(Redirecting) as url:
        client = MoneyTransferClient(url, KEY, SECRET)
        with pytest.raises(UnexpectedAnswer) as caught:
            client.create_quotation({**QUOTE, "external_id": "r"})
        assert (caught.value.status, caught.value.retry) == (307, Retry.LOOKUP)


def test_calls_keep_their_connection_and_open_another_once_the_provider_closed_it() -> None:
    """One connection serves call after call; a connection the provider closed, whether it
    said so (Connection: close) or not, is not written to again: the next call opens one."""
    seen: list[int] = []  # the client's port of each call

    class Provider(Quiet):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            seen.append(self.client_address[1])
            answer = b'{"status": "up", "n": %d}' % len(seen)
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            if len(seen) == 3:
                self.send_header("Connection", "close")
            self.close_connection = len(seen) in (3, 5)  # the 5th closes without a word
            self.end_headers()
            self.wfile.write(answer)

        def handle(self) -> None:
            super().handle()
            if len(seen) == 5:
                self.connection.shutdown(socket.SHUT_RDWR)
                closed.set()

    closed = threading.Event()
    with serving(Provider) as url:
        client = MoneyTransferClient(url, KEY, SECRET)
        answers = [client.ping()["n"] for _ in range(5)]
        assert closed.wait(30)
        answers += [client.ping()["n"] for _ in range(2)]
        client.close()
    assert answers == [1, 2, 3, 4, 5, 6, 7]
    assert len(set(seen[:3])) == 1 and len(set(seen[3:5])) == 1 and len(set(seen[5:])) == 1
    assert len(set(seen)) == 3


def test_a_line_break_in_a_header_is_refused_before_anything_is_sent() -> None:
    seen: list[str] = []

    class Provider(Quiet):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            seen.append(self.path)

    with serving(Provider) as url:
        client = MoneyTransferClient(url, "key\r\nX-Injected: 1", SECRET, auth="hmac")
        with pytest.raises(ValueError, match="control character"):
            client.ping()
        client.close()
    assert seen == []


@pytest.mark.parametrize("framing", ["chunked", "until closed"])
def test_answers_chunked_or_read_until_the_connection_closes(framing: str) -> None:
    class Provider(Quiet):
        protocol_version = "HTTP/1.1" if framing == "chunked" else "HTTP/1.0"

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if framing == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for part in (b'{"status": "up", ', b'"amount": 0.10}'):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.end_headers()
                self.wfile.write(b'{"status": "up", "amount": 0.10}')

    with serving(Provider) as url:
        client = MoneyTransferClient(url, KEY, SECRET)
        assert [client.ping(), client.ping()] == [{"status": "up", "amount": Decimal("0.10")}] * 2
        client.close()


def test_calls_go_through_the_configured_http_proxy(sandbox: Any) -> None:
    """A forward proxy (plain HTTP) sees each call's absolute URL and relays it; the answers
    and the errors are the provider's, as without a proxy."""
    seen: list[str] = []

    class Proxy(Quiet):
        protocol_version = "HTTP/1.1"

        def relay(self) -> None:
            seen.append(f"{self.command} {self.path}")
            length = int(self.headers.get("Content-Length") or 0)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "connection", "proxy-connection")}
            answer = requests.request(self.command, self.path, headers=headers, timeout=60,
                                      data=self.rfile.read(length) if length else None,
                                      allow_redirects=False)
            self.send_response(answer.status_code)
            if "Content-Type" in answer.headers:
                self.send_header("Content-Type", answer.headers["Content-Type"])
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = relay  # noqa: N815 - the stdlib's names

    with serving(Proxy) as proxy:
        client = MoneyTransferClient(sandbox.url, KEY, SECRET, auth="hmac",
                                     transport=Urllib3Transport(sandbox.url, proxy=proxy))
        quotation = client.create_quotation({**QUOTE, "external_id": "via-proxy"})
        assert client.find_quotation("via-proxy")["id"] == quotation["id"]
        assert client.find_quotation("nobody") is None
        with pytest.raises(DuplicateExternalId):
            client.create_quotation({**QUOTE, "external_id": "via-proxy"})
    mt = f"{sandbox.url}/v1/money-transfer"
    assert seen == [f"POST {mt}/quotations", f"GET {mt}/quotations/ext-via-proxy",
                    f"GET {mt}/quotations/ext-nobody", f"POST {mt}/quotations"]


