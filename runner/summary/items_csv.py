"""The full list of a job's items as CSV: one row per item, for a spreadsheet.

Cells are written as text; a text cell that a spreadsheet would take for a formula (it starts
with =, +, -, @, a tab or a carriage return) is prefixed with an apostrophe, because names and
messages come from rows files and the provider, and finance opens this file in a spreadsheet.
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal

from runner.summary.model import Summary

COLUMNS = ("external_id", "row", "state", "beneficiary", "identifier", "payer_id", "step",
           "status", "source_currency", "source_amount", "fee", "destination_currency",
           "destination_amount", "transaction_id", "code", "message", "check")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def items_csv(summary: Summary) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for item in summary.items:
        writer.writerow([csv_cell(getattr(item, column)) for column in COLUMNS])
    return out.getvalue()


def csv_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, int | Decimal):
        return str(value)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA) else text
