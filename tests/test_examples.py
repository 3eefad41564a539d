"""Every example in jobs/ runs as it is against the embedded sandbox, on a fresh state, to
exit 0; and a second run of it sends nothing and exits 0 too."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import main
from runner.state import StateStore

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p.name for p in (ROOT / "jobs").glob("*.yaml"))


def test_there_is_an_example_of_every_kind() -> None:
    from runner.job import KINDS, load_job

    kinds = {load_job(ROOT / "jobs" / name).kind for name in EXAMPLES}
    assert kinds == set(KINDS)


@pytest.mark.parametrize("name", EXAMPLES)
def test_an_example_runs_alone_to_exit_0(name: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    state = tmp_path / "runner.sqlite"
    command = ["run", f"jobs/{name}", "--yes", "-q", "--state", str(state)]
    first = CliRunner().invoke(main, command)
    assert first.exit_code == 0, first.output
    store = StateStore(state)
    try:
        before = [a["id"] for r in store.db.table("items").rows for a in
                  store.attempts(r["external_id"])]
    finally:
        store.close()
    second = CliRunner().invoke(main, command)
    assert second.exit_code == 0, second.output
    store = StateStore(state)
    try:
        after = [a["id"] for r in store.db.table("items").rows for a in
                 store.attempts(r["external_id"])]
    finally:
        store.close()
    assert after == before, "the second run sent something"
