"""The one exception tree of runner; the command line turns it into messages and exit codes.

::

    RunnerError                 exit_code 1; anything runner itself reports
    ├── JobError                exit_code 2; one problem in a job file or its rows:
    │                           file, row, field, message -> "FILE:ROW: FIELD: message"
    ├── JobErrors               exit_code 2; every problem found, one JobError per line
    ├── StateError              the state database (lease, schema, corruption)
    ├── SummaryError            exit_code 3; the summary could not be rendered, written
    │   │                       or emailed (the items' state is safe; see runner.summary)
    │   └── EmailNotSent        the mail server could not be reached or refused the message
    └── ProviderError           the provider's answers; its subtree lives in
                                runner/provider/errors.py

The library raises these and never prints or exits; only ``runner.cli`` reads
``exit_code``, so the mapping from failure to exit status is declared next to each class
(as click does) instead of in a table somewhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


class RunnerError(Exception):
    """Base of every error runner reports on purpose (anything else is a bug)."""

    exit_code = 1


class JobError(RunnerError):
    """One problem with a job: the file it is in, the row, the field, and what is wrong.

    ``row`` is the line of the job file for problems in the YAML, and the row of the rows
    file for problems in an item (see ``runner.job`` for the numbering); ``None`` when the
    problem belongs to the whole file. ``field`` is a dotted path, ``None`` when no single
    field is at fault.
    """

    exit_code = 2

    def __init__(
        self, file: str, row: int | None, field: str | None, message: str
    ) -> None:
        self.file = file
        self.row = row
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file if self.row is None else f"{self.file}:{self.row}"
        if self.field:
            return f"{where}: {self.field}: {self.message}"
        return f"{where}: {self.message}"

    def __repr__(self) -> str:
        return f"JobError({self.file!r}, {self.row!r}, {self.field!r}, {self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobError):
            return NotImplemented
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


class JobErrors(RunnerError):
    """Every problem found in a job, in the order found; one per line when printed."""

    exit_code = 2

    def __init__(self, errors: Iterable[JobError]) -> None:
        self.errors = list(errors)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(error) for error in self.errors)

    def __iter__(self) -> Iterator[JobError]:
        return iter(self.errors)

    def __len__(self) -> int:
        return len(self.errors)


class StateError(RunnerError):
    """The state database cannot be used as asked (lease held, bad schema, corrupt file)."""


class SummaryError(RunnerError):
    """The summary of a run could not be made or delivered; the items are not affected.

    Exit code 3 only when nothing worse happened: the command line keeps a run's own
    non-zero code (1, 2, 75) when there is one.
    """

    exit_code = 3


class EmailNotSent(SummaryError):
    """The summary email did not go out: server unreachable, login refused, message refused."""


class ProviderError(RunnerError):
    """Base of the provider's errors; the tree itself lives in runner/provider/errors.py."""
