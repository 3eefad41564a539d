"""From row to item: Jinja in its sandbox, deep merge, external_ids, exact amounts."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from job_files import CSV, REMITTANCE, replace, write

from runner.errors import JobErrors
from runner.job import InvalidItem, ValidItem, check_job, iter_items, load_job
from runner.job.templating import merge

INLINE = replace(
    REMITTANCE,
    "  from: payroll.csv\n",
    "  rows:\n"
    "    - {employee_id: E1, net_pay: 12.50, msisdn: '+254700000001', first_name: Jo}\n",
)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def items(job: str = REMITTANCE, csv: str = CSV) -> list[ValidItem | InvalidItem]:
    write(Path("."), job, {"payroll.csv": csv})
    return list(iter_items(load_job("job.yaml", {})))


def messages(job: str = REMITTANCE, csv: str = CSV) -> list[str]:
    return [str(e) for r in items(job, csv) if isinstance(r, InvalidItem) for e in r.errors]


def load_problems(job: str) -> list[str]:
    write(Path("."), job)
    with pytest.raises(JobErrors) as caught:
        load_job("job.yaml", {})
    return [str(error) for error in caught.value]


def test_the_item_is_rendered_typed_and_merged_over_defaults() -> None:
    first = items()[0]
    assert isinstance(first, ValidItem)
    assert first.item.model_dump(exclude_none=True) == {
        "payer_id": 1,
        "mode": "SOURCE_AMOUNT",
        "source": {"country_iso_code": "FRA", "currency": "EUR", "amount": Decimal("12.50")},
        "destination": {"currency": "KES"},
        "credit_party_identifier": {"msisdn": "+254700000001"},
        "sender": {"firstname": "Ada", "lastname": "Acme"},
        "beneficiary": {"firstname": "Jo", "lastname": "Doe"},
        "purpose_of_remittance": "SALARY",
    }


def test_deep_merge_keeps_defaults_the_template_does_not_override() -> None:
    job = replace(REMITTANCE, "    beneficiary:", "    sender: {lastname: \"{{ row.first_name }}\"}"
                  "\n    beneficiary:")
    first = items(job)[0]
    assert first.item.sender.model_dump(exclude_none=True) == {  # type: ignore[union-attr]
        "firstname": "Ada", "lastname": "Jo"}


def test_merge() -> None:
    base = {"a": {"x": 1, "y": {"p": 1}}, "b": [1], "c": 3}
    over = {"a": {"y": {"q": 2}, "z": 3}, "b": [2]}
    assert merge(base, over) == {"a": {"x": 1, "y": {"p": 1, "q": 2}, "z": 3}, "b": [2], "c": 3}
    assert base == {"a": {"x": 1, "y": {"p": 1}}, "b": [1], "c": 3}


def test_an_empty_cell_leaves_the_field_to_its_default_or_missing() -> None:
    job = replace(REMITTANCE, "    beneficiary:", "    purpose_of_remittance: \"{{ row.purpose }}\""
                  "\n    beneficiary:")
    csv = "employee_id,net_pay,msisdn,first_name,purpose\nE1,1,+1,Jo,\nE2,,+2,Al,GIFT\n"
    first, second = items(job, csv)
    assert first.item.purpose_of_remittance == "SALARY"  # type: ignore[union-attr]
    assert [str(e) for e in second.errors] == [  # type: ignore[union-attr]
        "payroll.csv:3: source.amount: required when mode is SOURCE_AMOUNT"
    ]


def test_external_ids_are_deterministic() -> None:
    first = [r.external_id for r in items()]
    again = [r.external_id for r in iter_items(load_job("job.yaml", {}))]
    assert first == again == ["payroll-2026-11-E1", "payroll-2026-11-E2"]


def test_templates_see_the_job_name_kind_vars_and_defaults() -> None:
    job = replace(REMITTANCE, '"payroll-{{ vars.period }}-{{ row.employee_id }}"',
                  '"{{ job.name }}-{{ vars.period }}-{{ row.employee_id }}"')
    job = replace(job, "lastname: Doe", 'lastname: "{{ job.kind }}-{{ defaults.payer_id }}"')
    assert [(r.external_id, r.item.beneficiary.lastname)  # type: ignore[union-attr]
            for r in items(job)] == [("payroll-2026-11-2026-11-E1", "remittance-1"),
                                     ("payroll-2026-11-2026-11-E2", "remittance-1")]


SAID = ("not allowed; an external_id must be the same text in every process: it may read "
        "only row, vars and job.name, through the filters docs/job-files.md lists")


@pytest.mark.parametrize(("template", "what"), [
    ("{{ row.employee_id }}{{ ''.join|string }}",
     "''.join (an attribute of something that is not row or vars)"),
    ("{{ row.items }}", "row.items ('items' is a method or attribute of the value, not a "
                        "column or a var)"),
    ("{{ row['values'] }}", "row['values'] ('values' is a method or attribute of the value, "
                            "not a column or a var)"),
    ("{{ vars.period.upper }}", "vars.period.upper ('upper' is a method or attribute of the "
                                "value, not a column or a var)"),
    ("{{ row.employee_id }}-{{ range(3)|join }}", "the call range(...)"),
    ("{{ lipsum(1) }}", "the call lipsum(...)"),
    ("{{ cycler('a', 'b').next() }}", "the call cycler(...).next(...)"),
    ("{{ namespace(a=row.employee_id).a }}", "namespace(...).a (an attribute of something "
                                             "that is not row or vars)"),
    ("{{ defaults.payer_id }}-{{ row.employee_id }}", "defaults.payer_id"),
    ("{{ job.kind }}-{{ row.employee_id }}", "job.kind (of job, only job.name)"),
    ("{{ row[vars.column] }}", "row[...] (a key that is not written out)"),
    ("{{ row.employee_id|map('lower')|join }}", "the filter 'map'"),
    ("{{ [row]|join(attribute='employee_id') }}", "attribute= given to 'join'"),
    ("{% set x = row.employee_id %}{{ x }}", "{% set %}"),
    ("{% for c in row.employee_id %}{{ c }}{% endfor %}", "{% for %}"),
])
def test_an_external_id_that_may_differ_between_processes_is_refused_at_load(
        template: str, what: str) -> None:
    job = replace(REMITTANCE, '"payroll-{{ vars.period }}-{{ row.employee_id }}"',
                  f'"{template}"')
    assert load_problems(job)[0] == f"job.yaml:14: items.external_id: {what}: {SAID}"


PURE = ("{{ job.name|upper }}-{{ vars.period|replace('-', '') }}-"
        "{% if row.employee_id|length > 2 %}{{ row.employee_id[:2]|lower }}{% else %}"
        "{{ '%05d'|format(row.employee_id[1:]|int) }}{% endif %}-"
        "{{ (row.net_pay|decimal * 100)|int }}-{{ row['first_name']|trim|title }}")
IDS = """\
import sys
from runner.errors import JobErrors
from runner.job import iter_items, load_job
for path in sys.argv[1:]:
    try:
        print(*(r.external_id for r in iter_items(load_job(path, {}))))
    except JobErrors as exc:
        print(exc)
