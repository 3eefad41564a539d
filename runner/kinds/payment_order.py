"""Payment orders of the collection service (optionally quoted first), followed to their end."""

from runner.engine.payment_orders import PaymentOrderFlow
from runner.job.collection import PaymentOrderItem
from runner.kinds import Kind
from runner.validation.collection import (
    check_payment_order,
    payment_order_amount,
    want_payment_order,
)

KIND = Kind("payment_order", PaymentOrderItem, PaymentOrderFlow, lambda p: p.collection,
            "jobs/payment-orders.yaml", check=check_payment_order, wants=want_payment_order,
            amount=payment_order_amount)
