"""From one row to one typed item: Jinja over the row, defaults merged, the kind's model.

For each row, every text of ``items.template`` that holds Jinja (``{{ }}`` or ``{% %}``) is
rendered with ``row`` (the row's values), ``vars``, ``defaults`` and ``job`` (its name and
kind); text without Jinja and non-text values are taken as written. The result is merged
over ``defaults`` (deep merge: a mapping in both is merged key by key, anything else in the
template wins), then checked against the model of the job's kind.

Rules, each there for a payment file:

- Jinja runs in its sandboxed environment: a job file cannot reach Python internals
  (``{{ ''.__class__ }}`` is refused), and ``random``/``lipsum`` are removed, so the same
  row always gives the same item. The external_id's template is held to a grammar that
  reads only the row, ``vars`` and ``job.name`` through filters that give the same text in
  every process (``runner.job.pure``): it is refused with the job otherwise. ``float``
  gives an exact decimal, like the added ``decimal`` filter: amounts never pass through
  binary floats.
- The sandbox has budgets (``runner.job.budget``): an item's templates render within a time
  and a size; a template over its time on one row is refused for the whole job.
- Undefined is strict: a missing column is an error naming the column, never "".
- A value that renders empty (an empty CSV cell, a JSON null) is left out of the item, so
  the default applies, or the field is reported missing if it is required.
- What renders is text for one field: a control character, or more characters than the
  field takes, is a problem of the row (``runner.job.text``).
- ``defaults`` are rendered once, with ``vars`` and ``job`` only.

A template that is only text and row columns (``{{ row.net_pay }}``, ``{{ row.first_name }}
{{ row.last_name }}``), the most common kind, is filled without Jinja when the row's columns
are text: the same text, counted against the same output budget; anything else (a missing
column, a value that is not text, a budget passed) goes through Jinja, which renders it or
says why not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, nodes
from jinja2.exceptions import SecurityError, UndefinedError

from runner.job.budget import BudgetedSandbox
from runner.job.document import Location
from runner.job.fields import exact_decimal
from runner.job.limits import TEMPLATE_VALUE_MAX
from runner.job.model import Job
from runner.job.pure import impure
from runner.job.rows import RowValues
from runner.job.text import ascii_only, limit_of, text_problem

#: A problem found while rendering: where (inside the item, or inside the job file) and what.
Problem = tuple[Location, str]

# A job file's external_ids go into URL paths (ext-{external_id}) and get suffixes (-r2).
EXTERNAL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
EXTERNAL_ID_MAX = 100


class _Vars(dict[str, Any]):
    """The job's ``vars``, typed apart so that a missing one is named as such."""

    __slots__ = ()


