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
message repeats a refused location. The location, password-free, is what messages, plan
files and the state call the state (``location_text``).

``planned_location``: a plan is applied on the state it was made on; another one named is
refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from runner.errors import BadStateLocation

SCHEMES = ("postgresql://", "postgres://")
StateLocation = Path | str  # a path, or a PostgreSQL URL or connection string (text)

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
_KEYWORD = re.compile(r"\s*[A-Za-z_]+\s*=")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SECRET_KEYS = ("password", "sslpassword")
_FORM = "postgresql://USER@HOST:PORT/DB"


def is_database_url(location: StateLocation) -> bool:
    """True for a PostgreSQL location (a URL or a connection string), False for a file."""
    return isinstance(location, str)


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
        return stripped
    scheme = _SCHEME.match(stripped)
    if scheme:
        raise BadStateLocation(f"{source}: a {scheme[0]} URL is not a state runner knows: "
                               f"give a SQLite file path (./{scheme[0]}... for a file named "
                               f"so) or {_FORM}")
    if "://" in text:
        raise BadStateLocation(f"{source}: a URL runner does not know; give a SQLite file "
                               f"path or {_FORM}")
    return Path(text)


def check_url(url: str, source: str = "--state") -> None:
    """Refuse a URL or connection string libpq cannot parse, or one holding a password;
    never echo it. Without the PostgreSQL extra the check waits for ``open_store``, which
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
    if isinstance(location, Path):
        return str(location.resolve())
    check_url(location)
    return location


def same_location(a: StateLocation, b: StateLocation) -> bool:
    """Whether two locations name the same state: one file (after resolving links), or the
    same connection settings however written."""
    if isinstance(a, Path) and isinstance(b, Path):
        return a.resolve() == b.resolve()
    if isinstance(a, str) and isinstance(b, str):
        from psycopg.conninfo import conninfo_to_dict

        return bool(conninfo_to_dict(a) == conninfo_to_dict(b))
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
