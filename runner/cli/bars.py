"""The bars ``runner run`` draws on a terminal (``runner.cli.progress.progress_for``), with
rich: one per phase, the log lines printed above them, warnings in yellow and errors in red.
A module of its own, so that a run without a terminal (cron) does not load rich.
"""

from __future__ import annotations

import logging

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from runner.cli.progress import POLL, RunProgress, log

_LEVELS = {logging.WARNING: "yellow", logging.ERROR: "bold red", logging.CRITICAL: "bold red"}


class _Rate(ProgressColumn):
    """Items per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.1f}/s", style="cyan")


class BarProgress(RunProgress):
    """A terminal: rich's bars on stderr, one per phase, and the log lines above them."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console(stderr=True)
        self.bars = Progress(
            TextColumn("{task.description:<10}", style="bold"),
            BarColumn(complete_style="green", finished_style="green"),
            MofNCompleteColumn(), _Rate(), TextColumn("elapsed"), TimeElapsedColumn(),
            TextColumn("left"), TimeRemainingColumn(), console=self.console,
            refresh_per_second=8)
        self.tasks: dict[str, TaskID] = {}
        self._handlers: list[logging.Handler] = []
        self._live = False

    def __enter__(self) -> BarProgress:
        self._handlers = log.handlers[:]
        formatter = self._handlers[0].formatter if self._handlers else None
        log.handlers[:] = [_ConsoleHandler(self.console, formatter)]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live:
            self.bars.stop()
        log.handlers[:] = self._handlers

    def started(self, name: str) -> None:
        if not self._live:  # after the question: the bars start with the first phase
            self.bars.start()
            self._live = True
        label = "poll final" if name == POLL else name
        if name not in self.tasks:
            self.tasks[name] = self.bars.add_task(label, total=self.totals[name])
        self.bars.update(self.tasks[name], total=self.totals[name], completed=self.done[name])

    def moved(self, name: str) -> None:
        self.bars.update(self.tasks[name], completed=self.done[name])


class _ConsoleHandler(logging.Handler):
    """Log records through rich's console: above the bars, coloured by level."""

    def __init__(self, console: Console, formatter: logging.Formatter | None) -> None:
        super().__init__()
        self.console = console
        if formatter is not None:
            self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.print(Text(self.format(record), style=_LEVELS.get(record.levelno, "")),
                               soft_wrap=True)
        except Exception:  # noqa: BLE001 - logging must never stop a run
            self.handleError(record)
