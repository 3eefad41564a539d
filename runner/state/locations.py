"""Where the state is, read one way wherever it is given: ``--state``, ``RUNNER_STATE``, and
the ``"state"`` a plan file records (``parse_location``).

- A ``postgresql://`` or ``postgres://`` URL, or a libpq connection string
  (``host=db.internal dbname=payroll user=runner``: words followed by ``=``), is a PostgreSQL
  database. Either is kept as text (a ``Path`` would fold the URL's ``//``).
- Any other URL (``sqlite:///x``, ``https://...``, anything starting with a scheme and a
  colon, ``name:``) is refused, never taken for a file name; so is text holding a control
  character.
- Everything else is a SQLite file path (a file whose name starts like a URL or a
  connection string is written ``./name``).

A location never carries a password: a URL or a connection string that does (``user:pw@``,
``?password=``, ``password=``, ``sslpassword=``) is refused (``BadStateLocation``, exit 2)
rather than cleaned, because by then it is already in a shell's history, a crontab or the
process list; libpq reads the password from ``PGPASSWORD`` or ``~/.pgpass`` instead. No
message repeats a refused location. The location, password-free, is what messages show
(``StateLocation.shown``) and what plan files record (``location_text``).

``planned_location``: a plan is applied on the state it was made on; another one named is
refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runner.errors import BadStateLocation

SCHEMES = ("postgresql://", "postgres://")

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
_KEYWORD = re.compile(r"\s*[A-Za-z_]+\s*=")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SECRET_KEYS = ("password", "sslpassword")
_FORM = "postgresql://USER@HOST:PORT/DB"


@dataclass(frozen=True)
class StateLocation:
    """Where the state is: a SQLite file (``path``), or a PostgreSQL database (``conninfo``:
    a URL or a libpq connection string, checked to hold no password). Made by
    ``parse_location`` (text, as ``--state`` gives it), ``sqlite`` or ``of``."""

    kind: Literal["sqlite", "postgresql"]
    path: Path | None = None
    conninfo: str | None = None

    @classmethod
    def sqlite(cls, path: Path) -> StateLocation:
        return cls("sqlite", path=path)

    @classmethod
    def of(cls, where: StateLocation | Path | str) -> StateLocation:
        """``where`` as a location: a path is a SQLite file; text is read as ``--state``
        reads it."""
        if isinstance(where, StateLocation):
            return where
        if isinstance(where, Path):
            return cls.sqlite(where)
        return parse_location(where)

    @property
    def folder(self) -> Path | None:
        """The SQLite file's folder (None: a database)."""
        return self.path.parent if self.path is not None else None

    @property
    def shown(self) -> str:
        """How messages name it: the path as given, or the database's URL or connection
        string (which holds no password)."""
        return str(self.path) if self.path is not None else str(self.conninfo)

    def __str__(self) -> str:
        return self.shown


def parse_location(text: str, source: str = "--state") -> StateLocation:
    """The state location ``text`` names (a PostgreSQL database, checked; or a file path);
    BadStateLocation, naming ``source`` but never repeating ``text``, when it is neither."""
    if not text.strip():
        raise BadStateLocation(f"{source}: empty; give a SQLite file path or {_FORM}")
    if _CONTROL.search(text):
        raise BadStateLocation(f"{source}: holds a control character; give a SQLite file "
                               f"path or {_FORM}")
    stripped = text.strip()
    if stripped.startswith(SCHEMES) or _KEYWORD.match(stripped):
        check_url(stripped, source)
        return StateLocation("postgresql", conninfo=stripped)
    scheme = _SCHEME.match(stripped)
    if scheme:
        raise BadStateLocation(f"{source}: a {scheme[0]} URL is not a state runner knows: "
                               f"give a SQLite file path (./{scheme[0]}... for a file named "
                               f"so) or {_FORM}")
    if "://" in text:
        raise BadStateLocation(f"{source}: a URL runner does not know; give a SQLite file "
                               f"path or {_FORM}")
    return StateLocation.sqlite(Path(text))


def check_url(url: str, source: str = "--state") -> None:
    """Refuse a URL or connection string libpq cannot parse, or one holding a password;
    never echo it. Without the PostgreSQL extra the check waits for ``open_state``, which
    names the extra (and opens nothing)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return

    what = "database URL" if url.startswith(SCHEMES) else "connection string"
    try:
        parts = conninfo_to_dict(url)
    except Exception as exc:  # noqa: BLE001 - libpq's message may quote the URL
        raise BadStateLocation(f"{source}: not a PostgreSQL {what} libpq can read "
                               f"({type(exc).__name__}); the form is {_FORM}") from None
    if any(key in parts for key in _SECRET_KEYS):
        raise BadStateLocation(f"{source}: the {what} holds a password; give it in "
                               "PGPASSWORD or ~/.pgpass instead, and remove it from the "
                               f"{what} (and from wherever it was written down)")


def location_text(location: StateLocation) -> str:
    """The location as a plan file records it: a file as an absolute path; a database as
    given, checked again to hold no password."""
    if location.path is not None:
        return str(location.path.resolve())
    check_url(location.shown)
    return location.shown


def same_location(a: StateLocation, b: StateLocation) -> bool:
    """Whether two locations name the same state: one file (after resolving links), or the
    same connection settings however written."""
    if a.path is not None and b.path is not None:
        return a.path.resolve() == b.path.resolve()
    if a.conninfo is not None and b.conninfo is not None:
        from psycopg.conninfo import conninfo_to_dict

        return bool(conninfo_to_dict(a.conninfo) == conninfo_to_dict(b.conninfo))
    return False


def planned_location(recorded: object, given: StateLocation | None,
                     plan: Path) -> StateLocation:
    """Where the plan file ``plan`` is applied: the state it records (``recorded``); a
    ``given`` one (--state, RUNNER_STATE) only when it is the same state.
    BadStateLocation otherwise."""
    if not isinstance(recorded, str):
        raise BadStateLocation(f"{plan}: the plan's state is not a location")
    planned = parse_location(recorded, f"{plan}: the plan's state")
    if given is not None and not same_location(planned, given):
        raise BadStateLocation(
            f"the plan {plan} was made on the state {location_text(planned)}, and --state "
            f"(or RUNNER_STATE) names {location_text(given)}: a plan is applied on the "
            "state it was made on (make a new plan on the other state)")
    return planned
