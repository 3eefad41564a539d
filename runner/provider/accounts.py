"""Client of the collection service's accounts (document 1): balances, entries, transfer
requests and payout requests, under ``/v1/account``.

An ``account`` argument is the account's external id as the document names it (the sandbox
takes the id or the label). The document gives status 201 for these GETs; the HTTP layer
takes any 2xx. Requests are found again by their ``external_reference``: ``find_*`` answer
None only when the provider clearly says there is no such request, and a request only when
it carries that reference (``runner.provider.lookups``).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partialmethod
from typing import Any
from urllib.parse import quote

from runner.provider.http import ProviderClient
from runner.provider.lookups import own

# The Balance types and the path segment of each (document 1, "Balances").
BALANCE_PATHS = {"AVAILABLE": "available", "EXPECTED": "expected",
                 "WAITING_FOR_VALIDATION": "waitingforvalidation", "UP_TO_DATE": "uptodate"}
MAX_PER_PAGE = 100
# The two kinds of request an account makes, by the path of each.
REQUEST_PATHS = {"transfer": "transfer-requests", "payout": "payout-requests"}
REQUEST_NOUNS = {"transfer": "transfer request", "payout": "payout request"}


def segment(value: str) -> str:
    """A caller's value as one path segment (a reference may hold ``/`` or ``?``)."""
    return quote(value, safe="")


class AccountClient(ProviderClient):
    prefix = "/v1/account"

    def account(self, account: str) -> Any | None:
        """The account with its payout bank accounts (``GET /v1/onboarding/accounts/{ref}``,
        which the sandbox adds where the document shows no read); None when there is none."""
        return self.find_at("/v1/onboarding", f"/accounts/{segment(account)}")

    # balances and entries
    def balances(self, account: str) -> list[Any]:
        """The four Balance objects of the account."""
        return list(self.get(f"/accounts/{segment(account)}/balances")["balances"])

    def balance(self, account: str, kind: str = "AVAILABLE") -> Any:
        """One Balance: ``kind`` is AVAILABLE, EXPECTED, WAITING_FOR_VALIDATION or
        UP_TO_DATE."""
        return self.get(f"/accounts/{segment(account)}/balances/{BALANCE_PATHS[kind]}")

    def entries(self, account: str, since: int = 0,
                per_page: int = MAX_PER_PAGE) -> Iterator[Any]:
        """The account's entries, oldest first, leaving out the first ``since`` (those a
        caller has already read: only the pages from there on are fetched)."""
        page = (since - 1) // per_page + 1 if since > 0 else 1
        skip = since - (page - 1) * per_page
        path = f"/accounts/{segment(account)}/entries"
        following: int | None = page
        while following is not None:
            answer = self.request("GET", path, params={"page": following,
                                                       "per_page": per_page})
            yield from answer.body[skip:]
            skip = 0
            header = answer.headers.get("X-Next-Page")
            following = int(header) if header else None

    # transfer requests and payout requests, alike but for their path
    def create_request(self, kind: str, body: dict[str, Any]) -> Any:
        """A request of ``kind`` (a key of ``REQUEST_PATHS``); its ``external_reference``
        is the external id it is found again by."""
        return self.request("POST", f"/{REQUEST_PATHS[kind]}", body=body,
                            external_id=body.get("external_reference")).body

    def retrieve_request(self, kind: str, reference: str) -> Any:
        """A request by its external reference."""
        return self.get(f"/{REQUEST_PATHS[kind]}/{segment(reference)}")

    def find_request(self, kind: str, reference: str) -> Any | None:
        """The request of that external reference, None when there is clearly none;
        OtherRecord when the provider answers one of another reference (by its id)."""
        return own(self.find(f"/{REQUEST_PATHS[kind]}/{segment(reference)}"),
                   "external_reference", reference, REQUEST_NOUNS[kind])

    create_transfer_request = partialmethod(create_request, "transfer")
    transfer_request = partialmethod(retrieve_request, "transfer")
    find_transfer_request = partialmethod(find_request, "transfer")
    create_payout_request = partialmethod(create_request, "payout")
    payout_request = partialmethod(retrieve_request, "payout")
    find_payout_request = partialmethod(find_request, "payout")
