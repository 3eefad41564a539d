"""The one exception tree of runner: every error it raises on purpose, drawn here and defined
here (the sandbox's own errors are the emulated provider's answers, not runner's).

::

    RunnerError                    exit 1; anything runner reports on purpose (anything
    │                              else reaching the command line is a bug: exit 70)
    ├── JobError                   exit 2; one problem in a job file or its rows:
    │                              "FILE:ROW: FIELD: message"
    ├── JobErrors                  exit 2; every problem found, one JobError a line
    ├── FieldProblem               a model validator's word on one field; a ValueError too,
    │                              so that pydantic reports it (and runner.job makes it a JobError)
    ├── FileUnreadable             a file a job names is not read: missing, not a regular
    │                              file, under /proc, /sys or /dev, or outside the folder rows
    │                              files are read from (runner.job.sources); made a JobError
    ├── JsonRefused                JSON read two ways by two readers: a key twice in one
    │   │                          object, a lone surrogate (runner.job.strict_json); a
    │   │                          ValueError too, as the reader's own errors are
    │   └── JsonTooDeep            nested deeper than the reader goes
    ├── StateError                 the state says no (no such item to resolve ...)
    │   ├── LeaseHeld              exit 75; another run holds the job's lease
    │   ├── StateMissing           exit 2; a command that only reads was given no database
    │   ├── BadStateLocation       exit 2; --state names no usable place (a URL with a
    │   │                          password in it, an unknown scheme, not the plan's)
    │   ├── StateUnavailable       exit 75; the database stays locked, or its disk is full:
    │   │                          try later
    │   └── StateUnusable          exit 74; the database cannot be created, read or written
    │                              (read-only, no permission, damaged, written by a newer
    │                              runner, a table missing)
    ├── IllegalMove                exit 70; a move an item's life does not allow
    │                              (runner.lifecycle): a bug, refused before it is written
    ├── PlanRefused                exit 2; `runner apply` will not pay this plan (changed,
    │                              expired, a rate moved, four eyes): nothing was sent
    ├── NeedsApproval              exit 2; under run.four_eyes money moves only through an
    │                              approved plan (`run`, `confirm` refused): nothing was sent
    ├── SigningError               exit 2; a key that cannot sign (unreadable, a wrong
    │                              passphrase), or a signature that does not verify
    ├── ConsoleRefused             what `runner console` says no to, in words for the
    │                              person at the page (HTTP 400)
    ├── FileNotWritten             exit 74; a file runner writes (a plan, a report, a
    │                              summary) cannot be: a full disk, no permission, a link,
    │                              a device or a folder where it goes (runner.state.files)
    ├── SummaryError               exit 3; the summary could not be rendered, written or
    │   │                          emailed (the items' state is safe; see runner.summary)
    │   └── EmailNotSent           the mail server could not be reached or refused the message
    ├── ConfigurationError         exit 78 (EX_CONFIG); the provider cannot be used as
    │   │                          configured: a person fixes it, retrying changes nothing
    │   │                          (AuthenticationError, UntrustedCertificate and
    │   │                          ProviderMisconfigured are these too)
    │   ├── PolicyRefused          the executor's policy (RUNNER_POLICY) cannot be read or
    │   │                          is not valid (runner.policy)
    │   └── MissingExtra           the job or command needs an optional part of the
    │                              distribution that is not installed (runner.extras)
    ├── ItemError                  the engine's verdict on one item's call; the run catches it
    │   ├── ItemConflict           the provider holds something else under the external_id
    │   ├── OtherRecord            a lookup by external_id answered a record whose own
    │   │                          external reference is another's: never adopted (rule 8)
    │   ├── ItemInDoubt            unknown even after a lookup: a later run looks again
    │   │                          (exit 75 where a read outside the items meets it: a
    │   │                          plan's balances)
    │   ├── NoLookup               the provider cannot find the item by its external_id
    │   │                          (rule 5): reconciliation says what it compared instead
    │   └── ProviderDown           exit 75; unreachable, or "later" after every retry: the
    │       │                      run stops and resumes later
    │       └── ProviderMisconfigured  exit 78; credentials refused or certificate not
    │                                  trusted: the run stops until the configuration is fixed
    └── ProviderError              an answer (or none): status, code, message, endpoint,
        │                          external_id, and its retry rule
        ├── ProviderConnectionError  exit 75; no HTTP answer
        │   ├── ConnectionRefused    never reached the provider: SAFE
        │   │   └── UntrustedCertificate  exit 78; its TLS certificate is not trusted (or has
        │   │                             no subjectAltName for its name): UNSAFE
        │   ├── ResponseLost         sent, then the connection dropped: LOOKUP
        │   └── ProviderTimeout      sent, no answer in time: LOOKUP
        └── ProviderHTTPError        the provider answered with an error
            ├── AuthenticationError  exit 78; credentials missing or refused: UNSAFE
            ├── RateLimited          exit 75; too many calls: SAFE after a wait
            ├── ServiceUnavailable   exit 75; "retry later": SAFE after a wait
            ├── ServerError          exit 75; a technical error, status unknown: LOOKUP
            │   └── PayStatusUnknown   the legacy Pay's 5000: its order may exist
            ├── UnexpectedAnswer     exit 75; not the answer the call promises (an HTML
            │                        page, a body that is not JSON or does not decode, a
            │                        redirect, an interim 1xx): the call may have gone
            │                        through: LOOKUP
            ├── NotFound             no such resource: UNSAFE
            ├── InvalidRequest       the request is malformed or invalid: UNSAFE
            ├── DuplicateExternalId  the external_id is used: LOOKUP (fetch it, adopt it
            │                        if it is the item's)
            └── BusinessRefusal      every other refusal: UNSAFE (the item fails with the
                │                    provider's code and message)
                ├── AlreadyConfirmed       the transaction or payment is confirmed already
                ├── QuotationExpired       the quotation can no longer be used
                ├── InsufficientBalance    the balance does not cover the confirmation
                ├── DuplicateWithoutLookup the external_id is used by a call that has no
                │                          lookup (an operation, the Pay): a person checks
                ├── ReferenceTaken         a reference or name (an account request's, a
                │                          company's ...) is taken: look it up, then decide
                └── PayRefused             the legacy Pay's 3000: its order exists, Refused

``exit_code`` is declared on each class (as click does), one of ``runner.exit_codes``, and
read only by ``runner.cli``: the library raises these and never prints or exits. ``retry`` is
what the exactly-once rules (docs/exactly-once.md) allow after a provider error: SAFE (send
it again, same external_id), LOOKUP (look the resource up by its external_id before anything
else) or UNSAFE (never again);
``runner.provider.retry.decide`` reads it. Which answer is which class is decided in one
place, ``runner.provider.errors.error_from_answer``.

A provider error that reaches the command line is one that no item bears: a read that
kept failing (validation's, a plan's), or one that stops a run or the payee checks. Those
that say "later" (no answer, 429, 503, a 5xx or an answer runner cannot read, after every
retry) exit 75, nothing having been sent, and those of the configuration 78, as a run's own
stop does; the rest (a refusal) 1. ``down`` says which errors stop a run, or the payee
checks, rather than fail the one item, and ``stopping`` what they stop it with
(``ProviderDown`` 75, ``ProviderMisconfigured`` 78); ``stop_if_down`` raises it. A plan's
or a validation's reads and dry runs that are no item's (the catalogue, the balances, the
dry-run quotations, the fee estimates) are retried as a run's calls are, and stop the
command by the same rule, nothing paid; only the provider's refusal of one row's
quotation is that row's problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from enum import Enum

from runner.credentials import redact
from runner.exit_codes import ExitCode


class RunnerError(Exception):
    """Base of every error runner reports on purpose (anything else is a bug)."""

    exit_code = ExitCode.PROBLEMS


class JobError(RunnerError):
    """One problem with a job: the file it is in, the row, the field, and what is wrong.

    ``row`` is the line of the job file for problems in the YAML, and the row of the rows
    file for problems in an item (see ``runner.job`` for the numbering); ``None`` when the
    problem belongs to the whole file. ``field`` is a dotted path, ``None`` when no single
    field is at fault.
    """

    exit_code = ExitCode.USAGE

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

    exit_code = ExitCode.USAGE

    def __init__(self, errors: Iterable[JobError]) -> None:
        self.errors = list(errors)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(error) for error in self.errors)

    def __iter__(self) -> Iterator[JobError]:
        return iter(self.errors)

    def __len__(self) -> int:
        return len(self.errors)


class FieldProblem(RunnerError, ValueError):
    """A model validator's complaint about one of the model's fields.

    Pydantic locates a model validator's error at the model itself; raising this instead
    lets the message name the field a person has to fix (``source.amount``), not its parent.
    It is a ValueError so that pydantic collects it with the other problems.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)




