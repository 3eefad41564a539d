"""Authentication of the sandbox, over real HTTP: Basic, the digest (HMAC) scheme with its
nonce, Date and brand rules, which paths need it, and digest signing under concurrency.

Digest headers are signed here with hmac/hashlib/base64 directly, not with
runner.provider.auth, so a bug shared by the client and the sandbox cannot hide."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from email.utils import formatdate
from typing import Any

import requests
import simplejson
from conftest import KEY, SECRET, body, error_of

from runner.provider.auth import DigestAuth

PING = "/ping"
PAYERS = "/v1/money-transfer/payers"
QUOTATIONS = "/v1/money-transfer/quotations"
QUOTATION = {"external_id": "q-1", "payer_id": 1, "mode": "SOURCE_AMOUNT",
             "source": {"country_iso_code": "FRA", "currency": "EUR",
                        "amount": Decimal("100.00")},
             "destination": {"currency": "KES"}}


def sign(secret: str, key: str, nonce: str, date: str) -> str:
    digest = hmac.new(secret.encode(), (key + nonce + date).encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def http_date(offset: float = 0.0) -> str:
    return formatdate(time.time() + offset, usegmt=True)


def digest(key: str = KEY, secret: str = SECRET, nonce: str | None = None,
           date: str | None = None, brand: str = "Svc") -> dict[str, str]:
    nonce = uuid.uuid4().hex if nonce is None else nonce
    date = http_date() if date is None else date
    return {f"X-{brand}-apikey": key, f"X-{brand}-nonce": nonce,
            f"X-{brand}-hmac": sign(secret, key, nonce, date), "Date": date}


def get(sandbox: Any, path: str = PING, **kw: Any) -> requests.Response:
    return requests.get(sandbox.url + path, timeout=60, **kw)


def call(sandbox: Any, method: str, path: str, payload: Any = None,
         auth: Any = None) -> requests.Response:
    """One request with exactly the given credentials (none by default)."""
    data = None if payload is None else simplejson.dumps(payload, use_decimal=True)
    headers = {} if data is None else {"Content-Type": "application/json"}
    return requests.request(method, sandbox.url + path, data=data, headers=headers, auth=auth,
                            timeout=60)


def refused(response: requests.Response, reason: str | None = None, case: Any = "") -> None:
    assert response.status_code == 401, (case, response.status_code, response.text)
    assert error_of(response) == (401, "1000401"), (case, response.text)
    if reason is not None:
        assert body(response)["errors"][0]["message"] == f"Unauthorized: {reason}", case


# ---------------------------------------------------------------- Basic
# Each sandbox costs ~0.2 s to stop, so related cases share one test (and one sandbox).
def test_basic_auth_is_accepted(sandbox):
    r = get(sandbox, PING, auth=(KEY, SECRET))
    assert r.status_code == 200
    assert body(r) == {"status": "up"}
    token = base64.b64encode(f"{KEY}:{SECRET}".encode()).decode()
    assert get(sandbox, headers={"Authorization": f"basic {token}"}).status_code == 200


def test_basic_auth_with_wrong_key_or_secret_is_refused(sandbox):
    refused(get(sandbox, auth=(KEY, SECRET + "x")), "invalid API key or secret")
    refused(get(sandbox, auth=("other-key", SECRET)), "invalid API key or secret")
    refused(get(sandbox, auth=(KEY, "")), "invalid API key or secret")
    no_colon = base64.b64encode(f"{KEY}{SECRET}".encode()).decode()
    refused(get(sandbox, headers={"Authorization": f"Basic {no_colon}"}),
            "invalid API key or secret")


def test_malformed_basic_token_is_refused(sandbox):
    unpadded = base64.b64encode(f"{KEY}:{SECRET}".encode()).decode().rstrip("=")
    assert unpadded != base64.b64encode(f"{KEY}:{SECRET}".encode()).decode()
    for token in ("!!!not-base64!!!", unpadded, "Zm9v YmFy"):
        refused(get(sandbox, headers={"Authorization": f"Basic {token}"}),
                "malformed Basic credentials", token)


def test_unsupported_scheme_or_no_credentials_is_refused(sandbox):
    refused(get(sandbox, headers={"Authorization": f"Bearer {SECRET}"}),
            "unsupported authorization scheme")
    refused(get(sandbox), "missing credentials")


# ---------------------------------------------------------------- digest
def test_digest_with_independent_signature_is_accepted(sandbox):
    headers = digest()
    # The message and encoding of the spec, spelled out once more inline.
    expected = base64.b64encode(hmac.new(
        SECRET.encode(),
        (headers["X-Svc-apikey"] + headers["X-Svc-nonce"] + headers["Date"]).encode(),
        hashlib.sha256).digest()).decode()
    assert headers["X-Svc-hmac"] == expected
    r = get(sandbox, PAYERS, headers=headers)
    assert r.status_code == 200
    assert len(body(r)) > 0


def test_provider_digest_auth_signs_like_the_spec(sandbox):
    prepared = DigestAuth(KEY, SECRET)(requests.Request("GET", sandbox.url + PING).prepare())
    h = prepared.headers
    assert h["X-Svc-apikey"] == KEY
    assert h["X-Svc-hmac"] == sign(SECRET, KEY, h["X-Svc-nonce"], h["Date"])
    assert 1 <= len(h["X-Svc-nonce"]) <= 64
    with requests.Session() as s:
        assert s.send(prepared, timeout=60).status_code == 200


def test_digest_with_wrong_signature_is_refused(sandbox):
    wrong_secret = digest()
    wrong_secret["X-Svc-hmac"] = sign(SECRET + "x", KEY, wrong_secret["X-Svc-nonce"],
                                      wrong_secret["Date"])
    refused(get(sandbox, headers=wrong_secret), "invalid signature")
    other_date = digest()
    other_date["X-Svc-hmac"] = sign(SECRET, KEY, other_date["X-Svc-nonce"], http_date(-5))
    refused(get(sandbox, headers=other_date), "invalid signature")
    garbage = digest()
    garbage["X-Svc-hmac"] = "not a signature"
    refused(get(sandbox, headers=garbage), "invalid signature")


def test_digest_with_wrong_key_is_refused(sandbox):
    refused(get(sandbox, headers=digest(key="other-key")), "invalid API key")


def test_digest_missing_any_header_is_refused(sandbox):
    for header in ("X-Svc-apikey", "X-Svc-nonce", "X-Svc-hmac", "Date"):
        headers = digest()
        del headers[header]
        refused(get(sandbox, headers=headers), f"missing header {header.lower()}", header)


def test_digest_header_names_are_case_insensitive(sandbox):
    for case in (str.upper, str.lower, str.swapcase):
        headers = {case(name): value for name, value in digest().items()}
        assert set(headers).isdisjoint({"X-Svc-apikey", "X-Svc-nonce", "X-Svc-hmac", "Date"})
        assert get(sandbox, PAYERS, headers=headers).status_code == 200, headers


def test_nonce_length_is_1_to_64(sandbox):
    assert get(sandbox, headers=digest(nonce="n" * 64)).status_code == 200
    assert get(sandbox, headers=digest(nonce="1")).status_code == 200
    refused(get(sandbox, headers=digest(nonce="m" * 65)), "nonce must be 1 to 64 characters")
    refused(get(sandbox, headers=digest(nonce="")), "nonce must be 1 to 64 characters")


def test_reused_nonce_is_refused_even_with_a_fresh_signature(sandbox_factory):
    """``--nonce-check strict``: a nonce is never taken twice for one key."""
    sandbox = sandbox_factory(nonce_check="strict")
    first = digest(nonce="once", date=http_date(-2))
    assert get(sandbox, headers=first).status_code == 200
    again = digest(nonce="once", date=http_date())
    assert again["X-Svc-hmac"] != first["X-Svc-hmac"]
    refused(get(sandbox, headers=again), "nonce already used")
    refused(get(sandbox, headers=first), "nonce already used")
    # Another nonce is fine: the refusals poisoned nothing.
    assert get(sandbox, headers=digest(nonce="twice")).status_code == 200


def test_nonce_of_a_refused_request_is_not_spent(sandbox):
    bad = digest(nonce="kept")
    bad["X-Svc-hmac"] = sign("wrong", KEY, "kept", bad["Date"])
    refused(get(sandbox, headers=bad), "invalid signature")
    assert get(sandbox, headers=digest(nonce="kept")).status_code == 200


def test_date_more_than_five_minutes_off_is_refused(sandbox):
    for offset in (-360, 360):
        refused(get(sandbox, headers=digest(date=http_date(offset))),
                "Date header too far from the server's time", offset)
    for offset in (-240, 240):
        assert get(sandbox, headers=digest(date=http_date(offset))).status_code == 200, offset


def test_malformed_date_is_refused(sandbox):
    for date in ("yesterday", "2024-01-01T00:00:00Z", ""):
        refused(get(sandbox, headers=digest(date=date)), "Date header is not an HTTP date", date)


def test_date_tolerance_is_configurable(sandbox_factory):
    strict = sandbox_factory(date_tolerance=30)
    refused(get(strict, headers=digest(date=http_date(-60))),
            "Date header too far from the server's time")
    assert get(strict, headers=digest(date=http_date(-10))).status_code == 200


# ---------------------------------------------------------------- brand
def test_configured_brand_accepts_its_headers_and_refuses_the_default(sandbox_factory):
    acme = sandbox_factory(header_brand="Acme")
    assert get(acme, PAYERS, headers=digest(brand="Acme")).status_code == 200
    refused(get(acme, PAYERS, headers=digest(brand="Svc")), "missing credentials")
    partial = digest(brand="Acme")
    del partial["X-Acme-nonce"]
    refused(get(acme, headers=partial), "missing header x-acme-nonce")
    # The provider's client, with the brand, and without it.
    r = get(acme, PAYERS, auth=DigestAuth(KEY, SECRET, brand="Acme"))
    assert r.status_code == 200
    assert "X-Acme-hmac" in r.request.headers
    refused(get(acme, PAYERS, auth=DigestAuth(KEY, SECRET)), "missing credentials")
    # Basic does not depend on the brand.
    assert get(acme, auth=(KEY, SECRET)).status_code == 200


# ---------------------------------------------------------------- which paths
PROTECTED = [
    ("GET", PING, None),
    ("GET", PAYERS, None),
    ("GET", "/v1/money-transfer/balances", None),
    ("POST", QUOTATIONS, QUOTATION),
    ("GET", "/v1/merchant-payment/payment-methods", None),
]


def test_every_provider_path_requires_auth(sandbox):
    for method, path, payload in PROTECTED:
        case = f"{method} {path}"
        refused(call(sandbox, method, path, payload), "missing credentials", case)
        refused(call(sandbox, method, path, payload, auth=(KEY, "wrong")),
                "invalid API key or secret", case)
        refused(call(sandbox, method, path, payload, auth=DigestAuth(KEY, "wrong")),
                "invalid signature", case)
    for method, path, payload in PROTECTED:
        r = call(sandbox, method, path, payload, auth=(KEY, SECRET))
        assert r.status_code == (201 if method == "POST" else 200), (method, path, r.text)
        r = call(sandbox, "GET", path, auth=DigestAuth(KEY, SECRET)) if method == "GET" else r
        assert r.status_code in (200, 201), (method, path, r.text)


def test_refused_post_does_nothing(sandbox, api):
    refused(call(sandbox, "POST", QUOTATIONS, QUOTATION))
    refused(call(sandbox, "POST", QUOTATIONS, QUOTATION, auth=DigestAuth(KEY, "wrong")))
    assert error_of(api.get("/v1/money-transfer/quotations/ext-q-1")) == (404, "1008002")
    assert api.post(QUOTATIONS, QUOTATION).status_code == 201


def test_unknown_provider_path_asks_for_auth_before_saying_not_found(sandbox, api):
    refused(call(sandbox, "GET", "/v1/money-transfer/no-such-thing"), "missing credentials")
    assert error_of(api.get("/v1/money-transfer/no-such-thing")) == (404, "1000404")


def test_openapi_and_admin_need_no_auth(sandbox):
    for path in ("/openapi.json", "/_admin/clock", "/_admin/faults"):
        r = get(sandbox, path)
        assert r.status_code == 200, (path, r.text)
        assert isinstance(body(r), dict)
    schema = body(get(sandbox, "/openapi.json"))
    assert set(schema["components"]["securitySchemes"]) == {"basic", "digest"}
    assert schema["paths"][PING]["get"]["security"] == [{"basic": []}, {"digest": []}]
    assert "security" not in schema["paths"]["/_admin/clock"]["get"]


# ---------------------------------------------------------------- concurrency
def test_concurrent_digest_requests_all_succeed(sandbox, admin):
    def worker(_: int) -> list[tuple[int, str]]:
        seen = []
        with requests.Session() as s:
            s.auth = DigestAuth(KEY, SECRET)
            for _ in range(25):
                r = s.get(sandbox.url + PING, timeout=60)
                seen.append((r.status_code, r.request.headers["X-Svc-nonce"]))
        return seen

    with ThreadPoolExecutor(8) as pool:
        results = [x for batch in pool.map(worker, range(8)) for x in batch]
    assert len(results) == 200
    assert [code for code, _ in results] == [200] * 200
    assert len({nonce for _, nonce in results}) == 200
    assert admin.requests()["counts"]["GET ping"] == 200
