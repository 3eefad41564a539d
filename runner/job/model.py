"""The job file as typed data: the contract docs/job-files.md describes.

``Job`` is what ``runner.job.loading.load_job`` returns once the YAML has been read and its
``${VAR}`` references resolved. Its ``defaults`` and ``items.template`` stay untyped here:
they hold Jinja text until each row is rendered, and only the rendered item is checked
against its kind's model (``runner.kinds``). ``runner schema`` prints these models' JSON
Schema for editors.
"""

from __future__ import annotations

import ipaddress
from decimal import Decimal
from email.headerregistry import Address
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from runner.credentials import Credential
from runner.errors import FieldProblem
from runner.job.document import Lines, line_at
from runner.job.fields import Duration, JobModel, parse_duration
from runner.job.limits import CONCURRENCY_MAX
from runner.job.text import UNSEEN, first_unseen
from runner.kinds import MODULES, kind_named, kinds
from runner.policy import MoneyRules


def _kinds_enum(schema: dict[str, Any]) -> None:
    schema["enum"] = list(kinds())


# Job names go into every external_id, which the provider puts in URL paths (ext-...).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def _one_line(value: str) -> str:
    unseen = first_unseen(value)  # controls, separators, bidirectional controls, surrogates
    if unseen is not None:
        raise ValueError(f"holds {unseen}; write it on one line, as it reads")
    return value


#: Text on one line: a path, a host, a URL (control characters refused).
Line = Annotated[str, AfterValidator(_one_line)]


def _at_most(most: str) -> AfterValidator:
    """The longest a duration may be (a longer one is a typo, or would never end)."""
    limit = parse_duration(most)

    def check(value: Decimal) -> Decimal:
        if value > limit:
            raise ValueError(f"at most {most}, got {value:f} s")
        return value

    return AfterValidator(check)


Timeout = Annotated[Duration, _at_most("10m")]
Wait = Annotated[Duration, _at_most("1d")]
LongWait = Annotated[Duration, _at_most("7d")]
KeepFor = Annotated[Duration, _at_most("366d")]


def _off_is_false(value: Any) -> Any:
    """YAML reads an unquoted ``off`` as false: it means off here."""
    return "off" if value is False else value


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address: this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Provider(JobModel):
    base_url: str = Field(
        default="sandbox",
        description='"sandbox" (the embedded emulator), an https URL, or an http URL on '
        "this machine (a sandbox started with `runner sandbox serve`)",
    )
    auth: Literal["basic", "hmac"] = Field(
        default="basic", description="basic: key and secret as user and password; hmac: the "
        "digest headers (the collection service and the legacy Pay take basic only)")
    api_key: SecretStr = Field(min_length=1, description='the API key; from the environment: '
                               '"${RUNNER_API_KEY}"')
    api_secret: SecretStr = Field(min_length=1, description="the API secret; from the "
                                  'environment: "${RUNNER_API_SECRET}"')
    brand: str = Field(
        default="Svc", pattern=r"^[A-Za-z0-9]+$",
        description="brand part of the digest headers: X-<brand>-apikey, ...",
    )
    timeout: Timeout = Field(default=parse_duration("30s"),
                             description="per HTTP request; at most 10m")

    @field_validator("base_url")
    @classmethod
    def _sandbox_or_url(cls, value: str) -> str:
        if value == "sandbox":
            return value
        _one_line(value)
        url = urlsplit(value)
        if "@" in url.netloc:  # never repeated: it may hold a password
            raise ValueError("credentials do not belong in base_url: give them as "
                             "provider.api_key and provider.api_secret, from the environment "
                             "(api_key: ${RUNNER_API_KEY})")
        if url.scheme == "https" and url.hostname:
            return value.rstrip("/")
        if url.scheme == "http" and url.hostname and is_loopback(url.hostname):
            return value.rstrip("/")
        raise ValueError(
            f"{value[:100]!r} is not 'sandbox', an https URL, or an http URL on this machine"
        )

    @model_validator(mode="after")
    def _credentials_on_one_line(self) -> Self:
        for name in ("api_key", "api_secret"):
            if UNSEEN.search(getattr(self, name).get_secret_value()):
                # Never shown: a header would carry it, and a person would not see it.
                raise FieldProblem(name, "holds a control character (a line break?); check "
                                   "where it comes from")
        return self


