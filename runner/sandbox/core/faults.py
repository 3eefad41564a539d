"""Fault injection: the fault rule of an endpoint group (every fault knob, declared once), and
the state that draws from the rules and counts the calls.

Each request falls in an endpoint group (``group_of``). A group's rule (or the ``*`` rule)
may add latency, answer 500, 503 or 429 before any work is done, limit the calls each API key
makes per second (429 with Retry-After beyond it), lose the answer (the work is
done and committed, then the connection is dropped with no response), or hold the answer
for ``slow_seconds`` (longer than a client's timeout). Counters (``lost_next`` ...) hit the
next calls deterministically; rates draw from a seeded random generator. What each fault
does to a call is core/middleware.py's.

A kind of fault is a pair of ``FaultRule`` fields, ``<kind>_rate`` and ``<kind>_next``: the
kinds, their order of precedence, the ``runner sandbox serve`` options and the checks of
``POST /_admin/faults`` all come from those fields.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from runner.sandbox.core import paths
from runner.sandbox.core.knobs import knob, settings

GROUPS = ("ping", "discovery", "balances", "parties", "quotations", "create", "confirm",
          "lookups", "payment_orders", "operations", "accounts", "onboarding", "legacy")


RATE = "share of calls"
MOST_CALLS = 1_000_000_000
LONGEST_LATENCY_MS = 600_000.0  # ten minutes


@dataclass
class FaultRule:
    """Faults for one endpoint group: rates are probabilities per call, ``*_next`` counters
    hit the next N calls deterministically (tests use those). The options of the rates, the
    latency and the rate limit set the ``*`` rule of ``runner sandbox serve``."""

    latency_ms: float = knob(0.0, help="Added to every provider call.", unit="milliseconds",
                             show_default=False, maximum=LONGEST_LATENCY_MS)
    error_rate: float = knob(0.0, help="Share of calls answered 500 (nothing done).",
                             unit=RATE, show_default=False, maximum=1)
    unavailable_rate: float = knob(0.0, help="Share answered 503, retry later.",
                                   unit=RATE, show_default=False, maximum=1)
    throttled_rate: float = knob(0.0, help="Share answered 429 with Retry-After (nothing "
                                 "done).", unit=RATE, show_default=False, maximum=1)
    lost_rate: float = knob(0.0, help="Share whose answer is lost after the work.",
                            unit=RATE, show_default=False, maximum=1)
    slow_rate: float = knob(0.0, help="Share answered after --slow-seconds.",
                            unit=RATE, show_default=False, maximum=1)
    error_next: int = knob(0, help="The next N calls answered 500.", unit="calls", option=None,
                           maximum=MOST_CALLS)
    unavailable_next: int = knob(0, help="The next N calls answered 503.", unit="calls",
                                 option=None, maximum=MOST_CALLS)
    throttled_next: int = knob(0, help="The next N calls answered 429.", unit="calls",
                               option=None, maximum=MOST_CALLS)
    lost_next: int = knob(0, help="The next N calls whose answer is lost.", unit="calls",
                          option=None, maximum=MOST_CALLS)
    slow_next: int = knob(0, help="The next N calls answered late.", unit="calls", option=None,
                          maximum=MOST_CALLS)
    # A real limit, per API key: calls beyond it are answered 429, Retry-After the seconds
    # until the next one is allowed. It counts the group's own rule's calls (or the "*"
    # rule's, which every group without a rule of its own shares).
    requests_per_second: float = knob(
        0.0, help="Requests per second allowed per API key; more are answered 429 with "
        "Retry-After (0: no limit).", unit="calls per second", show_default=False,
        maximum=1_000_000)

    def is_quiet(self) -> bool:
        return not any(getattr(self, f.name) for f in fields(self))


SETTINGS = {s.name: s for s in settings(FaultRule)}
# The kinds of fault, in the order a call meets them: a counter before any rate.
KINDS = tuple(name.removesuffix("_rate") for name in SETTINGS if name.endswith("_rate"))
assert all(f"{kind}_next" in SETTINGS for kind in KINDS), "every rate has its counter"


def group_of(method: str, path: str) -> str | None:
    """The endpoint group of a provider call; None for paths outside the provider API."""
    if path in ("/ping", "/v1/payment/ping"):
        return "ping"
    if path.startswith(paths.LEGACY):
        return "legacy"
    if not path.startswith("/v1/"):
        return None
    if path.startswith(paths.COLLECTION):
        return _collection_group(method, path)
    if method == "GET":
        if path.endswith("/balances"):
            return "balances"
        if any(p in path for p in ("/quotations/", "/transactions/", "/payments/")):
            return "lookups"
        return "discovery"
    if path.endswith("/confirm"):
        return "confirm"
    if path.endswith(("/transactions", "/payments")):
        return "create"
    if path.endswith("/quotations"):
        return "quotations"
    if "-party-" in path:
        return "parties"
    return "create"


def _collection_group(method: str, path: str) -> str:
    if method == "GET":
        if "/balances" in path or path.endswith("/entries"):
            return "balances"
        # Reading an account's set-up (its payout bank accounts) is what validation does,
        # like reading a payer: not a lookup of something a client asked for.
        return "discovery" if path.startswith("/v1/onboarding/accounts/") else "lookups"
    if path.endswith("/quotations"):
        return "quotations"
    if path.endswith(("/charges", "/refunds", "/cancellations")):
        return "operations"
    if path.endswith("/payment-orders"):
        return "payment_orders"
    if path.startswith("/v1/onboarding/"):
        return "onboarding"
    return "accounts"


# ---------------------------------------------------------------- reading fault settings
def setting(name: str, value: Any) -> float | int:
    """A fault setting as the rule holds it: counters int, the rest float (JSON bodies carry
    Decimal, which asyncio.sleep refuses), within the knob's bounds; anything else is
    refused."""
    found = SETTINGS.get(name)
    if found is None:
        raise ValueError(f"unknown fault settings: {name}")
    counter, maximum = found.type is int, found.knob.maximum
    kind = "integer" if counter else "number"
    most = "" if maximum is None else f" of at most {maximum:g}"
    try:
        if isinstance(value, bool | str) or value is None or not 0 <= value <= (
                math.inf if maximum is None else maximum):
            raise TypeError
        number = int(value) if counter else float(value)
        if (counter and number != value) or not math.isfinite(number):
            raise TypeError
    except (TypeError, ValueError, ArithmeticError):
        raise ValueError(f"{name} must be a non-negative {kind}{most}") from None
    return number


def check_group(group: str) -> str:
    if group != "*" and group not in GROUPS:
        raise ValueError(f"unknown endpoint group {group!r} (groups: *, {', '.join(GROUPS)})")
    return group


def read_setting(text: str) -> tuple[str, str, float | int]:
    """``confirm:lost_rate=0.2`` (a ``--fault`` value) as (group, setting, number)."""
    group, _, assignment = text.partition(":")
    name, _, number = assignment.partition("=")
    try:
        value = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"{text!r}: expected GROUP:SETTING=NUMBER") from None
    return check_group(group), name, setting(name, value)


def fault_rules(star: Mapping[str, Any], changes: Iterable[tuple[str, str, float | int]],
                ) -> dict[str, FaultRule]:
    """The rules of ``runner sandbox serve``: ``star`` sets the ``*`` rule and is where every
    group's rule starts from; each change then sets one setting of one group."""
    rules = {"*": FaultRule(**star)} if any(star.values()) else {}
    for group, name, number in changes:
        rule = rules.get(group) or FaultRule(**star)
        setattr(rule, name, number)
        rules[group] = rule
    return rules


