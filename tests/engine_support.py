"""Helpers for the engine tests: remittance jobs against a loopback sandbox, runs of the
library and of the command line, and what the provider (not the runner) says was paid.

Every count of money moved is read at the sandbox: its transactions, which of them were
confirmed (its ``meta``), its balances over HTTP, and its request log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from conftest import KEY, SECRET, Admin, Api, body

from runner.cli import main
from runner.connect import connect
from runner.engine.batch import RunResult, run_job
from runner.engine.options import Clock, RunHooks, RunOptions
from runner.job import load_job
from runner.sandbox import RunningSandbox
from runner.state import CLAIM_TTL, ItemRecord, open_state

JOB = """\
version: 1
name: {name}
kind: remittance
provider:
  base_url: {url}
  auth: hmac
  api_key: {key}
  api_secret: {secret}
  timeout: {timeout}
defaults:
  payer_id: 1
  mode: SOURCE_AMOUNT
  source: {{country_iso_code: FRA, currency: EUR}}
  purpose_of_remittance: SALARY
  sender: {{firstname: Ada, lastname: Acme}}
items:
  from: {rows_file}
  external_id: "{prefix}-{{{{ row.id }}}}"
  template:
    payer_id: "{{{{ row.payer }}}}"
    source: {{amount: "{{{{ row.amount }}}}"}}
    destination: {{currency: KES}}
    credit_party_identifier: {{msisdn: "{{{{ row.msisdn }}}}"}}
    beneficiary: {{firstname: Jo, lastname: Doe}}
run:
  concurrency: {concurrency}
  confirm: {confirm}
  wait_for_final: 2s
  retry: {{attempts: 3, max_wait: {max_wait}}}
"""
HEADER = "id,payer,amount,msisdn\n"
# Three ordinary items of payer 1 (fee 1.50 each): cost 11.50 + 21.50 + 31.50 = 64.50 EUR.
ROWS = ("a,1,10.00,+254700000001\n"
        "b,1,20.00,+254700000002\n"
        "c,1,30.00,+254700000003\n")
MT = "/v1/money-transfer"


def tiny_sleep(seconds: float) -> None:
    """What the engine's waits become in tests: a token real pause (the poll loop spins on
    the sandbox's tick), never the seconds asked."""
    time.sleep(min(seconds, 0.01))


def write_job(folder: Path, sandbox: RunningSandbox | str, rows: str = ROWS, *,
              name: str = "pay-2026-11", prefix: str = "pay", confirm: bool = True,
              timeout: str = "60s", concurrency: int = 2, max_wait: str = "1s",
              file: str = "job.yaml",
              rows_file: str = "rows.csv") -> Path:
    """A remittance job for ``sandbox`` (or a base URL) over ``rows``; its path."""
    (folder / rows_file).write_text(HEADER + rows, encoding="utf-8")
    path = folder / file
    url = sandbox if isinstance(sandbox, str) else sandbox.url
    path.write_text(JOB.format(name=name, url=url, key=KEY, secret=SECRET,
                               timeout=timeout, prefix=prefix, rows_file=rows_file,
                               confirm=str(confirm).lower(), concurrency=concurrency,
                               max_wait=max_wait),
                    encoding="utf-8")
    return path


HOOKS = ("ask", "on_progress", "on_phase", "on_batch")


def run(job_path: Path, state: Path | str, **options: Any) -> RunResult:
    """One run of the library, as `runner run` makes it (the state opened once, the job's
    lease held by the worker that runs it), with the waits shrunk. ``options``: those of
    ``RunOptions``, ``RunHooks``, ``clock``, ``sleep`` and ``stop`` (``Clock``), and the
    worker's ``claim_ttl``."""
    job = load_job(job_path)
    clock = Clock(now=options.pop("clock", time.time), sleep=options.pop("sleep", tiny_sleep),
                  stop=options.pop("stop", None) or threading.Event())
    hooks = RunHooks(**{name: options.pop(name) for name in HOOKS if name in options})
    claim_ttl = options.pop("claim_ttl", CLAIM_TTL)
    folder = state.parent if isinstance(state, Path) else job_path.parent
    with open_state(state) as opened, opened.join(job.name, claim_ttl) as worker, \
            connect(job, folder) as provider:
        return run_job(job, provider, worker, RunOptions(**options), hooks, clock)


