"""The nonce memory of the sandbox's digest check, on an injected clock: ``strict`` refuses a
nonce while it is remembered (twice the Date tolerance) and takes it again after, the memory
holds only the nonces of that window however many requests were served, and it survives a
restart with ``--state``; ``lenient`` remembers nothing.

The Authenticator is driven directly (its HTTP side is tests/test_sandbox_auth.py's), so
that hours of requests take no time."""

from __future__ import annotations

from email.utils import formatdate
from pathlib import Path

import pytest

from runner.provider.auth import digest_signature
from runner.sandbox.core.auth import Authenticator, AuthFailure
from runner.sandbox.core.config import SandboxConfig
from runner.sandbox.core.store import Store

KEY, SECRET = "nonce-key", "nonce-secret"
START = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def authenticator(policy: str, tolerance: float = 300.0, state: Path | None = None,
                  ) -> tuple[Authenticator, Store, Clock]:
    config = SandboxConfig(api_key=KEY, api_secret=SECRET, header_brand="Svc",
                           nonce_check=policy, date_tolerance=tolerance)
    store = Store({}, {}, state)
    clock = Clock()
    return Authenticator(config, store, clock), store, clock


def signed(nonce: str, when: float) -> list[tuple[bytes, bytes]]:
    """Digest headers as the server receives them, with a Date of ``when``."""
    date = formatdate(when, usegmt=True)
    return [(b"x-svc-apikey", KEY.encode()), (b"x-svc-nonce", nonce.encode()),
            (b"x-svc-hmac", digest_signature(KEY, SECRET, nonce, date).encode()),
            (b"date", date.encode())]


def accepted(auth: Authenticator, clock: Clock, nonce: str) -> bool:
    try:
        auth.check(signed(nonce, clock.now))
    except AuthFailure as failure:
        assert str(failure) == "nonce already used"
        return False
    return True


def test_strict_refuses_a_nonce_within_twice_the_tolerance_and_takes_it_after():
    auth, _, clock = authenticator("strict", tolerance=300)
    assert accepted(auth, clock, "n-1")
    clock.now = START + 599
    assert not accepted(auth, clock, "n-1")  # a fresh Date and signature: still refused
    clock.now = START + 600
    assert accepted(auth, clock, "n-1")  # forgotten: the Date check guards a replay now
    assert not accepted(auth, clock, "n-1")


def test_strict_memory_holds_only_the_window_however_many_requests_were_served():
    auth, store, clock = authenticator("strict", tolerance=5)
    for n in range(20_000):
        clock.now = START + n / 10  # ten requests a second for 2,000 s
        assert accepted(auth, clock, f"n-{n}")
        assert len(store.nonces) <= 101  # the last 2 x 5 s of nonces, and this one
    assert len(store.nonces) == 100
    assert not accepted(auth, clock, "n-19999")
    assert accepted(auth, clock, "n-19899")  # one window back: forgotten


def test_a_nonce_taken_again_after_expiry_is_kept_until_its_new_expiry():
    """The queue entry of the first use, leaving, must not forget the second."""
    auth, _, clock = authenticator("strict", tolerance=5)
    assert accepted(auth, clock, "again")
    clock.now = START + 10
    assert accepted(auth, clock, "again")
    clock.now = START + 15
    assert accepted(auth, clock, "other")  # the first entry of "again" leaves the queue here
    assert not accepted(auth, clock, "again")
    clock.now = START + 20
    assert accepted(auth, clock, "again")


def test_strict_nonces_survive_a_restart_with_state(tmp_path):
    state = tmp_path / "sandbox.jsonl"
    auth, store, clock = authenticator("strict", tolerance=5, state=state)
    assert accepted(auth, clock, "old")
    clock.now = START + 6
    assert accepted(auth, clock, "recent")
    store.compact()
    auth, store, clock = authenticator("strict", tolerance=5, state=state)
    clock.now = START + 10
    assert len(store.nonces) == 2  # as remembered; "old" expires now
    assert not accepted(auth, clock, "recent")
    assert accepted(auth, clock, "old")
    assert len(store.nonces) == 2
    store.compact()  # closes the state file


@pytest.mark.parametrize("tolerance", [5.0, 300.0])
def test_lenient_takes_a_nonce_again_and_remembers_nothing(tolerance):
    auth, store, clock = authenticator("lenient", tolerance=tolerance)
    for n in range(1000):
        clock.now = START + n / 10
        assert accepted(auth, clock, str(int(clock.now)))  # the Unix time, as real clients
    assert len(store.nonces) == 0
