"""The credentials runner holds, and every form of them that could be written by mistake:
none appears in anything runner writes (a summary, a subject, a report, a log line, stderr,
an exception's text, a state row), wherever the text came from (a server quoting what it
was sent, a template printing a value).

A credential is held as a ``Credential`` (the secret, and the login it goes with, if any).
Its forms (``forms``) are the secret as it is; percent-encoded (a URL's ``quote`` and
``quote_plus``) and JSON-escaped; in base64 (standard and URL-safe) at each of the three
places it can start inside a longer base64 text, the characters that depend on it alone
(a server quoting an SMTP ``AUTH PLAIN`` or an HTTP basic ``Authorization`` shows the
password so); and, with its login, the whole HTTP basic and SMTP ``AUTH PLAIN`` texts.
A ``Redactor`` replaces each form with ``MASK``.

``HELD`` is the process's redactor: every credential runner reads is added to it where it is
read (``hold``: the job's provider credentials and mail login when a job is loaded, the
PostgreSQL password when a state is opened), and the command line's output streams and log
lines pass through it (``runner.cli.options``, ``runner.logs``). One process runs one
command, so one list serves it.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, quote_plus

MASK = "[redacted]"
# A credential shorter than this would mask ordinary words; real ones are longer. The
# characters of a base64 form that depend on the secret alone must be as many.
SHORTEST = 4


@dataclass(frozen=True)
class Credential:
    """A secret runner holds, and the login it goes with (SMTP, HTTP basic), if any."""

    secret: str
    login: str | None = None


def forms(credential: Credential) -> set[str]:
    """Every text that gives ``credential``'s secret away, as ``Redactor`` masks them."""
    secret, login = credential.secret, credential.login
    if len(secret) < SHORTEST:
        return set()
    found = {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1],
             json.dumps(secret, ensure_ascii=False)[1:-1]}
    raw = secret.encode()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        alone = encode(raw).decode()  # on its own, to its last character
        found |= {alone, alone.rstrip("=")}
        for offset in range(3):
            found.add(_inner(encode, raw, offset))
    if login:
        for text in (f"{login}:{secret}", f"\0{login}\0{secret}",
                     f"{login}\0{login}\0{secret}"):
            found.add(base64.b64encode(text.encode()).decode())
    return {f for f in found if len(f) >= SHORTEST}


def _inner(encode: object, raw: bytes, offset: int) -> str:
    """The base64 characters of ``raw`` that depend on its bytes alone when it starts
    ``offset`` bytes into a group of three (what a longer text's base64 shows of it)."""
    assert callable(encode)
    text = encode(b"\0" * offset + raw).decode().rstrip("=")
    head = (0, 2, 3)[offset]  # characters that hold bits of the bytes before it
    tail = (len(raw) + offset) % 3  # a last group it fills partly: its last character
    end = len(text) - (1 if tail else 0)  # holds bits of the byte after it
    return text[head:end]


class Redactor:
    """Masks the forms of the credentials it holds; thread-safe."""

    def __init__(self, credentials: Iterable[Credential | str] = ()) -> None:
        self._forms: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()
        self.add(*credentials)

    def add(self, *credentials: Credential | str | None) -> None:
        """Hold more credentials (a plain text is a secret without a login)."""
        new: set[str] = set()
        for c in credentials:
            if c:
                new |= forms(c if isinstance(c, Credential) else Credential(c))
        self._hold(new)

    def joined(self, other: Redactor) -> Redactor:
        """A redactor of these credentials and ``other``'s, as they are now (one pass over
        a text where two would do the same)."""
        both = Redactor()
        both._hold(self._forms | other._forms)
        return both

    def _hold(self, new: set[str]) -> None:
        with self._lock:
            if new - self._forms:
                self._forms |= new
                ordered = sorted(self._forms, key=len, reverse=True)
                self._pattern = re.compile("|".join(map(re.escape, ordered)))

    def clear(self) -> None:
        with self._lock:
            self._forms, self._pattern = set(), None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        pattern = self._pattern
        return text if pattern is None or not text else pattern.sub(MASK, text)


#: The process's redactor (see the module's docstring).
HELD = Redactor()


def hold(*credentials: Credential | str | None) -> None:
    """Add credentials runner has read to the process's redactor."""
    HELD.add(*credentials)


def redact(text: str) -> str:
    """``text`` with every credential the process holds masked."""
    return HELD(text)
