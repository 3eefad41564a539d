"""The machinery of a run's phases (``runner.engine.batch``): the run's worker threads
(``Crew``), one phase over them (``Phase``: each item's step, its verdict logged, progress
reported), and the lease and the worker's claims kept fresh while the run lives
(``Heartbeat``). The windows of the
prepare and confirm phases are ``runner.engine.windows``, the passes over the items and the
polls ``runner.engine.work``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from runner.engine.flow import Entry, Flow
from runner.errors import (
    ConfigurationError,
    ItemConflict,
    ItemInDoubt,
    OtherRecord,
    ProviderDown,
    StateError,
)
from runner.lifecycle import Outcome
from runner.logs import event
from runner.state import LEASE_TTL, StateStore

log = logging.getLogger("runner")
# Why a run stops before its end (``Phase.problems``; ``runner.engine.work`` ends on them).
UNREACHABLE = "provider unreachable"
MISCONFIGURED = "provider refuses the configuration"
Progress = Callable[[str, Entry[Any]], None]
PhaseStart = Callable[[str, int], None]  # a phase's name and how many items it takes
T = TypeVar("T")
_END = object()


class _Task(Generic[T]):
    """One phase's work for the crew: the entries left (taken one at a time, under the
    lock), how many threads still work on it, and the first exception raised."""

    def __init__(self, step: Callable[[T], Any], entries: Iterator[T], threads: int) -> None:
        self.step = step
        self.entries = entries
        self.running = threads
        self.error: BaseException | None = None
        self.lock = threading.Lock()


class Crew:
    """The run's worker threads, started once and kept for every phase: a phase hands them
    its entries, each thread takes the next one when done with its last (no future, no
    queue of results per item), and the phase returns once every entry is done. The first
    exception a step raises stops the threads from taking more, and is raised to the phase
    once the steps in flight are done (as ``Executor.map`` would)."""

    def __init__(self, size: int, name: str = "item") -> None:
        self.size = max(1, size)
        self.name = name
        self._cond = threading.Condition()
        self._task: _Task[Any] | None = None
        self._round = 0  # which task the threads are on: each takes part in each once
        self._threads: list[threading.Thread] = []
        self._closed = False

    def __enter__(self) -> Crew:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def map(self, step: Callable[[T], Any], entries: Sequence[T]) -> None:
        """``step`` over ``entries`` on the crew's threads; returns when all are done."""
        if not entries:
            return
        task = _Task(step, iter(entries), self.size)
        with self._cond:
            while len(self._threads) < self.size:
                thread = threading.Thread(target=self._serve, daemon=True,
                                          name=f"{self.name}_{len(self._threads)}")
                self._threads.append(thread)
                thread.start()
            self._task = task
            self._round += 1
            self._cond.notify_all()
            try:
                while task.running:
                    self._cond.wait()
            except BaseException:  # e.g. Ctrl-C: the steps in flight end, no new one starts
                with task.lock:
                    task.entries = iter(())
                raise
            finally:
                self._task = None
        if task.error is not None:
            raise task.error

    def _serve(self) -> None:
        done = 0
        while True:
            with self._cond:
                while not self._closed and (self._task is None or self._round == done):
                    self._cond.wait()
                if self._closed:
                    return
                task, done = self._task, self._round
            assert task is not None
            while True:
                with task.lock:
                    entry = next(task.entries, _END) if task.error is None else _END
                if entry is _END:
                    break
                try:
                    task.step(entry)
                except BaseException as exc:  # noqa: BLE001 - raised to the phase
                    with task.lock:
                        if task.error is None:
                            task.error = exc
            with self._cond:
                task.running -= 1
                if not task.running:
                    self._cond.notify_all()

    def close(self) -> None:
        """Stop the threads (once the task they are on is done)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()


class Phase:
    """Runs one step of the flow over entries, on the run's crew; stops taking new items
    once ``stop`` is set or the provider is unreachable (noted in ``problems``)."""

    def __init__(self, crew: Crew, flow: Flow[Any, Any], stop: threading.Event,
                 on_progress: Progress | None, problems: list[str],
                 on_phase: PhaseStart | None = None) -> None:
        self.crew = crew
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

        self.crew.map(one, entries)

    def stopped(self, down: ProviderDown) -> None:
        """The run stops: the provider cannot be reached, or refuses the configuration."""
        problem = MISCONFIGURED if isinstance(down, ConfigurationError) else UNREACHABLE
        log.error("%s: %s", problem, down, extra=event(
            "misconfigured" if problem == MISCONFIGURED else "provider_unreachable"))
        self.problems.append(problem)

    def close(self, entries: Sequence[Entry[Any]]) -> None:
        """Record the answers still held on ``entries`` (``run``'s ``hold``), on the crew."""
        held = [e for e in entries if e.answered is not None]
        if held:
            self.crew.map(self.flow.close, held)


class Heartbeat:
    """Keeps the lease fresh while the run lives, and the worker's claims (``claims``: its
    id and how long a claim lasts)."""

    def __init__(self, state: StateStore, job_name: str, token: str,
                 claims: tuple[str, float] | None = None) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(state, job_name, token, claims),
                                        daemon=True, name="lease")
        self._thread.start()

    def _beat(self, state: StateStore, job_name: str, token: str,
              claims: tuple[str, float] | None) -> None:
        every = min(LEASE_TTL, claims[1] if claims else LEASE_TTL) / 3
        while not self._stop.wait(every):
            state.heartbeat(job_name, token)
            if claims is not None:
                try:
                    state.refresh_claims(job_name, claims[0], claims[1])
                except StateError as exc:  # the run's next write meets it, and says so
                    log.warning("the claims of %s could not be refreshed: %s", job_name, exc,
                                extra=event("claims_not_refreshed"))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
