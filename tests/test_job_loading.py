"""Loading a job file: YAML, ${VAR}, the job model, and every bad input's exact message."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from job_files import REMITTANCE, replace, write

from runner.errors import JobError, JobErrors
from runner.job import load_job


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Relative paths keep the messages short and exact.
    monkeypatch.chdir(tmp_path)


def problems(job: str, environ: dict[str, str] | None = None, **kwargs: object) -> list[str]:
    write(Path("."), job, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(JobErrors) as caught:
        load_job("job.yaml", environ or {})
    assert caught.value.exit_code == 2
    return [str(error) for error in caught.value]


def test_a_valid_job_loads_with_its_defaults() -> None:
    write(Path("."))
    job = load_job("job.yaml", {})
    assert (job.name, job.kind, job.version) == ("payroll-2026-11", "remittance", 1)
    assert job.path == Path("job.yaml")
    assert job.rows_path == Path("payroll.csv")
    assert job.provider.base_url == "sandbox"
    assert job.provider.api_key.get_secret_value() == "k"
    assert job.run.concurrency == 4 and job.run.confirm is True
    assert job.run.wait_for_final == 300 and job.run.retry.max_wait == 60
    assert job.run.on_invalid == "stop"
    assert job.line_of("items", "template", "source", "amount") == 16


def test_run_section_durations_and_choices() -> None:
    job_text = REMITTANCE + (
        "run:\n  concurrency: 8\n  confirm: false\n  wait_for_final: 1.5m\n"
        "  retry: {attempts: 3, max_wait: 2h}\n  on_invalid: skip\n"
    )
    write(Path("."), job_text)
    run = load_job("job.yaml", {}).run
    assert (run.concurrency, run.confirm, run.on_invalid) == (8, False, "skip")
    assert run.wait_for_final == Decimal(90)
    assert (run.retry.attempts, run.retry.max_wait) == (3, Decimal(7200))


def test_malformed_yaml_gives_line_and_column() -> None:
    job = replace(REMITTANCE, "kind: remittance", "kind: [remittance")
    assert problems(job) == [
        "job.yaml:4: invalid YAML at column 9: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence on line 3, column 7)"
    ]


def test_a_tab_in_indentation_is_malformed_yaml() -> None:
    assert problems("version: 1\n\tname: x\n") == [
        "job.yaml:2: invalid YAML at column 1: found character '\\t' that cannot start any "
        "token"
    ]


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_file(text: str) -> None:
    assert problems(text) == [
        "job.yaml: the file is empty; a job file starts with `version: 1`"
    ]


def test_a_job_file_that_is_not_a_mapping() -> None:
    assert problems("- version: 1\n") == [
        "job.yaml:1: a job file is a mapping of keys (version, name, kind, ...)"
    ]


def test_missing_job_file() -> None:
    with pytest.raises(JobErrors) as caught:
        load_job("nowhere.yaml", {})
    assert str(caught.value) == "nowhere.yaml: no such job file"


def test_job_file_not_utf8() -> None:
    Path("job.yaml").write_bytes(REMITTANCE.encode().replace(b"Ada", b"Ad\xe9"))
    with pytest.raises(JobErrors) as caught:
        load_job("job.yaml", {})
    assert str(caught.value) == "job.yaml:11: not UTF-8 text; save the file as UTF-8"


def test_wrong_types_name_line_and_field() -> None:
    job = REMITTANCE + "run: {concurrency: many, confirm: perhaps, retry: 3}\n"
    assert problems(job) == [
        "job.yaml:20: run.concurrency: Input should be a valid integer, unable to parse "
        "string as an integer, got 'many'",
        "job.yaml:20: run.confirm: Input should be a valid boolean, unable to interpret "
        "input, got 'perhaps'",
        "job.yaml:20: run.retry: should be a mapping of keys to values",
    ]


def test_bounds_are_checked() -> None:
    job = REMITTANCE + "run:\n  concurrency: 0\n  wait_for_final: 5 minutes\n"
    assert problems(job) == [
        "job.yaml:21: run.concurrency: Input should be greater than or equal to 1, got 0",
        "job.yaml:22: run.wait_for_final: not a duration: '5 minutes'; write it like 90s, "
        "5m or 1h",
    ]


def test_unknown_keys_get_a_suggestion() -> None:
    job = replace(REMITTANCE, "provider: {api_key: k, api_secret: s}",
                  "provider: {api_key: k, api_secret: s, auht: hmac}")
    job += "run:\n  concurency: 2\nsumary: {}\n"
    assert problems(job) == [
        "job.yaml:4: provider.auht: unknown key; did you mean 'auth'?",
        "job.yaml:21: run.concurency: unknown key; did you mean 'concurrency'?",
        "job.yaml:22: sumary: unknown key; did you mean 'summary'?",
    ]


def test_unknown_key_without_a_close_match_lists_the_keys() -> None:
    job = REMITTANCE + "run: {speed: 3}\n"
    assert problems(job) == [
        "job.yaml:20: run.speed: unknown key; expected one of: concurrency, confirm, "
        "wait_for_final, retry, on_invalid, rate_limit, plan_valid_for, max_rate_change, "
        "four_eyes, approvers, approvals, verify_payees, verify_for"
    ]


def test_unknown_kind_lists_the_kinds_and_suggests_one() -> None:
    job = replace(REMITTANCE, "kind: remittance", "kind: remitance")
    assert problems(job) == [
        "job.yaml:3: kind: unknown kind 'remitance' (the kinds are: remittance, "
        "merchant_payment, payout, account_transfer, payment_order, charge, refund, cancel, "
        "legacy_pay, onboarding); did you mean 'remittance'?"
    ]


def test_version_is_checked() -> None:
    assert problems(replace(REMITTANCE, "version: 1", "version: 2")) == [
        "job.yaml:1: version: unsupported version 2; this runner reads version 1"
    ]
    assert problems(replace(REMITTANCE, "version: 1\n", "")) == [
        "job.yaml: version: required, but missing; a job file starts with `version: 1`"
    ]


def test_a_choice_with_a_typo_gets_a_suggestion() -> None:
    job = REMITTANCE + "run: {on_invalid: skipp}\n"
    assert problems(job) == [
        "job.yaml:20: run.on_invalid: 'skipp' is not one of stop, skip; did you mean 'skip'?"
    ]


def test_a_key_given_twice() -> None:
    job = replace(REMITTANCE, "name: payroll-2026-11\n",
                  "name: payroll-2026-11\nname: payroll-2026-12\n")
    assert problems(job) == ["job.yaml:3: name: key given twice (first on line 2)"]


def test_every_problem_is_reported_at_once() -> None:
    job = replace(REMITTANCE, "kind: remittance", "kind: remitance")
    job = replace(job, "api_key: k", "api_key: '${RUNNER_API_KEY}'")
    job += "run: {concurrency: 0, retry: {attempts: 0}}\n"
    assert problems(job) == [
        "job.yaml:3: kind: unknown kind 'remitance' (the kinds are: remittance, "
        "merchant_payment, payout, account_transfer, payment_order, charge, refund, cancel, "
        "legacy_pay, onboarding); did you mean 'remittance'?",
        "job.yaml:4: provider.api_key: environment variable RUNNER_API_KEY is not set (write "
        "${RUNNER_API_KEY:-default} to allow a default)",
        "job.yaml:20: run.concurrency: Input should be greater than or equal to 1, got 0",
        "job.yaml:20: run.retry.attempts: Input should be greater than or equal to 1, got 0",
    ]


def test_job_name_must_be_fit_for_external_ids() -> None:
    job = replace(REMITTANCE, "name: payroll-2026-11", "name: payroll 2026/11")
    assert problems(job) == [
        "job.yaml:2: name: String should match pattern '^[A-Za-z0-9][A-Za-z0-9._-]*$', "
        "got 'payroll 2026/11'"
    ]


@pytest.mark.parametrize(
    ("base_url", "accepted"),
    [
        ("sandbox", True),
        ("https://api.example.com/", True),
        ("http://127.0.0.1:8765", True),
        ("http://localhost:8765", True),
        ("http://api.example.com", False),
        ("ftp://example.com", False),
    ],
)
def test_provider_base_url(base_url: str, accepted: bool) -> None:
    job = replace(REMITTANCE, "provider: {api_key: k, api_secret: s}",
                  f"provider: {{base_url: '{base_url}', api_key: k, api_secret: s}}")
    write(Path("."), job)
    if accepted:
        assert load_job("job.yaml", {}).provider.base_url == base_url.rstrip("/")
    else:
        with pytest.raises(JobErrors) as caught:
            load_job("job.yaml", {})
        assert str(caught.value) == (
            f"job.yaml:4: provider.base_url: {base_url!r} is not 'sandbox', an https URL, "
            "or an http URL on this machine"
        )


def test_items_need_exactly_one_source_of_rows() -> None:
    job = replace(REMITTANCE, "  from: payroll.csv\n", "  from: payroll.csv\n  rows: []\n")
    assert problems(job) == [
        "job.yaml:13: items.from: give exactly one of `from` (a file) and `rows`"
    ]


def test_rows_file_of_unknown_format() -> None:
    job = replace(REMITTANCE, "from: payroll.csv", "from: payroll.xlsx")
    assert problems(job) == [
        "job.yaml:13: items.from: cannot tell the format of 'payroll.xlsx': name it .csv or "
        ".jsonl, or set items.format"
    ]


def test_secrets_are_not_echoed_in_messages() -> None:
    job = replace(REMITTANCE, "api_secret: s", "api_secret: [hunter2]")
    assert problems(job) == ["job.yaml:4: provider.api_secret: Input should be a valid string"]


# ---------------------------------------------------------------- ${VAR}
ENV_JOB = replace(REMITTANCE, "provider: {api_key: k, api_secret: s}",
                  "provider:\n  api_key: ${RUNNER_API_KEY}\n"
                  "  api_secret: ${RUNNER_API_SECRET:-fallback}\n"
                  "  brand: ${BRAND:-}\n")


def test_env_variables_and_defaults_are_filled() -> None:
    write(Path("."), ENV_JOB)
    job = load_job("job.yaml", {"RUNNER_API_KEY": "key-1", "BRAND": "Acme"})
    assert job.provider.api_key.get_secret_value() == "key-1"
    assert job.provider.api_secret.get_secret_value() == "fallback"
    assert job.provider.brand == "Acme"


def test_an_empty_variable_takes_the_default_as_in_the_shell() -> None:
    write(Path("."), ENV_JOB)
    job = load_job("job.yaml", {"RUNNER_API_KEY": "k", "RUNNER_API_SECRET": "", "BRAND": "X"})
    assert job.provider.api_secret.get_secret_value() == "fallback"


def test_unset_variable_is_an_error_naming_it() -> None:
    assert problems(ENV_JOB) == [
        "job.yaml:5: provider.api_key: environment variable RUNNER_API_KEY is not set (write "
        "${RUNNER_API_KEY:-default} to allow a default)",
        "job.yaml:7: provider.brand: String should match pattern '^[A-Za-z0-9]+$', got ''",
    ]


def test_env_fills_text_inside_text_and_escapes() -> None:
    job = replace(REMITTANCE, 'vars: {period: "2026-11"}',
                  'vars: {period: "${YEAR}-${MONTH:-11}", literal: "$${NOT_A_VAR}"}')
    write(Path("."), job)
    loaded = load_job("job.yaml", {"YEAR": "2027"})
    assert loaded.vars == {"period": "2027-11", "literal": "${NOT_A_VAR}"}


def test_a_reference_in_a_default_is_filled_as_the_shell_fills_it() -> None:
    vars_ = ('vars: {a: "${A:-${B}}", b: "${A:-${B:-${C:-c}}}/x", c: "${B:-${UNSET}}", '
             'd: "${A:-{x}}}", e: "${A:-$${B}}"}')
    write(Path("."), replace(REMITTANCE, 'vars: {period: "2026-11"}', vars_))
    assert load_job("job.yaml", {"B": "b"}).vars == {
        "a": "b", "b": "b/x", "c": "b", "d": "{x}}", "e": "${B}"}
    assert load_job("job.yaml", {"A": "a", "B": "b"}).vars == {
        "a": "a", "b": "a/x", "c": "b", "d": "a}}", "e": "a}"}  # as bash reads them
    # Unset where the default is used: named, as at the top level.
    assert problems(replace(REMITTANCE, 'vars: {period: "2026-11"}',
                            'vars: {period: "${A:-${B}}"}')) == [
        "job.yaml:5: vars.period: environment variable B is not set (write ${B:-default} to "
        "allow a default)"]
    deep = "${A:-" * 9 + "x" + "}" * 9
    assert problems(replace(REMITTANCE, 'vars: {period: "2026-11"}',
                            f'vars: {{period: "{deep}"}}')) == [
        "job.yaml:5: vars.period: references nested more than 8 deep in defaults; write "
        "${NAME} or ${NAME:-default} (or $${ for a literal ${)"]


def test_malformed_reference() -> None:
    job = replace(REMITTANCE, 'vars: {period: "2026-11"}', 'vars: {period: "${2026"}')
    assert problems(job) == [
        "job.yaml:5: vars.period: '${2026' is not a variable reference; write ${NAME} or "
        "${NAME:-default} (or $${ for a literal ${)"
    ]


def test_env_values_are_coerced_like_the_yaml_would_be() -> None:
    write(Path("."), REMITTANCE + "run: {concurrency: '${CONCURRENCY:-8}'}\n")
    assert load_job("job.yaml", {}).run.concurrency == 8


# ---------------------------------------------------------------- YAML reading
def test_yaml_numbers_keep_their_exact_text() -> None:
    job = replace(REMITTANCE, "payer_id: 1", "payer_id: 1\n  retail_fee: 0.10")
    job = replace(job, "sender: {firstname: Ada, lastname: Acme}",
                  "sender: {firstname: Ada, lastname: Acme, postal_code: 01234, "
                  "date_of_birth: 1990-01-02}")
    write(Path("."), job)
    loaded = load_job("job.yaml", {})
    assert loaded.defaults["retail_fee"] == Decimal("0.10")
    assert str(loaded.defaults["retail_fee"]) == "0.10"
    assert loaded.defaults["sender"]["postal_code"] == "01234"
    assert loaded.defaults["sender"]["date_of_birth"] == "1990-01-02"


def test_yaml_merge_keys_are_not_duplicates() -> None:
    job = replace(REMITTANCE, "sender: {firstname: Ada, lastname: Acme}",
                  "sender: &person {firstname: Ada, lastname: Acme}\n"
                  "  beneficiary:\n    <<: *person\n    lastname: Other")
    write(Path("."), job)
    assert load_job("job.yaml", {}).defaults["beneficiary"] == {
        "firstname": "Ada", "lastname": "Other"}


@pytest.mark.parametrize(
    "text",
    [
        "version: 1\nvars: &a [*a]\n",
        "\x00\x01\x02",
        "version: 1\nname: x\nkind: payout\nprovider: 5\nitems: {rows: 5, external_id: x}\n",
        "version: 1\ndefaults: [1, 2]\nvars: 3\nitems: []\n",
        "version: !!python/object:os.system echo\n",
        "? [a, b]\n: 1\n",
    ],
)
def test_garbage_gives_job_errors_never_a_traceback(text: str) -> None:
    Path("job.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(JobErrors) as caught:
        load_job("job.yaml", {})
    assert all(isinstance(error, JobError) for error in caught.value)
    assert len(caught.value) >= 1
