"""Every example in jobs/ runs as it is against the embedded sandbox, on a fresh state, to
exit 0; and a second run of it sends nothing and exits 0 too."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import main
from runner.state import open_state

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p.name for p in (ROOT / "jobs").glob("*.yaml"))


def test_there_is_an_example_of_every_kind() -> None:
    from runner.job import load_job
    from runner.kinds import kinds as KINDS

    kinds = {load_job(ROOT / "jobs" / name).kind for name in EXAMPLES}
    assert kinds == set(KINDS())


def job_name(example: str) -> str:
    from runner.job import load_job

    return load_job(ROOT / "jobs" / example).name


@pytest.mark.parametrize("name", EXAMPLES)
def test_an_example_runs_alone_to_exit_0(name: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    state = tmp_path / "runner.sqlite"
    command = ["run", f"jobs/{name}", "--yes", "-q", "--state", str(state)]
    first = CliRunner().invoke(main, command)
    assert first.exit_code == 0, first.output
    store = open_state(state)
    try:
        before = [a.id for r in store.items(job_name(name)) for a in
                  store.attempts(r.external_id)]
    finally:
        store.close()
    second = CliRunner().invoke(main, command)
    assert second.exit_code == 0, second.output
    store = open_state(state)
    try:
        after = [a.id for r in store.items(job_name(name)) for a in
                 store.attempts(r.external_id)]
    finally:
        store.close()
    assert after == before, "the second run sent something"


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_reads_started_ahead_are_the_reads_the_checks_make(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.job import load_job
    from runner.kinds import kind_named
    from runner.validation.catalogue import Catalogue

    wanted: list[tuple[str, object]] = []
    asked: list[tuple[str, object]] = []
    want, once = Catalogue.want, Catalogue.once

    def record_want(self: Catalogue, key: tuple[str, object], *args: object,
                    **kwargs: object) -> None:
        wanted.append(key)
        want(self, key, *args, **kwargs)  # type: ignore[arg-type]

    def record_once(self: Catalogue, key: tuple[str, object], *args: object) -> object:
        asked.append(key)
        return once(self, key, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Catalogue, "want", record_want)
    monkeypatch.setattr(Catalogue, "once", record_once)
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["validate", f"jobs/{name}", "--state",
                                       str(tmp_path / "runner.sqlite")])
    assert result.exit_code == 0, result.output
    kind = load_job(ROOT / "jobs" / name).kind
    # The onboarding example makes its company: no read.
    if kind_named(kind).wants is not None and kind != "onboarding":
        assert wanted, "no read was started ahead"
    assert set(wanted) <= set(asked), "a read was started that no check needed"
