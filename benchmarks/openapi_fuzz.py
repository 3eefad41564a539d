"""The sandbox against its own OpenAPI document: property-based requests (schemathesis, on
hypothesis) to every operation, valid ones and invalid ones, counting the answers; a bad
request must never be answered 5xx.

A sandbox serves in a thread of this process (no faults, status changes on its clock); the
document is read from its ``/openapi.json``; every operation is called with ``--examples``
cases generated from its schema (``positive``: what the document allows, ``negative``: what
it does not), signed with Basic credentials, which every path takes. ``POST /_admin/faults``
is called with negative cases only: a valid one would switch injected faults on (answers 500
and 503 on purpose, or held for minutes).

    .venv/bin/python benchmarks/openapi_fuzz.py --examples 100 [--seed N]
        [--modes positive,negative]

It prints the answers per status class and per operation that answered 5xx, then the 5xx
count, and exits 1 when there is any. The suite's bounded pass is
tests/test_sandbox_openapi_fuzz.py, which imports this module (nothing here imports tests/).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
import requests
import schemathesis
from hypothesis import HealthCheck, given
from schemathesis import GenerationMode

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runner.sandbox import SandboxConfig, start_in_thread  # noqa: E402

KEY, SECRET = "fuzz-key", "fuzz-secret"
NEGATIVE_ONLY = {("POST", "/_admin/faults")}
MODES = {"positive": GenerationMode.POSITIVE, "negative": GenerationMode.NEGATIVE}


@dataclass
class Tally:
    """The answers of one pass: per status class, and the 5xx with what asked for them."""

    statuses: Counter[str] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    # (operation, mode) that no case fits: an operation without parameters or body has no
    # invalid request in the document's terms
    without_cases: list[str] = field(default_factory=list)
    calls: int = 0
    seconds: float = 0.0

    @property
    def count_5xx(self) -> int:
        return len(self.server_errors)


def operations(schema: Any) -> Iterator[Any]:
    for result in schema.get_all_operations():
        yield result.ok()


def fuzz(base_url: str, examples: int, modes: list[str], seed: int | None = None,
         tally: Tally | None = None) -> Tally:
    """Call every operation of the sandbox at ``base_url`` with ``examples`` generated cases
    per mode; the answers, counted."""
    tally = tally or Tally()
    started = time.monotonic()
    document = requests.get(base_url + "/openapi.json", timeout=30).json()
    schema = schemathesis.openapi.from_dict(document)
    session = requests.Session()
    session.auth = (KEY, SECRET)
    for operation in operations(schema):
        where = (operation.method.upper(), operation.path)
        for mode in modes:
            if mode == "positive" and where in NEGATIVE_ONLY:
                continue
            _pass(operation, MODES[mode], base_url, session, examples, seed, tally)
    session.close()
    tally.seconds = time.monotonic() - started
    return tally


def _pass(operation: Any, mode: GenerationMode, base_url: str, session: requests.Session,
          examples: int, seed: int | None, tally: Tally) -> None:
    @hypothesis.settings(max_examples=examples, deadline=None, database=None,
                         derandomize=seed is None, phases=[hypothesis.Phase.generate],
                         suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def call(case: Any) -> None:
        answer = case.call(base_url=base_url, session=session, timeout=30)
        tally.calls += 1
        tally.statuses[f"{answer.status_code // 100}xx"] += 1
        if answer.status_code >= 500:
            tally.server_errors.append(f"{case.method} {case.formatted_path} "
                                       f"({mode.value}) -> {answer.status_code}: "
                                       f"{answer.text[:200]}")

    if seed is not None:
        call = hypothesis.seed(seed)(call)
    try:
        call()
    except hypothesis.errors.Unsatisfiable:
        tally.without_cases.append(f"{operation.method.upper()} {operation.path} ({mode.value})")


def serve() -> Any:
    """A sandbox for the pass: status changes on its own clock, no demo orders."""
    return start_in_thread(SandboxConfig(port=0, api_key=KEY, api_secret=SECRET,
                                         submit_delay=60.0, complete_delay=60.0,
                                         callback_attempts=1, demo_orders=False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100,
                        help="cases per operation and mode (default 100)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the generation (default: derandomized)")
    parser.add_argument("--modes", default="positive,negative")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    with serve() as sandbox:
        tally = fuzz(sandbox.url, args.examples, modes, args.seed)
    print(f"{tally.calls} calls in {tally.seconds:.1f} s "
          f"({args.examples} examples per operation and mode: {', '.join(modes)})")
    for status, count in sorted(tally.statuses.items()):
        print(f"  {status}: {count}")
    for line in tally.server_errors[:50]:
        print(f"  5xx: {line}")
    print(f"5xx answers: {tally.count_5xx}")
    return 1 if tally.count_5xx else 0


if __name__ == "__main__":
    sys.exit(main())