class FileUnreadable(RunnerError):
    """Why a file a job names (the job file, its rows file, a summary template, the mail
    server's CA file, a plan file) is not read: the message says why, and never quotes what
    is in it."""


class JsonRefused(RunnerError, ValueError):
    """JSON that two readers would read two ways, refused rather than read one of them: a key
    given twice in one object (the standard library keeps the last), a lone surrogate."""


class JsonTooDeep(JsonRefused):
    """JSON nested deeper than the reader goes."""


class StateError(RunnerError):
    """The state cannot do what was asked (an item to resolve is not there, or not in
    doubt), or cannot be used at all (the subclasses)."""


class LeaseHeld(StateError):
    """Another live run holds the job's lease: try later (rule 6 of docs/exactly-once.md)."""

    exit_code = ExitCode.TRY_LATER


class StateMissing(StateError):
    """A command that only reads the state (status, report, reconcile) was pointed at a database
    that does not exist: it is not created empty, which would read as "nothing was paid"."""

    exit_code = ExitCode.USAGE


class IllegalMove(RunnerError):
    """A move an item's life does not allow from where the item is (``runner.lifecycle``):
    a bug in runner, never the job's nor the provider's. Nothing of the move is written;
    the run stops (EX_SOFTWARE) rather than send or record what the rules forbid."""

    exit_code = ExitCode.INTERNAL_ERROR


