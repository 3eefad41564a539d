"""The sandbox against its own OpenAPI document, property-based and bounded: every operation
is called with a few valid and a few invalid requests generated from its schema
(schemathesis), and none is answered 5xx.

The machinery lives in benchmarks/openapi_fuzz.py, whose long pass (thousands of cases)
prints the 5xx count; this one keeps to a few seconds, derandomized so that it asks the same
every time (``RUNNER_FUZZ_SEED`` draws other cases instead, ``RUNNER_FUZZ_EXAMPLES`` more).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import openapi_fuzz  # noqa: E402

EXAMPLES = int(os.environ.get("RUNNER_FUZZ_EXAMPLES", "4"))
SEED = os.environ.get("RUNNER_FUZZ_SEED")


def test_no_generated_request_is_answered_5xx() -> None:
    with openapi_fuzz.serve() as sandbox:
        tally = openapi_fuzz.fuzz(sandbox.url, EXAMPLES, ["positive", "negative"],
                                  None if SEED is None else int(SEED))
        faults = sandbox.state.faults.describe()["rules"]
    assert tally.count_5xx == 0, "\n".join(tally.server_errors)
    # Every operation was called, and the invalid requests were refused.
    assert tally.calls >= 300, tally
    assert tally.statuses["4xx"] > tally.calls / 2, tally
    assert tally.statuses["2xx"] > 20, tally
    assert faults == {}, "a generated request switched injected faults on"
