"""Chaos, bounded: the runner (a subprocess) is killed with SIGKILL at random moments while
the sandbox (in this process) injects latency, 500s, 503s and lost answers, then run again
to the end; nobody may be paid twice, the balance must move by exactly what was confirmed,
and the state database must agree with the sandbox item by item.

Each kill falls after a seeded random one of the POSTs the batch still needs, plus a random
0-20 ms, so it can land anywhere around a call (before its intent is committed, in flight,
before its outcome is committed) and always while there is work left. Fixed delays after a
run's start (0.05-0.6 s) were tried first: the engine finishes 40 items in well under a
second, so later kills found nothing left to interrupt.

The machinery lives in benchmarks/chaos.py (the longer, configurable version of this test);
the seed is fixed (``RUNNER_CHAOS_SEED`` overrides it) and every assertion message shows it,
with what each run did. The second test runs two workers on one PostgreSQL state
(benchmarks/chaos_workers.py), on the suite's throwaway server, which it restarts once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import chaos  # noqa: E402
from pg_support import Cluster  # noqa: E402

SEED = int(os.environ.get("RUNNER_CHAOS_SEED", "20261121"))


def test_killed_runs_under_faults_pay_every_item_exactly_once(tmp_path: Path) -> None:
    settings = chaos.Settings(
        items=40, kills=4, seed=SEED, latency_ms=5.0, lost_rate=0.08, error_rate=0.04,
        unavailable_rate=0.04, kill_at="progress", final_runs=3, concurrency=4,
        run_bound=60.0)
    result = chaos.run_chaos(settings, tmp_path)
    report = result.report()

    # The kills happened while faults were on and there was work to interrupt.
    assert result.kills >= 3, report
    assert all(r.faults for r in result.runs if r.exit_code is None), report
    # The batch was then finished: the last run exited 0, within a few runs.
    assert result.runs[-1].exit_code == 0, report
    assert len(result.runs) <= settings.kills + settings.final_runs, report
    verdicts = {v.name: v for v in result.verdicts}
    assert verdicts["items paid once"].ok, report
    assert verdicts["balance"].ok, report
    assert verdicts["state agrees"].ok, report


def test_workers_killed_and_the_database_restarted_pay_every_item_exactly_once(
        tmp_path: Path, pg_cluster: Cluster) -> None:
    """Two workers on one job and one PostgreSQL state, each killed and started again at
    random, the server restarted once (immediate shutdown) in the middle. Where a job is
    worked by one run at a time, the second worker's runs exit 75 and are started again
    later; where workers share the job, both work it. Either way, the verdicts hold."""
    settings = chaos.Settings(
        items=24, kills=2, seed=SEED, latency_ms=5.0, lost_rate=0.08, error_rate=0.04,
        unavailable_rate=0.04, kill_at="progress", final_runs=2, concurrency=4,
        run_bound=60.0, workers=2)
    result = chaos.run_chaos(settings, tmp_path, state=pg_cluster.new_database(),
                             restart_db=pg_cluster.restart_immediate)
    report = result.report()

    assert result.kills >= 2, report
    assert any(n.startswith("database restarted") for n in result.notes), report
    assert {r.worker for r in result.runs} == {1, 2}, report
    # Every worker of the last round exited 0 (after 75s, when the lease made it wait).
    assert result.ended_well, report
    assert all(r.exit_code in (0, 75) for r in result.runs if not r.faults), report
    verdicts = {v.name: v for v in result.verdicts}
    assert verdicts["items paid once"].ok, report
    assert verdicts["balance"].ok, report
    assert verdicts["state agrees"].ok, report
