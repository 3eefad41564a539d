"""How runner's log lines look, for a person, cron's mail or a log shipper.

Every line's time is UTC, written with a ``Z`` (``2026-11-02T06:15:00Z``), as every other
time runner writes. Two formats (``--log-format``, or ``RUNNER_LOG_FORMAT``):

- ``text``: ``TIME LEVEL message``, one line per record;
- ``json``: one JSON object per line: ``time`` (with milliseconds), ``level``, ``job``,
  ``run_id``, ``external_id`` (where the record is about one item), ``event`` (a stable
  name: ``item_failed``, ``in_doubt``, ``phase_started`` ...) and ``message``, the text line's
  words. A record of another library (the sandbox's server) has the event ``log``.

Every line is masked of the credentials the process holds (``runner.credentials``), whatever
its message quotes.

A log call names its event with ``extra=event("in_doubt", external_id)``; the job and the
run are the process's (``bind``: one process runs one job).
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from typing import Any

from runner.credentials import redact

FORMATS = ("text", "json")
ENV = "RUNNER_LOG_FORMAT"
_BOUND: dict[str, Any] = {}


def event(name: str, external_id: str | None = None) -> dict[str, Any]:
    """A log call's ``extra``: what happened, and to which item."""
    return {"event": name, "external_id": external_id}


def bind(**fields: Any) -> None:
    """The job (``job``) and run (``run_id``) every later record belongs to."""
    _BOUND.update(fields)


def unbind() -> None:
    _BOUND.clear()


def utc_time(record: logging.LogRecord, digits: int = 0) -> str:
    stamp = datetime.fromtimestamp(record.created, UTC)
    return stamp.isoformat(timespec="milliseconds" if digits else "seconds")[:-6] + "Z"


class TextFormatter(logging.Formatter):
    """``2026-11-02T06:15:00Z INFO prepare: 3 item(s)``."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{utc_time(record)} {record.levelname} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return redact(line)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "time": utc_time(record, 3), "level": record.levelname,
            "job": _BOUND.get("job"), "run_id": _BOUND.get("run_id"),
            "event": getattr(record, "event", None) or "log",
            "message": record.getMessage()}
        external_id = getattr(record, "external_id", None)
        if external_id is not None:
            fields["external_id"] = external_id
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(fields, ensure_ascii=False, default=str))


def formatter(fmt: str | None = None) -> logging.Formatter:
    """The formatter of ``fmt`` (default: ``RUNNER_LOG_FORMAT``, else text)."""
    fmt = fmt or os.environ.get(ENV) or "text"
    if fmt not in FORMATS:
        raise ValueError(f"{ENV}: {fmt!r} is not one of {', '.join(FORMATS)}")
    return JsonFormatter() if fmt == "json" else TextFormatter()


def uvicorn_config(level: str) -> dict[str, Any]:
    """The sandbox server's logging, in runner's formats (``logging.config`` form)."""
    handler = {"class": "logging.StreamHandler", "formatter": "runner",
               "stream": "ext://sys.stderr"}
    return {"version": 1, "disable_existing_loggers": False,
            "formatters": {"runner": {"()": formatter}},
            "handlers": {"default": handler},
            "loggers": {name: {"handlers": ["default"], "level": level.upper(),
                               "propagate": False}
                        for name in ("uvicorn", "uvicorn.error", "uvicorn.access")}}
