"""The summary as text and HTML, through Jinja templates: the job's own first, then ours.

A job names one template (``summary.template``, a ``.html.j2`` or ``.txt.j2`` file relative
to the job file); its folder is searched first, so its sibling of the other kind is found
too, and what is missing comes from the built-in templates shipped in this package under the
``runner/`` prefix (a job's template may ``{% extends "runner/summary.html.j2" %}``).

Templates are job input, and what they say is what finance reads, so:

- they are handed data, never objects (``view.summary_view``: mappings, lists, text and
  numbers built for them; a mapping's keys before its methods, so ``summary.items`` is the
  items), with ``vars`` masked of every credential, and what they output is masked again;
- they run in the budgeted sandbox (``runner.job.budget.SUMMARY``: CPU time, sizes,
  integers), with StrictUndefined, before the run (``check_summary``, on an empty summary of
  the same shape) and after it;
- the job's templates are known before anything is sent (``summary_files``): the named one,
  its sibling, and every template they extend, include or import, by name in quotes, each a
  ``.j2`` file inside the template folder (a template named at render time, or a file of
  another kind, is refused). They are read once, hashed (a plan file covers them) and
  compiled then; what renders after the money moved is what was checked, and a file changed
  since is not read again.

Autoescaping is on for every template but ``.txt.j2`` ones (and the subject), so an HTML part
a template includes is escaped too; no value is ever marked safe.
"""

from __future__ import annotations

import hashlib
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jinja2 import (
    BaseLoader,
    ChoiceLoader,
    PackageLoader,
    PrefixLoader,
    StrictUndefined,
    Template,
    TemplateError,
    TemplateNotFound,
    meta,
)
from jinja2.loaders import split_template_path

from runner.credentials import Redactor, redact
from runner.errors import FileUnreadable, JobError, JobErrors, SummaryError
from runner.job import Job
from runner.job.budget import SUMMARY, Budget, BudgetedSandbox
from runner.job.sources import read_regular
from runner.lifecycle import PlanAction, Shown
from runner.summary.amounts import money_text, number_text
from runner.summary.mail import authorities
from runner.summary.model import Summary
from runner.summary.view import summary_view

BUILT_IN = "runner/"
BUILT_IN_TEXT, BUILT_IN_HTML = BUILT_IN + "summary.txt.j2", BUILT_IN + "summary.html.j2"
TEMPLATE_LIMIT = 1 << 20  # bytes of a job's summary template, at most
SUMMARY_BUDGET: Budget = SUMMARY


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
class TemplateFile:
    """One of the job's own summary templates: its name (as templates name it), where it is,
    and the sha256 of its bytes."""

    name: str
    path: Path
    sha256: str
    source: str = field(repr=False, compare=False, default="")


class SummarySandbox(BudgetedSandbox):
    """The budgeted sandbox, with a mapping's keys before its methods: the data a summary
    template is handed are mappings (``summary.items`` is the items, not ``dict.items``)."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, dict) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)


class _JobTemplates(BaseLoader):
    """The job's own templates, as ``summary_files`` read them (never read again)."""

    def __init__(self, files: dict[str, TemplateFile]) -> None:
        self.files = files

    def get_source(self, environment: Any, template: str
                   ) -> tuple[str, str | None, Callable[[], bool] | None]:
        found = self.files.get(template)
        if found is None:
            raise TemplateNotFound(template)
        return found.source, str(found.path), lambda: True


