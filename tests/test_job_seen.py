"""The external_ids a stream of rows gave: a second row with one is found whether the first
is still in memory or already spilled to the temporary file."""

from __future__ import annotations

import pytest

from runner.job import seen


def test_a_repeated_external_id_names_its_first_row_in_memory_or_spilled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seen, "IN_MEMORY", 4)
    monkeypatch.setattr(seen, "_BATCH", 3)
    ids = seen.Seen()
    try:
        assert [ids.first(f"e{n}", n + 2) for n in range(10)] == list(range(2, 12))
        assert ids.first("e0", 40) == 2  # spilled to the file with the first four
        assert ids.first("e9", 41) == 11  # still in memory
        assert ids.first("e5", 42) == 7
        assert ids.first("new", 43) == 43
    finally:
        ids.close()
    assert ids.first("e0", 50) == 50  # closed: a new stream starts empty
