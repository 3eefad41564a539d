"""Helpers for the plan file tests: a job paying people by name, four eyes with SSH keys made
by ssh-keygen (and their allowed-signers file), and the fields of a plan file, each edited."""

from __future__ import annotations

import re
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

from engine_support import write_job

from runner.sandbox import RunningSandbox

SSH_KEYGEN = "/usr/bin/ssh-keygen"

# Three people, and a row that is invalid (skipped: run.on_invalid: skip).
PEOPLE = ("id,payer,amount,msisdn,first,last\n"
          "a,1,10.00,+254700000001,Amina,Otieno\n"
          "b,1,20.00,+254700000002,Brian,Kamau\n"
          "c,2,30.00,+221770000003,Coumba,Ndiaye\n"
          "d,1,abc,+254700000004,Daniel,Mwangi\n")


def people_job(folder: Path, sandbox: RunningSandbox, **run: str) -> Path:
    """A remittance job paying PEOPLE by name, KES through payer 1 and XOF through payer 2,
    with more ``run:`` settings."""
    job = write_job(folder, sandbox, max_wait="10ms")  # the command line's waits are real
    (folder / "rows.csv").write_text(PEOPLE)
    text = job.read_text().replace(
        "beneficiary: {firstname: Jo, lastname: Doe}",
        'beneficiary: {firstname: "{{ row.first }}", lastname: "{{ row.last }}"}').replace(
        "destination: {currency: KES}",
        "destination: {currency: \"{{ 'KES' if row.payer == '1' else 'XOF' }}\"}").replace(
        "sender: {firstname: Ada, lastname: Acme}",
        "sender: {firstname: Ada, lastname: Acme, country_iso_code: FRA}")
    job.write_text(text.replace("run:\n", "run:\n  on_invalid: skip\n"))
    return with_run(job, **run)


def with_run(job: Path, **values: str) -> Path:
    """The job with more ``run:`` settings."""
    more = "".join(f"  {k}: {v}\n" for k, v in values.items())
    job.write_text(job.read_text().replace("run:\n", "run:\n" + more))
    return job


def make_key(folder: Path, name: str, kind: str = "ed25519", passphrase: str = "") -> Path:
    """A new SSH key pair made by ssh-keygen, as a person makes theirs; the private key."""
    key = folder / name
    size = ["-b", "2048"] if kind == "rsa" else []  # the smallest ssh-keygen makes: quicker
    subprocess.run([SSH_KEYGEN, "-q", "-t", kind, *size, "-N", passphrase, "-C",
                    f"{name}@example.com", "-f", str(key)], check=True, timeout=60)
    return key


def allowed_signers(path: Path, *keys: Path) -> Path:
    """An allowed-signers file naming each key's owner (``NAME@example.com``)."""
    path.write_text("# who may plan and approve payments\n" + "".join(
        f"{key.name}@example.com {' '.join(key.with_suffix('.pub').read_text().split()[:2])}\n"
        for key in keys))
    return path


def four_eyes(job: Path, approvers: Path, **values: str) -> Path:
    """The job under four eyes, ``approvers`` its allowed-signers file."""
    return with_run(job, four_eyes="true", approvers=str(approvers), **values)


TOP = ("job.name", "job.kind", "job.file", "job.sha256", "job.rows_file", "job.rows_sha256",
       "job.approvers_sha256", "job.passkeys_sha256", "rules_fired", "state",
       "planned_by.user", "planned_by.host", "planned_at",
       "valid_until", "quoted", "retry_failed", "include_unchanged", "allow_duplicates",
       "max_rate_change", "four_eyes", "approvals", "policy", "job.templates[0].name",
       "job.templates[0].file", "job.templates[0].sha256", "counts.new", "counts.invalid",
       "stops", "shortfall")
ITEM = ("external_id", "row", "action", "ref", "lineage", "step", "changed", "why",
        "fingerprint", "balance", "beneficiary", "payer", "account", "account_key",
        "currency", "amount",
        "fee", "rate", "quoted_rate", "rate_name", "received_currency", "received")
BALANCE = ("balance", "currency", "items", "amount", "fee", "estimated_fee", "fee_samples",
           "fee_margin", "needed", "available", "short")
FIELDS = (*TOP, *(f"items[1].{f}" for f in ITEM), *(f"balances[0].{f}" for f in BALANCE))


def leaves(value: Any, where: str = "") -> set[str]:
    """The path of every value in a plan (the second item and the first balance standing
    for all)."""
    if isinstance(value, dict):
        return set().union(*(leaves(v, f"{where}.{k}" if where else k)
                             for k, v in value.items()))
    if isinstance(value, list) and value:
        at = 1 if where == "items" else 0
        return leaves(value[at], f"{where}[{at}]")
    return {where}


def edited(value: Any) -> Any:
    """Another value of the same kind (an amount one hundred more, a name with a letter)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if value is None:
        return "1"
    if isinstance(value, list):  # (a list of rules: one more)
        return [*value, {"rule": "edited", "why": "", "approvals": 1, "group": None}]
    try:
        return str(Decimal(value) + 100)
    except ArithmeticError:
        return value + "x"


def edit(content: dict[str, Any], path: str) -> tuple[Any, Any]:
    """Edit the value at ``path`` (``items[1].amount``) in place; (was, now)."""
    *parents, last = re.findall(r"[^.\[\]]+", path)
    holder: Any = content
    for part in parents:
        holder = holder[int(part)] if part.isdigit() else holder[part]
    was = holder[last]
    holder[last] = edited(was)
    return was, holder[last]
