"""A job's summary templates are handed data, never objects, and run within a budget, before
the run and after it: a template reaching for the state finds nothing there and changes
nothing of it (what the provider refused stays refused); one reaching for a file is
refused before any money moves; one looping or growing past its budget costs the summary
only (exit 3), the payments standing. End to end against a loopback sandbox."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import Admin
from engine_support import confirmed, err_lines
from summary_support import FAILING, SETTLED, cli, run, start_sandbox, write_job

from runner.job.budget import SUMMARY, Budget
from runner.sandbox import RunningSandbox
from runner.state import open_state
from runner.summary import Summary, build_summary, render
from runner.summary.view import FirstItems, summary_view

TEMPLATE = "summary:\n  template: pay.txt.j2\n"
# What every run of these tests pays and refuses, as the provider and the state hold it.
STATUS = "pay-2026-11: 4 items: 2 settled, 2 failed"


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return start_sandbox(sandbox_factory)


def with_template(folder: Path, sandbox: RunningSandbox, text: str,
                  rows: str = SETTLED + FAILING) -> Path:
    (folder / "pay.txt.j2").write_text(text)
    return write_job(folder, sandbox, rows, summary=TEMPLATE)


def status_of(job: Path, state: Path) -> tuple[int, str]:
    status = cli("status", str(job), "--state", str(state))
    return status.exit_code, status.stdout.splitlines()[0]


# ---------------------------------------------------------------- data, never objects
def test_what_a_template_is_handed_is_plain_data_of_one_shape_before_and_after(
        sandbox: RunningSandbox, tmp_path: Path) -> None:
    job, state = write_job(tmp_path, sandbox), tmp_path / "s.sqlite"
    assert run(job, state).exit_code == 1
    with open_state(state) as store:
        after = summary_view(build_summary(store, "pay-2026-11"))
    before = summary_view(Summary("pay-2026-11", None, [], [], {}))
    assert before.keys() == after.keys() and "store" not in after

    def plain(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                assert isinstance(k, str), where
                plain(v, f"{where}.{k}")
        elif isinstance(value, list):
            for n, v in enumerate(value):
                plain(v, f"{where}[{n}]")
        else:
            assert value is None or type(value) in (str, int, bool, float, Decimal), \
                (where, type(value))

    plain(after, "summary")
    assert isinstance(after["failed"], FirstItems) and len(after["failed"]) == 2
    assert after["failed"][0]["external_id"] == "pay-E3"
    assert after["run"]["started_at"].endswith("Z") and isinstance(after["run"]["duration"],
                                                                   float)


def test_a_template_reaching_for_the_state_changes_nothing(
        sandbox: RunningSandbox, tmp_path: Path) -> None:
    # The attack that worked when templates were handed the read model: mark a refused
    # payment settled through the state's own connection, once the money has moved.
    job = with_template(tmp_path, sandbox, (
        "{% if summary.run %}{{ summary.store.db.conn.execute(\"UPDATE items SET "
        "outcome = 'settled', state = 'settled'\") }}{% endif %}{{ summary.headline }}\n"))
    state = tmp_path / "s.sqlite"
    result = run(job, state)
    # 1: two payments failed, as the provider says (a worse code than the summary's 3).
    assert result.exit_code == 1
    assert err_lines(result)[-1] == (
        "error: the summary: the summary template failed: pay.txt.j2:1: UndefinedError: "
        "'dict object' has no attribute 'store'")
    assert status_of(job, state) == (1, STATUS)
    assert confirmed(sandbox) == {"pay-E1": 1, "pay-E2": 1, "pay-E3": 1}  # E3: REJECTED
    # Reached for before the run (the check renders the same shapes), it is refused with
    # nothing sent.
    folder = tmp_path / "again"
    folder.mkdir()
    again = with_template(folder, sandbox, "{{ summary.store }}\n")
    before = Admin(sandbox.url).requests()["counts"]
    refused = run(again, folder / "s.sqlite")
    assert (refused.exit_code, err_lines(refused)) == (2, [
        f"{again}:22: summary.template: the summary template failed: pay.txt.j2:1: "
        f"UndefinedError: 'dict object' has no attribute 'store'",
        "1 problem(s); nothing was sent."])
    assert Admin(sandbox.url).requests()["counts"] == before


@pytest.mark.parametrize(("template", "why"), [
    ('{% include "rows.csv" %}',
     "pay.txt.j2: uses rows.csv: a summary template uses templates (.j2 files) only"),
    ("{% include summary.job ~ '.j2' %}",
     "pay.txt.j2: names a template at render time (an include, import or extends of a "
     "value): name each template it uses in quotes"),
    ('{% include "../secret.j2" %}',
     "the summary template failed: no such template: ../secret.j2"),
    ('{% include "leak.j2" %}',
     "the summary template failed: TemplateError: leak.j2: outside the template folder "
     "{folder} (a link to a file elsewhere)"),
])
def test_a_template_reaching_for_a_file_is_refused_before_money_moves(
        sandbox: RunningSandbox, tmp_path: Path, template: str, why: str) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    (tmp_path / "secret.j2").write_text("the keys to the money\n")
    (folder / "leak.j2").symlink_to(tmp_path / "secret.j2")
    job = with_template(folder, sandbox, "{% if summary.run %}" + template + "{% endif %}\n")
    result = run(job, folder / "s.sqlite")
    assert (result.exit_code, err_lines(result)) == (2, [
        f"{job}:22: summary.template: {why.format(folder=folder)}",
        "1 problem(s); nothing was sent."])
    assert Admin(sandbox.url).requests()["counts"] == {}


# ---------------------------------------------------------------- the budget
@pytest.mark.parametrize(("template", "why"), [
    ("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
     "SecurityError: rendering took more than 0.05 s of CPU (a loop too long?)"),
    ("{{ 'x' * 3000000 }}", "SecurityError: repeats past 1,000,000 characters or items"),
    ("{{ 7 ** 1000 }}", "SecurityError: a power over 340 bits"),
    ("{{ summary.store.db.conn.execute(\"UPDATE items SET outcome = 'failed'\") }}",
     "UndefinedError: 'dict object' has no attribute 'store'"),
])
def test_a_template_past_its_budget_or_reaching_for_the_state_costs_the_summary_only(
        sandbox: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        template: str, why: str) -> None:
    # A budget of a twentieth of a second of CPU, so that the loop ends soon: what is tested
    # is that it ends, and what it leaves.
    monkeypatch.setattr(render, "SUMMARY_BUDGET", Budget(0.05, SUMMARY.value_max,
                                                         SUMMARY.output_max,
                                                         SUMMARY.text_max, SUMMARY.what))
    job = with_template(tmp_path, sandbox, "{% if summary.run %}" + template +
                        "{% endif %}{{ summary.headline }}\n", SETTLED)
    state = tmp_path / "s.sqlite"
    result = run(job, state)
    assert result.exit_code == 3  # the items settled; the summary was not made
    assert err_lines(result)[-1] == (f"error: the summary: the summary template failed: "
                                     f"pay.txt.j2:1: {why}")
    assert status_of(job, state) == (0, "pay-2026-11: 2 items: 2 settled")
    assert confirmed(sandbox) == {"pay-E1": 1, "pay-E2": 1}
