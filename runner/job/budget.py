"""The budgets of the template sandbox: templates a job brings end in bounded time and memory.

Jinja's sandbox keeps a job file's templates away from Python's internals; it does not keep
them from looping for ever or building a gigabyte of text (``{% for %}`` in ``{% for %}``
over large ranges, ``'x' * 10**9``). ``BudgetedSandbox`` adds, per rendering (one row's item
templates together, or one summary, between two ``start()``), a ``Budget``:

- time: ``seconds`` of the rendering thread's CPU, checked at every loop step, call, filter,
  operator and output (``over_time`` tells the caller: a template that slow on one row is
  slow on all, and a summary that slow is refused whatever it would have said);
- size: nothing a template computes weighs more than ``value_max`` (the characters of a
  text, the items of a list, and what they hold, counted again wherever they repeat),
  checked before the operations that could make it heavier in one step (``*``, ``**``,
  ``+``, ``%``, ``~``, ``str.format``, padding, ``replace``) and on every result; integers
  stay under ``limits.TEMPLATE_INTEGER_BITS_MAX`` bits; loops, ``range`` and the generators
  filters return stop at ``value_max`` items; what is output, in all, stays under
  ``output_max``, and no text is joined past ``text_max``.

``ITEM`` is the budget of a row's item templates (``runner.job.templating``), ``SUMMARY`` that
of a summary and its subject (``runner.summary.render``): a summary holds many items' lines.
A template over budget fails like any refused template: ``SecurityError``.
"""

from __future__ import annotations

import functools
import math
import re
import string
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from runner.job.limits import (
    SUMMARY_OUTPUT_MAX,
    SUMMARY_SECONDS,
    SUMMARY_VALUE_MAX,
    TEMPLATE_INTEGER_BITS_MAX,
    TEMPLATE_SECONDS,
    TEMPLATE_VALUE_MAX,
)


@dataclass(frozen=True)
class Budget:
    """What one rendering may use: CPU ``seconds``, the weight of any value
    (``value_max``), the characters output in all (``output_max``) and of any text joined
    (``text_max``)."""

    seconds: float
    value_max: int
    output_max: int
    text_max: int
    what: str  # how a message names what is rendered


ITEM = Budget(TEMPLATE_SECONDS, TEMPLATE_VALUE_MAX, 10 * TEMPLATE_VALUE_MAX,
              TEMPLATE_VALUE_MAX, "an item's templates")
SUMMARY = Budget(SUMMARY_SECONDS, SUMMARY_VALUE_MAX, SUMMARY_OUTPUT_MAX, SUMMARY_OUTPUT_MAX,
                 "the summary")
# The filters the transformed templates call: every loop's iterable goes through _EACH, and
# every `~` through _JOIN (the underscore keeps a job file from naming them by accident).
_EACH, _JOIN = "_budget_each", "_budget_join"
# The str (and int) methods whose numeric arguments are a size to allocate.
_SIZED_METHODS = {"ljust", "rjust", "center", "zfill", "expandtabs", "to_bytes"}
# A printf-style conversion: its width and precision.
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?")


class BudgetedSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with the time and size budgets of this module."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, finalize: Callable[[Any], Any] | None = None, budget: Budget = ITEM,
                 **options: Any) -> None:
        super().__init__(**options)
        self.budget = budget
        self.over_time = False
        self._weighed: dict[int, tuple[Any, int]] = {}  # id -> (the value, its weight)
        self._deadline = math.inf
        self._output = 0
        self._ticks = 0
        self._value_finalize = finalize
        self.finalize = self._finalize
        self.concat = self._concat  # type: ignore[method-assign]
        self.globals["range"] = self._range
        self.filters = {name: self._bounded_filter(name, f) for name, f in self.filters.items()}
        self.filters[_EACH] = self._each
        self.filters[_JOIN] = self._join

    def add_filters(self, **filters: Callable[..., Any]) -> None:
        """More filters, bounded as Jinja's own are."""
        self.filters.update({name: self._bounded_filter(name, f)
                             for name, f in filters.items()})

    # ---------------------------------------------------------------- the budget
    def start(self) -> None:
        """A new rendering: its own time and output budgets."""
        self.begin()
        self.arm()

    def begin(self) -> None:
        """A new rendering: its own output budget; its time budget starts with ``arm``, when
        a template of it is first rendered by Jinja (``output`` takes no time to speak of)."""
        self._deadline = math.inf
        self._output = 0
        self._ticks = 0
        self._weighed = {}
        self.over_time = False

    def arm(self) -> None:
        """The rendering's time budget starts now."""
        self._deadline = time.thread_time() + self.budget.seconds

    def output(self, values: Iterable[str]) -> bool:
        """Count texts a template outputs as they are (what ``_finalize`` counts of them):
        True when they fit in the budgets, False (nothing counted) when they would not, for
        the caller to render them through Jinja, which says why."""
        total = sum(len(v) for v in values)
        limits = self.budget
        if total > limits.value_max or self._output + total > limits.output_max:
            return False
        self._output += total
        return True

    def tick(self) -> None:
        # The clock is read every 16th step: each step between is bounded work, and reading
        # the thread's CPU time costs as much as a step.
        self._ticks += 1
        if self._ticks % 16 == 0 and time.thread_time() > self._deadline:
            self.over_time = True
            raise SecurityError(f"rendering took more than {self.budget.seconds:g} s of CPU "
                                "(a loop too long?)")

    def _refuse_heavy(self, *values: Any) -> None:
        """``_refuse_heavy`` with what this rendering weighed already: a template cannot
        change a list or a mapping (the sandbox is immutable), so one handed to filter
        after filter (a summary's ``summary.failed``) is weighed once. Each is kept until
        the rendering ends, so that its id names it alone."""
        limit = self.budget.value_max
        for value in values:
            if not isinstance(value, list | dict | tuple):
                _refuse_heavy(limit, value)
                continue
            known = self._weighed.get(id(value))
            weight = known[1] if known is not None else _weight(value, limit)
            if known is None:
                self._weighed[id(value)] = (value, weight)
            if weight > limit:
                raise SecurityError(f"a value of more than {limit:,} characters or items")

    def bounded(self, value: Any) -> Any:
        """``value`` when within the size budget (a generator: one that stops at it)."""
        if isinstance(value, Iterator):
            return self._each(value)
        self._refuse_heavy(value)
        return value

    # ---------------------------------------------------------------- Jinja's hooks
    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        # Every compilation parses through here (Environment.parse and compile both do).
        template = super()._parse(source, name, filename)
        result = _Budgeted().visit(template)
        assert isinstance(result, nodes.Template)
        return result

    def call(__self, __context: Context, __obj: Any, *args: Any,  # noqa: N805
             **kwargs: Any) -> Any:
        __self.tick()
        limit = __self.budget.value_max
        __self._refuse_heavy(*args, *kwargs.values())
        wrapped = getattr(__obj, "__wrapped__", __obj)
        owner = getattr(wrapped, "__self__", None)
        method = getattr(wrapped, "__name__", "")
        if isinstance(owner, str | bytes | int) and not isinstance(owner, bool):
            if method == "join" and args:
                args = (list(__self._each(args[0])), *args[1:])
                _refuse_joined(limit, owner, args[0])
            elif method in _SIZED_METHODS:
                _refuse_sizes(limit, *args, *kwargs.values())
            elif method in ("format", "format_map") and isinstance(owner, str):
                _refuse_format_widths(limit, owner)
            elif method == "replace" and isinstance(owner, str | bytes):
                _refuse_replacement(limit, owner, *args)
        return __self.bounded(super().call(__context, __obj, *args, **kwargs))

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        self.tick()
        limit = self.budget.value_max
        self._refuse_heavy(left, right)
        if operator == "*":
            _refuse_repeat(limit, left, right)
            _refuse_repeat(limit, right, left)
        elif operator == "**" and _integer(left) and _integer(right) and right > 0:
            if abs(left) > 1 and math.log2(abs(left)) * right > TEMPLATE_INTEGER_BITS_MAX:
                raise SecurityError(f"a power over {TEMPLATE_INTEGER_BITS_MAX} bits")
        elif operator == "+" and _sized(left) and _sized(right):
            if _weight(left, limit) + _weight(right, limit) > limit:
                raise SecurityError(f"adds up past {limit:,} characters or items")
        elif operator == "%" and isinstance(left, str):
            _refuse_printf_widths(limit, left)
        return self.bounded(super().call_binop(context, operator, left, right))

    def _finalize(self, value: Any) -> Any:
        # No tick: an output in a loop is a loop step, which ticks.
        limits = self.budget
        weight = len(value) if type(value) is str else _weight(value, limits.value_max)
        if weight > limits.value_max:
            raise SecurityError(f"a value of more than {limits.value_max:,} characters or "
                                "items")
        if self._value_finalize is not None:
            value = self._value_finalize(value)
        self._output += weight
        if self._output > limits.output_max:
            raise SecurityError(f"{limits.what} output more than {limits.output_max:,} "
                                "characters")
        return value

    def _concat(self, pieces: Iterable[str]) -> str:
        """``"".join`` that counts before it joins (a loop may repeat the same text)."""
        kept, total, limit = [], 0, self.budget.text_max
        for piece in pieces:
            total += len(piece)
            if total > limit:
                raise SecurityError(f"makes a text of more than {limit:,} characters")
            kept.append(piece)
        return "".join(kept)

    def _range(self, *args: int) -> range:
        self.tick()
        numbers, limit = range(*args), self.budget.value_max
        if len(numbers) > limit:
            raise SecurityError(f"a range of more than {limit:,} numbers")
        return numbers

    def _each(self, items: Any) -> Iterator[Any]:
        """What a loop steps through, one tick a step, at most ``value_max`` steps."""
        limit = self.budget.value_max
        for count, item in enumerate(items, start=1):
            self.tick()
            if count > limit:
                raise SecurityError(f"more than {limit:,} steps in one loop")
            yield item

    def _join(self, operands: list[Any]) -> str:
        """The ``~`` operator: its operands as text, weighed before they are joined."""
        self._refuse_heavy(*operands)
        return self._concat(str(operand) for operand in operands)

    def _bounded_filter(self, name: str, f: Callable[..., Any]) -> Callable[..., Any]:
        passed = 0 if getattr(f, "jinja_pass_arg", None) is None else 1  # context first

        @functools.wraps(f)
        def bounded(*args: Any, **kwargs: Any) -> Any:
            self.tick()
            limit = self.budget.value_max
            if name == "join" and len(args) > passed:  # its input may be a generator
                args = (*args[:passed], list(self._each(args[passed])), *args[passed + 1:])
            self._refuse_heavy(*args, *kwargs.values())
            if len(args) > passed:
                _refuse_filter_growth(limit, name, args[passed], args[passed + 1:], kwargs)
            return self.bounded(f(*args, **kwargs))

        return bounded


