"""Transfers between two accounts (account management), their entries checked at the end."""

from runner.engine.accounts import AccountTransferFlow
from runner.job.collection import AccountTransferItem
from runner.kinds import Kind, same
from runner.validation import accounts

KIND = Kind("account_transfer", AccountTransferItem, AccountTransferFlow, lambda p: p.accounts,
            "jobs/transfers.yaml", check=accounts.check_account_transfer,
            wants=accounts.want_account_transfer, amount=accounts.transfer_amount,
            same_payment=same.account_transfer,
            same_payment_is="source and target accounts, amount and currency")