class PlanRefused(RunnerError):
    """A plan file cannot be applied as it stands; ``reasons`` says every why. Nothing was
    sent: make a new plan (and have it approved again)."""

    exit_code = ExitCode.USAGE

    def __init__(self, reasons: Iterable[str]) -> None:
        self.reasons = list(reasons)
        super().__init__("the plan is refused: " + "; ".join(self.reasons))


class NeedsApproval(RunnerError):
    """``run.four_eyes``: a command that would move money without an approved plan file
    (`runner run`, `runner confirm`) is refused before anything is opened or sent; the message
    says how to plan, approve and apply."""

    exit_code = ExitCode.USAGE


class SigningError(RunnerError):
    """A key cannot sign (unreadable, a public key, a wrong passphrase, a type not read), or a
    signature cannot be read or does not verify (``runner.signatures``)."""

    exit_code = ExitCode.USAGE


class ConsoleRefused(RunnerError):
    """What the console says no to (``runner.console``): a call out of order, from another
    page, by a key that may not, for a plan that may no longer be signed."""

    exit_code = ExitCode.USAGE


class BadStateLocation(StateError):
    """``--state`` (or ``RUNNER_STATE``, or a plan file's state) is not a place runner can
    keep its state: a database URL or connection string holding a password (which would
    then be in shell histories, crontabs and process lists; PGPASSWORD or ~/.pgpass hold it
    instead), one libpq cannot parse, a URL of another scheme (never taken for a file
    name), or a state other than the one a plan file was made on."""

    exit_code = ExitCode.USAGE


class StateUnavailable(StateError):
    """The state database stayed locked by another process longer than runner waits, or its
    disk is full: nothing is wrong with it, and a later run can go on (EX_TEMPFAIL)."""

    exit_code = ExitCode.TRY_LATER


class StateUnusable(StateError):
    """The state database cannot be created, read or written: a read-only folder or file
    system, no permission, an I/O error, a file that is not runner's database or is damaged,
    one written by a newer runner, or one missing a table. A person must look (EX_IOERR)."""

    exit_code = ExitCode.STATE_UNUSABLE


class FileNotWritten(RunnerError):
    """A file runner writes whole (a plan file, ``--output``, a summary) could not be written:
    the disk is full, permission is missing, or a symbolic link, a device or a folder is where
    it goes (never written through). Nothing of it was left behind (EX_IOERR)."""

    exit_code = ExitCode.STATE_UNUSABLE


class SummaryError(RunnerError):
    """The summary of a run could not be made or delivered; the items are not affected.

    Exit code 3 only when nothing worse happened: the command line keeps a run's own
    non-zero code (1, 2, 75) when there is one.
    """

    exit_code = ExitCode.SUMMARY_NOT_SENT


class EmailNotSent(SummaryError):
    """The summary email did not go out: server unreachable, login refused, message refused."""


class ConfigurationError(RunnerError):
    """The provider cannot be used as runner is configured: it refuses the credentials, or
    its certificate is not trusted. Nothing a later run does without a person changes that,
    so it is not "try later" (75) but EX_CONFIG: a cron job stops retrying it and says so."""

    exit_code = ExitCode.CONFIGURATION


