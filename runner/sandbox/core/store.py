"""The sandbox's state: resources, internal bookkeeping, balances, in memory.

With ``--state FILE`` every change is also appended to the file as a JSON line (decimals kept
exact), so a restarted sandbox (even one killed with SIGKILL) replays it and carries on; a clean
shutdown compacts the file to one line per record. Resources are kept as the dicts the API
answers with; ``meta`` holds what the provider knows but does not show (plans, costs).
"""

from __future__ import annotations

import heapq
import itertools
import os
import tempfile
import threading
from collections import deque
from decimal import Decimal
from pathlib import Path
from typing import Any

import simplejson

from runner.sandbox.core.bounds import number
from runner.sandbox.core.clock import SandboxClock

TABLES = (
    # money transfer and merchant payment services
    "quotations", "transactions", "mquotations", "payments",
    # collection service and the legacy Pay call
    "cquotations", "payment_orders", "operations", "transfer_requests", "payout_requests",
    "companies", "merchants", "accounts", "entries",
)
# Sandbox-clock times in ``meta``: floats, though the journal reads every number back exact.
TIMES = ("due", "expires")


class Store:
    def __init__(self, balances: dict[str, tuple[Decimal, Decimal]],
                 merchant_balances: dict[str, Decimal], path: Path | None = None) -> None:
        """``balances``: the money transfer balances at the first start, currency ->
        (balance, credit facility); ``merchant_balances``: the merchant payment ones."""
        self.lock = threading.RLock()
        self.tables: dict[str, dict[int, dict[str, Any]]] = {t: {} for t in TABLES}
        self.by_ext: dict[str, dict[str, int]] = {t: {} for t in TABLES}
        self.meta: dict[str, dict[int, dict[str, Any]]] = {t: {} for t in TABLES}
        self.seq: dict[str, int] = {t: 0 for t in TABLES}
        self.balances: dict[str, dict[str, Any]] = {}
        for n, (currency, (amount, facility)) in enumerate(sorted(balances.items()), 1):
            self.balances[currency] = {"id": n, "currency": currency, "balance": amount,
                                       "pending": Decimal("0"), "credit_facility": facility}
        self.merchant_balances: dict[str, dict[str, Any]] = {
            c: {"id": n, "currency": c, "balance": amount}
            for n, (c, amount) in enumerate(sorted(merchant_balances.items()), 1)}
        self.nonces = NonceMemory()
        # Accounts and who holds them, as verifications named them first (core/parties.py).
        self.parties: dict[str, list[str]] = {}
        # What a service derives from its tables to answer in O(1) (accounts/models.py's
        # ledgers), made again from the tables when missing: never journalled.
        self.derived: dict[str, Any] = {}
        self.schedule: list[tuple[float, int, str, int]] = []
        self._tiebreak = itertools.count()
        # The sandbox clock's offset is state too: due times and expiries are on that clock,
        # so a restarted sandbox moves its clock on by the offset it had (``clock_offset``,
        # read back here) and attaches the clock, whose offset is journalled when it moved.
        self.clock_offset = 0.0
        self.clock: SandboxClock | None = None
        self.path = path
        self._journal = None
        if path is not None:
            if path.exists():
                self._replay(path)
            self._journal = path.open("a", encoding="utf-8")

    # ------------------------------------------------------------ resources
    def next_id(self, table: str) -> int:
        self.seq[table] += 1
        self._write("seq", table, self.seq[table])
        return self.seq[table]

    def add(self, table: str, obj: dict[str, Any], meta: dict[str, Any], *,
            rid: int | None = None, ext: str | None = None) -> None:
        """Keep a new resource under its internal number ``rid`` (default: its ``id``) and
        its external key ``ext`` (default: its ``external_id``, when it has one)."""
        rid = obj["id"] if rid is None else rid
        ext = obj.get("external_id") if ext is None else ext
        self.tables[table][rid] = obj
        if ext is not None:
            self.by_ext[table][ext] = rid
        self.meta[table][rid] = {**meta, "ext": ext}
        self.save(table, rid)

    def get(self, table: str, ref: str) -> dict[str, Any] | None:
        """Find by numeric id (ASCII digits, core/bounds.py) or by ``ext-{external_id}``."""
        if ref.startswith("ext-"):
            rid = self.by_ext[table].get(ref[4:])
        else:
            rid = number(ref)
        return self.tables[table].get(rid) if rid is not None else None

    def save(self, table: str, rid: int) -> None:
        self._write(table, rid, self.tables[table][rid])
        self._write("meta:" + table, rid, self.meta[table][rid])

    def schedule_at(self, due: float, table: str, rid: int) -> None:
        heapq.heappush(self.schedule, (due, next(self._tiebreak), table, rid))

    def pop_due(self, now: float) -> tuple[float, str, int] | None:
        if self.schedule and self.schedule[0][0] <= now:
            due, _, table, rid = heapq.heappop(self.schedule)
            return due, table, rid
        return None

    def save_balance(self, currency: str, merchant: bool = False) -> None:
        kind = "merchant_balances" if merchant else "balances"
        self._write(kind, currency, getattr(self, kind)[currency])

    def hold_account(self, key: str, holder: tuple[str, str]) -> None:
        """Keep who holds the account ``key``, unless someone does already."""
        if key not in self.parties:
            self.parties[key] = list(holder)
            self._write("parties", key, self.parties[key])

    # ------------------------------------------------------------ nonces
    def nonce_seen(self, key_nonce: str, expires: float, now: float) -> bool:
        """Remember a nonce until ``expires``; True when it is remembered still."""
        return self.nonces.seen(key_nonce, expires, now)

    # ------------------------------------------------------------ persistence
    def _write(self, kind: str, key: Any, value: Any) -> None:
        if self._journal is not None:
            if self.clock is not None and self.clock.offset != self.clock_offset:
                self.clock_offset = self.clock.offset
                self._put("clock", "", self.clock_offset)
            self._put(kind, key, value)

    def _put(self, kind: str, key: Any, value: Any) -> None:
        assert self._journal is not None
        line = simplejson.dumps({"k": kind, "id": key, "v": value}, use_decimal=True)
        self._journal.write(line + "\n")
        self._journal.flush()

    def _replay(self, path: Path) -> None:
        whole = 0  # bytes of complete, readable lines
        with path.open("rb") as f:
            for line in f:
                if not line.strip():
                    whole += len(line)
                    continue
                try:
                    rec = simplejson.loads(line.decode("utf-8"), use_decimal=True)
                except ValueError:
                    break  # a line cut short by a crash: everything before it stands
                whole += len(line)
                kind, key, value = rec["k"], rec["id"], rec["v"]
                if kind == "seq":
                    self.seq[key] = value
                elif kind in ("balances", "merchant_balances"):
                    getattr(self, kind)[key] = value
                elif kind == "parties":
                    self.parties[key] = value
                elif kind == "nonces":
                    self.nonces = NonceMemory(value)
                elif kind == "clock":
                    self.clock_offset = float(value)
                elif kind.startswith("meta:"):
                    for name in TIMES:
                        if value.get(name) is not None:
                            value[name] = float(value[name])
                    self.meta[kind[5:]][int(key)] = value
                else:
                    self.tables[kind][int(key)] = value
        # Drop what a crash left half written (and end the last line), so that the lines
        # appended from now on are not glued to it and lost at the next replay.
        with path.open("r+b") as f:
            f.truncate(whole)
            if whole:
                f.seek(whole - 1)
                if f.read(1) != b"\n":
                    f.write(b"\n")
        for table, metas in self.meta.items():
            for rid, meta in metas.items():
                ext = meta.get("ext", self.tables[table].get(rid, {}).get("external_id"))
                if ext is not None:
                    self.by_ext[table][ext] = rid
                if meta.get("due") is not None:
                    self.schedule_at(meta["due"], table, rid)

    def compact(self) -> None:
        """Rewrite the state file as one line per record (on clean shutdown)."""
        if self.path is None:
            return
        with self.lock:
            if self._journal is not None:
                self._journal.close()
            # A new file of its owner's only (never one placed there, nor through a link).
            descriptor, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name,
                                               suffix=".tmp")
            with open(descriptor, "w", encoding="utf-8") as f:
                self._journal = f  # type: ignore[assignment]
                if self.clock is not None:
                    self.clock_offset = self.clock.offset
                self._put("clock", "", self.clock_offset)
                for table in TABLES:
                    self._write("seq", table, self.seq[table])
                    for rid in self.tables[table]:
                        self.save(table, rid)
                for currency in self.balances:
                    self.save_balance(currency)
                for currency in self.merchant_balances:
                    self.save_balance(currency, merchant=True)
                for key, holder in self.parties.items():
                    self._write("parties", key, holder)
                self._write("nonces", "", self.nonces.remembered())
            os.replace(tmp, self.path)
            self._journal = None