@dataclass(frozen=True)
class Templates:
    """The templates one job renders its summary with."""

    env: SummarySandbox
    text: str
    html: str
    subject: str | None
    vars: dict[str, Any]
    files: dict[str, TemplateFile]
    redact: Callable[[str], str]  # masks every credential's every form
    compiled: dict[str, Template] = field(default_factory=dict, repr=False, compare=False)

    def render(self, name: str, summary: Summary) -> str:
        return self._render(lambda: self.env.get_template(name), summary)

    def text_of(self, summary: Summary) -> str:
        return self.render(self.text, summary)

    def html_of(self, summary: Summary) -> str:
        return self.render(self.html, summary)

    def subject_of(self, summary: Summary) -> str:
        if self.subject is None:
            return self.redact(summary.headline)
        text = self._render(self._subject, summary)
        return " ".join(text.split())  # a header holds one line

    def _subject(self) -> Template:
        if "subject" not in self.compiled:  # compiled once, by the check before the run
            self.compiled["subject"] = self.env.from_string(self.subject or "")
        return self.compiled["subject"]

    def _render(self, template: Callable[[], Template], summary: Summary) -> str:
        try:
            self.env.start()
            text = template().render(summary=summary_view(summary), vars=self.vars,
                                     labels=LABELS)
        except Exception as exc:  # noqa: BLE001 - whatever a template raises, it failed
            raise SummaryError(f"the summary template failed: {_describe(exc)}") from None
        return self.redact(text)


def summary_files(job: Job) -> dict[str, TemplateFile]:
    """The job's own summary templates, name -> file: the one ``summary.template`` names,
    its sibling of the other kind, and every template they extend, include or import (each
    read as a job's files are, hashed, and checked: see the module's docstring). JobErrors
    naming ``summary.template`` when one cannot be taken."""
    named = job.summary.template if job.summary else None
    if named is None:
        return {}
    path = job.path.parent / named
    folder = path.parent
    kind = ".html.j2" if path.name.endswith(".html.j2") else ".txt.j2"
    sibling = path.name[: -len(kind)] + (".txt.j2" if kind == ".html.j2" else ".html.j2")
    todo = [path.name] + ([sibling] if (folder / sibling).is_file() else [])
    parser = SummarySandbox(budget=SUMMARY_BUDGET)
    files: dict[str, TemplateFile] = {}
    problems: list[str] = []
    while todo:
        name = todo.pop(0)
        if name in files:
            continue
        try:
            found = _read(folder, name)
            referred = meta.find_referenced_templates(parser.parse(found.source, name))
        except (TemplateError, UnicodeDecodeError) as exc:
            problems.append(f"the summary template failed: {_describe(exc)}")
            continue
        files[name] = found
        for other in referred:
            if other is None:
                problems.append(f"{name}: names a template at render time (an include, "
                                "import or extends of a value): name each template it uses "
                                "in quotes")
            elif other.startswith(BUILT_IN):
                continue
            elif not other.endswith(".j2"):
                problems.append(f"{name}: uses {other}: a summary template uses templates "
                                "(.j2 files) only")
            else:
                todo.append(other)
    if problems:
        raise JobErrors([JobError(str(job.path), job.line_of("summary", "template"),
                                  "summary.template", p) for p in problems])
    return files


def _read(folder: Path, name: str) -> TemplateFile:
    """The template ``name`` of ``folder``: a regular file inside it (a link to a file
    elsewhere is refused: ``/proc/self/environ``, a key, the rows), TEMPLATE_LIMIT bytes at
    most, UTF-8; TemplateError saying why not."""
    path = Path(folder, *split_template_path(name))  # no "..": TemplateNotFound
    try:
        data = read_regular(path, TEMPLATE_LIMIT, f"larger than {TEMPLATE_LIMIT >> 20} MiB; "
                                                  "a summary template is a few KB")
    except FileUnreadable as exc:
        if str(exc) == "no such file":
            raise TemplateNotFound(name) from None
        raise TemplateError(f"{name}: {exc}") from None
    except OSError as exc:
        raise TemplateError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if not Path(os.path.realpath(path)).is_relative_to(Path(os.path.realpath(folder))):
        raise TemplateError(f"{name}: outside the template folder {folder} (a link to a "
                            "file elsewhere)")
    return TemplateFile(name, path, hashlib.sha256(data).hexdigest(), data.decode("utf-8"))