class Items(JobModel):
    from_: Line | None = Field(
        default=None, alias="from",
        description="CSV (.csv) or JSON Lines (.jsonl, .ndjson) file, relative to the job "
        "file; a regular file under the job file's folder, or under `root`",
    )
    root: Line | None = Field(
        default=None, min_length=1,
        description="the folder rows files are read from, relative to the job file "
        "(default: the job file's folder); `from` must be a file under it, links included")
    rows: list[dict[str, Any]] | None = Field(default=None, description="rows written inline")
    format: Literal["csv", "jsonl"] | None = Field(
        default=None, description="format of `from`, when its extension does not tell"
    )
    delimiter: str = Field(default=",", min_length=1, max_length=1,
                           description="CSV cell separator")
    external_id: str = Field(
        description="Jinja template of each item's external_id; must differ for every row"
    )
    template: dict[str, Any] = Field(
        default_factory=dict,
        description="the item's fields; text may use Jinja over row, vars, defaults, job",
    )
    allow_empty: bool = Field(
        default=False, description="a batch of no rows is expected (else a rows file with a "
        "header and no rows is refused, exit 2)")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.from_ is None) == (self.rows is None):
            raise FieldProblem("from", "give exactly one of `from` (a file) and `rows`")
        if self.from_ is not None and self.format is None:
            if _rows_format(self.from_) is None:
                raise FieldProblem(
                    "from", f"cannot tell the format of {self.from_!r}: name it .csv or .jsonl"
                    ", or set items.format")
        return self


def _rows_format(path: str) -> Literal["csv", "jsonl"] | None:
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    return None


class Retry(JobModel):
    attempts: int = Field(default=6, ge=1, le=100, description="calls in all for a call "
                          "that may be retried (refused connection, 503, 429), the first "
                          "included; at most 100")
    max_wait: Wait = Field(default=parse_duration("60s"),
                           description="the longest wait between two attempts; at most 1d")


class Run(JobModel):
    concurrency: int = Field(default=4, ge=1, le=CONCURRENCY_MAX,
                             description="items worked on at once (calls in flight); at most "
                             f"{CONCURRENCY_MAX}")
    confirm: bool = Field(default=True, description="false: stop after creating, and "
                          "confirm later with `runner confirm`")
    wait_for_final: LongWait = Field(
        default=parse_duration("5m"), description="how long a run follows what it confirmed "
        "to a final status (seconds, or with a unit: 30s, 5m, 1h); 0: not at all; at most 7d")
    retry: Retry = Field(default_factory=Retry, description="retries with backoff of calls "
                         "that may be retried")
    on_invalid: Literal["stop", "skip"] = Field(
        default="stop", description="stop: nothing is sent when any item is invalid; skip: "
        "the valid items are paid, the invalid listed")
    rate_limit: Decimal | None = Field(
        default=None, ge=Decimal("0.01"), le=10_000,
        description="at most this many provider requests per second")
    plan_valid_for: Duration = Field(
        default=parse_duration("24h"),
        description="how long a plan file (`runner plan -o`) may be applied after it was made")
    max_rate_change: Decimal = Field(
        default=Decimal(1), ge=0,
        description="percent a rate may move between a plan and its `runner apply`; more "
        "and the plan is refused")
    four_eyes: bool = Field(
        default=False, description="money moves only through a plan file signed by its "
        "planner and approved by other keys of run.approvers (`runner apply`); `runner run` "
        "and `runner confirm` are refused")
    approvers: Line | None = Field(
        default=None, min_length=1, description="with four_eyes: the keys that may plan and "
        "approve, as an allowed-signers file (git's gpg.ssh.allowedSignersFile, ssh-keygen "
        "-Y verify's -f), relative to the job file")
    approvals: int = Field(
        default=1, ge=1, le=20, description="with four_eyes: how many approvers sign a plan, "
        "each with a key of its own, none the planner's")
    verify_payees: Annotated[Literal["off", "warn", "hold"],
                             BeforeValidator(_off_is_false)] = Field(
        default="off", description="check each payee with the provider before money moves "
        "(the account's status, the holder's name against the row's): warn lists what does "
        "not match; hold also keeps from being paid an item with no match, an account not "
        "available or a check that failed, until its row is fixed or a person accepts it "
        "(`runner resolve JOB ID --accept-payee`)")
    verify_for: KeepFor = Field(
        default=parse_duration("30d"), description="how long the provider's answer about an "
        "account is used again (next month's batch asks only about new or changed accounts; "
        "30d, 12h ...); 0: ask every time; at most 366d")

    @model_validator(mode="after")
    def _approved_plans(self) -> Self:
        if self.four_eyes and not self.confirm:
            raise FieldProblem("confirm", "run.four_eyes: the approved plan's apply confirms "
                               "what it pays and `runner confirm` is refused, so confirm: "
                               "false would leave every item unconfirmed; set it true")
        if self.four_eyes and self.approvers is None:
            raise FieldProblem("approvers", "run.four_eyes needs the keys that may plan and "
                               "approve: an allowed-signers file (see docs/finance-loop.md)")
        for name in ("approvers", "approvals"):
            if name in self.model_fields_set and not self.four_eyes:
                raise FieldProblem(name, "goes with run.four_eyes: true")
        return self


