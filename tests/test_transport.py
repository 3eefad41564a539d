"""The one HTTP transport (runner/provider/transport.py) against real servers on loopback:
answers sized, chunked, read until the connection closes, split across packets, gzip and
deflate; TLS with a company CA made here (SSL_CERT_FILE, REQUESTS_CA_BUNDLE), a certificate
naming its host only in its common name refused; a CONNECT proxy and a forwarding one from
the environment, NO_PROXY; no redirect followed; and a run behind a proxy paying as a
direct run does."""

from __future__ import annotations

import base64
import gzip
import ssl
import threading
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, SECRET
from engine_support import cli, confirmed, err_lines, outcomes, write_job
from http_servers import Proxy, Script, Scripted, Seen, answer
from mail_server import Authority

from runner import __version__
from runner.errors import ResponseLost, Retry, UnexpectedAnswer, UntrustedCertificate
from runner.provider.http import ProviderClient
from runner.provider.transport import Request, Urllib3Transport, as_is, authorities
from runner.sandbox import RunningSandbox

BODY = b'{"status": "up", "amount": 0.10}'
PARSED = {"status": "up", "amount": Decimal("0.10")}


def client(url: str, **environ: str) -> ProviderClient:
    """A client whose transport reads only ``environ`` (not this process's environment)."""
    return ProviderClient(url, KEY, SECRET, transport=Urllib3Transport.from_environment(
        url, timeout=(5.0, 30.0), environ=environ))


def framed(seen: Seen) -> Script:
    """The same JSON body, framed as the request's path asks."""
    head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    if seen.target == "/chunked":
        parts = [BODY[:7], BODY[7:]]
        return Script([(head + "Transfer-Encoding: chunked\r\n\r\n").encode()]
                      + [b"%x\r\n%s\r\n" % (len(p), p) for p in parts] + [b"0\r\n\r\n"])
    if seen.target == "/until-closed":  # no length: the body is what comes until the close
        return Script([b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY],
                      close=True)
    if seen.target == "/split":  # the head cut in a header's name, the body in a number
        whole = answer("200 OK", BODY)
        cut = whole.index(b"Length") + 3
        return Script([whole[:cut], whole[cut:-12], whole[-12:]])
    if seen.target == "/gzip":
        return Script([answer("200 OK", gzip.compress(BODY), "application/json",
                              "Content-Encoding: gzip")])
    if seen.target == "/deflate":
        return Script([answer("200 OK", zlib.compress(BODY), "application/json",
                              "Content-Encoding: deflate")])
    return Script([answer("200 OK", BODY)])


def test_answers_whatever_their_framing_split_or_compressed() -> None:
    with Scripted(framed) as server:
        provider = client(server.url)
        paths = ["/sized", "/chunked", "/split", "/gzip", "/deflate", "/until-closed",
                 "/sized"]
        assert [provider.get(p) for p in paths] == [PARSED] * len(paths)
        provider.close()
    first = server.seen[0]
    assert first.headers["user-agent"] == f"runner/{__version__}"
    assert first.headers["accept-encoding"] == "gzip, deflate"
    # One kept-alive connection until the answer read until the close ended it.
    assert [s.connection for s in server.seen] == [1, 1, 1, 1, 1, 1, 2]


def test_no_redirect_is_followed_to_another_host() -> None:
    """A redirect is an answer the call did not ask for: in doubt (the call may have been
    done before it), never followed, and its connection is not used again."""
    with Scripted(lambda seen: Script([answer("200 OK", BODY)])) as elsewhere:
        def moved(seen: Seen) -> Script:
            if seen.target.startswith("/pay"):
                return Script([answer("302 Found", b"", None,
                                      f"Location: {elsewhere.url}/pay")])
            return Script([answer("200 OK", BODY)])

        with Scripted(moved) as server:
            provider = client(server.url)
            with pytest.raises(UnexpectedAnswer) as caught:
                provider.request("POST", "/pay", body={"amount": Decimal("1.00")},
                                 external_id="e-1")
            assert provider.get("/ping") == PARSED
            provider.close()
    error = caught.value
    assert (error.status, error.retry, error.external_id) == (302, Retry.LOOKUP, "e-1")
    assert str(error) == ("an unexpected answer: HTTP 302, a redirect to 127.0.0.1 (not "
                          "followed) (POST /pay)")
    assert elsewhere.seen == []
    assert [s.connection for s in server.seen] == [1, 2]