class NonceMemory:
    """The nonces of ``--nonce-check strict``, each until it expires, in O(1) amortised per
    request whatever the number served: a dict answers "seen?", and a queue in order of
    expiry (nonces arrive in that order: each expires a fixed time after it came) forgets
    the expired ones from its left end, a few at each new nonce. A nonce past its expiry but
    not yet forgotten (the clock stepped back) counts as new."""

    def __init__(self, remembered: dict[str, float] | None = None) -> None:
        self._expires: dict[str, float] = {}
        self._queue: deque[tuple[float, str]] = deque()
        for key, expires in sorted((remembered or {}).items(), key=lambda kv: kv[1]):
            self._keep(key, float(expires))

    def __len__(self) -> int:
        return len(self._expires)

    def seen(self, key: str, expires: float, now: float) -> bool:
        self._forget(now)
        if self._expires.get(key, now) > now:
            return True
        self._keep(key, expires)
        return False

    def remembered(self) -> dict[str, float]:
        """Nonce -> expiry, for the state file."""
        return dict(self._expires)

    def _keep(self, key: str, expires: float) -> None:
        self._expires[key] = expires
        self._queue.append((expires, key))

    def _forget(self, now: float) -> None:
        queue, expires = self._queue, self._expires
        while queue and queue[0][0] <= now:
            when, key = queue.popleft()
            if expires.get(key) == when:  # not kept again since
                del expires[key]