def templates_of(job: Job, files: dict[str, TemplateFile] | None = None) -> Templates:
    """The job's templates (``files``: its own, by default as ``summary_files`` reads them
    now)."""
    files = summary_files(job) if files is None else files
    text, html = BUILT_IN_TEXT, BUILT_IN_HTML
    named = job.summary.template if job.summary else None
    if named is not None:
        name = Path(named).name
        if name.endswith(".html.j2"):
            html = name
            other = name.removesuffix(".html.j2") + ".txt.j2"
            text = other if other in files else text
        else:
            text = name
            other = name.removesuffix(".txt.j2") + ".html.j2"
            html = other if other in files else html
    loader = ChoiceLoader([_JobTemplates(files),
                           PrefixLoader({BUILT_IN.rstrip("/"):
                                         PackageLoader("runner.summary", "templates")})])
    env = SummarySandbox(
        budget=SUMMARY_BUDGET, loader=loader, undefined=StrictUndefined,
        autoescape=lambda name: name is not None and not name.endswith(".txt.j2"),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        auto_reload=False)
    env.add_filters(money=money_text, number=number_text, when=when, duration=duration)
    subject = job.summary.email.subject if job.summary and job.summary.email else None
    credentials = Redactor(job.credentials())

    def mask(text: str) -> str:  # the job's credentials, and those the process holds
        return redact(credentials(text))

    return Templates(env, text, html, subject, _masked(dict(job.vars), mask), files, mask)


def _masked(value: Any, mask: Callable[[str], str]) -> Any:
    """``value`` (plain data: YAML's) with every text masked."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {k: _masked(v, mask) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, mask) for v in value]
    return value


def check_summary(job: Job, planned: dict[str, str] | None = None) -> Templates:
    """The job's own templates (``summary.template``, its sibling, what they use, the mail's
    subject) read, compiled and tried on an empty summary before any money moves, and its CA
    file: a template that is missing, does not parse, names an unknown value or goes over
    its budget is a job error (exit 2), not a surprise once the batch is paid. ``planned``
    (name -> sha256: a plan file being applied) are the templates it must read, byte for
    byte. The built-in templates are runner's own, tried by its tests: they are compiled
    only by a summary that uses them (every worker of a batch checks its job, and one writes
    the summary)."""
    templates = templates_of(job)
    empty = Summary(job.name, None, [], [], {})
    errors: list[JobError] = []
    if planned is not None and {n: f.sha256 for n, f in templates.files.items()} != planned:
        changed = sorted(set(planned) ^ set(templates.files) | {
            n for n, f in templates.files.items() if planned.get(n) != f.sha256})
        errors += [JobError(str(job.path), job.line_of("summary", "template"),
                            "summary.template", f"{name}: not the template the plan was "
                            "made with") for name in changed]
    checks: list[tuple[Callable[[Summary], str], tuple[str, ...]]] = [
        (render, ("summary", "template"))
        for name, render in ((templates.text, templates.text_of),
                             (templates.html, templates.html_of))
        if not name.startswith(BUILT_IN)]
    checks.append((templates.subject_of, ("summary", "email", "subject")))
    for render, where in checks:
        try:
            render(empty)
        except SummaryError as exc:
            error = JobError(str(job.path), job.line_of(*where), ".".join(where), str(exc))
            if error not in errors:
                errors.append(error)
    for name in templates.files:  # each compiled now: what renders after is what was read
        try:
            templates.env.get_template(name)
        except TemplateError as exc:
            error = JobError(str(job.path), job.line_of("summary", "template"),
                             "summary.template", f"{name}: {_describe(exc)}")
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


def when(value: datetime | str | None) -> str:
    """A time (ISO 8601 text, as templates are handed it) as a person reads it, in UTC."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(value: timedelta | float | int | None) -> str:
    """A duration (seconds, as templates are handed it) as a person reads it."""
    if value is None:
        return ""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m {secs}s" if hours else f"{minutes}m {secs}s"
