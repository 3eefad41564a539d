"""The rules a batch was planned under, in the state, on either backend: once a plan of a
batch (its job name) is made or applied under four eyes, the state keeps that, with its
approvals and the allowed signers it was planned with (``runner.policy.BatchRules``), so
that no later job file of the same name takes four eyes off it or lets other keys sign."""

from __future__ import annotations

import json

from runner.policy import BatchRules
from runner.state.connector import Connector
from runner.state.records import now_iso


class BatchRulesBook:
    """The batches' rules, a part of the store (``StateStore.rules``)."""

    def __init__(self, db: Connector) -> None:
        self.db = db
        self.sql = db.sql

    def remember(self, rules: BatchRules) -> None:
        """Keep that the batch is planned under four eyes: the first plan's signers stay,
        the approvals only ever rise."""
        self.db.write(self.sql("remember_rules"), job_name=rules.job_name,
                      approvals=rules.approvals, payee_approvals=rules.payee_approvals,
                      signers=json.dumps([list(s) for s in rules.signers]),
                      plan_id=rules.plan_id, recorded_at=rules.recorded_at or now_iso())

    def of(self, job_name: str) -> BatchRules | None:
        """What the state keeps of the batch's rules; None for a batch never planned under
        four eyes."""
        rows = self.db.read(self.sql("batch_rules"), job_name=job_name)
        if not rows:
            return None
        r = rows[0]
        signers = tuple((str(w), str(t)) for w, t in json.loads(r["signers"] or "[]"))
        return BatchRules(r["job_name"], bool(r["four_eyes"]), int(r["approvals"]),
                          int(r["payee_approvals"]), signers, r["plan_id"] or "",
                          r["recorded_at"] or "")
