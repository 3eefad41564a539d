"""One onboarding chain, each link exactly once: company -> merchant -> account (document 1's
order), resumable between any two links.

Each link is a POST whose intent is committed first (``Flow._post``). What identifies it is
the name the provider keeps unique: a company's name, a merchant's merchant_external_id (the
item's external_id, derived from the job like every external_id), an account's label. So a
link in doubt (answer lost, timeout, 5xx, or a run killed in flight) is looked up by that
name before anything is sent again, and a 2001201 answer ("already exists") is looked up too:

- company: found by name and the integrator's own (not 1000403): adopted. The document shows
  nothing else of a company to compare (no template_id in its answer). A lookup answering a
  company of another name (or a merchant of another merchant_external_id) is never taken for
  "not found": the item needs a person (``runner.provider.lookups``, rule 8).
- merchant: adopted when it belongs to this chain's company and has the item's name,
  template_id and custom_data; else a conflict.
- account: the document gives no retrieval of an account, only its balances by label, which
  show neither its company nor its id. An account of that label is adopted only when this
  item asked for it before (an earlier account POST answered or lost, per the attempts
  table), is the integrator's own, and, when the account and the merchant share a template,
  holds the merchant's currency; else a conflict. Its id is known when the creation's answer
  was read, else only its label.

The ids of the chain are kept in the item's ``details`` (JSON) as each link is made, so a run
killed in the middle resumes at the next link. An item given an existing ``company_id`` starts
at the merchant. The whole chain runs in the prepare phase: no money moves, so there is
nothing for the pre-flight to count.

Steps: new -> company -> merchant -> final. Outcomes: pending, settled (every link made),
failed (a refusal, with the provider's code and message; the next run continues from the
link that failed), conflict.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NoReturn, Unpack

from runner import lifecycle
from runner.engine.flow import Entry, Flow
from runner.errors import (
    BusinessRefusal,
    ItemConflict,
    ItemInDoubt,
    ProviderError,
    ReferenceTaken,
)
from runner.job.collection import OnboardingItem
from runner.lifecycle import Call, Changes, Reason, State, Step
from runner.provider.lookups import own
from runner.provider.onboarding import OnboardingClient
from runner.state import ItemChanges, ItemRecord

FOREIGN = "_foreign"  # a lookup's answer: it exists, and belongs to another integrator


def _visible(fetch: Callable[[str], Any | None], ref: str) -> Callable[[], Any | None]:
    """A lookup that tells "another integrator's" (1000403) from a failure."""
    def look() -> Any | None:
        try:
            return fetch(ref)
        except BusinessRefusal as exc:
            if exc.status == 403:
                return {FOREIGN: f"{exc.code} {exc.message}"}
            raise
    return look


class OnboardingFlow(Flow[OnboardingItem, OnboardingClient]):
    commit_call = Call.ACCOUNT

    def summary_of(self, item: OnboardingItem) -> dict[str, Any]:
        company = item.company.name if item.company is not None else item.company_id
        identifier = {"company": company}
        if item.account is not None:
            identifier["account"] = item.account.label
        return {"beneficiary": item.merchant.name, "identifier": identifier}

    def needs_prepare(self, entry: Entry[OnboardingItem]) -> bool:
        return lifecycle.state(entry.record) in lifecycle.SENDABLE | {State.IN_DOUBT}

    def found(self, record: ItemRecord, ref: str | None = None) -> ItemChanges | None:
        """The merchant, by its merchant_external_id (the item's external_id): the link that
        names the item. Only that it exists is compared (the document shows no status)."""
        merchant = self.read(lambda: own(self.client.find_merchant(record.external_id),
                                         "merchant_external_id", record.external_id,
                                         "merchant"))
        return None if merchant is None else {}

    # ------------------------------------------------------------ the chain
    def chain(self, entry: Entry[OnboardingItem]) -> dict[str, Any]:
        return dict(json.loads(entry.record.details or "{}"))

    def _keep(self, entry: Entry[OnboardingItem], chain: dict[str, Any], changes: Changes,
              **facts: Unpack[ItemChanges]) -> None:
        """The chain so far, with the link reached (``changes``: its move)."""
        reached = changes["step"]
        facts.update({"details": json.dumps(chain),
                      "status": "onboarded" if reached == Step.FINAL else reached})
        self.move(entry, changes, **facts)

    def prepare(self, entry: Entry[OnboardingItem]) -> None:
        item = entry.item
        chain = self.chain(entry)
        if "company_id" not in chain and not self._company(entry, chain):
            return
        if "merchant_id" not in chain and not self._merchant(entry, chain):
            return
        if item.account is not None and "account_label" not in chain and \
                not self._account(entry, chain):
            return
        self._keep(entry, chain, lifecycle.settled(entry.record),
                   provider_ref=entry.external_id)

    def _make(self, entry: Entry[OnboardingItem], call: Call, what: str, body: dict[str, Any],
              send: Callable[[], Any], lookup: Callable[[], Any | None]) -> Any | None:
        """The link made or found (None: the item failed). A link in doubt from an earlier
        run is looked up first; a name already used is looked up, for the caller to adopt
        what it finds or call it a conflict. Another integrator's link (``what``, as
        "company 'Acme'") is a conflict here."""
        link = self._made_or_found(entry, call, body, send, lookup)
        if link is not None and FOREIGN in link:
            self._conflict(entry, f"{what} exists and is another integrator's "
                                  f"({link[FOREIGN]})")
        return link

    def _made_or_found(self, entry: Entry[OnboardingItem], call: Call, body: dict[str, Any],
                       send: Callable[[], Any], lookup: Callable[[], Any | None]
                       ) -> Any | None:
        if entry.record.intent == call:
            found = self.read(lookup)
            if found is not None:
                return found
        try:
            return self._post(entry, call, body, send, lookup)
        except ReferenceTaken as exc:
            try:
                found = self.read(lookup)
            except ItemInDoubt:  # nothing was made by this call: it fails, to be tried again
                found = None
            if found is not None:
                return found
            self._fail(entry, exc)
        except ProviderError as exc:
            self._fail(entry, exc)
        return None

    def _asked(self, entry: Entry[OnboardingItem], call: Call) -> bool:
        """True when a POST of ``call`` for this item may have made something: it was
        answered, or its answer was lost (a refusal made nothing)."""
        return any(a.step == call and a.result in (None, "ok", "in_doubt")
                   for a in self.state.attempts(entry.external_id))

    def _conflict(self, entry: Entry[OnboardingItem], message: str) -> NoReturn:
        self.move(entry, lifecycle.conflict(entry.record, Reason.CONFLICT, message))
        raise ItemConflict(entry.external_id)

    def _company(self, entry: Entry[OnboardingItem], chain: dict[str, Any]) -> bool:
        item = entry.item
        if item.company is None:  # an existing company: the chain starts at the merchant
            chain["company_id"] = item.company_id
            self._keep(entry, chain, lifecycle.answered(entry.record, Step.COMPANY))
            return True
        name = item.company.name
        body = {"template_id": item.company.template_id, "name": name}

        def lookup() -> Any | None:
            found = _visible(self.client.find_company, name)()
            # Only the company of that very name is this one (a provider may match an id).
            return found if found is not None and FOREIGN in found else \
                own(found, "name", name, "company")

        company = self._make(entry, Call.COMPANY, f"company {name!r}", body,
                             lambda: self.client.create_company(body), lookup)
        if company is None:
            return False
        chain.update(company_id=company["id"])
        self._keep(entry, chain, lifecycle.answered(entry.record, Step.COMPANY))
        return True

    def _merchant(self, entry: Entry[OnboardingItem], chain: dict[str, Any]) -> bool:
        item = entry.item
        ref = entry.external_id
        body: dict[str, Any] = {"company_id": chain["company_id"], "merchant_external_id": ref,
                                "name": item.merchant.name,
                                "template_id": item.merchant.template_id}
        if item.merchant.custom_data is not None:
            body["custom_data"] = item.merchant.custom_data

        def lookup() -> Any | None:
            found = _visible(self.client.find_merchant, ref)()
            # Only ours by merchant_external_id (a provider may match an id or a name).
            return found if found is not None and FOREIGN in found else \
                own(found, "merchant_external_id", ref, "merchant")

        merchant = self._make(entry, Call.MERCHANT, f"merchant {ref!r}", body,
                              lambda: self.client.create_merchant(body), lookup)
        if merchant is None:
            return False
        theirs = {k: merchant.get(k) for k in ("company_id", "name", "template_id")}
        ours = {k: body[k] for k in theirs}
        if theirs != ours or merchant.get("custom_data") != item.merchant.custom_data:
            differ = ", ".join(f"{k} {theirs[k]!r} (this item: {ours[k]!r})"
                               for k in theirs if theirs[k] != ours[k]) or "custom_data"
            self._conflict(entry, f"merchant {ref!r} at the provider is not this item's: "
                                  f"{differ}")
        chain.update(merchant_id=merchant["id"], merchant_currency=merchant.get("currency"))
        self._keep(entry, chain, lifecycle.answered(entry.record, Step.MERCHANT))
        return True

    def _account(self, entry: Entry[OnboardingItem], chain: dict[str, Any]) -> bool:
        account = entry.item.account
        assert account is not None  # asked only for an item with an account
        label = account.label
        body: dict[str, Any] = {
            "company_id": chain["company_id"],
            **account.model_dump(exclude_none=True, exclude={"payout_bank_accounts"})}
        if account.payout_bank_accounts is not None:
            body["payout_bank_accounts"] = [b.model_dump(exclude_none=True)
                                            for b in account.payout_bank_accounts]
        made = self._make(entry, Call.ACCOUNT, f"account {label!r}", body,
                          lambda: self.client.create_account(body),
                          _visible(self.client.account_balances, label))
        if made is None:
            return False
        if "id" not in made:  # found by its balances: all the document lets us compare
            if not self._asked(entry, Call.ACCOUNT):
                self._conflict(entry, f"an account labelled {label!r} exists, and this item "
                                      f"never asked for one: it is not this item's")
            currencies = {b["balance"]["currency"] for b in made.get("balances") or []}
            same_template = account.template_id == entry.item.merchant.template_id
            if same_template and chain.get("merchant_currency") not in (None, *currencies):
                self._conflict(entry, f"account {label!r} at the provider holds "
                                      f"{', '.join(sorted(currencies))}, not "
                                      f"{chain['merchant_currency']} as template "
                                      f"{account.template_id} gives")
        chain.update(account_id=made.get("id"), account_label=label)
        return True  # kept with the final step
