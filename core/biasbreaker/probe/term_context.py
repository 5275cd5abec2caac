"""When a term counts: the context rules of terms and sex codes.

A context-dependent word counts only before a person word, coordinated with one, after a
field label of its axis or as a predicate (:meth:`TermReader.term_hit`); a one-letter sex code
only where a code stands (:meth:`TermReader.glued_hits`, and the code rules of
:meth:`TermReader.term_hit`).
"""

from __future__ import annotations

import re

from biasbreaker.probe.ages import glued_sex_codes, slash_age_before
from biasbreaker.probe.context import (
    COPULAS,
    FUNCTION_WORDS,
    POSSESSIVE,
    norm,
    word_after,
    word_before,
)
from biasbreaker.probe.fields import FIELD_WORDS
from biasbreaker.probe.patterns import Compiled, Hit
from biasbreaker.probe.records import id_bracket_before, record_code
from biasbreaker.probe.terms import Axis, TermSet

__all__ = ["LAY_PERSONS", "LONE_CODE", "TermReader"]

_LANGUAGE_VERBS = frozenset(
    """
    speak speaks spoke speaking spoken learn learns learned learnt learning fluent translate
    translates translated translating
    """.split()  # noqa: SIM905
)
_ONE = frozenset({"one", "ones"})
_COORDINATED = re.compile(r"\s*,?\s*(?:and|or|nor)\s+(?:(?:a|an|the)\s+)?[\w'’-]+\s+(\w+)", re.I)
_STACKED = re.compile(r"\s*,?\s*(\w[\w'’-]*)")
_RANKS = frozenset({"senior"})
"""Terms that are a job level or rank before most person words (``senior engineer``, ``senior
partner``, ``senior candidate``, ``senior member``): they count only before a word of
:data:`LAY_PERSONS`, which names a person by no job or rank (``a senior applicant``)."""
LAY_PERSONS = frozenset(
    """
    applicant applicants citizen citizens person persons people man men woman women adult
    adults resident residents patient patients customer customers client clients borrower
    borrowers tenant tenants homeowner homeowners renter renters driver drivers couple
    couples individual individuals lady ladies gentleman gentlemen household households
    traveller travellers traveler travelers passenger passengers
    """.split()  # noqa: SIM905
)
_CODE_LABEL = re.compile(
    r"(?:\b(?:sex|gender|geschlecht|sexe|sexo|sesso|g[eé]nero|genere)|\bm\s*/\s*f)"
    r"(?:\s*[:=\-–]\s*|\s+)$",
    re.IGNORECASE,
)
"""A sex label before a code: ``Sex: F``, ``gender=m``, ``Gender - F``, ``M/F: F``, ``SEX F``;
the labels of the form fields of :data:`~biasbreaker.probe.fields.FIELD_WORDS` in German,
French, Spanish, Portuguese and Italian too (``Geschlecht: W``, ``sexe: F``, ``Sexo: M``,
``Género: F``, ``sesso: F``): a short form in those languages is often not identified as one,
and its code was then not read."""
_CODE_WORDS = frozenset({"w", "fem", "fem.", "masc", "masc."})
"""Sex codes of more than one letter, or one other than ``F``/``M``, read only where a code
stands (:meth:`TermReader._coded`): ``FEM`` is also a finite element method."""
_LABEL_ONLY = frozenset({"w"})
"""Codes read only after a sex label (``Sex: W``, German *weiblich*): ``(W)`` is a watt, a
win or a race code elsewhere."""
_CODE_AGE_BEFORE = re.compile(
    r"(?<![\w.-])\d{1,3}\s*(?:y/o|y\.o\.|yo|yrs?\.?(?:\s*old)?|years?\s+old),?\s*$", re.I
)
"""An age written with its unit before a code: ``63 yo F``, ``63 y/o M``, ``63 years old, F``."""
_LABELLED_CODE = re.compile(r"^[^\W\d_]+\s*[:=]\s*\S+$")
"""A term that is a field label and a code (``race: b``, ``nationality: mx``)."""
_LOWER_WORD_AFTER = re.compile(r"[ \t]+[a-z]")
"""A lower-case word after a labelled code: a one-letter code or one written in lower case is
then a word opening a sentence (``Race: A new study``); ``Nationality: US citizen`` is a code."""
_CODE_AGE_AFTER = re.compile(r"\s*(?P<sep>[/,])\s*(?:1[6-9]|[2-9]\d|1[01]\d)(?!\d)")
"""An adult age after a code: ``applicant F/63``, or ``F, 35, …`` opening a line."""
_LINE_START = re.compile(r"(?:^|\n)\s*$")
_CODE_OPEN = re.compile(
    r"(?:([^\W\d_][\w'’-]*)\s+)?([^\W\d_][\w'’-]*)\.?\s*\(\s*(?:\d{1,3}\s*[,/]\s*)?$"
)
_CODE_CLOSE = re.compile(r"\s*(?:\)|[,/]\s*\d{1,3}\s*\))")
LONE_CODE = re.compile(r"(?<![\w.'’-])[FM](?![\w'’-]|\.\w)")
"""A lone upper-case ``F`` or ``M`` (not ``M.D.``, ``F-150``): a record field, perhaps a sex code
(:func:`~biasbreaker.probe.records.record_code`)."""
_NOT_CODED = frozenset({"size", "grade", "type", "class", "plan", "option", "part", "section"})
"""Capitalised words whose bracketed letter is a size, mark or option (``Size (M)``)."""
_ALL_CAPS = re.compile(r"[A-Z]{2,}\.?")
_CAPITAL_AFTER = re.compile(r"\.?[ \t]+[A-Z]")
"""A title written in capitals (``MS``, ``MR.``; its rows are ``case_sensitive``) is one only
before a capitalised word (``MS SMITH``, ``MR. Carter``): ``an MS in Finance`` is a degree
(Master of Science), ``MS`` alone also multiple sclerosis; a new-user trial saw ``She holds an
MS in Finance`` become ``He holds an MR in Finance``."""
_IDIOMS: dict[str, frozenset[str]] = {
    key: frozenset(
        """
        tongue tongues language languages country countries land lands nature earth ship
        ships lode board boards church company companies
        """.split()  # noqa: SIM905
    )
    for key in ("mother", "father")
}
"""Gender terms that, before one of these words, make a compound naming no person, so they
are no mention and are not swapped: ``mother tongue``, ``mother language``, ``mother
country``, ``mother land``, ``Mother Nature``, ``Mother Earth``, ``mother ship``, ``mother
lode``, ``mother board``, ``mother church``, ``mother company`` (the compounds of Merriam-
Webster's entries for *mother* and *father* that name a thing; a trial saw ``Mother tongue:
Spanish`` become ``Father tongue: Spanish``). Compounds that name a person keep swapping
(``mother-in-law``, ``founding fathers``, ``Mother Superior``); the language itself is a
national-origin proxy held by :mod:`biasbreaker.probe.held` (:data:`~biasbreaker.probe.held.
_HOME_LANGUAGE`)."""
_STACK_DEPTH = 3
"""How many protected adjectives may stand between a term and its person word."""
_FIELD_LABEL = re.compile(r"([^\W\d_]+)\s*[:=]\s*$")


