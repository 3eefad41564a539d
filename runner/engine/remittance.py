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
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from runner.engine.policy import Decision, RetryPolicy, decide
from runner.job.money_transfer import RemittanceItem
from runner.provider.errors import (
    AlreadyConfirmed,
    DuplicateExternalId,
    InsufficientBalance,
    ProviderConnectionError,
    ProviderError,
    QuotationExpired,
    Retry,
)
from runner.provider.http import ext
from runner.provider.money_transfer import MoneyTransferClient
from runner.state import StateStore

FINAL_CLASSES = {"3", "4", "7", "8", "9"}
QUOTATION_FIELDS = {"payer_id", "mode", "source", "destination"}


class Conflict(Exception):
    """The provider holds something under this external_id that is not this item."""


class InDoubt(Exception):
    """A call's outcome could not be learnt, even by lookup: try again in a later run."""


class ProviderDown(Exception):
    """The provider cannot be reached (or keeps answering "later"): stop, resume later."""


def _down(exc: ProviderError) -> bool:
    return isinstance(exc, ProviderConnectionError) or exc.retry is Retry.SAFE


@dataclass
class Entry:
    """An item of the job and its record in the state database (kept in step)."""

    external_id: str
    row: int
    item: RemittanceItem
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """The external_id of the current attempt: E, then E-r2, E-r3 ..."""
        attempt = int(self.record.get("attempt") or 1)
        return self.external_id if attempt == 1 else f"{self.external_id}-r{attempt}"


def summary_of(item: RemittanceItem) -> dict[str, Any]:
    """Who is paid and how, for reports: names and masked identifiers, nothing secret."""
    ident = item.credit_party_identifier.model_dump(exclude_none=True)
    return {"beneficiary": " ".join(x for x in (item.beneficiary.firstname,
                                                 item.beneficiary.lastname) if x),
            "payer_id": item.payer_id,
            "identifier": {k: mask(v) for k, v in ident.items()}}


def _given(fields: dict[str, Any] | None) -> dict[str, Any]:
    """The fields that have a value (to compare who is paid, whatever shows the empty)."""
    return {k: v for k, v in (fields or {}).items() if v is not None}


def mask(value: str) -> str:
    return "*" * max(0, len(value) - 4) + value[-4:]


class RemittanceFlow:
    def __init__(self, client: MoneyTransferClient, state: StateStore, run_id: int,
                 policy: RetryPolicy, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.state = state
        self.run_id = run_id
        self.policy = policy
        self.clock = clock

    # ------------------------------------------------------------ bookkeeping
    def update(self, entry: Entry, **values: Any) -> None:
        entry.record.update(values)
        self.state.update_item(entry.external_id, **values)

    def _fail(self, entry: Entry, error: ProviderError, **values: Any) -> None:
        """The provider refused the item: it fails with the provider's code and message."""
        if _down(error):
            raise ProviderDown(str(error)) from error
        self.update(entry, outcome="failed", error_code=error.code,
                     error_message=error.message, **values)

    def read(self, fetch: Callable[[], Any]) -> Any:
        try:
            return self.policy.call(fetch, idempotent=True)
        except ProviderError as exc:
            if _down(exc):
                raise ProviderDown(str(exc)) from exc
            raise InDoubt(f"lookup failed: {exc}") from exc

    def _post(self, entry: Entry, step: str, request: dict[str, Any],
              send: Callable[[], Any], lookup: Callable[[], Any | None]) -> Any:
        """Send a POST once its intent is committed; resolve doubt by ``lookup``.

        Returns the provider's object (answered, or found by lookup). Business refusals are
        raised for the caller; an unresolvable doubt raises InDoubt (the intent stays)."""
        for _ in range(self.policy.attempts):
            attempt = self.state.begin_attempt(self.run_id, entry.external_id, step, request)
            entry.record["intent"] = step
            try:
                answer = self.policy.call(send, idempotent=False)
            except DuplicateExternalId as exc:
                self._end(attempt, entry, "error", exc, resolved=False)
                found = self.read(lookup)
                if found is None:
                    raise InDoubt(f"{exc.code} yet not found by external_id") from exc
                return found
            except ProviderError as exc:
                if decide(exc, idempotent=False) is not Decision.LOOKUP:
                    self._end(attempt, entry, "error", exc)
                    raise
                self._end(attempt, entry, "in_doubt", exc, resolved=False)
                found = self.read(lookup)
                if found is not None:
                    return found
                continue  # clearly not found: the same POST, same external_id, again
            self.state.end_attempt(attempt, entry.external_id, "ok", http_status=200)
            entry.record["intent"] = None
            return answer
        raise InDoubt(f"{step}: no answer after {self.policy.attempts} tries")

    def _end(self, attempt: int, entry: Entry, result: str, exc: ProviderError,
             resolved: bool = True) -> None:
        self.state.end_attempt(attempt, entry.external_id, result, http_status=exc.status,
                               code=exc.code, message=exc.message, resolved=resolved)
        if resolved:
            entry.record["intent"] = None

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
