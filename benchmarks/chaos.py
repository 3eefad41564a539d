"""Chaos: kill the runner with SIGKILL at random moments while the sandbox injects faults,
run it again to the end, then prove that nobody was paid twice.

A sandbox serves in a thread of this process (the runner itself is a subprocess, so the two
do not share a GIL) with latency and random faults on every endpoint group: 500 before the
work, 503 + Retry-After, and answers lost after the work was done and committed. A batch of
remittances (rows like jobs/payroll.csv, spread over the same payers) is run with
``runner run JOB --yes --state S``; each of the first ``--kills`` runs is killed with SIGKILL
a random time after its first POST reached the sandbox. Then the faults are switched off
(``DELETE /_admin/faults``; ``--faults-in-final-runs`` keeps them) and the job is run until
it exits 0 (at most ``--final-runs`` times). The verdicts:

- items paid once: every item has exactly one confirmed transaction at the sandbox (its
  transactions grouped by the item's external_id, ``-rN`` attempts folded in), none two;
- balance: the sandbox's EUR balance moved by exactly the sum of ``sent_amount + fee`` over
  the confirmed transactions, all of them COMPLETED, nothing left pending;
- state agrees: the state database says settled for every item, with the transaction id of
  the one confirmed transaction.

    .venv/bin/python benchmarks/chaos.py --items 200 --kills 10 --lost-rate 0.05 --seed 7

With ``--workers N`` (N > 1, or ``--postgresql``) N workers run the job at once on one state,
each killed and restarted at random, and the database is restarted once in the middle
(benchmarks/chaos_workers.py); ``--state postgresql://...`` names the database, else a
throwaway PostgreSQL cluster of its own is made (benchmarks/pg_cluster.py).

    .venv/bin/python benchmarks/chaos.py --workers 4 --items 200 --kills 10 --seed 7

Exits 1 when a verdict fails. The suite's bounded versions are tests/test_chaos.py, which
imports this module (its only home: nothing here imports from tests/).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import requests
import simplejson

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runner.sandbox import RunningSandbox, SandboxConfig, start_in_thread  # noqa: E402
from runner.state import open_state  # noqa: E402

KEY, SECRET = "chaos-key", "chaos-secret"
JOB_NAME = "chaos-2026-11"
PAYROLL_CSV = ROOT / "jobs" / "payroll.csv"
COLUMNS = ["employee_id", "first_name", "last_name", "payer_id", "currency", "net_pay",
           "msisdn", "bank_account", "swift"]
ATTEMPT_SUFFIX = re.compile(r"-r\d+$")
# The calls of the engine's phases. Not the catalogue reads of validation (``discovery``):
# the engine does not retry those, so one fault there ends the run before it sends anything
# (``--groups '*'`` shows it).
MONEY_GROUPS = ("balances", "quotations", "create", "confirm", "lookups")

JOB = """\
# Written by benchmarks/{script}: {items} remittances like jobs/payroll.yaml.
version: 1
name: {name}
kind: remittance
provider:
  base_url: {base_url}
  auth: hmac
  api_key: {key}
  api_secret: {secret}
  timeout: {timeout}
vars:
  period: "2026-11"
defaults:
  mode: SOURCE_AMOUNT
  source: {{country_iso_code: FRA, currency: EUR}}
  purpose_of_remittance: SALARY
  sender:
    firstname: Ada
    lastname: Acme
    address: 1 rue de la Paix
    city: Paris
    country_iso_code: FRA
    date_of_birth: "1971-04-12"
items:
  from: {csv_name}
  external_id: "{name}-{{{{ row.employee_id }}}}"
  template:
    payer_id: "{{{{ row.payer_id }}}}"
    source: {{amount: "{{{{ row.net_pay }}}}"}}
    destination: {{currency: "{{{{ row.currency }}}}"}}
    credit_party_identifier:
      msisdn: "{{{{ row.msisdn }}}}"
      bank_account_number: "{{{{ row.bank_account }}}}"
      swift_bic_code: "{{{{ row.swift }}}}"
    beneficiary:
      firstname: "{{{{ row.first_name }}}}"
      lastname: "{{{{ row.last_name }}}}"
      bank_account_holder_name: "{{{{ row.first_name }}}} {{{{ row.last_name }}}}"
