"""The engine: per-kind pipelines (``remittance``), the retry policy (``policy``) and the
run of a whole job (``batch``)."""

from runner.engine.batch import RunOptions, RunResult, run_job

__all__ = ["RunOptions", "RunResult", "run_job"]
