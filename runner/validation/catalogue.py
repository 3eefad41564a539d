"""The provider data items are checked against (payers, rates, payment methods, orders,
accounts, companies), each piece read once per run and read ahead of the item that needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from runner.errors import NotFound, ProviderHTTPError
from runner.provider import Provider
from runner.provider.retry import RetryPolicy
from runner.state import StateStore

# Reads of the catalogue: a few quick tries, so that a passing 5xx, 503 or lost answer does not
# end a run before anything is sent, while an unreachable provider is reported within a second.
READS = RetryPolicy(attempts=3, first_wait=0.1, max_wait=0.5)
# How many items ahead of the one being checked have their reads started (``want``).
LOOKAHEAD = 256

T = TypeVar("T")
Key = tuple[str, Any]
Read = tuple[Key, Callable[[], Any]]


def _read(fetch: Callable[[], Any]) -> Any:
    try:
        return READS.call(fetch, idempotent=True)
    except NotFound:
        return None


class Catalogue:
    """The provider data items are checked against, each piece fetched once per run.

    ``want`` starts a read in the background (at most ``workers`` at a time), so that the
    reads the next items need go out together while this one is checked; ``once`` waits for
    it. Only the validating thread calls them. ``state`` (with ``job_name``) is runner's own
    state when a run validates: what earlier runs sent counts too (operations on an order)."""

    def __init__(self, provider: Provider, workers: int = 8, state: StateStore | None = None,
                 job_name: str = "") -> None:
        self.provider = provider
        self.workers = max(1, workers)
        self.state = state
        self.job_name = job_name
        self._cache: dict[Key, Any] = {}
        self._pool: ThreadPoolExecutor | None = None

    def want(self, key: Key, fetch: Callable[[], Any], after: Key | None = None) -> None:
        """Start reading ``key`` unless it is read or being read already; with ``after``
        (a key wanted earlier), only once that read has found something, and without
        holding a reading thread while it waits."""
        if key in self._cache:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="catalogue")
        if after is None:
            self._cache[key] = self._pool.submit(_read, fetch)
            return
        first, pool = self._cache[after], self._pool
        if not isinstance(first, Future):  # read already
            self._cache[key] = None if first is None else pool.submit(_read, fetch)
            return
        then: Future[Any] = Future()

        def read() -> None:
            try:
                then.set_result(_read(fetch))
            except BaseException as exc:  # noqa: BLE001 - ``once`` raises it where it waits
                then.set_exception(exc)

        def start(done: Future[Any]) -> None:
            # Nothing to read for: ``after`` found nothing, or its read failed (``once`` of
            # ``after`` raises that failure).
            if done.cancelled() or done.exception() is not None or done.result() is None:
                then.set_result(None)
                return
            try:
                pool.submit(read)
            except RuntimeError:  # the catalogue was closed meanwhile: nobody waits for it
                then.cancel()
        first.add_done_callback(start)
        self._cache[key] = then

    def once(self, key: Key, fetch: Callable[[], Any]) -> Any:
        """``fetch()`` the first time ``key`` is asked (or the answer of the read ``want``
        started), then the same answer; None for a resource the provider does not have. A
        passing failure is retried (these are reads); one that lasts ends the validation
        with the provider's error."""
        found = self._cache.get(key, _MISSING)
        if found is _MISSING:
            found = _read(fetch)
        elif isinstance(found, Future):
            found = found.result()
        self._cache[key] = found
        return found

    def close(self) -> None:
        """Wait for the reads in flight; those not started are dropped."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def payer(self, payer_id: int) -> Read:
        return ("payer", payer_id), lambda: self.provider.money_transfer.payer(payer_id)

    def rates(self, payer_id: int) -> Read:
        return ("rates", payer_id), lambda: self.provider.money_transfer.payer_rates(payer_id)

    def method(self, method_id: int) -> Read:
        return (("method", method_id),
                lambda: self.provider.merchant_payment.payment_method(method_id))

    def merchant_balances(self) -> Read:
        return ("merchant balances", None), self.provider.merchant_payment.balances

    def merchant_accounts(self) -> list[str]:
        return sorted(b["currency"] for b in self.once(*self.merchant_balances()))


_MISSING = object()


def unless_forbidden(fetch: Callable[[], T], forbidden: Callable[[ProviderHTTPError], T]
                     ) -> T:
    """``fetch()``; when the provider answers that these credentials may not see the resource
    (403), what ``forbidden`` makes of its answer: a problem of the item, not of the run."""
    try:
        return fetch()
    except ProviderHTTPError as exc:
        if exc.status == 403:
            return forbidden(exc)
        raise
