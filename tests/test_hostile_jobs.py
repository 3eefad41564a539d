"""Hostile job files (tests/hostile_cases.py), for every kind, run as cron runs them:
`runner run JOB --yes`, each in a process of its own under a memory limit. Each must exit 2
with the words of its case, without a traceback, within seconds and within 200 MB of memory
above a valid job's; and the provider (one sandbox, shared by all) receives no POST from any.

The cases run in parallel, once, when the first test asks for their outcomes: forked from one
process that imported runner (tests/fork_runner.py), so the corpus costs seconds."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import conftest
import pytest
from click.testing import CliRunner
from conftest import KEY, PATIENCE, SECRET, Admin, ending
from hostile_cases import CASES, EXAMPLE, Case

from runner.cli import main
from runner.kinds import kinds
from runner.sandbox import RunningSandbox, start_in_thread

ROOT = Path(__file__).resolve().parent.parent
# The address space a case may map (RLIMIT_AS): a guard for the machine should a bound
# break; what the tests hold a case to is its resident memory, below.
ADDRESS_SPACE = 1 << 30
ABOVE_BASELINE = 200 << 20
# CPU seconds, not wall time: the cases share two cores with whatever else runs; each takes
# well under 1 s alone, and an unbounded case (a template loop, an alias bomb) takes minutes.
CPU_SECONDS = 10.0


@dataclass(frozen=True)
class Outcome:
    code: int
    output: str
    seconds: float
    cpu_seconds: float
    peak_rss: int  # bytes


def run_all(commands: dict[str, tuple[list[str], Path, dict[str, str]]], env: dict[str, str],
            scratch: Path) -> dict[str, Outcome]:
    """Each command (``runner ARGS`` in a folder, with more environment) in its own process
    under ADDRESS_SPACE: how it ended, its output, its time and its peak resident memory."""
    lines = [json.dumps({"id": name, "args": arguments, "cwd": str(cwd), "env": more,
                         "output": str(scratch / f"{name}.out"), "limit": ADDRESS_SPACE})
             for name, (arguments, cwd, more) in commands.items()]
    # In a process group of its own, so that the commands it forks end with it whatever
    # happens.
    with ending(subprocess.Popen([sys.executable, str(Path(__file__).parent / "fork_runner.py"),
                                  str(max(2, os.cpu_count() or 2))], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env, start_new_session=True)) as served:
        try:
            out, err = served.communicate("\n".join(lines), timeout=PATIENCE * 3)
        finally:
            with contextlib.suppress(ProcessLookupError):  # (none left: all ended)
                os.killpg(served.pid, signal.SIGKILL)
    assert served.returncode == 0, err
    outcomes = {}
    for line in out.splitlines():
        ended = json.loads(line)
        output = (scratch / f"{ended['id']}.out").read_text(encoding="utf-8", errors="replace")
        outcomes[ended["id"]] = Outcome(ended["code"], output, ended["seconds"],
                                        ended["cpu_seconds"], ended["peak_rss"])
    return outcomes


@pytest.fixture(scope="module")
def provider() -> Iterator[RunningSandbox]:
    sandbox = start_in_thread(conftest.test_config(demo_orders=True))
    yield sandbox
    sandbox.stop()


@pytest.fixture(scope="module")
def environment(provider: RunningSandbox) -> dict[str, str]:
    return {**os.environ, "RUNNER_BASE_URL": provider.url, "RUNNER_API_KEY": KEY,
            "RUNNER_API_SECRET": SECRET, "MALLOC_ARENA_MAX": "2"}


def example_copy(folder: Path) -> Path:
    """jobs/ copied into ``folder``, with the templates the payroll example names."""
    shutil.copytree(ROOT / "jobs", folder / "jobs")
    if not (folder / "templates").exists():
        shutil.copytree(ROOT / "templates", folder / "templates")
    return folder / "jobs"


@pytest.fixture(scope="module")
def corpus(environment: dict[str, str], provider: RunningSandbox,
           tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Any]:
    """Every case run once for the whole suite: how each ended, and the calls the sandbox
    received meanwhile. The suite's workers share it through a file in their common base
    folder, behind a lock (pytest-xdist's way to run a fixture once); the first to come
    runs the corpus, on the two cores, while the other waits for it."""
    if worker_id == "master":  # not distributed: nothing to share
        return run_corpus(environment, provider, tmp_path_factory.mktemp("hostile"))
    shared = tmp_path_factory.getbasetemp().parent
    with (shared / "hostile.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = shared / "hostile.json"
        if not saved.exists():
            ran = run_corpus(environment, provider, tmp_path_factory.mktemp("hostile"))
            saved.write_text(json.dumps(ran), encoding="utf-8")
        return cast(dict[str, Any], json.loads(saved.read_text(encoding="utf-8")))


def run_corpus(environment: dict[str, str], provider: RunningSandbox, root: Path
               ) -> dict[str, Any]:
    commands = {"baseline": (["validate", "payroll.yaml"], example_copy(root / "baseline"), {})}
    for case in CASES:
        folder = example_copy(root / case.id)
        for edit in case.edits:
            edit(folder, case.job)
        commands[case.id] = (["run", case.job, "--yes", "--state", "state/runner.sqlite",
                              *case.options], folder, case.env)
    outcomes = run_all(commands, environment, root)
    return {"outcomes": {name: asdict(outcome) for name, outcome in outcomes.items()},
            "counts": Admin(provider.url).requests()["counts"]}


@pytest.fixture(scope="module")
def outcomes(corpus: dict[str, Any]) -> dict[str, Outcome]:
    ran = {name: Outcome(**fields) for name, fields in corpus["outcomes"].items()}
    assert ran["baseline"].code == 0, ran["baseline"].output
    return ran


def test_the_corpus_holds_sixty_cases_over_every_kind() -> None:
    assert len(CASES) >= 60
    assert {case.kind for case in CASES} == set(kinds()) == set(EXAMPLE)
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("kind", sorted(EXAMPLE))
def test_each_example_is_valid_before_a_case_spoils_it(
        kind: str, environment: dict[str, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RUNNER_BASE_URL", "RUNNER_API_KEY", "RUNNER_API_SECRET"):
        monkeypatch.setenv(name, environment[name])
    jobs = example_copy(tmp_path)
    result = CliRunner().invoke(main, ["validate", str(jobs / f"{EXAMPLE[kind]}.yaml")])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_hostile_job_is_refused_in_bounded_time_and_memory(
        case: Case, outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes[case.id]
    assert outcome.code == 2, outcome.output
    for words in case.words:
        assert words in outcome.output
    assert "Traceback" not in outcome.output
    assert "internal error" not in outcome.output
    assert outcome.cpu_seconds < CPU_SECONDS, f"{outcome.cpu_seconds:.1f} CPU s"
    above = outcome.peak_rss - outcomes["baseline"].peak_rss
    assert above < ABOVE_BASELINE, f"{above >> 20} MB above a valid job's"


def test_the_password_in_a_base_url_is_never_repeated(outcomes: dict[str, Outcome]) -> None:
    assert "S3cr3tPass" not in outcomes["credentials-in-base-url"].output


def test_no_line_of_a_file_refused_is_printed(outcomes: dict[str, Outcome]) -> None:
    for case in ("rows-linked-to-environ", "rows-root-is-proc",
                 "summary-template-linked-to-environ", "approvers-linked-to-environ"):
        assert SECRET not in outcomes[case].output and KEY not in outcomes[case].output
    assert "s3cr3t-in-header" not in outcomes["header-is-a-settings-line"].output


def test_no_hostile_job_sent_anything(corpus: dict[str, Any]) -> None:
    counts = corpus["counts"]
    assert not [call for call in counts if call.startswith("POST")], counts




def test_hostile_plan_files_end_in_one_line(tmp_path: Path) -> None:
    """A plan file is read as strictly as a job file: one line, exit 2, nothing sent."""
    (tmp_path / "fifo.json").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "environ.json").symlink_to("/proc/self/environ")
    plans = {
        "deep.json": ("[" * 100_000 + "]" * 100_000,
                      "objects and arrays nested too deep to read"),
        "twice.json": ('{"format": "runner plan", "version": 1, "version": 2}',
                       "the key 'version' is given twice in one object"),
        "surrogate.json": ('{"format": "runner plan", "planned_by": {"user": "\\udc00"}}',
                           "a text holds a lone surrogate (U+DC00): a \\u escape of half a "
                           "UTF-16 pair, not a character"),
        "fifo.json": (None, "not a regular file (a FIFO)"),
        "environ.json": (None, "a special file of the system (proc); a job reads regular "
                               "files only"),
    }
    for name, (content, why) in plans.items():
        if content is not None:
            (tmp_path / name).write_text(content, encoding="utf-8")
        result = CliRunner().invoke(main, ["apply", str(tmp_path / name), "--yes"])
        assert (result.exit_code, result.stderr.splitlines()) == (2, [
            f"the plan is refused: {tmp_path / name}: cannot read a plan from it: {why}; "
            "nothing was sent"]), name
        assert SECRET not in result.output


def test_a_full_standard_output_ends_in_one_line_and_exit_74(
        environment: dict[str, str], tmp_path: Path) -> None:
    jobs = example_copy(tmp_path)
    with open("/dev/full", "w") as full:
        ended = subprocess.run([sys.executable, "-m", "runner", "validate", "payroll.yaml"],
                               stdout=full, stderr=subprocess.PIPE, text=True, cwd=jobs,
                               env=environment, timeout=120)
    assert (ended.returncode, ended.stderr.splitlines()) == (
        74, ["error: the standard output: cannot write: No space left on device"])