class PolicyRefused(ConfigurationError):
    """The executor's policy (``RUNNER_POLICY``, ``runner.policy``) cannot be read or is not
    valid: nothing moves money until whoever keeps it fixes it. ``problems`` names each file,
    line and field."""

    def __init__(self, problems: Iterable[JobError]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


class MissingExtra(ConfigurationError):
    """An extra (the sandbox's server, PostgreSQL's driver) is needed and not installed: a
    configuration of this host, not a problem of the job."""


class ItemError(RunnerError):
    """What the engine makes of one item's call when it cannot simply go on; the run
    catches these per item, and they never leave it."""


class ItemConflict(ItemError):
    """The provider holds something under this external_id that is not this item."""


class OtherRecord(ItemError):
    """A lookup by an external id (or reference, or name) answered a record that does not
    carry it: a provider may match its own ids or other names too. It is never adopted,
    and the lookup never goes on to another key (rule 8 of docs/exactly-once.md): the item needs a
    person, who is told both records, the one asked for and the one the provider gave."""

    def __init__(self, noun: str, key: str, asked: str, found_id: object,
                 found: object) -> None:
        self.noun = noun
        self.key = key
        self.asked = asked
        self.found_id = found_id
        self.found = found
        super().__init__(
            f"the lookup of {noun} {asked!r} answered {noun} {found_id}, whose {key} is "
            f"{found!r}: another's, not adopted; whether this item's {noun} ({key} "
            f"{asked!r}) was made is not known: check both at the provider")


class ItemInDoubt(ItemError):
    """A call's outcome could not be learnt, even by lookup: try again in a later run. The
    run makes it the item's; a read that is no item's (a plan's balances) ends the command
    with it: nothing was sent, try later (EX_TEMPFAIL)."""

    exit_code = ExitCode.TRY_LATER


class NoLookup(ItemError):
    """The provider has no lookup of this item by its external_id (an operation, a Pay
    without its order): the message says what can be compared instead, and how."""


class ProviderDown(ItemError):
    """The provider cannot be reached (or keeps answering "later"): stop, resume later."""

    exit_code = ExitCode.TRY_LATER


class ProviderMisconfigured(ConfigurationError, ProviderDown):
    """A call met a ``ConfigurationError`` during a run: the run stops as it does for a
    provider that cannot be reached, and exits 78."""

    exit_code = ExitCode.CONFIGURATION


class Retry(Enum):
    """What the exactly-once rules allow after a provider error."""

    SAFE = "safe"  # nothing was done: send the same request again, after a wait
    LOOKUP = "lookup"  # it may have been done: look it up by external_id first
    UNSAFE = "unsafe"  # never send it again


class ProviderError(RunnerError):
    """The provider failed a call: no answer, or an answer that says no.

    Carries what a person or the engine needs: the HTTP ``status`` (None without an
    answer), the provider's ``code`` and ``message``, the ``endpoint`` ("POST /v1/..."),
    the ``external_id`` the call was about, and (on the class) its ``retry`` rule.
    """

    retry = Retry.UNSAFE

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 endpoint: str = "", external_id: str | None = None) -> None:
        self.status = status
        self.code = code
        self.message = redact(message)  # a server may quote what it was sent
        self.endpoint = endpoint
        self.external_id = external_id
        super().__init__(self.message)

    def __str__(self) -> str:
        where = f" ({self.endpoint})" if self.endpoint else ""
        code = f"{self.code} " if self.code else ""
        return f"{code}{self.message}{where}"


class ProviderConnectionError(ProviderError):
    """No HTTP answer came back; the subclasses say whether the request left."""

    exit_code = ExitCode.TRY_LATER


class ConnectionRefused(ProviderConnectionError):
    """The request never left: the connection was refused, the provider's name did not
    resolve, or its TLS certificate is not trusted. Nothing can have been done."""

    retry = Retry.SAFE


class UntrustedCertificate(ConfigurationError, ConnectionRefused):
    """The provider's TLS certificate is not trusted (no configured or system authority
    signed it, or it names the host only in its common name): nothing was sent, and sending
    again cannot succeed until the CA settings (or the provider's certificate) change."""

    retry = Retry.UNSAFE
    exit_code = ExitCode.CONFIGURATION


class ResponseLost(ProviderConnectionError):
    """The connection dropped after the request was sent: the provider may have done it."""

    retry = Retry.LOOKUP


class ProviderTimeout(ProviderConnectionError):
    """The request was sent and no answer came in time (the read timeout ran out): the
    provider may still be doing it."""

    retry = Retry.LOOKUP


class ProviderHTTPError(ProviderError):
    """The provider answered, with an error status or an error ReturnCode. ``retry_after``:
    the seconds its ``Retry-After`` asked to wait before calling again (429, 503), if any."""

    retry_after: float | None = None