"""


def test_the_external_id_of_a_row_is_the_same_text_in_every_process(tmp_path: Path) -> None:
    """The ids of a template using every kind of construct the grammar allows, made in two
    processes with different hash seeds, are the same; the per-process template of a
    hostile job (an object's address, through ``''.join|string``) is refused in each."""
    pure = write(tmp_path, replace(REMITTANCE, '"payroll-{{ vars.period }}-{{ row.employee_id '
                                                '}}"', f'"{PURE}"'), name="pure.yaml")
    hostile = write(tmp_path, replace(REMITTANCE, "{{ row.employee_id }}",
                                      "{{ row.employee_id }}-{{ ''.join|string }}"),
                    name="hostile.yaml")
    for seed in ("1", "2"):
        made, refused = subprocess.run(
            [sys.executable, "-c", IDS, str(pure), str(hostile)], capture_output=True,
            text=True, timeout=120, check=True,
            env={**os.environ, "PYTHONHASHSEED": seed}).stdout.splitlines()
        assert made == "PAYROLL-2026-11-202611-00001-1250-Jo PAYROLL-2026-11-202611-00002-700-Al"
        assert refused.startswith(f"{hostile}:14: items.external_id: ''.join")


def test_two_rows_with_one_external_id_name_both_rows() -> None:
    csv = CSV + "E1,3,+254700000003,Ed\n"
    results = items(csv=csv)
    assert [r.ok for r in results] == [True, True, False]
    assert messages(csv=csv) == [
        "payroll.csv:4: external_id: 'payroll-2026-11-E1' is also the external_id of row 2"
    ]


def test_external_id_must_be_usable_in_a_url() -> None:
    csv = CSV.replace("E2,", "E 2/x,")
    assert messages(csv=csv) == [
        "payroll.csv:3: external_id: 'payroll-2026-11-E 2/x' may hold only letters, digits "
        "and . _ : - (and start with a letter or digit)"
    ]


def test_a_missing_variable_is_an_error_not_an_empty_string() -> None:
    job = replace(REMITTANCE, "vars.period", "vars.periode")
    assert messages(job) == [
        "payroll.csv:2: external_id: vars has no 'periode'",
        "payroll.csv:3: external_id: vars has no 'periode'",
    ]


def test_templates_reaching_python_internals_are_refused_up_front() -> None:
    job = replace(REMITTANCE, "{{ row.first_name }}", "{{ row.__class__.__mro__ }}")
    job = replace(job, "lastname: Doe", "lastname: \"{{ ''.__class__ }}\"")
    assert load_problems(job) == [
        "job.yaml:19: items.template.beneficiary.firstname: refused by the template sandbox: "
        "'__class__', '__mro__' cannot be reached from a job file",
        "job.yaml:19: items.template.beneficiary.lastname: refused by the template sandbox: "
        "'__class__' cannot be reached from a job file",
    ]


def test_the_sandbox_refuses_what_only_shows_when_rendering() -> None:
    job = replace(REMITTANCE, "{{ row.first_name }}", "{{ row | attr('__class__') }}")
    job = replace(job, "lastname: Doe", "lastname: \"{{ '{0.__class__}'.format(row) }}\"")
    job = replace(job, "{{ row.msisdn }}", "{{ row.pop('msisdn') }}")
    assert messages(job)[:3] == [
        "payroll.csv:2: credit_party_identifier.msisdn: refused by the template sandbox: "
        "access to attribute 'pop' of 'RowValues' object is unsafe.",
        "payroll.csv:2: beneficiary.firstname: refused by the template sandbox: access to "
        "attribute '__class__' of 'RowValues' object is unsafe.",
        "payroll.csv:2: beneficiary.lastname: refused by the template sandbox: access to "
        "attribute '__class__' of 'RowValues' object is unsafe.",
    ]


def test_nondeterministic_helpers_are_gone() -> None:
    job = replace(REMITTANCE, "{{ row.employee_id }}",
                  "{{ row.employee_id }}-{{ [1, 2] | random }}")
    assert load_problems(job) == [
        "job.yaml:14: items.external_id: template syntax error: No filter named 'random'."
    ]


def test_template_syntax_errors_are_found_at_load() -> None:
    job = replace(REMITTANCE, "{{ row.first_name }}", "{{ row.first_name }")
    assert load_problems(job) == [
        "job.yaml:19: items.template.beneficiary.firstname: template syntax error: "
        "unexpected '}'"
    ]


def test_templates_cannot_include_or_extend() -> None:
    job = replace(REMITTANCE, "{{ row.first_name }}", "{% include 'x' %}")
    assert load_problems(job) == [
        "job.yaml:19: items.template.beneficiary.firstname: extends, block, include and "
        "import are not available in job templates"
    ]


def test_render_failures_are_row_errors() -> None:
    job = replace(REMITTANCE, "{{ row.net_pay }}", "{{ row.net_pay | decimal / 0 }}")
    assert messages(job)[0] == (
        "payroll.csv:2: source.amount: cannot render: [<class 'decimal.DivisionByZero'>]")


def test_decimal_arithmetic_is_exact() -> None:
    job = replace(INLINE, "net_pay: 12.50", "a: 0.1, b: '0.2'")
    job = replace(job, "{{ row.net_pay }}", "{{ row.a + row.b | decimal }}")
    [result] = items(job)
    assert result.item.source.amount == Decimal("0.3")  # type: ignore[union-attr]
    assert str(result.item.source.amount) == "0.3"  # type: ignore[union-attr]


def test_yaml_amounts_are_read_exactly() -> None:
    job = replace(REMITTANCE, '{amount: "{{ row.net_pay }}"}', "{amount: 0.1}")
    job = replace(job, "destination: {currency: KES}", "destination: {currency: KES, amount: 0.2}")
    first = items(job)[0]
    source, destination = first.item.source, first.item.destination  # type: ignore[union-attr]
    assert source.amount is not None and destination.amount is not None
    assert source.amount + destination.amount == Decimal("0.3")


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("-5", "must be greater than 0, got -5"),
        ("0", "must be greater than 0, got 0"),
        ("12,50", "not a decimal amount: '12,50'; use a point as the decimal separator"),
        ("abc", "not a decimal amount: 'abc'"),
        ("NaN", "not a decimal amount: 'NaN'"),
        ("Infinity", "not a decimal amount: 'Infinity'"),
        # One grammar: ASCII digits, one point, nothing that Decimal() would also take.
        ("1e3", "not a decimal amount: '1e3'; write the digits out, without an exponent"),
        ("1_000.00", "not a decimal amount: '1_000.00'; write the digits without _, commas "
                     "or spaces"),
        ("1 000", "not a decimal amount: '1 000'; write the digits without _, commas or "
                  "spaces"),
        ("９７８.２６", "not a decimal amount: '９７８.２６'; write the digits as 0-9"),
        ("٩٧٨.٢٦", "not a decimal amount: '٩٧٨.٢٦'; write the digits as 0-9"),
        ("1.2.3", "not a decimal amount: '1.2.3'"),
        ("1" * 31, "31 digits before the point; at most 15 are allowed"),
        ("0.1234567", "7 digits after the point; at most 6 are allowed"),
        ("x" * 60, "not a decimal amount: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (60 "
                   "characters)"),
    ],
)
def test_bad_amounts(cell: str, message: str) -> None:
    csv = CSV.replace("12.50", f'"{cell}"')
    assert messages(csv=csv) == [f"payroll.csv:2: source.amount: {message}"]


