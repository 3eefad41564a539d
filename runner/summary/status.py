"""A batch in a few lines, for a terminal: what ``runner status`` prints, and ``runner run``
after its last call. A view of the one read model (``Summary``), like every report."""

from __future__ import annotations

from runner.exit_codes import ExitCode
from runner.lifecycle import Outcome, PlanAction, Shown
from runner.summary.amounts import money_text, number_text
from runner.summary.model import ItemLine, Summary

# The item states in the first line; refused and invalid items have lines of their own (they
# are not items of the job in the state: refused ones belong to another job, invalid ones
# were never sent).
ORDER = (Shown.SETTLED, Shown.PENDING, Shown.AWAITING_CONFIRM, Shown.FAILED, Shown.CHANGED,
         Shown.PAID_TWICE, Shown.CONFLICT, Shown.UNKNOWN, Shown.IN_DOUBT, Shown.HELD)
NEW_NAME = ("  a new batch needs a new `name` in its job file: the same name is the same batch, "
            "whose items are paid once")


# How far pending items went (``Summary.stages``), as the line under the counts says it.
STAGES = {"confirmed": "confirmed (on their way)", "created": "created (not confirmed)",
          "not started": "not started"}
# A run's exit code after a signal, and what sent it.
SIGNALS: dict[int, str] = {ExitCode.INTERRUPTED: "Ctrl-C", ExitCode.TERMINATED: "SIGTERM"}
# The exit codes of a run that something stopped (the provider, its configuration, the
# state, a bug): the run's message says what.
STOPS = (ExitCode.TRY_LATER, ExitCode.CONFIGURATION, ExitCode.STATE_UNUSABLE,
         ExitCode.INTERNAL_ERROR)


def status_lines(summary: Summary) -> list[str]:
    counts = ", ".join(f"{summary.counts[k]} {k.replace('_', ' ')}" for k in ORDER
                       if summary.counts.get(k))
    lines = [f"{summary.job}: {len(summary.items)} items: {counts or 'none yet'}"]
    lines += _stopped(summary)
    stages = summary.stages
    if summary.counts.get(Shown.PENDING) and list(stages) != ["not started"]:
        lines.append("  pending: " + ", ".join(f"{n} {STAGES[k]}" for k, n in stages.items()))
    for t in summary.totals:
        if t.senders:
            fees = f", fees {number_text(t.fees, t.currency)}" if t.fees_known else ""
            if t.twice:
                fees += f", paid twice {number_text(t.twice, t.currency)}"
            lines.append(f"  {t.currency}: sent {number_text(t.sent, t.currency)}{fees}")
    failed = [i for i in summary.failed if i.state == Shown.FAILED]
    lines += [f"  failed {i.external_id} (row {i.row}): {i.code} {i.message}" for i in failed]
    lines += _more(summary.counts.get(Shown.FAILED, 0) - len(failed), "failed")
    lines += [f"  changed {i.external_id} (row {i.row}){_who(i)}: {i.check}"
              for i in summary.left_unpaid]
    lines += _more(summary.left_unpaid.more, "changed")
    if summary.left_unpaid:
        lines.append(NEW_NAME)
    lines += [f"  in doubt {i.external_id} (row {i.row}): the {i.intent} was sent and its "
              f"answer lost; the next run looks it up before anything"
              for i in summary.needs_person if i.state == Shown.IN_DOUBT]
    lines += [f"  needs a person {i.external_id} (row {i.row}): {i.check}"
              for i in summary.needs_person
              if i.state in (Shown.CONFLICT, Shown.UNKNOWN, Shown.HELD)]
    lines += [f"  paid twice {i.external_id} (row {i.row}){_who(i)}: {i.check}"
              for i in summary.needs_person if i.state == Shown.PAID_TWICE]
    lines += _more(summary.needs_person.more, "needing a person")
    lines += [f"  payee check {i.external_id} (row {i.row}) {i.beneficiary} ({i.identifier}): "
              f"{i.payee}" for i in summary.payees if i.state != Shown.HELD]
    lines += _more(summary.payees.more, "payee findings")
    for external_id, why in summary.refused:
        lines.append(f"  refused {external_id}: {why}")
    if summary.counts.get(PlanAction.REFUSED) and not summary.refused:  # the run's list is not kept
        lines.append(f"  refused: {summary.counts[PlanAction.REFUSED]} item(s) already handled by "
                     f"another job; not paid again")
    if summary.counts.get(PlanAction.INVALID):
        lines.append(f"  invalid: {summary.counts[PlanAction.INVALID]} item(s) not sent; "
                     f"`runner validate` lists the problems")
    return lines


def _who(item: ItemLine) -> str:
    """``, Jo Doe (EUR 1,183.68 paid)``: who, and what was paid or sent."""
    text = f", {item.beneficiary}" if item.beneficiary else ""
    if item.source_amount is not None:
        done = "paid" if item.outcome == Outcome.SETTLED else "sent"
        text += f" ({money_text(item.source_amount, item.source_currency)} {done})"
    return text


def _stopped(summary: Summary) -> list[str]:
    """Why the latest run ended short of the batch's end, when it did."""
    run = summary.run
    if run is None:
        return []
    if summary.funds_stop:
        return [f"  stopped: funds short: {run.message}; run {run.id} confirmed nothing"]
    if run.exit_code in SIGNALS:
        return [f"  stopped: run {run.id} was interrupted ({SIGNALS[run.exit_code]}, exit "
                f"{run.exit_code}); the next run resumes the batch"]
    if run.state == "interrupted":
        return [f"  stopped: run {run.id} did not finish (killed, or its host stopped); the "
                f"next run resumes the batch"]
    if run.state == "ended" and run.exit_code in STOPS:
        return [f"  stopped: run {run.id} ended with exit {run.exit_code}: "
                f"{run.message or 'no reason recorded'}"]
    return []


def _more(n: int, what: str) -> list[str]:
    """The line saying how many of a list are not shown (each shows ``LIST_LIMIT``)."""
    if n <= 0:
        return []
    return [f"  ... and {n} more {what}: `runner report JOB --format csv` lists every item"]
