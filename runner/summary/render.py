"""The summary as text and HTML, through Jinja templates: the job's own first, then ours.

A job names one template (``summary.template``, a ``.html.j2`` or ``.txt.j2`` file relative
to the job file); its folder is searched first, so its sibling of the other kind is found
too, and what is missing comes from the built-in templates shipped in this package under the
``runner/`` prefix (a job's template may ``{% extends "runner/summary.html.j2" %}``).

Templates are job input, so they run in Jinja's sandbox with StrictUndefined, as the item
templates do. Autoescaping is on for every template but ``.txt.j2`` ones (and the subject),
so an HTML part a template includes is escaped too; no value is ever marked safe.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jinja2 import (
    BaseLoader,
    ChoiceLoader,
    FileSystemLoader,
    PackageLoader,
    PrefixLoader,
    StrictUndefined,
    TemplateError,
    TemplateNotFound,
)
from jinja2.loaders import split_template_path
from jinja2.sandbox import SandboxedEnvironment

from runner.errors import FileUnreadable, JobError, JobErrors, SummaryError
from runner.job import Job
from runner.job.sources import open_regular
from runner.lifecycle import PlanAction, Shown
from runner.summary.amounts import money_text, number_text
from runner.summary.mail import authorities
from runner.summary.model import Summary

BUILT_IN_TEXT, BUILT_IN_HTML = "runner/summary.txt.j2", "runner/summary.html.j2"
TEMPLATE_LIMIT = 1 << 20  # bytes of a job's summary template, at most


class _RegularFiles(FileSystemLoader):
    """The job's template folder, its templates read only when they are regular files
    (``runner.job.sources``) of at most TEMPLATE_LIMIT bytes: a template linked to
    ``/proc/self/environ`` would put the process's credentials in every summary, a FIFO
    would never end, and one linked to a large log would be read whole."""

    def get_source(self, environment: Any, template: str) -> tuple[str, str, Any]:
        for folder in self.searchpath:
            path = Path(folder, *split_template_path(template))
            if path.exists():
                try:
                    with open_regular(path) as file:
                        size = os.fstat(file.fileno()).st_size
                except FileUnreadable as exc:
                    raise TemplateError(f"{template}: {exc}") from None
                if size > TEMPLATE_LIMIT:
                    raise TemplateError(f"{template}: larger than {TEMPLATE_LIMIT >> 20} MiB; "
                                        "a summary template is a few KB")
        return super().get_source(environment, template)


class _Labels(dict[str, str]):
    def __missing__(self, state: str) -> str:  # a state newer than these templates
        return state.replace("_", " ")


LABELS = _Labels({
    Shown.SETTLED: "paid", Shown.PENDING: "pending",
    Shown.AWAITING_CONFIRM: "awaiting confirmation", Shown.FAILED: "failed",
    PlanAction.REFUSED: "refused", PlanAction.INVALID: "invalid (not sent)",
    Shown.CHANGED: "changed after being paid or sent", Shown.PAID_TWICE: "paid twice",
    Shown.CONFLICT: "conflict", Shown.UNKNOWN: "unknown outcome", Shown.IN_DOUBT: "in doubt",
    Shown.HELD: "held by the payee check"})


@dataclass(frozen=True)
class Templates:
    """The templates one job renders its summary with."""

    env: SandboxedEnvironment
    text: str
    html: str
    subject: str | None
    vars: dict[str, Any]

    def render(self, name: str, summary: Summary) -> str:
        return self._render(lambda: self.env.get_template(name), summary)

    def text_of(self, summary: Summary) -> str:
        return self.render(self.text, summary)

    def html_of(self, summary: Summary) -> str:
        return self.render(self.html, summary)

    def subject_of(self, summary: Summary) -> str:
        if self.subject is None:
            return summary.headline
        text = self._render(lambda: self.env.from_string(self.subject or ""), summary)
        return " ".join(text.split())  # a header holds one line

    def _render(self, template: Any, summary: Summary) -> str:
        try:
            return str(template().render(summary=summary, vars=self.vars, labels=LABELS))
        except Exception as exc:  # noqa: BLE001 - whatever a template raises, it failed
            raise SummaryError(f"the summary template failed: {_describe(exc)}") from None


def templates_of(job: Job) -> Templates:
    loaders: list[BaseLoader] = []
    text, html = BUILT_IN_TEXT, BUILT_IN_HTML
    named = job.summary.template if job.summary else None
    if named is not None:
        path = job.path.parent / named
        loaders.append(_RegularFiles(path.parent))
        kind = ".html.j2" if path.name.endswith(".html.j2") else ".txt.j2"
        other = path.name[: -len(kind)] + (".txt.j2" if kind == ".html.j2" else ".html.j2")
        if kind == ".html.j2":
            html = path.name
            text = other if (path.parent / other).is_file() else text
        else:
            text = path.name
            html = other if (path.parent / other).is_file() else html
    loaders.append(PrefixLoader({"runner": PackageLoader("runner.summary", "templates")}))
    env = SandboxedEnvironment(
        loader=ChoiceLoader(loaders), undefined=StrictUndefined,
        autoescape=lambda name: name is not None and not name.endswith(".txt.j2"),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(money=money_text, number=number_text, when=when, duration=duration)
    subject = job.summary.email.subject if job.summary and job.summary.email else None
    return Templates(env, text, html, subject, dict(job.vars))


def check_summary(job: Job) -> Templates:
    """The job's own templates (``summary.template``, its sibling, the mail's subject),
    tried on an empty summary before any money moves, and its CA file: a template that is
    missing, does not parse or names an unknown value is a job error (exit 2), not a
    surprise once the batch is paid. The built-in templates are runner's own, tried by its
    tests: they are compiled only by a summary that uses them (every worker of a batch
    checks its job, and one writes the summary)."""
    templates = templates_of(job)
    empty = Summary(job.name, None, [], [], {})
    errors: list[JobError] = []
    checks: list[tuple[Callable[[Summary], str], tuple[str, ...]]] = [
        (render, ("summary", "template"))
        for name, render in ((templates.text, templates.text_of),
                             (templates.html, templates.html_of))
        if name not in (BUILT_IN_TEXT, BUILT_IN_HTML)]
    checks.append((templates.subject_of, ("summary", "email", "subject")))
    for render, where in checks:
        try:
            render(empty)
        except SummaryError as exc:
            error = JobError(str(job.path), job.line_of(*where), ".".join(where), str(exc))
            if error not in errors:
                errors.append(error)
    email = job.summary.email if job.summary else None
    if email and email.smtp.ca_file:
        try:
            authorities(job.path.parent / email.smtp.ca_file)
        except FileUnreadable as exc:
            errors.append(JobError(str(job.path), job.line_of("summary", "email", "smtp",
                                                              "ca_file"),
                                   "summary.email.smtp.ca_file", str(exc)))
    if errors:
        raise JobErrors(errors)
    return templates


def _describe(exc: Exception) -> str:
    if isinstance(exc, TemplateNotFound):
        return f"no such template: {exc.name}"
    name, line = getattr(exc, "name", None), getattr(exc, "lineno", None)
    if name is None:  # raised while rendering: Jinja put the template's lines in the traceback
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith(
            ".j2")]
        if frames:
            name, line = Path(frames[-1].filename).name, frames[-1].lineno
    where = "" if name is None else f"{name}:{line}: " if line else f"{name}: "
    message = exc.message if isinstance(exc, TemplateError) else None
    return f"{where}{type(exc).__name__}: {message or exc}"


def when(value: datetime | None) -> str:
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(value: timedelta | None) -> str:
    if value is None:
        return ""
    seconds = value.total_seconds()
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m {secs}s" if hours else f"{minutes}m {secs}s"
