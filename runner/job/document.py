"""Reading the job file's YAML into plain data, with the line of every key and value.

The first step of loading (see ``runner.job.loading``). Three things differ from
``yaml.safe_load``, all so that what the person wrote is what runner pays:

- numbers keep their text: ``12.50`` is ``Decimal("12.50")``, never a binary float; an
  integer written with a leading zero (``007``, a postal code) or in another base stays text,
  and so do dates (``2026-11-01``): the APIs take them as text;
- a key given twice in one mapping is an error (YAML would silently keep the last);
- every key and item is remembered with its line, so later errors can point at it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from runner.errors import JobError, JobErrors

#: A place in the document: the keys and list indexes leading to it.
Location = tuple[str | int, ...]
Lines = dict[Location, int]

_DECIMAL_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*)")
_SPECIAL_FLOATS = {".inf": "Infinity", "+.inf": "Infinity", "-.inf": "-Infinity", ".nan": "NaN"}


class _ExactLoader(yaml.SafeLoader):
    """SafeLoader whose numbers are exact and whose odd scalars stay text."""


def _construct_int(loader: yaml.SafeLoader, node: ScalarNode) -> int | str:
    text = loader.construct_scalar(node)
    if _DECIMAL_INT.fullmatch(text):
        return int(text.replace("_", ""))
    return text  # octal, hex, sexagesimal, leading zeros: keep what was written


def _construct_float(loader: yaml.SafeLoader, node: ScalarNode) -> Decimal | str:
    text = loader.construct_scalar(node)
    special = _SPECIAL_FLOATS.get(text.lower())
    if special is not None:
        return Decimal(special)  # refused later where an amount is expected
    try:
        return Decimal(text.replace("_", ""))
    except ArithmeticError:
        return text  # sexagesimal (1:30.5)


def _construct_text(loader: yaml.SafeLoader, node: ScalarNode) -> str:
    return loader.construct_scalar(node)


_ExactLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_ExactLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_ExactLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_text)


def read_document(text: str, file: str) -> tuple[dict[str, Any], Lines, list[JobError]]:
    """Parse a job file's text into data, the lines of its keys, and problems (a key given
    twice) that do not stop reading; raise ``JobErrors`` when it is no mapping at all."""
    try:
        loader = _ExactLoader(text)
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise JobErrors([JobError(file, line, None, f"invalid YAML: character "
                                  f"#x{exc.character:04X} is not allowed")]) from None
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "not valid YAML"
        if mark is None:
            raise JobErrors([JobError(file, None, None, f"invalid YAML: {problem}")]) from None
        if exc.context and exc.context_mark and exc.context_mark is not mark:
            start = exc.context_mark
            problem += f" ({exc.context} on line {start.line + 1}, column {start.column + 1})"
        raise JobErrors([JobError(
            file, mark.line + 1, None, f"invalid YAML at column {mark.column + 1}: {problem}"
        )]) from None
    except yaml.YAMLError as exc:
        raise JobErrors([JobError(file, None, None, f"invalid YAML: {exc}")]) from None
    finally:
        loader.dispose()
    if node is None or (isinstance(node, ScalarNode) and node.value == ""):
        raise JobErrors([JobError(file, None, None, "the file is empty; a job file starts "
                                  "with `version: 1`")])
    if not isinstance(node, MappingNode):
        raise JobErrors([JobError(file, node.start_mark.line + 1, None,
                                  "a job file is a mapping of keys (version, name, kind, ...)")])
    builder = _Builder(loader, file)
    data = builder.build(node, ())
    return data, builder.lines, builder.errors


class _Builder:
    """Walks the composed node tree, so that each value keeps the line it was written on."""

    def __init__(self, loader: yaml.SafeLoader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.lines: Lines = {}
        self.errors: list[JobError] = []
        self._open: set[int] = set()

    def build(self, node: Node, location: Location) -> Any:
        self.lines.setdefault(location, node.start_mark.line + 1)
        if id(node) in self._open:
            self._error(node, location, "an alias refers to itself")
            return None
        if isinstance(node, MappingNode):
            self._open.add(id(node))
            try:
                return self._mapping(node, location)
            finally:
                self._open.discard(id(node))
        if isinstance(node, SequenceNode):
            self._open.add(id(node))
            try:
                return [self.build(child, (*location, i)) for i, child in enumerate(node.value)]
            finally:
                self._open.discard(id(node))
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            self._error(node, location, f"invalid YAML value: {exc}")
            return None

    def _mapping(self, node: MappingNode, location: Location) -> dict[str, Any]:
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self._key(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                self._error(key_node, (*location, key),
                            f"key given twice (first on line {seen[key]})")
            seen.setdefault(key, line)
        try:
            self.loader.flatten_mapping(node)  # resolves `<<: *anchor` merges
        except yaml.YAMLError as exc:
            self._error(node, location, f"invalid merge: {exc}")
            return {}
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node)
            self.lines[(*location, key)] = key_node.start_mark.line + 1
            result[key] = self.build(value_node, (*location, key))
        return result

    def _key(self, node: Node) -> str:
        # Keys are names (of fields, columns, variables); `yes:` or `1:` mean the text.
        if isinstance(node, ScalarNode):
            return str(node.value)
        self._error(node, (), "a key must be plain text")
        return f"<key on line {node.start_mark.line + 1}>"

    def _error(self, node: Node, location: Location, message: str) -> None:
        field = dotted(location) or None
        self.errors.append(JobError(self.file, node.start_mark.line + 1, field, message))


def dotted(location: Location) -> str:
    """``("run", "retry", "attempts")`` -> ``"run.retry.attempts"``; list indexes as numbers."""
    return ".".join(str(part) for part in location)


def line_at(lines: Lines, location: Location) -> int | None:
    """The line of ``location``, or of its nearest parent that has one."""
    while location:
        if location in lines:
            return lines[location]
        location = location[:-1]
    return None
