"""Nationalities of every country, read where they describe a person, to hold what no group swaps.

The nationality axis swaps 14 groups (``data/terms/nationality.json``). An input naming a
person of another nationality ("A Syrian engineer applied", "He is from Syria") found no term
and was *not applicable*: the step passed unprobed. This module reads the names and
nationality words of the 196 entities of The World Factbook (``data/terms/countries.json``,
public domain, built by ``scripts/build_country_data.py``) in the places where they describe a
person, so that :meth:`~biasbreaker.probe.held.HeldReader.held` holds such an input for
review, a recorded refusal, rather than passing it (docs/detection.md, "Nationalities outside
the axis: held"). Adding them as groups of the axis was not done: the covering rotation's
bound grows with the groups (``ceil((N − 1) / k)`` probes: 49 at ``k = 4`` for 196 groups),
and so does the recall study, quadratically.

Where a word of the list describes a person (:func:`country_mentions`):

* a nationality word right before a person word (``a Syrian engineer``, ``two Kenyan
  nurses``; the person words of the term set and :data:`STATUS_WORDS`: ``Syrian national``,
  ``Syrian refugee``), or glued to ``-born`` or to another nationality by a hyphen
  (``Syrian-born``, ``Korean-American``);
* after a copula at the end of a phrase (``She is Syrian.``, ``He is a Syrian.``);
* before ``descent``, ``origin``, ``heritage``, ``background``, ``nationality`` or
  ``citizenship`` after ``of`` (``of Syrian descent``);
* a plural noun of the list (``Syrians``, ``Kenyans``), except words that are also English
  words or names (:data:`NOT_PEOPLE`: ``Poles``, ``Laos``);
* a country name after a verb or noun of where a person is from or lives (:data:`_WHERE`:
  ``born in Syria``, ``is from Syria``, ``moved from Syria``, ``citizen of Syria``, ``an
  applicant from Syria``), or after a nationality field label (``Nationality: Syrian``,
  ``Country of birth: Syria``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

__all__ = ["NOT_PEOPLE", "STATUS_WORDS", "Country", "countries", "country_mentions"]

STATUS_WORDS: Final = frozenset(
    """
    national nationals citizen citizens refugee refugees immigrant immigrants migrant migrants
    expat expats expatriate expatriates native natives descent origin heritage background
    asylum-seeker asylum-seekers
    """.split()  # noqa: SIM905
)
"""Words after a nationality word that make it a person's (``Syrian national``): status words
the term set's person words do not hold."""
NOT_PEOPLE: Final = frozenset({"poles", "laos", "swede", "swedes", "finn", "dane", "pole"})
"""Nouns of the list that are also English words, names or a country: never read alone."""
NOT_DESCRIBING: Final = frozenset(
    {"speaker", "speakers", "speaking", "interpreter", "interpreters", "translator",
     "translators", "teacher", "teachers", "tutor", "tutors", "instructor", "instructors",
     "professor", "professors"}
)  # fmt: skip
"""Person words after which a nationality word names a language or a subject (``a Spanish
speaker``, ``a Korean teacher``): not read there."""


@dataclass(frozen=True, slots=True)
class Country:
    """One entity of the Factbook list: code, names, adjectives and nouns (singular, plural)."""

    code: str
    names: tuple[str, ...]
    adjectives: tuple[str, ...]
    nouns: tuple[str, ...]


@functools.cache
def countries() -> tuple[Country, ...]:
    """The 196 entities of ``data/terms/countries.json``, in file order (read once)."""
    path = resources.files("biasbreaker") / "data" / "terms" / "countries.json"
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return tuple(
        Country(e["code"], tuple(e["names"]), tuple(e["adjectives"]), tuple(e["nouns"]))
        for e in doc["entities"]
    )


def _alt(words: Collection[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))


@dataclass(frozen=True, slots=True)
class _Patterns:
    word: re.Pattern[str]
    place: re.Pattern[str]
    of: dict[str, str]
    folded: dict[str, str]


