"""Authentication of every provider endpoint: Basic, or the digest (HMAC) scheme.

Digest rules: the brand in the header names is configurable; header names are
case-insensitive; the nonce is 1 to 64 characters; a Date further than the tolerance from
the server's time is refused. The reuse of a nonce follows ``nonce_check``: ``lenient`` (the
default) takes what real clients send, the Unix time in seconds, however many calls they
make within one second; ``strict`` never accepts a nonce twice for one key (nonces are
remembered for twice the Date tolerance, past which the Date check refuses a replay anyway).
Every failure is 401 with code 1000401 and a reason that names no secret.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime

from runner.provider.auth import digest_signature
from runner.sandbox.core.config import SandboxConfig
from runner.sandbox.core.store import Store

MAX_NONCE = 64


@functools.lru_cache(maxsize=64)
def _http_date(date: str) -> float:
    """An HTTP Date header as Unix seconds (the calls of one second share theirs)."""
    return parsedate_to_datetime(date).timestamp()


class AuthFailure(Exception):
    pass


class MissingCredentials(AuthFailure):
    """No credentials at all (the legacy Pay tells this apart: 9401, not 9403)."""


class Authenticator:
    def __init__(self, config: SandboxConfig, store: Store,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        brand = config.header_brand.lower()
        self._h_key = f"x-{brand}-apikey".encode()
        self._h_nonce = f"x-{brand}-nonce".encode()
        self._h_hmac = f"x-{brand}-hmac".encode()

    def check(self, headers: list[tuple[bytes, bytes]], basic_only: bool = False) -> str:
        """The API key of the request's valid credentials; AuthFailure when they are not.
        ``basic_only``: the collection service and the legacy Pay, which document Basic and
        nothing else."""
        found: dict[bytes, bytes] = {}
        for name, value in headers:
            found[name.lower()] = value
        if basic_only:
            if b"authorization" in found:
                self._check_basic(found[b"authorization"])
            elif self._h_hmac in found or self._h_key in found:
                raise MissingCredentials("this service takes Basic authentication only")
            else:
                raise MissingCredentials("missing credentials")
        elif self._h_hmac in found or self._h_key in found:
            self._check_digest(found)
        elif b"authorization" in found:
            self._check_basic(found[b"authorization"])
        else:
            raise MissingCredentials("missing credentials")
        return self.config.api_key

    def _check_basic(self, value: bytes) -> None:
        scheme, _, token = value.partition(b" ")
        if scheme.lower() != b"basic":
            raise AuthFailure("unsupported authorization scheme")
        try:
            user, sep, password = base64.b64decode(token.strip(), validate=True).partition(b":")
        except (binascii.Error, ValueError):
            raise AuthFailure("malformed Basic credentials") from None
        ok_user = hmac.compare_digest(user, self.config.api_key.encode())
        ok_password = hmac.compare_digest(password, self.config.api_secret.encode())
        if not (sep and ok_user and ok_password):
            raise AuthFailure("invalid API key or secret")

    def _check_digest(self, h: dict[bytes, bytes]) -> None:
        try:
            key = h[self._h_key].decode()
            nonce = h[self._h_nonce].decode()
            signature = h[self._h_hmac].decode()
            date = h[b"date"].decode()
        except KeyError as missing:
            raise AuthFailure(f"missing header {missing.args[0].decode()}") from None
        except UnicodeDecodeError:
            raise AuthFailure("headers are not text") from None
        if not hmac.compare_digest(key.encode(), self.config.api_key.encode()):
            raise AuthFailure("invalid API key")
        if not 0 < len(nonce) <= MAX_NONCE:
            raise AuthFailure(f"nonce must be 1 to {MAX_NONCE} characters")
        try:
            sent = _http_date(date)
        except (TypeError, ValueError):
            raise AuthFailure("Date header is not an HTTP date") from None
        now = self.clock()
        tolerance = self.config.date_tolerance
        if abs(now - sent) > tolerance:
            raise AuthFailure("Date header too far from the server's time")
        expected = digest_signature(key, self.config.api_secret, nonce, date)
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            raise AuthFailure("invalid signature")
        if self.config.nonce_check == "strict":
            with self.store.lock:
                if self.store.nonce_seen(f"{key}\n{nonce}", now + 2 * tolerance, now):
                    raise AuthFailure("nonce already used")
