"""Status codes and classes of the money transfer and merchant payment services, and their
documented test triggers, which are one scheme for both.

A trigger is chosen by the last six digits of the first credit (or debit) party identifier
value that has digits, like a card network's test numbers. Any other value follows the happy
path: CONFIRMED -> SUBMITTED -> COMPLETED.

| last 6 digits | money transfer                          | merchant payment                     |
|---------------|-----------------------------------------|--------------------------------------|
| 999301        | REJECTED at creation (30201)            | REJECTED at creation (30250)         |
| 999302        | REJECTED after confirm (30200)          | REJECTED after confirm (30260)       |
| 999309        | SUBMITTED then DECLINED (90400)         | SUBMITTED then DECLINED (90273)      |
| 999370        | -                                       | SUBMITTED then DECLINED (90270)      |
| 999306        | SUBMITTED, AVAILABLE, then COMPLETED    | -                                    |
| 999308        | SUBMITTED, AVAILABLE, then REVERSED     | COMPLETED then REVERSED              |
| 999320        | CONFIRMED-UNDER-REVIEW-SLS (20110) first| -                                    |
| 999401        | verification UNREGISTERED, information not found (1000404), in both  |
| 999402        | verification UNAVAILABLE (a closed account), in both                    |
| 999403        | verification and information fail (500 1009001), in both                |
| 999411        | held under the name first verified, a letter off (a close match)       |
| 999412        | held by somebody else (Ines Valderrama: no match)                       |

The last five are core/parties.py's.
"""

from __future__ import annotations

from typing import Any

from runner.sandbox.core.parties import trigger_of

CLASSES = {"1": "CREATED", "2": "CONFIRMED", "3": "REJECTED", "4": "CANCELLED", "5": "SUBMITTED",
           "6": "AVAILABLE", "7": "COMPLETED", "8": "REVERSED", "9": "DECLINED"}

MESSAGES = {
    "10000": "CREATED", "20000": "CONFIRMED", "20110": "CONFIRMED-UNDER-REVIEW-SLS",
    "20150": "CONFIRMED-WAITING-FOR-PICKUP", "30000": "REJECTED",
    "30200": "REJECTED-INVALID-BENEFICIARY", "30201": "REJECTED-BARRED-BENEFICIARY",
    "30250": "REJECTED-INVALID-CONSUMER", "30260": "REJECTED-INVALID-CONSUMER-DETAILS",
    "30400": "REJECTED-PAYER-CURRENTLY-UNAVAILABLE", "30500": "REJECTED-INSUFFICIENT-BALANCE",
    "40000": "CANCELLED", "50000": "SUBMITTED", "60000": "AVAILABLE", "70000": "COMPLETED",
    "80000": "REVERSED", "90000": "DECLINED", "90270": "DECLINED-PAYMENT-TIME-LIMIT-REACHED",
    "90273": "DECLINED-INSUFFICIENT-BALANCE-CONSUMER-ACCOUNT",
    "90400": "DECLINED-PAYER-CURRENTLY-UNAVAILABLE",
}
FINAL_CLASSES = {"3", "4", "7", "8", "9"}

# Each plan: the status at creation, then (delay name, status) steps after confirm.
# "submit" waits SandboxConfig.submit_delay, "complete" waits complete_delay.
Plan = list[tuple[str, str]]
HAPPY: Plan = [("submit", "50000"), ("complete", "70000")]
# The triggers of the table above: last six digits -> (first status, plan).
TRANSFER_PLANS: dict[str, tuple[str, Plan]] = {
    "999301": ("30201", []),
    "999302": ("10000", [("submit", "30200")]),
    "999309": ("10000", [("submit", "50000"), ("complete", "90400")]),
    "999306": ("10000", [("submit", "50000"), ("complete", "60000"), ("complete", "70000")]),
    "999308": ("10000", [("submit", "50000"), ("complete", "60000"), ("complete", "80000")]),
    "999320": ("10000", [("submit", "20110"), ("submit", "50000"), ("complete", "70000")]),
}
PAYMENT_PLANS: dict[str, tuple[str, Plan]] = {
    "999301": ("30250", []),
    "999302": ("10000", [("submit", "30260")]),
    "999309": ("10000", [("submit", "50000"), ("complete", "90273")]),
    "999370": ("10000", [("submit", "50000"), ("complete", "90270")]),
    "999308": ("10000", [("submit", "50000"), ("complete", "70000"), ("complete", "80000")]),
}


def plan_for(plans: dict[str, tuple[str, Plan]], identifier: dict[str, Any]) -> tuple[str, Plan]:
    """The first status and the plan the identifier's trigger chooses (the happy path when
    it chooses none)."""
    return plans.get(trigger_of(identifier) or "", ("10000", HAPPY))


def status_fields(code: str) -> dict[str, str]:
    klass = code[0]
    return {"status": code, "status_message": MESSAGES.get(code, CLASSES[klass]),
            "status_class": klass, "status_class_message": CLASSES[klass]}


def with_numbers(item: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``item`` whose ``status`` and ``status_class`` are JSON numbers."""
    return {**item, "status": int(item["status"]), "status_class": int(item["status_class"])}


def is_final(code: str) -> bool:
    return code[0] in FINAL_CLASSES
