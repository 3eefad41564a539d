"""The budgets of the template sandbox (runner/job/budget.py), one rule at a time: what a job
template may do as before, and what would loop or grow past its bounds is refused with the
rule's words, in milliseconds (the whole CLI path is in tests/test_hostile_jobs.py)."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest
from jinja2.exceptions import SecurityError

from runner.job.limits import TEMPLATE_SECONDS
from runner.job.templating import sandbox

ROW = {"name": "Ada Lovelace", "amount": "12.50", "n": 3, "tags": ["a", "b"]}


def render(source: str, row: dict[str, Any] | None = None) -> str:
    env = sandbox()
    env.start()
    template = env.from_string(source)
    return env.concat(template.root_render_func(template.new_context({"row": row or ROW})))


@pytest.mark.parametrize(("source", "rendered"), [
    ("{{ row.name|upper }}", "ADA LOVELACE"),
    ("{{ row.name.split(' ')|join('-') }}", "Ada-Lovelace"),
    ("{{ row.name|replace(' ', '_') }}", "Ada_Lovelace"),
    ("{{ '%05.2f'|format(3.14159) }} {{ '{:,}'.format(1234567) }}", "03.14 1,234,567"),
    ("{{ row.amount|decimal * 100 }}", "1250.00"),
    ("{{ 'ab' * 3 }} {{ [1, 2] + [3] }} {{ row.n * 1000000 }}", "ababab [1, 2, 3] 3000000"),
    ("{% for t in row.tags %}{{ loop.index }}{{ t }}{% endfor %}", "1a2b"),
    ("{% for i in range(3) %}{{ i }}{% endfor %}{{ range(10000)|length }}", "01210000"),
    ("{{ row|dictsort|length }} {{ row.tags|tojson }}", '4 ["a", "b"]'),
    ("{% set ns = namespace(s='') %}{% for t in row.tags %}{% set ns.s = ns.s ~ t %}"
     "{% endfor %}{{ ns.s }}", "ab"),
    ("{{ 2 ** 64 }}", "18446744073709551616"),
    ("{{ row.name|center(20)|length }} {{ row.name|indent(2) }}", "20 Ada Lovelace"),
])
def test_what_a_job_template_does_it_still_does(source: str, rendered: str) -> None:
    assert render(source) == rendered


@pytest.mark.parametrize(("source", "words"), [
    ("{% for i in range(100001) %}{% endfor %}", "a range of more than 10,000 numbers"),
    ("{{ 'x' * 10**9 }}", "repeats past 10,000 characters or items"),
    ("{{ [row.tags] * 100000 }}", "repeats past 10,000"),
    ("{{ 2 ** 1000 }}", "a power over 340 bits"),
    ("{% set big = 2 ** 300 %}{{ big * big }}", "a product over 340 bits"),
    ("{{ row.name|center(10**9) }}", "a width, length or size over 10,000"),
    ("{{ row.name.ljust(10**9) }}", "a width, length or size over 10,000"),
    ("{{ row.name|indent(10**6) }}", "a width, length or size over 10,000"),
    ("{{ row.name|wordwrap(1, wrapstring='x' * 5000) }}", "a width, length or size over"),
    ("{{ row.tags|tojson(indent=1000) }}", "tojson's indent is not available"),
    ("{{ '{:>1000000000}'.format(row.name) }}", "a format width or precision over 10,000"),
    ("{{ '{:{}}'.format(row.name, 10**9) }}", "a format field whose width is another field"),
    ("{{ '%1000000000s' % row.name }}", "a % width or precision over 10,000"),
    ("{{ '%*s' % (10**9, row.name) }}", "a % width or precision given as *"),
    ("{{ ('x' * 5000)|replace('', 'yy') }}", "a replacement past 10,000 characters"),
    ("{{ ('x' * 5000).join('y' * 5000) }}", "joins past 10,000 characters"),
    ("{{ ('x' * 9000) + ('y' * 9000) }}", "adds up past 10,000"),
    ("{{ ('x' * 9000) ~ ('y' * 9000) }}", "makes a text of more than 10,000 characters"),
    ("{% for i in range(5000) %}{{ row.name }}{% endfor %}", "makes a text of more than"),
    ("{% set y %}{% for i in range(10000) %}{{ 'x' * 9999 }}{% endfor %}{% endset %}",
     "an item's templates output more than 100,000 characters"),
    # 10**9 empty slices: the loop's step limit stops it, or on a loaded machine the CPU
    # budget may first (both bound it; neither lets it run).
    ("{{ [1]|slice(10**9)|list }}", "more than"),
    ("{{ (1).to_bytes(10**9, 'big') }}", "a width, length or size over 10,000"),
    ("{% set a = ['x' * 900] * 10 %}{{ [a, a, a, a, a, a, a, a, a, a, a, a] }}",
     "a value of more than 10,000 characters or items"),
])
def test_what_would_grow_past_its_bounds_is_refused(source: str, words: str) -> None:
    with pytest.raises(SecurityError, match=".*".join(map(_escaped, words.split()))):
        render(source)


def _escaped(word: str) -> str:
    return "".join("\\" + c if c in ".*+?()[]{}|^$\\" else c for c in word)


@pytest.mark.parametrize("source", [
    "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
    "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
])
def test_an_item_gets_half_a_second_of_cpu(source: str) -> None:
    env = sandbox()
    env.start()
    template = env.from_string(source)
    started = time.thread_time()
    with pytest.raises(SecurityError, match="rendering took more than 0.5 s of CPU"):
        env.concat(template.root_render_func(template.new_context({"row": ROW})))
    assert env.over_time
    assert time.thread_time() - started < TEMPLATE_SECONDS + 0.2
    env.start()  # the next item has its own budget
    assert not env.over_time
    assert env.concat(env.from_string("{{ 1 }}").root_render_func(
        template.new_context({}))) == "1"


def test_decimals_stay_exact_inside_the_budget() -> None:
    assert render("{{ (row.amount|decimal) * 3 }}") == str(Decimal("37.50"))
