"""``runner schema`` and the exception tree's messages."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from runner.cli.schema import schema
from runner.errors import JobError, JobErrors, ProviderError, RunnerError, StateError
from runner.kinds import MODULES as KINDS


def test_schema_prints_the_job_model() -> None:
    result = CliRunner().invoke(schema, [])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["title"] == "Job"
    assert document["additionalProperties"] is False
    assert document["required"] == ["version", "name", "kind", "provider", "items"]
    assert document["properties"]["kind"]["enum"] == list(KINDS)
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
