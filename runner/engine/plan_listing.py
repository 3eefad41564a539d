"""A plan file as its approver reads it (`runner show PLAN`, and the terminal before `runner
apply` asks): the people it pays, from the file itself, never a plan made again.

Each item to pay is listed with its beneficiary's name, the payer, the account (masked to its
last four, as the file holds it), the amount sent and received with their currencies, the fee
and the rate; then the totals per currency, the items the plan does not pay (and why), the
balances as they were when it was made, the payee checks' findings, and its signatures (who
signed, and whether each holds). The same listing in three forms: ``lines`` (text),
``as_json``, ``as_csv`` (one line per item to pay). A column is one entry of ``COLUMNS``
(text) and of ``CSV_COLUMNS``; a section, a few lines of ``lines``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from runner.engine.funds import Need
from runner.engine.plan_text import LABELS, need_line
from runner.lifecycle import LISTED, TO_PAY
from runner.payees.checks import plan_file_lines
from runner.summary.amounts import money_text, number_text, plain_amount
from runner.summary.items_csv import csv_cell

Item = dict[str, Any]  # one item of a plan file, as the file holds it


@dataclass(frozen=True)
class SignatureView:
    """One signature of a plan file as checked against the job's approvers: its role
    (``plan`` or ``approve``), who signed (the approvers file's principal, or "" when the key
    is not in it), the key's fingerprint, when, and ``verdict`` ("valid", or why not)."""

    role: str
    principal: str
    key: str
    signed_at: str
    verdict: str
    reason: str = ""  # a denial's
    passkey: bool = False  # signed with a passkey (else an SSH key)

    @property
    def valid(self) -> bool:
        return self.verdict == "valid"


@dataclass(frozen=True)
class Listing:
    """What `runner show` lists of one plan file."""

    content: dict[str, Any]
    digest: str
    signatures: list[SignatureView] = field(default_factory=list)
    approvals: str = ""  # where the approvals stand ("2 of 2 approvals"), "" without four eyes

    @property
    def to_pay(self) -> list[Item]:
        return [i for i in self.content["items"] if i["action"] in TO_PAY]

    @property
    def skipped(self) -> list[Item]:
        return [i for i in self.content["items"] if i["action"] not in TO_PAY]


def _decimal(item: Item, key: str) -> Decimal | None:
    value = item.get(key)
    return None if value is None else Decimal(str(value))


def _name(i: Item) -> str:
    ref = i.get("ref") or i["external_id"]
    return i["external_id"] if ref == i["external_id"] else f"{i['external_id']} as {ref}"


def _fee(i: Item) -> str:
    fee = _decimal(i, "fee")
    return "not quoted" if fee is None else number_text(fee, i.get("currency", ""))


def _rate(i: Item) -> str:
    return str(i.get("quoted_rate") or i.get("rate") or "")


Cell = Callable[[Item], str]
# The table of items to pay: (header, cell, right-aligned).
COLUMNS: list[tuple[str, Cell, bool]] = [
    ("row", lambda i: str(i["row"]), True),
    ("external_id", _name, False),
    ("beneficiary", lambda i: str(i.get("beneficiary") or ""), False),
    ("payer", lambda i: str(i.get("payer") or ""), False),
    ("account", lambda i: str(i.get("account") or ""), False),
    ("sent", lambda i: money_text(_decimal(i, "amount"), i.get("currency", "")), True),
    ("fee", _fee, True),
    ("rate", _rate, True),
    ("received", lambda i: money_text(_decimal(i, "received"),
                                      i.get("received_currency", "")), True),
]
# The CSV: plain machine values (amounts unformatted, at their currency's decimals).
CSV_COLUMNS: list[tuple[str, Cell]] = [
    ("row", lambda i: str(i["row"])),
    ("external_id", lambda i: str(i["external_id"])),
    ("ref", lambda i: str(i.get("ref") or "")),
    ("action", lambda i: str(i["action"])),
    ("beneficiary", lambda i: csv_cell(i.get("beneficiary"))),
    ("payer", lambda i: csv_cell(i.get("payer"))),
    ("account", lambda i: csv_cell(i.get("account"))),
    ("sent_currency", lambda i: str(i.get("currency") or "")),
    ("sent_amount", lambda i: plain_amount(_decimal(i, "amount"), i.get("currency", ""))),
    ("fee", lambda i: plain_amount(_decimal(i, "fee"), i.get("currency", ""))),
    ("rate", lambda i: str(i.get("rate") or "")),
    ("quoted_rate", lambda i: str(i.get("quoted_rate") or "")),
    ("received_currency", lambda i: str(i.get("received_currency") or "")),
    ("received_amount", lambda i: plain_amount(_decimal(i, "received"),
                                               i.get("received_currency", ""))),
    ("payee_check", lambda i: str((i.get("payee") or {}).get("result") or "")),
]
JSON_KEYS = ("row", "external_id", "ref", "action", "beneficiary", "payer", "account",
             "currency", "amount", "fee", "rate", "quoted_rate", "rate_name",
             "received_currency", "received", "balance", "payee")


