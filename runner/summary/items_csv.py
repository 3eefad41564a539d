"""The full list of a job's items as CSV: one row per item, for a spreadsheet and for the bank
reconciliation.

Amounts are plain machine numbers at their currency's decimals (``1500.50``, ``1500`` for
JPY: no grouping, no currency sign); the provider's status is split into its code (where the
provider has numeric ones) and its name; times are UTC, ISO 8601: when the item was first
recorded, when the provider answered the call that moves its money (confirmed), and when it
reached its final status.

Cells are written as text; a text cell that a spreadsheet would take for a formula (it starts
with =, +, -, @, a tab or a carriage return) is prefixed with an apostrophe, because names and
messages come from rows files and the provider, and finance opens this file in a spreadsheet.
"""

from __future__ import annotations

import csv
import io
import shutil
import tempfile
import unicodedata
import weakref
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

from runner.summary.amounts import plain_amount
from runner.summary.model import ItemLine, Summary


class SupportsWrite(Protocol):
    def write(self, text: str, /) -> object: ...

COLUMNS = ("external_id", "row", "state", "beneficiary", "identifier", "payer_id", "step",
           "status_code", "status_name", "source_currency", "source_amount", "fee",
           "destination_currency", "destination_amount", "transaction_id", "code", "message",
           "check", "created_at", "confirmed_at", "final_at", "payee")
# Amount columns and the currency each is written in (a fee is in the source currency).
_AMOUNTS = {"source_amount": "source_currency", "fee": "source_currency",
            "destination_amount": "destination_currency"}
# What makes a spreadsheet read a cell as a formula: its first character, or the first after
# blanks, in any compatibility form (a fullwidth ＝ is folded to = by some).
_FORMULA = frozenset("=+-@")
_BLANKS = " \t\r\n\u00a0\u3000"
# A spool's CSV is held in memory up to this size, then in a temporary file.
SPOOL_MEMORY = 1 << 20


def items_csv(summary: Summary) -> str:
    """The CSV as text (a small batch; the reports stream it with ``write_csv``)."""
    out = io.StringIO()
    write_csv(out, summary.lines())
    return out.getvalue()


def write_csv(out: SupportsWrite, items: Iterable[ItemLine]) -> int:
    """Write ``items`` to ``out`` as they come, one row each; how many."""
    writer = _headed(out)
    n = 0
    for item in items:
        writer.writerow(_row(item))
        n += 1
    return n


class Spool:
    """The CSV of a summary's items written as the summary reads them (``build_summary``'s
    ``each``), so that the run's report copies it rather than reads every item again: in
    memory up to ``SPOOL_MEMORY``, beyond it in an anonymous temporary file (private,
    unlinked at once). Closed with ``close``, or when the spool is no longer held."""

    def __init__(self) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY, mode="w+",
                                                   encoding="utf-8", newline="")
        self._writer = _headed(self._file)
        self.count = 0
        self.close = weakref.finalize(self, self._file.close)

    def add(self, item: ItemLine) -> None:
        self._writer.writerow(_row(item))
        self.count += 1

    def copy_to(self, out: SupportsWrite) -> int:
        """Write the whole CSV to ``out``; how many items it lists."""
        self._file.seek(0)
        shutil.copyfileobj(self._file, out)
        return self.count


def _headed(out: SupportsWrite) -> Any:
    """A CSV writer on ``out``, the header row written."""
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    return writer


def _row(item: ItemLine) -> list[str]:
    return [_cell(item, column) for column in COLUMNS]


def _cell(item: ItemLine, column: str) -> str:
    value = getattr(item, column)
    if column in _AMOUNTS:
        return plain_amount(value, getattr(item, _AMOUNTS[column]))
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return csv_cell(value)


def csv_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, int | Decimal):
        return str(value)
    text = str(value)
    return "'" + text if _formula_like(text) else text


def _formula_like(text: str) -> bool:
    """Whether a spreadsheet may take ``text`` for a formula (OWASP's CSV injection list:
    = + - @, a tab or a carriage return first), its compatibility forms included."""
    first = text[:1]
    if first.isascii() and first.isalnum() or not first:  # (most cells: a name, a number)
        return False
    if first in ("\t", "\r"):
        return True
    first = text.lstrip(_BLANKS)[:1]
    return bool(first) and unicodedata.normalize("NFKC", first)[:1] in _FORMULA
