"""What the state keeps of how an item and a run came to be, as typed records: a failed
item's retries (the lineage of external_ids it went out under, ``derived_ref``), an earlier
attempt found paid after all (``EarlierPaid``), and who planned and approved a run
(``Approval``, for `runner apply`, with its ``Signer`` s)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any


def derived_ref(external_id: str, lineage: int = 1, attempt: int = 1) -> str:
    """The external_id sent for an item's ``lineage`` (``-fN``: a failed item paid again) and
    ``attempt`` (``-rN``: after a quotation expired); deterministic, and never reused."""
    ref = external_id if lineage == 1 else f"{external_id}-f{lineage}"
    return ref if attempt == 1 else f"{ref}-r{attempt}"


@dataclass(frozen=True, slots=True)
class RetryRecord:
    """A failed item sent again: the attempt that failed (``previous_ref``, with what the
    provider said of it) and the new one (``ref``, of ``lineage``); ``changed`` when the
    job's row differs from the one that failed."""

    external_id: str
    job_name: str
    lineage: int
    ref: str
    previous_ref: str
    previous_status: str | None
    previous_code: str | None
    previous_message: str | None
    changed: bool
    run_id: int | None = None
    at: str | None = None


@dataclass(frozen=True, slots=True)
class EarlierPaid:
    """An earlier attempt of an item sent again (``ref``: E when the item now goes out as
    E-f2) that the provider shows paid after all: its status, and what it sent (amounts as
    text, in ``currency``)."""

    ref: str
    status: str
    currency: str
    amount: str
    fee: str | None = None
    found_at: str = ""


@dataclass(frozen=True, slots=True)
class Signer:
    """One signature of a plan file, as verified: its role (``plan``: the planner's;
    ``approve``), who signed (the principal the job's approvers file names for the key),
    the key's fingerprint (``SHA256:...``) and when it was signed."""

    role: str
    principal: str
    key: str
    signed_at: str


@dataclass(frozen=True, slots=True)
class Approval:
    """Who planned a run and who approved it (``runner plan -o`` then ``runner apply``):
    names, hosts, times, and the plan file's digest (``plan_sha256``). Under four eyes the
    names are the signers' principals, with the planner's key (``planner_key``) and every
    signature (``signers``); else as given (``--approved-by``, or the user)."""

    plan_sha256: str
    planned_by: str
    planned_on: str
    planned_at: str
    approved_by: str
    applied_by: str
    applied_on: str
    approved_at: str
    planner_key: str | None = None
    signers: tuple[Signer, ...] = ()

    def columns(self) -> dict[str, Any]:
        """The approvals table's columns (``signers`` as JSON)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["signers"] = json.dumps([asdict(s) for s in self.signers]) \
            if self.signers else None
        return values

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Approval:
        values = {f.name: row[f.name] for f in fields(cls)}
        values["signers"] = tuple(Signer(**s) for s in json.loads(row["signers"] or "[]"))
        return cls(**values)
