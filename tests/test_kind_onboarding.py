"""The ``onboarding`` kind end to end against a loopback sandbox: company -> merchant ->
account per row, each link made exactly once; a lost answer at each link resolved by its
lookup; a chain stopped (or killed with SIGKILL) in the middle resumed at the next link; a
name already used adopted when it is this item's, a conflict when not; the offline checks.

The judge is the sandbox: the companies, merchants and accounts it holds, and the calls it
received.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, PATIENCE, SECRET, Admin
from engine_support import cli, err_lines, items, out_lines, run

from runner.provider.onboarding import OnboardingClient
from runner.sandbox import RunningSandbox
from runner.state import open_state

NAME = "onb-2026-11"
SEEDED = {"companies": 2, "merchants": 2, "accounts": 3}  # the catalogue's Acme and Globex
JOB = """\
version: 1
name: {name}
kind: onboarding
provider: {{base_url: {url}, api_key: {key}, api_secret: {secret}, timeout: {timeout}}}
items:
  from: rows.csv
  external_id: "{external_id}"
  template:
{company}
    merchant:
      name: "{{{{ row.merchant }}}}"
      template_id: "{{{{ row.template }}}}"
      custom_data: {{shop: "{{{{ row.shop }}}}"}}
    account:
      template_id: "{{{{ row.template }}}}"
      label: "{{{{ row.label }}}}"
      payout_bank_accounts:
        - {{bic: BNPAFRPP, iban: "{{{{ row.iban }}}}", format: IBAN, label: Main}}
run:
  concurrency: {concurrency}
  retry: {{attempts: 3, max_wait: 10ms}}
"""
NEW_COMPANY = '    company: {template_id: "{{ row.template }}", name: "{{ row.company }}"}'
IBAN = "FR7630006000011234567890189"
ROWS = [("lyon", "Lyon SARL", "Lyon Shop", "TPL-STANDARD", "lyon-eur"),
        ("berlin", "Berlin GmbH", "Berlin Shop", "TPL-STANDARD", "berlin-eur"),
        ("austin", "Austin LLC", "Austin Shop", "TPL-US", "austin-usd")]
EVERY = {"shop-lyon", "shop-berlin", "shop-austin"}


@pytest.fixture
def sb(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return sandbox_factory()


def write_job(folder: Path, sb: RunningSandbox, rows: list[tuple[str, ...]] = ROWS, *,
              company: str = NEW_COMPANY, external_id: str = "shop-{{ row.shop }}",
              concurrency: int = 2, timeout: str = "60s") -> Path:
    """An onboarding job over ``rows`` of (shop, company, merchant, template, label)."""
    lines = ["shop,company,merchant,template,label,iban"] + [",".join((*r, IBAN))
                                                             for r in rows]
    (folder / "rows.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = folder / "job.yaml"
    path.write_text(JOB.format(name=NAME, url=sb.url, key=KEY, secret=SECRET, company=company,
                               external_id=external_id, concurrency=concurrency,
                               timeout=timeout), encoding="utf-8")
    return path


def onboarded(sb: RunningSandbox) -> dict[str, list[dict[str, Any]]]:
    """What the sandbox holds beyond its catalogue, per table, oldest first."""
    store = sb.state.store
    with store.lock:
        return {t: [dict(v) for k, v in sorted(store.tables[t].items()) if k > SEEDED[t]]
                for t in SEEDED}


def posts(adm: Admin) -> int:
    return int(adm.requests()["counts"].get("POST onboarding", 0))


def attempts(state: Path, external_id: str) -> list[tuple[str, str | None, str | None]]:
    store = open_state(state)
    try:
        return [(a.step, a.result, a.code) for a in store.attempts(external_id)]
    finally:
        store.close()


def runner(command: str, job: Path, state: Path) -> tuple[int, list[str], list[str]]:
    extra = ["--yes"] if command == "run" else []
    result = cli(command, str(job), "--state", str(state), *extra)
    return result.exit_code, out_lines(result), err_lines(result)


def assert_onboarded_once(sb: RunningSandbox, state: Path, rows: list[tuple[str, ...]] = ROWS
                          ) -> None:
    """Each row's company, merchant and account exist exactly once at the sandbox, linked
    to each other, and the state's chain names exactly them."""
    made = onboarded(sb)
    assert Counter(c["name"] for c in made["companies"]) == {r[1]: 1 for r in rows}
    assert Counter(m["merchant_external_id"] for m in made["merchants"]) == {
        f"shop-{r[0]}": 1 for r in rows}
    assert Counter(a["label"] for a in made["accounts"]) == {r[4]: 1 for r in rows}
    companies = {c["name"]: c["id"] for c in made["companies"]}
    merchants = {m["merchant_external_id"]: m for m in made["merchants"]}
    accounts = {a["label"]: a for a in made["accounts"]}
    records = items(state, NAME)
    for shop, company, merchant_name, template, label in rows:
        merchant, account = merchants[f"shop-{shop}"], accounts[label]
        assert merchant["company_id"] == account["company_id"] == companies[company]
        assert (merchant["name"], merchant["template_id"]) == (merchant_name, template)
        r = records[f"shop-{shop}"]
        assert (r["step"], r["outcome"], r["intent"], r["status"]) == (
            "final", "settled", None, "onboarded"), r
        chain = json.loads(r["details"])
        assert chain["account_id"] in (None, account["id"])  # None: found by its label
        assert chain == {"company_id": companies[company], "merchant_id": merchant["id"],
                         "merchant_currency": merchant["currency"],
                         "account_id": chain["account_id"], "account_label": label}


