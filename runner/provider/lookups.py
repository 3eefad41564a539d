"""What a lookup by external id may answer: only the record that carries it (rule 8 of
docs/exactly-once.md).

A provider may match a lookup's key against more than one of its keys: the collection
service reads ``payment-orders/{id}`` and ``payment-orders/{externalId}`` at one path, and
a provider may match its own ids (``TRF0002``) or names where an external reference was
asked for. Every lookup that can adopt, poll or reconcile an item goes through ``own``: the
record answered is the item's only when its own key is the one asked for; anything else is
``OtherRecord`` (never None: another record proves nothing about the item's own), which
the engine makes an item needing a person, naming both records.
"""

from __future__ import annotations

from typing import Any

from runner.errors import OtherRecord


def own(found: Any | None, key: str, asked: str, noun: str) -> Any | None:
    """``found`` (the answer to a lookup of ``asked``; None: clearly not found) when its
    ``key`` field is ``asked``; OtherRecord when it is another's."""
    if found is None:
        return None
    held = found.get(key) if isinstance(found, dict) else None
    if held != asked:
        found_id = found.get("id") if isinstance(found, dict) else None
        raise OtherRecord(noun, key, asked, found_id, held)
    return found