run:
  concurrency: {concurrency}
  confirm: true
  wait_for_final: {wait_for_final}
  retry: {{attempts: {attempts}, max_wait: {max_wait}}}
  on_invalid: stop
"""


# ---------------------------------------------------------------- the batch
def payroll_rows() -> list[dict[str, str]]:
    with PAYROLL_CSV.open(encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


def write_batch(folder: Path, base_url: str, items: int, *, name: str = JOB_NAME,
                concurrency: int = 4, timeout: str = "1s", wait_for_final: str = "3s",
                attempts: int = 6, max_wait: str = "0.2s", script: str = "chaos.py"
                ) -> tuple[Path, list[str]]:
    """Write ``<name>.yaml`` and ``<name>.csv`` in ``folder`` (``write_job``). Returns the job
    file and the items' external_ids, in row order."""
    job = write_job(folder, base_url, items, name=name, concurrency=concurrency,
                    timeout=timeout, wait_for_final=wait_for_final, attempts=attempts,
                    max_wait=max_wait, script=script)
    return job, [f"{name}-{employee_id(n)}" for n in range(items)]


def employee_id(n: int) -> str:
    return f"E{n + 1:06d}"


def write_job(folder: Path, base_url: str, items: int, *, name: str = JOB_NAME,
              concurrency: int = 4, timeout: str = "1s", wait_for_final: str = "3s",
              attempts: int = 6, max_wait: str = "0.2s", script: str = "chaos.py") -> Path:
    """Write ``<name>.yaml`` and ``<name>.csv`` in ``folder``: ``items`` rows cycling over the
    rows of jobs/payroll.csv (same payers, currencies, identifiers and amounts), each with an
    employee_id of its own, streamed to the file (a million rows are never in memory)."""
    template = payroll_rows()
    csv_name = f"{name}.csv"
    with (folder / csv_name).open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, COLUMNS)
        writer.writeheader()
        for n in range(items):
            row = dict(template[n % len(template)])
            row["employee_id"] = employee_id(n)
            writer.writerow(row)
    job = folder / f"{name}.yaml"
    job.write_text(JOB.format(script=script, items=items, name=name, base_url=base_url,
                              key=KEY, secret=SECRET, timeout=timeout, csv_name=csv_name,
                              concurrency=concurrency, wait_for_final=wait_for_final,
                              attempts=attempts, max_wait=max_wait), encoding="utf-8")
    return job


def runner_command(job: Path, state: Path | str, *extra: str) -> list[str]:
    """``runner run`` of a batch of ``write_job``'s: its rows repeat the payments of
    jobs/payroll.csv on purpose, each under an employee_id of its own, so the run pays
    possible duplicates (``--allow-duplicates``) rather than hold all but the first 60."""
    return [sys.executable, "-m", "runner", "run", str(job), "--yes", "--allow-duplicates",
            "--state", str(state), *extra]


