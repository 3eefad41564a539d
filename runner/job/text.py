"""The check every text of an item passes, whatever its kind, before the kind's model sees it.

An item's texts come from rows and templates, and go to the provider as they are: a NUL or a
line break in a name, or a 5,000-character label, is refused here, naming the field, rather
than sent. Two rules:

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


def text_problems(value: Any, location: Location = (), skip: str | None = None
                  ) -> list[tuple[Location, str]]:
    """(location, message) for each text of ``value`` (an item as plain data) that cannot be
    sent; ``skip`` texts (placeholders) are not looked at."""
    problems: list[tuple[Location, str]] = []
    pending: list[tuple[Any, Location]] = [(value, location)]
    while pending:
        node, where = pending.pop()
        if isinstance(node, dict):
            pending.extend((child, (*where, key)) for key, child in node.items())
        elif isinstance(node, list):
            pending.extend((child, (*where, i)) for i, child in enumerate(node))
        elif isinstance(node, str) and node != skip:
            message = _problem(node, where)
            if message is not None:
                problems.append((where, message))
    return sorted(problems, key=lambda problem: [str(part) for part in problem[0]])


def _problem(text: str, location: Location) -> str | None:
    control = _CONTROL.search(text)
    if control is not None:
        character = control[0]
        name = _NAMES.get(character, "a control character")
        return (f"holds {name} (U+{ord(character):04X}) at character {control.start() + 1}; "
                "fields are one line of text")
    field = next((part for part in reversed(location) if isinstance(part, str)), "")
    limit = text_limit(field)
    if len(text) > limit:
        return f"{len(text):,} characters; at most {limit:,} are allowed"
    return None