class _Missing(StrictUndefined):
    """StrictUndefined that names what is missing in the job's terms: a column, a var."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        if self._undefined_hint is None and isinstance(self._undefined_obj, RowValues):
            return f"column {self._undefined_name!r} is missing from this row"
        if self._undefined_hint is None and isinstance(self._undefined_obj, _Vars):
            return f"vars has no {self._undefined_name!r}"
        return str(super()._undefined_message)


def _finalize(value: Any) -> Any:
    return "" if value is None else value


def sandbox() -> BudgetedSandbox:
    """The only Jinja environment job files are rendered in."""
    env = BudgetedSandbox(undefined=_Missing, finalize=_finalize, autoescape=False)
    env.globals.pop("lipsum", None)
    env.filters.pop("random", None)
    env.filters["decimal"] = exact_decimal
    env.filters["float"] = exact_decimal
    return env


@dataclass(frozen=True)
class _Column:
    """``{{ row.name }}`` in a template that is only text and columns."""

    name: str


#: A template that is only text and row columns, in order: filled without Jinja.
Plain = tuple[str | _Column, ...]


@dataclass(frozen=True)
class _Leaf:
    template: Template
    location: Location  # inside the item
    limit: int  # the most characters its field takes
    plain: Plain | None = None
    ascii: bool = False  # an identifier's field (ASCII only)


class ItemTemplate:
    """A job's ``items`` compiled once, then rendered for each row.

    Building it checks every template's syntax, and reports templates that reach for
    underscore names (which the sandbox would refuse on every row) once, up front.
    """

    def __init__(self, job: Job) -> None:
        self.job = job
        self.env = sandbox()
        self.problems: list[Problem] = []  # located in the job file
        self.columns: list[tuple[str, Location]] = []  # row columns named, and where
        self._plain: dict[str, Plain | None] = {}  # source -> its plain form, if it has one
        self._sets = False  # a template set a name: the later ones may see it as ``row``
        self._blank = self.env.from_string("")
        context = {"vars": _Vars(job.vars), "job": {"name": job.name, "kind": job.kind}}
        self.env.start()
        self.defaults: dict[str, Any] = self._render_defaults(job.defaults, ("defaults",),
                                                              context)
        self._globals = {**context, "defaults": self.defaults}
        # Templates are compiled in the order they render: one that comes after a template
        # setting a name is left to Jinja (the name may be ``row``).
        self.external_id = self._compile(job.items.external_id, ("items", "external_id"))
        if self.external_id is not None:  # the same text in every process, or refused
            problem = impure(self.env.parse(job.items.external_id))
            if problem is not None:
                self.problems.append((("items", "external_id"), problem))
        self.external_id_plain = None if self._sets else \
            self._plain.get(job.items.external_id)
        self.tree = self._compile_tree(job.items.template, ("items", "template"))

    # ---------------------------------------------------------------- compiling
    def _compile(self, source: str, location: Location) -> Template | None:
        try:
            parsed = self.env.parse(source)
            template = self.env.from_string(source)
        except TemplateSyntaxError as exc:
            self.problems.append((location, f"template syntax error: {exc.message}"))
            return None
        if any(True for _ in parsed.find_all((nodes.Extends, nodes.Block, nodes.Include,
                                               nodes.Import, nodes.FromImport))):
            # Job templates are single expressions over one row: nothing to extend or include.
            self.problems.append((location, "extends, block, include and import are not "
                                  "available in job templates"))
            return None
        if any(True for _ in parsed.find_all((nodes.Assign, nodes.AssignBlock, nodes.Macro))):
            self._sets = True
        self._plain[source] = _plain(parsed)
        called = {id(call.node) for call in parsed.find_all(nodes.Call)}
        refused: set[str] = set()
        for node in parsed.find_all((nodes.Getattr, nodes.Getitem)):
            assert isinstance(node, nodes.Getattr | nodes.Getitem)
            name = _static_name(node)
            if name is None:
                continue
            if name.startswith("_"):
                refused.add(name)
            elif (isinstance(node.node, nodes.Name) and node.node.name == "row"
                  and id(node) not in called):
                self.columns.append((name, location))
        if refused:
            names = ", ".join(repr(name) for name in sorted(refused))
            self.problems.append((location, f"refused by the template sandbox: {names} "
                                  "cannot be reached from a job file"))
        return template

    def _compile_tree(self, value: Any, location: Location) -> Any:
        if isinstance(value, dict):
            return {k: self._compile_tree(v, (*location, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self._compile_tree(v, (*location, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and _is_template(value):
            template = self._compile(value, location)
            return None if template is None else _Leaf(
                template, location[2:], limit_of(location),
                None if self._sets else self._plain.get(value), ascii_only(location))
        return value

    def _render_defaults(self, value: Any, location: Location, context: dict[str, Any]) -> Any:
        if isinstance(value, dict):
            return {k: self._render_defaults(v, (*location, k), context)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self._render_defaults(v, (*location, i), context)
                    for i, v in enumerate(value)]
        if isinstance(value, str) and _is_template(value):
            template = self._compile(value, location)
            if template is None:
                return value
            try:
                return template.render(context)
            except Exception as exc:  # noqa: BLE001 - any failure is the job file's problem
                self.problems.append((location, _render_failure(exc)))
        return value

    # ---------------------------------------------------------------- rendering
    @property
    def over_time(self) -> bool:
        """The last item took longer than its budget: the templates, not the row, are at
        fault."""
        return self.env.over_time

    def render(self, row: RowValues) -> tuple[str | None, dict[str, Any], list[Problem]]:
        """The row's external_id and merged item (unchecked), and the problems rendering it.

        Locations of the problems are inside the item (``external_id`` for the id).
        """
        # One context per row, shared by all of the row's templates: building a context is
        # most of the cost of Template.render, and these templates define no blocks. (A
        # top-level {% set %} is thus seen by the row's later fields; it never leaks to the
        # next row.)
        env = self.env
        env.begin()
        problems: list[Problem] = []
        concat: Callable[[Any], str] = env.concat
        jinja: list[Any] = []  # the row's context, made when Jinja is first needed

        def run(template: Template, location: Location, plain: Plain | None = None
                ) -> str | None:
            if plain is not None:
                text = _fill(plain, row, env)
                if text is not None:
                    return text
            if not jinja:
                jinja.append(self._blank.new_context({**self._globals, "row": row}))
                env.arm()
            try:
                return concat(template.root_render_func(jinja[0]))
            except Exception as exc:  # noqa: BLE001 - any failure is the row's problem
                problems.append((location, _render_failure(exc)))
                return None

        external_id = None
        if self.external_id is not None:
            external_id = run(self.external_id, ("external_id",), self.external_id_plain)
            if external_id is not None:
                external_id = external_id.strip()
                message = external_id_problem(external_id)
                if message is not None:
                    problems.append((("external_id",), message))
                    external_id = None

        def fill(value: Any) -> Any:
            if isinstance(value, _Leaf):
                text = run(value.template, value.location, value.plain)
                if not text:
                    return _ABSENT
                problem = text_problem(text, value.limit, value.ascii)
                if problem is not None:
                    problems.append((value.location, problem))
                return text
            if isinstance(value, dict):
                filled = {k: fill(v) for k, v in value.items()}
                return {k: v for k, v in filled.items() if v is not _ABSENT}
            if isinstance(value, list):
                return [v for v in map(fill, value) if v is not _ABSENT]
            return value

        item = merge(self.defaults, fill(self.tree))
        return external_id, item, problems


_ABSENT = object()


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` deep-merged onto ``base``: mappings key by key, anything else replaced."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            merged[key] = merge(below, value)
        else:
            merged[key] = value
    return merged


def external_id_problem(external_id: str) -> str | None:
    """Why ``external_id`` cannot be sent, or None when it can."""
    if not external_id:
        return "renders empty; each item needs its own external_id"
    if len(external_id) > EXTERNAL_ID_MAX:
        return f"{external_id!r} is longer than {EXTERNAL_ID_MAX} characters"
    if EXTERNAL_ID.fullmatch(external_id) is None:
        return (f"{external_id!r} may hold only letters, digits and . _ : - "
                "(and start with a letter or digit)")
    return None


def _plain(parsed: nodes.Template) -> Plain | None:
    """The template as text and row columns, when it is only that; else None. A name that
    is also an attribute of the row's mapping (``row.items``) is left to Jinja."""
    if len(parsed.body) != 1 or not isinstance(parsed.body[0], nodes.Output):
        return None
    parts: list[str | _Column] = []
    for node in parsed.body[0].nodes:
        if isinstance(node, nodes.TemplateData):
            parts.append(node.data)
        elif isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name) and \
                node.node.name == "row" and not hasattr(RowValues, node.attr):
            parts.append(_Column(node.attr))
        else:
            return None
    return tuple(parts)


def _fill(plain: Plain, row: RowValues, env: BudgetedSandbox) -> str | None:
    """A plain template filled from the row's text columns, counted against the item's
    output budget; None when a column is missing or not text, or a budget would be
    passed (Jinja then renders it, or says why it cannot)."""
    pieces: list[str] = []
    values: list[str] = []
    for part in plain:
        if isinstance(part, str):
            pieces.append(part)
            continue
        value = row.get(part.name)
        if type(value) is not str:
            return None
        pieces.append(value)
        values.append(value)
    text = "".join(pieces)
    if len(text) > TEMPLATE_VALUE_MAX or not env.output(values):
        return None
    return text


def _is_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def _static_name(node: nodes.Getattr | nodes.Getitem) -> str | None:
    if isinstance(node, nodes.Getattr):
        return str(node.attr)
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        if isinstance(node.arg.value, str):
            return node.arg.value
    return None


def _render_failure(exc: Exception) -> str:
    if isinstance(exc, SecurityError):
        return f"refused by the template sandbox: {exc}"
    if isinstance(exc, UndefinedError):
        return str(exc)
    return f"cannot render: {exc}" if str(exc) else f"cannot render: {type(exc).__name__}"

