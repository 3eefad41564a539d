"""Loading a job file and streaming its items: the entry points of ``runner.job``.

``load_job`` reads the YAML (see ``document``), fills ``${VAR}`` (``env``), checks the
job model, compiles the templates and checks what can be checked once for all rows: that
the rows file exists with the columns the templates name, that the template's keys fit the
kind's item model. Every problem found is raised together as ``JobErrors``.

``iter_items`` then reads the rows one at a time and yields, for each, either a
``ValidItem`` (the typed item, its external_id and row) or an ``InvalidItem`` (its
problems), so a 100,000-row file streams in flat memory. Only the external_ids seen are
kept (``runner.job.seen``: in memory, then in a temporary file), to refuse a second row with
the same one; that error names both rows, and the first row stays valid.

Messages read ``FILE:ROW: FIELD: message``. In the job file, ROW is the line and FIELD the
dotted key path (``run.retry.attempts``). For an item, FILE is the rows file (or the job
file for inline rows), ROW is numbered as ``runner.job.rows`` explains (CSV: the header is
row 1, the first data row is row 2), and FIELD is the path inside the item
(``source.amount``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from runner.credentials import hold
from runner.errors import FileUnreadable, JobError, JobErrors
from runner.job.document import Lines, Location, dotted, line_at, read_document
from runner.job.env import substitute
from runner.job.fields import JobModel
from runner.job.limits import JOB_FILE_BYTES_MAX
from runner.job.model import Job, Run
from runner.job.problems import explain, suggestion
from runner.job.rows import InlineRows, RowsFile, RowSource, RowValues
from runner.job.seen import Seen
from runner.job.sources import read_regular, rows_file_problem
from runner.job.strict_json import LONE_SURROGATE
from runner.job.templating import ItemTemplate, merge
from runner.job.text import text_problems
from runner.kinds import kinds
from runner.policy import policy_path, read_policy, rules_of


@dataclass(frozen=True)
class ValidItem:
    """A row that became an item of the job's kind, ready for the provider checks."""

    file: str
    row: int
    external_id: str
    item: JobModel
    values: RowValues = field(repr=False)
    # The row's ``allow_duplicate`` column says it pays what another item of the batch pays
    # on purpose (rule 9 of docs/exactly-once.md): it is not held as a possible duplicate.
    allow_duplicate: bool = False

    ok = True


@dataclass(frozen=True)
class InvalidItem:
    """A row that did not become an item, with every problem found in it."""

    file: str
    row: int
    external_id: str | None
    errors: list[JobError]

    ok = False


ItemResult = ValidItem | InvalidItem


def load_job(path: str | Path, environ: Mapping[str, str] | None = None) -> Job:
    """Read, check and return the job at ``path``; raise ``JobErrors`` with every problem.

    ``environ`` fills ``${VAR}`` references (default: ``os.environ``).
    """
    file = str(path)
    raw = _read_job_file(file)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise JobErrors([JobError(file, line, None, "not UTF-8 text; save the file as "
                                  "UTF-8")]) from None
    tree, lines, errors = read_document(text, file)
    fixed = _from_the_environment(tree, lines, file)
    errors += fixed
    tree, missing = substitute(tree, os.environ if environ is None else environ, file, lines)
    errors += missing
    unpaired = _lone_surrogates(tree, file, lines)
    if unpaired:  # no text can hold them (a file, the state, a message): nothing goes on
        raise JobErrors(unpaired)
    try:
        job = Job.model_validate(tree)
    except ValidationError as exc:
        unset = {error.field for error in errors}
        for location, message in explain(exc, Job):
            if dotted(location) in unset:
                continue  # already told: its ${VAR} is not set
            message = _job_message(location, message, tree)
            errors.append(JobError(file, line_at(lines, location), dotted(location), message))
        raise JobErrors(sorted(errors, key=lambda error: error.row or 0)) from None
    job._path = Path(path)
    job._lines = lines
    hold(*job.credentials())  # masked in whatever this process writes from now on
    errors += _rules_problems(job, os.environ if environ is None else environ)
    errors += _items_problems(job) + ([] if fixed else _approvers_problems(job))
    if errors:
        raise JobErrors(sorted(errors, key=lambda error: (error.file != file, error.row or 0)))
    return job


