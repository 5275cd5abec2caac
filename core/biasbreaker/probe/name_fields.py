"""Person names held in name fields: ``{"first_name": "Mei", "last_name": "Nguyen"}``.

In text a person's name is two capitalised words side by side (:mod:`~biasbreaker.probe.
mentions`); a first name alone is read only from the shipped lists, because a lone
capitalised word is too often no name (``Will``, ``May``). A form, a database row or a
tool's JSON writes names otherwise: the given name and the surname in fields of their own,
or a full name under a ``name`` key, often with a middle initial or surname first
(``"Nguyen, Mei"``). There the key says the value is a name, so this module reads it as one
(issue 14: ``{"first_name": "Siobhan", "last_name": "O'Brien"}`` and ``{"applicant_name":
"Aaliyah"}`` were found group-blind and a node denying them passed).

A key is split into words as :mod:`~biasbreaker.probe.fields` splits it (``_``, ``-``,
spaces, digits, camelCase; lower-cased, accents removed). Its last words give the role:

* first name: ``first name``, ``firstname``, ``given name(s)``, ``givenname``,
  ``forename(s)``, ``fname``, ``prenom``, ``vorname`` (:data:`FIRST_KEYS`);
* surname: ``last name``, ``lastname``, ``surname(s)``, ``family name``, ``familyname``,
  ``lname``, ``nachname``, ``familienname``, ``apellido(s)``, ``cognome``, ``sobrenome``
  (:data:`LAST_KEYS`);
* full name: ``name``, ``full name``, ``fullname``, ``legal name`` (:data:`FULL_KEYS`);
* ``first``/``given`` and ``last``/``family`` beside a field of the other role
  (``{"name": {"first": "Mei", "last": "Nguyen"}}``), and alone when the value opens with a
  capital (``{"first": "Grace"}``, ``{"last": "Yazzie"}``);
* a person (:data:`PERSON_KEYS`: ``applicant``, ``borrower`` …), read as a full name when
  the value opens with a capital (``{"applicant": "Grace"}``);

and the words before them must name whose name it is (:data:`OWNER_WORDS`: ``applicant``,
``candidate``, ``spouse`` …), so ``company_name``, ``file_name`` or ``product_name`` are no
name fields. A first-name field and a surname field of one dict with the same owner words
are one person (``applicant_first_name`` with ``applicant_last_name``); a full-name field
beside a surname field holds the first name (``{"Name": "Siobhan", "Surname": "O'Brien"}``);
a dict's one first-name field without a surname and one surname field without a first name
are one person whatever their owner words (``{"applicant_first_name": "Darlene", "surname":
"Yazzie"}``), and a surname field alone is a person named by a surname
(:mod:`~biasbreaker.probe.surnames`: the race its surname tells).
A string holding a JSON object or array (:func:`~biasbreaker.probe.payloads.embedded_json`: a
tool's result) is read the same way, its spans placed in the string.

A value is read when it is at most :data:`VALUE_LENGTH` characters of name words (letters,
inner hyphens and apostrophes), initials (``L.``) and at most one comma, with no digit: a
leading title (``Dr.``) and a trailing suffix (``Jr.``, ``III``) are passed over, middle
names and initials too; a comma puts the surname first (``"O'Brien, Siobhan"``). The first
name is the first word of a first-name value (or of a full name's given part), the surname
the last word of a surname value (or of a full name's family part).

What a reading tells: a first name and a surname together by
:func:`~biasbreaker.probe.names.person_name` (the rule of names in text); a first name alone,
or one whose pair is no person, by :func:`~biasbreaker.probe.names.first_name_info`. A value
in lower case is read too; the rewrite swaps capitalised words only, so a variant cannot
change it, and the probe holds the step for review (no counterfactual), never passes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from biasbreaker.probe.fields import PERSON_WORDS
from biasbreaker.probe.names import (
    NameBook,
    NameInfo,
    first_name_info,
    person_name,
    unaccent,
)
from biasbreaker.probe.payloads import Path, embedded_json
from biasbreaker.probe.surnames import surname_key, surname_race

__all__ = [
    "FIRST_KEYS",
    "FULL_KEYS",
    "LAST_KEYS",
    "OWNER_WORDS",
    "PERSON_KEYS",
    "VALUE_LENGTH",
    "FieldName",
    "NameSpan",
    "field_names",
    "name_role",
]

Role = Literal["first", "last", "full", "paired-first", "paired-last", "person"]
"""A name key's role; a ``paired-`` role alone counts only for a capitalised value, and
``person`` (a key naming a person, ``applicant``) holds a name written as a full name's."""

