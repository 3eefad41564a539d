"""How one step of the flow runs over many items (``runner.engine.work``). ``each`` runs a
function over a list of items on the run's threads (one ``ThreadPoolExecutor`` per run).
``Phase`` runs one step of the flow (prepare, confirm, look up, poll) over a page with it:
it logs each item's outcome, reports progress, and stops taking items once the run is
stopped, or the provider is unreachable or refuses the configuration (``Phase.problems``,
from which the run's exit code comes). The windows are ``runner.engine.windows``; the lease
and the worker's claims are kept fresh by the worker (``runner.state.Worker``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar

from runner.engine.flow import Entry, Flow
from runner.errors import (
    ConfigurationError,
    ItemConflict,
    ItemInDoubt,
    OtherRecord,
    ProviderDown,
)
from runner.lifecycle import Outcome
from runner.logs import event

log = logging.getLogger("runner")
# Why a run stops before its end (``Phase.problems``; ``runner.engine.work`` ends on them).
UNREACHABLE = "provider unreachable"
MISCONFIGURED = "provider refuses the configuration"
Progress = Callable[[str, Entry[Any]], None]
PhaseStart = Callable[[str, int], None]  # a phase's name and how many items it takes
T = TypeVar("T")


def each(pool: ThreadPoolExecutor, workers: int, step: Callable[[T], Any],
         entries: Sequence[T]) -> None:
    """``step`` over ``entries`` on ``workers`` of the pool's threads; returns once every
    entry is done. Each thread takes the next entry from one shared iterator when done with
    its last (one task per thread, not a ``Future`` per entry: the per-item cost of
    ``Executor.map``). The first exception a step raises stops the threads from taking
    more, and is raised here once the steps in flight are done (as ``Executor.map`` would);
    an exception while waiting (Ctrl-C) stops them too, and is raised at once."""
    if not entries:
        return
    remaining: Iterator[T] = iter(entries)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def drain() -> None:
        while True:
            with lock:
                if errors:
                    return
                try:
                    entry = next(remaining)
                except StopIteration:
                    return
            try:
                step(entry)
            except BaseException as exc:  # noqa: BLE001 - raised by ``each``
                with lock:
                    errors.append(exc)

    tasks = [pool.submit(drain) for _ in range(min(len(entries), workers))]
    try:
        wait(tasks)
    except BaseException:  # e.g. Ctrl-C: the steps in flight end, no new one starts
        with lock:
            remaining = iter(())
        raise
    if errors:
        raise errors[0]


class Phase:
    """Runs one step of the flow over entries, on ``workers`` of the run's threads; stops
    taking new items once ``stop`` is set or the provider is unreachable (noted in
    ``problems``)."""

    def __init__(self, pool: ThreadPoolExecutor, workers: int, flow: Flow[Any, Any],
                 stop: threading.Event, on_progress: Progress | None, problems: list[str],
                 on_phase: PhaseStart | None = None) -> None:
        self.pool = pool
        self.workers = workers
        self.flow = flow
        self.stop = stop
        self.on_progress = on_progress
        self.on_phase = on_phase
        self.problems = problems

    def run(self, name: str, step: Callable[[Entry[Any]], Any],
            entries: Sequence[Entry[Any]], hold: bool = False) -> None:
        """``step`` over ``entries``; a phase worked in windows runs once per window.
        ``hold``: the answer of a step that ended well stays on its entry, to be recorded
        in one transaction with the intent of the item's next call (``Flow._post``), or by
        ``close`` when there is none."""
        if entries and name != "poll":
            log.info("%s: %d item(s)", name, len(entries), extra=event("phase_started"))
        if entries and self.on_phase is not None:
            self.on_phase(name, len(entries))

        def one(entry: Entry[Any]) -> None:
            if self.stop.is_set() or self.problems:
                return
            failed = True
            try:
                step(entry)
                failed = False
                # An answer no update recorded is recorded now; after an exception it is
                # not: the call stays in doubt, for a lookup (or a person) to settle.
                if not hold:
                    self.flow.close(entry)
                elif entry.answered is not None and entry.made is None:
                    entry.made = {"intent": None}  # answered: recorded, whatever comes next
            except ItemConflict:
                log.warning("%s: conflict at the provider", entry.external_id,
                            extra=event("conflict", entry.external_id))
            except OtherRecord as exc:  # never adopted (rule 8): a person looks
                self.flow.other_record(entry, exc)
            except ItemInDoubt as exc:
                log.warning("%s: in doubt: %s", entry.external_id, exc,
                            extra=event("in_doubt", entry.external_id))
            except ProviderDown as exc:
                self.stopped(exc)
            except BaseException:
                self.flow.answer(entry)  # what it made is not known: the call stays in doubt
                raise
            if failed or not hold:
                if entry.made is not None:  # what an answer made of the item is recorded
                    self.flow.close(entry)
                self.flow.answer(entry)  # an answer that made nothing stays unrecorded
            log.debug("%s %s: %s %s", name, entry.external_id, entry.record.step,
                      entry.record.status or entry.record.outcome,
                      extra=event("item_step", entry.external_id))
            if entry.record.outcome in (Outcome.FAILED, Outcome.CONFLICT):
                log.warning("%s %s: %s %s", entry.external_id, entry.record.outcome,
                            entry.record.error_code, entry.record.error_message,
                            extra=event(f"item_{entry.record.outcome}", entry.external_id))
            if self.on_progress is not None:
                self.on_progress(name, entry)

        each(self.pool, self.workers, one, entries)

    def stopped(self, down: ProviderDown) -> None:
        """The run stops: the provider cannot be reached, or refuses the configuration."""
        problem = MISCONFIGURED if isinstance(down, ConfigurationError) else UNREACHABLE
        log.error("%s: %s", problem, down, extra=event(
            "misconfigured" if problem == MISCONFIGURED else "provider_unreachable"))
        self.problems.append(problem)

    def close(self, entries: Sequence[Entry[Any]]) -> None:
        """Record the answers still held on ``entries`` (``run``'s ``hold``), on the run's
        threads."""
        held = [e for e in entries if e.answered is not None]
        if held:
            each(self.pool, self.workers, self.flow.close, held)