def totals(items: list[Item]) -> list[dict[str, Any]]:
    """Per currency sent: how many items, the amounts, the fees (those known) and how many
    fees are not quoted; per currency received, the amounts received."""
    sent: dict[str, dict[str, Any]] = {}
    received: dict[str, dict[str, Any]] = {}
    for i in items:
        amount, currency = _decimal(i, "amount"), i.get("currency")
        if amount is not None and currency:
            t = sent.setdefault(currency, {"currency": currency, "items": 0,
                                           "amount": Decimal(0), "fee": Decimal(0),
                                           "fees_not_quoted": 0})
            t["items"] += 1
            t["amount"] += amount
            fee = _decimal(i, "fee")
            t["fee"] += fee or 0
            t["fees_not_quoted"] += fee is None
        got, into = _decimal(i, "received"), i.get("received_currency")
        if got is not None and into:
            r = received.setdefault(into, {"currency": into, "items": 0,
                                           "amount": Decimal(0)})
            r["items"] += 1
            r["amount"] += got
    return [*({**t, "kind": "sent"} for _, t in sorted(sent.items())),
            *({**r, "kind": "received"} for _, r in sorted(received.items()))]


def lines(listing: Listing) -> list[str]:
    """The listing as text."""
    c = listing.content
    job, planner = c["job"], c["planned_by"]
    priced = "with quotations" if c.get("quoted") else \
        "amounts received estimated from the published rates (--quote asks quotations)"
    out = [f"plan {c['id']} of {job['name']} ({job['kind']}, {job['file']})",
           f"digest sha256:{listing.digest}",
           f"planned by {planner['user']} on {planner['host']} at {c['planned_at']}, "
           f"{priced}; valid until {c['valid_until']}",
           f"state: {c['state']}", _rules_line(c)]
    to_pay = listing.to_pay
    out.append(f"to pay: {len(to_pay)} item(s)")
    out += ["  " + row for row in _table(to_pay)]
    out += _totals_lines(to_pay)
    skipped = listing.skipped
    if skipped:
        out.append(f"not paid by this plan: {len(skipped)} item(s)")
        for action in LABELS:
            group = [i for i in skipped if i["action"] == action]
            if group:
                out.append(f"  {LABELS[action]}: {len(group)}")
                out += [f"    {_skipped(i)}" for i in group if action in LISTED]
    out += plan_file_lines(c)
    if c.get("balances"):
        out.append("balances, when the plan was made:")
        out += [f"  {need_line(_need(b))}" for b in c["balances"]]
    out += _signature_lines(listing)
    return out


def _table(items: list[Item]) -> list[str]:
    if not items:
        return []
    cells = [[cell(i) for _, cell, _ in COLUMNS] for i in items]
    widths = [max(len(h), *(len(r[n]) for r in cells)) for n, (h, _, _) in enumerate(COLUMNS)]

    def row(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if right else v.ljust(w) for v, w, (_, _, right)
                         in zip(values, widths, COLUMNS, strict=True)).rstrip()

    return [row([h for h, _, _ in COLUMNS]), *(row(r) for r in cells)]