def test_a_yaml_infinity_is_not_an_amount() -> None:
    job = replace(REMITTANCE, '{amount: "{{ row.net_pay }}"}', "{amount: .inf}")
    assert load_problems(job) == [
        "job.yaml:16: items.template.source.amount: not a decimal amount: '.inf'"
    ]


@pytest.mark.parametrize(("written", "message"), [
    ("1_000.00", "not a decimal amount: '1_000.00'; write the digits without _, commas or "
                 "spaces"),
    ("1_000", "not a decimal amount: '1_000'; write the digits without _, commas or spaces"),
    ("1.0e+3", "not a decimal amount: '1.0e+3'; write the digits out, without an exponent"),
    ("0x10", "not a decimal amount: '0x10'"),
    ("1234567890123456.5", "16 digits before the point; at most 15 are allowed"),
    ("1234567890123456", "16 digits before the point; at most 15 are allowed"),
    ("12345678901234567890123", "23 digits before the point; at most 15 are allowed"),
])
def test_yaml_numbers_are_read_from_their_text(written: str, message: str) -> None:
    job = replace(REMITTANCE, '{amount: "{{ row.net_pay }}"}', f"{{amount: {written}}}")
    assert load_problems(job) == [f"job.yaml:16: items.template.source.amount: {message}"]