# Who may approve, and how many must: written in the job file itself (which is reviewed and
# hashed into every plan), never taken from the environment of whoever runs runner.
FIXED = ("four_eyes", "approvers", "approvals")


def _from_the_environment(tree: Any, lines: Lines, file: str) -> list[JobError]:
    run = tree.get("run") if isinstance(tree, dict) else None
    if not isinstance(run, dict):
        return []
    return [JobError(file, line_at(lines, ("run", key)), f"run.{key}", "written in the job "
                     "file itself, not taken from the environment (no ${...} here)")
            for key in FIXED if isinstance(run.get(key), str) and "${" in run[key]]


def _rules_problems(job: Job, environ: Mapping[str, str]) -> list[JobError]:
    """Set the rules the job's money obeys (``runner.policy``: the executor's policy, which
    ``RUNNER_POLICY`` names, made stricter by the job file); each setting of the job file
    that would loosen them. PolicyRefused when the policy itself cannot be read."""
    found = policy_path(environ)
    policy = read_policy(found) if found is not None else None
    rules, loosened = rules_of(job.run, job.run.model_fields_set, job.approvers_path, policy,
                               job.provider.base_url, job.provider.api_key.get_secret_value())
    job._rules = rules
    return [JobError(str(job.path), job.line_of(*where), dotted(where), message)
            for where, message in loosened]


def _approvers_problems(job: Job) -> list[JobError]:
    path = job.approvers_path
    if path is None:
        return []
    from runner.signatures import read_allowed_signers  # cryptography: only with approvers

    try:
        read_allowed_signers(path)
    except JobError as error:
        return [error]
    return []


def approval_rules(path: Path) -> Run:
    """The job's run settings that say who approves its plans (``FIXED``, and ``confirm``),
    read without the rest of the job: approving or showing a plan needs no provider
    credentials from the environment. JobErrors when they are not valid."""
    file = str(path)
    try:
        text = _read_job_file(file).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise JobErrors([JobError(file, None, None, "not UTF-8 text")]) from None
    tree, lines, _ = read_document(text, file)
    errors = _from_the_environment(tree, lines, file)
    found = tree.get("run")
    run: dict[str, Any] = found if isinstance(found, dict) else {}
    try:
        rules = Run.model_validate({k: run[k] for k in (*FIXED, "confirm") if k in run})
    except ValidationError as exc:
        errors += [JobError(file, line_at(lines, ("run", *location)),
                            dotted(("run", *location)), message)
                   for location, message in explain(exc, Run)]
    if errors:
        raise JobErrors(errors)
    return rules


def _read_job_file(file: str) -> bytes:
    """The job file's bytes: a regular file (``sources.read_regular``: a FIFO or a device
    would never end), and no larger than ``JOB_FILE_BYTES_MAX``."""
    def refused(message: str) -> JobErrors:
        return JobErrors([JobError(file, None, None, message)])

    try:
        return read_regular(Path(file), JOB_FILE_BYTES_MAX,
                            f"larger than {JOB_FILE_BYTES_MAX:,} bytes; put rows in a CSV or "
                            "JSON Lines file (items.from)")
    except FileUnreadable as exc:
        raise refused("no such job file" if str(exc) == "no such file" else str(exc)) from None
    except ValueError as exc:  # a NUL in the path
        raise refused(f"cannot read: {exc}") from None
    except OSError as exc:
        raise refused(f"cannot read: {exc.strerror}") from None


