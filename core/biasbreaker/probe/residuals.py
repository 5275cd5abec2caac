"""Residual forms of a swapped person: what a counterfactual variant must not leave standing.

The rewrite swaps a person's name where it is written as a name (capitalised words: ``Ms.
Mary Carter``, ``Carter's``). An input often names the same person again in a form that is
no name to the scan: a lower-case signature (``— mary carter``), an e-mail address
(``mary.carter@example.com``), an identifier (``Mary_Carter``, ``mcarter``). Left as it was,
every variant still names the original person there, a step that keys on it answers the same
in every variant, and the probe would score 0 a step it never varied (a new-user trial saw
exactly that). So:

* forms that can be rewritten exactly are swapped with the name (:func:`pair_hits`, used by
  :func:`~biasbreaker.probe.rewriting.rewrite`): the first name and surname side by side,
  in either order, in any case, joined by white space, ``.``, ``_``, ``-`` (or ``,`` with the
  surname first), or glued in camel case (``MaryCarter``); each word takes the case it had
  (``mary carter`` → ``diana vu``, ``Mary_Carter`` → ``Diana_Vu``, ``mary.carter@…`` →
  ``diana.vu@…``, ``carter, mary`` → ``vu, diana``);
* forms that cannot, but still name the person, make the variant *partial*
  (:func:`residual_mentions`), and the probe holds the step for review with
  :func:`residual_reason` (``status = "unreadable"``): the swapped surname alone where it is
  capitalised or sits in an identifier (``schmidt@…`` after swapping ``Emily Schmidt``,
  ``Schmidt_file``, ``id_schmidt_7``; not ``carter@…``: ``Carter`` is also a word), the
  initial and surname glued in an identifier (``mcarter@…``, ``carterm_2``), the pair with
  another separator (``mary / carter``, ``mary,carter``) or glued in lower case in an
  identifier (``marycarter@…``).

The rule is precise rather than eager: a first name alone is never a residual (``grace
period`` after swapping ``Grace Kim``; a capitalised lone first name is swapped by the rewrite
anyway), a surname alone in lower-case prose is not one (``the baker said``), nor a surname
that is a common word (:data:`COMMON_WORDS` and the person words), and the surname counts
only in variants that swap it (a gender variant keeps the surname on purpose). A lone first
name given without a surname is not followed (docs/detection.md, "Residual forms").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from biasbreaker.probe.mapping import CounterfactualMapping, Variant
from biasbreaker.probe.names import fold
from biasbreaker.probe.payloads import Path, describe_path, leaves
from biasbreaker.probe.terms import TermSet

__all__ = [
    "COMMON_WORDS",
    "PairHit",
    "Residual",
    "moved_persons",
    "pair_hits",
    "residual_mentions",
    "residual_reason",
]

COMMON_WORDS = frozenset(
    """
    baker bell bird bishop black bond booth bowman brown bush butler card carpenter carter
    cash chance church clay cook cooper cross crown day dean duke england english fields fish
    fisher ford fox free frost fuller gardner gay glass gold golden good goodman grant gray
    green grey hall hart hay hill holder hood hope horn house hunt hunter ivy judge keys king
    knight lamb lane law little long lord love major march marsh mason may miller mills moon
    moss noble north oak page park parks pike pool porter power price rice rich ring rivers
    rock rose ross rush salt sharp short small smith snow south sparks spring stone storm
    strong summer summers swan swift taylor turner vine wall ward warren waters weaver webb
    wells west white wise wolf wood woods young
    """.split()  # noqa: SIM905
)
"""Surnames of the 2010 Census table that are also common English words (130, hand-written).
A swapped surname among them, alone, is never read as a residual of its person: ``the baker
said`` after swapping ``Mary Baker`` is a baker (the pair ``mary.baker`` still counts)."""

_LETTER = r"[^\W\d_]"
_PATTERNS = 4096
"""Compiled patterns of persons kept (per kind; the least recently used dropped first)."""
_ID_BEFORE = re.compile(r"(?:[@_/\d]|[^\W_]\.)$")
"""An identifier character before a word: ``@``, ``_``, ``/``, a digit, or a ``.`` after a
letter or digit (``j.carter``)."""
_ID_AFTER = re.compile(r"[@_/\d]|\.[^\W_]")
"""An identifier character after a word, or a ``.`` before a letter or digit (``carter.x``)."""
_PAIR_SEPARATORS = r"[ \t]*[._-][ \t]*|[ \t]+"
"""What may join a first name and a surname in a form :func:`pair_hits` rewrites."""
_REVERSED_SEPARATORS = r"[ \t]*[,._-][ \t]*|[ \t]+"
"""What may join a surname and a first name written surname first (``carter, mary``)."""
_CAMEL = r"(?-i:(?<=[a-z])(?=[A-Z]))"
"""Nothing between a lower-case letter and a capital: two words glued in camel case
(``MaryCarter``; ``marycarter`` is not rewritten)."""
_LOOSE = r"[ \t]*[,/|+][ \t]*|[^\w\s]{1,2}|[ \t_]+|"
"""What may join a pair :func:`residual_mentions` reports: a comma, slash, bar or plus, white
space around it or not (``mary / carter``, ``mary,carter``), up to two other marks with no
white space (``carter:mary``; ``carter.mary`` is swapped first, :data:`_REVERSED_SEPARATORS`),
white space or ``_``, or nothing (``marycarter``). Not a full stop and a space: ``… Carter.
mary …`` spans two sentences."""


@dataclass(frozen=True, slots=True)
class PairHit:
    """A first name and surname of a swapped person side by side, to rewrite exactly.

    Args:
        start: Offset of the match in its text.
        end: Offset after it.
        replacement: The match with each name word replaced by its counterpart, in its case.
    """

    start: int
    end: int
    replacement: str


@dataclass(frozen=True, slots=True)
class Residual:
    """A form of a swapped person that a variant left standing.

    Args:
        path: Where the string sits in the variant (as :class:`~biasbreaker.probe.mapping.
            Detection`'s ``path``).
        surface: The form as written (``"carter"``, ``"mcarter"``).
        person: The person's name as the input wrote it (``"Mary Carter"``).
        form: ``"pair"`` (first name and surname), ``"surname"`` or ``"initial"`` (the
            initial glued to the surname).
        axis: The axis of the variant that left it (``"race"``).
    """

    path: Path
    surface: str
    person: str
    form: Literal["pair", "surname", "initial"]
    axis: str


def _spellings(word: str) -> list[str]:
    """The ways ``word`` may be written: as is, accents removed, apostrophes removed."""
    folded = fold(word)
    out = [word, folded, folded.replace("'", "").replace("’", "")]
    return list(dict.fromkeys(w for w in out if w))


@functools.lru_cache(maxsize=_PATTERNS)
def _alt(word: str) -> str:
    return "(?:" + "|".join(re.escape(w) for w in _spellings(word)) + ")"


def _cased(source: str, target: str) -> str:
    """``target`` in the case of ``source``: lower, upper, capitalised or as given."""
    if source.islower():
        return target.lower()
    if source.isupper():
        return target.upper()
    if source[:1].isupper():
        return target[:1].upper() + target[1:]
    return target


def moved_persons(mapping: CounterfactualMapping) -> Iterator[tuple[str, str, str, str]]:
    """The persons a one-axis mapping swaps: ``(first, last, new_first, new_last)``.

    A person is a full-name pair of ``mapping.names`` (``("Mary Carter", "Diana Vu")``, or
    ``("Mary Carter", "Jenna Carter")`` for a gender swap, the surname kept). A joint
    mapping yields its steps' persons.
    """
    for step in mapping.steps or (mapping,):
        for src, dst in step.names:
            first, _, last = src.partition(" ")
            new_first, _, new_last = dst.partition(" ")
            if last and new_last and " " not in last and " " not in new_last:
                yield first, last, new_first, new_last


def pair_hits(text: str, mapping: CounterfactualMapping) -> list[PairHit]:
    """Where ``text`` names a person ``mapping`` swaps by first name and surname side by side.

    Both words whole (no letter before or after), in any case, joined by one of
    :data:`_PAIR_SEPARATORS` (or, surname first, :data:`_REVERSED_SEPARATORS`), or glued in
    camel case (``MaryCarter``: a lower-case letter, then the second word's capital). Each
    word becomes its counterpart in the case it had (:func:`_cased`), the separator kept.

    Args:
        text: One string of a payload.
        mapping: A one-axis mapping (its full-name pairs are the persons).

    Returns:
        The hits, per person, forward pairs then surname-first ones, each in text order
        (they may overlap the rewrite's own name hits; the rewrite keeps the longest at a
        start and drops overlaps).
    """
    out: list[PairHit] = []
    for first, last, new_first, new_last in moved_persons(mapping):
        for order, pattern in _pair_patterns(first, last):
            for m in pattern.finditer(text):
                new = {"a": _cased(m.group("a"), new_first), "b": _cased(m.group("b"), new_last)}
                out.append(
                    PairHit(m.start(), m.end(), new[order[0]] + m.group("sep") + new[order[1]])
                )
    return out


@functools.lru_cache(maxsize=_PATTERNS)
def _pair_patterns(first: str, last: str) -> tuple[tuple[tuple[str, str], re.Pattern[str]], ...]:
    """:func:`pair_hits`' two patterns of a person: ``((group order, pattern), ...)``.

    Forward (order ``("a", "b")``: first name, then surname) and surname first (``("b",
    "a")``). Compiled once per person: the rewrite asks for them on every string of every
    variant, more patterns than ``re``'s own cache of 512 holds.
    """
    a, b = _alt(first), _alt(last)
    out: list[tuple[tuple[str, str], re.Pattern[str]]] = []
    for order, one, two, seps in (
        (("a", "b"), a, b, _PAIR_SEPARATORS),
        (("b", "a"), b, a, _REVERSED_SEPARATORS),
    ):
        pattern = re.compile(
            rf"(?<!{_LETTER})(?P<{order[0]}>{one})(?P<sep>{seps}|{_CAMEL})(?P<{order[1]}>{two})"
            rf"(?!{_LETTER})",
            re.IGNORECASE,
        )
        out.append((order, pattern))
    return tuple(out)


def _identifier_side(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` touches an identifier character on either side.

    ``@``, ``_``, ``/`` or a digit right before or after it, or a ``.`` between it and a
    letter or digit (``mary.carter``, ``j.carter``; not a full stop: ``… carter.``); or it is
    the whole string, white space aside (a user name, a message's ``name``: ``"mcarter"``).
    """
    if not text[:start].strip() and not text[end:].strip():
        return True
    return bool(_ID_BEFORE.search(text, endpos=start) or _ID_AFTER.match(text, end))


def _common(word: str, terms: TermSet) -> bool:
    """Whether a surname is also a common word, so that alone it names no one.

    One of :data:`COMMON_WORDS` or a person word (``farmer``, ``barber``). (A term of an axis
    is never read as part of a person's name, so it needs no check here.)
    """
    key = fold(word)
    return key in COMMON_WORDS or key in terms.person_words


def _found(text: str, pattern: str) -> Iterator[re.Match[str]]:
    yield from _whole_words(pattern).finditer(text)


@functools.lru_cache(maxsize=_PATTERNS)
def _whole_words(pattern: str) -> re.Pattern[str]:
    """``pattern`` standing between no letters, in any case, compiled once.

    ``re``'s own cache holds 512 patterns, fewer than one probe's persons and forms.
    """
    return re.compile(rf"(?<!{_LETTER})(?:{pattern})(?!{_LETTER})", re.IGNORECASE)


def residual_mentions(variants: Sequence[Variant], terms: TermSet) -> tuple[Residual, ...]:
    """The forms of swapped persons that one-axis variants left standing (module docstring).

    For each one-axis variant and each person its mapping swaps (:func:`moved_persons`),
    its strings (values and dict keys) are searched for the original person:

    * ``pair``: the first name and surname side by side, in either order, joined by up to
      two marks or white space or ``_`` (:data:`_LOOSE`), in any case; glued (nothing
      between) only in an identifier (``marycarter@…``: :func:`_identifier_side`). Any
      variant that swaps the person.
    * ``surname``: the surname alone, capitalised or in an identifier (``schmidt@…``,
      ``Schmidt_file``), not a common word (:func:`_common`). Only variants that change the
      surname (a gender variant keeps it).
    * ``initial``: the first name's initial glued before or after the surname in an
      identifier (``mcarter@…``, ``carterm_2``), the surname of three letters or more and
      not a common word. Only variants that change the surname.

    Joint variants are left out, as in :func:`~biasbreaker.probe.mapping.unswapped_keys`:
    their steps are the one-axis variants' mappings, and those are the test of each axis.

    Args:
        variants: The variants of one payload (:attr:`~biasbreaker.probe.mapping.
            CounterfactualSet.variants`).
        terms: The term set (its name book and words tell the common words).

    Returns:
        One residual per form, path and person, in variant, then person, then text order.
    """
    out: dict[tuple[Path, str, str], Residual] = {}
    for variant in variants:
        if variant.mapping.steps:
            continue
        axis = variant.mapping.axis
        persons = list(moved_persons(variant.mapping))
        for path, text in leaves(variant.payload):
            for first, last, _, new_last in persons:
                person = f"{first} {last}"
                a, b = _alt(first), _alt(last)
                paired: list[range] = []
                for pattern in (f"{a}(?:{_LOOSE}){b}", f"{b}(?:{_LOOSE}){a}"):
                    for m in _found(text, pattern):
                        if m.group(0).isalpha() and not _identifier_side(text, m.start(), m.end()):
                            continue
                        paired.append(range(m.start(), m.end()))
                        out.setdefault(
                            (path, m.group(0), person),
                            Residual(path, m.group(0), person, "pair", axis),
                        )
                if fold(last) == fold(new_last):
                    continue  # a gender variant keeps the surname on purpose
                for m in _found(text, b):
                    if any(m.start() in inside for inside in paired) or _common(last, terms):
                        continue
                    if m.group(0)[:1].isupper() or _identifier_side(text, m.start(), m.end()):
                        out.setdefault(
                            (path, m.group(0), person),
                            Residual(path, m.group(0), person, "surname", axis),
                        )
                initial = re.escape(fold(first)[:1])
                if len(fold(last)) < 3:
                    continue
                for m in _found(text, f"{initial}{b}|{b}{initial}"):
                    if _identifier_side(text, m.start(), m.end()) and not _common(
                        m.group(0), terms
                    ):
                        out.setdefault(
                            (path, m.group(0), person),
                            Residual(path, m.group(0), person, "initial", axis),
                        )
    return tuple(out.values())


def residual_reason(found: Sequence[Residual]) -> str:
    """The hold reason for :func:`residual_mentions`' forms.

    Example: ``partial counterfactual: the input still names 'Mary Carter' as 'carter' in
    payload['messages'][0]['content'] (its surname, left as written by the race variant),
    which the probe does not rewrite; …``.
    """
    what = {
        "pair": "first name and surname",
        "surname": "its surname",
        "initial": "initial and surname",
    }
    shown = "; ".join(
        f"{r.person!r} as {r.surface!r} in {describe_path(r.path)} ({what[r.form]}, left as "
        f"written by the {r.axis} variant)"
        for r in found
    )
    return (
        f"partial counterfactual: the input still names {shown}, which the probe does not "
        "rewrite. Every variant would keep the original person there, so a step that reads "
        "it would answer the same and score 0 untested. The step is held for review; write "
        "the name as the probe reads it (capitalised first name and surname) or leave the "
        "form out of what the step sees, or set probe=False for this step and review its "
        "outputs (docs/detection.md, 'Residual forms')"
    )
