"""The sandbox's knobs are declared once (the fields of SandboxConfig and FaultRule): every
one has its ``runner sandbox serve`` option, every timing knob is changed at run time by
``PATCH /_admin/timing``, every fault setting by ``POST /_admin/faults`` and ``--fault``. The
tests walk the declaration and the command, so the two cannot drift apart."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import click
import pytest
from click.testing import CliRunner
from conftest import Admin, error_of

from runner.cli import main
from runner.cli.sandbox import serve
from runner.sandbox import FaultRule, RunningSandbox, SandboxConfig
from runner.sandbox.core.config import EMBEDDED, timing_settings
from runner.sandbox.core.faults import KINDS, read_setting
from runner.sandbox.core.knobs import Setting, settings


def options() -> dict[str, click.Option]:
    return {p.name: p for p in serve.params if isinstance(p, click.Option) and p.name}


def declared() -> list[Setting]:
    """Every knob that has an option: all of SandboxConfig's, FaultRule's ``*`` settings."""
    return [*settings(SandboxConfig), *(s for s in settings(FaultRule) if s.option)]


def test_every_knob_has_a_serve_option_with_its_help() -> None:
    found = options()
    for s in declared():
        assert s.option is not None, s.name
        option = found.get(s.name)
        assert option is not None, f"{s.name} has no `runner sandbox serve` option"
        assert s.option in option.opts, (s.name, option.opts)
        assert option.help == (s.knob.help or None), s.name
    # and no option stands for nothing declared
    assert set(found) == {s.name for s in declared()}


def test_serve_help_lists_every_option() -> None:
    result = CliRunner().invoke(main, ["sandbox", "serve", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())  # help lines are wrapped
    for s in declared():
        assert s.option in text, s.name
        if s.knob.help:
            assert " ".join(s.knob.help.split()[:3]) in text, s.name
    assert "[default: 600,3600]" in text and "[default: 3600.0]" in text


def test_the_counters_have_no_option_of_their_own_but_fault_sets_them() -> None:
    counters = [s for s in settings(FaultRule) if s.option is None]
    assert {s.name for s in counters} == {f"{kind}_next" for kind in KINDS}
    for s in settings(FaultRule):
        group, name, value = read_setting(f"confirm:{s.name}=1")
        assert (group, name, value) == ("confirm", s.name, 1)
        assert type(value) is s.type


def test_every_timing_knob_is_changed_at_run_time(sandbox: RunningSandbox,
                                                  admin: Admin) -> None:
    timing = list(timing_settings())
    assert set(admin.timing()) == {s.name for s in timing}
    for s in timing:
        value: Any = {int: 3, float: 7.25}.get(s.type, [1.5, 2.5])
        answer = admin.timing(**{s.name: value})
        assert answer[s.name] == value, s.name
        kept = getattr(sandbox.state.config, s.name)
        assert (list(kept) if isinstance(kept, tuple) else kept) == value, s.name


@pytest.mark.parametrize("name", [s.name for s in settings(SandboxConfig) if not s.knob.timing])
def test_a_knob_not_marked_timing_is_refused_at_run_time(admin: Admin, name: str) -> None:
    r = admin.api.call("PATCH", "/timing", {name: 1})
    assert error_of(r) == (400, "1000999")


def test_every_fault_setting_is_changed_at_run_time(admin: Admin) -> None:
    for s in settings(FaultRule):
        value = 2 if s.type is int else 0.5
        rules = admin.faults({"quotations": {s.name: value}})["rules"]
        assert rules["quotations"][s.name] == value, s.name
        admin.api.call("DELETE", "/faults")


def test_the_options_build_the_config() -> None:
    config = SandboxConfig.from_options({
        "port": 0, "lost_rate": 0.25, "faults": [("confirm", "error_next", 1)],
        "balances": [("EUR", Decimal("5"), Decimal("1"))], "tick": 0.01})
    assert (config.port, config.tick) == (0, 0.01)
    assert config.faults == {"*": FaultRule(lost_rate=0.25),
                             "confirm": FaultRule(lost_rate=0.25, error_next=1)}
    assert config.balances == {"EUR": (Decimal("5"), Decimal("1"))}


def test_the_embedded_preset() -> None:
    config = SandboxConfig.embedded(api_key="k", submit_delay=2.0)
    assert (config.port, config.complete_delay, config.validation_delay) == (0, 0.5, 0.5)
    assert (config.api_key, config.submit_delay) == ("k", 2.0)
    assert set(EMBEDDED) <= {s.name for s in settings(SandboxConfig)}


def test_every_bounded_knob_refuses_a_value_beyond_its_bound_at_start() -> None:
    bounded = [s for s in declared() if s.knob.maximum is not None and s.type in (int, float)]
    assert {"quotation_ttl", "latency_ms", "error_rate", "requests_per_second",
            "max_body_bytes"} <= {s.name for s in bounded}
    for s in bounded:
        assert s.option is not None
        too_big = CliRunner().invoke(main, ["sandbox", "serve", s.option,
                                            str(int(s.knob.maximum * 10) + 1)])
        assert too_big.exit_code == 2, s.name
        assert f"is not from 0 to {s.knob.maximum:g}" in too_big.stderr, s.name
        negative = CliRunner().invoke(main, ["sandbox", "serve", s.option, "-1"])
        assert negative.exit_code == 2, s.name