@functools.cache
def _patterns() -> _Patterns:
    labels: dict[str, dict[str, None]] = {}
    words: set[str] = set()
    places: set[str] = set()
    for c in countries():
        for w in (*c.adjectives, *c.nouns):
            words.add(w)
            labels.setdefault(w, {})[c.names[0]] = None
        for n in c.names:
            places.add(n)
            labels.setdefault(n, {})[c.names[0]] = None
    # a word of several entities names them all ("Korean": North Korea or South Korea)
    of = {w: " or ".join(names) for w, names in labels.items()}
    word = re.compile(r"(?<![\w'’-])(" + _alt(words) + r")(?![\w'’])")
    adv = r"(?:[ \t]+(?:here|there|originally|back|away|recently))?[ \t]+"
    place = re.compile(
        r"(?:\b(?:born|raised|grew up|grown up|lives|lived|living|resides|resided|residing)"
        + adv
        + r"in[ \t]+"
        + r"|\b(?:is|was|are|were|am|comes|came|hails|hailing|originally|fled|moved|"
        r"relocated|emigrated|immigrated|migrated|arrived|refugees?|immigrants?|migrants?|"
        r"persons?|people|applicants?|candidates?|customers?|clients?|borrowers?|tenants?|"
        r"employees?|students?|patients?|workers?|man|men|woman|women|family|families)"
        + adv
        + r"from[ \t]+"
        + r"|\b(?:citizens?|nationals?|natives?|residents?)[ \t]+of[ \t]+"
        + r"|\b(?:immigrated|emigrated|migrated|moved|relocated)"
        + adv
        + r"to[ \t]+"
        + r"|\b(?:nationality|citizenship|country[ \t]+of[ \t]+(?:origin|birth|citizenship|"
        r"residence)|place[ \t]+of[ \t]+birth|birthplace)[ \t]*[:=][ \t]*)"
        r"(" + _alt(places | words) + r")(?![\w'’-])",
        re.IGNORECASE,
    )
    return _Patterns(word, place, of, {w.lower(): label for w, label in of.items()})


_COPULA_BEFORE = re.compile(
    r"\b(?:is|was|are|were|am|be|been|'s|’s)[ \t]+(?:(?:a|an|also|not|now)[ \t]+)?$",
    re.IGNORECASE,
)
_PHRASE_END = re.compile(r"[ \t]*(?:[,.;:!?)\n]|and\b|but\b|$)")
_OF_AFTER = re.compile(
    r"[ \t]+(?:descent|origin|heritage|background|nationality|citizenship)\b", re.IGNORECASE
)
_OF_BEFORE = re.compile(r"\bof[ \t]+$", re.IGNORECASE)
_HYPHEN_AFTER = re.compile(r"-(?:born|[A-Z][a-z]+)\b")
_NEXT_WORD = re.compile(r"[ \t]+([A-Za-z][\w'’-]*)")


def country_mentions(text: str, person_words: Collection[str]) -> list[tuple[int, int, str, str]]:
    """The words of the Factbook list that describe a person in ``text``.

    Args:
        text: One string of a payload.
        person_words: Lower-cased person nouns (the term set's, occupations included).

    Returns:
        ``(start, end, surface, country)`` each, ``country`` the entity's first name
        (``Syria``), in text order.
    """
    pats = _patterns()
    out: dict[int, tuple[int, int, str, str]] = {}
    for m in pats.place.finditer(text):
        surface = m.group(1)
        if surface[:1].isupper() or surface.startswith("the "):
            out[m.start(1)] = (m.start(1), m.end(1), surface, pats.folded[surface.lower()])
    for m in pats.word.finditer(text):
        surface = m.group(1)
        if m.start() in out or _describes(text, m.start(), m.end(), surface, person_words):
            out.setdefault(m.start(), (m.start(), m.end(), surface, pats.of[surface]))
    return [out[k] for k in sorted(out)]


def _describes(
    text: str, start: int, end: int, surface: str, person_words: Collection[str]
) -> bool:
    """Whether the nationality word at ``text[start:end]`` describes a person."""
    if _HYPHEN_AFTER.match(text, end):
        return True
    nxt = _NEXT_WORD.match(text, end)
    after = nxt.group(1).lower() if nxt is not None else None
    if (
        after is not None
        and after not in NOT_DESCRIBING
        and (after in person_words or after in STATUS_WORDS)
    ):
        return True
    if _OF_BEFORE.search(text, max(0, start - 6), start) and _OF_AFTER.match(text, end):
        return True
    if _COPULA_BEFORE.search(text, max(0, start - 20), start) and _PHRASE_END.match(text, end):
        return True
    low = surface.lower()
    return low.endswith("s") and low not in NOT_PEOPLE and _is_plural_noun(surface)


@functools.cache
def _is_plural_noun(surface: str) -> bool:
    for c in countries():
        if surface in c.nouns and surface not in c.adjectives and surface not in c.names:
            singular = [n for n in c.nouns if surface.startswith(n) and n != surface]
            return bool(singular)
    return False
