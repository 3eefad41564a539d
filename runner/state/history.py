"""What the state keeps of how an item and a run came to be, as typed records: a failed
item's retries (the lineage of external_ids it went out under, ``derived_ref``), an earlier
attempt found paid after all (``EarlierPaid``), and who planned and approved a run
(``Approval``, for `runner apply`)."""

from __future__ import annotations

from dataclasses import dataclass


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
class Approval:
    """Who planned a run and who approved it (``runner plan -o`` then ``runner apply``):
    names as given, hosts, times, and the plan file's sha256."""

    plan_sha256: str
    planned_by: str
    planned_on: str
    planned_at: str
    approved_by: str
    applied_by: str
    applied_on: str
    approved_at: str