def iter_items(job: Job, duplicates: bool = True,
               needed: Callable[[int], bool] | None = None) -> Iterator[ItemResult]:
    """Each row of ``job`` as a ``ValidItem`` or an ``InvalidItem``, in file order.
    ``duplicates`` False: an external_id given twice is not looked for (the rows were
    validated in full before; a run makes its items again by row number). ``needed``: a
    row whose number it refuses, when the row is read, is passed over unmade (a run makes
    again only the items of its pages)."""
    template = ItemTemplate(job)
    if template.problems:
        raise JobErrors(_at_job(job, template.problems))
    source = _rows(job)
    model = job.item_model
    seen = Seen()
    rows = 0
    try:
        for number, values in source:
            rows += 1
            if isinstance(values, JobError):
                yield InvalidItem(source.name, number, None, [values])
                continue
            if needed is not None and not needed(number):
                continue
            external_id, item, problems = template.render(values)
            if template.over_time:  # as slow on every row: the job's templates are at fault
                raise JobErrors([JobError(source.name, number, dotted(location), message)
                                 for location, message in problems])
            typed = None
            try:
                typed = model.model_validate(item)
            except ValidationError as exc:
                # A field that failed to render is also missing; say it once.
                failed = [location for location, _ in problems]
                problems += [(location, message) for location, message in explain(exc, model)
                             if not any(location[: len(f)] == f for f in failed)]
            errors = [JobError(source.name, number, dotted(loc), msg) for loc, msg in problems]
            allowed = allow_duplicate(values.get(ALLOW_DUPLICATE))
            if isinstance(allowed, str):
                errors.append(JobError(source.name, number, ALLOW_DUPLICATE, allowed))
            if external_id is not None and duplicates:
                earlier = seen.first(external_id, number)
                if earlier != number:
                    errors.append(JobError(source.name, number, "external_id",
                                           f"{external_id!r} is also the external_id of "
                                           f"{source.unit} {earlier}"))
            if errors or typed is None or external_id is None:
                yield InvalidItem(source.name, number, external_id, errors)
            else:
                yield ValidItem(source.name, number, external_id, typed, values,
                                allowed is True)
        if rows == 0 and needed is None and not job.items.allow_empty:
            # A payroll of nobody is a file saved wrong, not a month paid.
            raise JobErrors([JobError(source.name, None, None,
                                      f"no {source.unit}s: nothing to pay; set "
                                      f"items.allow_empty: true where an empty batch is "
                                      f"expected")])
    except OSError as exc:
        raise JobErrors([JobError(source.name, None, None,
                                  f"cannot read: {exc.strerror}")]) from None
    except FileUnreadable as exc:
        raise JobErrors([JobError(source.name, None, None, str(exc))]) from None
    finally:
        seen.close()


ALLOW_DUPLICATE = "allow_duplicate"
_YES, _NO = ("true", "yes", "y", "1"), ("false", "no", "n", "0", "")


def allow_duplicate(value: Any) -> bool | str:
    """A row's ``allow_duplicate`` cell as a yes or a no (empty, or no column: no); the
    problem, when it is neither."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in _YES or text in _NO:
        return text in _YES
    return f"{str(value)[:20]!r} is not a yes or a no (true, yes, 1; false, no, 0 or empty)"


def check_job(path: str | Path, environ: Mapping[str, str] | None = None) -> list[JobError]:
    """Every problem of the job at ``path`` and of all its rows; empty when all is well."""
    try:
        job = load_job(path, environ)
        return [error for result in iter_items(job) if isinstance(result, InvalidItem)
                for error in result.errors]
    except JobErrors as exc:
        return exc.errors


def _lone_surrogates(tree: Any, file: str, lines: Lines) -> list[JobError]:
    """An error for each text (or key) of ``tree`` holding a lone surrogate: a YAML
    ``"\\ud800"`` escape, or an environment variable's bytes that are not UTF-8."""
    errors = []
    waiting: list[tuple[Location, Any]] = [((), tree)]
    while waiting:
        location, value = waiting.pop()
        texts = [value] if isinstance(value, str) else \
            [str(k) for k in value] if isinstance(value, dict) else []
        for text in texts:
            lone = LONE_SURROGATE.search(text)
            if lone is not None:
                errors.append(JobError(file, line_at(lines, location), ascii(dotted(
                    location))[1:-1] or None, f"holds a lone surrogate (U+{ord(lone[0]):04X}): "
                    "half of a UTF-16 pair (a \\u escape, or bytes that are not UTF-8 in the "
                    "environment), not a character"))
                break
        if isinstance(value, dict):
            waiting += [((*location, key), child) for key, child in value.items()]
        elif isinstance(value, list):
            waiting += [((*location, i), child) for i, child in enumerate(value)]
    return sorted(errors, key=lambda error: error.row or 0)


