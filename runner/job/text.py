"""The check every text of an item passes, whatever its kind, before the kind's model sees it.

An item's texts come from rows and templates, and go to the provider as they are: a NUL or a
line break in a name, or a 5,000-character label, is refused here, naming the field, rather
than sent. What the job file writes as it is (and defaults) is checked once, when the job is
loaded; what a template renders, on each row (``runner.job.templating``). Two rules:

- no character a reader does not see as it is (``UNSEEN``): the C0 and C1 controls and DEL
  (U+0000 to U+001F, U+007F to U+009F, U+0085 among them), the line and paragraph
  separators (U+2028, U+2029): the documents' fields are single lines of text; the
  bidirectional embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069),
  which make a name read otherwise than it is sent (right-to-left names need none: Unicode
  orders their letters itself); and lone surrogates (U+D800 to U+DFFF: half of a UTF-16
  pair, no character at all);
- no longer than the provider's bound for the field (``runner.rules.text_limit``: a list's
  texts are bounded by the list's name, ``fees.0`` by ``fees``);
- in a field that names an account, a card or a phone (``runner.identifiers.ASCII_FIELDS``),
  ASCII only: a fullwidth ``２５４`` looks like the digits and is not them.

The same characters are refused in the job file's own one-line texts (``runner.job.model``)
and in a CSV header's column names (``runner.job.rows``).
"""

from __future__ import annotations

import re
from typing import Any

from runner.identifiers import ASCII_FIELDS, not_ascii
from runner.job.document import Location
from runner.rules import text_limit

UNSEEN = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                    r"\ud800-\udfff]")
#: Half of a UTF-16 pair: no character, and no UTF-8 file, database or message can hold it.
LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_NAMES = {"\t": "a tab", "\n": "a line break", "\r": "a carriage return", "\x00": "a NUL",
          "\u2028": "a line separator", "\u2029": "a paragraph separator"}


def _field(location: Location) -> str:
    return next((part for part in reversed(location) if isinstance(part, str)), "")


def limit_of(location: Location) -> int:
    """The most characters the field at ``location`` takes (a list's texts: the list's)."""
    return text_limit(_field(location))


def ascii_only(location: Location) -> bool:
    """Whether the field at ``location`` names an account, a card or a phone."""
    return _field(location) in ASCII_FIELDS


def first_unseen(text: str) -> str | None:
    """The first character of ``UNSEEN`` in ``text``, described (``a NUL (U+0000) at
    character 4``) and never quoted; None when there is none."""
    found = _unseen(text)
    return None if found is None else found[0]


def _unseen(text: str) -> tuple[str, str] | None:
    """The first ``UNSEEN`` character of ``text`` described, and why it is refused."""
    found = UNSEEN.search(text)
    if found is None:
        return None
    code, where = ord(found[0]), f"(U+{ord(found[0]):04X}) at character {found.start() + 1}"
    if 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
        return (f"a bidirectional control {where}", "it would make the text read otherwise "
                "than it is sent")
    if 0xD800 <= code <= 0xDFFF:
        return f"a lone surrogate {where}", "it is half of a UTF-16 pair, not a character"
    return (f"{_NAMES.get(found[0], 'a control character')} {where}",
            "fields are one line of text")


def text_problem(text: str, limit: int, ascii: bool = False) -> str | None:
    """Why ``text`` cannot be sent in a field of that ``limit`` (``ascii``: an identifier's,
    ``ascii_only``); None when it can. (On every rendered field of every row: the common
    case costs a len and a regex search.)"""
    if len(text) <= limit and UNSEEN.search(text) is None and (not ascii or text.isascii()):
        return None
    unseen = _unseen(text)
    if unseen is not None:
        return f"holds {unseen[0]}; {unseen[1]}"
    if len(text) > limit:
        return f"{len(text):,} characters; at most {limit:,} are allowed"
    return not_ascii(text)


def text_problems(value: Any, location: Location = (), skip: str | None = None
                  ) -> list[tuple[Location, str]]:
    """(location, message) for each text of ``value`` (plain data) that cannot be sent;
    ``skip`` texts (placeholders) are not looked at."""
    if isinstance(value, str):
        problem = None if value == skip else text_problem(value, limit_of(location),
                                                          ascii_only(location))
        return [] if problem is None else [(location, problem)]
    if isinstance(value, dict):
        children: Any = value.items()
    elif isinstance(value, list):
        children = enumerate(value)
    else:
        return []
    return [problem for key, child in children
            for problem in text_problems(child, (*location, key), skip)]
