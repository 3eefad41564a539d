"""Where the state is: a SQLite file (a path, the default) or a PostgreSQL database (a
``postgresql://`` or ``postgres://`` URL), as ``--state`` or ``RUNNER_STATE`` give it.

A URL never carries a password: one that does is refused (``BadStateLocation``, exit 2)
rather than cleaned, because by then it is already in a shell's history, a crontab or the
process list; libpq reads the password from ``PGPASSWORD`` or ``~/.pgpass`` instead. The
URL, password-free, is what messages call the state (``location``).
"""

from __future__ import annotations

from pathlib import Path

from runner.errors import BadStateLocation

SCHEMES = ("postgresql://", "postgres://")
StateLocation = Path | str  # a path, or a database URL (text: a Path would mangle it)


def is_database_url(location: StateLocation) -> bool:
    return isinstance(location, str) and location.startswith(SCHEMES)


def parse_location(text: str) -> StateLocation:
    """``--state``'s value: a database URL (checked) or a file path."""
    if text.startswith(SCHEMES):
        check_url(text)
        return text
    if "://" in text:
        raise BadStateLocation(f"--state {text.split('://')[0]}://...: not a state runner "
                               "knows (a SQLite file path, or postgresql://USER@HOST:PORT/DB)")
    return Path(text)


def check_url(url: str) -> None:
    """Refuse a URL libpq cannot parse, or one holding a password; never echo a password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception as exc:  # noqa: BLE001 - libpq's message may quote the URL
        raise BadStateLocation(f"--state: not a PostgreSQL URL libpq can read "
                               f"({type(exc).__name__}); the form is "
                               "postgresql://USER@HOST:PORT/DB") from None
    if "password" in parts:
        raise BadStateLocation("--state: the database URL holds a password; give it in "
                               "PGPASSWORD or ~/.pgpass instead, and remove it from the URL "
                               "(and from wherever it was written down)")