# ---------------------------------------------------------------- the chain
def test_every_row_is_onboarded_once_in_order(sb: RunningSandbox, adm: Admin, tmp_path: Path,
                                              state: Path) -> None:
    job = write_job(tmp_path, sb)
    first = run(job, state)
    assert (first.exit_code, first.counts) == (0, {"settled": 3})
    assert_onboarded_once(sb, state)
    assert posts(adm) == 9
    for external_id in EVERY:
        assert attempts(state, external_id) == [("company", "ok", None),
                                                ("merchant", "ok", None),
                                                ("account", "ok", None)]
    made = onboarded(sb)
    # A template sets the currency of the merchant and the account it makes.
    assert {a["label"]: a["currency"] for a in made["accounts"]} == {
        "lyon-eur": "EUR", "berlin-eur": "EUR", "austin-usd": "USD"}
    assert {a["label"]: a["payout_bank_accounts"][0]["iban"] for a in made["accounts"]} == {
        r[4]: IBAN for r in ROWS}
    again = run(job, state)
    assert (again.exit_code, again.counts) == (0, {"settled": 3})
    assert posts(adm) == 9


def test_an_existing_company_id_starts_the_chain_at_the_merchant(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, ROWS[:1], company="    company_id: CMP0001")
    assert run(job, state).exit_code == 0
    made = onboarded(sb)
    assert made["companies"] == []
    assert [(m["company_id"], a["company_id"]) for m, a in zip(
        made["merchants"], made["accounts"], strict=True)] == [("CMP0001", "CMP0001")]
    assert attempts(state, "shop-lyon") == [("merchant", "ok", None), ("account", "ok", None)]


# ---------------------------------------------------------------- doubt
def arm_before(monkeypatch: pytest.MonkeyPatch, adm: Admin, step: str,
               rule: dict[str, int]) -> None:
    """Set ``rule`` on the sandbox's onboarding group just before the first ``step`` POST."""
    original = getattr(OnboardingClient, f"create_{step}")
    armed = []

    def create(self: OnboardingClient, body: dict[str, Any]) -> Any:
        if not armed:
            armed.append(step)
            adm.faults({"onboarding": rule})
        return original(self, body)

    monkeypatch.setattr(OnboardingClient, f"create_{step}", create)


@pytest.mark.parametrize(("step", "post", "lookup"), [
    ("company", "/v1/onboarding/companies", "/v1/onboarding/companies/Lyon SARL"),
    ("merchant", "/v1/onboarding/merchants", "/v1/onboarding/merchants/shop-lyon"),
    ("account", "/v1/onboarding/accounts", "/v1/account/accounts/lyon-eur/balances")])
