"""A run of a batch with nothing left to do costs nothing (``runner.engine.batch``).

Each run whose inputs were validated in full keeps their digest (``inputs_digest``: the job
as loaded, its credentials left out, the rows file, the summary templates and runner's
version) and, at its end, the closing lines it printed. A later run whose inputs have the
same digest, when no item of the job is left to work on (every one final or a conflict, and
none changed since that run ended) and the summary it ended with needs no email, is that
run again: nothing is validated, no item is read, nothing is sent, and no report is
written; it prints the same lines and exits as that run's items say (``unchanged``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import runner
from runner.exit_codes import ExitCode
from runner.job import Job
from runner.lifecycle import PlanAction
from runner.state import RunRecord, StateStore, Worker
from runner.summary.model import PROBLEMS
from runner.summary.render import summary_files

CHUNK = 1 << 20


def inputs_digest(job: Job) -> str:
    """What the job's items and reports are made of, hashed (files streamed)."""
    h = hashlib.sha256(runner.__version__.encode())
    text = job.model_dump_json(by_alias=True)
    for secret in job.secrets():
        if secret:
            text = text.replace(secret, "")
    h.update(text.encode())
    for template in summary_files(job).values():  # every one the summary uses
        h.update(f"\0{template.name}\0{template.sha256}".encode())
    files = [job.rows_path] if job.rows_path is not None else []
    for path in files:
        h.update(b"\0" + str(path).encode() + b"\0")
        try:
            with path.open("rb") as f:
                while chunk := f.read(CHUNK):
                    h.update(chunk)
        except FileNotFoundError:
            h.update(b"(none)")
    return h.hexdigest()


def unchanged(job: Job, state: StateStore, digest: str) -> RunRecord | None:
    """The run to repeat, when the inputs are ``digest``'s and nothing is left to do."""
    last = state.latest_run(job.name)
    if last is None or last.state != "ended" or last.inputs != digest or \
            last.digest is None or last.lines is None or last.exit_code not in (0, 1):
        return None
    left = state.work_left(job.name)
    if left.open or (left.last_update or "") > (last.ended_at or ""):
        return None
    email = job.summary.email if job.summary else None
    mail = email is not None and (email.send == "always" or (
        email.send == "problems" and (last.exit_code != 0 or exit_code(last.counts) != 0)))
    if mail and not any(r.mailed and r.digest == last.digest for r in state.runs(job.name)):
        return None  # its summary was to be mailed and was not: a full run mails it
    return last


def repeat(job: Job, worker: Worker, last: RunRecord, digest: str,
           allow_duplicates: bool = False) -> tuple[int, int]:
    """Record, by ``worker`` (under the job's lease, as any run), a run that repeats
    ``last`` (``allow_duplicates``: asked to pay possible duplicates, as the run records);
    its id and exit code."""
    state = worker.state
    run_id = state.start_run(job.name, str(job.path))
    worker.started(run_id)
    if allow_duplicates:
        state.note_duplicates_allowed(run_id)
    state.note_checks(run_id, last.counts.get(PlanAction.INVALID, 0),
                      last.counts.get(PlanAction.REFUSED, 0))
    state.note_inputs(run_id, digest)
    state.note_lines(run_id, last.lines or ())
    code = exit_code(last.counts)
    state.end_run(run_id, code, last.counts, "", last.digest)
    return run_id, code


def exit_code(counts: Mapping[str, int]) -> int:
    return ExitCode.PROBLEMS if any(counts.get(k) for k in PROBLEMS) else ExitCode.OK
