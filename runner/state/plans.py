"""The plans the console shows, in the state, on either backend: the plan files kept
(``runner plan -o``), the approvals and denials given in `runner console` (each a passkey's
assertion, kept with its plan until `runner apply` reads it beside the file's own
signatures), what each person did there, and the state's own keys (``key``: made once, at
random, and kept)."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from runner.state.connector import Connector
from runner.state.records import PlanFileRecord, now_iso


@dataclass(frozen=True)
class ConsoleEvent:
    """What one person did in the console: when, who (principal and key), what, to which
    plan, and in a few words."""

    at: str
    principal: str
    key: str
    action: str
    plan_id: str
    detail: str


class PlanBook:
    """The console's part of the store (``StateStore.plans``)."""

    def __init__(self, db: Connector) -> None:
        self.db = db
        self.sql = db.sql

    def heads(self) -> list[PlanFileRecord]:
        """Every plan file kept, newest first, without its content ("")."""
        return [PlanFileRecord(**r) for r in self.db.read(self.sql("plan_file_heads"))]

    def head(self, plan_id: str) -> PlanFileRecord | None:
        """The plan file ``plan_id``, without its content; None when none is kept."""
        return next((h for h in self.heads() if h.id == plan_id), None)

    def add_signature(self, plan_id: str, signer: str, entry: dict[str, Any]) -> None:
        """Keep a signature entry (``runner.engine.plan_signing``'s form) given for the plan
        ``plan_id`` by the key ``signer``; a second of the same key and role is not kept."""
        self.db.write(self.sql("add_plan_signature"), plan_id=plan_id, signer=signer,
                      role=str(entry["role"]), entry=json.dumps(entry, sort_keys=True),
                      recorded_at=now_iso())

    def signatures(self, plan_id: str) -> list[dict[str, Any]]:
        """The signature entries given for the plan in the console, as they were kept."""
        return [json.loads(r["entry"]) for r in
                self.db.read(self.sql("plan_signatures"), plan_id=plan_id)]

    def note_event(self, event: ConsoleEvent) -> None:
        self.db.write(self.sql("note_console_event"), at=event.at, principal=event.principal,
                      key=event.key, action=event.action, plan_id=event.plan_id,
                      detail=event.detail)

    def events(self, limit: int = 200) -> list[ConsoleEvent]:
        """What people did in the console, newest first."""
        return [ConsoleEvent(r["at"], r["principal"] or "", r["key"] or "", r["action"],
                             r["plan_id"] or "", r["detail"] or "")
                for r in self.db.read(self.sql("console_events"), limit=limit)]

    def key(self, name: str) -> bytes:
        """The state's key ``name``: 32 random bytes, made the first time it is asked."""
        self.db.write(self.sql("make_state_key"), name=name, value=secrets.token_hex(32))
        return bytes.fromhex(self.db.read(self.sql("state_key"), name=name)[0]["value"])