FIRST_KEYS: Final = frozenset(
    {("first", "name"), ("firstname",), ("given", "name"), ("given", "names"), ("givenname",),
     ("forename",), ("forenames",), ("fname",), ("prenom",), ("vorname",)}
)  # fmt: skip
"""Last words of a key that holds a first name."""
LAST_KEYS: Final = frozenset(
    {("last", "name"), ("lastname",), ("surname",), ("surnames",), ("family", "name"),
     ("familyname",), ("lname",), ("nachname",), ("familienname",), ("apellido",),
     ("apellidos",), ("cognome",), ("sobrenome",)}
)  # fmt: skip
"""Last words of a key that holds a surname."""
FULL_KEYS: Final = frozenset({("name",), ("full", "name"), ("fullname",), ("legal", "name")})
"""Last words of a key that holds a full name."""
_PAIRED: Final[Mapping[tuple[str, ...], Role]] = {
    ("first",): "paired-first",
    ("given",): "paired-first",
    ("last",): "paired-last",
    ("family",): "paired-last",
}
"""Keys that hold a name part only beside a key of the other part."""

PERSON_KEYS: Final = frozenset(
    {"applicant", "candidate", "client", "customer", "patient", "borrower", "tenant",
     "employee", "student", "resident", "member", "person", "nominee", "interviewee",
     "hire", "guest", "recipient", "sender", "author", "requester", "claimant", "spouse",
     "partner", "guarantor", "cosigner", "beneficiary", "policyholder", "traveler",
     "traveller", "passenger", "renter", "homeowner", "worker"}
)  # fmt: skip
"""Last words of a key that names a person (``applicant``, ``co_borrower``): its value, when it
is a capitalised name, is that person's name (``{"applicant": "Grace"}``)."""

OWNER_WORDS: Final = PERSON_WORDS | frozenset(
    {"full", "legal", "preferred", "contact", "spouse", "partner", "holder", "owner", "co",
     "guardian", "parent", "beneficiary", "insured", "policyholder", "driver", "guest",
     "traveler", "traveller", "recipient", "signer", "witness", "worker", "hire",
     "debtor", "claimant", "subscriber", "account"}
)  # fmt: skip
"""Words a name key may have before its role words (whose name it is)."""

VALUE_LENGTH: Final = 80
"""Longest value read as a name (characters)."""