def cli(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exc_info
    assert "Traceback" not in result.output
    return result


def out_lines(result: Result) -> list[str]:
    return result.stdout.splitlines()


def err_lines(result: Result) -> list[str]:
    """stderr without the log lines (timestamped) of the run."""
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (INFO|WARNING|ERROR|DEBUG) ")
    return [line for line in result.stderr.splitlines() if not stamp.match(line)]


# ---------------------------------------------------------------- what the provider holds
def base_of(external_id: str) -> str:
    return re.sub(r"-r\d+$", "", external_id)


def transactions(sandbox: RunningSandbox) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    store = sandbox.state.store
    with store.lock:
        return [(t["external_id"], dict(t), dict(store.meta["transactions"][rid]))
                for rid, t in sorted(store.tables["transactions"].items())]


def created(sandbox: RunningSandbox) -> Counter[str]:
    """Transactions at the provider per item (an item's -rN attempts count for it)."""
    return Counter(base_of(e) for e, _, _ in transactions(sandbox))


def confirmed(sandbox: RunningSandbox) -> Counter[str]:
    """Confirmed transactions at the provider per item: exactly once means 1 each."""
    return Counter(base_of(e) for e, _, m in transactions(sandbox) if m.get("confirmed"))


def confirmed_ids(sandbox: RunningSandbox) -> list[str]:
    return sorted(e for e, _, m in transactions(sandbox) if m.get("confirmed"))


def quotations(sandbox: RunningSandbox) -> list[str]:
    store = sandbox.state.store
    with store.lock:
        return sorted(q["external_id"] for q in store.tables["quotations"].values())


def cost_confirmed(sandbox: RunningSandbox, status_class: str | None = "7") -> Decimal:
    """sent_amount + fee of the confirmed transactions (of one status class, by default
    COMPLETED: those whose money has left the balance)."""
    return sum((t["sent_amount"]["amount"] + t["fee"]["amount"]
                for _, t, m in transactions(sandbox)
                if m.get("confirmed") and (status_class is None
                                           or str(t["status_class"]) == status_class)),
               Decimal(0))


def eur(sandbox: RunningSandbox) -> dict[str, Decimal]:
    """The EUR balance as the provider's API shows it."""
    answer = Api(sandbox.url, (KEY, SECRET)).get(MT + "/balances")
    assert answer.status_code == 200, answer.text
    found = [b for b in body(answer) if b["currency"] == "EUR"]
    return {"balance": found[0]["balance"], "available": found[0]["available_balance"]}


def posts(admin: Admin) -> Counter[str]:
    counts = admin.requests()["counts"]
    return Counter({k: v for k, v in counts.items() if k.startswith("POST")})


def row_of(record: ItemRecord) -> dict[str, Any]:
    """An item as its database row holds it (amounts as their text)."""
    return {k: str(v) if isinstance(v, Decimal) else v for k, v in asdict(record).items()}


def items(state: Path | str, job_name: str = "pay-2026-11") -> dict[str, dict[str, Any]]:
    store = open_state(state)
    try:
        return {r.external_id: row_of(r) for r in store.items(job_name)}
    finally:
        store.close()


def outcomes(state: Path | str, job_name: str = "pay-2026-11") -> dict[str, str]:
    return {e: "in_doubt" if r["intent"] else r["outcome"]
            for e, r in items(state, job_name).items()}



def sent_for(state: Path, external_id: str, created: str
             ) -> list[tuple[str, str, str | None, str | None]]:
    """(step, the external_id it was sent for, result, code) of every POST for an item;
    ``created`` names the confirm request's key (transaction, payment)."""
    store = open_state(state)
    try:
        rows = store.attempts(external_id)
    finally:
        store.close()
    out = []
    for a in rows:
        request = json.loads(a.request or "{}")
        out.append((a.step, request.get("external_id") or request.get(created),
                    a.result, a.code))
    return out


def runner_process(job: Path, state: Path, log: Path) -> subprocess.Popen[bytes]:
    """`runner run JOB --yes --state S` in a process of its own, stderr to ``log``."""
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH")) if p)
    with log.open("wb") as err:
        return subprocess.Popen([sys.executable, "-m", "runner", "run", str(job), "--yes",
                                 "--state", str(state)], env=env, cwd=job.parent,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err)
