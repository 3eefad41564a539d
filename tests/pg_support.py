"""The suite's throwaway PostgreSQL cluster: benchmarks/pg_cluster.py, which the chaos and
scaling benchmarks use too (its only home: nothing in benchmarks/ imports from tests/)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from pg_cluster import USER, Cluster, free_port, pg_bin  # noqa: E402

__all__ = ["USER", "Cluster", "free_port", "pg_bin"]
