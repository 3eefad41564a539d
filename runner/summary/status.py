"""A batch in a few lines, for a terminal: what ``runner status`` prints, and ``runner run``
after its last call. A view of the one read model (``Summary``), like every report."""

from __future__ import annotations

from runner.summary.amounts import number_text
from runner.summary.model import Summary

# The item states in the first line; refused and invalid items have lines of their own (they
# are not items of the job in the state: refused ones belong to another job, invalid ones
# were never sent).
ORDER = ("settled", "pending", "awaiting_confirm", "failed", "conflict", "unknown", "in_doubt")


def status_lines(summary: Summary) -> list[str]:
    counts = ", ".join(f"{summary.counts[k]} {k.replace('_', ' ')}" for k in ORDER
                       if summary.counts.get(k))
    lines = [f"{summary.job}: {len(summary.items)} items: {counts or 'none yet'}"]
    for t in summary.totals:
        if t.senders:
            fees = f", fees {number_text(t.fees, t.currency)}" if t.fees_known else ""
            lines.append(f"  {t.currency}: sent {number_text(t.sent, t.currency)}{fees}")
    failed = [i for i in summary.failed if i.state == "failed"]
    lines += [f"  failed {i.external_id} (row {i.row}): {i.code} {i.message}" for i in failed]
    lines += _more(summary.counts.get("failed", 0) - len(failed), "failed")
    lines += [f"  in doubt {i.external_id} (row {i.row}): the {i.intent} was sent and its "
              f"answer lost; the next run looks it up before anything"
              for i in summary.needs_person if i.state == "in_doubt"]
    lines += [f"  needs a person {i.external_id} (row {i.row}): {i.check}"
              for i in summary.needs_person if i.state in ("conflict", "unknown")]
    lines += _more(summary.needs_person.more, "needing a person")
    for external_id, why in summary.refused:
        lines.append(f"  refused {external_id}: {why}")
    if summary.counts.get("refused") and not summary.refused:  # the run's list is not kept
        lines.append(f"  refused: {summary.counts['refused']} item(s) already handled by "
                     f"another job; not paid again")
    if summary.counts.get("invalid"):
        lines.append(f"  invalid: {summary.counts['invalid']} item(s) not sent; "
                     f"`runner validate` lists the problems")
    return lines


def _more(n: int, what: str) -> list[str]:
    """The line saying how many of a list are not shown (each shows ``LIST_LIMIT``)."""
    if n <= 0:
        return []
    return [f"  ... and {n} more {what}: `runner report JOB --format csv` lists every item"]
