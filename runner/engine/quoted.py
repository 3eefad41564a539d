"""Quotation -> creation -> confirm -> final status, exactly once: the shape the money
transfer service (transactions) and the merchant payment service (payments) share.

The quotation and the created object share the item's external_id (``-r2``, ``-r3`` ...
after an expiry, and only once the provider has said the earlier attempt can no longer be
confirmed: 1008003 / 1007004, or the quotation expired before anything was created under
it). Every POST is preceded by its intent and, when in doubt, resolved by a lookup by
external_id (``Flow.post``); what a lookup or a 1007001 finds is adopted only when it is
this item, else the item is a conflict. Confirm is the commit. Status classes 2, 5 and 6
are waited for; 7 (COMPLETED) settles the item; 3, 4, 8, 9 fail it with the provider's
status.

Every answer naming the created object (its creation, its confirm, a lookup, a poll) is
compared with what runner sent and recorded for the item (``runner.engine.answers``): its
external_id, amounts and currencies (the quotation's, as recorded), and, where the item's
row is at hand (not for a poll, which reads the state alone), whom it pays, identifiers in
their canonical form (``runner.identifiers``). Any difference makes the item a conflict,
for a person. A status class that no document names (1 to 9) is taken for money that may
have moved: the item is polled on, shown unknown (``Flow.unknown_status``), and keeps the
run from exiting 0 until a poll reads a known one.

Steps: new -> quoted -> created -> confirmed -> final. The calls are the service client's
(``runner.provider.quoted``); a subclass names its created object (``created``), the fields of
its quotation request, what it keeps of a quotation, how it recognises its own quotation, and
the names of its object's parts that are compared (``sides``, ``identified``, ``named``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from runner import lifecycle
from runner.engine import answers
from runner.engine.flow import Entry, Flow, ItemT
from runner.errors import AlreadyConfirmed, ItemConflict, ProviderError, QuotationExpired
from runner.lifecycle import Call, Outcome, Reason, State, Step
from runner.money import shown
from runner.provider.http import ext
from runner.provider.quoted import QuotedServiceClient
from runner.state import ItemChanges, ItemRecord

FINAL_CLASSES = {"3", "4", "7", "8", "9"}
KNOWN_CLASSES = frozenset("123456789")  # the lifecycle of docs/kinds.md
# REJECTED, DECLINED and REVERSED: final, and nothing paid or the money given back, so a
# fixed row may be paid again (a cancellation is customer care's decision: never sent again).
UNPAID_CLASSES = {"3", "8", "9"}
# Refusals of the moment, which may pass as the item is: the payer unavailable, a balance
# short (ours, or the consumer's), a time or period limit reached.
TRANSIENT = {"30400", "90400", "30500", "90273", "90270", "90331", "90332", "90333", "90334"}
CREATED = "10000"

ClientT = TypeVar("ClientT", bound=QuotedServiceClient)


class QuotedFlow(Flow[ItemT, ClientT]):
    created: Call  # the creation's call: a transaction, a payment
    quotation_fields: frozenset[str] = frozenset()
    # The created object's parts compared with the item: its two sides (the one kept in the
    # state's source columns, then the destination's), the party it is identified by (and
    # its fields that identify nobody), and the party named.
    sides: tuple[str, str] = ("", "")
    identified: str = ""
    not_identifying: tuple[str, ...] = ()
    named: str = ""
    doubt_settled_from_state = True  # a confirm is looked up by its external_id alone

    # ------------------------------------------------------------ what a subclass says
    def quotation_matches(self, entry: Entry[ItemT], quotation: dict[str, Any]) -> bool:
        raise NotImplementedError

    def quoted(self, quotation: dict[str, Any]) -> ItemChanges:
        """The state columns a quotation fills (amounts, currencies, fee)."""
        raise NotImplementedError

    def compared(self, entry: Entry[ItemT], obj: dict[str, Any]) -> list[answers.Compared]:
        """The fields of the created object compared with what runner sent or recorded:
        both sides against the quotation's as recorded, and, where the item's row is at
        hand (``Entry.read``), its party's identifiers and names."""
        r, (source, destination) = entry.record, self.sides
        compared = [*answers.side(source, r.source_amount, r.source_currency, obj),
                    *answers.side(destination, r.destination_amount, r.destination_currency,
                                  obj)]
        if entry.read:
            item = entry.item
            compared += answers.identifiers(self.identified,
                                            getattr(item, self.identified).model_dump(), obj,
                                            self.not_identifying)
            compared += answers.names(self.named, getattr(item, self.named).model_dump(), obj)
        return compared

    def differences(self, entry: Entry[ItemT], obj: dict[str, Any]) -> list[str]:
        """What the provider's object says otherwise than the item (each a conflict)."""
        return answers.differences(entry.ref, obj, self.compared(entry, obj))

    def kept(self, obj: dict[str, Any]) -> ItemChanges:
        """More state columns taken from the object at each status (e.g. details)."""
        return {}

    # ------------------------------------------------------------ the engine's calls
    def needs_prepare(self, entry: Entry[ItemT]) -> bool:
        return entry.record.step in (Step.NEW, Step.QUOTED)

    def ready(self, entry: Entry[ItemT]) -> bool:
        return entry.record.step == Step.CREATED

    def commit(self, entry: Entry[ItemT]) -> None:
        self.confirm(entry)

    def prepare(self, entry: Entry[ItemT]) -> None:
        """Quote and create (steps new -> quoted -> created)."""
        while entry.record.step in (Step.NEW, Step.QUOTED):
            if entry.record.step == Step.NEW:
                if not self._quote(entry):
                    return
            elif not self._create(entry):
                return

    def confirm(self, entry: Entry[ItemT]) -> None:
        """Confirm what was created (the money moves); -rN after an expiry."""
        while entry.record.step in (Step.NEW, Step.QUOTED, Step.CREATED):
            if entry.record.step != Step.CREATED:
                self.prepare(entry)
                if entry.record.step != Step.CREATED:
                    return
            if not self._confirm_once(entry):
                return

    def settle_doubt(self, entry: Entry[ItemT]) -> None:
        """Resolve a confirm whose answer was lost, by lookup, without confirming anything:
        confirmed -> its status; still CREATED -> the doubt is over (nothing happened). From
        the state alone (``doubt_settled_from_state``): the object is found by the item's
        external_id, and the item (its row) is never read."""
        if entry.record.intent != Call.CONFIRM:
            return
        obj = self.read(lambda: self.client.find_made(entry.ref))
        if obj is not None and obj["status"] != CREATED:
            self._status(entry, obj)
        elif obj is not None:
            self.move(entry, lifecycle.not_found(entry.record))

    def poll(self, entry: Entry[ItemT]) -> bool:
        """Read the status once; True when the item is final."""
        obj = self.read(lambda: self.client.find_made(entry.ref))
        if obj is not None:
            self._status(entry, obj)
        return entry.record.step == Step.FINAL

    # ------------------------------------------------------------ steps
    def _quote(self, entry: Entry[ItemT]) -> bool:
        ref = entry.ref
        body = {"external_id": ref,
                **entry.item.model_dump(include=set(self.quotation_fields), exclude_none=True)}
        found = None
        if entry.record.intent == Call.QUOTATION:
            found = self.read(lambda: self.client.find_quotation(ref))
        try:
            quotation = found or self._post(entry, Call.QUOTATION, body,
                                            lambda: self.client.create_quotation(body),
                                            lambda: self.client.find_quotation(ref))
        except ProviderError as exc:
            self._fail(entry, exc)
            return False
        if not self.quotation_matches(entry, quotation):
            self._conflict(entry, f"quotation {ref} at the provider does not match this item")
        facts = self.quoted(quotation)
        facts.update({"quotation_id": quotation["id"], "provider_ref": ref,
                      "expires_at": quotation["expiration_date"]})
        self.move(entry, lifecycle.answered(entry.record, Step.QUOTED), **facts)
        return True

    def _conflict(self, entry: Entry[ItemT], message: str) -> NoReturn:
        # The doubt is over: what the provider holds is known, and it is not this item.
        self.move(entry, lifecycle.conflict(entry.record, Reason.CONFLICT, message))
        raise ItemConflict(entry.external_id)

    def _expired(self, entry: Entry[ItemT]) -> bool:
        expires = entry.record.expires_at
        if not expires:
            return False
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.clock())) > expires

    def _next_attempt(self, entry: Entry[ItemT]) -> None:
        self.move(entry, lifecycle.expired(entry.record), quotation_id=None,
                  transaction_id=None)

    def _create(self, entry: Entry[ItemT]) -> bool:
        ref = entry.ref
        if entry.record.intent != self.created and self._expired(entry):
            self._next_attempt(entry)  # nothing was asked under this quotation
            return True
        body = {"external_id": ref, **entry.item.model_dump(exclude=set(self.quotation_fields),
                                                            exclude_none=True)}
        found = None
        if entry.record.intent == self.created:
            found = self.read(lambda: self.client.find_made(ref))
        try:
            obj = found or self._post(entry, self.created, body,
                                      lambda: self.client.create_from_quotation(ext(ref), body),
                                      lambda: self.client.find_made(ref))
        except QuotationExpired:
            self._next_attempt(entry)
            return True
        except ProviderError as exc:
            self._fail(entry, exc)
            return False
        self._status(entry, obj, made=True)
        return True

    def _status(self, entry: Entry[ItemT], obj: dict[str, Any], made: bool = False) -> None:
        """The item as the provider's object shows it: a conflict where it differs from the
        item; final (settled by COMPLETED, failed by a rejection, a decline, a reversal or
        a cancellation), else made (its confirm to come) or confirmed (on its way); polled
        on, shown unknown, for a status class no document names."""
        differs = self.differences(entry, obj)
        if differs:  # the doubt is over: what the provider holds is known, and not ours
            self._conflict(entry, f"{self.created} {entry.ref} at the provider does not "
                                  f"match this item: {'; '.join(differs)}")
        record, klass = entry.record, str(obj["status_class"])
        facts: ItemChanges = {"transaction_id": obj["id"], "status": obj["status"],
                              "status_class": klass, "status_message": obj.get("status_message")}
        facts.update(self.kept(obj))
        if klass not in KNOWN_CLASSES:
            self.move(entry, self.unknown_status(
                entry, f"{self.created} {entry.ref}",
                f"{shown(obj['status'])} of class {shown(klass)}"), **facts)
            return
        if klass == "7":
            changes = lifecycle.settled(record)
        elif klass in FINAL_CLASSES:
            changes = lifecycle.failed(record, obj["status"], obj.get("status_message"))
        elif made:
            changes = lifecycle.answered(record, Step.CREATED)
        else:
            changes = lifecycle.confirmed(record)
        self.move(entry, changes, **facts)

    def _confirm_once(self, entry: Entry[ItemT]) -> bool:
        """One confirm; True when a new attempt (-rN) was started and needs confirming."""
        ref = entry.ref
        find: Callable[[], Any] = lambda: self.client.find_made(ref)  # noqa: E731
        if entry.record.intent == Call.CONFIRM:
            obj = self.read(find)
            if obj is not None and obj["status"] != CREATED:
                self._status(entry, obj)
                return False
        try:
            obj = self._post(entry, Call.CONFIRM, {self.created: ref},
                             lambda: self.client.confirm(ext(ref), ref),
                             lambda: self._confirmed_or_none(ref))
        except AlreadyConfirmed:
            obj = self.read(find)
        except QuotationExpired:
            self._next_attempt(entry)  # proved unconfirmable: a new attempt may be made
            return True
        except ProviderError as exc:
            obj = self.read(find)
            if obj is None or str(obj["status_class"]) not in FINAL_CLASSES:
                self._fail(entry, exc)
                return False
        self._status(entry, obj)
        return False

    # ------------------------------------------------------------ retries, reconciliation
    def retryable(self, record: ItemRecord) -> bool:
        return (lifecycle.state(record) is State.FAILED
                and record.status_class in UNPAID_CLASSES and not record.earlier_paid)

    def transient(self, record: ItemRecord) -> bool:
        return record.status in TRANSIENT

    def outcome_of(self, held: ItemChanges) -> Outcome | None:
        klass = str(held.get("status_class"))
        if klass == "7":
            return Outcome.SETTLED
        return Outcome.FAILED if klass in FINAL_CLASSES else None

    def unpaid(self, record: ItemRecord, ref: str | None = None) -> str | None:
        ref = ref or record.ref
        obj = self.read(lambda: self.client.find_made(ref))
        if obj is None:
            return f"the provider does not find {self.created} {ref}"
        if str(obj["status_class"]) not in UNPAID_CLASSES:
            return f"the provider shows {ref} {obj['status']} {obj['status_message']}"
        return None

    def found(self, record: ItemRecord, ref: str | None = None) -> ItemChanges | None:
        ref = ref or record.ref
        obj = self.read(lambda: self.client.find_made(ref))
        if obj is None:
            return None
        return {**self.quoted(obj), "transaction_id": obj["id"], "status": obj["status"],
                "status_class": str(obj["status_class"]),
                "status_message": obj.get("status_message")}

    def _confirmed_or_none(self, ref: str) -> Any | None:
        """A lost confirm is resolved by the object's status: still CREATED means the
        confirm did not happen (so it may be sent again)."""
        obj = self.client.find_made(ref)
        if obj is None or obj["status"] == CREATED:
            return None
        return obj
