"""``runner schema`` (checked with the jsonschema package, as an editor would use it: every
example job valid, ${VAR} references accepted for any value, every field described) and the
exception tree's messages."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from runner.cli.schema import schema
from runner.errors import JobError, JobErrors, ProviderError, RunnerError, StateError
from runner.kinds import MODULES as KINDS

ROOT = Path(__file__).resolve().parent.parent


def test_schema_prints_the_job_model() -> None:
    result = CliRunner().invoke(schema, [])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["title"] == "Job"
    assert document["additionalProperties"] is False
    assert document["required"] == ["version", "name", "kind", "provider", "items"]
    assert document["properties"]["kind"]["anyOf"][0]["enum"] == list(KINDS)
    assert document["properties"]["kind"]["anyOf"][1] == {
        "$ref": "#/$defs/EnvironmentReference"}
    assert "from" in document["$defs"]["Items"]["properties"]


@pytest.mark.parametrize("kind", KINDS)
def test_schema_of_one_kind(kind: str) -> None:
    result = CliRunner().invoke(schema, ["--kind", kind])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["additionalProperties"] is False


def test_schema_of_remittance_items() -> None:
    document = json.loads(CliRunner().invoke(schema, ["--kind", "remittance"]).output)
    assert document["title"] == "RemittanceItem"
    assert document["required"][:3] == ["payer_id", "mode", "source"]
    amount = document["$defs"]["Source"]["properties"]["amount"]["anyOf"][0]
    assert amount["description"] == "exact decimal, greater than 0"


def test_schema_refuses_an_unknown_kind() -> None:
    result = CliRunner().invoke(schema, ["--kind", "remitance"])
    assert result.exit_code == 2
    assert "Invalid value for '--kind': 'remitance' is not one of" in result.stderr


def test_schema_help_has_an_example() -> None:
    result = CliRunner().invoke(schema, ["--help"])
    assert result.exit_code == 0
    assert "runner schema --kind remittance" in result.output


def test_job_error_format() -> None:
    assert str(JobError("job.yaml", 3, "run.concurrency", "too low")) == (
        "job.yaml:3: run.concurrency: too low")
    assert str(JobError("pay.csv", 7, None, "not UTF-8")) == "pay.csv:7: not UTF-8"
    assert str(JobError("job.yaml", None, "items", "missing")) == "job.yaml: items: missing"
    assert str(JobError("job.yaml", None, None, "empty")) == "job.yaml: empty"


def test_exception_tree_and_exit_codes() -> None:
    errors = JobErrors([JobError("a.csv", 2, "x", "bad"), JobError("a.csv", 3, None, "worse")])
    assert str(errors) == "a.csv:2: x: bad\na.csv:3: worse"
    assert len(errors) == 2
    assert (RunnerError.exit_code, JobError.exit_code, JobErrors.exit_code) == (1, 2, 2)
    for cls in (JobError, JobErrors, StateError, ProviderError):
        assert issubclass(cls, RunnerError)
    with pytest.raises(RunnerError):
        raise errors


def schema_of(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(schema, list(args))
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.output)
    Draft202012Validator.check_schema(document)
    return document


def test_the_schema_names_its_dialect_and_itself() -> None:
    document = schema_of()
    assert list(document)[:2] == ["$schema", "$id"]
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["$id"] == "urn:runner:job:1"
    item = schema_of("--kind", "payout")
    assert (item["$schema"], item["$id"]) == (document["$schema"], "urn:runner:item:payout:1")


@pytest.mark.parametrize("job", sorted(p.name for p in (ROOT / "jobs").glob("*.yaml")))
def test_every_example_job_is_valid_against_the_schema(job: str) -> None:
    document = yaml.safe_load((ROOT / "jobs" / job).read_text(encoding="utf-8"))
    errors = [f"{list(e.absolute_path)}: {e.message}"
              for e in Draft202012Validator(schema_of()).iter_errors(document)]
    assert errors == []


def test_environment_references_stand_for_any_value() -> None:
    validator = Draft202012Validator(schema_of())
    job = yaml.safe_load((ROOT / "jobs" / "payroll.yaml").read_text(encoding="utf-8"))
    email = job["summary"]["email"]
    assert (email["send"], email["smtp"]["port"]) == (
        "${RUNNER_SUMMARY_EMAIL:-never}", "${SMTP_PORT:-587}")
    job["run"].update(concurrency="${WORKERS}", confirm="${CONFIRM:-true}",
                      on_invalid="${ON_INVALID:-skip}")
    job["name"] = "payroll-${PERIOD}"
    assert validator.is_valid(job)
    # What is neither the value's kind nor a reference is still refused.
    for path, value in ((("summary", "email", "smtp", "port"), "587a"),
                        (("summary", "email", "send"), "sometimes"),
                        (("run", "concurrency"), 0), (("run", "concurrency"), "$WORKERS"),
                        (("kind",), "remitance")):
        changed = copy.deepcopy(job)
        *parents, last = path
        target = changed
        for key in parents:
            target = target[key]
        target[last] = value
        assert not validator.is_valid(changed), (path, value)


def test_every_field_of_a_job_file_is_described() -> None:
    document = schema_of()
    undescribed = [f"{where}.{name}" for where, node in
                   [("Job", document), *document["$defs"].items()]
                   for name, field in node.get("properties", {}).items()
                   if not field.get("description")]
    assert undescribed == []
