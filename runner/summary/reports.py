"""A summary from the state to its readers: rendered, written under ``<state dir>/reports/``
and emailed as the job's ``summary.email`` says.

At the end of a run the files are written before any email is tried, so a mail server that
cannot be reached costs nothing but the email: the summary is on disk, the failure is logged,
and the command line turns it into exit code 3 (unless the run itself ended worse).

Once per change: a run whose summary says what the one before it said (the same digest,
``Summary.digest``) writes no files, and one whose summary says what the last one emailed
said mails nothing, whatever ``send`` says; ``runner report --email`` sends on demand. Item
state is never touched here: of the state, only a run's ``mailed`` mark is written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import EmailNotSent, FileNotWritten, SummaryError
from runner.job import Job
from runner.logs import event
from runner.state import StateStore
from runner.state.files import private_folder, replacing, write_private
from runner.summary.items_csv import write_csv
from runner.summary.mail import compose, send, should_send
from runner.summary.model import Summary, build_summary
from runner.summary.render import Templates

log = logging.getLogger("runner")
SUFFIXES = (".txt", ".html", ".csv")


@dataclass
class Rendered:
    """One summary in every form an email or a report file needs; the CSV is a file
    (``csv_file``), written as the items stream from the state, never held whole."""

    summary: Summary
    subject: str
    text: str
    html: str
    csv_file: Path
    csv_name: str

    @property
    def csv(self) -> str:
        return self.csv_file.read_text(encoding="utf-8")


@dataclass
class Delivery:
    files: list[Path]
    emailed: list[str] = field(default_factory=list)
    error: EmailNotSent | None = None


def summary_of(job: Job, store: StateStore, notes: Iterable[str] = ()) -> Summary:
    """The job's summary from an open store, with its credentials blanked out."""
    return build_summary(store, job.name, secrets=job.credentials(), notes=notes)


def render_all(summary: Summary, templates: Templates, csv_file: Path,
               report: bool = False) -> Rendered:
    """Every form of ``summary``, its CSV already written to ``csv_file`` (``write_items``);
    ``report``: that file is the summary's report, which the text names."""
    summary.csv_path = str(csv_file.resolve()) if report else None
    return Rendered(summary, templates.subject_of(summary), templates.text_of(summary),
                    templates.html_of(summary), csv_file, csv_file.name)


def csv_name(summary: Summary) -> str:
    return f"{summary.job}-{summary.generated_at.strftime('%Y%m%dT%H%M%SZ')}.csv"


def write_items(summary: Summary, path: Path, store: StateStore | None = None) -> int:
    """The summary's CSV written to ``path`` (private) as its items stream from ``store``
    (by default the one it was built from), or copied from its spool when it was built from
    that store with one (a run's: the items are read once); how many items."""
    with replacing(path) as out:
        if summary.spool is not None and store in (None, summary.store):
            return summary.spool.copy_to(out)
        return write_csv(out, summary.lines(store))


def report_base(summary: Summary, folder: Path) -> Path:
    """``folder/<job>-<UTC stamp>``, with -2, -3 ... when a run of the same second has one."""
    stamp = summary.generated_at.strftime("%Y%m%dT%H%M%SZ")
    base, n = folder / f"{summary.job}-{stamp}", 1
    while any(os.path.lexists(base.with_name(base.name + s)) for s in SUFFIXES):
        n += 1
        base = folder / f"{summary.job}-{stamp}-{n}"
    return base


def conclude(job: Job, templates: Templates, summary: Summary, folder: Path,
             state: StateStore | None = None) -> Delivery:
    """The end of a run: the summary written to ``folder`` (CSV first, as it needs no
    template), then emailed when the job asks; an email failure is logged and returned.
    A summary that says what the previous run's said is not written again, and one that
    says what the last emailed said is not mailed; a mailed one is marked so in ``state``
    (the run's, open), which the CSV's items are read from (by default the store the
    summary was built from)."""
    email = job.summary.email if job.summary else None
    mail = email is not None and should_send(email, summary)
    if summary.run is not None and not summary.run.changed and not mail:
        log.info("nothing changed since the previous run's summary: not written or "
                 "mailed again (`runner report` shows it)", extra=event("summary_unchanged"))
        return Delivery([])
    with contextlib.ExitStack() as stack:
        store = state
        if summary.run is not None and not summary.run.changed:
            # Unchanged, but the last change was never mailed (its email failed): mail it.
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            csv_file = scratch / csv_name(summary)
            write_items(summary, csv_file, store)
            rendered, files = render_all(summary, templates, csv_file), list[Path]()
        else:
            rendered, files = _write(summary, templates, folder, store)
        if not mail:
            return Delivery(files)
        try:
            emailed = email_summary(job, rendered)
        except EmailNotSent as exc:
            where = files[1] if files else "the state (`runner report`)"
            log.error("summary email not sent: %s; the summary is in %s", exc, where,
                      extra=event("summary_not_emailed"))
            return Delivery(files, error=exc)
        if store is not None and summary.run is not None:
            store.note_mailed(summary.run.id)
    return Delivery(files, emailed)


def _write(summary: Summary, templates: Templates, folder: Path, store: StateStore | None
           ) -> tuple[Rendered, list[Path]]:
    """The summary's files under ``folder`` (the CSV first: it needs no template)."""
    try:
        private_folder(folder)  # beneficiaries' names and amounts: for the owner's eyes
        base = report_base(summary, folder)
        csv_path = base.with_name(base.name + ".csv")
        write_items(summary, csv_path, store)
        rendered = render_all(summary, templates, csv_path, report=True)
        files = [csv_path]
        for suffix, content in ((".txt", rendered.text), (".html", rendered.html)):
            path = base.with_name(base.name + suffix)
            write_private(path, content)
            files.append(path)
    except OSError as exc:
        raise SummaryError(f"cannot write the summary under {folder}: {exc}") from None
    except FileNotWritten as exc:
        raise SummaryError(f"cannot write the summary: {exc}") from None
    log.info("summary written to %s (.txt, .html, .csv)", base, extra=event("summary_written"))
    return rendered, files


def email_summary(job: Job, rendered: Rendered) -> list[str]:
    """Send ``rendered`` as the job's summary.email says; the recipients."""
    email = job.summary.email if job.summary else None
    if email is None:
        raise EmailNotSent(f"{job.path}: the job has no summary.email")
    message = compose(email, rendered.summary, rendered.subject, rendered.text, rendered.html,
                      rendered.csv_file, rendered.csv_name)
    return send(message, email, job.path.parent)