class _Budgeted(NodeTransformer):
    """Every loop steps through ``_EACH``, and every ``~`` joins through ``_JOIN``."""

    def visit_For(self, node: nodes.For) -> nodes.Node:  # noqa: N802 - Jinja's visitor names
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, _EACH, [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:  # noqa: N802
        self.generic_visit(node)
        operands = nodes.List(node.nodes, lineno=node.lineno)
        return nodes.Filter(operands, _JOIN, [], [], None, None, lineno=node.lineno)


# ---------------------------------------------------------------- the checks
def _weight(value: Any, limit: int) -> int:
    """Characters of text, items of lists and mappings, and what they hold, each time it
    appears; counting stops past ``limit``. A list counts the items it holds (a summary's
    lists hold their first items and say, as their length, how many there are)."""
    total, pending = 0, [value]
    while pending and total <= limit:
        item = pending.pop()
        if isinstance(item, str | bytes):
            total += len(item)
        elif isinstance(item, list):
            total += list.__len__(item)
            if total <= limit:
                pending.extend(item)
        elif isinstance(item, dict | tuple | set | frozenset):
            total += len(item)
            if total <= limit:
                pending.extend(item.items() if isinstance(item, dict) else item)
        else:
            total += 1
            if _integer(item) and item.bit_length() > TEMPLATE_INTEGER_BITS_MAX:
                raise SecurityError(f"an integer over {TEMPLATE_INTEGER_BITS_MAX} bits")
    return total


def _refuse_heavy(limit: int, *values: Any) -> None:
    for value in values:
        if _weight(value, limit) > limit:
            raise SecurityError(f"a value of more than {limit:,} characters or items")


def _refuse_sizes(limit: int, *values: Any) -> None:
    if any(_integer(v) and abs(v) > limit for v in values):
        raise SecurityError(f"a width, length or size over {limit:,}")


def _refuse_repeat(limit: int, sequence: Any, times: Any) -> None:
    if _sized(sequence) and _integer(times) and times > 0:
        if _weight(sequence, limit) * times > limit:
            raise SecurityError(f"repeats past {limit:,} characters or items")
    elif _integer(sequence) and _integer(times):
        if abs(sequence).bit_length() + abs(times).bit_length() > TEMPLATE_INTEGER_BITS_MAX:
            raise SecurityError(f"a product over {TEMPLATE_INTEGER_BITS_MAX} bits")


def _refuse_replacement(limit: int, text: str | bytes, old: Any = "", new: Any = "",
                        *rest: Any) -> None:
    if not (_sized(old) and _sized(new)):
        return
    count = len(text) + 1 if not old else text.count(old)  # type: ignore[arg-type]
    if rest and _integer(rest[0]) and rest[0] >= 0:
        count = min(count, rest[0])
    if len(text) + count * (len(new) - len(old)) > limit:
        raise SecurityError(f"a replacement past {limit:,} characters")


def _refuse_format_widths(limit: int, text: str) -> None:
    for _, _, spec, _ in string.Formatter().parse(text):
        if spec and "{" in spec:
            raise SecurityError("a format field whose width is another field")
        if spec and any(int(n) > limit for n in re.findall(r"\d+", spec)):
            raise SecurityError(f"a format width or precision over {limit:,}")


def _refuse_filter_growth(limit: int, name: str, value: Any, given: tuple[Any, ...],
                          options: dict[str, Any]) -> None:
    """What a filter would make of ``value`` stays within the budget: those whose output
    can outgrow their input by a multiple are checked by what they were given."""

    def option(index: int, key: str, default: Any = None) -> Any:
        return options.get(key, given[index] if len(given) > index else default)

    if name == "center":
        _refuse_sizes(limit, option(0, "width"))
    elif name == "indent":
        width = option(0, "width", 4)
        lines = str(value).count("\n") + 1
        _refuse_sizes(limit, width * lines if _integer(width) else len(str(width)) * lines)
    elif name == "wordwrap":
        wrap = option(2, "wrapstring")
        if wrap is not None:
            _refuse_sizes(limit, len(str(wrap)) * (len(str(value)) + 1))
    elif name == "tojson" and option(0, "indent") is not None:
        raise SecurityError("tojson's indent is not available in job templates")
    elif name == "join":
        _refuse_joined(limit, option(0, "d", ""), value)
    elif name == "format" and isinstance(value, str):
        _refuse_printf_widths(limit, value)
    elif name == "replace" and isinstance(value, str):
        _refuse_replacement(limit, value, *given)


def _refuse_joined(limit: int, separator: Any, items: list[Any]) -> None:
    if _weight(items, limit) + len(str(separator)) * len(items) > limit:
        raise SecurityError(f"joins past {limit:,} characters")


def _refuse_printf_widths(limit: int, text: str) -> None:
    for width, precision in _PRINTF.findall(text):
        for number in (width, precision):
            if number == "*":
                raise SecurityError("a % width or precision given as *")
            if number and int(number) > limit:
                raise SecurityError(f"a % width or precision over {limit:,}")


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _sized(value: Any) -> bool:
    return isinstance(value, str | bytes | list | tuple)
