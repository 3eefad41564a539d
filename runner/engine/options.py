"""What a run is given besides the job, its provider and its worker (``runner.engine.batch``),
typed and, but for the tally, frozen:

- ``RunOptions``: what the person running the job asked for (the command's flags);
- ``RunHooks``: how the run speaks to a terminal (the question before money moves, the
  progress of its phases);
- ``Clock``: the time, the waits and the stop (a signal sets it: the calls in flight finish
  and are recorded), which tests replace;
- ``Tally``: what a worker's share has done so far.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runner.engine.phases import PhaseStart, Progress
from runner.job import Job

if TYPE_CHECKING:
    from runner.engine.plan import Plan
    from runner.engine.plan_file import AppliedPlan


@dataclass(frozen=True)
class RunOptions:
    """What the run is asked to do."""

    concurrency: int | None = None  # None: the job's run.concurrency
    confirm: bool | None = None  # None: the job's run.confirm
    confirm_only: bool = False  # `runner confirm`: no new quotations or transactions
    allow_partial: bool = False
    retry_failed: bool = False  # send failed items again under a new external_id
    include_unchanged: bool = False  # and those refused for good whose row is unchanged
    allow_duplicates: bool = False  # pay possible duplicates (recorded with the run)
    applied: AppliedPlan | None = None  # `runner apply`: pay what this plan lists, or refuse
    # How a run that applies no plan file was approved, as its approval says (the run's
    # question answered yes on a terminal says so itself): "--yes", "no terminal" ...
    approved_as: str = "no question asked"

    def workers(self, job: Job) -> int:
        """Calls in flight at once."""
        return self.concurrency or job.run.concurrency

    def confirms(self, job: Job) -> bool:
        """Whether what is created is confirmed now (else it waits for `runner confirm`)."""
        return job.run.confirm if self.confirm is None else self.confirm


@dataclass(frozen=True)
class RunHooks:
    """What the run tells and asks the person watching it (None: nothing)."""

    ask: Callable[[Plan], bool] | None = None  # the plan shown: pay it?
    on_progress: Progress | None = None  # after each item of a phase
    on_phase: PhaseStart | None = None  # as a phase starts, with how many items it takes
    on_batch: Callable[[int], None] | None = None  # the plan recorded: how many it pays


@dataclass(frozen=True)
class Clock:
    """The run's time (``now``: seconds since the epoch), its waits, and its stop."""

    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    stop: threading.Event = field(default_factory=threading.Event)


@dataclass
class Tally:
    """A worker's share so far: how many items it sent the money-moving call for."""

    confirmed: int = 0
