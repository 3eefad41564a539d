"""A run's outcome as Prometheus metrics, in a file for node_exporter's textfile collector
(``--metrics-file PATH`` or ``RUNNER_METRICS_FILE``): how cron jobs are usually watched.

Written at the end of every ``run``, ``apply`` and ``confirm``, whatever its exit code (a
lease held, an invalid job, a signal): ``runner_exit_code``, ``runner_items`` per outcome
and ``runner_amount`` per currency and part (planned, paid, fees, failed, pending,
held, to_check) from the summary (the batch's one read model: new outcomes follow it),
``runner_duration_seconds``, ``runner_last_run_timestamp_seconds`` and
``runner_last_success_timestamp_seconds`` (the end of the last run that exited 0: kept
across runs, read from the file this one replaces and from the job's runs in the state).
Every series has the label ``job``; one file per job.

The exposition format is prometheus_client's (escaping, HELP and TYPE lines); the file is
written as runner writes every file (``runner.state.files.replacing``: whole, to a new
temporary file beside it, never through a link, renamed into place, so that the collector
never reads half a file), but readable by all: the collector runs as another user, and it
holds counts and totals, no names nor accounts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from runner.errors import FileUnreadable
from runner.exit_codes import ExitCode
from runner.job.sources import read_regular
from runner.state.files import replacing
from runner.summary.tally import STATES
from runner.summary.totals import CurrencyTotal

ENV = "RUNNER_METRICS_FILE"
PARTS = ("planned", "paid", "fees", "failed", "pending", "held", "to_check")
AMOUNTS = "runner_amount"
LAST_SUCCESS = "runner_last_success_timestamp_seconds"
#: The most of a previous file read (bytes): one job's metrics are a few KB.
PREVIOUS_LIMIT = 1 << 20


@dataclass
class RunMetrics:
    """What a run came to, for its metrics. ``counts`` and ``totals`` are None when the run
    did not get as far as the summary (then the previous file's amounts are kept when the
    run repeated the last one, which ``counts`` without ``totals`` says)."""

    job: str | None  # None: not known (the job file could not be read): the previous file's
    exit_code: int
    started: float
    ended: float
    counts: Mapping[str, int] | None = None
    totals: Iterable[CurrencyTotal] | None = None
    successes: list[float] = field(default_factory=list)  # ends of earlier runs that exited 0


def amounts(total: CurrencyTotal) -> dict[str, float]:
    return {"planned": float(total.planned), "paid": float(total.sent),
            "fees": float(total.fees), "failed": float(total.failed),
            "pending": float(total.pending), "held": float(total.held),
            "to_check": float(total.review)}


def render(run: RunMetrics, previous: str = "") -> bytes:
    """The file's text; ``previous``: the file it replaces (its last success, its amounts)."""
    registry = CollectorRegistry()
    job = run.job or _job_of(previous) or "unknown"

    def gauge(name: str, doc: str, *labels: str) -> Gauge:
        return Gauge(name, doc, ["job", *labels], registry=registry)

    gauge("runner_exit_code", "Exit code of the last run (0: every item settled well)"
          ).labels(job).set(run.exit_code)
    gauge("runner_duration_seconds", "How long the last run took").labels(job).set(
        run.ended - run.started)
    gauge("runner_last_run_timestamp_seconds", "When the last run ended (Unix time)"
          ).labels(job).set(run.ended)
    kept = _previous(previous, job)
    successes = [*run.successes, *kept.pop(LAST_SUCCESS, {}).values()]
    if run.exit_code == ExitCode.OK:
        successes.append(run.ended)
    if successes:
        gauge(LAST_SUCCESS, "When a run of the job last exited 0 (Unix time)").labels(
            job).set(max(successes))
    if run.counts is not None:
        items = gauge("runner_items", "Items of the batch per outcome", "outcome")
        for outcome in dict.fromkeys([*STATES, *run.counts]):
            items.labels(job, outcome).set(run.counts.get(outcome, 0))
    money = gauge(AMOUNTS, "The batch's money per currency: planned = paid + failed + "
                           "pending + held + to_check; fees on top", "currency", "part")
    if run.totals is not None:
        for total in run.totals:
            for part, value in amounts(total).items():
                money.labels(job, total.currency, part).set(value)
    elif run.counts is not None:  # the run repeated the last: its batch is unchanged
        for (currency, part), value in kept.get(AMOUNTS, {}).items():
            money.labels(job, currency, part).set(value)
    return generate_latest(registry)


def _previous(text: str, job: str) -> dict[str, dict[tuple[str, ...], float]]:
    """The job's samples in a previous file: name -> (other labels' values) -> value; an
    unreadable file is no file."""
    found: dict[str, dict[tuple[str, ...], float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = dict(sample.labels)
                if labels.pop("job", None) == job:
                    found.setdefault(sample.name, {})[tuple(labels.values())] = sample.value
    except ValueError:
        return {}
    return found


def _job_of(text: str) -> str | None:
    """The job a previous file is about, when it is about one."""
    try:
        jobs = {s.labels.get("job") for f in text_string_to_metric_families(text)
                for s in f.samples}
    except ValueError:
        return None
    return jobs.pop() if len(jobs) == 1 else None


def write(path: Path, run: RunMetrics) -> None:
    """Replace the file at ``path`` with ``run``'s metrics, atomically."""
    text = render(run, _previous_text(path)).decode("utf-8")
    with replacing(path, shared=True) as out:
        out.write(text)


def _previous_text(path: Path) -> str:
    """What the file at ``path`` holds, read as a job's files are (``open_regular``: a FIFO
    would keep the command from ever ending, and a device may never end); "" when there is
    none, or it is not a regular file of runner's size and text (then it is not replaced
    either: ``replacing`` says why)."""
    try:
        return read_regular(path, PREVIOUS_LIMIT, "larger than runner writes").decode("utf-8")
    except (FileUnreadable, UnicodeDecodeError):
        return ""