def test_wrong_constants_in_defaults_are_reported_once_at_load() -> None:
    job = replace(REMITTANCE, "mode: SOURCE_AMOUNT", "mode: SOURCE_AMOUNTT")
    job = replace(job, "payer_id: 1", "payer_id: one")
    job = replace(job, "sender: {firstname: Ada", "sendr: {firstname: Ada")
    job = replace(job, "{amount: \"{{ row.net_pay }}\"}",
                  "{amount: \"{{ row.net_pay }}\", amout: 3}")
    assert load_problems(job) == [
        "job.yaml:7: defaults.payer_id: not an id: 'one'; the provider's ids are whole numbers "
        "(digits 0-9)",
        "job.yaml:8: defaults.mode: 'SOURCE_AMOUNTT' is not one of SOURCE_AMOUNT, "
        "DESTINATION_AMOUNT; did you mean 'SOURCE_AMOUNT'?",
        "job.yaml:11: defaults.sendr: unknown key; did you mean 'sender'?",
        "job.yaml:15: items.template.sender: required, but missing from items.template and "
        "defaults",
        "job.yaml:16: items.template.source.amout: unknown key; did you mean 'amount'?",
    ]


def test_conditions_of_the_documents_name_the_field() -> None:
    job = replace(REMITTANCE, "mode: SOURCE_AMOUNT", "mode: DESTINATION_AMOUNT")
    assert messages(job) == [
        "payroll.csv:2: destination.amount: required when mode is DESTINATION_AMOUNT",
        "payroll.csv:3: destination.amount: required when mode is DESTINATION_AMOUNT",
    ]


def test_the_identity_field_comes_from_items_external_id() -> None:
    job = replace(REMITTANCE, "destination: {currency: KES}",
                  "destination: {currency: KES}\n    external_id: x")
    assert load_problems(job) == [
        "job.yaml:18: items.template.external_id: not given here: runner derives it from "
        "items.external_id"
    ]


def test_check_job_collects_every_problem_of_every_row() -> None:
    csv = CSV.replace("12.50", "-1") + "E1,x,+1,Ed\n"
    write(Path("."), REMITTANCE, {"payroll.csv": csv})
    assert [str(e) for e in check_job("job.yaml", {})] == [
        "payroll.csv:2: source.amount: must be greater than 0, got -1",
        "payroll.csv:4: source.amount: not a decimal amount: 'x'",
        "payroll.csv:4: external_id: 'payroll-2026-11-E1' is also the external_id of row 2",
    ]
    assert [str(e) for e in check_job("nowhere.yaml", {})] == ["nowhere.yaml: no such job file"]
