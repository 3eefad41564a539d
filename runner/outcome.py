"""What a job's items came to, read from the state database: counts by outcome, totals per
currency, and the items a person must look at. ``runner status`` prints it, and ``runner
run`` ends with it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from runner.state import StateStore

NEEDS_PERSON = {"conflict": "the provider holds a different payment under this external_id, "
                            "or the item changed after its payment started",
                "unknown": "the outcome of a call could not be learnt: check the payment at "
                           "the provider before anything else"}


@dataclass
class Outcome:
    job_name: str
    items: list[dict[str, Any]]
    counts: Counter[str] = field(default_factory=Counter)
    sent: dict[str, Decimal] = field(default_factory=dict)
    fees: dict[str, Decimal] = field(default_factory=dict)

    @classmethod
    def load(cls, state_path: Path, job_name: str) -> Outcome:
        """The job's items as the state database at ``state_path`` holds them now."""
        store = StateStore(state_path)
        try:
            return cls.of(job_name, list(store.items(job_name)))
        finally:
            store.close()

    @classmethod
    def of(cls, job_name: str, items: list[dict[str, Any]]) -> Outcome:
        out = cls(job_name, items)
        for r in items:
            out.counts[state_of(r)] += 1
            if r["outcome"] == "settled" and r.get("source_currency"):
                c = r["source_currency"]
                out.sent[c] = out.sent.get(c, Decimal(0)) + Decimal(r["source_amount"])
                if r.get("fee") is not None:  # only where the provider shows a fee
                    out.fees[c] = out.fees.get(c, Decimal(0)) + Decimal(r["fee"])
        return out

    @property
    def in_doubt(self) -> list[dict[str, Any]]:
        return [r for r in self.items if r.get("intent")]

    @property
    def needing_person(self) -> list[dict[str, Any]]:
        return [r for r in self.items if r["outcome"] in NEEDS_PERSON and not r.get("intent")]

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.items if r["outcome"] == "failed" and not r.get("intent")]

    def lines(self) -> list[str]:
        order = ["settled", "pending", "awaiting_confirm", "failed", "conflict", "unknown",
                 "in_doubt"]
        counts = ", ".join(f"{self.counts[k]} {k.replace('_', ' ')}" for k in order
                           if self.counts[k])
        out = [f"{self.job_name}: {len(self.items)} items: {counts or 'none yet'}"]
        for c in sorted(self.sent):
            fees = f", fees {self.fees[c]:,}" if c in self.fees else ""
            out.append(f"  {c}: sent {self.sent[c]:,}{fees}")
        for r in self.failed:
            out.append(f"  failed {r['external_id']} (row {r['row']}): {r['error_code']} "
                       f"{r['error_message']}")
        for r in self.in_doubt:
            out.append(f"  in doubt {r['external_id']} (row {r['row']}): the {r['intent']} was "
                       f"sent and its answer lost; the next run looks it up before anything")
        for r in self.needing_person:
            out.append(f"  needs a person {r['external_id']} (row {r['row']}): "
                       f"{r['error_message'] or NEEDS_PERSON[r['outcome']]}")
        return out


def state_of(record: dict[str, Any]) -> str:
    return "in_doubt" if record.get("intent") else str(record["outcome"])