class AuthenticationError(ConfigurationError, ProviderHTTPError):
    """The credentials are missing or refused: fix them before anything else."""

    exit_code = ExitCode.CONFIGURATION


class RateLimited(ProviderHTTPError):
    """429: too many calls for the provider; this one was not done."""

    retry = Retry.SAFE
    exit_code = ExitCode.TRY_LATER


class ServiceUnavailable(ProviderHTTPError):
    """The provider (or a remote payment server) says "retry later"; nothing was done."""

    retry = Retry.SAFE
    exit_code = ExitCode.TRY_LATER


class ServerError(ProviderHTTPError):
    """A technical error: the request may or may not have been carried out. One that reaches
    the command line came after every retry of a read (nothing done): try later."""

    retry = Retry.LOOKUP
    exit_code = ExitCode.TRY_LATER


class UnexpectedAnswer(ProviderHTTPError):
    """An answer that is not one the call promises: an HTML page (a proxy's, a portal's), a
    body that is not JSON or does not decode, a redirect (never followed), an interim 1xx
    given as the answer, an error status without the provider's error body. It proves
    neither that the call was done nor that it was not: look it up before anything else
    (its connection is not used again: see ``runner.provider.transport``). A run's item
    meeting one is looked up; one reaching the command line came after every retry of a
    read that is no item's (validation's): nothing was sent, try later (a proxy's page
    passes)."""

    retry = Retry.LOOKUP
    exit_code = ExitCode.TRY_LATER


class PayAnswered:
    """What an answered legacy Pay said besides its code: the order it made, its status."""

    payment_order_id: int | None = None
    order_status: str | None = None


class PayStatusUnknown(PayAnswered, ServerError):
    """The legacy Pay's 5000: a remote technical error; the order may exist (Error), its
    fate is unknown."""


class NotFound(ProviderHTTPError):
    pass


class InvalidRequest(ProviderHTTPError):
    """The request is malformed, or a value in it is invalid: fix the item."""


class DuplicateExternalId(ProviderHTTPError):
    """The external_id was used before: fetch what holds it, adopt it if it is the item."""

    retry = Retry.LOOKUP


class BusinessRefusal(ProviderHTTPError):
    """The provider refuses by its business rules; the item fails with its code and
    message."""


class AlreadyConfirmed(BusinessRefusal):
    pass


class QuotationExpired(BusinessRefusal):
    """The quotation expired (or can no longer be used for a confirmation)."""


class InsufficientBalance(BusinessRefusal):
    pass


class DuplicateWithoutLookup(BusinessRefusal):
    """The external_id was used before, by a call that cannot be looked up by it (a charge,
    refund or cancel, the legacy Pay): never sent again, a person checks (rule 5 of
    docs/exactly-once.md)."""


class ReferenceTaken(BusinessRefusal):
    """A reference or a name that identifies what the call makes is taken already (an
    account request's external_reference, an onboarding company's name ...): the caller
    looks up what holds it and adopts it, or calls it a conflict."""


class PayRefused(PayAnswered, BusinessRefusal):
    """The legacy Pay's 3000: the card (or the remote server) refused; the order exists,
    Refused."""


def down(error: ProviderError, *, read: bool = False) -> bool:
    """Whether ``error`` stops the run (or the check, or the command) rather than fail the
    one item it was about: the provider cannot be reached, says "later" after every retry,
    or cannot be used as configured (credentials, certificate). With ``read`` (a read or a
    dry run that is no item's: a plan's or a validation's catalogue, balances, dry-run
    quotations, fee estimates), an answer still in doubt after every retry (a 5xx, one
    runner cannot read) is "later" too: what it asked moves no money, and says nothing of
    a row."""
    return isinstance(error, ProviderConnectionError | ConfigurationError) or \
        error.retry is Retry.SAFE or (read and error.retry is Retry.LOOKUP)


def stopping(error: ProviderError, doing: str = "") -> ProviderDown:
    """What stops the run for ``error`` (one ``down`` says stops it): exit 78 for the
    configuration, else 75; ``doing`` says what it stopped ("the payee checks")."""
    said = f"{doing}: {error}" if doing else str(error)
    if isinstance(error, ConfigurationError):
        return ProviderMisconfigured(said)
    return ProviderDown(said)


def stop_if_down(error: ProviderError, doing: str, *, read: bool = False) -> None:
    """Raise what stops the run or the command (``stopping``) when ``error`` is one that
    ``down`` says stops it; else return, and the caller makes ``error`` the item's (a
    finding, a row's problem, a refusal)."""
    if down(error, read=read):
        raise stopping(error, doing) from error
