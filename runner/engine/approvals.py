"""Four eyes (``run.four_eyes``): money moves only through a plan file its planner made and
someone else approved.

``require_plan`` is the gate every path that moves money passes: a run that is not the
application of a plan file (`runner run`, with or without ``--retry-failed``, and `runner
confirm`) is refused before anything is opened or sent.
"""

from __future__ import annotations

from runner.errors import NeedsApproval
from runner.job import Job


def require_plan(job: Job, applying: bool) -> None:
    """NeedsApproval unless money may move for ``job`` this way: under ``run.four_eyes``
    only by applying a plan file (``applying``)."""
    if job.run.four_eyes and not applying:
        raise NeedsApproval(
            f"{job.path} has run.four_eyes: money moves only through an approved plan: "
            f"`runner plan {job.path} -o PLAN`, approved by another person, then `runner "
            f"apply PLAN`; nothing was sent")
