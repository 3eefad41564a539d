"""Checks of ``payout`` and ``account_transfer`` items against the collection service's
accounts, each account read once per run (``Catalogue.once``).

An account's balances tell that it exists and is the integrator's own (404 / 403 otherwise)
and which currency it holds. Its payout bank accounts are read with ``GET
/v1/onboarding/accounts/{id}`` (the sandbox's answer to a read the document does not show):
a payout to a blocked bank account, or to one of another account, is refused here, before
anything is sent. A provider without that read answers 404: the check is then left to it
(it refuses with 2001201 and nothing moves).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from runner import rules
from runner.errors import ProviderHTTPError
from runner.job.collection import AccountTransferItem, Money, PayoutItem
from runner.validation.catalogue import Catalogue, Read, unless_forbidden

Problems = Iterator[tuple[str, str]]
CENT = Decimal("0.01")


@dataclass(frozen=True)
class AccountView:
    """What validation knows of an account: its currency, or why it cannot be used."""

    currency: str | None = None
    problem: str | None = None


def _account(catalogue: Catalogue, ref: str) -> Read:
    def fetch() -> AccountView:
        currencies = {b["balance"]["currency"] for b in catalogue.provider.accounts.balances(ref)}
        return AccountView(currency=currencies.pop() if len(currencies) == 1 else None)

    def forbidden(exc: ProviderHTTPError) -> AccountView:
        return AccountView(problem=f"account {ref!r} is not open to these credentials "
                                   f"({exc.code} {exc.message})")

    return ("account", ref), lambda: unless_forbidden(fetch, forbidden)


def _details(catalogue: Catalogue, ref: str) -> Read:
    return ("account details", ref), lambda: catalogue.provider.accounts.account(ref)


def account(catalogue: Catalogue, ref: str) -> AccountView:
    if not ref.strip():
        return AccountView(problem="an account is required")
    found = catalogue.once(*_account(catalogue, ref))
    return found if found is not None else AccountView(
        problem=f"account {ref!r} does not exist")


def want_payout(item: PayoutItem, catalogue: Catalogue) -> None:
    if item.source_account_id.strip():
        catalogue.want(*_account(catalogue, item.source_account_id))
        if item.payout_bank_account_id.strip():
            catalogue.want(*_details(catalogue, item.source_account_id))


def want_account_transfer(item: AccountTransferItem, catalogue: Catalogue) -> None:
    for ref in (item.source_account_id, item.target_account_id):
        if ref.strip():
            catalogue.want(*_account(catalogue, ref))


def _money(where: str, money: Money) -> Problems:
    if not rules.is_currency(money.currency):
        yield f"{where}.currency", f"{money.currency!r} is not an ISO 4217 currency code"
    try:
        exact = money.amount == money.amount.quantize(CENT)
    except InvalidOperation:  # more digits than any balance holds
        yield f"{where}.amount", f"{money.amount} is too large"
        return
    if not exact:
        yield f"{where}.amount", f"at most 2 decimals, got {money.amount}"


def _holds(ref: str, view: AccountView, money: Money) -> str | None:
    """Why the account cannot take the money's currency (None: it can, or is unknown)."""
    if view.currency is None or view.currency == money.currency:
        return None
    return f"account {ref} holds {view.currency}, not {money.currency}"


def check_payout(item: PayoutItem, catalogue: Catalogue) -> Problems:
    yield from _money("payout", item.payout)
    source = account(catalogue, item.source_account_id)
    if source.problem is not None:
        yield "source_account_id", source.problem
    elif (wrong := _holds(item.source_account_id, source, item.payout)) is not None:
        yield "payout.currency", wrong
    if not item.payout_bank_account_id.strip():
        yield "payout_bank_account_id", "a payout bank account is required"
    elif source.problem is None:
        problem = _bank_problem(catalogue, item.source_account_id, item.payout_bank_account_id)
        if problem is not None:
            yield "payout_bank_account_id", problem


def _bank_problem(catalogue: Catalogue, account_ref: str, bank_id: str) -> str | None:
    """Why the payout bank account cannot be paid to (None: it can, or cannot be known)."""
    found = catalogue.once(*_details(catalogue, account_ref))
    if found is None:
        return None
    banks = {b["id"]: b for b in found.get("payout_bank_accounts") or []}
    bank = banks.get(bank_id)
    if bank is None:
        return (f"{bank_id} is not a payout bank account of {account_ref} (it has: "
                f"{', '.join(banks) or 'none'})")
    if bank.get("is_blocked"):
        return f"{bank_id} is blocked"
    return None


def check_account_transfer(item: AccountTransferItem, catalogue: Catalogue) -> Problems:
    yield from _money("transfer", item.transfer)
    if item.source_account_id == item.target_account_id:
        yield "target_account_id", "the same account as source_account_id"
        return
    source = account(catalogue, item.source_account_id)
    target = account(catalogue, item.target_account_id)
    if source.problem is not None:
        yield "source_account_id", source.problem
    if target.problem is not None:
        yield "target_account_id", target.problem
    # The money is in the source's currency, and so must the target be (said once when
    # the item is in neither's).
    if (wrong := _holds(item.source_account_id, source, item.transfer)) is not None:
        yield "transfer.currency", wrong
    elif (wrong := _holds(item.target_account_id, target, item.transfer)) is not None:
        yield "target_account_id", wrong


def payout_amount(item: PayoutItem, catalogue: Catalogue | None
                  ) -> tuple[str, Decimal] | None:
    return item.payout.currency, item.payout.amount


def transfer_amount(item: AccountTransferItem, catalogue: Catalogue | None
                    ) -> tuple[str, Decimal] | None:
    return item.transfer.currency, item.transfer.amount
