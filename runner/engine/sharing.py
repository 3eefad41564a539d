"""``run.rate_limit`` for every worker of a job together (``runner.engine.batch``): with a
shared state each call the provider clients make first takes the job's next free slot in the
state (``StateStore.rate_slot``), ``1 / rate_limit`` seconds after the one before whoever
took it, and waits for it. The hosts' clocks are kept in step (NTP); the slot is read on the
caller's clock."""

from __future__ import annotations

from runner.engine.options import Clock
from runner.provider import Provider
from runner.state import StateStore


class SharedRate:
    """A provider client's throttle that takes the job's shared slots."""

    def __init__(self, state: StateStore, job_name: str, per_second: float,
                 clock: Clock) -> None:
        self.state = state
        self.job_name = job_name
        self.interval = 1.0 / per_second
        self.clock = clock.now
        self.sleep = clock.sleep

    def __call__(self) -> None:
        at = self.state.rate_slot(self.job_name, self.interval, self.clock())
        wait = at - self.clock()
        if wait > 0:
            self.sleep(wait)


def share_rate(provider: Provider, state: StateStore, job_name: str, per_second: float,
               clock: Clock) -> None:
    """Every client of ``provider`` throttled by the job's shared slots."""
    shared = SharedRate(state, job_name, per_second, clock)
    for client in provider.clients:
        client.throttle = shared
