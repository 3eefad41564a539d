"""The runs of a job in the state (``runner.state.sqlite``, and PostgreSQL through it): one
row per run (its job, start and end, exit code, counts, closing message and lines, the
digest of its summary and of its inputs, whether it was mailed), with the calls it made,
its approval and whether it still holds the job's lease; and the plan files made for the
job (``plan_files``), with the run that applies each. Written in SQL both backends share."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from runner.lifecycle import PlanAction
from runner.state.history import Approval
from runner.state.records import PlanFileRecord, RunRecord, WorkLeft
from runner.state.store import LEASE_TTL, now_iso

_RUN_COLUMNS = ("id, started_at, ended_at, exit_code, counts, message, digest, mailed, inputs, "
                "lines, allow_duplicates")


class RunBook:
    """The runs' part of a store; the store gives ``_run``, ``_rows`` and ``host``."""

    host: str

    def _run(self, *statements: Any) -> int:
        raise NotImplementedError

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    def start_run(self, job_name: str, job_file: str) -> int:
        return self._run("INSERT INTO runs (job_name, job_file, started_at, host, pid) "
                         "VALUES (?, ?, ?, ?, ?)",
                         [job_name, job_file, now_iso(), self.host, os.getpid()])

    def note_checks(self, run_id: int, invalid: int, refused: int) -> None:
        counts = {k: n for k, n in ((PlanAction.INVALID, invalid), (PlanAction.REFUSED, refused))
                  if n}
        self._run("UPDATE runs SET counts = ? WHERE id = ?", [json.dumps(counts), run_id])

    def end_run(self, run_id: int, exit_code: int, counts: Mapping[str, int],
                message: str = "", digest: str | None = None) -> None:
        self._run("UPDATE runs SET ended_at = ?, exit_code = ?, counts = ?, message = ?, "
                  "digest = ? WHERE id = ?",
                  [now_iso(), exit_code, json.dumps(dict(counts)), message or None, digest,
                   run_id])

    def note_exit(self, run_id: int, exit_code: int) -> None:
        self._run("UPDATE runs SET exit_code = ? WHERE id = ?", [exit_code, run_id])

    def note_inputs(self, run_id: int, digest: str) -> None:
        self._run("UPDATE runs SET inputs = ? WHERE id = ?", [digest, run_id])

    def note_lines(self, run_id: int, lines: Sequence[str]) -> None:
        self._run("UPDATE runs SET lines = ? WHERE id = ?", [json.dumps(list(lines)), run_id])

    def work_left(self, job_name: str) -> WorkLeft:
        rows = self._rows("SELECT count(*) AS all_items, coalesce(sum(CASE WHEN step <> "
                          "'final' AND outcome <> 'conflict' THEN 1 ELSE 0 END), 0) AS "
                          "open_items, max(updated_at) AS last_update FROM items WHERE "
                          "job_name = ?", [job_name])
        row = rows[0]
        return WorkLeft(int(row["all_items"]), int(row["open_items"]), row["last_update"])

    def note_duplicates_allowed(self, run_id: int) -> None:
        self._run("UPDATE runs SET allow_duplicates = 1 WHERE id = ?", [run_id])

    def note_mailed(self, run_id: int) -> None:
        self._run("UPDATE runs SET mailed = 1 WHERE id = ?", [run_id])

    def runs(self, job_name: str) -> list[RunRecord]:
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE job_name = ? ORDER BY id",
                          [job_name])
        calls: dict[int, dict[str, int]] = {}
        for row in self._rows("SELECT a.run_id, a.step, count(*) AS n FROM attempts a JOIN "
                              "runs r ON r.id = a.run_id WHERE r.job_name = ? "
                              "GROUP BY a.run_id, a.step", [job_name]):
            calls.setdefault(row["run_id"], {})[row["step"]] = row["n"]
        approvals = {r["run_id"]: r for r in self._rows(
            "SELECT a.* FROM approvals a JOIN runs r ON r.id = a.run_id WHERE r.job_name = ?",
            [job_name])}
        lease = self._lease(job_name)
        return [self._run_record(job_name, r, lease, approvals.get(r["id"]),
                                 calls.get(r["id"], {})) for r in rows]

    def answered_at(self, job_name: str, step: str) -> dict[str, str]:
        rows = self._rows("SELECT a.external_id, max(a.finished_at) AS at FROM attempts a "
                          "JOIN items i ON i.external_id = a.external_id WHERE "
                          "i.job_name = ? AND a.step = ? AND a.result = 'ok' "
                          "GROUP BY a.external_id", [job_name, step])
        return {r["external_id"]: r["at"] for r in rows}

    def note_approval(self, run_id: int, approval: Approval) -> None:
        columns = approval.columns()
        self._run(f"INSERT INTO approvals (run_id, {', '.join(columns)}) VALUES "
                  f"(?, {', '.join('?' * len(columns))}) ON CONFLICT (run_id) DO UPDATE SET "
                  + ", ".join(f"{n} = excluded.{n}" for n in columns),
                  [run_id, *columns.values()])

    def reopen_run(self, run_id: int) -> bool:
        """Run ``run_id`` again (a plan applied again resumes the run that applied it): its
        end cleared, this process its own; False, and nothing changed, while a live process
        holds a lease for it."""
        alive = time.time() - LEASE_TTL
        return bool(self._rows(
            "UPDATE runs SET ended_at = NULL, exit_code = NULL, host = ?, pid = ? WHERE id = ? "
            "AND NOT EXISTS (SELECT 1 FROM leases WHERE run_id = ? AND heartbeat_at > ?) "
            "AND NOT EXISTS (SELECT 1 FROM worker_leases WHERE run_id = ? AND heartbeat_at > ?)"
            " RETURNING id", [self.host, os.getpid(), run_id, run_id, alive, run_id, alive]))

    def note_plan_file(self, plan: PlanFileRecord) -> None:
        """Keep a plan file as it was made (once: a plan id already kept is left as it is)."""
        self._run("INSERT INTO plan_files (id, job_name, digest, content, made_at, run_id) "
                  "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                  [plan.id, plan.job_name, plan.digest, plan.content, plan.made_at,
                   plan.run_id])

    def plan_file(self, plan_id: str) -> PlanFileRecord | None:
        rows = self._rows("SELECT * FROM plan_files WHERE id = ?", [plan_id])
        return PlanFileRecord(**rows[0]) if rows else None

    def note_plan_applied(self, plan_id: str, run_id: int) -> None:
        self._run("UPDATE plan_files SET run_id = ? WHERE id = ?", [run_id, plan_id])

    def latest_run(self, job_name: str) -> RunRecord | None:
        lease = self._lease(job_name)
        rows = self._rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE job_name = ? "
                          "ORDER BY ended_at IS NULL, ended_at DESC, id DESC", [job_name])
        chosen = next((r for r in rows if lease and r["id"] == lease["run_id"]),
                      rows[0] if rows else None)
        if chosen is None:
            return None
        approved = self._rows("SELECT * FROM approvals WHERE run_id = ?", [chosen["id"]])
        return self._run_record(job_name, chosen, lease, approved[0] if approved else None)

    def _lease(self, job_name: str) -> dict[str, Any] | None:
        leases = self._rows("SELECT run_id, heartbeat_at FROM leases WHERE job_name = ?",
                            [job_name])
        return leases[0] if leases else None

    @staticmethod
    def _run_record(job_name: str, row: dict[str, Any], lease: dict[str, Any] | None,
                    approved: dict[str, Any] | None, calls: dict[str, int] | None = None
                    ) -> RunRecord:
        state: Any = "ended"
        if row["ended_at"] is None:
            live = lease is not None and lease["run_id"] == row["id"] and \
                time.time() - lease["heartbeat_at"] < LEASE_TTL
            state = "running" if live else "interrupted"
        approval = Approval.from_row(approved) if approved else None
        return RunRecord(row["id"], job_name, row["started_at"], row["ended_at"],
                         row["exit_code"], state, json.loads(row["counts"] or "{}"),
                         row["message"] or "", approval, row["digest"], bool(row["mailed"]),
                         calls or {}, row["inputs"],
                         None if row["lines"] is None else tuple(json.loads(row["lines"])),
                         bool(row["allow_duplicates"]))