# ---------------------------------------------------------------- once-for-all-rows checks
def _items_problems(job: Job) -> list[JobError]:
    template = ItemTemplate(job)
    errors = _at_job(job, template.problems) + _shape_problems(job, template)
    rows_path = job.rows_path
    if rows_path is None:
        return errors
    where = (str(job.path), job.line_of("items", "from"), "items.from")
    refused = rows_file_problem(rows_path, *job.rows_root)
    if refused is not None:
        return [*errors, JobError(*where, refused)]
    if job.rows_format != "csv":
        return errors
    try:
        header = _rows(job).header()  # type: ignore[union-attr]
    except (OSError, FileUnreadable) as exc:
        why = exc.strerror if isinstance(exc, OSError) else exc
        return [*errors, JobError(*where, f"cannot read {rows_path}: {why}")]
    if isinstance(header, JobError):
        return [*errors, header]
    for column, location in template.columns:
        if column not in header:
            hint = suggestion(column, header) or f"; its columns are: {_listed(header)}"
            errors.append(JobError(str(job.path), job.line_of(*location), dotted(location),
                                   f"column {column!r} is not in {rows_path}{hint}"))
    return errors


_PLACEHOLDER = "\x00rendered per row\x00"


def _shape_problems(job: Job, template: ItemTemplate) -> list[JobError]:
    """The item problems that do not depend on the row: unknown keys, missing fields, and
    wrong values written as constants. Found once here rather than on every row."""

    def placeholders(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: placeholders(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placeholders(v) for v in value]
        return _PLACEHOLDER if isinstance(value, str) and ("{{" in value or "{%" in value) \
            else value

    # Defaults that failed to render are still Jinja text: placeholders too.
    sample = placeholders(merge(template.defaults, job.items.template))
    problems = text_problems(sample, skip=_PLACEHOLDER)
    try:
        job.item_model.model_validate(sample)
    except ValidationError as exc:
        def static(error: ErrorDetails) -> bool:
            return error["type"] in ("missing", "extra_forbidden") or not _holds_placeholder(
                error["input"])

        told = [location for location, _ in problems]
        problems += [(location, _item_message(location, message))
                     for location, message in explain(exc, job.item_model, keep=static)
                     if location not in told]
    return _at_job(job, [(_origin(job, location), message) for location, message in problems])


def _item_message(location: Location, message: str) -> str:
    if message == "required, but missing":
        return "required, but missing from items.template and defaults"
    if message.startswith("unknown key") and location[-1] in _IDENTITY_KEYS:
        return "not given here: runner derives it from items.external_id"
    return message


# The fields that carry an item's identity; items.external_id fills them.
_IDENTITY_KEYS = {"external_id", "external_reference", "merchant_external_id"}


def _holds_placeholder(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_placeholder(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_placeholder(v) for v in value)
    return bool(value == _PLACEHOLDER)


def _origin(job: Job, location: Location) -> Location:
    """Where in the job file an item's field comes from: the template, else defaults."""
    for root, tree in ((("items", "template"), job.items.template), (("defaults",), job.defaults)):
        if _has(tree, location):
            return (*root, *location)
    return ("items", "template", *location)


def _has(tree: Any, location: Location) -> bool:
    for part in location:
        if isinstance(tree, dict) and part in tree:
            tree = tree[part]
        elif isinstance(tree, list) and isinstance(part, int) and part < len(tree):
            tree = tree[part]
        else:
            return False
    return True


# ---------------------------------------------------------------- helpers
def _rows(job: Job) -> RowSource:
    path = job.rows_path
    if path is None:
        rows = job.items.rows or []
        lines = [job.line_of("items", "rows", i) or 0 for i in range(len(rows))]
        return InlineRows(rows, lines, str(job.path))
    return RowsFile(path, job.rows_format or "csv", job.items.delimiter, *job.rows_root)


def _listed(names: list[str], most: int = 20) -> str:
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most:,} more"


def _at_job(job: Job, problems: list[tuple[Location, str]]) -> list[JobError]:
    return [JobError(str(job.path), job.line_of(*location), dotted(location), message)
            for location, message in problems]


def _job_message(location: Location, message: str, tree: Any) -> str:
    """Plainer words for the two keys every job file starts with."""
    value = tree.get(location[0]) if isinstance(tree, dict) and location else None
    if location == ("version",):
        if "missing" in message:
            return "required, but missing; a job file starts with `version: 1`"
        return f"unsupported version {value!r}; this runner reads version 1"
    if location == ("kind",) and isinstance(value, str):
        names = list(kinds())
        return (f"unknown kind {value!r} (the kinds are: {', '.join(names)})"
                f"{suggestion(value, names)}")
    return message
