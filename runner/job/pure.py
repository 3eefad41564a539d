"""What an ``items.external_id`` template may do: be a pure function of the row.

An external_id is what keeps a payment from being made twice (rule 1 of docs/exactly-once.md): the
same row must give the same text in every run, in every process, on every host. So its template is
checked, once, when the job is loaded, against a grammar that can only read data:

- the names ``row`` and ``vars``, and ``job.name``; their values by ``.name`` or ``[key]``
  where the key is written out (a column, a var, a list index, a slice), never one that
  reaches a method of the value (``row.items`` is the dict's method, whose text holds an
  address that changes with every process: write ``row['items']`` for such a column, and
  then it must not be a method's name either, as a missing key falls back to the method);
- literals, the operators (``~ + - * / // % **``, comparisons, ``and or not``, ``x if c
  else y``) and ``{% if %}``;
- the filters of ``FILTERS`` and the tests of ``TESTS``, which give the same text for the
  same data everywhere, without ``attribute=`` (which reads names the grammar cannot see).

Anything else (a call, ``range``, ``lipsum``, ``cycler``, ``namespace``, ``defaults``, a
loop, ``{% set %}``, a filter not listed, an attribute of a literal such as ``''.join``) is
refused with the job: exit 2, naming the file and the field.
"""

from __future__ import annotations

from decimal import Decimal

from jinja2 import nodes

from runner.job.rows import RowValues

FILTERS = frozenset({
    "abs", "capitalize", "center", "count", "d", "decimal", "default", "first", "float",
    "format", "int", "join", "last", "length", "list", "lower", "max", "min", "replace",
    "reverse", "round", "sort", "string", "sum", "title", "trim", "truncate", "unique",
    "upper", "urlencode", "wordcount"})
TESTS = frozenset({
    "defined", "undefined", "none", "number", "string", "integer", "float", "boolean", "true",
    "false", "lower", "upper", "divisibleby", "even", "odd", "eq", "equalto", "==", "ne", "!=",
    "lt", "<", "lessthan", "le", "<=", "gt", ">", "greaterthan", "ge", ">=", "in", "mapping",
    "sequence", "iterable"})
ROOTS = ("row", "vars", "job")
# What a name may not reach on a value: the methods and attributes of the types a row, a var
# or one of their values is (Jinja tries an attribute before a key, and a key before
# falling back to the attribute of that name).
_MAPPING = frozenset(dir(dict)) | frozenset(dir(RowValues))
_VALUE = _MAPPING | frozenset(
    name for kind in (str, list, int, float, Decimal, bool) for name in dir(kind))
# The expressions that only combine what they hold.
_PLAIN = (nodes.Const, nodes.TemplateData, nodes.Concat, nodes.BinExpr, nodes.UnaryExpr,
          nodes.Compare, nodes.Operand, nodes.CondExpr, nodes.Tuple, nodes.List, nodes.Slice,
          nodes.Keyword, nodes.Output, nodes.If, nodes.Template)
SAID = ("an external_id must be the same text in every process: it may read only row, vars "
        "and job.name, through the filters docs/job-files.md lists")


def impure(template: nodes.Template) -> str | None:
    """Why ``template`` (an external_id's, parsed) may not give the same text in every
    process; None when it is a pure function of the row."""
    found = _first(template)
    return None if found is None else f"{found}: not allowed; {SAID}"


def _first(node: nodes.Node) -> str | None:
    """The first construct of ``node`` the grammar refuses, as a person reads it."""
    if isinstance(node, nodes.Name):
        return None if node.name in ("row", "vars") else f"{node.name!r}"
    if isinstance(node, nodes.Getattr | nodes.Getitem):
        return _reach(node)
    if isinstance(node, nodes.Filter):
        if node.name not in FILTERS:
            return f"the filter {node.name!r}"
    elif isinstance(node, nodes.Test):
        if node.name not in TESTS:
            return f"the test {node.name!r}"
    elif not isinstance(node, _PLAIN):
        return _construct(node)
    if isinstance(node, nodes.Filter | nodes.Test):
        if node.dyn_args is not None or node.dyn_kwargs is not None:
            return f"*args or **kwargs given to {node.name!r}"
        if any(k.key == "attribute" for k in node.kwargs):
            return f"attribute= given to {node.name!r}"
    for child in node.iter_child_nodes():
        problem = _first(child)
        if problem is not None:
            return problem
    return None


def _reach(node: nodes.Getattr | nodes.Getitem) -> str | None:
    """A value read by name or key: from ``row`` or ``vars`` down, by keys written out that
    reach no method; or ``job.name``."""
    path: list[nodes.Getattr | nodes.Getitem] = []
    base: nodes.Node = node
    while isinstance(base, nodes.Getattr | nodes.Getitem):
        path.append(base)
        base = base.node
    path.reverse()
    if not isinstance(base, nodes.Name) or base.name not in ROOTS:
        return f"{_shown(node)} (an attribute of something that is not row or vars)" \
            if not isinstance(base, nodes.Name) else f"{_shown(node)}"
    for depth, step in enumerate(path):
        key = _key(step)
        if isinstance(step, nodes.Getitem) and isinstance(step.arg, nodes.Slice):
            problem = _first(step.arg)
            if problem is not None:
                return problem
            continue
        if key is None:
            return f"{_shown(step)} (a key that is not written out)"
        if base.name == "job":
            if depth > 0 or key != "name":
                return f"{_shown(step)} (of job, only job.name)"
            continue
        if isinstance(key, str) and key in (_MAPPING if depth == 0 else _VALUE):
            return f"{_shown(step)} ({key!r} is a method or attribute of the value, not a " \
                   f"column or a var)"
    if base.name == "job" and not path:
        return "'job' (only job.name)"
    return None


def _key(step: nodes.Getattr | nodes.Getitem) -> str | int | None:
    if isinstance(step, nodes.Getattr):
        return str(step.attr)
    if isinstance(step.arg, nodes.Const) and isinstance(step.arg.value, str | int) and \
            not isinstance(step.arg.value, bool):
        return step.arg.value
    return None


def _shown(node: nodes.Node) -> str:
    """A value read, as the template writes it (``row.items``, ``vars['x']``)."""
    if isinstance(node, nodes.Name):
        return str(node.name)
    if isinstance(node, nodes.Getattr):
        return f"{_shown(node.node)}.{node.attr}"
    if isinstance(node, nodes.Getitem):
        arg = node.arg
        inside = repr(arg.value) if isinstance(arg, nodes.Const) else "..."
        return f"{_shown(node.node)}[{inside}]"
    if isinstance(node, nodes.Const):
        return repr(node.value)
    if isinstance(node, nodes.Call):
        return f"{_shown(node.node)}(...)"
    return f"({type(node).__name__.lower()})"


def _construct(node: nodes.Node) -> str:
    if isinstance(node, nodes.Call):
        return f"the call {_shown(node)}"
    names = {nodes.For: "{% for %}", nodes.Assign: "{% set %}", nodes.AssignBlock: "{% set %}",
             nodes.Macro: "{% macro %}", nodes.With: "{% with %}",
             nodes.FilterBlock: "{% filter %}", nodes.CallBlock: "{% call %}",
             nodes.Dict: "a {...} literal"}
    for kind, name in names.items():
        if isinstance(node, kind):
            return name
    return f"a {type(node).__name__} expression"
