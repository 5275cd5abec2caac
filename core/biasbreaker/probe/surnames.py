"""Persons named by a surname alone, and names written surname first.

A person's name in text is read as a first name and a surname side by side (:mod:`~biasbreaker.
probe.mentions`, :func:`~biasbreaker.probe.names.person_name`). Two other forms name a person
of a group just as plainly (a new-user trial found both passed unprobed or half swapped):

* a title and a surname (``Mr. Yazzie applied``), or a surname field alone (``{"last":
  "Yazzie"}``): the census surname tells the race (``Yazzie``: 96 % native-american), the
  title the gender. Such a person has the name key ``surname_key("Yazzie")`` = ``"…
  Yazzie"`` (:data:`SURNAME_MARK` and the surname: no first name, and never a key of a first
  name read alone), tells the race :func:`surname_race` gives and no gender, and a race
  variant swaps the surname for one of the target group (the title, a gender term, stays);
* the surname first and a comma (``Yazzie, Darlene applied``, ``Washington, Jamal``): read as
  the person ``Darlene Yazzie`` where it opens the text, a line or a sentence, or follows a
  colon (``Name: Yazzie, Darlene``), and swapped whole like a name written first name first.

A surname alone that a full name of the same payload carries (``Jamal Washington … Mr.
Washington``) is a later mention of that person, not a person of its own
(:meth:`~biasbreaker.probe.mentions.MentionFinder.detect` drops it).
"""

from __future__ import annotations

import re
from typing import Final

from biasbreaker.probe.names import (
    NOT_GIVEN,
    PLACE_WORDS,
    RACE_SHARE,
    NameBook,
    fold,
    name_shares,
    person_name,
    surname_share_of,
)

__all__ = [
    "SURNAME_MARK",
    "key_surname",
    "surname_first",
    "surname_key",
    "surname_race",
    "titled_surnames",
]

SURNAME_MARK: Final = "…"
"""The first word of a surname-only name key (``"… Yazzie"``): no first name is known."""

_TITLED = re.compile(
    r"(?<![\w'’-])(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?[ \t]+"
    r"([A-Z][^\W\d_]*(?:[-'’][^\W\d_]+)*)(?:['’]s?)?(?![\w'’-])"
)
"""A title and a capitalised word after it (``Mr. Yazzie``, ``Ms. Begay's``)."""
_POSSESSIVE_END = re.compile(r"['’]s?$")
_CAPITALISED_AFTER = re.compile(r"[ \t]+(?:[A-Z]\.[ \t]+)?[A-Z][^\W\d_]")
"""A capitalised word (maybe after an initial) next: ``Mr. Greg Baker`` is a full name."""
_COMMA_PAIR = re.compile(
    r"(?<![\w'’-])([A-Z][^\W\d_]*(?:[-'’][^\W\d_]+)*)[ \t]*,[ \t]*"
    r"([A-Z][^\W\d_]*(?:[-'’][^\W\d_]+)*)(?![\w'’-])"
)
"""A capitalised word, a comma and a capitalised word: ``Yazzie, Darlene``."""
_LIST_AFTER = re.compile(r"[ \t]*,[ \t]*[A-Z]")
"""A comma and a capitalised word after the pair: a list (``Hopi, Zuni, Navajo``)."""
_OPENS = frozenset('.!?:;\n"“(*•>-#')
"""Characters after which (spaces passed over) a word opens a sentence, a line or a field."""
_NOT_SURNAME = NOT_GIVEN | frozenset(
    """
    however yes no okay ok sure well so also then now today yesterday finally first second
    third next last please thanks thank regards sincerely best note update hello hi dear
    """.split()  # noqa: SIM905
)
"""Words before a comma that open a sentence and are no surname (``However, Mark asked``)."""


def surname_key(last: str) -> str:
    """The name key of a person named by the surname ``last`` alone (``"… Yazzie"``)."""
    return f"{SURNAME_MARK} {last}"


def key_surname(key: str) -> str | None:
    """The surname of a surname-only name key, else ``None`` (``"… Yazzie"`` → ``Yazzie``)."""
    mark, _, last = key.partition(" ")
    return last if mark == SURNAME_MARK and last else None


def surname_race(last: str, book: NameBook) -> str | None:
    """The race group a surname alone tells, or ``None``.

    The shipped lists' tag, else the 2010 Census group with at least :data:`~biasbreaker.
    probe.names.RACE_SHARE` % of the surname's bearers (``multiple`` is no group;
    :func:`~biasbreaker.probe.names.surname_share_of` reads apostrophes and hyphens), as for
    the surname of a full name (:func:`~biasbreaker.probe.names.person_name`). No surname: a
    word of one letter, a term of an axis (``book.excluded``), a place or title word
    (``Park``, ``Street``, ``Captain``); ``Le``, ``Li``, ``Wu``, ``Ng`` are surnames.

    Args:
        last: The surname as written (``"Yazzie"``, ``"O'Brien"``).
        book: The name book.

    Returns:
        The group (``"native-american"`` for ``Yazzie``, 96 %), or ``None``.
    """
    s = fold(last)
    if len(s) < 2 or s in book.excluded or s in PLACE_WORDS or s in NOT_GIVEN:
        return None
    listed = book.last.get(last) or book.last.get(last.title())
    if listed is not None:
        return listed
    share = surname_share_of(s, name_shares().surname_race)
    if share is None or share.percent < RACE_SHARE or share.group == "multiple":
        return None
    return share.group


def titled_surnames(text: str, book: NameBook) -> list[tuple[int, int, str]]:
    """Surnames right after a title that tell a race: ``(start, end, surname)`` each.

    ``Mr. Yazzie applied`` gives the span of ``Yazzie`` (a possessive ending stays outside);
    ``Mr. Greg Baker`` gives nothing (a capitalised word follows: a full name, read as one),
    nor ``Ms. Smith`` (72 % white: no race told).
    """
    out: list[tuple[int, int, str]] = []
    for m in _TITLED.finditer(text):
        word = _POSSESSIVE_END.sub("", m.group(1))
        if _CAPITALISED_AFTER.match(text, m.end()) or surname_race(word, book) is None:
            continue
        out.append((m.start(1), m.start(1) + len(word), word))
    return out


def surname_first(text: str, book: NameBook) -> list[tuple[int, int, str, str]]:
    """Names written surname first with a comma: ``(start, end, first, last)`` each.

    ``Yazzie, Darlene applied`` gives the span of ``Yazzie, Darlene`` with the first name
    ``Darlene`` and the surname ``Yazzie``. Read where the pair opens the text, a line or a
    sentence or follows a colon, neither word is in capitals (``CARTER, MARY``: a residual
    form, :mod:`~biasbreaker.probe.residuals`), no capitalised word follows it (``Hopi, Zuni,
    Navajo`` is a list), the first word is no word of :data:`_NOT_SURNAME` (``However,
    Mark``), and :func:`~biasbreaker.probe.names.person_name` reads ``first last`` as a
    person (no place prefix, place word or firm).
    """
    out: list[tuple[int, int, str, str]] = []
    for m in _COMMA_PAIR.finditer(text):
        last, first = m.group(1), m.group(2)
        before = text[: m.start()].rstrip(" \t")
        if before and before[-1] not in _OPENS:
            continue
        if _CAPITALISED_AFTER.match(text, m.end()) or _LIST_AFTER.match(text, m.end()):
            continue
        if last.isupper() or first.isupper():  # "CARTER, MARY": a residual form of a name
            continue
        if fold(last) in _NOT_SURNAME or person_name(first, last, book) is None:
            continue
        out.append((m.start(), m.end(), first, last))
    return out
