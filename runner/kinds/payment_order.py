"""Payment orders of the collection service (optionally quoted first), followed to their end."""

from runner.engine.payment_orders import PaymentOrderFlow
from runner.job.collection import PaymentOrderItem
from runner.kinds import Kind, same
from runner.validation import collection

KIND = Kind("payment_order", PaymentOrderItem, PaymentOrderFlow, lambda p: p.collection,
            "jobs/payment-orders.yaml", check=collection.check_payment_order,
            wants=collection.want_payment_order, amount=collection.payment_order_amount,
            same_payment=same.payment_order, same_payment_is="merchant, buyer, amount and currency")