def test_a_connection_is_kept_or_dropped_before_another_call_can_take_it() -> None:
    """urllib3 gives a connection back to its pool as soon as a body is read whole; the
    transport keeps it aside until it has read the body. A call made meanwhile (here, while
    the first call's body is being read) opens a connection of its own: it never takes, nor
    has closed under it, the one whose body then proves unusable. A stray exception while
    an answer is read is in doubt (looked up), never a failure of the call or of runner."""
    with Scripted(lambda seen: Script([answer("200 OK", BODY)])) as server:
        transport = Urllib3Transport(server.url, pool_size=1)
        meanwhile: list[Any] = []

        def call(target: str, read: Any = as_is) -> Any:
            return transport.handle_request(Request("GET", target, {}, None, f"GET {target}",
                                                    "e-1", read))

        def refuse(content: bytes, headers: Any) -> Any:
            other = threading.Thread(target=lambda: meanwhile.append(call("/meanwhile")))
            other.start()
            other.join(30)
            raise ValueError("not the body asked for")

        refused = call("/refused", refuse)
        after = call("/after")
        with pytest.raises(ResponseLost) as caught:
            call("/stray", lambda content, headers: content.no_such_attribute)
        transport.close()
    assert (refused.body, refused.unexpected) == (None, "a body that cannot be read")
    assert [r.content for r in meanwhile] == [after.content] == [BODY]
    # The refused body's connection carried nothing after it; the one opened meanwhile,
    # kept, carried the next call.
    assert [(s.target, s.connection) for s in server.seen] == [
        ("/refused", 1), ("/meanwhile", 2), ("/after", 2), ("/stray", 2)]
    error = caught.value
    assert (error.retry, error.external_id, str(error)) == (
        Retry.LOOKUP, "e-1", "connection failed: AttributeError (GET /stray)")


def test_tls_with_a_company_ca_from_ssl_cert_file_or_requests_ca_bundle(
        tmp_path: Path) -> None:
    """The company CA named by SSL_CERT_FILE (OpenSSL's variable) or REQUESTS_CA_BUNDLE
    (requests'), a file or a folder; without it the certificate is not trusted: exit 78,
    nothing sent."""
    authority = Authority.make(tmp_path)
    # A folder of authorities holds them under OpenSSL's hashed names (what c_rehash makes).
    folder = tmp_path / "cas"
    folder.mkdir()
    der = ssl.PEM_cert_to_DER_cert(authority.ca_file.read_text())
    (folder / f"{_subject_hash(der)}.0").write_bytes(authority.ca_file.read_bytes())
    with Scripted(lambda seen: Script([answer("200 OK", BODY)]), tls=authority.server) as server:
        for environ in ({"SSL_CERT_FILE": str(authority.ca_file)},
                        {"SSL_CERT_DIR": str(folder)},
                        {"REQUESTS_CA_BUNDLE": str(authority.ca_file)},
                        {"REQUESTS_CA_BUNDLE": str(folder)}):
            assert client(server.url, **environ).get("/ping") == PARSED
        served = len(server.seen)
        with pytest.raises(UntrustedCertificate) as caught:
            client(server.url).get("/ping")  # the system's store: no company CA in it
        assert len(server.seen) == served == 4
    assert caught.value.exit_code == 78 and caught.value.retry is Retry.UNSAFE
    assert str(caught.value) == ("could not connect: the provider's TLS certificate is not "
                                 "trusted (unable to get local issuer certificate) (GET /ping)")


