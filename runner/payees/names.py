"""A payee's name as a row gives it against the name the provider holds for the account, the
way payee checks compare them (the UK's Confirmation of Payee, the EU's Verification of
Payee): match, close match or no match. Pure: no I/O, no state.

The rule, step by step:

1. Both names are normalised: Unicode compatibility forms folded (NFKC), control and format
   characters dropped (whatever a row lets through), case folded, letters with no
   decomposition spelt out (ß ss, æ ae, œ oe, ø o, ł l, đ d, ð d, þ th, ı i), accents removed
   (NFKD, combining marks dropped), apostrophes removed (O'Brien obrien), every other
   character that is not a letter or a digit made a space (hyphens, dots, commas), titles
   dropped (mr, mrs, ms, miss, mx, dr, prof, sir, dame, mme, mlle, herr, frau). Words are
   what the spaces leave; the first ``MAX_CHARS`` characters are read, and at most
   ``MAX_WORDS`` words of at most ``MAX_LETTERS`` letters compared (the cost of a
   comparison is bounded whatever a row holds).
2. **Match**: the same words in any order; or the same letters once the spaces are gone
   (``Dela Cruz``, ``DelaCruz``); or the words of the shorter name, two or more and none an
   initial, all in the longer one (a middle name left out).
3. Otherwise each word of the shorter name is paired with a word of the longer one (the
   best pairs first), scored 1 when equal, ``INITIAL`` when one is the other's initial, else
   their similarity (difflib's ratio: twice the letters in common over the letters of both).
   **Close match** when every pair scores ``CLOSE_AT`` or more and one pair at least is two
   whole words (not an initial): a letter or two off (``Kamau``, ``Kamao``; ``Jon``,
   ``John``), initials (``J. Kamau``), a lone family name (``Kamau``). The provider's name
   is shown for a person to judge.
4. Anything else is **no match**, an empty name included.

The standard library's difflib does the similarity: names are a few short words, a
comparison costs microseconds (benchmarks/payee_checks.py), beside the provider's
milliseconds; the word rules above are what a payee check needs and no library gives them.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher
from enum import StrEnum

CLOSE_AT = 0.75  # each pair of words at least this alike, for a close match
INITIAL = 0.9  # the score of an initial against its word
MAX_CHARS = 400
MAX_WORDS = 8
MAX_LETTERS = 40

_SPELT = str.maketrans({"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "ł": "l", "đ": "d",
                        "ð": "d", "þ": "th", "ı": "i", "ħ": "h", "ŀ": "l"})
_APOSTROPHES = frozenset("'’ʼ`´‘")
TITLES = frozenset({"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "dame", "mme",
                    "mlle", "herr", "frau"})


class Verdict(StrEnum):
    MATCH = "match"
    CLOSE = "close_match"
    NO_MATCH = "no_match"


@dataclass(frozen=True)
class NameMatch:
    verdict: Verdict
    score: float  # 1 for a match; the mean of the pairs' scores otherwise


def words(name: str) -> list[str]:
    """The name's words, normalised as step 1 of the rule says."""
    text = unicodedata.normalize("NFKC", name[:MAX_CHARS])
    text = "".join(c for c in text if not unicodedata.category(c).startswith("C"))
    text = unicodedata.normalize("NFKD", text.casefold().translate(_SPELT))
    kept = []
    for c in text:
        if unicodedata.combining(c) or c in _APOSTROPHES:
            continue
        kept.append(c if c.isalnum() else " ")
    found = [w for w in "".join(kept).split() if w not in TITLES]
    return [w[:MAX_LETTERS] for w in found[:MAX_WORDS]]


def compare(given: str, held: str) -> NameMatch:
    """The row's name ``given`` against the name ``held`` by the provider."""
    a, b = words(given), words(held)
    if not a or not b:
        return NameMatch(Verdict.NO_MATCH, 0.0)
    if sorted(a) == sorted(b) or "".join(a) == "".join(b):
        return NameMatch(Verdict.MATCH, 1.0)
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) >= 2 and all(len(w) > 1 for w in short) and _within(short, long):
        return NameMatch(Verdict.MATCH, 1.0)
    pairs = _pairs(short, long)
    score = sum(s for s, _ in pairs) / len(pairs)
    whole = any(full and s >= CLOSE_AT for s, full in pairs)
    if whole and all(s >= CLOSE_AT for s, _ in pairs):
        return NameMatch(Verdict.CLOSE, round(score, 3))
    return NameMatch(Verdict.NO_MATCH, round(score, 3))


def _within(short: list[str], long: list[str]) -> bool:
    left = list(long)
    for w in short:
        if w not in left:
            return False
        left.remove(w)
    return True


def _pairs(short: list[str], long: list[str]) -> list[tuple[float, bool]]:
    """Each word of ``short`` with its best word of ``long`` (the best pairs taken first):
    (score, whether both are whole words)."""
    scored = sorted(((_score(s, w), i, j) for i, s in enumerate(short)
                     for j, w in enumerate(long)), reverse=True)
    taken_short: dict[int, tuple[float, bool]] = {}
    taken_long: set[int] = set()
    for (score, full), i, j in scored:
        if i in taken_short or j in taken_long:
            continue
        taken_short[i] = (score, full)
        taken_long.add(j)
    return [taken_short[i] for i in range(len(short))]


def _score(a: str, b: str) -> tuple[float, bool]:
    if a == b:
        return 1.0, len(a) > 1
    if (len(a) == 1 and b.startswith(a)) or (len(b) == 1 and a.startswith(b)):
        return INITIAL, False
    if len(a) == 1 or len(b) == 1:
        return 0.0, False
    return SequenceMatcher(None, a, b, autojunk=False).ratio(), True
