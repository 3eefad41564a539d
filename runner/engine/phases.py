"""The machinery of a run's phases (``runner.engine.batch``): one phase over a pool of
workers (``Phase``: each item's step, its verdict logged, progress reported), and the lease
and the worker's claims kept fresh while the run lives (``Heartbeat``). The windows of the
prepare and confirm phases are ``runner.engine.windows``, the passes over the items and the
polls ``runner.engine.work``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from runner.engine.flow import Entry, Flow
from runner.errors import ItemConflict, ItemInDoubt, ProviderDown, StateError
from runner.state import LEASE_TTL, StateStore

log = logging.getLogger("runner")
UNREACHABLE = "provider unreachable"
Progress = Callable[[str, Entry[Any]], None]
PhaseStart = Callable[[str, int], None]  # a phase's name and how many items it takes


class Phase:
    """Runs one step of the flow over entries, on the run's pool; stops taking new items
    once ``stop`` is set or the provider is unreachable (noted in ``problems``)."""

    def __init__(self, pool: ThreadPoolExecutor, flow: Flow[Any, Any], stop: threading.Event,
                 on_progress: Progress | None, problems: list[str],
                 on_phase: PhaseStart | None = None) -> None:
        self.pool = pool
        self.flow = flow
        self.stop = stop
        self.on_progress = on_progress
        self.on_phase = on_phase
        self.problems = problems

    def run(self, name: str, step: Callable[[Entry[Any]], Any],
            entries: Sequence[Entry[Any]]) -> None:
        """``step`` over ``entries``; a phase worked in windows runs once per window."""
        if entries and name != "poll":
            log.info("%s: %d item(s)", name, len(entries))
        if entries and self.on_phase is not None:
            self.on_phase(name, len(entries))

        def one(entry: Entry[Any]) -> None:
            if self.stop.is_set() or UNREACHABLE in self.problems:
                return
            try:
                step(entry)
                # An answer no update recorded is recorded now; after an exception it is
                # not: the call stays in doubt, for a lookup (or a person) to settle.
                self.flow.close(entry)
            except ItemConflict:
                log.warning("%s: conflict at the provider", entry.external_id)
            except ItemInDoubt as exc:
                log.warning("%s: in doubt: %s", entry.external_id, exc)
            except ProviderDown as exc:
                log.error("provider unreachable: %s", exc)
                self.problems.append(UNREACHABLE)
            if entry.made is not None:  # what an answer made of the item is recorded
                self.flow.close(entry)
            log.debug("%s %s: %s %s", name, entry.external_id, entry.record.step,
                      entry.record.status or entry.record.outcome)
            if entry.record.outcome in ("failed", "conflict"):
                log.warning("%s %s: %s %s", entry.external_id, entry.record.outcome,
                            entry.record.error_code, entry.record.error_message)
            if self.on_progress is not None:
                self.on_progress(name, entry)

        list(self.pool.map(one, entries))


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
                    log.warning("the claims of %s could not be refreshed: %s", job_name, exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
