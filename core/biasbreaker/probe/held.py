"""Held mentions: what the probe reads but cannot swap, and the reasons it gives.

A characteristic no variant can swap (:data:`UNSWAPPABLE`: pregnancy) and mentions of a kind
the rewrite cannot move (:class:`HeldReader`: a gender identity, a term inside an identifier,
a name in lower case or inside an e-mail address, a condition with no nondisabled
counterpart, a nationality outside the axis …) hold the step for review with the reason
:func:`held_reason` or :func:`unswappable_reason` gives.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from biasbreaker.probe.conditions import condition_mentions
from biasbreaker.probe.context import (
    COPULAS,
    FUNCTION_WORDS,
    OBJECT_VERBS,
    SENTENCE_OPEN,
    norm,
    word_after,
    word_before,
)
from biasbreaker.probe.countries import country_mentions
from biasbreaker.probe.name_context import (
    CALENDAR,
    NAME_WORD,
    PERSON_VERBS,
    POSSESSIVE_END,
    WORD_NAMES,
)
from biasbreaker.probe.names import (
    GENDER_SHARE,
    ORGANISATIONS,
    PLACE_WORDS,
    first_name_info,
    fold,
    name_shares,
    person_name,
)
from biasbreaker.probe.patterns import Compiled, Hit
from biasbreaker.probe.payloads import Path, describe_path
from biasbreaker.probe.proxies import proxy_mentions
from biasbreaker.probe.records import record_code
from biasbreaker.probe.surnames import bare_surnames
from biasbreaker.probe.term_context import LAY_PERSONS, LONE_CODE, TermReader
from biasbreaker.probe.terms import Axis, TermSet

__all__ = [
    "UNSWAPPABLE",
    "Held",
    "HeldReader",
    "held_reason",
    "unswappable_reason",
]

UNSWAPPABLE: Mapping[str, re.Pattern[str]] = {
    "gender": re.compile(
        r"(?<![\w-])(?:pregnan(?:t|cy|cies)|expecting\s+(?:a\s+)?(?:baby|child))(?![\w-])",
        re.IGNORECASE,
    ),
}
"""Axis → the words of a characteristic protected under that axis that no variant can swap.
Pregnancy is sex discrimination (US Pregnancy Discrimination Act of 1978, 42 U.S.C. §
2000e(k)), but a variant of another sex cannot stay pregnant, and one that drops the word is
no longer the same applicant in another group: no sound counterfactual exists, so an input
naming it is held (:meth:`~biasbreaker.probe.mentions.MentionFinder.unswappable`).
``maternity``/``paternity`` (leave) is a gender term pair and swaps."""
_LOWER_NAME_PLACE = re.compile(
    r"(?<![\w'’-])(?:(?:first[ \t]+|given[ \t]+)?name[ \t]*[:=][ \t]*|name[ \t]+is[ \t]+|"
    r"named[ \t]+|dear[ \t]+|i['’]?m[ \t]+|i[ \t]+am[ \t]+|this[ \t]+is[ \t]+|"
    r"applicant[ \t]*[:=#-]?[ \t]*)([a-z]+)(?![\w'’-])",
    re.IGNORECASE,
)
"""Where a word is a first name even in lower case: after ``name:``, ``my name is``,
``named``, ``dear``, ``i'm``/``im``/``i am``, ``this is`` or ``applicant`` (``hi i'm emily``)."""
_NOT_SURNAMES = FUNCTION_WORDS | PERSON_VERBS | COPULAS | OBJECT_VERBS | LAY_PERSONS
"""Lower-case words never read as the surname of a lower-case name (``mary said``, ``greg is``)."""
_CAPITAL_OPENING = re.compile(r"(?:^|[.!?:\n][ \t\n]*)[ \t]*[\"“(]?[A-Z]")
"""A sentence or line opened with a capital: the text capitalises (``At the charity dinner``)."""
_IDENTIFIER = re.compile(r"(?<![\w-])[^\W_]+(?:[_-]+[^\W_]+)*(?![\w-])")
"""A word, or words joined by ``_`` or ``-``: a candidate identifier."""
_CAMEL = re.compile(r"(?<![\w-])[a-z][a-z0-9]*[A-Z]")
"""A camelCase identifier's start (``applicantGender``; ``DeShawn``, ``McDonald`` are names)."""
_IDENT_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_HANDLE = re.compile(r"(?<![\w.@-])[A-Za-z0-9][\w.+-]*(?:@[\w-]+(?:\.[\w-]+)+)?")
"""A token that may be an e-mail address or an identifier (``HeldReader._identifier_people``)."""
_GLUED_PAIR = re.compile(r"[A-Z][a-z]+[A-Z][a-z]+")
"""Two capitalised words glued (``MaryCarter``; not ``McDonald``: ``Mc`` is no first name)."""
_NOT_IN_IDENTIFIER = frozenset({"he", "she", "him", "her", "his", "hers", "man", "men"})
"""Terms not read inside an identifier: pronouns and ``man`` make compounds that name no one
(``he-said``, ``man_hours``, ``man-made``, ``man_page``)."""
_GENDER_IDENTITY = re.compile(
    r"(?<![\w/-])(?:(?:they|xe|ze|ey|fae)\s*/\s*(?:them|their|theirs|xem|xyr|zir|hir|zem|em|"
    r"faer)|non-?binary|enby|genderqueer|gender-?fluid|agender|bigender|two-spirit|"
    r"transgender|cisgender|gender[ -]non-?conforming|"
    r"trans[ -]?(?:wom[ae]n|m[ae]n|girls?|boys?|persons?|people|folks?|individuals?|femmes?|"
    r"mascs?)|(?<=is |am |as )trans(?=[ \t]*(?:[.,;:!?)]|and\b|$))|mtf|ftm|"
    r"(?-i:Mx)\.?(?=[ \t]+[A-Z]))(?![\w/-])",
    re.IGNORECASE,
)
"""Gender identities the gender axis (male, female) has no group for: a pronoun declaration
other than she/her and he/him (``they/them``, ``xe/xem``) and the words ``nonbinary``,
``genderqueer``, ``transgender``, ``cisgender``, ``trans woman``/``trans man`` (a new-user
trial found ``a trans woman`` swapped to ``a trans man``), ``she is trans.``, ``MtF``/``FtM``
…. Gender identity is protected as sex (US
Supreme Court, *Bostock v. Clayton County*, 2020), but no variant of another group keeps it
nor drops it soundly, so an input naming one is held (:meth:`HeldReader.held`), like
pregnancy. A bare ``they`` is no declaration (it is also plural). The title ``Mx.`` before a
capitalised word is one (a trial saw ``Mx. Taylor`` become ``Mx. Heather``, a woman's first
name under a nonbinary title); ``mx`` in lower case or alone is none."""
_SAME_SEX_SPOUSE = re.compile(
    r"(?<![\w'’-])(?:his[ \t]+(?:husbands?|boyfriends?|fianc[eé])|her[ \t]+(?:wife|wives|"
    r"girlfriends?|fianc[eé]e))(?![\w'’-])",
    re.IGNORECASE,
)
"""A same-sex spouse or partner (``his husband``, ``her wife``, ``her girlfriend``): a sexual
orientation no term of that axis names. A gender variant moves both words (``his husband`` →
``her wife``), keeping the orientation, and no orientation variant can move it (the other
groups are no spouse word), so an input with one is held when sexual orientation is an axis
(:meth:`HeldReader.held`), like a gender identity. ``my husband`` tells nothing (the
speaker's gender is unknown)."""


