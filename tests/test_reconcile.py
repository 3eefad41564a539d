"""`runner reconcile`: the state against the provider's own records, sending nothing. A
difference is planted at the sandbox through its admin API (its customer care reverses a
payment) and a payment the state does not hold is made there; reconcile finds both, and
records the reversal in the state."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from conftest import KEY, SECRET, Admin, Api, body
from engine_support import HEADER, MT, ROWS, cli, err_lines, out_lines, posts, run, write_job

from runner.sandbox import RunningSandbox
from runner.state import open_state

JOB = "pay-2026-11"


def reconcile(job: Path, state: Path, *more: str) -> tuple[int, list[str], list[str]]:
    result = cli("reconcile", str(job), "--state", str(state), *more)
    return result.exit_code, out_lines(result), err_lines(result)


def test_reconcile_finds_a_difference_planted_at_the_provider(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb)
    assert run(job, state).counts == {"settled": 3}
    sent = posts(adm)
    assert reconcile(job, state) == (0, [
        f"{JOB} (remittance): 3 item(s) compared with the provider's records: all agree",
        "  EUR: 3 settled item(s): 64.50 in the state, 64.50 in the provider's records: "
        "agree"], [])
    # The provider's customer care reverses pay-b; and a payment for row z is made at the
    # provider by someone else (under the external_id runner would use): unknown to the state.
    assert adm.api.post("/customer-care/transactions/pay-b",
                        {"status": "80000"}).status_code == 200
    api = Api(sb.url, (KEY, SECRET))
    quotation = body(api.post(MT + "/quotations", {
        "external_id": "pay-z", "payer_id": 1, "mode": "SOURCE_AMOUNT",
        "source": {"country_iso_code": "FRA", "currency": "EUR", "amount": Decimal("5.00")},
        "destination": {"currency": "KES"}}))
    made = body(api.post(f"{MT}/quotations/{quotation['id']}/transactions", {
        "external_id": "pay-z", "credit_party_identifier": {"msisdn": "+254700000026"},
        "sender": {"firstname": "Ada", "lastname": "Acme"}, "purpose_of_remittance": "SALARY",
        "beneficiary": {"firstname": "Jo", "lastname": "Doe"}}))
    (tmp_path / "rows.csv").write_text(HEADER + ROWS + "z,1,5.00,+254700000026\n")
    sent = posts(adm)
    assert reconcile(job, state) == (1, [
        f"{JOB} (remittance): 4 item(s) compared with the provider's records: 3 difference(s)",
        "  pay-b (row 3): status: the state says 70000, the provider 80000",
        f"  pay-z (row 5): unknown to the state: the state says nothing made, the provider "
        f"10000 (id {made['id']})",
        "  EUR: 3 settled item(s): 64.50 in the state, 43.00 in the provider's records: "
        "DIFFER",
        "  recorded in the state: pay-b (row 3) reversed after it settled: 80000 REVERSED"],
        [])
    # The reversal is the state's from now on: pay-b agrees, the totals too; pay-z is still
    # unknown to the state (reconcile makes nothing).
    csv = cli("reconcile", str(job), "--state", str(state), "--format", "csv")
    assert csv.exit_code == 1 and csv.stdout.splitlines() == [
        "external_id,row,ref,what,state,provider",
        f"pay-z,5,pay-z,unknown to the state,nothing made,10000 (id {made['id']})"]
    as_json = json.loads(cli("reconcile", str(job), "--state", str(state), "--format",
                             "json").stdout)
    assert (as_json["ok"], len(as_json["differences"]), as_json["recorded"]) == (False, 1, [])
    assert posts(adm) == sent  # reconcile sends nothing


def test_reconcile_reads_while_a_run_holds_the_lease(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb)
    assert run(job, state).counts == {"settled": 3}
    with open_state(state) as holder, holder.join(JOB):  # a run going on
        assert reconcile(job, state)[0] == 0


def test_reconcile_needs_a_state(sb: RunningSandbox, tmp_path: Path, state: Path) -> None:
    job = write_job(tmp_path, sb)
    assert reconcile(job, state) == (2, [], [
        f"error: {state}: no state database here (nothing has run with this --state yet?)"])
    assert not state.exists()


def test_progress_at_the_provider_is_no_difference(
        sb: RunningSandbox, adm: Admin, tmp_path: Path, state: Path) -> None:
    """The run ended with its items confirmed and on their way; the provider has completed
    them since. Reconcile says what progressed and exits 0; the next run records it."""
    job = write_job(tmp_path, sb)
    job.write_text(job.read_text().replace("wait_for_final: 2s", "wait_for_final: 0s"))
    assert run(job, state).counts == {"pending": 3}
    adm.advance(3600)
    code, out, err = reconcile(job, state)
    assert (code, err) == (0, [])
    assert out == [
        f"{JOB} (remittance): 3 item(s) compared with the provider's records: all agree",
        *(f"  progressed: pay-{n} (row {r}): 20000 in the state, 70000 COMPLETED at the "
          f"provider (the next run records it)" for n, r in (("a", 2), ("b", 3), ("c", 4)))]
    assert run(job, state).counts == {"settled": 3}
    assert reconcile(job, state)[0] == 0
