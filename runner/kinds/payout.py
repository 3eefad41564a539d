"""Payouts from an account to one of its payout bank accounts (account management)."""

from runner.engine.accounts import PayoutFlow
from runner.job.collection import PayoutItem
from runner.kinds import Kind
from runner.validation.accounts import check_payout, payout_amount, want_payout

KIND = Kind("payout", PayoutItem, PayoutFlow, lambda p: p.accounts, "jobs/payouts.yaml",
            check=check_payout, wants=want_payout, amount=payout_amount)
