"""Transfers between two accounts (account management), their entries checked at the end."""

from runner.engine.accounts import AccountTransferFlow
from runner.job.collection import AccountTransferItem
from runner.kinds import Kind
from runner.validation.accounts import (
    check_account_transfer,
    transfer_amount,
    want_account_transfer,
)

KIND = Kind("account_transfer", AccountTransferItem, AccountTransferFlow, lambda p: p.accounts,
            "jobs/transfers.yaml", check=check_account_transfer, wants=want_account_transfer,
            amount=transfer_amount)
