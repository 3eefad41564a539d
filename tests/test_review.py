"""What an approver reviews, from the plans the state kept (``runner.engine.review``): the
changes since the batch before and the step-up rules a plan fires, rule by rule. The console
(test_console.py) and `runner apply` (test_passkey_approvals.py) show them end to end."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from runner.engine.review import EarlierPlan, changes, fired, people_of
from runner.policy import MoneyRules, StepUp


def item(row: int, name: str, amount: str, account_key: str, action: str = "new"
         ) -> dict[str, Any]:
    return {"row": row, "external_id": f"x-{row}", "action": action, "beneficiary": name,
            "account": f"msisdn ****{account_key[-4:]}", "account_key": account_key,
            "currency": "EUR", "amount": amount}


OCTOBER = EarlierPlan("oct", "pay-2026-10", "remittance", "2026-10-25T10:00:00Z", people_of({
    "items": [item(2, "Amina Otieno", "100.00", "k-amina"),
              item(3, "Brian Kamau", "200.00", "k-brian"),
              item(4, "Coumba Ndiaye", "300.00", "k-coumba")]}))
NOVEMBER = {"id": "nov", "planned_at": "2026-11-25T10:00:00Z",
            "job": {"name": "pay-2026-11", "kind": "remittance"},
            "items": [item(2, "Amina  otieno", "100.00", "k-amina-new"),
                      item(3, "Brian Kamau", "204.00", "k-brian"),
                      item(4, "Daniel Mwangi", "12000.00", "k-daniel"),
                      item(5, "Held Person", "5.00", "k-held", "held")]}


def rules(*step_up: StepUp) -> MoneyRules:
    return MoneyRules(four_eyes=True, step_up=step_up)


def test_changes_name_who_is_new_gone_changed_and_moved() -> None:
    found = changes(NOVEMBER, [OCTOBER], moved_percent=Decimal(1))
    assert [p.name for p in found.new] == ["Daniel Mwangi"]
    assert [p.name for p in found.gone] == ["Coumba Ndiaye"]
    assert [(a.account_key, b.account_key) for a, b in found.changed_account] == [
        ("k-amina", "k-amina-new")]  # the same person, however her name is spaced
    assert [(b.name, pc) for _, b, pc in found.moved] == [("Brian Kamau", Decimal("2.0"))]
    assert changes(NOVEMBER, [OCTOBER], moved_percent=Decimal(5)).moved == []
    assert changes(NOVEMBER, []).before is None


def test_each_step_up_rule_fires_on_what_it_names_and_says_why() -> None:
    each = rules(StepUp(name="big item", item_over={"EUR": Decimal(10000)}, approvals=2),
                 StepUp(name="big batch", batch_over={"EUR": Decimal(20000)}),
                 StepUp(name="new payee", new_payee=True),
                 StepUp(name="changed", changed_account=True, group=None),
                 StepUp(name="other currency", batch_over={"GBP": Decimal(1)}))
    assert fired(each, NOVEMBER, [OCTOBER]) == [
        {"rule": "big item", "why": "1 item(s) over EUR 10000 (row 4)", "approvals": 2,
         "group": None},
        {"rule": "new payee", "why": "2 payee(s) never paid on this state before",
         "approvals": 1, "group": None},
        {"rule": "changed", "why": "1 person(s) paid to another account than last time",
         "approvals": 1, "group": None}]
    # The first batch on a state: everyone is new, nobody changed account.
    assert [r["rule"] for r in fired(each, NOVEMBER, [])] == ["big item", "new payee"]