class TermReader:
    """Which matches of the term pattern are protected mentions (the context rules).

    Args:
        terms: The term set (its person words license context-dependent terms).
        compiled: The finder's compiled patterns (:func:`~biasbreaker.probe.patterns.
            compile_patterns`).
    """

    def __init__(self, terms: TermSet, compiled: Compiled) -> None:
        self.terms = terms
        self.compiled = compiled

    def glued_hits(self, text: str) -> list[Hit]:
        """Sex codes glued to an age or one space after it (``63F``, ``Pt 67 F``).

        Each is a hit when the code is a term of a configured axis; the spans are
        :func:`~biasbreaker.probe.ages.glued_sex_codes`.
        """
        out: list[Hit] = []
        for start, end in glued_sex_codes(text):
            surface = text[start:end]
            axis = self.compiled.axis_of.get(norm(surface))
            if axis is not None:
                groups = tuple(dict.fromkeys(e.group for e in axis.index[norm(surface)]))
                out.append(Hit(start, end, surface, "term", axis.name, groups))
        return out

    def term_hit(self, text: str, m: re.Match[str]) -> Hit | None:
        """The term match ``m`` of ``text`` as a hit, or ``None`` where its context rules say no."""
        surface = m.group(0)
        key = norm(surface)
        axis = self.compiled.axis_of.get(key)
        if axis is None:
            return None
        entries = axis.index[key]
        rows = [axis.rows[e.row] for e in entries]
        if all(r.case_sensitive for r in rows) and not surface[:1].isupper():
            return None
        if (
            all(r.case_sensitive for r in rows)
            and _ALL_CAPS.fullmatch(surface)
            and not _CAPITAL_AFTER.match(text, m.end())
        ):
            return None  # "an MS in Finance", "MS patients": a degree or a disease
        if (word_after(text, m.end()) or "").lower() in _IDIOMS.get(key, ()):
            return None  # "Mother tongue: Spanish", "the mother ship": no parent
        groups = tuple(dict.fromkeys(e.group for e in entries))
        if axis.name == "nationality":
            prev = word_before(text, m.start())
            if prev is not None and prev.lower() in _LANGUAGE_VERBS:
                return None
        if ((len(key) == 1 and key.isalpha()) or key in _CODE_WORDS) and not self._coded(
            text, m.start(), m.end(), key
        ):
            return None
        if _LABELLED_CODE.match(key) and _LOWER_WORD_AFTER.match(text, m.end()):
            code = re.split(r"[:=]\s*", surface)[-1]
            if len(code) == 1 or code.islower():
                return None  # "Race: A new study", "Nationality: in the file": words
        if key in _RANKS and (word_after(text, m.end()) or "").lower() not in LAY_PERSONS:
            return None
        if key in axis.needs_person_word and not self._licensed(
            text, m.start(), m.end(), key, axis
        ):
            return None
        return Hit(m.start(), m.end(), surface, "term", axis.name, groups)

    def _coded(self, text: str, start: int, end: int, key: str) -> bool:
        """Whether a code ``key`` at ``text[start:end]`` (``F``, ``M``, ``Fem``) is a sex code.

        Yes after a sex label (:data:`_CODE_LABEL`: ``Sex: F``, ``gender=m``, ``Gender - F``,
        ``M/F: F``); and, except for :data:`_LABEL_ONLY` codes (``W``), after an age with its
        unit (``63 yo F``) or an adult age and a slash (``67/F``, not ``page 63/M``:
        :func:`~biasbreaker.probe.ages.slash_age_before`), before a slash and an adult age
        (``applicant F/63``) or, opening a
        line, a comma and one (``F, 35, income 50k``), or in brackets, alone or beside an age,
        after a person word or a capitalised word (``Applicant (F)``, ``Mary Smith (F, 63)``,
        ``Smith (63/M)``) that is not one of :data:`_NOT_CODED`; a capitalised one-letter word
        counts only after a person word (``Applicant B (F)``, not ``Plan B (F)``). Anywhere else
        a letter is an initial, a size or a unit (``M. Dupont``, ``Size M``).
        """
        before = text[max(0, start - 40) : start]
        if _CODE_LABEL.search(before):
            return True
        if key in _LABEL_ONLY:
            return False
        if _CODE_AGE_BEFORE.search(before) or slash_age_before(before):
            return True
        aged = _CODE_AGE_AFTER.match(text, end)
        if aged is not None and (aged.group("sep") == "/" or _LINE_START.search(before)):
            return True
        people = self.terms.person_words
        if id_bracket_before(before, people) and _CODE_CLOSE.match(text, end):
            return True
        if record_code(text, start, end, people) == "code":
            return True
        m = _CODE_OPEN.search(before)
        if m is None or not _CODE_CLOSE.match(text, end):
            return False
        word = m.group(2).lower()
        if word in people:
            return True
        if len(word) == 1:  # an option's letter ("Plan B (F)") unless a person's ("Applicant B")
            return m.group(1) is not None and m.group(1).lower() in people
        return m.group(2)[:1].isupper() and word not in _NOT_CODED

    def _licensed(self, text: str, start: int, end: int, key: str, axis: Axis) -> bool:
        """Whether a context-dependent term at ``text[start:end]`` refers to people.

        Yes after a field label of its axis (``Race: Black``, ``ethnicity = white``: a word of
        :data:`~biasbreaker.probe.fields.FIELD_WORDS`), when the next word is a person word
        or "one(s)" ("a black doctor", "the straight one"), or when up to
        :data:`_STACK_DEPTH` other protected terms stand between ("a Black Muslim woman", "a
        Black, disabled veteran": without this, "Black" went undetected and a step denying
        Black applicants scored 0), or when it is coordinated with a word that is ("a gay and
        a straight couple").
        A predicative form (``straight``, ``deaf`` …) also counts after a copula at the end of
        a phrase ("she is deaf."), and when its sentence has an unambiguous term of the same
        axis ("one pansexual and one straight").
        """
        if _after_label(text, start, axis.name):
            return True
        nxt = word_after(text, end)
        if nxt is not None:
            nxt = POSSESSIVE.sub("", nxt)
        people = self.terms.person_words
        if nxt is not None and (nxt.lower() in people or nxt.lower() in _ONE):
            return True
        if self._stacked(text, end):
            return True
        m = _COORDINATED.match(text, end)
        if m is not None and (m.group(1).lower() in people or m.group(1).lower() in _ONE):
            return True
        if key in axis.predicative:
            if self._anchored(text, start, end, axis):
                return True
            prev = word_before(text, start)
            copula = prev is not None and (
                prev.lower() in COPULAS or prev.lower().endswith(("'s", "’s", "'re", "’re"))
            )
            return copula and (nxt is None or nxt.lower() in FUNCTION_WORDS)
        return False

    def _stacked(self, text: str, end: int) -> bool:
        """Whether protected terms, then a person word or "one(s)", follow ``text[:end]``."""
        people = self.terms.person_words
        pos = end
        for depth in range(_STACK_DEPTH + 1):
            m = _STACKED.match(text, pos)
            if m is None:
                return False
            word = POSSESSIVE.sub("", m.group(1)).lower()
            if depth > 0 and (word in people or word in _ONE):
                return True
            if norm(word) not in self.compiled.axis_of:
                return False
            pos = m.end()
        return False

    def _anchored(self, text: str, start: int, end: int, axis: Axis) -> bool:
        """Whether the sentence around ``text[start:end]`` has a context-free term of ``axis``."""
        left = max(text.rfind(c, 0, start) for c in ".!?\n")
        rights = [i for i in (text.find(c, end) for c in ".!?\n") if i != -1]
        right = min(rights) if rights else len(text)
        pattern = self.compiled.terms
        if pattern is None:
            return False
        for m in pattern.finditer(text, left + 1, right):
            key = norm(m.group(0))
            if (
                m.start() != start
                and self.compiled.axis_of.get(key) is axis
                and key not in axis.needs_person_word
            ):
                return True
        return False


def _after_label(text: str, start: int, axis: str) -> bool:
    """Whether ``text[:start]`` ends with a field label of ``axis`` and ``:`` or ``=``."""
    m = _FIELD_LABEL.search(text, max(0, start - 40), start)
    return m is not None and m.group(1).lower() in FIELD_WORDS.get(axis, frozenset())
