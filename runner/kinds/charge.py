"""Charges of existing payment orders (an operation, sent once: it has no lookup)."""

from runner.engine.operations import ChargeFlow
from runner.job.collection import ChargeItem
from runner.kinds import Kind, same
from runner.validation.collection import check_operation, operation_amount, want_operation

KIND = Kind("charge", ChargeItem, ChargeFlow, lambda p: p.collection, "jobs/charges.yaml",
            check=check_operation, wants=want_operation, amount=operation_amount,
            same_payment=same.operation, same_payment_is="payment order, amount and currency")
