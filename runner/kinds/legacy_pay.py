"""The legacy single-call Pay: one call pays, and it has no lookup (sent once)."""

from runner.engine.legacy_pay import LegacyPayFlow
from runner.job.merchant_payment import LegacyPayItem
from runner.kinds import Kind, same
from runner.validation.legacy_pay import check_legacy_pay, legacy_pay_amount

KIND = Kind("legacy_pay", LegacyPayItem, LegacyPayFlow, lambda p: p.legacy,
            "jobs/legacy-pay.yaml", check=check_legacy_pay, amount=legacy_pay_amount,
            same_payment=same.legacy_pay,
            same_payment_is="merchant, card or customer e-mail, amount and currency")
