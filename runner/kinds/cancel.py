"""Cancellations of existing payment orders (an operation, sent once: it has no lookup)."""

from runner.engine.operations import CancelFlow
from runner.job.collection import CancelItem
from runner.kinds import Kind, same
from runner.validation.collection import check_operation, operation_amount, want_operation

KIND = Kind("cancel", CancelItem, CancelFlow, lambda p: p.collection, "jobs/cancels.yaml",
            check=check_operation, wants=want_operation, amount=operation_amount,
            same_payment=same.operation, same_payment_is="payment order, amount and currency")
