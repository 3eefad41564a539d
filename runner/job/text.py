"""The check every text of an item passes, whatever its kind, before the kind's model sees it.

An item's texts come from rows and templates, and go to the provider as they are: a NUL or a
line break in a name, or a 5,000-character label, is refused here, naming the field, rather
than sent. What the job file writes as it is (and defaults) is checked once, when the job is
loaded; what a template renders, on each row (``runner.job.templating``). Two rules:

- no control characters (C0, U+0000 to U+001F, and DEL): the documents' fields are single
  lines of text;
- no longer than the provider's bound for the field (``runner.rules.text_limit``: a list's
  texts are bounded by the list's name, ``fees.0`` by ``fees``).
"""

from __future__ import annotations

import re
from typing import Any

from runner.job.document import Location
from runner.rules import text_limit

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NAMES = {"\t": "a tab", "\n": "a line break", "\r": "a carriage return", "\x00": "a NUL"}


def limit_of(location: Location) -> int:
    """The most characters the field at ``location`` takes (a list's texts: the list's)."""
    return text_limit(next((part for part in reversed(location) if isinstance(part, str)), ""))


def text_problem(text: str, limit: int) -> str | None:
    """Why ``text`` cannot be sent in a field of that ``limit``; None when it can. (On every
    rendered field of every row: the common case costs a len and a regex search.)"""
    if len(text) <= limit and _CONTROL.search(text) is None:
        return None
    control = _CONTROL.search(text)
    if control is not None:
        character = control[0]
        name = _NAMES.get(character, "a control character")
        return (f"holds {name} (U+{ord(character):04X}) at character {control.start() + 1}; "
                "fields are one line of text")
    return f"{len(text):,} characters; at most {limit:,} are allowed"


def text_problems(value: Any, location: Location = (), skip: str | None = None
                  ) -> list[tuple[Location, str]]:
    """(location, message) for each text of ``value`` (plain data) that cannot be sent;
    ``skip`` texts (placeholders) are not looked at."""
    if isinstance(value, str):
        problem = None if value == skip else text_problem(value, limit_of(location))
        return [] if problem is None else [(location, problem)]
    if isinstance(value, dict):
        children: Any = value.items()
    elif isinstance(value, list):
        children = enumerate(value)
    else:
        return []
    return [problem for key, child in children
            for problem in text_problems(child, (*location, key), skip)]
