"""Payouts and transfers between accounts (document 1, account management), exactly once.

One POST moves the money: a payout request (``payout``: from an account to one of its payout
bank accounts) or a transfer request (``account_transfer``: between two accounts), sent with
the item's external_id as its ``external_reference``. Doubt (a lost answer, a timeout, a
5xx, 2001401) is resolved by looking the request up by that reference (rule 3): found, it is
adopted when it matches the item (amount, currency, accounts) and is a conflict otherwise;
clearly not found, the same POST goes again. The provider's answer to a reused reference,
2001201 "External reference has already been used" (``ReferenceTaken``), is resolved by the
same lookup.

The request is then polled to its final status: a payout ``charged``, a transfer
``Validated``. A validated transfer's entries are checked on both accounts' statements: one
debit on the source and one credit on the target, each for the transfer's amount and naming
the other account; anything else fails the item with what is wrong (the money has moved:
a person must look).

Steps: new -> confirmed (the request exists, its amount is reserved) -> final. Outcomes:
pending, settled, failed (refused, or entries wrong), conflict, unknown (a status runner
does not know). Pre-flight: the AVAILABLE balance of each source account against what the
batch still draws from it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Collection
from decimal import Decimal, InvalidOperation
from typing import Any, NoReturn, TypeVar

from runner import lifecycle
from runner.engine.flow import Entry, Flow
from runner.engine.statements import Statements
from runner.errors import ItemConflict, ItemInDoubt, ProviderError, ReferenceTaken
from runner.job.collection import AccountTransferItem, Money, PayoutItem
from runner.lifecycle import Call, Reason, Step
from runner.logs import event
from runner.provider.accounts import AccountClient
from runner.state import ItemChanges, ItemRecord

log = logging.getLogger("runner")
RequestT = TypeVar("RequestT", bound=PayoutItem | AccountTransferItem)
WAITING = ("waitingforvalidation",)




class _AccountRequestFlow(Flow[RequestT, AccountClient]):
    """What payouts and transfers share: one POST, its lookup, the poll, the pre-flight."""

    request = ""  # "payout", "transfer": the kind of request, as the client names it
    noun = ""  # "payout request", for messages
    final_status = ""  # the status (lower case) that ends the request well

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._drawn: dict[str, tuple[str, str]] = {}  # pre-flight key -> (account, currency)
        self._ids: dict[str, str] = {}  # an account as items name it -> its id
        self._statements = Statements(self._entries_since)
        self._found: dict[str, dict[str, Any]] = {}  # what reconciliation found, by item

    # ------------------------------------------------------------ what each says
    def money(self, item: RequestT) -> Money:
        raise NotImplementedError

    def beneficiary(self, item: RequestT) -> str:
        """Where the money goes: a payout bank account, or the target account."""
        raise NotImplementedError

    def summary_of(self, item: RequestT) -> dict[str, Any]:
        return {"beneficiary": self.beneficiary(item),
                "identifier": {"from": item.source_account_id}}

    def body(self, entry: Entry[RequestT]) -> dict[str, Any]:
        return {"external_reference": entry.ref, **entry.item.model_dump(exclude_none=True)}

    def send(self, body: dict[str, Any]) -> Any:
        return self.client.create_request(self.request, body)

    def find(self, reference: str) -> Any | None:
        return self.client.find_request(self.request, reference)

    def differences(self, entry: Entry[RequestT], found: dict[str, Any]) -> list[str]:
        """How the request the provider holds differs from the item (empty: it is ours)."""
        raise NotImplementedError

    def recorded(self, found: dict[str, Any]) -> ItemChanges:
        """Amounts and provider ids of the request, for the state."""
        raise NotImplementedError

    def problem_when_final(self, entry: Entry[RequestT], found: dict[str, Any]) -> str | None:
        return None

    # ------------------------------------------------------------ engine hooks
    def ready(self, entry: Entry[RequestT]) -> bool:
        return entry.record.step == Step.NEW

    def draws(self, item: RequestT) -> str | None:
        """``<source account as the item names it> <currency>``."""
        currency = self.money(item).currency
        key = f"{item.source_account_id} {currency}"
        with self._lock:
            self._drawn[key] = (item.source_account_id, currency)
        return key

    def cost(self, entry: Entry[RequestT]) -> tuple[str, Decimal] | None:
        return self.draws(entry.item) or "", self.money(entry.item).amount

    def usable(self, balances: Collection[str]) -> dict[str, Decimal]:
        """The AVAILABLE balance of each source account drawn on, read once."""
        with self._lock:
            drawn = {k: self._drawn[k] for k in balances if k in self._drawn}
        usable: dict[str, Decimal] = {}
        for key, (account, currency) in drawn.items():
            try:
                balance = self._available(account)
            except ItemInDoubt as exc:  # not readable (gone, forbidden): it covers nothing
                log.warning("the AVAILABLE balance of %s cannot be read: %s", account, exc,
                            extra=event("balance_unreadable"))
                balance = {"amount": 0, "currency": currency}
            usable[key] = Decimal(balance["amount"]) if balance["currency"] == currency \
                else Decimal(0)
        return usable

    def _available(self, account: str) -> dict[str, Any]:
        return dict(self.read(lambda: self.client.balance(account, "AVAILABLE"))["balance"])

    def commit(self, entry: Entry[RequestT]) -> None:
        """Ask for the request (the money is reserved), then read its status once."""
        if entry.record.intent == self.commit_call:
            self.settle_doubt(entry)
            if entry.record.step != Step.NEW or entry.record.intent:
                return
        ref = entry.ref
        body = self.body(entry)
        try:
            found = self._post(entry, self.commit_call, body, lambda: self.send(body),
                               lambda: self.find(ref))
        except ReferenceTaken as exc:
            try:
                found = self.read(lambda: self.find(ref))
            except ItemInDoubt:  # something is held under the reference: in doubt until read
                self.move(entry, lifecycle.doubted(entry.record, self.commit_call))
                raise
            if found is None:
                self._conflict(entry, f"the provider says reference {ref} is used "
                                      f"({exc.message}), yet does not find it")
        except ProviderError as exc:
            self._fail(entry, exc)
            return
        self._adopt(entry, found)

    def settle_doubt(self, entry: Entry[RequestT]) -> None:
        """A request sent whose answer was lost: found, it is adopted; clearly not found,
        the doubt is over and it may be sent again."""
        if entry.record.intent != self.commit_call:
            return
        found = self.read(lambda: self.find(entry.ref))
        if found is None:
            self.move(entry, lifecycle.not_found(entry.record))
        else:
            self._adopt(entry, found)

    def found(self, record: ItemRecord, ref: str | None = None) -> ItemChanges | None:
        reference = ref or record.ref
        held = self.read(lambda: self.find(reference))
        if held is None:
            return None
        with self._lock:
            self._found[record.external_id] = held
        return {**self.recorded(held), "status": held.get("status")}

    def booked(self, settled: list[ItemRecord]) -> list[tuple[str, Decimal, Decimal]]:
        """Per source account and currency: the settled requests' amounts against the debits
        their transfer requests booked on the account's statement (a payout books one)."""
        groups: dict[tuple[str, str], tuple[Decimal, set[str]]] = {}
        for record in settled:
            with self._lock:
                held = self._found.get(record.external_id)
            if held is None or record.source_amount is None:
                continue
            booked_by = held.get("id") if self.request == "transfer" else \
                held.get("transfer_request_id")
            key = (str(held["source_account_id"]), str(held[self.request]["currency"]))
            amount, ids = groups.get(key, (Decimal(0), set()))
            groups[key] = (amount + record.source_amount, ids | {str(booked_by)})
        return [(f"{account} {currency}", amount,
                 self._statements.debited(account, ids, currency))
                for (account, currency), (amount, ids) in sorted(groups.items())]

    def poll(self, entry: Entry[RequestT]) -> bool:
        found = self.read(lambda: self.find(entry.ref))
        if found is None:
            self.move(entry, lifecycle.polled_unknown(
                entry.record, Reason.MISSING, f"{self.noun} {entry.ref} was made, and the "
                                              f"provider no longer finds it: check it there"))
        else:
            self._status(entry, found)
        return entry.record.step == Step.FINAL

    # ------------------------------------------------------------ shared steps
    def _conflict(self, entry: Entry[RequestT], message: str) -> NoReturn:
        self.move(entry, lifecycle.conflict(entry.record, Reason.CONFLICT, message))
        raise ItemConflict(entry.external_id)

    def _adopt(self, entry: Entry[RequestT], found: dict[str, Any]) -> None:
        differs = self.differences(entry, found)
        if differs:  # the doubt is over: what the provider holds is known, and not ours
            self._conflict(entry, f"{self.noun} {entry.ref} at the provider does not match "
                                  f"this item: {'; '.join(differs)}")
        facts = self.recorded(found)
        facts["provider_ref"] = entry.ref
        self.move(entry, lifecycle.confirmed(entry.record), **facts)
        self._status(entry, found)

    def _status(self, entry: Entry[RequestT], found: dict[str, Any]) -> None:
        status, record = str(found.get("status") or ""), entry.record
        if status.lower() == self.final_status:
            problem = self.problem_when_final(entry, found)
            changes = lifecycle.failed(record, "entries", problem) if problem else \
                lifecycle.settled(record)
        elif status.lower() in WAITING:
            changes = lifecycle.confirmed(record)
        else:  # not in the document nor the sandbox: a person decides; polling goes on
            changes = lifecycle.polled_unknown(
                record, Reason.STATUS, f"{self.noun} {entry.ref} has status {status!r}, "
                                       f"which runner does not know: check it at the provider")
        self.move(entry, changes, status=status)

    def _same_account(self, named: str, account_id: str) -> bool:
        """True when the account an item names (by id or label) is ``account_id``."""
        return named == account_id or self._account_id(named) == account_id

    def _account_id(self, named: str) -> str | None:
        """The id of an account an item may name by its label, as its entries show it."""
        with self._lock:
            if named in self._ids:
                return self._ids[named]
        first = self.read(lambda: next(iter(self.client.entries(named, per_page=1)), None))
        account_id = None if first is None else str(first["account_id"])
        if account_id is not None:
            with self._lock:
                self._ids[named] = account_id
        return account_id

    def _entries_since(self, account_id: str, since: int) -> list[dict[str, Any]]:
        return list(self.read(lambda: list(self.client.entries(account_id, since))))


