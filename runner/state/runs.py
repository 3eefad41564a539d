"""The runs of a job in the state, on either backend: one row per run (its job, start and
end, exit code, counts, closing message and lines, the digest of its summary and of its
inputs, whether it was mailed), with the calls it made, its approval and whether a live
worker still works it; and the plan files made for the job (``plan_files``), with the run
that applies each. The statements are each dialect's (``runner/state/sql``)."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

from runner.lifecycle import PlanAction
from runner.state.connector import Connector, Row
from runner.state.history import Approval
from runner.state.holders import LEASE_TTL, alive
from runner.state.leases import Leases
from runner.state.records import PlanFileRecord, RunRecord, WorkLeft, now_iso


class RunBook:
    """The runs' part of the store (see ``StateStore``'s docs of each method)."""

    def __init__(self, db: Connector, leases: Leases) -> None:
        self.db = db
        self.sql = db.sql
        self.leases = leases
        self.host = socket.gethostname()

    def start_run(self, job_name: str, job_file: str) -> int:
        return self.db.insert(self.sql("start_run"), job_name=job_name, job_file=job_file,
                              started_at=now_iso(), host=self.host, pid=os.getpid())

    def note_checks(self, run_id: int, invalid: int, refused: int) -> None:
        counts = {k: n for k, n in ((PlanAction.INVALID, invalid), (PlanAction.REFUSED, refused))
                  if n}
        self.db.write(self.sql("note_checks"), counts=json.dumps(counts), run_id=run_id)

    def end_run(self, run_id: int, exit_code: int, counts: Mapping[str, int],
                message: str = "", digest: str | None = None) -> None:
        self.db.write(self.sql("end_run"), ended_at=now_iso(), exit_code=exit_code,
                      counts=json.dumps(dict(counts)), message=message or None,
                      digest=digest, run_id=run_id)

    def stop_run(self, run_id: int, exit_code: int, message: str) -> None:
        self.db.write(self.sql("stop_run"), ended_at=now_iso(), exit_code=exit_code,
                      message=message or None, run_id=run_id)

    def note_exit(self, run_id: int, exit_code: int) -> None:
        self.db.write(self.sql("note_exit"), exit_code=exit_code, run_id=run_id)

    def note_inputs(self, run_id: int, digest: str) -> None:
        self.db.write(self.sql("note_inputs"), digest=digest, run_id=run_id)

    def note_lines(self, run_id: int, lines: Sequence[str]) -> None:
        self.db.write(self.sql("note_lines"), lines=json.dumps(list(lines)), run_id=run_id)

    def work_left(self, job_name: str) -> WorkLeft:
        row = self.db.read(self.sql("work_left"), job_name=job_name)[0]
        return WorkLeft(int(row["all_items"]), int(row["open_items"]), row["last_update"])

    def note_duplicates_allowed(self, run_id: int) -> None:
        self.db.write(self.sql("note_duplicates_allowed"), run_id=run_id)

    def note_mailed(self, run_id: int) -> None:
        self.db.write(self.sql("note_mailed"), run_id=run_id)

    def runs(self, job_name: str) -> list[RunRecord]:
        rows = self.db.read(self.sql("runs"), job_name=job_name)
        calls: dict[int, dict[str, int]] = {}
        for row in self.db.read(self.sql("run_calls"), job_name=job_name):
            calls.setdefault(row["run_id"], {})[row["step"]] = int(row["n"])
        approvals = {r["run_id"]: r
                     for r in self.db.read(self.sql("run_approvals"), job_name=job_name)}
        workers = self.leases.current(job_name)
        return [_run_record(job_name, r, workers, approvals.get(r["id"]),
                            calls.get(r["id"], {})) for r in rows]

    def note_approval(self, run_id: int, approval: Approval) -> None:
        self.db.write(self.sql("note_approval"), run_id=run_id, **approval.columns())

    def reopen_run(self, run_id: int) -> bool:
        return bool(self.db.write(self.sql("reopen_run"), host=self.host, pid=os.getpid(),
                                  run_id=run_id, alive=time.time() - LEASE_TTL))

    def note_plan_file(self, plan: PlanFileRecord) -> None:
        self.db.write(self.sql("note_plan_file"), id=plan.id, job_name=plan.job_name,
                      digest=plan.digest, content=plan.content, made_at=plan.made_at,
                      run_id=plan.run_id)

    def plan_file(self, plan_id: str) -> PlanFileRecord | None:
        rows = self.db.read(self.sql("plan_file"), id=plan_id)
        return PlanFileRecord(**rows[0]) if rows else None

    def forget_run(self, run_id: int) -> None:
        self.db.write(self.sql("forget_run"), run_id=run_id)

    def note_plan_applied(self, plan_id: str, run_id: int) -> None:
        self.db.write(self.sql("note_plan_applied"), run_id=run_id, id=plan_id)

    def latest_run(self, job_name: str) -> RunRecord | None:
        workers = self.leases.current(job_name)
        working = {w["run_id"] for w in workers}
        rows = self.db.read(self.sql("latest_runs"), job_name=job_name)
        chosen = next((r for r in rows if r["id"] in working), rows[0] if rows else None)
        if chosen is None:
            return None
        approved = self.db.read(self.sql("approval"), run_id=chosen["id"])
        return _run_record(job_name, chosen, workers, approved[0] if approved else None)


def _run_record(job_name: str, row: Row, workers: list[Row], approved: Row | None,
                calls: dict[str, int] | None = None) -> RunRecord:
    state: Any = "ended"
    if row["ended_at"] is None:
        # A worker known gone (its PID, on this host, no process's) is not waited for.
        live = any(w["run_id"] == row["id"] and alive(w, None) for w in workers)
        state = "running" if live else "interrupted"
    approval = Approval.from_row(approved) if approved else None
    return RunRecord(row["id"], job_name, row["started_at"], row["ended_at"],
                     row["exit_code"], state, json.loads(row["counts"] or "{}"),
                     row["message"] or "", approval, row["digest"], bool(row["mailed"]),
                     calls or {}, row["inputs"],
                     None if row["lines"] is None else tuple(json.loads(row["lines"])),
                     bool(row["allow_duplicates"]))
