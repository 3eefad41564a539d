"""The table of kinds: every kind has every part, declared once, and the parts fit the layers
that use them (the job model, validation, the engine, the provider clients)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import KEY, SECRET

from runner.connect import connect
from runner.engine.flow import Flow
from runner.job import load_job
from runner.job.fields import JobModel
from runner.kinds import MODULES, Kind, kind_named, kinds
from runner.provider.http import ProviderClient
from runner.state import ItemChanges, ItemRecord

ROOT = Path(__file__).resolve().parent.parent


def test_the_table_holds_one_kind_per_module_named_as_it() -> None:
    assert [kind.name for kind in kinds().values()] == list(MODULES)
    assert len(MODULES) == len(set(MODULES)) == 10


@pytest.mark.parametrize("name", MODULES)
def test_every_kind_has_every_part(name: str, tmp_path: Path) -> None:
    kind = kind_named(name)
    assert isinstance(kind, Kind) and kind.name == name
    assert issubclass(kind.item, JobModel) and kind.item.model_json_schema()["properties"]
    assert issubclass(kind.flow, Flow)
    assert callable(kind.check), "every kind is checked against the provider's data"
    # Each part a kind has is used the same way for every kind.
    for part in ("wants", "amount", "rate", "quote", "funds"):
        assert getattr(kind, part) is None or callable(getattr(kind, part))
    # The example runs as it is (tests/test_examples.py) and is of this kind.
    example = load_job(ROOT / kind.example)
    assert example.kind == name and example.item_model is kind.item
    # The client is one of the provider's, reached from the composition root.
    with connect(example, tmp_path) as provider:
        assert isinstance(kind.client(provider), ProviderClient)


def test_only_kinds_that_can_price_an_item_quote_or_check_funds() -> None:
    assert {k.name for k in kinds().values() if k.quote is not None} == {"remittance"}
    assert {k.name for k in kinds().values() if k.funds is not None} == {"remittance"}
    assert {k.name for k in kinds().values() if k.rate is not None} == {"remittance"}
    assert {k.name for k in kinds().values() if k.amount is None} == {"onboarding"}
    assert {k.name for k in kinds().values() if k.wants is None} == {"legacy_pay"}


def test_an_unknown_kind_is_named_with_the_known_ones(tmp_path: Path) -> None:
    from runner.errors import JobErrors

    path = tmp_path / "job.yaml"
    path.write_text(f"version: 1\nname: j\nkind: remitance\nprovider: {{api_key: {KEY}, "
                    f"api_secret: {SECRET}}}\nitems: {{rows: [], external_id: x}}\n")
    with pytest.raises(JobErrors) as raised:
        load_job(path)
    assert str(raised.value) == (
        f"{path}:3: kind: unknown kind 'remitance' (the kinds are: {', '.join(MODULES)}); "
        f"did you mean 'remittance'?")


def test_the_changes_a_flow_may_make_are_the_records_columns() -> None:
    identity = {"external_id", "job_name", "kind", "created_at", "updated_at"}
    queue = {"polls"}  # counted by the state's queue as an item is polled, not by a flow
    columns = {f.name for f in dataclasses.fields(ItemRecord)}
    assert set(ItemChanges.__annotations__) == columns - identity - queue
