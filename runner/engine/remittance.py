"""One remittance, exactly once: quotation -> transaction -> confirm -> final status.

Every call follows the exactly-once rules of DESIGN.md. The intent (step, external_id,
request) is committed before a POST and the outcome after it (``StateStore.begin_attempt``
/ ``end_attempt``); an intent without an outcome is in doubt and, on the next pass or the
next run, is resolved by looking the resource up by its external_id before anything is sent
again. A 1007001 answer is resolved the same way: adopted when it matches the item, a
conflict when not. A quotation that expired before its transaction was confirmed is
replaced by a ``-r2`` (``-r3`` ...) attempt, and only once the provider has said the earlier
transaction can no longer be confirmed (1008003 / 1007004).

Steps: new -> quoted -> created -> confirmed -> final. Outcomes: pending, awaiting_confirm,
settled (COMPLETED), failed (refused or ended REJECTED, DECLINED, CANCELLED, REVERSED),
conflict (needs a person).
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

from runner.engine.flow import Conflict, Entry, Flow, mask
from runner.job.money_transfer import RemittanceItem
from runner.provider.errors import (
    AlreadyConfirmed,
    InsufficientBalance,
    ProviderError,
    QuotationExpired,
)
from runner.provider.http import ext
from runner.provider.money_transfer import MoneyTransferClient

FINAL_CLASSES = {"3", "4", "7", "8", "9"}
QUOTATION_FIELDS = {"payer_id", "mode", "source", "destination"}


def _given(fields: dict[str, Any] | None) -> dict[str, Any]:
    """The fields that have a value (to compare who is paid, whatever shows the empty)."""
    return {k: v for k, v in (fields or {}).items() if v is not None}


class RemittanceFlow(Flow):
    kind = "remittance"
    client: MoneyTransferClient

    def summary_of(self, item: RemittanceItem) -> dict[str, Any]:
        ident = item.credit_party_identifier.model_dump(exclude_none=True)
        return {"beneficiary": " ".join(x for x in (item.beneficiary.firstname,
                                                     item.beneficiary.lastname) if x),
                "payer_id": item.payer_id,
                "identifier": {k: mask(v) for k, v in ident.items()}}

    def needs_prepare(self, entry: Entry) -> bool:
        return entry.record["step"] in ("new", "quoted")

    def ready(self, entry: Entry) -> bool:
        return entry.record["step"] == "created"

    def commit(self, entry: Entry) -> None:
        self.confirm(entry)

    def cost(self, entry: Entry) -> tuple[str, Decimal] | None:
        r = entry.record
        return r["source_currency"], Decimal(r["source_amount"]) + Decimal(r["fee"])

    def planned(self, entry: Entry) -> tuple[str, Decimal] | None:
        item, r = entry.item, entry.record
        amount = item.source.amount if item.mode == "SOURCE_AMOUNT" else r.get("source_amount")
        return (item.source.currency, Decimal(amount)) if amount is not None else None

    def usable(self) -> dict[str, Decimal]:
        return {b["currency"]: b["available_balance"] + b.get("credit_facility", 0)
                for b in self.read(self.client.balances)}

    # ------------------------------------------------------------ steps
    def prepare(self, entry: Entry) -> None:
        """Quote and create the transaction (steps new -> quoted -> created)."""
        while entry.record["step"] in ("new", "quoted"):
            if entry.record["step"] == "new":
                if not self._quote(entry):
                    return
            elif not self._create(entry):
                return

    def _quote(self, entry: Entry) -> bool:
        ref = entry.ref
        body = {"external_id": ref,
                **entry.item.model_dump(include=QUOTATION_FIELDS, exclude_none=True)}
        found = None
        if entry.record.get("intent") == "quotation":
            found = self.read(lambda: self.client.find_quotation(ref))
        try:
            quotation = found or self._post(
                entry, "quotation", body, lambda: self.client.create_quotation(body),
                lambda: self.client.find_quotation(ref))
        except ProviderError as exc:
            self._fail(entry, exc)
            return False
        self._check_quotation(entry, quotation)
        self.update(entry, step="quoted", intent=None, quotation_id=quotation["id"],
                     provider_ref=ref, source_currency=quotation["sent_amount"]["currency"],
                     source_amount=str(quotation["sent_amount"]["amount"]),
                     fee=str(quotation["fee"]["amount"]),
                     destination_currency=quotation["destination"]["currency"],
                     destination_amount=str(quotation["destination"]["amount"]),
                     expires_at=quotation["expiration_date"], outcome="pending",
                     error_code=None, error_message=None)
        return True

    def _check_quotation(self, entry: Entry, quotation: dict[str, Any]) -> None:
        item = entry.item
        same = (quotation["payer"]["id"] == item.payer_id and quotation["mode"] == item.mode
                and quotation["source"]["currency"] == item.source.currency
                and quotation["destination"]["currency"] == item.destination.currency)
        if item.mode == "SOURCE_AMOUNT":
            same = same and Decimal(quotation["source"]["amount"]) == item.source.amount
        else:
            same = same and Decimal(quotation["destination"]["amount"]) == \
                item.destination.amount
        if not same:  # the doubt is over: what the provider holds is known, and not ours
            self.update(entry, outcome="conflict", error_code="conflict", intent=None,
                         error_message=f"quotation {entry.ref} at the provider does not match "
                                       f"this item")
            raise Conflict(entry.external_id)

    def _expired(self, entry: Entry) -> bool:
        expires = entry.record.get("expires_at")
        if not expires:
            return False
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.clock())) > str(expires)

    def _next_attempt(self, entry: Entry) -> None:
        self.update(entry, step="new", intent=None,
                     attempt=int(entry.record.get("attempt") or 1) + 1,
                     quotation_id=None, transaction_id=None)

    def _create(self, entry: Entry) -> bool:
        ref = entry.ref
        if entry.record.get("intent") != "transaction" and self._expired(entry):
            self._next_attempt(entry)  # no transaction was asked under this quotation
            return True
        body = {"external_id": ref, **entry.item.model_dump(exclude=QUOTATION_FIELDS,
                                                            exclude_none=True)}
        found = None
        if entry.record.get("intent") == "transaction":
            found = self.read(lambda: self.client.find_transaction(ref))
        try:
            txn = found or self._post(
                entry, "transaction", body,
                lambda: self.client.create_transaction(ext(ref), body),
                lambda: self.client.find_transaction(ref))
        except QuotationExpired:
            self._next_attempt(entry)
            return True
        except ProviderError as exc:
            self._fail(entry, exc)
            return False
        if txn["external_id"] != ref or Decimal(txn["source"]["amount"]) != Decimal(
                entry.record["source_amount"]) or _given(txn["credit_party_identifier"]) != \
                _given(entry.item.credit_party_identifier.model_dump()):
            self.update(entry, outcome="conflict", error_code="conflict", intent=None,
                         error_message=f"transaction {ref} at the provider does not match")
            raise Conflict(entry.external_id)
        self._status(entry, txn, step="created")
        return True

    def _status(self, entry: Entry, txn: dict[str, Any], step: str) -> None:
        klass = str(txn["status_class"])
        values: dict[str, Any] = {"step": step, "intent": None, "transaction_id": txn["id"],
                                  "status": txn["status"], "status_class": klass,
                                  "status_message": txn["status_message"]}
        if klass in FINAL_CLASSES:
            values["step"] = "final"
            values["outcome"] = "settled" if klass == "7" else "failed"
            if klass != "7":
                values["error_code"] = txn["status"]
                values["error_message"] = txn["status_message"]
        elif step == "created":
            values["outcome"] = "pending"
        self.update(entry, **values)

    def confirm(self, entry: Entry) -> None:
        """Confirm a created transaction (the money moves); handles expiry with -rN."""
        while entry.record["step"] in ("new", "quoted", "created"):
            if entry.record["step"] != "created":
                self.prepare(entry)
                if entry.record["step"] != "created":
                    return
            if not self._confirm_once(entry):
                return

    def _confirm_once(self, entry: Entry) -> bool:
        """One confirm; True when a new attempt (-rN) was started and needs confirming."""
        ref = entry.ref
        if entry.record.get("intent") == "confirm":
            txn = self.read(lambda: self.client.find_transaction(ref))
            if txn is not None and txn["status"] != "10000":
                self._status(entry, txn, step="confirmed")
                return False
        try:
            txn = self._post(entry, "confirm", {"transaction": ref},
                             lambda: self.client.confirm_transaction(ext(ref), ref),
                             lambda: self._confirmed_or_none(ref))
        except AlreadyConfirmed:
            txn = self.read(lambda: self.client.find_transaction(ref))
        except QuotationExpired:
            self._next_attempt(entry)  # proved unconfirmable: a new attempt may be made
            return True
        except InsufficientBalance as exc:
            self._fail(entry, exc)
            return False
        except ProviderError as exc:
            txn = self.read(lambda: self.client.find_transaction(ref))
            if txn is None or str(txn["status_class"]) not in FINAL_CLASSES:
                self._fail(entry, exc)
                return False
        self._status(entry, txn, step="confirmed")
        return False

    def settle_doubt(self, entry: Entry) -> None:
        """Resolve a confirm whose answer was lost, by lookup, without confirming anything:
        confirmed -> its status; still CREATED -> the doubt is over (nothing happened)."""
        if entry.record.get("intent") != "confirm":
            return
        txn = self.read(lambda: self.client.find_transaction(entry.ref))
        if txn is not None and txn["status"] != "10000":
            self._status(entry, txn, step="confirmed")
        elif txn is not None:
            self.update(entry, intent=None)

    def _confirmed_or_none(self, ref: str) -> Any | None:
        """A lost confirm is resolved by the transaction's status: still CREATED means the
        confirm did not happen (so it may be sent again)."""
        txn = self.client.find_transaction(ref)
        if txn is None or txn["status"] == "10000":
            return None
        return txn

    def poll(self, entry: Entry) -> bool:
        """Read the status once; True when the item is final."""
        txn = self.read(lambda: self.client.find_transaction(entry.ref))
        if txn is not None:
            self._status(entry, txn, step="confirmed")
        return entry.record["step"] == "final"
