"""JSON read as strictly as the job file's YAML is: a JSON Lines row and a plan file.

The standard library's reader keeps the last of two values given under one key (so a row
``{"net_pay": 10, "net_pay": 99}`` would pay 99 where a person reading it sees 10), takes a
``\\ud800`` escape that is half of a UTF-16 pair for text (which no file, database or
message can then hold), and ends a 100,000-deep nesting with RecursionError.
``strict_loads`` refuses the first two with ``JsonRefused`` and turns the third into it
(``JsonTooDeep``); what it returns is what a person reading the text sees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from runner.errors import JsonRefused, JsonTooDeep
from runner.job.text import LONE_SURROGATE

# A \u escape of a surrogate: only then can a parsed text hold a lone one (raw surrogates
# are not UTF-8, and a pair of escapes becomes one character).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def strict_loads(text: str | bytes, parse_float: Callable[[str], Any] | None = None,
          parse_int: Callable[[str], Any] | None = None) -> Any:
    """``text`` parsed, or JsonRefused: a key given twice in one object, a lone surrogate,
    nesting too deep for the reader; json.JSONDecodeError when it is not JSON."""
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_float=parse_float,
                           parse_int=parse_int)
    except RecursionError:
        raise JsonTooDeep("objects and arrays nested too deep to read") from None
    escapes = text if isinstance(text, str) else text.decode("utf-8", "replace")
    if _SURROGATE_ESCAPE.search(escapes):
        _refuse_surrogates(value)
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonRefused(f"the key {key[:60]!r} is given twice in one object")
            seen.add(key)
    return result


def _refuse_surrogates(value: Any) -> None:
    waiting = [value]
    while waiting:
        item = waiting.pop()
        if isinstance(item, dict):
            waiting.extend(item.keys())
            waiting.extend(item.values())
        elif isinstance(item, list):
            waiting.extend(item)
        elif isinstance(item, str) and (lone := LONE_SURROGATE.search(item)) is not None:
            raise JsonRefused(f"a text holds a lone surrogate (U+{ord(lone[0]):04X}): a \\u "
                              "escape of half a UTF-16 pair, not a character")