def _one_address(value: str) -> str:
    """One email address, ``name@domain``, as the email package parses it: never a list of
    them written in one text (``payroll,attacker@evil.example`` is refused, not split), a
    display name, a comment or a quoted name; ASCII (an international domain in its
    ``xn--`` form). The mail server is the judge of the rest."""
    why = None
    if not value.isascii() or UNSEEN.search(value):
        why = "write it in ASCII (an international domain as xn--...)"
    elif '"' in value:
        why = "a quoted name is not taken"
    else:
        try:
            address = Address(addr_spec=value)
        except Exception:  # noqa: BLE001 - the parser's errors are of several kinds
            address = None
        if address is None or address.addr_spec != value or not address.username or \
                not address.domain:
            why = "write one address as name@domain"
    if why is not None:
        raise ValueError(f"{value[:100]!r} is not one email address: {why}; several "
                         "addresses are a YAML list (to: [a@example.com, b@example.com])")
    return value


EmailAddress = Annotated[str, Field(max_length=254, json_schema_extra={"format": "email"}),
                         AfterValidator(_one_address)]


class Smtp(JobModel):
    """The mail server. Its certificate is always verified; plain SMTP is for this machine
    only (a local mail transfer agent), so neither a login nor the summary crosses a network
    in the clear."""

    host: Line = Field(min_length=1, description="the mail server")
    port: int = Field(default=587, ge=1, le=65535,
                      description="587 for STARTTLS, 465 for implicit TLS, 25 for plain SMTP")
    starttls: bool | None = Field(
        default=None, description="upgrade the connection with STARTTLS (the default, "
        "unless implicit_tls)")
    implicit_tls: bool = Field(default=False,
                               description="TLS from the first byte (SMTPS, usually port 465)")
    ca_file: Line | None = Field(
        default=None, description="PEM file of the authorities trusted for the server's "
        "certificate, relative to the job file (default: the system's, or $SSL_CERT_FILE)")
    username: Line | None = Field(default=None, description="login; absent or empty: none")
    password: SecretStr | None = Field(default=None, description="from the environment: "
                                       '"${SMTP_PASSWORD}"')
    timeout: Timeout = Field(default=parse_duration("30s"),
                             description="per SMTP command; at most 10m")

    @property
    def tls(self) -> Literal["starttls", "implicit", "none"]:
        if self.implicit_tls:
            return "implicit"
        return "none" if self.starttls is False else "starttls"

    @model_validator(mode="after")
    def _encrypted_off_this_machine(self) -> Self:
        if self.implicit_tls and self.starttls:
            raise FieldProblem("starttls", "implicit_tls already encrypts the connection; "
                               "set only one of them")
        if self.tls == "none" and not is_loopback(self.host):
            raise FieldProblem("starttls", f"plain SMTP to {self.host} would send the summary "
                               "in the clear; use starttls or implicit_tls (plain SMTP is "
                               "for a mail server on this machine only)")
        return self


class Email(JobModel):
    to: list[EmailAddress] = Field(min_length=1, description="recipients")
    cc: list[EmailAddress] = Field(default_factory=list, description="copied recipients")
    from_: EmailAddress = Field(alias="from", description="the sender's address")
    subject: str | None = Field(
        default=None, description="Jinja template over summary and vars; default "
        'like "payroll-2026-11: 248 paid, 2 failed, 1 needs review"')
    send: Literal["always", "problems", "never"] = Field(
        default="always", description="after each run that changed the summary (the same "
        "summary is never mailed twice): always; problems: only when an item failed, was "
        "refused or invalid, needs a person, or the run did not end well; never")
    smtp: Smtp = Field(description="how to reach the mail server")


