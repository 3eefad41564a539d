"""The one small interface between the state's queries and a database: a ``Connector``
runs the statements it is given (its dialect's, from ``runner.state.sql``) and hands back
rows as dicts. Two siblings implement it: ``runner.state.sqlite.SqliteConnector`` (one
file, one connection) and ``runner.state.postgres.PostgresConnector`` (psycopg's pool).
Neither knows a table; ``runner.state.store`` and its parts know nothing of connections.

The caller says what a query does, never the SQL text:

- ``read``: rows; on PostgreSQL sent again on a new connection when the connection was lost;
- ``write``: one change (one statement, or the several of one named entry), committed when
  it returns; never sent twice: an answer lost once it was sent (it may have been applied)
  is ``StateUnavailable`` (exit 75), and the next run resumes from what the state holds;
- ``insert``: ``write`` for a change whose first statement is a plain ``INSERT`` of one row
  (it inserts, or fails: SQLite gives an ``INSERT`` that inserted nothing the rowid of an
  earlier one): that row's id (SQLite's rowid, read without a ``RETURNING`` clause, whose
  row costs a fetch on every call; PostgreSQL's ``RETURNING id``);
- ``write_many``: one statement for each of many rows, in one transaction;
- ``load``: many new rows of one table, as fast as the database takes them (executemany on
  SQLite, COPY on PostgreSQL);
- ``transaction``: ``work(tx)`` in one transaction, the reads and writes of ``tx`` inside
  it; with ``lock`` it runs alone among the transactions naming the same lock (SQLite's one
  writer does that for every transaction). On PostgreSQL it runs again on a new connection
  when the connection was lost before its COMMIT was sent; a lost COMMIT is
  ``StateUnavailable``;
- ``stream``: a whole table's rows, a page at a time (``runner state copy``).

Parameters are named (``**args``); a list is bound as a list (SQLite: JSON text, read with
``json_each``; PostgreSQL: an array). Amounts (``Decimal``) are stored as their exact text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from runner.state.sql import Dialect, Queries, Statements

T = TypeVar("T")
Row = dict[str, Any]


class Tx(Protocol):
    """One transaction's reads and writes (``Connector.transaction``)."""

    def read(self, query: Statements, /, **args: Any) -> list[Row]: ...

    def write(self, query: Statements, /, **args: Any) -> list[Row]: ...

    def write_many(self, query: Statements, rows: Iterable[Sequence[Any]]) -> None: ...

    def load(self, query: Statements, rows: Iterable[Sequence[Any]]) -> None: ...


class Connector(Protocol):
    dialect: Dialect
    location: str  # where the state is, for messages (a path, or a URL without password)
    sql: Queries  # the dialect's named statements

    def read(self, query: Statements, /, **args: Any) -> list[Row]: ...

    def write(self, query: Statements, /, **args: Any) -> list[Row]: ...

    def insert(self, query: Statements, /, **args: Any) -> int: ...

    def write_many(self, query: Statements, rows: Sequence[Sequence[Any]]) -> None: ...

    def load(self, query: Statements, rows: Sequence[Sequence[Any]]) -> None: ...

    def transaction(self, work: Callable[[Tx], T], *, lock: str | None = None) -> T: ...

    def stream(self, query: Statements, size: int = 1000) -> Iterator[list[Row]]: ...

    def close(self) -> None: ...