def _decimal(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def _same_money(held: Any, amount: Any, currency: Any) -> bool:
    held = held if isinstance(held, dict) else {}
    return _decimal(held.get("amount")) == _decimal(amount) and held.get("currency") == currency


def _amount_differs(name: str, money: Money, found: dict[str, Any]) -> list[str]:
    held = found.get(name) or {}
    if not _same_money(held, money.amount, money.currency):
        return [f"{name} {held.get('amount')} {held.get('currency')}, the item "
                f"{money.amount} {money.currency}"]
    return []


class PayoutFlow(_AccountRequestFlow[PayoutItem]):
    """A payout request from an account to one of its payout bank accounts."""

    commit_call = Call.PAYOUT_REQUEST
    request = "payout"
    noun = "payout request"
    final_status = "charged"

    def money(self, item: PayoutItem) -> Money:
        return item.payout

    def beneficiary(self, item: PayoutItem) -> str:
        return item.payout_bank_account_id

    def differences(self, entry: Entry[PayoutItem], found: dict[str, Any]) -> list[str]:
        item: PayoutItem = entry.item
        differs = _amount_differs("payout", item.payout, found)
        if found.get("payout_bank_account_id") != item.payout_bank_account_id:
            differs.append(f"payout bank account {found.get('payout_bank_account_id')}, the "
                           f"item {item.payout_bank_account_id}")
        if not self._same_account(item.source_account_id, str(found.get("source_account_id"))):
            differs.append(f"source account {found.get('source_account_id')}, the item "
                           f"{item.source_account_id}")
        return differs

    def recorded(self, found: dict[str, Any]) -> ItemChanges:
        target = found.get("target") or found["payout"]
        return {"source_currency": found["payout"]["currency"],
                "source_amount": Decimal(found["payout"]["amount"]),
                "destination_currency": target["currency"],
                "destination_amount": Decimal(target["amount"]),
                "details": json.dumps({"payout request": found.get("id")})}


class AccountTransferFlow(_AccountRequestFlow[AccountTransferItem]):
    """A transfer request between two accounts, its entries checked once validated."""

    commit_call = Call.TRANSFER_REQUEST
    request = "transfer"
    noun = "transfer request"
    final_status = "validated"

    def money(self, item: AccountTransferItem) -> Money:
        return item.transfer

    def beneficiary(self, item: AccountTransferItem) -> str:
        return item.target_account_id

    def differences(self, entry: Entry[AccountTransferItem], found: dict[str, Any]
                    ) -> list[str]:
        item: AccountTransferItem = entry.item
        differs = _amount_differs("transfer", item.transfer, found)
        for side, named in (("source", item.source_account_id),
                            ("target", item.target_account_id)):
            held = str(found.get(f"{side}_account_id"))
            if not self._same_account(named, held):
                differs.append(f"{side} account {held}, the item {named}")
        if found.get("type") not in (None, item.type):
            differs.append(f"type {found.get('type')}, the item {item.type}")
        return differs

    def recorded(self, found: dict[str, Any]) -> ItemChanges:
        money = found["transfer"]
        return {"source_currency": money["currency"], "source_amount": Decimal(money["amount"]),
                "destination_currency": money["currency"],
                "destination_amount": Decimal(money["amount"]),
                "details": json.dumps({"transfer request": found.get("id")})}

    def problem_when_final(self, entry: Entry[AccountTransferItem], found: dict[str, Any]
                           ) -> str | None:
        """What is wrong with the transfer's entries: one debit on the source and one credit
        on the target, each for its amount and naming the other account."""
        transfer_id = str(found["id"])
        money = found["transfer"]
        source, target = str(found["source_account_id"]), str(found["target_account_id"])
        problems = []
        for account, way, counterpart in ((source, "debit", target),
                                          (target, "credit", source)):
            lines = self._statements.of(account, transfer_id)
            if len(lines) != 1:
                problems.append(f"{len(lines)} entries of {transfer_id} on {account}, "
                                f"expected one {way}")
                continue
            line = lines[0]
            held = line.get("entry") or {}
            if (line.get("credit_debit_indicator") != way
                    or not _same_money(held, money["amount"], money["currency"])
                    or line.get("counterpart_account_id") != counterpart):
                problems.append(
                    f"the entry of {transfer_id} on {account} is a "
                    f"{line.get('credit_debit_indicator')} of {held.get('amount')} "
                    f"{held.get('currency')} with {line.get('counterpart_account_id')}, "
                    f"expected a {way} of {money['amount']} {money['currency']} with "
                    f"{counterpart}")
        return "; ".join(problems) or None