class Summary(JobModel):
    template: Line | None = Field(
        default=None, description="a .html.j2 or .txt.j2 Jinja template, relative to the job "
        "file; its sibling of the other kind is used when there is one, and the built-in "
        "templates for what is missing")
    email: Email | None = Field(default=None, description="mail the summary after a run")

    @field_validator("template")
    @classmethod
    def _template_kind(cls, value: str | None) -> str | None:
        if value is not None and not value.endswith((".html.j2", ".txt.j2")):
            raise ValueError(f"{value!r}: name a .html.j2 or .txt.j2 template")
        return value


class Job(JobModel):
    """A batch: what to pay (items), through which provider, and how to run it."""

    version: Literal[1] = Field(description="the job file format's version: 1")
    name: str = Field(pattern=NAME_PATTERN, max_length=64, description="the batch's "
                      "identity, part of every external_id: a new batch needs a new name")
    kind: str = Field(json_schema_extra=_kinds_enum,
                      description="what the batch does; one of runner's kinds")
    provider: Provider = Field(description="where to send the calls, and with which "
                               "credentials")
    vars: dict[str, Any] = Field(default_factory=dict, description="free values for the "
                                 "templates (vars.period ...)")
    defaults: dict[str, Any] = Field(default_factory=dict, description="fields merged under "
                                     "every item (deep merge); `runner schema --kind` lists "
                                     "them")
    items: Items = Field(description="the rows to pay and how each becomes an item")
    run: Run = Field(default_factory=Run, description="how the run goes")
    summary: Summary | None = Field(default=None, description="the summary's template and "
                                    "email")

    _path: Path = PrivateAttr(default=Path("job.yaml"))
    _lines: Lines = PrivateAttr(default_factory=dict)
    _rules: MoneyRules = PrivateAttr(default_factory=MoneyRules)

    @property
    def rules(self) -> MoneyRules:
        """The rules the job's money obeys: the executor's policy, made stricter by the job
        file (``runner.policy``; set by ``load_job``)."""
        return self._rules

    @property
    def path(self) -> Path:
        """The job file; relative paths in the job are relative to its folder."""
        return self._path

    @property
    def rows_path(self) -> Path | None:
        """The rows file named by ``items.from``, or None for inline rows."""
        return None if self.items.from_ is None else self._path.parent / self.items.from_

    @property
    def approvers_path(self) -> Path | None:
        """The allowed-signers file named by ``run.approvers``, if any."""
        return None if self.run.approvers is None else self._path.parent / self.run.approvers

    @property
    def rows_root(self) -> tuple[Path, str]:
        """The folder the rows file must be under (``items.root``, else the job file's),
        and how messages name it."""
        if self.items.root is None:
            return self._path.parent, "the job file's folder"
        return self._path.parent / self.items.root, f"items.root {self.items.root}"

    @property
    def rows_format(self) -> Literal["csv", "jsonl"] | None:
        if self.items.from_ is None:
            return None
        return self.items.format or _rows_format(self.items.from_)

    def line_of(self, *path: str | int) -> int | None:
        """The job file's line holding ``path`` (or its nearest parent), for messages."""
        return line_at(self._lines, path)

    def credentials(self) -> list[Credential]:
        """The job's credentials (the provider's key and secret, the mail server's
        password, each with its login), for masking them in anything written or mailed
        (``runner.credentials``)."""
        key = self.provider.api_key.get_secret_value()
        values = [Credential(key), Credential(self.provider.api_secret.get_secret_value(),
                                              key)]
        email = self.summary.email if self.summary else None
        if email is not None and email.smtp.password is not None:
            values.append(Credential(email.smtp.password.get_secret_value(),
                                     email.smtp.username or None))
        return values

    def secrets(self) -> list[str]:
        """The job's credentials' secrets."""
        return [c.secret for c in self.credentials()]

    @property
    def item_model(self) -> type[JobModel]:
        return kind_named(self.kind).item

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in MODULES:  # a kind is its module's name
            raise ValueError(f"unknown kind {value!r}")
        return value

