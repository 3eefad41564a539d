"""The collection service's accounts (document 1): balances, entries, transfer requests and
payout requests, under ``/v1/account/``.

``{account_external_id}`` in a path is the account's id or its label. Balances, entries and
the retrievals answer 201, as the document shows. Money moves through entries only (see
models.py): a request exceeding the AVAILABLE balance is refused (2001201), and one that is
accepted waits ``validation_delay`` seconds on the sandbox clock before it is validated.

Payouts have test triggers on the last six digits of the payout bank account's IBAN: 999301
refused by the bank (2001301, nothing done), 999401 technical error with the payout created
nevertheless (2001401: look it up by its reference), 999501 bank unavailable (2001501,
nothing done).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request

from runner.sandbox.accounts import models as ledger
from runner.sandbox.accounts import schemas as a
from runner.sandbox.core.clock import iso
from runner.sandbox.core.errors import JSON, ApiError
from runner.sandbox.core.pagination import paginate
from runner.sandbox.core.routing import DecimalRoute, current
from runner.sandbox.core.schemas import AmountIn
from runner.sandbox.core.store import Store
from runner.sandbox.onboarding import models as records

if TYPE_CHECKING:
    from runner.sandbox.app import Sandbox

router = APIRouter(prefix="/v1/account", route_class=DecimalRoute,
                   tags=["collection service: accounts"])
Page = int | None
TRANSFER_TYPES = ("ScheduledTransferOut",)
PAYOUT_TRANSFER_TYPE = "Payout"  # the transfer request under a payout request
BALANCE_PATHS = {"available": "AVAILABLE", "expected": "EXPECTED",
                 "waitingforvalidation": "WAITING_FOR_VALIDATION", "uptodate": "UP_TO_DATE"}
REFUSED, IN_DOUBT, BANK_UNAVAILABLE = "999301", "999401", "999501"


def _amount(money: AmountIn, field: str, currency: str) -> Decimal:
    """The amount as kept: positive, in the account's currency, at most 2 decimals."""
    if money.amount <= 0:
        raise ApiError("2001101", f"{field}.amount must be positive")
    try:
        kept = money.amount.quantize(ledger.CENT)
    except InvalidOperation:  # more digits than any balance has
        raise ApiError("2001101", f"{field}.amount is too large") from None
    if money.amount != kept:
        raise ApiError("2001101", f"{field}.amount has more than 2 decimals")
    if money.currency != currency:
        raise ApiError("2001101", f"{field}.currency must be {currency}, the currency of the "
                                  f"source account")
    return kept


def _source(store: Store, table: str, reference: str, account_ref: str,
            ) -> tuple[int, dict[str, Any]]:
    """The source account of a new request, whose reference must not have been used."""
    if reference in store.by_ext[table]:
        raise ApiError("2001201", f"External reference has already been used: {reference}")
    src = records.account(store, account_ref, missing="1001001")
    return src, store.tables["accounts"][src]


def _covered(available: Decimal, amount: Decimal, currency: str) -> None:
    if amount > available:
        raise ApiError("2001201", f"insufficient AVAILABLE balance ({available} {currency})")


# ---------------------------------------------------------------- balances and entries
@router.get("/accounts/{account_external_id}/balances", status_code=201,
            response_model=a.AccountBalances)
async def all_balances(request: Request, account_external_id: str) -> JSON:
    return JSON({"balances": _balances(request, account_external_id)}, status_code=201)


def _balances(request: Request, ref: str) -> list[dict[str, Any]]:
    with current(request) as sb:
        return ledger.balances(sb.store, records.account(sb.store, ref), sb.clock.now())


def _balance_route(kind: str) -> Callable[..., Awaitable[JSON]]:
    async def one_balance(request: Request, account_external_id: str) -> JSON:
        found = _balances(request, account_external_id)
        return JSON(next(b for b in found if b["type"] == kind), status_code=201)

    return one_balance


for _segment, _kind in BALANCE_PATHS.items():
    router.add_api_route(f"/accounts/{{account_external_id}}/balances/{_segment}",
                         _balance_route(_kind), methods=["GET"], status_code=201,
                         response_model=a.AccountBalance, name=f"balance_{_segment}",
                         summary=f"{_kind} balance")


@router.get("/accounts/{account_external_id}/entries", status_code=201,
            response_model=list[a.Entry])
async def entries(request: Request, account_external_id: str, page: Page = None,
                  per_page: Page = None) -> JSON:
    with current(request) as sb:
        rid = records.account(sb.store, account_external_id)
        found = [dict(e) for e in ledger.entries_of(sb.store, rid)]
    answer = paginate(found, page, per_page, invalid="2001101", beyond="2001101")
    answer.status_code = 201
    return answer


