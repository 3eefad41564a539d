"""What an answer naming an item's object is compared with: what runner sent and recorded
for the item (rule 3 of docs/exactly-once.md, "compared field by field").

A kind's flow says which fields it compares (``QuotedFlow.compared``: each a ``Compared``,
the field, what was sent or recorded, what the answer says, and how to compare them);
``differences`` says, in words, each one that differs: amounts as numbers (``10.0`` is
``10.00``), identifiers in their canonical form (``runner.identifiers``: ``254700000001`` is
``+254700000001``; a card number by its last four digits, which an answer may mask), names
case and outer blanks aside, any other field as text. A field runner did not record (a state
written before it was) is not compared; one the answer lacks is a difference.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

from runner.identifiers import canonical
from runner.money import shown


def same_amount(a: Any, b: Any) -> bool:
    try:
        return a is not None and b is not None and Decimal(str(a)) == Decimal(str(b))
    except InvalidOperation:  # (an answer's amount that is no number)
        return False


def at(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, None where the answer has no such field."""
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


#: (field, what runner sent or recorded, what the answer says, how they are compared)
Compared = tuple[str, Any, Any, str]
MONEY, TEXT, NAME, IDENTIFIER = "money", "text", "name", "identifier"


def side(name: str, amount: Any, currency: Any, answer: Any) -> list[Compared]:
    """A side of the object (``source``, ``payment`` ...): its amount and currency against
    those recorded."""
    found = answer.get(name) if isinstance(answer, dict) else None
    if not isinstance(found, dict):
        found = {}
    return [(f"{name}.amount", amount, found.get("amount"), MONEY),
            (f"{name}.currency", currency, found.get("currency"), TEXT)]


def identifiers(name: str, sent: dict[str, Any], answer: Any,
                leave_out: Iterable[str] = ()) -> list[Compared]:
    """The identifiers sent in the party ``name``, each against the answer's, canonical (a
    card number by its last four digits: an answer may mask it)."""
    party = at(answer, name)
    compared: list[Compared] = []
    for field, value in sent.items():
        if value is None or field in leave_out:
            continue
        got = party.get(field) if isinstance(party, dict) else None
        if field == "card_number":
            compared.append((f"{name}.{field}", f"*{str(value)[-4:]}",
                             None if got is None else f"*{str(got)[-4:]}", TEXT))
        else:
            compared.append((f"{name}.{field}", value, got, IDENTIFIER))
    return compared


def names(name: str, sent: dict[str, Any], answer: Any) -> list[Compared]:
    """The first and last names sent in the party ``name``, each against the answer's."""
    party = at(answer, name)
    return [(f"{name}.{field}", sent[field],
             party.get(field) if isinstance(party, dict) else None, NAME)
            for field in ("firstname", "lastname") if sent.get(field)]


def differences(ref: str, obj: dict[str, Any], compared: Iterable[Compared]) -> list[str]:
    """Each way the answer ``obj`` differs from the item sent as ``ref``, in words:
    ``source.currency 'USD', sent 'EUR'``."""
    found = [] if obj.get("external_id") == ref else [
        f"external_id {shown(obj.get('external_id'))}, not {ref!r}"]
    for name, want, got, how in compared:
        if want is None:
            continue  # not recorded (a state written before it was)
        if how == MONEY:
            same = same_amount(want, got)
        elif how == NAME:
            same = isinstance(got, str) and got.strip().casefold() == str(want).strip().casefold()
        elif how == IDENTIFIER:  # (an answer echoes what was sent: read in full if not)
            field = name.rpartition(".")[2]
            same = got is not None and (str(got) == str(want) or
                                        canonical(field, got) == canonical(field, want))
        else:
            same = got is not None and str(got) == str(want)
        if not same:
            found.append(f"{name} {'missing' if got is None else shown(got)}, sent {shown(want)}")
    return found