def test_a_lost_answer_at_each_link_is_resolved_by_its_lookup(
        step: str, post: str, lookup: str, sb: RunningSandbox, adm: Admin, tmp_path: Path,
        state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arm_before(monkeypatch, adm, step, {"lost_next": 1})
    job = write_job(tmp_path, sb, ROWS[:1])
    result = run(job, state)
    assert (result.exit_code, result.counts) == (0, {"settled": 1})
    assert_onboarded_once(sb, state, ROWS[:1])
    assert posts(adm) == 3  # the lost link was found, not sent again
    seen = [f"{c['method']} {c['path']}" for c in adm.requests()["recent"]]
    assert seen[seen.index(f"POST {post}") + 1] == f"GET {lookup}", seen
    expected = [(s, "in_doubt" if s == step else "ok", None)
                for s in ("company", "merchant", "account")]
    assert attempts(state, "shop-lyon") == expected
    chain = json.loads(items(state, NAME)["shop-lyon"]["details"])
    assert (chain["account_id"] is None) == (step == "account")


def test_a_chain_stopped_in_the_middle_resumes_at_the_next_link(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The service is unavailable from the account on: the run ends 75 after the merchant.
    arm_before(monkeypatch, adm, "account", {"unavailable_next": 3})
    job = write_job(tmp_path, sb, ROWS[:1], concurrency=1)
    first = run(job, state)
    assert (first.exit_code, first.counts) == (75, {"pending": 1})
    r = items(state, NAME)["shop-lyon"]
    assert (r["step"], r["intent"]) == ("merchant", None)
    assert set(json.loads(r["details"])) == {"company_id", "merchant_id", "merchant_currency"}
    assert onboarded(sb)["accounts"] == []
    resumed = run(job, state)
    assert (resumed.exit_code, resumed.counts) == (0, {"settled": 1})
    assert_onboarded_once(sb, state, ROWS[:1])
    assert attempts(state, "shop-lyon") == [("company", "ok", None), ("merchant", "ok", None),
                                            ("account", "error", "2001501"),
                                            ("account", "ok", None)]


def test_a_run_killed_in_the_middle_of_chains_resumes_at_the_next_link(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    rows = [(f"s{n}", f"Company {n}", f"Shop {n}", "TPL-STANDARD", f"s{n}-eur")
            for n in range(1, 7)]
    adm.faults({"*": {"latency_ms": 5}})
    job = write_job(tmp_path, sb, rows, concurrency=1, timeout="10s")
    child = subprocess.Popen([sys.executable, "-m", "runner", "run", str(job), "--yes",
                              "--state", str(state), "-q"], cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    def inside_a_chain() -> bool:
        """From the third company on, a company made whose merchant is not (yet)."""
        made = onboarded(sb)
        return len(made["companies"]) >= 3 and len(made["merchants"]) < len(made["companies"])

    try:
        deadline = time.monotonic() + PATIENCE
        while not inside_a_chain() and time.monotonic() < deadline:
            time.sleep(0.001)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    made = onboarded(sb)
    assert len(made["companies"]) >= 3 and len(made["accounts"]) < len(rows)
    # The kill fell inside a chain: an item holds a link made (or in flight) but not all.
    middle = [r for r in items(state, NAME).values()
              if r["step"] in ("company", "merchant") or r["intent"]]
    assert middle, [(r["step"], r["intent"], r["outcome"]) for r in items(state, NAME).values()]
    before = posts(adm)

    resumed = run(job, state)
    assert (resumed.exit_code, resumed.counts) == (0, {"settled": 6})
    assert_onboarded_once(sb, state, rows)
    # The resumed run asked only for links not made: the one in flight when the kill fell
    # was looked up by its name (and asked again only if it had not reached the sandbox).
    assert posts(adm) - before <= 3 * len(rows) - len(made["companies"]) \
        - len(made["merchants"]) - len(made["accounts"])


# ---------------------------------------------------------------- names already used
@pytest.mark.parametrize(("row", "external_id", "message"), [
    (("globex", "Globex", "G Shop", "TPL-STANDARD", "g-eur"), "shop-{{ row.shop }}",
     "company 'Globex' exists and is another integrator's (1000403 Access to the resource "
     "is forbidden: Globex belongs to another integrator)"),
    (("acme-shop", "New Co", "Acme Shop", "TPL-STANDARD", "n-eur"), "{{ row.shop }}",
     "merchant 'acme-shop' at the provider is not this item's: company_id 'CMP0001' (this "
     "item: 'CMP0003')"),
    (("us", "US Co", "US Shop", "TPL-US", "acme-eur-main"), "shop-{{ row.shop }}",
     "an account labelled 'acme-eur-main' exists, and this item never asked for one: it is "
     "not this item's"),
])
def test_a_used_name_that_is_not_the_items_is_a_conflict(
        row: tuple[str, ...], external_id: str, message: str, sb: RunningSandbox,
        adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, [row], external_id=external_id)
    ref = external_id.replace("{{ row.shop }}", row[0])
    expected = [f"{NAME}: 1 items: 1 conflict", f"  needs a person {ref} (row 2): {message}"]
    assert runner("run", job, state) == (1, expected, [])
    assert runner("status", job, state) == (1, expected, [])
    sent = posts(adm)
    assert runner("run", job, state) == (1, expected, [])
    assert posts(adm) == sent  # a conflict waits for a person


def test_a_used_company_name_is_adopted(sb: RunningSandbox, adm: Admin, tmp_path: Path,
                                        state: Path) -> None:
    # Two shops of one company: the second finds the company by its name.
    rows = [("one", "Twin Co", "Shop One", "TPL-STANDARD", "one-eur"),
            ("two", "Twin Co", "Shop Two", "TPL-STANDARD", "two-eur")]
    job = write_job(tmp_path, sb, rows, concurrency=1)
    assert run(job, state).exit_code == 0
    made = onboarded(sb)
    assert [c["name"] for c in made["companies"]] == ["Twin Co"]
    assert {m["company_id"] for m in made["merchants"]} == {made["companies"][0]["id"]}
    assert attempts(state, "shop-two")[0] == ("company", "error", "2001201")


def test_the_example_job_runs_to_exit_0_twice(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RUNNER_BASE_URL", "RUNNER_API_KEY", "RUNNER_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    state = tmp_path / "s.sqlite"
    for _ in range(2):
        result = cli("run", "jobs/onboarding.yaml", "--yes", "--state", str(state))
        assert (result.exit_code, out_lines(result)) == (0, [
            "onboarding-2026-11: 4 items: 4 settled"])
    chains = [json.loads(r["details"]) for r in items(state, "onboarding-2026-11").values()]
    assert len({c["account_id"] for c in chains}) == 4 and all(
        c["account_id"] and c["merchant_id"] and c["company_id"] for c in chains)


# ---------------------------------------------------------------- refusals and checks
def test_a_refusal_fails_the_item_with_the_providers_code(sb: RunningSandbox, adm: Admin,
                                                          tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, [("x", "X Co", "X Shop", "TPL-NOPE", "x-eur")])
    code, out, _ = runner("run", job, state)
    assert (code, out) == (1, [
        f"{NAME}: 1 items: 1 failed",
        "  failed shop-x (row 2): 1001001 Invalid parameter, the value asked does not exist: "
        "template_id "
        "'TPL-NOPE' does not exist (templates: TPL-STANDARD, TPL-MARKETPLACE, TPL-US)"])
    assert onboarded(sb)["companies"] == []


def test_bank_accounts_checked_by_their_country_and_sent_in_electronic_form(
        sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    """An IBAN printed with spaces in lower case is taken and sent without spaces in
    capitals (and the BIC likewise); a French IBAN of 19 characters and a BIC of no
    country (ZZ) are refused before anything is sent."""
    rows = [("ok", "Ok SA", "Ok", "TPL-STANDARD", "ok-eur"),
            ("short", "Short SA", "Short", "TPL-STANDARD", "short-eur"),
            ("zz", "Zz SA", "Zz", "TPL-STANDARD", "zz-eur")]
    job = write_job(tmp_path, sb, rows)
    ibans = {"ok": "fr76 3000 6000 0112 3456 7890 189", "short": "FR39300060000112345"}
    csv = tmp_path / "rows.csv"
    csv.write_text("".join(line.replace(IBAN, ibans.get(line.split(",")[0], IBAN)) + "\n"
                           for line in csv.read_text().splitlines()))
    job.write_text(job.read_text().replace(
        "bic: BNPAFRPP", "bic: \"{{ 'DEUTZZFF' if row.shop == 'zz' else 'bnpa frpp' }}\""))
    code, out, _ = runner("validate", job, state)
    assert (code, out) == (2, [
        f"{csv}:3: account.payout_bank_accounts.0.iban: 'FR39300060000112345' is not an "
        "IBAN: an IBAN of FR has 27 characters, this one 19",
        f"{csv}:4: account.payout_bank_accounts.0.bic: 'DEUTZZFF' is not a BIC: 'ZZ' is not "
        "a country code (ISO 3166)",
        f"{job}: 3 items, 1 valid, 2 invalid"])
    write_job(tmp_path, sb, rows[:1])
    csv.write_text(csv.read_text().replace(IBAN, ibans["ok"]))
    job.write_text(job.read_text().replace("bic: BNPAFRPP", "bic: bnpa frpp"))
    assert runner("run", job, state)[0] == 0
    bank = onboarded(sb)["accounts"][0]["payout_bank_accounts"][0]
    assert (bank["iban"], bank["bic"]) == (IBAN, "BNPAFRPP")


def test_offline_checks(sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb, [("a", "CMP0042", "A", "TPL-STANDARD", "ACC9"),
                                   ("b", "B Co", "B", "TPL-STANDARD", "b/eur")])
    (tmp_path / "rows.csv").write_text(
        (tmp_path / "rows.csv").read_text().replace(IBAN, "FR7630006000011234567890188", 1))
    code, out, _ = runner("validate", job, state)
    rows = tmp_path / "rows.csv"
    assert (code, out) == (2, [
        f"{rows}:2: company.name: must not have the form of an id (CMP and digits)",
        f"{rows}:2: account.label: must not have the form of an id (ACC and digits)",
        f"{rows}:2: account.payout_bank_accounts.0.iban: 'FR7630006000011234567890188' is "
        "not an IBAN: its check digits are wrong",
        f"{rows}:3: account.label: must not contain '/'",
        f"{job}: 2 items, 0 valid, 2 invalid"])
    company = write_job(tmp_path, sb, ROWS[:1], company="    company_id: CMP0002")
    code, out, _ = runner("validate", company, state)
    assert (code, out[0]) == (2, f"{rows}:2: company_id: company 'CMP0002' is not yours: "
                                 "1000403 Access to the resource is forbidden: CMP0002 belongs "
                                 "to another integrator")
    assert posts(adm) == 0
