"""The rows of a job: from a CSV or JSON Lines file beside the job file, or inline.

Rows are read one at a time (a 100,000-row file never sits in memory), each with the number
a person uses to find it, which is what every message about the row shows:

- CSV: the spreadsheet's row number. Row 1 is the header, so the first data row is row 2;
  a row whose cells are all empty is skipped but still counted, as a spreadsheet counts it.
- JSON Lines: the line number, counting from 1; blank lines are skipped and counted.
- inline ``rows:``: the line of the job file where the row starts.

Files are UTF-8; a byte-order mark (as Excel writes) is tolerated. Bytes that are not UTF-8
make that row an error naming the row, and reading goes on with the next one; so does a line
longer than ``limits.ROW_LINE_BYTES_MAX`` (skipped without being held in memory) and a JSON
Lines row nested deeper than ``limits.NESTING_MAX``, or holding a key twice or a lone
surrogate (``strict_json``). JSON numbers are read from their text,
as YAML's are: a decimal that the grammar of amounts (``runner.money.parse_amount``) takes is
a ``Decimal``, any other (``1e400``, 40 digits) stays text, for the field to judge.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Literal

from runner.errors import FileUnreadable, JobError, JsonRefused, JsonTooDeep
from runner.job.limits import NESTING_MAX, ROW_LINE_BYTES_MAX, too_deep
from runner.job.sources import open_regular, rows_file_problem
from runner.job.strict_json import strict_loads
from runner.job.text import first_unseen
from runner.money import parse_amount

_BOM = b"\xef\xbb\xbf"


class RowValues(dict[str, Any]):
    """One row's values by column name; its own type so a template's messages can tell a
    missing column from a missing variable."""

    __slots__ = ()


#: Either a row's values or the problem that kept them from being read.
RowRead = tuple[int, RowValues | JobError]


@dataclass(frozen=True)
class RowsFile:
    """A CSV or JSON Lines file of rows, read anew by each iteration."""

    path: Path
    format: Literal["csv", "jsonl"]
    delimiter: str = ","
    root: Path | None = None  # the folder it must be under (``sources``), checked at each read
    root_named: str = ""

    @property
    def name(self) -> str:
        return str(self.path)

    @property
    def unit(self) -> str:
        """What its numbers count, for messages: ``row`` or ``line``."""
        return "row" if self.format == "csv" else "line"

    def open(self) -> IO[bytes]:
        """The file, opened to be read, when it may be (``sources``); FileUnreadable if not."""
        problem = None if self.root is None else \
            rows_file_problem(self.path, self.root, self.root_named)
        if problem is not None:
            raise FileUnreadable(problem.removeprefix(f"{self.path}: "))
        return open_regular(self.path)

    def header(self) -> list[str] | JobError:
        """The CSV header's column names, or the problem with it (JSON Lines: no header).
        A first row that is no header is described, never quoted: it may be anything."""
        with self.open() as stream:
            lines = _Utf8Lines(stream)
            reader = csv.reader(lines, delimiter=self.delimiter)
            try:
                first = next(reader, None)
            except csv.Error:
                return JobError(self.name, 1, None, "row 1 is not a header (invalid CSV)")
            if lines.problem is not None:
                return JobError(self.name, 1, None, lines.problem)
        if not first:
            return JobError(self.name, None, None, "the file is empty; its first row names "
                            "the columns")
        for index, column in enumerate(first, start=1):
            problem = _column_problem(column)
            if problem is not None:
                return JobError(self.name, 1, None, f"row 1 is not a header: column {index} "
                                f"{problem}; a header names each column on one line, in at "
                                f"most {COLUMN_NAME_MAX} characters")
        seen: dict[str, int] = {}
        for index, column in enumerate(first, start=1):
            if not column.strip():
                return JobError(self.name, 1, None, f"column {index} has no name")
            if column in seen:
                return JobError(self.name, 1, None, f"column {column!r} is named twice "
                                f"(columns {seen[column]} and {index})")
            seen[column] = index
        return first

    def __iter__(self) -> Iterator[RowRead]:
        if self.format == "csv":
            return self._csv()
        return self._jsonl()

    def _csv(self) -> Iterator[RowRead]:
        header = self.header()
        if isinstance(header, JobError):
            yield 1, header
            return
        width = len(header)
        with self.open() as stream:
            lines = _Utf8Lines(stream)
            reader = csv.reader(lines, delimiter=self.delimiter, strict=True)
            number = 0
            try:
                for number, cells in enumerate(reader, start=1):
                    if lines.problem is not None:
                        yield number, JobError(self.name, number, None, lines.problem)
                        lines.problem = None
                    elif number == 1 or not any(cells):
                        continue
                    elif len(cells) != width:
                        yield number, JobError(self.name, number, None, f"the row has "
                                               f"{len(cells)} cells, the header {width}")
                    else:
                        yield number, RowValues(zip(header, cells, strict=True))
            except csv.Error as exc:
                yield number + 1, JobError(self.name, number + 1, None, f"invalid CSV: {exc}")

    def _jsonl(self) -> Iterator[RowRead]:
        with self.open() as stream:
            for number, raw in enumerate(_bounded_lines(stream), start=1):
                if raw is None:
                    yield number, JobError(self.name, number, None, _TOO_LONG)
                    continue
                if number == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM):]
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    yield number, JobError(self.name, number, None, _not_utf8(raw, exc))
                    continue
                if not text.strip():
                    continue
                yield number, self._json_row(number, text)

    def _json_row(self, number: int, text: str) -> RowValues | JobError:
        try:
            value = strict_loads(text.rstrip("\r\n"), parse_float=_json_decimal,
                                 parse_int=_json_integer)
        except json.JSONDecodeError as exc:
            return JobError(self.name, number, None,
                            f"invalid JSON at column {exc.colno}: {exc.msg}")
        except JsonTooDeep:
            return JobError(self.name, number, None, _TOO_DEEP)
        except JsonRefused as exc:
            return JobError(self.name, number, None, f"invalid JSON: {exc}")
        if too_deep(value):
            return JobError(self.name, number, None, _TOO_DEEP)
        if not isinstance(value, dict):
            return JobError(self.name, number, None, "a row must be a JSON object ({...})")
        return RowValues(value)


@dataclass(frozen=True)
class InlineRows:
    """The ``rows:`` written in the job file, numbered by the line each starts on."""

    rows: list[dict[str, Any]]
    lines: list[int]
    name: str
    unit: str = "line"

    def __iter__(self) -> Iterator[RowRead]:
        for line, row in zip(self.lines, self.rows, strict=True):
            yield line, RowValues(row)


RowSource = RowsFile | InlineRows


class _Utf8Lines:
    """Lines of a binary stream as text, for ``csv.reader``.

    Decoding line by line (not through a text wrapper, which decodes ahead in blocks) lets a
    bad byte be pinned to its row; such a line is passed on with replacement characters (a
    line too long, as an empty line) and ``problem`` is set for the reader's caller to turn
    that row into an error.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self._lines = _bounded_lines(stream)
        self._first = True
        self.problem: str | None = None

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        raw = next(self._lines)
        if raw is None:
            self.problem = self.problem or _TOO_LONG
            return "\n"
        if self._first:
            self._first = False
            if raw.startswith(_BOM):
                raw = raw[len(_BOM):]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.problem = self.problem or _not_utf8(raw, exc)
            return raw.decode("utf-8", errors="replace")