def runner_env() -> dict[str, str]:
    """The environment of a runner subprocess: the package of this checkout first, so that
    the runner run is the one this process imported."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


# ---------------------------------------------------------------- talking to the sandbox
def _session(auth: Any = None) -> requests.Session:
    session = requests.Session()
    session.trust_env = False
    session.auth = auth
    return session


def admin(base_url: str, method: str, path: str, body: Any = None) -> Any:
    with _session() as s:
        data = None if body is None else simplejson.dumps(body)
        r = s.request(method, f"{base_url}/_admin{path}", data=data, timeout=10,
                      headers={"Content-Type": "application/json"} if data else {})
        r.raise_for_status()
        return simplejson.loads(r.content, use_decimal=True)


def balance(base_url: str, currency: str = "EUR", tries: int = 20) -> dict[str, Decimal]:
    """The money transfer balance of ``currency`` as GET /v1/money-transfer/balances shows it
    (retried: faults may be on)."""
    with _session((KEY, SECRET)) as s:
        for n in range(tries):
            try:
                r = s.get(f"{base_url}/v1/money-transfer/balances", timeout=5)
            except requests.ConnectionError:
                r = None
            if r is not None and r.status_code == 200:
                for b in simplejson.loads(r.content, use_decimal=True):
                    if b["currency"] == currency:
                        return {k: Decimal(b[k]) for k in ("balance", "available_balance")}
                raise LookupError(f"no {currency} balance at the sandbox")
            time.sleep(0.05 * (n + 1))
    raise RuntimeError("the sandbox did not answer GET /balances")


def post_count(sandbox: RunningSandbox) -> int:
    return int(sandbox.state.faults.counts["POST"])


def fault_rules(latency_ms: float, lost_rate: float, error_rate: float,
                unavailable_rate: float, groups: Iterable[str] = ("*",)
                ) -> dict[str, dict[str, float]]:
    """Latency on every call; the rates on ``groups`` (``*``: all of them)."""
    rule = {"latency_ms": latency_ms, "lost_rate": lost_rate, "error_rate": error_rate,
            "unavailable_rate": unavailable_rate}
    rules: dict[str, dict[str, float]] = {"*": {"latency_ms": latency_ms}}
    for group in groups:
        rules[group] = dict(rule)
    return rules


# ---------------------------------------------------------------- runs
@dataclass
class Kill:
    """When to kill a run: ``delay`` seconds after the sandbox received its ``posts``-th POST
    (counted from the run's start)."""

    posts: int
    delay: float

    def __str__(self) -> str:
        return f"{self.delay:.3f} s after its POST #{self.posts}"


@dataclass
class RunRecord:
    number: int
    faults: bool
    seconds: float
    exit_code: int | None  # None: killed by us
    posts: int  # POSTs the sandbox received while it ran
    kill: Kill | None = None  # planned
    hung: bool = False
    log: Path | None = None
    worker: int | None = None  # which of several workers (chaos_workers.py)

    def describe(self) -> str:
        faults = "faults on " if self.faults else "faults off"
        if self.worker is not None:
            faults = f"{faults.strip()}, worker {self.worker}"
        if self.exit_code is None:
            how = ("KILLED (hung: no end within the bound)" if self.hung
                   else f"SIGKILL {self.kill or '(the fault phase ended)'}")
        elif self.kill is not None:
            how = f"exit {self.exit_code} before its kill (planned {self.kill})"
        else:
            how = f"exit {self.exit_code}"
        return (f"run {self.number:2d} [{faults}] {how}; {self.seconds:.2f} s, "
                f"{self.posts} POST(s){' while it ran' if self.worker else ''}")


def run_once(number: int, command: list[str], cwd: Path, sandbox: RunningSandbox, *,
             faults: bool, kill: Kill | None, bound: float = 120.0,
             log: Path | None = None) -> RunRecord:
    """Run the runner once, its output in ``log``; SIGKILL it as ``kill`` says (a run that
    ends first is left to end), or when it outlives ``bound`` seconds (hung)."""
    posts0 = post_count(sandbox)
    started = time.monotonic()
    hung = killed = False
    log = log or cwd / f"run-{number:02d}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=runner_env())
        try:
            reached: float | None = None  # when the run's kill.posts-th POST arrived
            while proc.poll() is None:
                now = time.monotonic()
                if kill is not None:
                    if reached is None and post_count(sandbox) - posts0 >= kill.posts:
                        reached = now
                    if reached is not None and now - reached >= kill.delay:
                        proc.send_signal(signal.SIGKILL)
                        killed = True
                        break
                if now - started > bound:
                    proc.send_signal(signal.SIGKILL)
                    killed = hung = True
                    break
                time.sleep(0.001)
        finally:
            if proc.poll() is None and not killed:
                proc.kill()
                killed = True
            code = proc.wait()
    return RunRecord(number, faults, time.monotonic() - started, None if killed else code,
                     post_count(sandbox) - posts0, kill, hung, log)


def posts_left(sandbox: RunningSandbox, external_ids: list[str]) -> int:
    """POSTs the batch still needs, from what the sandbox holds: 3 for an item with nothing
    yet (quotation, transaction, confirm), 0 for a confirmed one."""
    store = sandbox.state.store
    with store.lock:
        quoted = {ATTEMPT_SUFFIX.sub("", q["external_id"])
                  for q in store.tables["quotations"].values()}
        created = {ATTEMPT_SUFFIX.sub("", t["external_id"]): False
                   for t in store.tables["transactions"].values()}
        for tid, t in store.tables["transactions"].items():
            if store.meta["transactions"][tid].get("confirmed"):
                created[ATTEMPT_SUFFIX.sub("", t["external_id"])] = True
    return sum(0 if created.get(e) else 1 if e in created else 2 if e in quoted else 3
               for e in external_ids)


def plan_kill(rng: random.Random, settings: Settings, left: int, kills_left: int
              ) -> Kill | None:
    """``time``: a random delay in the kill window after the run's first POST. ``progress``:
    after a random one of the next POSTs (drawn so that the kills still to come find work
    left: on average ``left / (kills_left + 1)``), plus a random 0-20 ms, so the kill falls
    anywhere around a call: before its intent is committed, in flight, before its outcome is
    committed. None when nothing is left to send."""
    if settings.kill_at == "time":
        return Kill(1, rng.uniform(*settings.kill_window))
    if left <= 0:
        return None
    upper = max(1, min(left, -(-2 * left // (kills_left + 1))))
    return Kill(rng.randint(1, upper), rng.uniform(0.0, 0.02))


# ---------------------------------------------------------------- verdicts
@dataclass
class Verdict:
    name: str
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


def _sample(values: Iterable[str], n: int = 5) -> str:
    values = list(values)
    more = f" (+{len(values) - n} more)" if len(values) > n else ""
    return ", ".join(values[:n]) + more


def ledger(sandbox: RunningSandbox) -> dict[str, list[tuple[dict[str, Any], bool]]]:
    """The sandbox's transactions grouped by item: external_id without its ``-rN`` suffix
    -> [(transaction, confirmed)]."""
    store = sandbox.state.store
    with store.lock:
        rows = [(dict(t), bool(store.meta["transactions"][tid].get("confirmed")))
                for tid, t in store.tables["transactions"].items()]
    groups: dict[str, list[tuple[dict[str, Any], bool]]] = defaultdict(list)
    for txn, confirmed in rows:
        groups[ATTEMPT_SUFFIX.sub("", txn["external_id"])].append((txn, confirmed))
    return groups


def wait_final(sandbox: RunningSandbox, bound: float = 10.0) -> None:
    """Until every confirmed transaction has reached a final status (or ``bound``)."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        pending = [t for group in ledger(sandbox).values() for t, confirmed in group
                   if confirmed and str(t["status_class"]) not in ("3", "4", "7", "8", "9")]
        if not pending:
            return
        time.sleep(0.02)


def verify(sandbox: RunningSandbox, state_path: Path | str, job_name: str,
           external_ids: list[str],
           start: dict[str, Decimal]) -> list[Verdict]:
    groups = ledger(sandbox)
    confirmed = {e: [t for t, c in groups.get(e, []) if c] for e in external_ids}
    once = [e for e, ts in confirmed.items() if len(ts) == 1]
    twice = [f"{e} x{len(ts)}" for e, ts in confirmed.items() if len(ts) > 1]
    never = [e for e, ts in confirmed.items() if not ts]
    strays = sorted(set(groups) - set(external_ids))
    detail = f"{len(once)}/{len(external_ids)}"
    if twice:
        detail += f"; PAID MORE THAN ONCE: {_sample(twice)}"
    if never:
        detail += f"; never confirmed: {_sample(never)}"
    if strays:
        detail += f"; transactions of no item: {_sample(strays)}"
    extra = sum(len(groups.get(e, [])) - 1 for e in external_ids if groups.get(e))
    if extra:
        detail += f" ({extra} unconfirmed extra attempt(s) at the sandbox)"
    verdicts = [Verdict("items paid once", len(once) == len(external_ids) and not strays,
                        detail)]

    paid = [t for ts in confirmed.values() for t in ts]
    not_completed = [t["external_id"] for t in paid if str(t["status_class"]) != "7"]
    currencies = {t["sent_amount"]["currency"] for t in paid}
    cost = sum((Decimal(t["sent_amount"]["amount"]) + Decimal(t["fee"]["amount"])
                for t in paid), Decimal(0))
    end = balance(sandbox.url)
    moved = start["balance"] - end["balance"]
    pending = end["balance"] - end["available_balance"]
    ok = moved == cost and not not_completed and pending == 0 and currencies <= {"EUR"}
    detail = (f"moved by exactly {moved:,} EUR" if moved == cost
              else f"moved by {moved:,} EUR, but the confirmed transactions cost {cost:,}")
    detail += f" (= sum of sent_amount + fee over {len(paid)} confirmed transaction(s))"
    if pending:
        detail += f"; {pending:,} EUR still pending"
    if not_completed:
        detail += f"; not COMPLETED: {_sample(not_completed)}"
    if currencies - {"EUR"}:
        detail += f"; other currencies: {sorted(currencies - {'EUR'})}"
    verdicts.append(Verdict("balance", ok, detail))

    with open_state(state_path) as store:
        records = {r.external_id: r for r in store.items(job_name)}
        attempts = Counter(a.result or "left open" for e in records
                           for a in store.attempts(e))
    wrong = []
    for e in external_ids:
        r = records.get(e)
        ts = confirmed[e]
        if r is None:
            wrong.append(f"{e}: not in the state database")
        elif r.outcome != "settled" or r.step != "final" or r.intent:
            wrong.append(f"{e}: {r.step}/{r.outcome}/intent={r.intent}")
        elif len(ts) != 1 or r.transaction_id != ts[0]["id"]:
            wrong.append(f"{e}: transaction {r.transaction_id} in the state, "
                         f"{[t['id'] for t in ts]} confirmed at the sandbox")
    calls = ", ".join(f"{n} {k}" for k, n in sorted(attempts.items()))
    detail = (f"{len(external_ids) - len(wrong)}/{len(external_ids)} settled with the "
              f"sandbox's transaction id; POST attempts recorded: {calls}")
    if wrong:
        detail += f"; disagree: {_sample(wrong)}"
    verdicts.append(Verdict("state agrees", not wrong and len(records) == len(external_ids),
                            detail))
    return verdicts


# ---------------------------------------------------------------- the whole experiment
@dataclass
class Settings:
    items: int = 40
    kills: int = 4
    lost_rate: float = 0.05
    error_rate: float = 0.03
    unavailable_rate: float = 0.03
    latency_ms: float = 3.0
    seed: int = 20261121
    kill_at: str = "time"  # time: kill_window after a run's first POST | progress
    kill_window: tuple[float, float] = (0.05, 0.6)  # seconds after a run's first POST
    final_runs: int = 3
    faults_in_final_runs: bool = False
    concurrency: int = 4
    quotation_ttl: float | None = None
    groups: tuple[str, ...] = MONEY_GROUPS
    run_bound: float = 120.0  # a run taking longer is killed and counted as hung
    workers: int = 1  # more: chaos_workers.py, N runs of the job at once on one state
    restart_delay: tuple[float, float] = (0.3, 1.2)  # seconds before an ended worker restarts

    def describe(self) -> str:
        when = (f"{self.kill_window[0]}-{self.kill_window[1]} s after a run's first POST"
                if self.kill_at == "time" else "after a random one of the POSTs left")
        return (f"seed {self.seed}: {self.items} items, {self.kills} kills {when}; "
                f"faults on {','.join(self.groups)}: latency {self.latency_ms} ms, lost "
                f"{self.lost_rate}, error {self.error_rate}, unavailable "
                f"{self.unavailable_rate}; concurrency {self.concurrency}"
                + (f"; quotation TTL {self.quotation_ttl} s" if self.quotation_ttl else "")
                + (f"; {self.workers} workers" if self.workers > 1 else ""))


@dataclass
class Result:
    settings: Settings
    runs: list[RunRecord] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. the database's restart
    ended_well: bool | None = None  # several workers: each exited 0 in the last round

    @property
    def ok(self) -> bool:
        ended = (self.ended_well if self.ended_well is not None
                 else bool(self.runs) and self.runs[-1].exit_code == 0)
        return bool(self.verdicts) and all(v.ok for v in self.verdicts) and ended

    @property
    def kills(self) -> int:
        """Runs killed while they were working with faults on."""
        return sum(1 for r in self.runs if r.faults and r.exit_code is None and not r.hung)

    def report(self) -> str:
        lines = [f"chaos {self.settings.describe()}"]
        lines += [f"  {r.describe()}" for r in self.runs]
        lines += [f"  {n}" for n in self.notes]
        last = self.runs[-1] if self.runs else None
        lines.append(f"  {self.kills} kill(s) with faults on; {len(self.runs)} run(s); "
                     f"exit codes {[r.exit_code for r in self.runs]} (None = killed); "
                     f"last run exit {last.exit_code if last else '-'}; "
                     f"{self.seconds:.1f} s in all")
        lines += [f"  {v}" for v in self.verdicts]
        lines.append(f"  verdict: {'PASS' if self.ok else 'FAIL'} (seed {self.settings.seed})")
        return "\n".join(lines)


def sandbox_config(settings: Settings) -> SandboxConfig:
    """The sandbox of the experiment: no delay before a transaction completes, its faults
    drawn from the seed."""
    config = SandboxConfig(port=0, api_key=KEY, api_secret=SECRET, submit_delay=0.0,
                           complete_delay=0.0, tick=0.01, fault_seed=settings.seed)
    if settings.quotation_ttl is not None:
        config.quotation_ttl = settings.quotation_ttl
    return config


def run_chaos(settings: Settings, folder: Path, echo: Callable[[str], None] | None = None,
              *, state: Path | str | None = None,
              restart_db: Callable[[], None] | None = None) -> Result:
    """The experiment in ``folder``: one run at a time on a SQLite file there, as it always
    was; with several workers, a ``state`` of their own or a database to restart
    (``restart_db``), chaos_workers.py's."""
    if settings.workers > 1 or state is not None or restart_db is not None:
        from chaos_workers import run_workers

        return run_workers(settings, folder, state or folder / "state.sqlite", restart_db,
                           echo)
    began = time.monotonic()
    result = Result(settings)
    say = echo or (lambda line: None)
    rng = random.Random(settings.seed)
    with start_in_thread(sandbox_config(settings)) as sandbox:
        job, ids = write_batch(folder, sandbox.url, settings.items,
                               concurrency=settings.concurrency)
        state = folder / "state.sqlite"
        command = runner_command(job, state)
        start = balance(sandbox.url)
        admin(sandbox.url, "POST", "/faults", {"rules": fault_rules(
            settings.latency_ms, settings.lost_rate, settings.error_rate,
            settings.unavailable_rate, settings.groups)})
        for n in range(settings.kills):
            kill = plan_kill(rng, settings, posts_left(sandbox, ids), settings.kills - n)
            if kill is None:
                say("nothing left to send: no more kills")
                break
            record = run_once(len(result.runs) + 1, command, folder, sandbox, faults=True,
                              kill=kill, bound=settings.run_bound)
            result.runs.append(record)
            say(record.describe())
        if not settings.faults_in_final_runs:
            admin(sandbox.url, "DELETE", "/faults")
        for _ in range(settings.final_runs):
            record = run_once(len(result.runs) + 1, command, folder, sandbox,
                              faults=settings.faults_in_final_runs, kill=None,
                              bound=settings.run_bound)
            result.runs.append(record)
            say(record.describe())
            if record.exit_code == 0:
                break
        admin(sandbox.url, "DELETE", "/faults")
        wait_final(sandbox)
        result.verdicts = verify(sandbox, state, JOB_NAME, ids, start)
    result.seconds = time.monotonic() - began
    return result


def main() -> None:
    d = Settings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--lost-rate", type=float, default=d.lost_rate)
    parser.add_argument("--error-rate", type=float, default=d.error_rate)
    parser.add_argument("--unavailable-rate", type=float, default=d.unavailable_rate)
    parser.add_argument("--latency-ms", type=float, default=d.latency_ms)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, shown")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--kill-at", choices=["progress", "time"], default="progress",
                        help="progress (default): kill after a random one of the POSTs still "
                             "to send, plus 0-20 ms; time: a random delay in --kill-window "
                             "after the run's first POST")
    parser.add_argument("--kill-window", type=float, nargs=2, default=[0.05, 0.6],
                        metavar=("MIN", "MAX"),
                        help="seconds after a run's first POST, with --kill-at time "
                             "(default: 0.05 0.6)")
    parser.add_argument("--final-runs", type=int, default=d.final_runs,
                        help="runs to the end after the kills, at most")
    parser.add_argument("--faults-in-final-runs", action="store_true",
                        help="keep the faults on for the runs after the kills")
    parser.add_argument("--quotation-ttl", type=float, default=None,
                        help="seconds; short values make -rN attempts happen")
    parser.add_argument("--groups", default=",".join(MONEY_GROUPS),
                        help="endpoint groups the fault rates apply to, comma separated, or * "
                             f"(default {','.join(MONEY_GROUPS)}); latency applies to all")
    parser.add_argument("--keep", type=Path, default=None,
                        help="work in this folder and keep it (job, CSV, state, run logs)")
    parser.add_argument("--workers", type=int, default=1,
                        help="runs of the job at once on one state, each killed and restarted "
                             "at random (default 1: one run at a time, as always)")
    parser.add_argument("--state", default=None,
                        help="the workers' state (postgresql://USER@HOST:PORT/DB, or a file); "
                             "default with --workers > 1: a throwaway PostgreSQL cluster of "
                             "its own, restarted once mid-run")
    parser.add_argument("--postgresql", action="store_true",
                        help="a throwaway PostgreSQL cluster even with --workers 1")
    parser.add_argument("--db-restart", default=None, metavar="COMMAND",
                        help="with --state: a shell command that restarts that database "
                             "(e.g. pg_ctl ... -m immediate restart), run once mid-run")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    settings = Settings(items=args.items, kills=args.kills, lost_rate=args.lost_rate,
                        error_rate=args.error_rate, unavailable_rate=args.unavailable_rate,
                        latency_ms=args.latency_ms, seed=seed,
                        kill_at=args.kill_at,
                        kill_window=(args.kill_window[0], args.kill_window[1]),
                        final_runs=args.final_runs,
                        faults_in_final_runs=args.faults_in_final_runs,
                        concurrency=args.concurrency, quotation_ttl=args.quotation_ttl,
                        groups=tuple(g.strip() for g in args.groups.split(",")),
                        workers=args.workers)
    print(f"chaos {settings.describe()}", flush=True)
    from chaos_workers import state_for

    with state_for(args.state, args.workers > 1 or args.postgresql, args.db_restart,
                   echo=print) as (state, restart_db), \
            contextlib.ExitStack() as stack:
        folder = args.keep or Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="chaos-")))
        folder.mkdir(parents=True, exist_ok=True)
        result = run_chaos(settings, folder, echo=lambda s: print(f"  {s}", flush=True),
                           state=state, restart_db=restart_db)
    print("\n".join(result.report().splitlines()[1 + len(result.runs) + len(result.notes):]))
    sys.exit(0 if result.ok else 1)


if __name__ == "__main__":
    main()