@dataclass(frozen=True, slots=True)
class Held:
    """A mention the probe reads but cannot swap: where, its axis, its surface and what it is."""

    path: Path
    axis: str
    surface: str
    what: str


class HeldReader:
    """Find the mentions the probe reads but cannot swap (:meth:`held`).

    Args:
        terms: The term set.
        axes: The axes looked for.
        compiled: The finder's compiled patterns.
        reader: The finder's term rules (a term inside an identifier is read by them).
    """

    def __init__(
        self, terms: TermSet, axes: Sequence[Axis], compiled: Compiled, reader: TermReader
    ) -> None:
        self.terms = terms
        self.axes = tuple(axes)
        self.compiled = compiled
        self.reader = reader

    def held(self, texts: Sequence[tuple[Path, str, Sequence[Hit]]]) -> tuple[Held, ...]:
        """The mentions the probe reads but cannot swap, each with what it is.

        A gender identity the gender axis has no group for (:data:`_GENDER_IDENTITY`:
        ``they/them``, ``nonbinary``, ``transgender``); a term inside an identifier of a string
        value (``female_applicant``, ``seniorCitizen``, ``is-female``:
        :meth:`_identifier_terms`); a person's name written in lower case (``mary carter``:
        :meth:`_lower_case_people`); a condition said of a person that has no nondisabled
        counterpart (``has epilepsy``: :func:`~biasbreaker.probe.conditions.
        condition_mentions`); a lone ``F``/``M`` beside an age in a record naming no person
        (``4471 | F | 35``: :func:`~biasbreaker.probe.records.record_code`); a surname
        before a verb of a person that is also a country or a US state (``Washington was
        denied``: :func:`~biasbreaker.probe.surnames.bare_surnames`). A dict key's own text is
        left to the structured-field rules (:func:`~biasbreaker.probe.fields.opaque_fields`).

        Args:
            texts: ``(path, text, hits)`` per string of a payload (its dict keys' own text left
                out), ``hits`` the finder's scan of ``text``.

        Returns:
            One :class:`Held` per mention, in payload then text order.
        """
        out: list[Held] = []
        named = {norm(h.name) for _, _, hits in texts for h in hits if h.kind == "name"}
        identity = any(a.name == "gender" for a in self.axes)
        nationality = any(a.name == "nationality" for a in self.axes)
        orientation = any(a.name == "sexual-orientation" for a in self.axes)
        disability = any(a.name == "disability" for a in self.axes)
        race = any(a.name == "race" for a in self.axes)
        axis_names = [a.name for a in self.axes]
        for path, text, hits in texts:
            read = [(h.start, h.end) for h in hits]
            if identity:
                out.extend(
                    Held(path, "gender", m.group(0), f"the gender identity {m.group(0)!r}")
                    for m in _GENDER_IDENTITY.finditer(text)
                )
            if nationality:
                out.extend(self._other_nationalities(path, text, read))
            if orientation:
                out.extend(
                    Held(path, "sexual-orientation", m.group(0), f"the same-sex spouse "
                         f"{m.group(0)!r}, a sexual orientation no variant can move")
                    for m in _SAME_SEX_SPOUSE.finditer(text)
                )  # fmt: skip
            if identity:
                out.extend(
                    Held(path, "gender", m.group(0), f"the letter {m.group(0)!r} beside an age "
                         "in a record that names no person, a sex code or not")
                    for m in LONE_CODE.finditer(text)
                    if record_code(text, m.start(), m.end(), self.terms.person_words) == "unsure"
                    and not any(s < m.end() and m.start() < e for s, e in read)
                )  # fmt: skip
            if race and self.terms.names is not None:
                out.extend(
                    Held(path, "race", word, f"the surname {word!r} standing for a person, "
                         "also the name of a place, a person or not")
                    for start, end, word, place in bare_surnames(text, self.terms.names)
                    if place and not any(s < end and start < e for s, e in read)
                )  # fmt: skip
            if disability:
                out.extend(
                    Held(path, "disability", surface, f"the condition {surface!r}, a disability "
                         "no variant can move (no nondisabled counterpart)")
                    for start, end, surface in condition_mentions(text, self.terms.person_words)
                    if not any(s < end and start < e for s, e in read)
                )  # fmt: skip
            out.extend(
                Held(path, p.axis, p.surface, p.what)
                for p in proxy_mentions(text, axis_names, read, self.terms.person_words)
            )
            out.extend(self._identifier_terms(path, text, read))
            out.extend(
                h for h in self._identifier_people(path, text, read) if norm(h.surface) not in named
            )
            people = [
                h for h in self._lower_case_people(path, text, read) if norm(h.surface) not in named
            ]
            out.extend(people)
            firsts = {h.surface.split()[0] for h in people}
            out.extend(
                h for h in self._lower_case_first_names(path, text, read) if h.surface not in firsts
            )
        return tuple(out)

    def _other_nationalities(
        self, path: Path, text: str, read: Sequence[tuple[int, int]]
    ) -> list[Held]:
        """Nationalities the nationality axis has no group for, where they describe a person.

        :func:`~biasbreaker.probe.countries.country_mentions` over the 196 entities of The
        World Factbook (``A Syrian engineer``, ``He is from Syria``); a word the scan read
        (a term of the axis: ``Nigerian``, ``Pakistan``; or of another axis) is not held.
        """
        return [
            Held(path, "nationality", surface, f"the nationality {surface!r} ({country}), "
                 "for which the nationality axis has no group")
            for start, end, surface, country in country_mentions(text, self.terms.person_words)
            if not any(s < end and start < e for s, e in read)
            and norm(surface) not in self.compiled.axis_of
        ]  # fmt: skip

    def _lower_case_first_names(
        self, path: Path, text: str, read: Sequence[tuple[int, int]]
    ) -> list[Held]:
        """A first name alone in lower case where a name stands (``hi i'm emily``, ``dear emily``).

        Only after a word that introduces a name (:data:`_LOWER_NAME_PLACE`: ``name:``, ``my
        name is``, ``named``, ``dear``, ``i'm``/``im``/``i am``, ``this is``, ``applicant``),
        and only a first name of the shipped lists or of the Tzioumis table telling a gender
        (nomquamgender 90 %) that is no English word (``names.json``'s ``exclude`` list,
        :data:`WORD_NAMES`, months and weekdays, this module's function words, verbs and
        person words: ``i'm will``, ``dear mark``, ``i am rose``, ``my name is may``) and
        before no place or organisation word (``this is madison avenue``). The
        rewrite changes capitalised words only, so it is held, also when the payload names its
        capitalised form (the residual forms swap a first name with its surname only: ``Greg
        asks. hi i'm greg`` kept ``greg`` in every variant); one that opens a lower-case pair
        held already is that person.
        """
        book = self.terms.names
        if book is None or self.compiled.names is None:
            return []
        data = name_shares()
        axis_names = {a.name for a in self.axes}
        out: list[Held] = []
        for m in _LOWER_NAME_PLACE.finditer(text):
            word = m.group(1)
            f = fold(word)
            if not word.islower() or len(f) < 2 or f in book.words or f in book.excluded:
                continue
            if f in WORD_NAMES or f in CALENDAR or f in _NOT_SURNAMES:
                continue
            if word.title() not in book.first:
                share = data.first_gender.get(f)
                if f not in data.first_race or share is None or share.percent < GENDER_SHARE:
                    continue
            if any(s < m.end(1) and m.start(1) < e for s, e in read):
                continue
            if fold(word_after(text, m.end(1)) or "") in PLACE_WORDS:
                continue  # "this is madison avenue"
            info = first_name_info(word.title(), book)
            if info is None:
                continue
            told = [
                axis
                for axis, group in (("gender", info.gender), ("race", info.race))
                if group is not None and axis in axis_names
            ]
            if told:
                what = f"the first name {word!r} written in lower case"
                out.append(Held(path, ", ".join(told), word, what))
        return out

    def _lower_case_people(
        self, path: Path, text: str, read: Sequence[tuple[int, int]]
    ) -> list[Held]:
        """A person's name written in lower case (``mary carter asks``, ``greg baker``).

        Two lower-case words on one line are a name when the first is a first name of the
        shipped lists, or of the Tzioumis table telling a gender (nomquamgender 90 %) where the
        pair opens the text, a sentence or a line or the text opens no sentence with a capital
        (``greg baker asks``, ``i met greg baker``; not ``At the charity dinner``: Charity is
        a first name, but prose that capitalises its sentences capitalises its names), that is
        no English word (``names.json``'s ``exclude`` list, :data:`WORD_NAMES`, months and
        weekdays: ``will``, ``grace``, ``june``), neither word a function word, verb or person
        word of this module's lists (``she said fine``: Said is a first name), and
        :func:`~biasbreaker.probe.names.person_name` reads the pair capitalised. The rewrite
        changes capitalised words only, so the pair is held. A pair the scan reads already is
        not, nor one whose capitalised form the payload names (``Mary Carter asks; mary
        carter signed``: the variants swap it as a residual form,
        :mod:`biasbreaker.probe.residuals`).
        """
        book = self.terms.names
        if book is None or self.compiled.names is None or not any(c.islower() for c in text):
            return []
        data = name_shares()
        capitals = _CAPITAL_OPENING.search(text) is not None
        out: list[Held] = []
        for a, b in itertools.pairwise(NAME_WORD.finditer(text)):
            first, last = a.group(0), POSSESSIVE_END.sub("", b.group(0))
            if not (first.islower() and last.islower()) or POSSESSIVE_END.search(first):
                continue
            if text[a.end() : b.start()] not in (" ", "\t"):
                continue
            f, s = fold(first), fold(last)
            if f in book.words or f in CALENDAR or f in WORD_NAMES:
                continue
            if f in _NOT_SURNAMES or s in _NOT_SURNAMES:  # "she said fine", "greg is"
                continue
            if _in_brand(text, a.start(), b.end(), f, s):
                continue
            if first.title() not in book.first:
                share = data.first_gender.get(f)
                if f not in data.first_race or share is None or share.percent < GENDER_SHARE:
                    continue
                before = text[: a.start()].rstrip(" \t")
                if before and before[-1] not in SENTENCE_OPEN and capitals:
                    continue  # "At the charity dinner": prose that capitalises its names
            if any(st < b.end() and a.start() < en for st, en in read):
                continue
            told = self._person_axes(first, last)
            if told:
                whole = f"{first} {last}"
                what = f"the person {whole!r} written in lower case"
                out.append(Held(path, ", ".join(told), whole, what))
        return out

    def _person_axes(self, first: str, last: str) -> list[str]:
        """The configured axes (gender, race) the pair ``first last`` tells, read capitalised.

        Empty when :func:`~biasbreaker.probe.names.person_name` reads no person, or one
        telling no group of an axis probed here.
        """
        book = self.terms.names
        person = None if book is None else person_name(first.title(), last.title(), book)
        if person is None:
            return []
        axis_names = {a.name for a in self.axes}
        return [
            axis
            for axis, group in (("gender", person.info.gender), ("race", person.info.race))
            if group is not None and axis in axis_names
        ]

    def _identifier_terms(
        self, path: Path, text: str, read: Sequence[tuple[int, int]]
    ) -> list[Held]:
        """Terms inside an identifier: words joined by ``_`` or ``-``, or camelCase.

        The identifier is split into its words (``female_applicant`` → ``female applicant``,
        ``applicantGender`` → ``applicant gender``) and the words read by the term rules,
        context included (``white_list``, ``old_style``, ``senior_engineer`` hold no term). A
        term the text scan reads whole (``African-American``, ``70-year-old``) is no
        identifier. The rewrite changes whole words only, and a changed enum value
        (``muslim_customer`` → ``jewish_customer``) may be one the step does not know, so
        the input is held rather than swapped in place.
        """
        comp = self.compiled
        if comp.terms is None or ("_" not in text and "-" not in text and not _CAMEL.search(text)):
            return []
        out: list[Held] = []
        for m in _IDENTIFIER.finditer(text):
            ident = m.group(0)
            if not ("_" in ident or "-" in ident or _CAMEL.search(ident)):
                continue
            if any(s < m.end() and m.start() < e for s, e in read):
                continue
            spaced = " ".join(w.lower() for w in _IDENT_WORD.findall(ident))
            for t in comp.terms.finditer(spaced):
                hit = self.reader.term_hit(spaced, t)
                if hit is not None and hit.surface not in _NOT_IN_IDENTIFIER:
                    what = f"the term {hit.surface!r} inside the identifier {ident!r}"
                    out.append(Held(path, hit.axis, ident, what))
                    break
        return out

    def _identifier_people(
        self, path: Path, text: str, read: Sequence[tuple[int, int]]
    ) -> list[Held]:
        """A person named only inside an e-mail address or an identifier.

        ``mary.carter@example.com``, ``mary_carter_1987``, ``MaryCarter``: a token joined by
        ``.``, ``_``, ``-`` or digits, or written in camel case, whose consecutive words are a
        first name and a surname that :func:`~biasbreaker.probe.names.person_name` reads as a
        person telling a gender or race of the configured axes (the first name no English
        word: ``names.json``'s ``exclude`` list, :data:`WORD_NAMES`, months and weekdays, and
        neither word a function word or verb of this module's lists). The held
        :attr:`Held.surface` is the pair capitalised (``Mary Carter``): a person the payload
        also names as a name is left to the residual forms, which swap its e-mail and
        identifiers with it (:mod:`biasbreaker.probe.residuals`). Alone, the rewrite (which
        changes names written as names) would keep it in every variant, so the step is held;
        a new-user trial saw ``Applicant e-mail: mary.carter@example.com`` and
        ``mary_carter_1987`` pass a denial of women as not applicable. A brand or handle made
        of a first name and a surname (``JohnDeere``) is held too: a needless hold, never a
        miss.
        """
        book = self.terms.names
        if book is None or self.compiled.names is None:
            return []
        out: list[Held] = []
        for m in _HANDLE.finditer(text):
            token = m.group(0)
            joined = any(c in token for c in "._-@") or any(c.isdigit() for c in token)
            if not joined and _GLUED_PAIR.fullmatch(token) is None:
                continue
            if any(st < m.end() and m.start() < en for st, en in read):
                continue
            words = _IDENT_WORD.findall(token.split("@", 1)[0])
            for first, last in itertools.pairwise(words):
                f, last_folded = fold(first), fold(last)
                if f in book.words or f in CALENDAR or f in WORD_NAMES:
                    continue
                if f in _NOT_SURNAMES or last_folded in _NOT_SURNAMES:
                    continue
                told = self._person_axes(first, last)
                if told:
                    whole = f"{first.title()} {last.title()}"
                    what = f"the person {whole!r} named only inside {token!r}"
                    out.append(Held(path, ", ".join(told), whole, what))
                    break
        return out