_TOO_DEEP = f"objects and arrays nested more than {NESTING_MAX} deep"
_TOO_LONG = f"the line is longer than {ROW_LINE_BYTES_MAX:,} bytes; it was skipped"


def _bounded_lines(stream: IO[bytes]) -> Iterator[bytes | None]:
    """The lines of ``stream``, each at most ``ROW_LINE_BYTES_MAX`` bytes (newline included);
    None for a longer one, which is read past without being kept."""
    while line := stream.readline(ROW_LINE_BYTES_MAX + 1):
        if len(line) <= ROW_LINE_BYTES_MAX:
            yield line
            continue
        while line and not line.endswith(b"\n"):
            line = stream.readline(ROW_LINE_BYTES_MAX)
        yield None


#: The longest column name of a header (a longer first row is some other line).
COLUMN_NAME_MAX = 100


def _column_problem(column: str) -> str | None:
    """Why ``column`` names no column (its text unquoted); None when it may. An ``=`` is
    refused too: a line of settings (``KEY=value``) is not a header."""
    if len(column) > COLUMN_NAME_MAX:
        return f"is {len(column):,} characters long"
    unseen = first_unseen(column)
    if unseen is not None:
        return f"holds {unseen}"
    if "=" in column:
        return "holds an ="
    return None


def _json_decimal(text: str) -> Decimal | str:
    try:
        return parse_amount(text)
    except ValueError:
        return text


def _json_integer(text: str) -> int | str:
    return int(text) if len(text) <= 18 else text


def _not_utf8(raw: bytes, exc: UnicodeDecodeError) -> str:
    byte = raw[exc.start]
    return (f"not UTF-8 text (byte 0x{byte:02X} at byte {exc.start + 1} of the line); "
            "save the file as UTF-8")
