"""Finding protected mentions: terms (with their context rules), ages and names.

:class:`MentionFinder` compiles the term and name lists of a :class:`~biasbreaker.probe.terms.
TermSet` into two regexes (tries of every surface, longest first) and reports each mention of
the configured axes as a :class:`~biasbreaker.probe.mapping.Detection`. The context rules
(a context-dependent word counts only before a person word, coordinated with one, or as a
predicate) and the part-of-speech cue (:func:`context_pos`) live here; the rewriting that uses
them is :mod:`biasbreaker.probe.rewriting`.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from biasbreaker.probe.ages import age_mentions, glued_sex_codes, range_ends, slash_age_before
from biasbreaker.probe.conditions import condition_mentions
from biasbreaker.probe.countries import country_mentions
from biasbreaker.probe.fields import FIELD_WORDS
from biasbreaker.probe.mapping import Detection
from biasbreaker.probe.name_fields import field_names
from biasbreaker.probe.names import (
    GENDER_SHARE,
    ORGANISATIONS,
    PLACE_FIRST,
    PLACE_WORDS,
    PersonName,
    first_name_info,
    fold,
    name_shares,
    person_name,
)
from biasbreaker.probe.payloads import Key, Path, describe_path, leaves
from biasbreaker.probe.records import id_bracket_before, record_code
from biasbreaker.probe.shared import shared_scan
from biasbreaker.probe.surnames import (
    bare_surnames,
    initialled_surnames,
    key_surname,
    surname_first,
    surname_first_bare,
    surname_key,
    surname_race,
    titled_surnames,
)
from biasbreaker.probe.terms import Axis, NameBook, NameInfo, NumericAge, TermRow, TermSet

__all__ = [
    "WORD_NAMES",
    "Held",
    "Hit",
    "MentionFinder",
    "by_context",
    "capitalised",
    "context_pos",
    "held_reason",
    "literal_regex",
    "non_overlapping",
    "norm",
    "unswappable_reason",
]

# Words after which a pronoun or adjective-noun ambiguous form stands alone (not before a noun).
_FUNCTION_WORDS = frozenset(
    """
    a an the this that these those my your his her its our their some any no every each
    either neither all both few many much more most other another such what which whose to
    of in on at by for with from about into onto upon over under above below across along
    around through during before after since until till than as like near off out up down
    away back behind beside besides between beyond against among toward towards within
    without via per and or but nor so yet because if when while whereas although though
    unless whether once where why how then now today tonight tomorrow yesterday here there
    again also too very just only even still already soon later always never ever often
    sometimes usually really quite rather almost well maybe perhaps instead anyway else i me
    you he him she it we us they them myself yourself himself herself itself ourselves
    themselves who whom whoever someone somebody anyone anybody everyone everybody nobody
    nothing something anything everything is are was were am be been being has have had do
    does did will would shall should can could may might must ought not n't 's 're 've 'd
    'll 'm
    """.split()  # noqa: SIM905
)
# Verbs after which "her" is the object even before a noun ("gave her flowers", "let her go").
_OBJECT_VERBS = frozenset(
    """
    give gives gave giving given tell tells told telling show shows showed showing shown
    send sends sent sending offer offers offered offering buy buys bought buying ask asks
    asked asking teach teaches taught teaching hand hands handed handing bring brings
    brought bringing pay pays paid paying owe owes owed promise promises promised lend lends
    lent wish wishes wished let lets letting make makes made making help helps helped
    helping
    """.split()  # noqa: SIM905
)
_COPULAS = frozenset(
    """
    is are was were am be been being seem seems seemed become becomes became 's 're ’s ’re
    identifies identify identified
    """.split()  # noqa: SIM905
)
_LANGUAGE_VERBS = frozenset(
    """
    speak speaks spoke speaking spoken learn learns learned learnt learning fluent translate
    translates translated translating
    """.split()  # noqa: SIM905
)
_ONE = frozenset({"one", "ones"})
_POSSESSIVE = re.compile(r"['’]s?$")
_COORDINATED = re.compile(r"\s*,?\s*(?:and|or|nor)\s+(?:(?:a|an|the)\s+)?[\w'’-]+\s+(\w+)", re.I)
_WORD_AFTER = re.compile(r"\s*(?:(\w[\w'’]*)|(\S))?")
_STACKED = re.compile(r"\s*,?\s*(\w[\w'’-]*)")
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
naming it is held (:meth:`MentionFinder.unswappable`). ``maternity``/``paternity`` (leave) is
a gender term pair and swaps."""
_RANKS = frozenset({"senior"})
"""Terms that are a job level or rank before most person words (``senior engineer``, ``senior
partner``, ``senior candidate``, ``senior member``): they count only before a word of
:data:`_LAY_PERSONS`, which names a person by no job or rank (``a senior applicant``)."""
_LAY_PERSONS = frozenset(
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
stands (:meth:`MentionFinder._coded`): ``FEM`` is also a finite element method."""
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
_LONE_CODE = re.compile(r"(?<![\w.'’-])[FM](?![\w'’-]|\.\w)")
"""A lone upper-case ``F`` or ``M`` (not ``M.D.``, ``F-150``): a record field, perhaps a sex code
(:func:`~biasbreaker.probe.records.record_code`)."""
_NOT_CODED = frozenset({"size", "grade", "type", "class", "plan", "option", "part", "section"})
"""Capitalised words whose bracketed letter is a size, mark or option (``Size (M)``)."""
_STACK_DEPTH = 3
"""How many protected adjectives may stand between a term and its person word."""
_WORD_BEFORE = re.compile(r"(?:(\w[\w'’]*)|(\S))?\s*$")
# A word of a name: letters (any script), inner hyphens or apostrophes (Al-Zoubi, O'Brien).
_NAME_WORD = re.compile(r"(?<![\w'’-])[^\W\d_]+(?:[-'’][^\W\d_]+)*")
_POSSESSIVE_END = re.compile(r"['’]s?$")
_INITIAL_GAP = re.compile(r"\.[ \t]+")
_NAME_LABELS = (
    "applicant", "candidate", "patient", "client", "customer", "borrower", "tenant",
    "employee", "student", "resident", "member", "person", "nominee", "interviewee", "hire",
    "first name", "given name", "name", "named", "dear",
)  # fmt: skip
"""Words after which a capitalised first name alone is read as one (``Applicant Mei``); the
pattern looks ahead, so labels may follow one another (``a patient named Aaliyah``)."""
_LABELLED_NAME = re.compile(
    r"(?<![\w'’-])(?=(?:" + "|".join(_NAME_LABELS) + r")(?:[ \t]*[:=#-][ \t]*|[ \t]+)"
    r"([^\W\d_]+(?:[-'’][^\W\d_]+)*)(?![\w-]))",
    re.IGNORECASE,
)
_LABEL_BEFORE = re.compile(
    r"(?<![\w'’-])(?:" + "|".join(_NAME_LABELS) + r")(?:[ \t]*[:=#-][ \t]*|[ \t]+)$",
    re.IGNORECASE,
)
"""A person label right before a word (``Applicant: ``, ``Name = ``, ``Dear ``)."""
_PRONOUN_NEXT = re.compile(r"(?:['’]s?)?[^.!?\n]{0,80}?[.!?][ \t]+(?:He|She|His|Her)(?![\w'’-])")
"""The rest of a sentence, then ``He``/``She``/``His``/``Her`` opening the next one."""
_POSSESSIVE_START = re.compile(r"['’]s?(?![\w'’-])")
_HEADER_NAME = re.compile(
    r"[ \t]*(?:from|to|cc|bcc|reply-to|sender|sent by|signed|signed by|requested by|"
    r"submitted by|requester|contact|author)[ \t]*:[ \t]*([^\W\d_]+(?:[-'’][^\W\d_]+)*)"
    r"[ \t]*(?:<[^<>\n]*>|\([^()\n]*\))?[ \t]*(?=\n|$)",
    re.IGNORECASE,
)
"""A mail or form header whose value is one word alone on its line (``From: Greg``, ``To:
Brad <brad@example.com>``): the first name of a sender or a recipient."""
_SPEAKER = re.compile(r"[ \t]*:[ \t]*[\"“'‘(]?[^\W\d_]")
"""A speaker label's colon, then words on the same line (``Greg: can I …``); a number or a
sign after it is a row of figures (``Virginia: 12 applicants``, ``Madison: 40%``)."""
_LABEL_PLACES = frozenset(
    """
    georgia carolina virginia dakota montana nevada indiana houston denver cleveland orlando
    aurora lincoln chester kent adelaide darwin geneva santiago antonio diego dallas savannah
    phoenix austin jackson israel
    """.split()  # noqa: SIM905
)
"""US states and cities (and a few abroad) that are first names of the tables: the label of
a row about a place, never read as a speaker (``Georgia: approved``, ``Houston: pending``),
nor as a lone first name of ``names.json``'s ``exclude`` list before a verb (``Austin needs
more housing``, ``Israel says``)."""
_HERE = re.compile(r"[ \t]+here[ \t]*(?:[,.!;:—–-]|$)", re.IGNORECASE)
"""``here`` and a stop after a name: a speaker saying who writes (``Greg here, I need …``)."""

_PERSON_VERBS = frozenset(
    """
    asks asked applies applied requests requested wants wanted needs needed seeks sought
    earns earned works worked owns owned rents rented lives lived says said writes wrote
    submits submitted seeks borrows borrowed pays paid owes owed plans planned hopes hoped
    wishes wished claims claimed reports reported states stated explains explained
    """.split()  # noqa: SIM905
)
"""Verbs of a person after which a capitalised first name opening a sentence is read alone
(``Greg asks for a loan``): an opening capital says nothing, and ``Will the bank …``, ``Hope
this helps`` or ``Bill payment`` open with no such verb. Copulas and modals are left out
(``June is the deadline``, ``Hope will carry us``)."""
_NOT_BEFORE_NAME = frozenset(
    """
    a an the this that these those my your his her its our their every each no any some
    in at from to into near across outside inside around via through toward towards of on
    """.split()  # noqa: SIM905
)
"""Words after which a capitalised first name inside a sentence is not read alone: an article
or possessive makes it a noun or a title (``the Bill``, ``your Will``), a place preposition a
place (``in Virginia``, ``from Florence``, ``to Phoenix``)."""
_CALENDAR = frozenset(
    """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday
    """.split()  # noqa: SIM905
)
"""Months and weekdays, never a first name alone (``June 5``, ``in April``)."""
_PAIR_ONLY = frozenset({"jesus"})
"""First names read beside a surname (``Jesus Garcia``), after a person label or in a name
field (``Applicant Jesus``, ``{"first_name": "Jesus"}``), and alone in running text only
opening a sentence before a verb of :data:`_APPLICANT_VERBS` (``Jesus applied for the loan``,
BBQ's labelled first name): ``Jesus`` is a Spanish given name (93 % Hispanic in Tzioumis) and
the figure of scripture, where ``Jesus said to them``, ``Jesus asked``, ``Jesus wept`` name no
applicant (they were read, a needless swap)."""
_APPLICANT_VERBS = frozenset(
    """
    applies applied requests requested earns earned owns owned rents rented borrows borrowed
    submits submitted owes owed
    """.split()  # noqa: SIM905
)
"""Verbs of an applicant's file (no verb of speech: ``says``, ``asks``, ``writes``)."""
WORD_NAMES = frozenset(
    """
    will bill hope faith rose art pat sue rob guy ray dawn joy jack frank gene earl carol
    dean ruby amber ivy iris violet daisy holly pearl summer autumn angel chance chase cash
    rich royal sterling major sage star bob penny lily rusty lee van buck bud dick don
    herb jean mercedes norm ward wade miles sonny sunny rod rocky skip sandy stormy junior
    senior charity patience king buddy
    """.split()  # noqa: SIM905
)
"""Lower-case English words that are also first names of the tables (``will``, ``hope``,
``rose``): never the first word of a lower-case name, and, capitalised, word names read alone
only after a person cue, like ``names.json``'s ``exclude`` list (:meth:`MentionFinder.
_lone_first_names`)."""
_LOWER_NAME_PLACE = re.compile(
    r"(?<![\w'’-])(?:(?:first[ \t]+|given[ \t]+)?name[ \t]*[:=][ \t]*|name[ \t]+is[ \t]+|"
    r"named[ \t]+|dear[ \t]+|i['’]?m[ \t]+|i[ \t]+am[ \t]+|this[ \t]+is[ \t]+|"
    r"applicant[ \t]*[:=#-]?[ \t]*)([a-z]+)(?![\w'’-])",
    re.IGNORECASE,
)
"""Where a word is a first name even in lower case: after ``name:``, ``my name is``,
``named``, ``dear``, ``i'm``/``im``/``i am``, ``this is`` or ``applicant`` (``hi i'm emily``)."""
_NOT_SURNAMES = _FUNCTION_WORDS | _PERSON_VERBS | _COPULAS | _OBJECT_VERBS | _LAY_PERSONS
"""Lower-case words never read as the surname of a lower-case name (``mary said``, ``greg is``)."""
_CAPITAL_OPENING = re.compile(r"(?:^|[.!?:\n][ \t\n]*)[ \t]*[\"“(]?[A-Z]")
"""A sentence or line opened with a capital: the text capitalises (``At the charity dinner``)."""
_AGE_APPOSITION = re.compile(r"[ \t]*(?:,[ \t]*|\([ \t]*)\d{1,3}(?!\d)")
"""An age after a name opening a sentence: ``Greg, 45, asks``, ``Greg (45) asks``."""
_SENTENCE_OPEN = frozenset(".!?:;\n\"“”'‘’(*•>-#")
"""Characters after which (spaces passed over) a word opens a sentence or a list item."""


_IDENTIFIER = re.compile(r"(?<![\w-])[^\W_]+(?:[_-]+[^\W_]+)*(?![\w-])")
"""A word, or words joined by ``_`` or ``-``: a candidate identifier."""
_CAMEL = re.compile(r"(?<![\w-])[a-z][a-z0-9]*[A-Z]")
"""A camelCase identifier's start (``applicantGender``; ``DeShawn``, ``McDonald`` are names)."""
_IDENT_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_HANDLE = re.compile(r"(?<![\w.@-])[A-Za-z0-9][\w.+-]*(?:@[\w-]+(?:\.[\w-]+)+)?")
"""A token that may be an e-mail address or an identifier (``MentionFinder._identifier_people``)."""
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
_SAME_SEX_SPOUSE = re.compile(
    r"(?<![\w'’-])(?:his[ \t]+(?:husbands?|boyfriends?|fianc[eé])|her[ \t]+(?:wife|wives|"
    r"girlfriends?|fianc[eé]e))(?![\w'’-])",
    re.IGNORECASE,
)
"""A same-sex spouse or partner (``his husband``, ``her wife``, ``her girlfriend``): a sexual
orientation no term of that axis names. A gender variant moves both words (``his husband`` →
``her wife``), keeping the orientation, and no orientation variant can move it (the other
groups are no spouse word), so an input with one is held when sexual orientation is an axis
(:meth:`MentionFinder.held`), like a gender identity. ``my husband`` tells nothing (the
speaker's gender is unknown)."""
"""Gender identities the gender axis (male, female) has no group for: a pronoun declaration
other than she/her and he/him (``they/them``, ``xe/xem``) and the words ``nonbinary``,
``genderqueer``, ``transgender``, ``cisgender``, ``trans woman``/``trans man`` (a new-user
trial found ``a trans woman`` swapped to ``a trans man``), ``she is trans.``, ``MtF``/``FtM``
…. Gender identity is protected as sex (US
Supreme Court, *Bostock v. Clayton County*, 2020), but no variant of another group keeps it
nor drops it soundly, so an input naming one is held (:meth:`MentionFinder.held`), like
pregnancy. A bare ``they`` is no declaration (it is also plural). The title ``Mx.`` before a
capitalised word is one (a trial saw ``Mx. Taylor`` become ``Mx. Heather``, a woman's first
name under a nonbinary title); ``mx`` in lower case or alone is none."""


@dataclass(frozen=True, slots=True)
class Held:
    """A mention the probe reads but cannot swap: where, its axis, its surface and what it is."""

    path: Path
    axis: str
    surface: str
    what: str


@dataclass(frozen=True, slots=True)
class Hit:
    """One mention in one string: span, surface, kind, axis and groups (names: the book key)."""

    start: int
    end: int
    surface: str
    kind: Literal["term", "name", "age"]
    axis: str
    groups: tuple[str, ...]
    name: str = ""


@dataclass
class Compiled:
    """The compiled patterns of a finder."""

    terms: re.Pattern[str] | None
    names: re.Pattern[str] | None
    axis_of: dict[str, Axis]
    name_key: dict[str, str] = field(default_factory=dict)


SCANNED = 256
"""Texts whose hits a :class:`MentionFinder` keeps (the oldest dropped first)."""
SCANNED_CHARS = 4096
"""The longest text whose hits are kept."""
_NAMED_CHARS = 65536
"""The longest text whose name hits are kept (in the cache the finders of a book share)."""


class MentionFinder:
    """Find the protected mentions of some axes of a term set.

    Args:
        terms: The term set.
        axes: The axes to look for, in order.
    """

    def __init__(self, terms: TermSet, axes: Sequence[Axis]) -> None:
        self.terms = terms
        self.axes = tuple(axes)
        self.compiled = compile_patterns(self.axes, terms.names)
        # the hits of the last SCANNED texts: functools' thread-safe LRU, one per finder
        self._scanned = functools.lru_cache(maxsize=SCANNED)(self._scan_kept)
        # name hits depend on the book, the person words and the names pattern only: one
        # cache for every finder of the same (the fake LLM's two finders read each prompt)
        names = self.compiled.names
        self._named = shared_scan(
            ("names", id(terms.names), terms.person_words, names.pattern if names else None),
            terms.names,
            self._name_hits,
            SCANNED,
        )

    def detect(self, payload: Any) -> tuple[Detection, ...]:
        """Find the protected mentions in a payload.

        Args:
            payload: ``str`` or a nested ``dict``/``list``/``tuple`` of them.

        Returns:
            The mentions, in payload order then text order, in string values and in the text
            of ``str`` dict keys alike (a key's mention has the path ``(*dict_path,
            Key(key))``, :class:`~biasbreaker.probe.payloads.Key`). A name is reported once
            per axis it informs (gender and/or race).
        """
        found: list[Detection] = []
        for path, text in leaves(payload):
            for hit in self.scan(text):
                if hit.kind == "name":
                    found.extend(self._name_detections(path, hit, self.name_info(hit.name)))
                else:
                    found.append(
                        Detection(
                            path, hit.start, hit.end, hit.surface, hit.axis, hit.groups, hit.kind
                        )
                    )
        book = self.terms.names
        if book is not None and self.compiled.names is not None:
            for person in field_names(payload, book):
                at = [
                    d
                    for d in found
                    if d.kind == "name"
                    for s in person.spans
                    if d.path == s.path and d.start < max(s.end, s.start + 1) and s.start < d.end
                ]
                if at and (" " not in person.name or any(" " in d.name for d in at)):
                    continue  # the text scan read a name there already
                # a first name the scan read alone is the field person's ({"first_name":
                # "Siobhan", "last_name": "O'Brien"}): the person, first name and surname, wins
                found = [d for d in found if d not in at]
                for s in person.spans:
                    hit = Hit(s.start, s.end, s.surface, "name", "", (), person.name)
                    found.extend(self._name_detections(s.path, hit, person.info))
        return _later_surnames_dropped(found)

    def _name_detections(self, path: Path, hit: Hit, info: NameInfo | None) -> list[Detection]:
        out: list[Detection] = []
        if info is None:
            return out
        axis_names = {a.name for a in self.axes}
        for axis, group in (("gender", info.gender), ("race", info.race)):
            if group is not None and axis in axis_names:
                out.append(
                    Detection(
                        path, hit.start, hit.end, hit.surface, axis, (group,), "name", hit.name
                    )
                )
        return out

    def name_info(self, name: str) -> NameInfo | None:
        """What a name key tells, or ``None``.

        The book's full name, else a person's name read from the public-record tables
        (:func:`~biasbreaker.probe.names.person_name`), else the book's first name, else (a
        one-word key: a first name read from a name field or after a person label) what
        the public-record tables tell of it
        (:func:`~biasbreaker.probe.names.first_name_info`).
        """
        book = self.terms.names
        if book is None:
            return None
        surname = key_surname(name)
        if surname is not None:  # a person named by a surname alone ("Mr. Yazzie")
            race = surname_race(surname, book)
            return NameInfo(None, race) if race is not None else None
        if name in book.full:
            return book.full[name]
        person = self.person(name)
        if person is not None:
            return person.info
        listed = book.first.get(name)
        if listed is not None or " " in name:
            return listed
        return first_name_info(name, book)

    def person(self, name: str) -> PersonName | None:
        """A two-word name key read as a person's first name and surname, else ``None``."""
        book = self.terms.names
        first, _, last = name.partition(" ")
        if book is None or not last or " " in last or key_surname(name) is not None:
            return None
        return person_name(first, last, book)

    def name_key(self, surface: str) -> str | None:
        """The name key of a name hit's surface (``None`` when it is no name)."""
        key = self.compiled.name_key.get(norm(surface))
        if key is not None:
            return key
        words = surface.split()
        if len(words) == 2 and self.person(" ".join(words)) is not None:
            return " ".join(words)
        return None

    def ambiguities(self, payload: Any) -> tuple[str, ...]:
        """One note per name and axis the name data leave unknown (docs/detection.md, "Names").

        Returns:
            The notes, in text order, each once: which name, which axis, what the data say
            and the threshold it falls short of.
        """
        axis_names = {a.name for a in self.axes}
        notes: dict[str, None] = {}
        for _, text in leaves(payload):
            for hit in self.scan(text):
                if hit.kind != "name":
                    continue
                person = self.person(hit.name) if hit.name not in self._full_names() else None
                if person is None:
                    continue
                for note in person.ambiguous:
                    if note.split(" ", 1)[0] in axis_names:
                        notes.setdefault(note, None)
        return tuple(notes)

    def unswappable(self, payload: Any) -> tuple[tuple[Path, str, str], ...]:
        """The mentions of the configured axes that no variant can swap (:data:`UNSWAPPABLE`).

        Returns:
            ``(path, axis, surface)`` per mention, in payload then text order.
        """
        patterns = [(a.name, UNSWAPPABLE[a.name]) for a in self.axes if a.name in UNSWAPPABLE]
        return tuple(
            (path, axis, m.group(0))
            for path, text in leaves(payload)
            for axis, pattern in patterns
            for m in pattern.finditer(text)
        )

    def held(self, payload: Any) -> tuple[Held, ...]:
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

        Returns:
            One :class:`Held` per mention, in payload then text order.
        """
        out: list[Held] = []
        texts = [
            (p, t, self.scan(t)) for p, t in leaves(payload) if not (p and isinstance(p[-1], Key))
        ]
        named = {norm(h.name) for _, _, hits in texts for h in hits if h.kind == "name"}
        identity = any(a.name == "gender" for a in self.axes)
        nationality = any(a.name == "nationality" for a in self.axes)
        orientation = any(a.name == "sexual-orientation" for a in self.axes)
        disability = any(a.name == "disability" for a in self.axes)
        race = any(a.name == "race" for a in self.axes)
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
                    for m in _LONE_CODE.finditer(text)
                    if record_code(text, m.start(), m.end(), self.terms.person_words) == "unsure"
                    and not any(s < m.end() and m.start() < e for s, e in read)
                )  # fmt: skip
            if race and self.terms.names is not None:
                out.extend(
                    Held(path, "race", word, f"the surname {word!r} before a verb of a person, "
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
            if f in WORD_NAMES or f in _CALENDAR or f in _NOT_SURNAMES:
                continue
            if word.title() not in book.first:
                share = data.first_gender.get(f)
                if f not in data.first_race or share is None or share.percent < GENDER_SHARE:
                    continue
            if any(s < m.end(1) and m.start(1) < e for s, e in read):
                continue
            if fold(_word_after(text, m.end(1)) or "") in PLACE_WORDS:
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
        for a, b in itertools.pairwise(_NAME_WORD.finditer(text)):
            first, last = a.group(0), _POSSESSIVE_END.sub("", b.group(0))
            if not (first.islower() and last.islower()) or _POSSESSIVE_END.search(first):
                continue
            if text[a.end() : b.start()] not in (" ", "\t"):
                continue
            f, s = fold(first), fold(last)
            if f in book.words or f in _CALENDAR or f in WORD_NAMES:
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
                if before and before[-1] not in _SENTENCE_OPEN and capitals:
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
                hit = self._term_hit(spaced, t)
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
                if f in book.words or f in _CALENDAR or f in WORD_NAMES:
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

    def _full_names(self) -> Mapping[str, NameInfo]:
        book = self.terms.names
        return book.full if book is not None else {}

    def _person_hits(self, text: str) -> list[Hit]:
        """Two capitalised words on one line that :func:`person_name` reads as a person.

        Also with a middle initial between them (``Mei L. Nguyen``: the hit spans all three,
        its name key is ``Mei Nguyen``, and the initial is kept in every variant). A
        possessive ending stays outside the hit (``Greg Baker's`` → ``Greg Baker``); a pair
        followed by a place or organisation word or by ``&`` is none (``George Washington
        University``, ``Merrill Lynch & Co.``).
        """
        book = self.terms.names
        if book is None:
            return []
        words = list(_NAME_WORD.finditer(text))
        out: list[Hit] = []
        for a, b in itertools.pairwise(words):
            gap = text[a.end() : b.start()]
            if gap and not gap.strip(" \t"):
                caps = _caps_surname_first(text, a, b, book)
                out.extend(caps if caps else _person_hit(text, a, b, book))
        for a, b, c in zip(words, words[1:], words[2:], strict=False):
            # a middle initial between them: "Mei L. Nguyen" is the person "Mei Nguyen"
            if (
                len(b.group(0)) == 1
                and b.group(0).isupper()
                and text[a.end() : b.start()] in (" ", "\t")
                and _INITIAL_GAP.fullmatch(text, b.end(), c.start())
            ):
                out.extend(_person_hit(text, a, c, book))
        return out

    def scan(self, text: str) -> list[Hit]:
        """Find term, age and name hits, longest first, without overlaps.

        A pure function of the text: one probe scans its input's text once per variant it
        rewrites, and the same key names in every input, so the hits of the last
        :data:`SCANNED` texts (of at most :data:`SCANNED_CHARS` characters) are kept.
        """
        if len(text) > SCANNED_CHARS:
            return self._scan(text)
        return list(self._scanned(text))

    def _scan_kept(self, text: str) -> tuple[Hit, ...]:
        return tuple(self._scan(text))

    def _scan(self, text: str) -> list[Hit]:
        hits: list[Hit] = []
        comp = self.compiled
        if comp.terms is not None:
            for m in comp.terms.finditer(text):
                hit = self._term_hit(text, m)
                if hit is not None:
                    hits.append(hit)
        hits.extend(self._glued_hits(text))
        age_axis = next((a for a in self.axes if a.numeric_age is not None), None)
        if age_axis is not None and age_axis.numeric_age is not None:
            rule = age_axis.numeric_age
            ages: list[Hit] = []
            unread: list[tuple[int, int]] = []
            for m, n in age_mentions(text, rule):
                band = _age_band(m.group(0), n, rule)
                if band is None:
                    unread.append((m.start(), m.end()))
                    continue
                group = age_axis.groups[band]
                ages.append(Hit(m.start(), m.end(), m.group(0), "age", age_axis.name, (group,)))
            hits.extend(  # "aged 30" is no age of its own inside "aged 30–70"
                h for h in ages if not any(s <= h.start and h.end < e for s, e in unread)
            )
        if comp.names is not None:
            hits.extend(
                self._named.kept(text) if len(text) <= _NAMED_CHARS else self._name_hits(text)
            )
        return non_overlapping(hits)

    def _name_hits(self, text: str) -> tuple[Hit, ...]:
        """The book's names, persons, labelled and lone first names in ``text`` (``_scan``'s)."""
        comp = self.compiled
        hits: list[Hit] = []
        if comp.names is None:
            return ()
        for m in comp.names.finditer(text):
            surface = m.group(0)
            if not capitalised(surface):
                continue
            key = comp.name_key.get(norm(surface))
            if key is not None and not _in_place_name(text, m.start(), m.end()):
                hits.append(Hit(m.start(), m.end(), surface, "name", "", (), key))
        # after the book's hits: at one span (a listed full name) the book's reading wins
        people = self._person_hits(text) + self._surname_hits(text)
        hits.extend(people)
        hits.extend(self._labelled_first_names(text))
        surnames = {fold(h.name.split()[-1]) for h in people if " " in h.name}
        # a surname alone after a title is that person's surname, never a first name
        surnames |= {fold(h.surface) for h in people if key_surname(h.name) is not None}
        hits.extend(self._lone_first_names(text, surnames))
        return tuple(hits)

    def _surname_hits(self, text: str) -> list[Hit]:
        """Names written surname first (``Yazzie, Darlene``) and surnames after a title.

        The spans are :func:`~biasbreaker.probe.surnames.surname_first` (key ``"Darlene
        Yazzie"``) and :func:`~biasbreaker.probe.surnames.titled_surnames` (``Mr. Yazzie``:
        the surname's span, key :func:`~biasbreaker.probe.surnames.surname_key`).
        """
        book = self.terms.names
        if book is None:
            return []
        out = [
            Hit(start, end, text[start:end], "name", "", (), f"{first} {last}")
            for start, end, first, last in surname_first(text, book)
        ]
        out.extend(
            Hit(start, end, word, "name", "", (), surname_key(word))
            for start, end, word in titled_surnames(text, book)
        )
        out.extend(
            Hit(start, end, text[start:end], "name", "", (), f"{given} {last}")
            for start, end, given, last in surname_first_bare(text, book)
            if self._person_place(text, start, end)
        )
        out.extend(
            Hit(start, end, word, "name", "", (), surname_key(word))
            for lead, start, end, word in initialled_surnames(text, book)
            if self._person_place(text, lead, end) or self._person_after(text, lead, end)
        )
        out.extend(
            Hit(start, end, word, "name", "", (), surname_key(word))
            for start, end, word, place in bare_surnames(text, book)
            if not place
        )
        return out

    def _person_after(self, text: str, start: int, end: int) -> bool:
        """Cues of a person that initials and a surname at ``text[start:end]`` may also have.

        A person word of the term set right before (``the engineer R. Begay``, ``our nurse
        J. Washington``: a role noun names a person) or ``he``, ``she``, ``his`` or ``her``
        opening the next sentence (``Loan file of R. Begay. She earns 40k.``).
        """
        prev = _word_before(text, start)
        if prev is not None and prev.lower() in self.terms.person_words:
            return True
        return _PRONOUN_NEXT.match(text, end) is not None

    def _person_place(self, text: str, start: int, end: int) -> bool:
        """Whether the name at ``text[start:end]`` stands where only a person's name does.

        Used for names written surname first without a comma (``Zhang Wei``), which a pair
        of capitalised words inside a sentence is too often not (``in Hong Kong``): after a
        title (``Mr. Zhang Wei``), after a person label (:data:`_NAME_LABELS`: ``Applicant:
        Nguyen Van An``, ``Dear Zhang Wei``), as an appositive after a person noun (``The
        applicant, Zhang Wei, asked``), as the whole value (``{"applicant": "Zhang Wei"}``),
        or opening the text, a sentence or a line as a possessive or before a verb of a
        person or an age (``Zhang Wei applied``, ``Zhang Wei's file``, ``Zhang Wei, 45,``).
        """
        if _TITLE_BEFORE.search(text, max(0, start - 8), start):
            return True
        if _LABEL_BEFORE.search(text, max(0, start - 40), start) or self._cued(text, start, end):
            return True
        before = text[:start].rstrip(" \t")
        if before and before[-1] not in _SENTENCE_OPEN:
            return False
        if not before and not text[end:].strip(" \t.!?"):
            return True
        nxt = _WORD_AFTER.match(text, end)
        after = nxt.group(1) if nxt is not None else None
        possessive = _POSSESSIVE_START.match(text, end) is not None
        return (
            possessive
            or (after is not None and after.lower() in _PERSON_VERBS)
            or _AGE_APPOSITION.match(text, end) is not None
        )

    def _labelled_first_names(self, text: str) -> list[Hit]:
        """A capitalised first name alone after a person label (``Applicant Mei, …``).

        A lone capitalised word is too often no name to be read by itself (``Will``,
        ``May``), but after a word that introduces a person by name (:data:`_NAME_LABELS`:
        ``Applicant Mei``, ``Name: Siobhan``, ``a patient named Aaliyah``, ``Dear Mei``) it is
        one; it is read with :func:`~biasbreaker.probe.names.first_name_info` and counts when
        it tells a gender or a race. A longer hit at the same place (``Applicant Mei
        Nguyen``: the person) wins.
        """
        book = self.terms.names
        if book is None:
            return []
        out: list[Hit] = []
        for m in _LABELLED_NAME.finditer(text):
            word = _POSSESSIVE_END.sub("", m.group(1))
            if word[:1].isupper() and first_name_info(word, book) is not None:
                start = m.start(1)
                out.append(Hit(start, start + len(word), word, "name", "", (), word))
        return out

    def _lone_first_names(
        self, text: str, surnames: frozenset[str] | set[str] = frozenset()
    ) -> list[Hit]:
        """A capitalised first name standing alone in a sentence (``Greg asks for a loan``).

        The shipped lists' first names are read anywhere (the ``Mary`` of ``Mary asks``); a
        first name only of the public-record tables is read as one when it tells a gender
        (:func:`~biasbreaker.probe.names.first_name_info`: nomquamgender at 90 %) and is a US
        first name (Tzioumis, so nomquamgender's nicknames and words stay out), and where
        its place says it names someone: the whole string (``{"applicant": "Greg"}``);
        opening a sentence or a list item, before a verb of :data:`_PERSON_VERBS`, as a
        possessive or before an age (``Greg asks``, ``Zoë's loan``, ``Greg, 45,``); inside
        a sentence, as a capitalised word between two lower-case ones, after none of
        :data:`_NOT_BEFORE_NAME` (``a loan for Greg``; not ``the Bill``, ``in Virginia``);
        after ``from`` and before a stop (:func:`_from_cue`: ``Loan request from Greg.``);
        or naming who writes or speaks (:meth:`_speaker`: ``Greg: can I …``, ``Greg here,
        …``, ``From: Greg``). A word name, a word of ``names.json``'s ``exclude`` list or
        of :data:`WORD_NAMES` (English words, places and surnames such as ``Grace``,
        ``Mark``, ``Joy``, ``Hope``, ``Carter``), is read alone only after a person cue:
        opening a sentence or a list item, after no title, before a verb of
        :data:`_PERSON_VERBS` (:func:`_licensed`: ``Grace applied for the loan``, ``Mark
        asks``; never ``Grace period``, ``Mark the box``, ``Mr. Carter applied``, where it
        is a surname), as an appositive after a person noun or after ``from``
        (:meth:`_cued`: ``The applicant, Joy, applied``, ``Loan request from Joy``), and
        neither a place of :data:`_LABEL_PLACES` (``Austin needs``) nor the surname of a
        full name in ``text`` (``surnames``: ``John Carter called. Carter asks …``); after a
        person label and in a name field it is read elsewhere. A word of :data:`_PAIR_ONLY`
        (``Jesus``) is read alone only before a verb of :data:`_APPLICANT_VERBS`. A month or
        weekday, an all-capitals word and a word in a
        place name are never read.

        Args:
            text: One string of a payload.
            surnames: Folded surnames of the full names :meth:`_person_hits` read in ``text``.
        """
        book = self.terms.names
        if book is None:
            return []
        data = name_shares()
        out: list[Hit] = []
        for m in _NAME_WORD.finditer(text):
            raw = m.group(0)
            word = _POSSESSIVE_END.sub("", raw)
            if not (word[:1].isupper() and word[1:].islower()) or word in book.first:
                continue
            f = fold(word)
            if f in _CALENDAR or f not in data.first_race:
                continue
            info = first_name_info(word, book)
            if info is None or info.gender is None:
                continue
            start, end = m.start(), m.start() + len(word)
            if f in _PAIR_ONLY and not _licensed(text, start, m.end(), _APPLICANT_VERBS):
                continue  # "Jesus said to them": no applicant ("Jesus applied for the loan" is)
            if f in book.words or f in WORD_NAMES:  # a word name: only where a name is cued
                if f in surnames or f in _LABEL_PLACES:
                    continue
                if not (_licensed(text, start, m.end()) or self._cued(text, start, end)):
                    continue
            else:
                said = self._speaker(text, start, m.end())
                if not (
                    said
                    or self._names_someone(text, start, m.end(), possessive=raw != word)
                    or _from_cue(text, start, end)
                ):
                    continue
            if not _in_place_name(text, start, end) and not _STATE_AFTER.match(text, end):
                out.append(Hit(start, end, word, "name", "", (), word))
        return out

    @staticmethod
    def _speaker(text: str, start: int, end: int) -> bool:
        """Whether the word at ``text[start:end]`` names who writes or speaks.

        A speaker label opening a line (``Greg: can I get a loan?``; a colon, then words on the
        same line), ``<name> here`` opening a sentence (``Greg here, I need …``), or a mail or
        form header's value alone on its line (``From: Greg``, :data:`_HEADER_NAME`).
        """
        before = text[:start].rstrip(" \t")
        if (
            (not before or before[-1] == "\n")
            and _SPEAKER.match(text, end)
            and fold(text[start:end]) not in _LABEL_PLACES
        ):
            return True
        if (not before or before[-1] in _SENTENCE_OPEN) and _HERE.match(text, end):
            return True
        header = _HEADER_NAME.match(text, text.rfind("\n", 0, start) + 1)
        return header is not None and header.start(1) == start

    def _cued(self, text: str, start: int, end: int) -> bool:
        """Whether a person cue stands before the word name at ``text[start:end]``.

        An appositive after a person noun (``The applicant, Joy, applied``: a person word of
        the term set, a comma, the name, then a stop or the end) or ``from`` before it and a
        stop or the end after it (``Loan request from Joy``, :func:`_from_cue`). The other
        cues are read elsewhere: a person label (``Applicant Joy``, ``Dear Mark``:
        :meth:`_labelled_first_names`), a verb of a person after it (:func:`_licensed`), a
        surname after it (:meth:`_person_hits`).
        """
        if _from_cue(text, start, end):
            return True
        m = _APPOSITIVE.search(text, max(0, start - 40), start)
        if m is None or _STOP_AFTER.match(text, end) is None:
            return False
        return _POSSESSIVE.sub("", m.group(1)).lower() in self.terms.person_words

    @staticmethod
    def _names_someone(text: str, start: int, end: int, *, possessive: bool) -> bool:
        """Whether the capitalised word at ``text[start:end]`` stands where a person's name does."""
        before = text[:start].rstrip(" \t")
        nxt = _WORD_AFTER.match(text, end)
        after = nxt.group(1) if nxt is not None else None
        if not before or before[-1] in _SENTENCE_OPEN:
            if not before and not text[end:].strip():  # the whole value: {"applicant": "Greg"}
                return True
            return (
                possessive
                or (after is not None and after.lower() in _PERSON_VERBS)
                or _AGE_APPOSITION.match(text, end) is not None
            )
        if before[-1] == "&":  # a surname in a citation or a firm (Chen & Cherry)
            return False
        prev = _word_before(text, start)
        if prev is not None and (prev[:1].isupper() or prev.lower() in _NOT_BEFORE_NAME):
            return False
        return after is None or not after[:1].isupper()

    def _glued_hits(self, text: str) -> list[Hit]:
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

    def _term_hit(self, text: str, m: re.Match[str]) -> Hit | None:
        surface = m.group(0)
        key = norm(surface)
        axis = self.compiled.axis_of.get(key)
        if axis is None:
            return None
        entries = axis.index[key]
        rows = [axis.rows[e.row] for e in entries]
        if all(r.case_sensitive for r in rows) and not surface[:1].isupper():
            return None
        groups = tuple(dict.fromkeys(e.group for e in entries))
        if axis.name == "nationality":
            prev = _word_before(text, m.start())
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
        if key in _RANKS and (_word_after(text, m.end()) or "").lower() not in _LAY_PERSONS:
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
        nxt = _word_after(text, end)
        if nxt is not None:
            nxt = _POSSESSIVE.sub("", nxt)
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
            prev = _word_before(text, start)
            copula = prev is not None and (
                prev.lower() in _COPULAS or prev.lower().endswith(("'s", "’s", "'re", "’re"))
            )
            return copula and (nxt is None or nxt.lower() in _FUNCTION_WORDS)
        return False

    def _stacked(self, text: str, end: int) -> bool:
        """Whether protected terms, then a person word or "one(s)", follow ``text[:end]``."""
        people = self.terms.person_words
        pos = end
        for depth in range(_STACK_DEPTH + 1):
            m = _STACKED.match(text, pos)
            if m is None:
                return False
            word = _POSSESSIVE.sub("", m.group(1)).lower()
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


def _later_surnames_dropped(found: list[Detection]) -> tuple[Detection, ...]:
    """``found`` without the surname-only persons whose surname a full name carries.

    ``Jamal Washington applied. Mr. Washington earns 40k.``: ``Washington`` after the title is
    a later mention of Jamal Washington, swapped with his name (:func:`~biasbreaker.probe.
    variants.name_map`), not a person of its own.
    """
    carried = {
        fold(d.name.split()[-1])
        for d in found
        if d.kind == "name" and " " in d.name and key_surname(d.name) is None
    }
    if not carried:
        return tuple(found)
    return tuple(
        d for d in found if d.kind != "name" or fold(key_surname(d.name) or "") not in carried
    )


def _person_hit(text: str, a: re.Match[str], b: re.Match[str], book: NameBook) -> list[Hit]:
    """The person named by the first name ``a`` and the surname ``b`` of ``text``, if any.

    Both capitalised, ``a`` no possessive; the possessive ending of ``b`` stays outside the
    hit; no place or organisation word after ``b`` nor ``&`` (``Merrill Lynch & Co.``), no
    place name around them, and :func:`person_name` reads the pair. ``[]`` or one hit.
    """
    if not (a.group(0)[:1].isupper() and b.group(0)[:1].isupper()):
        return []
    if _POSSESSIVE_END.search(a.group(0)):
        return []
    last = _POSSESSIVE_END.sub("", b.group(0))
    end = b.start() + len(last)
    nxt = _word_after(text, b.end())
    if nxt is not None and fold(nxt) in PLACE_WORDS:
        return []
    if text[b.end() :].lstrip(" \t").startswith("&"):
        return []
    if _in_place_name(text, a.start(), end) or person_name(a.group(0), last, book) is None:
        return []
    key = f"{a.group(0)} {last}"
    return [Hit(a.start(), end, text[a.start() : end], "name", "", (), key)]


def _caps_surname_first(text: str, a: re.Match[str], b: re.Match[str], book: NameBook) -> list[Hit]:
    """A surname in capitals, then a given name (``WASHINGTON Lakisha``), as forms write them.

    The first word all capitals (two letters or more) and a census surname that tells a race
    (:func:`~biasbreaker.probe.surnames.surname_race`), the second capitalised and not all
    capitals, and :func:`person_name` reading the second as the first name before it: the
    person ``Lakisha Washington``. A trial saw the pair read first name first (``WASHINGTON``
    a man's first name), a gender variant giving ``ALEXANDRA Tyshawn``. The key names the
    surname title-cased, so each word is swapped in place and its case kept (``BEGAY Samira``).
    Not when the first word is also a first name and the second a surname telling a race
    (``GREG Baker`` is read as written). ``[]`` or one hit.
    """
    first, second = a.group(0), _POSSESSIVE_END.sub("", b.group(0))
    if len(first) < 2 or not first.isupper() or second.isupper() or not second[:1].isupper():
        return []
    last = first.title()
    if surname_race(last, book) is None or person_name(second, last, book) is None:
        return []
    if surname_race(second, book) is not None and first_name_info(last, book) is not None:
        return []  # "GREG Baker": a first name in capitals and a surname, read as written
    end = b.start() + len(second)
    nxt = _word_after(text, b.end())
    if (nxt is not None and fold(nxt) in PLACE_WORDS) or _in_place_name(text, a.start(), end):
        return []
    return [Hit(a.start(), end, text[a.start() : end], "name", "", (), f"{second} {last}")]


def _age_band(surface: str, n: int, rule: NumericAge) -> int | None:
    """The band of an age mention: 0 young, 1 old, ``None`` neither.

    An age is in the band it falls in. A range after an age label (``Age group: 55-64``)
    whose middle is in neither band is in the band it reaches into, when it reaches one
    band only (55-64 holds the old ages 61-64, and its mirror 36-45 the young ages 36-39); a
    range that reaches both bands (``ages 30 to 70``) or neither (``age bracket 45-54``)
    names no group.
    """
    if n <= rule.young_max:
        return 0
    if n >= rule.old_min:
        return 1
    ends = range_ends(surface)
    if ends is None:
        return None
    young, old = ends[0] <= rule.young_max, ends[1] >= rule.old_min
    if young == old:
        return None
    return 0 if young else 1


def unswappable_reason(found: Sequence[tuple[Path, str, str]]) -> str:
    """The hold reason for :meth:`MentionFinder.unswappable`'s mentions."""
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
    """The hold reason for :meth:`MentionFinder.held`'s mentions: each, its place and axis."""
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


_FIELD_LABEL = re.compile(r"([^\W\d_]+)\s*[:=]\s*$")


def _after_label(text: str, start: int, axis: str) -> bool:
    """Whether ``text[:start]`` ends with a field label of ``axis`` and ``:`` or ``=``."""
    m = _FIELD_LABEL.search(text, max(0, start - 40), start)
    return m is not None and m.group(1).lower() in FIELD_WORDS.get(axis, frozenset())


def _in_brand(text: str, start: int, end: int, first: str, last: str) -> bool:
    """Whether the lower-case pair ``first last`` at ``text[start:end]`` is in a brand or place.

    Yes after ``&`` (``ben & jerry ice cream``), when its first word ends a firm of
    :data:`~biasbreaker.probe.names.ORGANISATIONS` (the ``jerry ice`` of ``ben jerry ice
    cream``), or before a place or organisation word (``george mason university``), as for
    a capitalised pair (:func:`_person_hit`).
    """
    if text[:start].rstrip(" \t").endswith("&"):
        return True
    prev = _word_before(text, start)
    if prev is not None and f"{fold(prev)} {first}" in ORGANISATIONS:
        return True
    nxt = _word_after(text, end)
    return nxt is not None and fold(nxt) in PLACE_WORDS


_STATE_AFTER = re.compile(
    r",[ \t]*(?:A[KLRZS]|C[AOT]|D[CE]|F[LM]|G[AU]|HI|I[ADLN]|K[SY]|LA|M[ADEINOPST]|N[CDEHJMVY]"
    r"|O[HKR]|P[AR]|RI|S[CD]|T[NX]|UT|V[AIT]|W[AIVY])\b(?![\w-])"
)
"""A comma and a US state or territory's postal code after a word: the word is a city
(``Target, Houston, TX``; ``Stanford, CA``), never a lone first name. Read as persons, two
such cities in the demo's resumes were swapped in every variant (the seeded fake's draws, which
mask the persons found, then moved on 160 of 320 postings, and its blindness test failed). The
cost: a lone first name before a state's code (``a loan for Greg, CA resident``) is not read;
a full name there (``Mary Carter, TX``) still is."""


def _in_place_name(text: str, start: int, end: int) -> bool:
    """Whether the name at ``text[start:end]`` is part of a place or organisation name.

    Yes after a capitalised place prefix (``San Antonio``, ``Fort Worth``), or before a place
    or organisation word, directly or after one more capitalised word (``Virginia Beach``,
    ``George Washington University``). The lists are :data:`~biasbreaker.probe.names.
    PLACE_FIRST` and :data:`~biasbreaker.probe.names.PLACE_WORDS`.
    """
    prev = _word_before(text, start)
    if prev is not None and prev[:1].isupper() and fold(prev.rstrip(".")) in PLACE_FIRST:
        return True
    nxt = _WORD_AFTER.match(text, end)
    word = nxt.group(1) if nxt is not None else None
    if word is None:
        return False
    if fold(word) in PLACE_WORDS:
        return True
    after = _word_after(text, nxt.end()) if nxt is not None and word[:1].isupper() else None
    return after is not None and fold(after) in PLACE_WORDS


def norm(surface: str) -> str:
    """The lookup key of a surface: lower case, single spaces."""
    return " ".join(surface.lower().split())


def capitalised(surface: str) -> bool:
    """Whether every word of ``surface`` starts with a capital (names are written so)."""
    return all(w[:1].isupper() for w in surface.split())


def _alternation(surfaces: Sequence[str]) -> str:
    """A regex matching any of ``surfaces`` (lower-cased, single-spaced), built as a trie.

    A trie-shaped pattern lets ``re`` reject a position after one character instead of trying
    thousands of alternatives; the greedy optional tails make the longest surface win.
    A space matches any run of whitespace.
    """
    trie: dict[str, Any] = {}
    for surface in surfaces:
        node = trie
        for ch in surface:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        ends = "" in node
        alts = [
            (r"\s+" if ch == " " else re.escape(ch)) + build(child)
            for ch, child in sorted(node.items())
            if ch != ""
        ]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if ends:
            return "(?:" + body + ")?" if len(alts) > 1 or len(body) > 1 else body + "?"
        return body

    return build(trie)


def compile_patterns(axes: Sequence[Axis], book: NameBook | None) -> Compiled:
    axis_of: dict[str, Axis] = {}
    for axis in axes:
        for s in axis.surfaces():
            axis_of[s] = axis
    terms = None
    if axis_of:
        terms = re.compile(
            r"(?<![\w-])(?:" + _alternation(list(axis_of)) + r")(?![\w-])", re.IGNORECASE
        )
    names = None
    name_key: dict[str, str] = {}
    axis_names = {a.name for a in axes}
    if book is not None and axis_names & {"gender", "race"}:
        for n in list(book.full) + list(book.first):
            name_key.setdefault(norm(n), n)
        names = re.compile(
            r"(?<![\w'’-])(?:" + _alternation(list(name_key)) + r")(?![\w-])", re.IGNORECASE
        )
    return Compiled(terms=terms, names=names, axis_of=axis_of, name_key=name_key)


def literal_regex(literals: Sequence[str]) -> re.Pattern[str] | None:
    """A whole-word, case-insensitive regex of ``literals`` (``None`` when there are none)."""
    if not literals:
        return None
    return re.compile(
        r"(?<![\w'’-])(?:" + _alternation(sorted({norm(x) for x in literals})) + r")(?![\w-])",
        re.IGNORECASE,
    )


def non_overlapping(hits: Sequence[Hit]) -> list[Hit]:
    """The hits left to right, the longest first at one start, dropping any that overlap."""
    ordered = sorted(hits, key=lambda h: (h.start, -(h.end - h.start)))
    out: list[Hit] = []
    end = -1
    for h in ordered:
        if h.start >= end:
            out.append(h)
            end = h.end
    return out


def _word_after(text: str, end: int) -> str | None:
    m = _WORD_AFTER.match(text, end)
    if m is None or m.group(1) is None:
        return None
    return m.group(1)


_STOP_AFTER = re.compile(r"[ \t]*(?:[,.;:!?)\n]|$)")
"""A stop or the end right after a word: the word ends its phrase (``from Joy.``)."""
_APPOSITIVE = re.compile(r"(?<![\w'’-])([^\W\d_]+)[ \t]*,[ \t]*$")
"""A word and a comma before a name: a person noun there makes the name an appositive."""
_FROM_BEFORE = re.compile(r"(?<![\w'’-])from[ \t]+$", re.IGNORECASE)


def _from_cue(text: str, start: int, end: int) -> bool:
    """Whether the capitalised word at ``text[start:end]`` is who something is from.

    ``from`` right before it and a stop or the end right after it (``Loan request from
    Joy``, ``a note from Greg.``), the word no place of :data:`_LABEL_PLACES` (``moved from
    Austin.``); ``A note from Chelsea about the account`` (a word after it) is not read.
    """
    if _FROM_BEFORE.search(text, max(0, start - 12), start) is None:
        return False
    return _STOP_AFTER.match(text, end) is not None and fold(text[start:end]) not in _LABEL_PLACES


_TITLE_BEFORE = re.compile(r"(?<![\w'’-])(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?[ \t]+$")
"""A title right before a word (``Mr. Carter``): the word after it is a surname."""


def _licensed(text: str, start: int, end: int, verbs: frozenset[str] = _PERSON_VERBS) -> bool:
    """Whether the word at ``text[start:end]`` stands where only a person's name does.

    Opening the text, a sentence or a list item (after none of the titles of
    :data:`_TITLE_BEFORE`, whose period ends no sentence: ``Mr. Carter`` is a surname) and
    before a verb of ``verbs`` (default :data:`_PERSON_VERBS`: ``Grace applied``, ``Mark
    asks``).
    """
    before = text[:start].rstrip(" \t")
    if before and (
        before[-1] not in _SENTENCE_OPEN or _TITLE_BEFORE.search(text, max(0, start - 8), start)
    ):
        return False
    nxt = _WORD_AFTER.match(text, end)
    after = nxt.group(1) if nxt is not None else None
    return after is not None and after.lower() in verbs


def _word_before(text: str, start: int) -> str | None:
    window = text[max(0, start - 80) : start]
    m = _WORD_BEFORE.search(window)
    if m is None or m.group(1) is None:
        return None
    return m.group(1)


def context_pos(text: str, start: int, end: int) -> Literal["prenominal", "standalone"]:
    """Whether the word at ``text[start:end]`` stands before a noun phrase.

    Prenominal when the next token is a word that is not a function word, unless the previous
    word is a verb that takes "her" as its object (give, tell, let, make …).
    """
    nxt = _word_after(text, end)
    if nxt is None or nxt.lower() in _FUNCTION_WORDS:
        return "standalone"
    prev = _word_before(text, start)
    if prev is not None and prev.lower() in _OBJECT_VERBS:
        return "standalone"
    return "prenominal"


def by_context(
    rows: Sequence[TermRow], text: str, start: int, end: int, *, predicate: bool = False
) -> list[TermRow]:
    """The rows whose part of speech fits the words around ``text[start:end]`` (else all).

    With ``predicate`` (every axis but gender, whose standalone forms are pronouns: "is
    hers"), a word standing alone right after a copula is a predicate adjective and takes
    the adjective (prenominal) form: "He is Muslim." → "He is Christian." (not "Jew"),
    while "He is a Muslim." keeps the noun reading ("a Jew").
    """
    if not any(r.pos != "any" for r in rows):
        return list(rows)
    ctx = context_pos(text, start, end)
    if predicate and ctx == "standalone":
        prev = _word_before(text, start)
        if prev is not None and (
            prev.lower() in _COPULAS or prev.lower().endswith(("'s", "’s", "'re", "’re"))
        ):
            ctx = "prenominal"
    fitting = [r for r in rows if r.pos in (ctx, "any")]
    return fitting or list(rows)
