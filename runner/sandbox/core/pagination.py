"""Pagination of every list: ``page`` and ``per_page`` (default 50, at most 100), and the six
``X-`` headers. A page past the last is 1003009; an empty list has one (empty) page. A service
with codes of its own names them (``invalid``, ``beyond``: the collection service's 2001101)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runner.sandbox.core.errors import JSON, ApiError

DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 100


def paginate(items: Sequence[Any], page: int | None, per_page: int | None,
             merchant: bool = False, invalid: str = "1000999", beyond: str = "1003009") -> JSON:
    page = 1 if page is None else page
    per_page = DEFAULT_PER_PAGE if per_page is None else per_page
    if per_page < 1 or per_page > MAX_PER_PAGE:
        raise ApiError(invalid, f"per_page must be between 1 and {MAX_PER_PAGE}",
                       merchant=merchant)
    if page < 1:
        raise ApiError(invalid, "page must be 1 or more", merchant=merchant)
    total = len(items)
    pages = max(1, -(-total // per_page))
    if page > pages:
        raise ApiError(beyond, f"page {page} of {pages}", merchant=merchant)
    headers = {"X-Total": str(total), "X-Total-Pages": str(pages), "X-Per-Page": str(per_page),
               "X-Page": str(page)}
    if page < pages:
        headers["X-Next-Page"] = str(page + 1)
    if page > 1:
        headers["X-Prev-Page"] = str(page - 1)
    start = (page - 1) * per_page
    return JSON(list(items[start:start + per_page]), headers=headers)
