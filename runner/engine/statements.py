"""The accounts' statements as runner reads them (document 1: an account's entries, oldest
first): each account's entries grouped by the transfer request that booked them, read once
and then only past what was read. The transfer flow checks a validated transfer's two
entries with it; reconciliation adds up what a batch's requests debited."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

Entries = list[dict[str, Any]]


@dataclass
class _Statement:
    """An account's entries as read so far (oldest first), grouped by transfer request."""

    read: int = 0
    by_transfer: dict[str, Entries] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, entries: Entries) -> None:
        self.read += len(entries)
        for e in entries:
            self.by_transfer.setdefault(str(e.get("transfer_request_id")), []).append(e)


class Statements:
    """``entries(account_id, since)``: the account's entries past the first ``since``."""

    def __init__(self, entries: Callable[[str, int], Entries]) -> None:
        self._entries = entries
        self._lock = threading.Lock()
        self._statements: dict[str, _Statement] = {}

    def of(self, account_id: str, transfer_id: str) -> Entries:
        """The entries of ``account_id`` booked by transfer request ``transfer_id``. Only
        the entries not read yet are fetched; when none is found the statement is read again
        from its start (in case the provider does not list it oldest first)."""
        with self._lock:
            statement = self._statements.setdefault(account_id, _Statement())
        with statement.lock:
            if transfer_id not in statement.by_transfer:
                start = statement.read
                statement.add(self._entries(account_id, start))
                if transfer_id not in statement.by_transfer and start > 0:
                    statement.read, statement.by_transfer = 0, {}
                    statement.add(self._entries(account_id, 0))
            return list(statement.by_transfer.get(transfer_id, ()))

    def debited(self, account_id: str, transfer_ids: Collection[str], currency: str
                ) -> Decimal:
        """What the transfer requests ``transfer_ids`` debited on the account, in
        ``currency``, as its statement shows it now (read whole)."""
        total = Decimal(0)
        for e in self._entries(account_id, 0):
            money = e.get("entry") or {}
            if e.get("credit_debit_indicator") == "debit" and money.get("currency") == \
                    currency and str(e.get("transfer_request_id")) in transfer_ids:
                total += Decimal(str(money.get("amount")))
        return total