def unswappable_reason(found: Sequence[tuple[Path, str, str]]) -> str:
    """The hold reason for the mentions :data:`UNSWAPPABLE` finds (pregnancy)."""
    shown = ", ".join(
        f"{surface!r} in {describe_path(path)} ({axis})" for path, axis, surface in found
    )
    return (
        f"the probe cannot make a counterfactual of {shown}: pregnancy is protected as sex "
        "(US Pregnancy Discrimination Act), but a variant of another sex cannot stay pregnant "
        "and one without it is not the same applicant. Leave it out of what the step sees, or "
        "set probe=False for this step and review its outputs (docs/detection.md, "
        "'Pregnancy')"
    )


def held_reason(found: Sequence[Held]) -> str:
    """The hold reason for :meth:`HeldReader.held`'s mentions: each, its place and axis."""
    shown = "; ".join(
        dict.fromkeys(f"{h.what} in {describe_path(h.path)} ({h.axis})" for h in found)
    )
    return (
        f"the probe reads a protected mention it cannot swap: {shown}. A variant would keep "
        "it, so the step is held for review rather than passed as not applicable. Write it "
        "as text the probe swaps where there is such text (words apart, a capitalised name), "
        "else leave it out of what the step sees, or set probe=False for this step and review "
        "its outputs "
        "(docs/detection.md, 'What the probe cannot swap')"
    )


def _in_brand(text: str, start: int, end: int, first: str, last: str) -> bool:
    """Whether the lower-case pair ``first last`` at ``text[start:end]`` is in a brand or place.

    Yes after ``&`` (``ben & jerry ice cream``), when its first word ends a firm of
    :data:`~biasbreaker.probe.names.ORGANISATIONS` (the ``jerry ice`` of ``ben jerry ice
    cream``), or before a place or organisation word (``george mason university``), as for
    a capitalised pair (:func:`_person_hit`).
    """
    if text[:start].rstrip(" \t").endswith("&"):
        return True
    prev = word_before(text, start)
    if prev is not None and f"{fold(prev)} {first}" in ORGANISATIONS:
        return True
    nxt = word_after(text, end)
    return nxt is not None and fold(nxt) in PLACE_WORDS