def _totals_lines(items: list[Item]) -> list[str]:
    found = totals(items)
    if not found:
        return []
    out = ["totals:"]
    for t in found:
        cur = t["currency"]
        if t["kind"] == "received":
            out.append(f"  received {money_text(t['amount'], cur)} ({t['items']} item(s))")
            continue
        fees = f"fees {money_text(t['fee'], cur)}"
        if t["fees_not_quoted"] == t["items"]:
            fees = "fees not quoted"
        elif t["fees_not_quoted"]:
            fees += f" and {t['fees_not_quoted']} not quoted"
        whole = "" if t["fees_not_quoted"] else \
            f": {money_text(t['amount'] + t['fee'], cur)} in all"
        out.append(f"  {cur}: {t['items']} item(s), sent {money_text(t['amount'], cur)}, "
                   f"{fees}{whole}")
    return out


def _skipped(i: Item) -> str:
    name = f"{i['external_id']} (row {i['row']})" if i["external_id"] else f"row {i['row']}"
    who = i.get("beneficiary")
    name += f", {who}" if who else ""
    return f"{name}: {i['why']}" if i.get("why") else name


def _need(b: dict[str, Any]) -> Need:
    fee, estimated = b.get("fee"), b.get("estimated_fee")
    return Need(b["balance"], b["currency"], int(b["items"]), Decimal(b["amount"]),
                Decimal(fee) if fee is not None else Decimal(0), fee is not None,
                Decimal(b["available"]), Decimal(estimated or 0),
                int(b.get("fee_samples") or 0))


def _rules_line(c: dict[str, Any]) -> str:
    """What the plan was made under, and the files it covers (their bytes must be the same
    when it is applied)."""
    job = c["job"]
    rules = f"four eyes, {c.get('approvals') or 1} approval(s)" if c.get("four_eyes") else \
        "no four eyes"
    if c.get("policy"):
        rules += f", the executor's policy account {c['policy']}"
    files = ["the job file"] + (["the rows file"] if job.get("rows_file") else []) + \
        (["the approvers file"] if job.get("approvers_sha256") else [])
    templates = job.get("templates")
    names = [str(t.get("name")) for t in templates if isinstance(t, dict)] \
        if isinstance(templates, list) else []
    if names:
        files.append(f"summary template(s) {', '.join(names)}")
    return f"rules: {rules}; covers {', '.join(files)}"


def _signature_lines(listing: Listing) -> list[str]:
    if not listing.signatures:
        return ["signatures: none (an unsigned plan)"]
    out = [f"signatures{': ' + listing.approvals if listing.approvals else ''}:"]
    out += [f"  {s.role}: {s.principal or 'a key not trusted'} "
            f"({'passkey ' if s.passkey else ''}{s.key}) at {s.signed_at}: {s.verdict}"
            f"{' (' + s.reason + ')' if s.reason else ''}" for s in listing.signatures]
    return out


def as_json(listing: Listing) -> dict[str, Any]:
    c = listing.content
    return {"plan": {"id": c["id"], "digest": f"sha256:{listing.digest}", "job": c["job"],
                     "state": c["state"], "planned_by": c["planned_by"],
                     "planned_at": c["planned_at"], "valid_until": c["valid_until"],
                     "quoted": c.get("quoted"), "retry_failed": c.get("retry_failed")},
            "items": [{k: i.get(k) for k in JSON_KEYS} for i in listing.to_pay],
            "totals": [{k: str(v) if isinstance(v, Decimal) else v for k, v in t.items()}
                       for t in totals(listing.to_pay)],
            "skipped": [{k: i.get(k) for k in ("row", "external_id", "action", "why",
                                               "beneficiary")} for i in listing.skipped],
            "balances": c.get("balances", []),
            "payee_checks": c.get("payee_checks"),
            "approvals": listing.approvals,
            "signatures": [_signature(s) for s in listing.signatures]}


def _signature(s: SignatureView) -> dict[str, Any]:
    shown = asdict(s)
    if not s.reason:
        del shown["reason"]
    if not s.passkey:
        del shown["passkey"]
    return shown


def as_csv(listing: Listing) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([name for name, _ in CSV_COLUMNS])
    for i in listing.to_pay:
        writer.writerow([cell(i) for _, cell in CSV_COLUMNS])
    return out.getvalue()