def test_an_untrusted_certificate_ends_a_command_with_exit_78(tmp_path: Path) -> None:
    """On the command line: one line naming the call, exit 78 (not 75: cron retrying would
    change nothing), nothing sent."""
    authority = Authority.make(tmp_path)
    with Scripted(lambda seen: Script([answer("200 OK", BODY)]), tls=authority.server) as server:
        job = write_job(tmp_path, server.url)
        ran = cli("validate", str(job), "--state", str(tmp_path / "s.sqlite"))
    assert (ran.exit_code, ran.stdout, server.seen) == (78, "", [])
    assert err_lines(ran) == [
        "error: could not connect: the provider's TLS certificate is not trusted (unable to "
        "get local issuer certificate) (GET /v1/money-transfer/payers/1)"]


def _subject_hash(der: bytes) -> str:
    """OpenSSL's subject name hash of a certificate (``openssl x509 -hash``)."""
    import subprocess

    done = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-hash"], input=der,
                          capture_output=True, check=True, timeout=60)
    return done.stdout.decode().strip()


def test_a_certificate_naming_its_host_only_in_its_common_name_is_refused(
        tmp_path: Path) -> None:
    authority = Authority.make(tmp_path, alt_names=False)
    with Scripted(lambda seen: Script([answer("200 OK", BODY)]), tls=authority.server) as server:
        url = server.url.replace("127.0.0.1", "localhost")
        with pytest.raises(UntrustedCertificate) as caught:
            client(url, SSL_CERT_FILE=str(authority.ca_file)).get("/ping")
    assert "Hostname mismatch" in str(caught.value) and server.seen == []


def test_the_system_store_is_read_when_nothing_names_a_ca() -> None:
    assert authorities({}).cert_store_stats()["x509_ca"] > 0


def test_an_https_provider_through_a_connect_proxy_from_the_environment(
        tmp_path: Path) -> None:
    """HTTPS_PROXY with a login: the call goes through a CONNECT tunnel, the login on the
    CONNECT only (never to the provider); NO_PROXY naming the host bypasses it."""
    authority = Authority.make(tmp_path)
    with Proxy() as proxy, Scripted(lambda seen: Script([answer("200 OK", BODY)]),
                                    tls=authority.server) as server:
        login = f"http://ops%40acme:p%3Ass@127.0.0.1:{proxy.port}"
        through = client(server.url, HTTPS_PROXY=login, SSL_CERT_FILE=str(authority.ca_file))
        assert [through.get("/ping"), through.get("/ping")] == [PARSED] * 2
        through.close()
        direct = client(server.url, https_proxy=login, NO_PROXY="localhost,127.0.0.1",
                        SSL_CERT_FILE=str(authority.ca_file))
        assert direct.get("/ping") == PARSED
    assert [(s.method, s.target) for s in proxy.seen] == [
        ("CONNECT", f"127.0.0.1:{server.port}")]
    assert proxy.seen[0].headers["proxy-authorization"] == \
        "Basic " + base64.b64encode(b"ops@acme:p:ss").decode()
    assert [s.target for s in server.seen] == ["/ping"] * 3
    assert all("proxy-authorization" not in s.headers for s in server.seen)


def test_a_run_behind_a_proxy_pays_as_a_direct_run_does(
        sandbox_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same job, run directly and then (on a provider of its own) through a forwarding
    proxy named by HTTP_PROXY: the same outcomes and lines, and every call through it."""
    results = []
    for way in ("direct", "proxy"):
        sandbox: RunningSandbox = sandbox_factory(submit_delay=0, complete_delay=0)
        folder = tmp_path / way
        folder.mkdir()
        job = write_job(folder, sandbox)
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY",
                     "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        with Proxy() as proxy:
            if way == "proxy":
                monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
            ran = cli("run", str(job), "--yes", "--state", str(folder / "s.sqlite"))
        results.append((ran.exit_code, ran.stdout, outcomes(folder / "s.sqlite"),
                        confirmed(sandbox)))
        seen = {s.target.partition("?")[0] for s in proxy.seen}
    direct, proxied = results
    assert direct[0] == 0
    assert direct[2] == {"pay-a": "settled", "pay-b": "settled", "pay-c": "settled"}
    assert direct[3] == {"pay-a": 1, "pay-b": 1, "pay-c": 1}
    assert proxied == direct
    assert f"{sandbox.url}/v1/money-transfer/transactions/ext-pay-a/confirm" in seen
