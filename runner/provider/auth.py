"""The provider's two authentication schemes: as headers (``make_signer``, what the provider
clients send), as requests auth (``make_auth``) and for the sandbox.

Basic is plain HTTP Basic (API key as user, secret as password). The digest scheme signs
each request: Base64(HMAC-SHA-256(key=secret, msg=apikey + nonce + Date)), sent in
``X-<Brand>-apikey``, ``X-<Brand>-nonce``, ``X-<Brand>-hmac`` and ``Date``. The sandbox
verifies with the same ``digest_signature``, and signs its callbacks with ``digest_headers``.
"""

from __future__ import annotations

import base64
import hmac
import os
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # requests is the scripts', not runner's: its calls go through urllib3
    import requests
    from requests.auth import AuthBase

DEFAULT_BRAND = "Svc"


def digest_signature(api_key: str, api_secret: str, nonce: str, date: str) -> str:
    digest = hmac.digest(api_secret.encode(), f"{api_key}{nonce}{date}".encode(), "sha256")
    return base64.b64encode(digest).decode("ascii")


def new_nonce(now: float) -> str:
    # Unix seconds as real clients send, plus a random part: unique per request even when
    # many threads or processes sign within the same second (the provider refuses reuse).
    return f"{int(now)}-{os.urandom(16).hex()}"


class DigestSigner:
    """The digest headers of one request after another: a fresh nonce and signature each
    time, the key's bytes and the names worked out once, the Date once a second."""

    def __init__(self, api_key: str, api_secret: str, brand: str = DEFAULT_BRAND,
                 clock: Callable[[], float] = time.time) -> None:
        self.api_key = api_key
        self._secret = api_secret.encode()
        self.clock = clock
        self._names = (f"X-{brand}-apikey", f"X-{brand}-nonce", f"X-{brand}-hmac")
        self._date = (-1, "")  # (second, its HTTP date): replaced whole, so thread-safe

    def __call__(self) -> dict[str, str]:
        now = self.clock()
        second, date = self._date
        if second != int(now):
            second, date = int(now), formatdate(int(now), usegmt=True)
            self._date = (second, date)
        nonce = new_nonce(now)
        digest = hmac.digest(self._secret, f"{self.api_key}{nonce}{date}".encode(), "sha256")
        apikey, nonce_name, hmac_name = self._names
        return {apikey: self.api_key, nonce_name: nonce,
                hmac_name: base64.b64encode(digest).decode("ascii"), "Date": date}

    def __repr__(self) -> str:
        return f"DigestSigner(api_key={self.api_key!r})"


def digest_headers(
    api_key: str,
    api_secret: str,
    brand: str = DEFAULT_BRAND,
    clock: Callable[[], float] = time.time,
) -> dict[str, str]:
    return DigestSigner(api_key, api_secret, brand, clock)()


class DigestAuth:
    """requests auth for the digest (HMAC) scheme; a fresh nonce and Date per request. (Any
    callable that takes and returns the prepared request is requests auth: this one needs no
    import of requests, which a run does not load.)"""

    def __init__(
        self,
        api_key: str,
        api_secret: str,
        brand: str = DEFAULT_BRAND,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api_key = api_key
        self._secret = api_secret
        self.brand = brand
        self.clock = clock

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers.update(digest_headers(self.api_key, self._secret, self.brand, self.clock))
        return r

    def __repr__(self) -> str:
        return f"DigestAuth(api_key={self.api_key!r}, brand={self.brand!r})"


def make_signer(scheme: str, api_key: str, api_secret: str, brand: str = DEFAULT_BRAND
                ) -> Callable[[], dict[str, str]]:
    """The authentication headers of one request, for clients that build their own."""
    if scheme == "basic":
        pair = base64.b64encode(f"{api_key}:{api_secret}".encode()).decode("ascii")
        basic = {"Authorization": f"Basic {pair}"}
        return lambda: basic
    if scheme == "hmac":
        return DigestSigner(api_key, api_secret, brand)
    raise ValueError(f"unknown auth scheme {scheme!r} (expected basic or hmac)")


def make_auth(scheme: str, api_key: str, api_secret: str, brand: str = DEFAULT_BRAND
              ) -> AuthBase | DigestAuth:
    if scheme == "basic":
        from requests.auth import HTTPBasicAuth

        return HTTPBasicAuth(api_key, api_secret)
    if scheme == "hmac":
        return DigestAuth(api_key, api_secret, brand)
    raise ValueError(f"unknown auth scheme {scheme!r} (expected basic or hmac)")
