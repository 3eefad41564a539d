"""What a summary template is handed: the summary as plain data, never the objects it is
made of (``model.Summary`` holds the open state it reads its items from).

A job's summary and subject templates are job input: Jinja's sandbox guards the attributes
a template reaches, not what it is given, so it is given only this: mappings (``dict``),
lists, text, numbers (``int``, ``Decimal``), booleans and None, built for it, with the same
names the read model has (``summary.headline``, ``summary.totals``, ``t.not_paid``,
``i.external_id`` ...). Times are ISO 8601 text in UTC (``2026-11-25T09:14:03Z``: the
``when`` filter writes them for a person), a run's duration a number of seconds (the
``duration`` filter). A list a person reads (``summary.failed`` ...) is a ``FirstItems``:
its first ``summary.limit`` items, its length how many there are.

The check before a run renders an empty summary's view, of the same shape as the one the
end of the run renders.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, fields, is_dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from runner.summary.lines import ItemLine
from runner.summary.model import RunTimes, Summary
from runner.summary.tally import Listed
from runner.summary.totals import CurrencyTotal, Rate


class FirstItems(list[Any]):
    """The first items of a list a person reads; its length (``|length``) is how many
    there are in all, which may be more than it holds."""

    def __init__(self, items: Iterable[Any], total: int) -> None:
        super().__init__(items)
        self.total = total

    def __len__(self) -> int:
        return self.total

    def __bool__(self) -> bool:
        return self.total > 0


def summary_view(summary: Summary) -> dict[str, Any]:
    """``summary`` as a template sees it."""
    return {
        "job": summary.job, "headline": summary.headline,
        "generated_at": _iso(summary.generated_at),
        "run": _run(summary.run), "money_run": _run(summary.money_run),
        "runs": [_run(r) for r in summary.runs],
        "runs_since": [_run(r) for r in summary.runs_since],
        "items": _listed(summary.items), "totals": [_total(t) for t in summary.totals],
        "counts": dict(summary.counts),
        "refused": [[external_id, why] for external_id, why in summary.refused],
        "notes": list(summary.notes), "csv_path": summary.csv_path,
        "rates": [_rate(r) for r in summary.rates], "commit_step": str(summary.commit_step),
        "limit": summary.limit, "failed": _listed(summary.failed),
        "needs_person": _listed(summary.needs_person), "pending": _listed(summary.pending),
        "left_unpaid": _listed(summary.left_unpaid), "payees": _listed(summary.payees),
        "awaiting_confirm": _listed(summary.awaiting_confirm),
        "with_details": _listed(summary.with_details), "stages": dict(summary.stages),
        "funds_stop": summary.funds_stop, "unpriced": summary.unpriced,
        "items_problems": summary.items_problems, "problems": summary.problems,
        "status_code": int(summary.status_code)}


def _listed(listed: Listed | Iterable[ItemLine]) -> FirstItems:
    shown = list(listed)
    return FirstItems((_item(i) for i in shown),
                      len(listed) if isinstance(listed, Listed) else len(shown))


def _item(line: ItemLine) -> dict[str, Any]:
    return {f.name: _plain(getattr(line, f.name)) for f in fields(line)}


def _run(run: RunTimes | None) -> dict[str, Any] | None:
    if run is None:
        return None
    values = {f.name: _plain(getattr(run, f.name)) for f in fields(run)}
    duration = run.duration
    values["duration"] = None if duration is None else duration.total_seconds()
    return values


def _total(t: CurrencyTotal) -> dict[str, Any]:
    values = {f.name: _plain(getattr(t, f.name)) for f in fields(t)}
    values.update(cost=t.cost, planned=t.planned, not_paid=t.not_paid,
                  parts=[list(part) for part in t.parts])
    return values


def _rate(r: Rate) -> dict[str, Any]:
    return {**{f.name: _plain(getattr(r, f.name)) for f in fields(r)}, "rate": r.rate}


def _plain(value: Any) -> Any:
    """``value`` as plain data: records as mappings, tuples as lists, times as text."""
    if value is None or isinstance(value, str | bool | int | Decimal | float):
        return str(value) if isinstance(value, str) else value
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in asdict(value).items()}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    raise TypeError(f"{type(value).__name__} is not handed to a summary template")


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat().replace("+00:00", "Z")
