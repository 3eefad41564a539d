"""Refunds of existing payment orders (an operation, sent once: it has no lookup)."""

from runner.engine.operations import RefundFlow
from runner.job.collection import RefundItem
from runner.kinds import Kind, same
from runner.validation.collection import check_operation, operation_amount, want_operation

KIND = Kind("refund", RefundItem, RefundFlow, lambda p: p.collection, "jobs/refunds.yaml",
            check=check_operation, wants=want_operation, amount=operation_amount,
            same_payment=same.operation, same_payment_is="payment order, amount and currency")
