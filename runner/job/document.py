"""Reading the job file's YAML into plain data, with the line of every key and value.

The first step of loading (see ``runner.job.loading``). These things differ from
``yaml.safe_load``, all so that what the person wrote is what runner pays:

- numbers keep their text: ``12.50`` is ``Decimal("12.50")``, never a binary float; a
  number written any other way than plain digits with at most one point (``007``, a postal
  code; ``1_000``; ``1.5e3``; another base; ``.inf``) stays text, for the field that takes it
  to judge (an amount refuses it: ``runner.money.parse_amount``), and so do dates
  (``2026-11-01``): the APIs take them as text;
- a key given twice in one mapping is an error (YAML would silently keep the last);
- only plain values: a tag other than YAML's own for text, numbers, true/false, null, lists
  and mappings (``!!binary``, ``!!python/object``, ``!local``) is an error, never data;
- bounded: the aliases (``*name``) and merges (``<<:``) that repeat values, and the nesting,
  are counted as the file is read (``runner.job.limits``), so that a kilobyte that expands to
  gigabytes is refused at once;
- every key and item is remembered with its line, so later errors can point at it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from runner.errors import JobError, JobErrors
from runner.job.limits import NESTING_MAX, YAML_VALUES_MAX

#: A place in the document: the keys and list indexes leading to it.
Location = tuple[str | int, ...]
Lines = dict[Location, int]

# Plain digits (at most 18: beyond, Python's int() refuses long texts), with one point for a
# decimal: anything else (octal, hex, sexagesimal, leading zeros, _, exponents) keeps its text.
_DECIMAL_INT = re.compile(r"[-+]?(0|[1-9][0-9]{0,17})")
_DECIMAL = re.compile(r"[-+]?[0-9]{0,18}\.[0-9]{0,18}")
_YAML = "tag:yaml.org,2002:"
#: The tags YAML's own plain values carry, whether resolved or written (``!!str``).
_PLAIN_TAGS = {f"{_YAML}{name}" for name in
               ("str", "int", "float", "bool", "null", "timestamp", "map", "seq")}


class _ExactLoader(yaml.SafeLoader):
    """SafeLoader whose numbers are exact, whose odd scalars stay text, and which counts the
    values and the nesting it composes (an alias counts once here; ``_Builder`` counts what
    it repeats)."""

    file = ""
    _composed = 0
    _depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._composed += 1
        self._depth += 1
        try:
            if self._composed > YAML_VALUES_MAX:
                self._refuse(f"more than {YAML_VALUES_MAX:,} values; put rows in a CSV or "
                             "JSON Lines file (items.from)")
            if self._depth > NESTING_MAX:
                self._refuse(f"mappings and lists nested more than {NESTING_MAX} deep")
            return super().compose_node(parent, index)  # type: ignore[no-untyped-call,no-any-return]
        finally:
            self._depth -= 1

    def _refuse(self, message: str) -> None:
        mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
        raise JobErrors([JobError(self.file, mark.line + 1, None, message)])


def _construct_int(loader: yaml.SafeLoader, node: ScalarNode) -> int | str:
    text = loader.construct_scalar(node)
    if _DECIMAL_INT.fullmatch(text):
        return int(text)
    return text  # octal, hex, sexagesimal, leading zeros, _: keep what was written


def _construct_float(loader: yaml.SafeLoader, node: ScalarNode) -> Decimal | str:
    text = loader.construct_scalar(node)
    if _DECIMAL.fullmatch(text) and any(c.isdigit() for c in text):
        return Decimal(text)
    return text  # an exponent, _, .inf, .nan, sexagesimal (1:30.5): what was written


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
    loader.file = file
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
        self._built = 0
        self._seen: set[int] = set()  # the mappings and lists built so far
        self._alias: Location | None = None  # where the outermost alias being repeated is

    def build(self, node: Node, location: Location) -> Any:
        self.lines.setdefault(location, node.start_mark.line + 1)
        self._built += 1
        if self._built > YAML_VALUES_MAX:
            # Only aliases get here: the composer counted the values written.
            where = self._alias or location
            raise JobErrors([JobError(self.file, self.lines[where], dotted(where),
                                      f"aliases (*name) repeat values past {YAML_VALUES_MAX:,} "
                                      "in all; write them out, or put rows in a CSV or JSON "
                                      "Lines file")])
        if self._alias is None and id(node) in self._seen:
            self._alias = location
            try:
                return self._build(node, location)
            finally:
                self._alias = None
        return self._build(node, location)

    def _build(self, node: Node, location: Location) -> Any:
        if not isinstance(node, ScalarNode):
            self._seen.add(id(node))
        if id(node) in self._open:
            self._error(node, location, "an alias refers to itself")
            return None
        tag = _tag_problem(node)
        if tag is not None:
            self._error(node, location, tag)
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
            if key_node.tag == _MERGE:
                continue
            key = self._key(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                self._error(key_node, (*location, key),
                            f"key given twice (first on line {seen[key]})")
            seen.setdefault(key, line)
        problem = _merge_problem(node)
        if problem is not None:
            self._error(node, location, problem)
            return {}
        try:
            self.loader.flatten_mapping(node)  # resolves `<<: *anchor` merges
        except RecursionError:
            self._error(node, location, "merges (<<) of merges are chained too deep")
            return {}
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
        if isinstance(node, ScalarNode) and _tag_problem(node) is None:
            return str(node.value)
        self._error(node, (), "a key must be plain text")
        return f"<key on line {node.start_mark.line + 1}>"

    def _error(self, node: Node, location: Location, message: str) -> None:
        field = dotted(location) or None
        self.errors.append(JobError(self.file, node.start_mark.line + 1, field, message))


_MERGE = f"{_YAML}merge"


def _tag_problem(node: Node) -> str | None:
    if node.tag in _PLAIN_TAGS:
        return None
    tag = node.tag.replace(_YAML, "!!", 1) if node.tag.startswith(_YAML) else node.tag
    return (f"the YAML tag {tag[:60]!r} is not allowed: a job file holds plain text, numbers, "
            "true/false, lists and mappings")


def _merge_problem(node: MappingNode) -> str | None:
    """Why the merges (``<<:``) of ``node`` cannot be resolved: one that merges itself, or
    merges that would repeat more values than a job file may hold. (PyYAML flattens them in
    place, copying, before anything could count them.)"""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(mapping: MappingNode) -> int | None:
        if id(mapping) in sizes:
            return sizes[id(mapping)]
        if id(mapping) in open_:
            return None
        open_.add(id(mapping))
        total = 0
        for key, value in mapping.value:
            if key.tag != _MERGE:
                total += 1
                continue
            for merged in value.value if isinstance(value, SequenceNode) else [value]:
                if isinstance(merged, MappingNode):
                    inner = size(merged)
                    if inner is None:
                        return None
                    total += inner
        open_.discard(id(mapping))
        sizes[id(mapping)] = total
        return total

    if not any(key.tag == _MERGE for key, _ in node.value):
        return None
    try:
        total = size(node)
    except RecursionError:
        return "merges (<<) of merges are chained too deep"
    if total is None:
        return "a merge (<<) includes the mapping it is in"
    if total > YAML_VALUES_MAX:
        return f"merges (<<) repeat more than {YAML_VALUES_MAX:,} values"
    return None


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
