"""What ``runner run`` (and ``apply``, ``confirm``) shows while it works, and the colour of
what it prints at the end.

On a terminal: one bar per phase (prepare, confirm, poll ...) drawn by rich
(``runner.cli.bars``, loaded only then), with the count done of the total, the rate and the
time left; log lines are printed above the bars (the "runner" logger goes through rich's
console while the run lasts), warnings in yellow and errors in red. Without a terminal
(cron), or with ``-q``: the log lines as they are, plus a heartbeat line every 30 s of a long
phase, counted against the whole batch the run pays (``confirm: 320/2350``; ``poll:
1761/2000 final``, of those confirmed), so a long run is not silent. ``-q`` keeps the
heartbeats (their own logger, ``runner.progress``), the warnings and the errors.
``NO_COLOR`` (any value) turns colour off, as https://no-color.org asks; rich reads it itself.

The engine calls ``phase(name, total)`` as a phase starts and ``step(name, entry)`` after
each item (``RunOptions.on_phase``, ``on_progress``); a phase worked in windows is announced
again with each window's items, which add to its total. ``poll`` runs in rounds over what is
not final yet: its bar counts items final out of those it follows.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import click

from runner.lifecycle import Step
from runner.logs import event

log = logging.getLogger("runner")
beats = logging.getLogger("runner.progress")  # kept by -q, which silences runner's INFO
HEARTBEAT = 30.0  # seconds of a phase between two plain progress lines
POLL = "poll"


class RunProgress:
    """Counts per phase; shows nothing (``-q``). A context manager for the run's length."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.totals: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.whole = 0  # the items the run pays (its plan's), once known

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def phase(self, name: str, total: int) -> None:
        with self.lock:
            if name == POLL and name in self.totals:
                # A new round over what is still not final: the rest are final.
                self.done[name] = self.totals[name] - total
            elif name in self.totals:  # the phase's next window: more items
                self.totals[name] += total
            else:
                self.totals[name], self.done[name] = total, 0
            self.started(name)

    def batch(self, total: int) -> None:
        """The run's plan is made: it pays ``total`` items, which each phase counts to."""
        with self.lock:
            self.whole = total

    def step(self, name: str, entry: Any) -> None:
        with self.lock:
            if name != POLL or entry.record.step == Step.FINAL:
                self.done[name] = self.done.get(name, 0) + 1
                self.moved(name)

    def line(self, name: str) -> str:
        """``prepare: 437/2000``; ``poll: 1761/2000 final``: out of the whole batch the run
        pays, not of the windows so far."""
        final = " final" if name == POLL else ""
        total = self.totals.get(name, 0)
        if name != POLL:  # poll counts what it follows: what was confirmed
            total = max(total, self.whole)
        return f"{name}: {self.done.get(name, 0)}/{total}{final}"

    def started(self, name: str) -> None:
        """A phase (or a poll round) began; under the lock."""

    def moved(self, name: str) -> None:
        """An item of the phase was done; under the lock."""


class PlainProgress(RunProgress):
    """No terminal: a heartbeat log line every ``every`` seconds of a phase."""

    def __init__(self, every: float = HEARTBEAT, clock: Callable[[], float] = time.monotonic,
                 tick: float = 1.0) -> None:
        super().__init__()
        self.every, self.clock, self.tick = every, clock, tick
        self.current: str | None = None
        self.last = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PlainProgress:
        self._thread = threading.Thread(target=self._beat, daemon=True, name="progress")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def started(self, name: str) -> None:
        if name != self.current:
            self.current, self.last = name, self.clock()

    def beat(self) -> None:
        """Log the current phase's count when ``every`` seconds passed since the last."""
        with self.lock:
            if self.current is None or self.clock() - self.last < self.every:
                return
            self.last = self.clock()
            line = self.line(self.current)
        beats.info("%s", line, extra=event("progress"))

    def _beat(self) -> None:
        while not self._stop.wait(self.tick):
            self.beat()


def progress_for(terminal: bool, quiet: bool) -> RunProgress:
    """Bars on a terminal, heartbeats without one or with ``-q``."""
    if terminal and not quiet:
        from runner.cli.bars import BarProgress  # rich, loaded only for a terminal

        return BarProgress()
    return PlainProgress()


def colour() -> bool | None:
    """click's ``color``: None (click decides by the stream) unless NO_COLOR is set."""
    return False if os.environ.get("NO_COLOR") else None


_STYLES = (("  failed", "red"), ("  in doubt", "magenta"), ("  needs a person", "magenta"),
           ("  refused", "red"), ("  invalid", "red"), ("  changed", "red"),
           ("  paid twice", "magenta"), ("  stopped", "yellow"))


def echo_status(lines: Iterable[str]) -> None:
    """A batch's closing lines on stdout: the first bold, the problems in colour (only on a
    terminal, and never with NO_COLOR)."""
    for n, line in enumerate(lines):
        fg = next((c for prefix, c in _STYLES if line.startswith(prefix)), None)
        click.secho(line, fg=fg, bold=n == 0, color=colour())