# ---------------------------------------------------------------- transfer requests
@router.post("/transfer-requests", status_code=201, response_model=a.TransferRequest)
async def create_transfer_request(request: Request, body: a.TransferRequestCreate) -> JSON:
    with current(request) as sb:
        store = sb.store
        if body.type not in TRANSFER_TYPES:
            raise ApiError("2001101", f"type must be one of {', '.join(TRANSFER_TYPES)}")
        src, source = _source(store, "transfer_requests", body.external_reference,
                              body.source_account_id)
        tgt = records.account(store, body.target_account_id, missing="1001001")
        target = store.tables["accounts"][tgt]
        amount = _amount(body.transfer, "transfer", source["currency"])
        if target["currency"] != source["currency"]:
            raise ApiError("2001201", f"the target account is in {target['currency']}, the "
                                      f"source account in {source['currency']}")
        if src == tgt:
            raise ApiError("2001201", "source and target are the same account")
        now = sb.clock.now()
        _covered(ledger.available(store, src, now), amount, source["currency"])
        rid = store.next_id("transfer_requests")
        transfer_id = records.public_id("transfer_requests", rid)
        moved = [ledger.post_entry(store, src, ledger.DEBIT, amount, target["id"], body.label,
                                   transfer_id, now),
                 ledger.post_entry(store, tgt, ledger.CREDIT, amount, source["id"], body.label,
                                   transfer_id, now)]
        transfer = _transfer(transfer_id, body.external_reference, amount, source, target["id"],
                             body.label, body.type, body.custom_data, now)
        ledger.await_validation(store, "transfer_requests", rid, transfer, {"entries": moved},
                                now + sb.config.validation_delay, body.external_reference)
        return JSON(transfer, status_code=201)


def _transfer(transfer_id: str, reference: str, amount: Decimal, source: dict[str, Any],
              target_id: str, label: str, kind: str, custom_data: str | None, now: float,
              related: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return a.TransferRequest(
        id=transfer_id, transfer={"amount": amount, "currency": source["currency"]},
        external_reference=reference, label=label, source_account_id=source["id"],
        target_account_id=target_id, type=kind, custom_data=custom_data,
        creation_date=iso(now), status="WaitingForValidation", validation_date=None,
        related=related or [],
    ).model_dump()


def _lookup(request: Request, table: str, ref: str) -> JSON:
    """By external reference, as the document's ``{externalId}`` says (with
    ``lookups_match_ids``, else by id)."""
    with current(request) as sb:
        rid = sb.store.by_ext[table].get(ref)
        if rid is None and sb.config.lookups_match_ids:
            rid = records.find(sb.store, table, ref)
        if rid is None:
            raise ApiError("1000404", f"{table.replace('_', ' ')[:-1]} {ref!r}")
        return JSON(sb.store.tables[table][rid], status_code=201)


@router.get("/transfer-requests/{external_id}", status_code=201,
            response_model=a.TransferRequest)
async def get_transfer_request(request: Request, external_id: str) -> JSON:
    return _lookup(request, "transfer_requests", external_id)


# ---------------------------------------------------------------- payout requests
@router.post("/payout-requests", status_code=201, response_model=a.PayoutRequest)
async def create_payout_request(request: Request, body: a.PayoutRequestCreate) -> JSON:
    with current(request) as sb:
        store = sb.store
        src, source = _source(store, "payout_requests", body.external_reference,
                              body.source_account_id)
        found = records.payout_bank_account(store, body.payout_bank_account_id)
        if found is None:
            raise ApiError("1001001", f"payout bank account {body.payout_bank_account_id!r} "
                                      f"does not exist")
        owner, bank = found
        if owner != src:
            raise ApiError("2001201", f"payout bank account {bank['id']} is not one of "
                                      f"account {source['id']}")
        if bank["is_blocked"]:
            raise ApiError("2001201", f"payout bank account {bank['id']} is blocked")
        amount = _amount(body.payout, "payout", source["currency"])
        now = sb.clock.now()
        _covered(ledger.available(store, src, now), amount, source["currency"])
        trigger = bank["iban"][-6:]
        if trigger == REFUSED:
            raise ApiError("2001301", "payout refused by the receiving bank")
        if trigger == BANK_UNAVAILABLE:
            raise ApiError("2001501", "receiving bank unavailable, retry later")
        payout = _payout(sb, src, source, bank, amount, body, now)
    if trigger == IN_DOUBT:
        raise ApiError("2001401", "connection to the receiving bank interrupted; the payout "
                                  "request was recorded")
    return JSON(payout, status_code=201)


def _payout(sb: Sandbox, src: int, source: dict[str, Any], bank: dict[str, Any], amount: Decimal,
            body: a.PayoutRequestCreate, now: float) -> dict[str, Any]:
    """Record a payout request, its own transfer request and its debit entry."""
    store = sb.store
    rid = store.next_id("payout_requests")
    payout_id = records.public_id("payout_requests", rid)
    transfer_rid = store.next_id("transfer_requests")
    transfer_id = records.public_id("transfer_requests", transfer_rid)
    moved = [ledger.post_entry(store, src, ledger.DEBIT, amount, bank["id"], body.label,
                               transfer_id, now)]
    transfer = _transfer(transfer_id, body.external_reference, amount, source, bank["id"],
                         body.label, PAYOUT_TRANSFER_TYPE, body.custom_data, now,
                         [{"resource_type": "payout_request", "resource_id": payout_id}])
    # Not under the reference: that is the client's for its own transfer requests.
    store.add("transfer_requests", transfer, {"entries": moved}, rid=transfer_rid, ext=None)
    money = {"amount": amount, "currency": source["currency"]}
    payout = a.PayoutRequest(
        id=payout_id, payout=money, creation_date=iso(now),
        external_reference=body.external_reference, label=body.label,
        payout_bank_account_id=bank["id"], source_account_id=source["id"],
        status="WaitingForValidation", target=money, transfer_request_id=transfer_id,
        validation_date=None, custom_data=body.custom_data,
    ).model_dump()
    ledger.await_validation(store, "payout_requests", rid, payout, {"transfer": transfer_rid},
                            now + sb.config.validation_delay, body.external_reference)
    return payout


@router.get("/payout-requests/{external_id}", status_code=201, response_model=a.PayoutRequest)
async def get_payout_request(request: Request, external_id: str) -> JSON:
    return _lookup(request, "payout_requests", external_id)