_KEY_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_TOKEN = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*\.?")
_TITLES: Final = frozenset({"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "dame"})
_SUFFIXES: Final = frozenset({"jr", "sr", "ii", "iii", "iv", "v", "phd", "md", "esq"})


@dataclass(frozen=True, slots=True)
class NameSpan:
    """One word of a name in a field: where it is and how it is written."""

    path: Path
    start: int
    end: int
    surface: str


@dataclass(frozen=True, slots=True)
class FieldName:
    """A person's name read from name fields.

    Args:
        name: The name key: ``"First Last"`` for a person, ``"First"`` for a first name
            alone (as :meth:`~biasbreaker.probe.mentions.MentionFinder.name_info` reads it).
        info: The gender and race it tells.
        spans: Where its words are: the first name, then the surname when there is one.
    """

    name: str
    info: NameInfo
    spans: tuple[NameSpan, ...]


def name_role(key: str) -> tuple[tuple[str, ...], Role] | None:
    """``(owner words, role)`` of a name key, or ``None`` when the key holds no name.

    ``applicant_first_name`` → ``(("applicant",), "first")``; ``Surname`` → ``((), "last")``;
    ``first`` → ``((), "paired-first")`` (a first name only beside a surname field);
    ``company_name`` → ``None``.
    """
    words = tuple(w.lower() for w in _KEY_WORD.findall(unaccent(key)))
    for size in (2, 1):
        if len(words) < size:
            continue
        owner, tail = words[:-size], words[-size:]
        if not all(w in OWNER_WORDS for w in owner):
            continue
        if tail in FIRST_KEYS:
            return owner, "first"
        if tail in LAST_KEYS:
            return owner, "last"
        if tail in FULL_KEYS:
            return owner, "full"
        paired = _PAIRED.get(tail)
        if paired is not None:
            return owner, paired
        if size == 1 and tail[0] in PERSON_KEYS:
            return owner, "person"
    return None


def field_names(payload: Any, book: NameBook) -> Iterator[FieldName]:
    """The person names held in the name fields of ``payload``, in payload order.

    Args:
        payload: A nested ``dict`` / ``list`` / ``tuple`` of values (a ``str`` has no fields).
        book: The name book the names are read with.

    Yields:
        One :class:`FieldName` per person whose name tells a gender or a race.
    """
    yield from _walk(payload, (), book)


def _walk(value: Any, path: Path, book: NameBook) -> Iterator[FieldName]:
    if isinstance(value, Mapping):
        yield from _in_dict(value, path, book)
        for key, item in value.items():
            yield from _walk(item, (*path, key), book)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, (*path, i), book)
    elif isinstance(value, str):
        inner = embedded_json(value)
        if inner is not None:
            for reading in _walk(inner, (), book):
                yield FieldName(reading.name, reading.info, _in_text(value, path, reading.spans))


def _in_text(text: str, path: Path, spans: tuple[NameSpan, ...]) -> tuple[NameSpan, ...]:
    r"""The spans of a name read from a JSON string, placed in the string itself.

    Each word is looked for as a whole word after the previous one; a word written with a
    JSON escape (``\u00e9``) is not found and gets an empty span at the start (the rewrite,
    which matches the word as written, cannot swap it either: the step is held).
    """
    out = []
    pos = 0
    for s in spans:
        m = re.compile(r"(?<![\w'’-])" + re.escape(s.surface) + r"(?![\w'’-])").search(text, pos)
        if m is None:
            out.append(NameSpan(path, 0, 0, s.surface))
            continue
        out.append(NameSpan(path, m.start(), m.end(), s.surface))
        pos = m.end()
    return tuple(out)


def _in_dict(value: Mapping[Any, Any], path: Path, book: NameBook) -> Iterator[FieldName]:
    roles: dict[tuple[str, ...], dict[Role, str]] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            continue
        found = name_role(key)
        if found is not None:
            roles.setdefault(found[0], {}).setdefault(found[1], key)
    _join_lone_surname(roles)
    for parts in roles.values():
        has_last = "last" in parts or "paired-last" in parts
        paired_first = parts.get("paired-first")
        first_key = parts.get("first") or (
            paired_first if has_last else _capitalised(value, paired_first)
        )
        paired_last = parts.get("paired-last")
        last_key = parts.get("last") or (
            paired_last if first_key else _capitalised(value, paired_last)
        )
        full_key = parts.get("full") or _capitalised(value, parts.get("person"))
        if first_key is None and full_key is not None and last_key is not None:
            first_key, full_key = full_key, None
        if first_key is not None:
            given = _given(value[first_key], (*path, first_key))
            family = _family(value[last_key], (*path, last_key)) if last_key else None
            reading = _read(given, family, book)
            if reading is not None:
                yield reading
        elif last_key is not None:  # a surname field alone: {"last": "Yazzie"}
            reading = _read_surname(_family(value[last_key], (*path, last_key)), book)
            if reading is not None:
                yield reading
        if full_key is not None:
            whole = _whole(value[full_key], (*path, full_key))
            if whole is not None:
                reading = _read(whole[0], whole[1], book)
                if reading is not None:
                    yield reading


def _capitalised(value: Mapping[Any, Any], key: str | None) -> str | None:
    """``key`` when its value opens with a capital (a name, not ``"pending"``), else ``None``.

    A bare ``first``/``last`` key alone, or a key naming a person (``applicant``), holds a
    name less surely than ``first_name``: a value in lower case there is not read (nor held).
    """
    if key is None:
        return None
    item = value[key]
    return key if isinstance(item, str) and item.lstrip()[:1].isupper() else None


def _join_lone_surname(roles: dict[tuple[str, ...], dict[Role, str]]) -> None:
    """Give a lone surname field to the one lone first-name field of the same dict.

    ``{"applicant_first_name": "Darlene", "surname": "Yazzie"}``: the owner words differ, but
    one dict holding one first name without a surname and one surname without a first name
    names one person, whose name is read (and swapped) whole, not as two halves.
    """
    firsts = [
        o
        for o, p in roles.items()
        if ("first" in p or "paired-first" in p) and not ("last" in p or "paired-last" in p)
    ]
    lasts = [
        o
        for o, p in roles.items()
        if ("last" in p or "paired-last" in p)
        and not ("first" in p or "paired-first" in p or "full" in p)
    ]
    if len(firsts) == 1 and len(lasts) == 1:
        moved = roles.pop(lasts[0])
        target = roles[firsts[0]]
        for role in ("last", "paired-last"):
            if role in moved:
                target.setdefault(role, moved[role])


def _tokens(text: str) -> list[tuple[int, int, str]] | None:
    """The words of a name value with their offsets, or ``None`` when it is no name."""
    if len(text) > VALUE_LENGTH or any(c.isdigit() for c in text):
        return None
    out = []
    pos = 0
    for m in _TOKEN.finditer(text):
        if text[pos : m.start()].strip(" \t,"):
            return None
        out.append((m.start(), m.end(), m.group(0)))
        pos = m.end()
    if text[pos:].strip(" \t,") or not out:
        return None
    return out


def _names_only(tokens: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The tokens without a leading title, trailing suffixes and initials."""
    core = list(tokens)
    if core and core[0][2].rstrip(".").lower() in _TITLES:
        core = core[1:]
    while core and core[-1][2].rstrip(".").lower() in _SUFFIXES:
        core = core[:-1]
    return [t for t in core if len(t[2].rstrip(".")) > 1 and not t[2].endswith(".")]


def _span(path: Path, token: tuple[int, int, str]) -> NameSpan:
    start, end, surface = token
    return NameSpan(path, start, end, surface)


def _given(text: str, path: Path) -> NameSpan | None:
    tokens = _tokens(text)
    words = _names_only(tokens) if tokens is not None and "," not in text else []
    return _span(path, words[0]) if words else None


def _family(text: str, path: Path) -> NameSpan | None:
    tokens = _tokens(text)
    words = _names_only(tokens) if tokens is not None and "," not in text else []
    return _span(path, words[-1]) if words else None


def _whole(text: str, path: Path) -> tuple[NameSpan | None, NameSpan | None] | None:
    """``(first name, surname)`` of a full-name value (surname ``None`` for one word)."""
    if text.count(",") > 1 or _tokens(text) is None:
        return None
    if "," in text:  # surname first: "O'Brien, Siobhan", "NGUYEN, Mei L."
        cut = text.index(",")
        family = _names_only(_tokens(text[:cut]) or [])
        given = _names_only(
            [(s + cut + 1, e + cut + 1, w) for s, e, w in _tokens(text[cut + 1 :]) or []]
        )
        if not family or not given:
            return None
        return _span(path, given[0]), _span(path, family[-1])
    words = _names_only(_tokens(text) or [])
    if not words:
        return None
    return _span(path, words[0]), (_span(path, words[-1]) if len(words) > 1 else None)


def _read_surname(family: NameSpan | None, book: NameBook) -> FieldName | None:
    """A surname field alone (``{"surname": "Washington"}``): the race its surname tells.

    Read by :func:`~biasbreaker.probe.surnames.surname_race` as a person of that race and no
    gender, named by :func:`~biasbreaker.probe.surnames.surname_key`; ``None`` when the
    surname tells no race (``Smith``, 72 % white).
    """
    if family is None:
        return None
    race = surname_race(family.surface, book)
    if race is None:
        return None
    return FieldName(surname_key(family.surface), NameInfo(None, race), (family,))


def _read(given: NameSpan | None, family: NameSpan | None, book: NameBook) -> FieldName | None:
    """What a first name (and a surname) read from fields tell, or ``None``."""
    if given is None:
        return None
    if family is not None:
        person = person_name(given.surface, family.surface, book)
        if person is not None and (person.info.gender or person.info.race):
            return FieldName(f"{given.surface} {family.surface}", person.info, (given, family))
    info = first_name_info(given.surface, book)
    return FieldName(given.surface, info, (given,)) if info is not None else None
