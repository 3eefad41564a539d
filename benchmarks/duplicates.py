"""Benchmark: the check for possible duplicates over a large batch, with its history.

Run from the repository root:

    .venv/bin/python benchmarks/duplicates.py [--rows 1000000]

A remittance job of N rows (as benchmarks/validate_rows.py writes them) is checked the way a
run's plan checks it (``runner.engine.duplicates``: 500 rows a chunk, each chunk's digests
looked up in the state's index), against a state whose history holds the same batch as an
earlier export made it: the first half of the rows, under external_ids with leading zeros.
So half of the rows are held (they pay what the history paid) and half go on. Prints the
rows held, the elapsed seconds, and memory: the process's resident size after a tenth of the
rows and at the end, and its peak (ru_maxrss). Flat memory means the first two are close:
neither the batch nor its digests are held in memory (past ``runner.job.seen.IN_MEMORY``
digests, the plan's own spill to a temporary file).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from validate_rows import JOB, print_speed_and_memory, resident_mib, write_rows  # noqa: E402

from runner.engine.duplicates import Duplicates, content_of  # noqa: E402
from runner.engine.plan import PlannedItem  # noqa: E402
from runner.job import Job, ValidItem, iter_items, load_job  # noqa: E402
from runner.state import StateStore, open_state  # noqa: E402
from runner.state.records import Staged  # noqa: E402

CHUNK = 500  # as runner.engine.plan streams a plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    count = parser.parse_args().rows
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "job.yaml").write_text(JOB, encoding="utf-8")
        write_rows(folder, count)
        job = load_job(folder / "job.yaml", environ={})
        with open_state(folder / "state.sqlite") as state:
            history(job, state, count // 2)
            start = time.perf_counter()
            held, early = check(job, state, count)
            elapsed = time.perf_counter() - start
    print(f"rows: {count}  held as possible duplicates: {held}")
    print_speed_and_memory(count, elapsed, early)


def history(job: Job, state: StateStore, count: int) -> None:
    """The first ``count`` rows, paid by an earlier run under ids with leading zeros."""
    chunk: list[Staged] = []
    for result in iter_items(job):
        if result.row - 1 > count:
            break
        if isinstance(result, ValidItem):
            chunk.append(Staged(f"old-{result.external_id}", result.row, "new",
                                content=content_of(job, result)))
        if len(chunk) >= 5000:
            state.stage_plan(job.name, chunk)
            chunk = []
    state.stage_plan(job.name, chunk)
    state.record_plan(job.name, job.kind, "")
    state.clear_plan(job.name)


def check(job: Job, state: StateStore, count: int) -> tuple[int, float]:
    duplicates = Duplicates(state, job, allow_all=False)
    planned: list[PlannedItem] = []
    early = 0.0
    seen = 0
    try:
        for result in iter_items(job):
            seen += 1
            if isinstance(result, ValidItem):
                planned.append(PlannedItem(result.external_id, result.row, "new",
                                           valid=result))
            if len(planned) >= CHUNK:
                duplicates.check(planned)
                planned = []
            if seen == count // 10:
                early = resident_mib()
        duplicates.check(planned)
    finally:
        duplicates.close()
    return duplicates.held, early


if __name__ == "__main__":
    main()
