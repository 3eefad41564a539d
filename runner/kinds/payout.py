"""Payouts from an account to one of its payout bank accounts (account management)."""

from runner.engine.accounts import PayoutFlow
from runner.job.collection import PayoutItem
from runner.kinds import Kind, same
from runner.validation import accounts

KIND = Kind("payout", PayoutItem, PayoutFlow, lambda p: p.accounts, "jobs/payouts.yaml",
            check=accounts.check_payout, wants=accounts.want_payout,
            amount=accounts.payout_amount,
            same_payment=same.payout, same_payment_is="payout bank account, amount and currency")
