"""Told in time: the approvers are mailed when a plan waits for them (`runner plan -o` under
four eyes: the link to its page in the console and its totals), the planner when a plan is
approved or denied (in the console) and when it is applied (`runner apply`).

Mail goes through the job's ``summary.email`` server and sender (or, for the console, the
server its options name), to addresses only: the principals of the approvers files that
are e-mail addresses. The console's address is ``RUNNER_CONSOLE_URL``. A mail that cannot
be sent is logged and changes nothing: the plan, the approval and the payment stand.
"""

from __future__ import annotations

import logging
import os
import re
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from pathlib import Path
from typing import Any

from runner.engine.plan_listing import Listing, totals
from runner.errors import RunnerError
from runner.job.model import Email
from runner.logs import event
from runner.summary.amounts import money_text

log = logging.getLogger("runner.console")
URL_ENV = "RUNNER_CONSOLE_URL"
_ADDRESS = re.compile(r"[^@\s,\"]+@[^@\s,\"]+\.[^@\s,\"]+")


def link(plan_id: str) -> str:
    base = os.environ.get(URL_ENV, "").rstrip("/")
    return f"{base}/plans/{plan_id}" if base else ""


def addresses(principals: list[str]) -> list[str]:
    """The e-mail addresses among ``principals`` (a line may name several: a,b), once."""
    found: list[str] = []
    for text in principals:
        for one in text.split(","):
            if _ADDRESS.fullmatch(one) and one not in found:
                found.append(one)
    return found


def totals_text(content: dict[str, Any]) -> list[str]:
    to_pay = Listing(content, "", [], "").to_pay
    return [f"{t['items']} item(s), {money_text(t['amount'], t['currency'])}"
            for t in totals(to_pay) if t["kind"] == "sent"]


def send(email: Email, to: list[str], subject: str, lines: list[str], base: Path) -> bool:
    """Mail ``lines`` to ``to`` through ``email``'s server; False (logged) when it could
    not be sent."""
    from datetime import UTC, datetime

    from runner.summary.mail import send as send_message

    if not to:
        return False
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = email.from_
    message["To"] = ", ".join(to)
    message["Date"] = format_datetime(datetime.now(UTC))
    message["Message-ID"] = make_msgid(domain=email.from_.rpartition("@")[2])
    message.set_content("\n".join(lines) + "\n")
    try:
        send_message(message, email.model_copy(update={"to": to, "cc": []}), base,
                     "notice")
    except RunnerError as error:
        log.warning("not mailed to %s: %s", ", ".join(to), error, extra=event("not_mailed"))
        return False
    return True


def plan_waits(email: Email | None, content: dict[str, Any], approvers: list[str],
               base: Path) -> list[str]:
    """Mail the approvers (not the planner) that the plan waits for them; to whom."""
    planner = str(content["planned_by"].get("user", ""))
    to = [a for a in addresses(approvers) if a != planner]
    if email is None or not to:
        return []
    where = link(str(content["id"]))
    lines = [f"The plan of {content['job']['name']} made by {planner} at "
             f"{content['planned_at']} waits for your approval.", "",
             *totals_text(content), "",
             f"Review it: {where}" if where else
             f"Review it: runner show PLAN (plan {content['id']})",
             f"It may be applied until {content['valid_until']}."]
    for rule in content.get("rules_fired") or []:
        lines.append(f"Step-up rule {rule['rule']}: {rule['why']}")
    sent = send(email, to, f"{content['job']['name']}: a plan waits for your approval", lines,
                base)
    return to if sent else []


def planner_told(email: Email | None, content: dict[str, Any], what: str,
                 lines: list[str], base: Path) -> list[str]:
    """Mail the plan's planner ``what`` happened to their plan."""
    to = addresses([str(content["planned_by"].get("user", ""))])
    if email is None or not to:
        return []
    where = link(str(content["id"]))
    body = [f"Your plan of {content['job']['name']} (made at {content['planned_at']}) was "
            f"{what}.", *lines, *(["", f"It is at {where}"] if where else [])]
    sent = send(email, to, f"{content['job']['name']}: your plan was {what}", body, base)
    return to if sent else []


class Notifier:
    """The console's mail: the planner told of each approval and denial."""

    def __init__(self, email: Email, state: Any, base: Path) -> None:
        self.email, self.state, self.base = email, state, base

    def decided(self, plan_id: str, principal: str, entry: dict[str, Any]) -> None:
        import json

        record = self.state.plan_file(plan_id)
        if record is None:
            return
        content = json.loads(record.content)
        what = "denied" if entry["role"] == "deny" else "approved" \
            if entry["role"] == "approve" else "signed by its planner"
        reason = [f"Reason: {entry['reason']}"] if entry.get("reason") else []
        planner_told(self.email, content, f"{what} by {principal}", reason, self.base)