# ---------------------------------------------------------------- the running state
class FaultState:
    def __init__(self, rules: dict[str, FaultRule], slow_seconds: float,
                 seed: int | None, clock: Callable[[], float] = time.monotonic) -> None:
        # Copies: the counters count down here, not in the caller's (reusable) config.
        self.rules = {group: replace(rule) for group, rule in rules.items()}
        self.slow_seconds = slow_seconds
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._clock = clock
        # (rule's group, API key) -> (calls it may still make now, when that was counted), on
        # ``clock``: the sandbox clock, so that a test moves it instead of waiting
        self._allowance: dict[tuple[str, str], tuple[float, float]] = {}
        self.counts: Counter[str] = Counter()
        self.recent: deque[dict[str, Any]] = deque(maxlen=2000)
        self.in_flight = 0
        self.peak_in_flight = 0  # the most provider calls being answered at once

    def set_rules(self, changes: dict[str, dict[str, Any]]) -> None:
        """Change the rules of several groups at once: all of them, or (on a bad value) none."""
        checked: dict[str, dict[str, float | int]] = {}
        for group, values in changes.items():
            unknown = set(values) - set(SETTINGS)
            if unknown:
                raise ValueError(f"unknown fault settings: {', '.join(sorted(unknown))}")
            check_group(group)
            checked[group] = {name: setting(name, value) for name, value in values.items()}
        with self._lock:
            for group, values in checked.items():
                base = asdict(self.rules.get(group, FaultRule()))
                self.rules[group] = FaultRule(**{**base, **values})

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()
            self._allowance.clear()

    def admit(self, group: str, key: str) -> int | None:
        """Count one call of ``key`` against its rule's ``requests_per_second``: None when it
        is allowed, else the whole seconds to wait (a token bucket of one second's calls)."""
        if not self.rules:
            return None  # no rule at all, the usual case: no lock taken
        with self._lock:
            name = group if group in self.rules else "*"
            rule = self.rules.get(name)
            if rule is None or not rule.requests_per_second:
                return None
            rate = rule.requests_per_second
            now = self._clock()
            left, then = self._allowance.get((name, key), (max(1.0, rate), now))
            left = min(max(1.0, rate), left + (now - then) * rate)
            if left >= 1:
                self._allowance[name, key] = (left - 1, now)
                return None
            self._allowance[name, key] = (left, now)
            self.counts["throttled"] += 1
            return max(1, math.ceil((1 - left) / rate))

    def describe(self) -> dict[str, Any]:
        return {"slow_seconds": self.slow_seconds,
                "rules": {g: asdict(r) for g, r in self.rules.items()}}

    def record(self, method: str, path: str, group: str) -> None:
        """A provider call arrives (``done`` when it is answered)."""
        with self._lock:
            self.counts[method] += 1
            self.counts[f"{method} {group}"] += 1
            if group == "parties":  # the payee checks, counted apart: what a client asked
                self.counts[f"{method} parties {path.rsplit('-', 1)[-1]}"] += 1
            self.recent.append({"method": method, "path": path, "group": group})
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def forget(self) -> None:
        """Counts, latest calls and peak start again."""
        with self._lock:
            self.counts.clear()
            self.recent.clear()
            self.peak_in_flight = self.in_flight

    def decide(self, group: str) -> tuple[float, str | None]:
        """(latency in seconds, kind of fault or None) for one call."""
        with self._lock:
            rule = self.rules.get(group) or self.rules.get("*")
            if rule is None:
                return 0.0, None
            found = None
            for kind in KINDS:
                left = getattr(rule, f"{kind}_next")
                if left > 0:
                    setattr(rule, f"{kind}_next", left - 1)
                    found = kind
                    break
            else:
                found = next((kind for kind in KINDS if getattr(rule, f"{kind}_rate")
                              and self._random.random() < getattr(rule, f"{kind}_rate")), None)
            if found == "throttled":
                self.counts["throttled"] += 1
            return rule.latency_ms / 1000, found
