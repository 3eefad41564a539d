"""A client of the sandbox that signs as the public clients of this API family do: nonce =
the Unix time in whole seconds, ``Date`` in RFC 1123 GMT, the provider's brand in the header
names, spelled as its public reference spells them (``X-TransferTo-Apikey``); paths end with
a slash where the caller writes one. It signs by hand (hmac, hashlib, base64), not with
runner.provider.auth, so that a bug shared by runner and the sandbox cannot hide."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import requests
import simplejson
from conftest import KEY, SECRET

BRAND = "TransferTo"


class RealClient:
    """Signs every call as real clients do. A redirect is not followed (a client that
    followed one would send the same signed headers twice): none may come."""

    def __init__(self, base: str, clock: Callable[[], float] = time.time) -> None:
        self.base = base
        self.clock = clock
        self.session = requests.Session()

    def headers(self) -> dict[str, str]:
        now = self.clock()
        nonce, date = str(int(now)), formatdate(now, usegmt=True)
        digest = hmac.new(SECRET.encode(), (KEY + nonce + date).encode(), hashlib.sha256)
        return {f"X-{BRAND}-Apikey": KEY, f"X-{BRAND}-Nonce": nonce, "Date": date,
                f"X-{BRAND}-Hmac": base64.b64encode(digest.digest()).decode()}

    def call(self, method: str, path: str, payload: Any = None) -> requests.Response:
        headers = self.headers()
        data = None
        if payload is not None:
            headers["Content-Type"] = "application/json"
            data = simplejson.dumps(payload, use_decimal=True)
        answer = self.session.request(method, self.base + path, data=data, headers=headers,
                                      timeout=30, allow_redirects=False)
        assert not 300 <= answer.status_code < 400, (method, path, answer.status_code)
        return answer
