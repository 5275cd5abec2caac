"""Where a name stands: the cues that make capitalised words in running text a person's name.

:class:`NameReader` reads full names (:meth:`NameReader.person_hits`), names written surname
first and surnames after a title or initials (:meth:`NameReader.surname_hits`), a first name
after a person label (:meth:`NameReader.labelled_first_names`) and a first name alone where its
place says it names someone (:meth:`NameReader.lone_first_names`). The name data are
:mod:`biasbreaker.probe.names` and :mod:`biasbreaker.probe.surnames`.
"""

from __future__ import annotations

import itertools
import re

from biasbreaker.probe.context import (
    POSSESSIVE,
    SENTENCE_OPEN,
    WORD_AFTER,
    word_after,
    word_before,
)
from biasbreaker.probe.names import (
    ORGANISATIONS,
    PLACE_FIRST,
    PLACE_WORDS,
    first_name_info,
    fold,
    name_shares,
    person_name,
)
from biasbreaker.probe.patterns import Hit
from biasbreaker.probe.surnames import (
    PLACE_PAIRS,
    bare_surnames,
    initialled_surnames,
    surname_first,
    surname_first_bare,
    surname_key,
    surname_race,
    titled_surnames,
)
from biasbreaker.probe.terms import NameBook, NameInfo, TermSet

__all__ = [
    "CALENDAR",
    "NAME_WORD",
    "PERSON_VERBS",
    "POSSESSIVE_END",
    "WORD_NAMES",
    "NameReader",
    "in_place_name",
]

# A word of a name: letters (any script), inner hyphens or apostrophes (Al-Zoubi, O'Brien).
NAME_WORD = re.compile(r"(?<![\w'’-])[^\W\d_]+(?:[-'’][^\W\d_]+)*")
POSSESSIVE_END = re.compile(r"['’]s?$")
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
PERSON_VERBS = frozenset(
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
CALENDAR = frozenset(
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
lone_first_names`)."""
_AGE_APPOSITION = re.compile(r"[ \t]*(?:,[ \t]*|\([ \t]*)\d{1,3}(?!\d)")
"""An age after a name opening a sentence: ``Greg, 45, asks``, ``Greg (45) asks``."""
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
_STOP_AFTER = re.compile(r"[ \t]*(?:[,.;:!?)\n]|$)")
"""A stop or the end right after a word: the word ends its phrase (``from Joy.``)."""
_APPOSITIVE = re.compile(r"(?<![\w'’-])([^\W\d_]+)[ \t]*,[ \t]*$")
"""A word and a comma before a name: a person noun there makes the name an appositive."""
_FROM_BEFORE = re.compile(r"(?<![\w'’-])from[ \t]+$", re.IGNORECASE)
_REFERENCE_WORDS = frozenset(
    """
    fig figs figure figures table tables eq eqn equation section sec chapter ch appendix
    exhibit slide page pp annex box plate
    """.split()  # noqa: SIM905
)
_REFERENCE_LABEL = re.compile(r"\.?[ \t]*(?:\d|[A-Z](?![\w'’-]))")
"""A reference word before a number or a one-letter label (``Fig. F``, ``Table 3``, ``Page
12``): the capitalised word before it is no first name (a trial saw ``See Fig. F`` read as
the person ``See Fig``, swapped to ``Trinidad Trejo. F``)."""
_TITLE_BEFORE = re.compile(r"(?<![\w'’-])(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?[ \t]+$")
"""A title right before a word (``Mr. Carter``): the word after it is a surname."""


class NameReader:
    """Read persons' names in running text: where a capitalised word or pair names someone.

    Args:
        terms: The term set (its name book and its person words, which cue a name).
    """

    def __init__(self, terms: TermSet) -> None:
        self.terms = terms

    def person_hits(self, text: str) -> list[Hit]:
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
        words = list(NAME_WORD.finditer(text))
        out: list[Hit] = []
        for a, b in itertools.pairwise(words):
            gap = text[a.end() : b.start()]
            if gap and not gap.strip(" \t"):
                caps = _caps_surname_first(text, a, b, book)
                if not caps and self._person_place(text, a.start(), b.end()):
                    caps = _surname_first_where_named(text, a, b, book)
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

    def surname_hits(self, text: str) -> list[Hit]:
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
        prev = word_before(text, start)
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
        if before and before[-1] not in SENTENCE_OPEN:
            return False
        if not before and not text[end:].strip(" \t.!?"):
            return True
        nxt = WORD_AFTER.match(text, end)
        after = nxt.group(1) if nxt is not None else None
        possessive = _POSSESSIVE_START.match(text, end) is not None
        return (
            possessive
            or (after is not None and after.lower() in PERSON_VERBS)
            or _AGE_APPOSITION.match(text, end) is not None
        )

    def labelled_first_names(self, text: str) -> list[Hit]:
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
            word = POSSESSIVE_END.sub("", m.group(1))
            if word[:1].isupper() and first_name_info(word, book) is not None:
                start = m.start(1)
                out.append(Hit(start, start + len(word), word, "name", "", (), word))
        return out

    def lone_first_names(
        self, text: str, surnames: frozenset[str] | set[str] = frozenset()
    ) -> list[Hit]:
        """A capitalised first name standing alone in a sentence (``Greg asks for a loan``).

        The shipped lists' first names are read anywhere (the ``Mary`` of ``Mary asks``); a
        first name only of the public-record tables is read as one when it tells a gender
        (:func:`~biasbreaker.probe.names.first_name_info`: nomquamgender at 90 %) and is a US
        first name (Tzioumis, so nomquamgender's nicknames and words stay out), and where
        its place says it names someone: the whole string (``{"applicant": "Greg"}``);
        opening a sentence or a list item, before a verb of :data:`PERSON_VERBS`, as a
        possessive or before an age (``Greg asks``, ``Zoë's loan``, ``Greg, 45,``); inside
        a sentence, as a capitalised word between two lower-case ones, after none of
        :data:`_NOT_BEFORE_NAME` (``a loan for Greg``; not ``the Bill``, ``in Virginia``);
        after ``from`` and before a stop (:func:`_from_cue`: ``Loan request from Greg.``);
        or naming who writes or speaks (:meth:`_speaker`: ``Greg: can I …``, ``Greg here,
        …``, ``From: Greg``). A word name, a word of ``names.json``'s ``exclude`` list or
        of :data:`WORD_NAMES` (English words, places and surnames such as ``Grace``,
        ``Mark``, ``Joy``, ``Hope``, ``Carter``), is read alone only after a person cue:
        opening a sentence or a list item, after no title, before a verb of
        :data:`PERSON_VERBS` (:func:`_licensed`: ``Grace applied for the loan``, ``Mark
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
            surnames: Folded surnames of the full names :meth:`person_hits` read in ``text``.
        """
        book = self.terms.names
        if book is None:
            return []
        data = name_shares()
        out: list[Hit] = []
        for m in NAME_WORD.finditer(text):
            raw = m.group(0)
            word = POSSESSIVE_END.sub("", raw)
            if not (word[:1].isupper() and word[1:].islower()) or word in book.first:
                continue
            f = fold(word)
            if f in CALENDAR or f not in data.first_race:
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
            if not in_place_name(text, start, end) and not _STATE_AFTER.match(text, end):
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
        if (not before or before[-1] in SENTENCE_OPEN) and _HERE.match(text, end):
            return True
        header = _HEADER_NAME.match(text, text.rfind("\n", 0, start) + 1)
        return header is not None and header.start(1) == start

    def _cued(self, text: str, start: int, end: int) -> bool:
        """Whether a person cue stands before the word name at ``text[start:end]``.

        An appositive after a person noun (``The applicant, Joy, applied``: a person word of
        the term set, a comma, the name, then a stop or the end) or ``from`` before it and a
        stop or the end after it (``Loan request from Joy``, :func:`_from_cue`). The other
        cues are read elsewhere: a person label (``Applicant Joy``, ``Dear Mark``:
        :meth:`labelled_first_names`), a verb of a person after it (:func:`_licensed`), a
        surname after it (:meth:`person_hits`).
        """
        if _from_cue(text, start, end):
            return True
        m = _APPOSITIVE.search(text, max(0, start - 40), start)
        if m is None or _STOP_AFTER.match(text, end) is None:
            return False
        return POSSESSIVE.sub("", m.group(1)).lower() in self.terms.person_words

    @staticmethod
    def _names_someone(text: str, start: int, end: int, *, possessive: bool) -> bool:
        """Whether the capitalised word at ``text[start:end]`` stands where a person's name does."""
        before = text[:start].rstrip(" \t")
        nxt = WORD_AFTER.match(text, end)
        after = nxt.group(1) if nxt is not None else None
        if not before or before[-1] in SENTENCE_OPEN:
            if not before and not text[end:].strip():  # the whole value: {"applicant": "Greg"}
                return True
            return (
                possessive
                or (after is not None and after.lower() in PERSON_VERBS)
                or _AGE_APPOSITION.match(text, end) is not None
            )
        if before[-1] == "&":  # a surname in a citation or a firm (Chen & Cherry)
            return False
        prev = word_before(text, start)
        if prev is not None and (prev[:1].isupper() or prev.lower() in _NOT_BEFORE_NAME):
            return False
        return after is None or not after[:1].isupper()


def _person_hit(text: str, a: re.Match[str], b: re.Match[str], book: NameBook) -> list[Hit]:
    """The person named by the first name ``a`` and the surname ``b`` of ``text``, if any.

    Both capitalised, ``a`` no possessive; the possessive ending of ``b`` stays outside the
    hit; no place or organisation word after ``b`` nor ``&`` (``Merrill Lynch & Co.``), no
    place name around them, and :func:`person_name` reads the pair. ``[]`` or one hit.
    """
    if not (a.group(0)[:1].isupper() and b.group(0)[:1].isupper()):
        return []
    if POSSESSIVE_END.search(a.group(0)):
        return []
    last = POSSESSIVE_END.sub("", b.group(0))
    end = b.start() + len(last)
    nxt = word_after(text, b.end())
    if nxt is not None and fold(nxt) in PLACE_WORDS:
        return []
    if text[b.end() :].lstrip(" \t").startswith("&"):
        return []
    if fold(last) in _REFERENCE_WORDS and _REFERENCE_LABEL.match(text, end):
        return []  # "See Fig. F", "see Table 3": a figure or table, no person
    if in_place_name(text, a.start(), end) or person_name(a.group(0), last, book) is None:
        return []
    key = f"{a.group(0)} {last}"
    return [Hit(a.start(), end, text[a.start() : end], "name", "", (), key)]


def _surname_first_where_named(
    text: str, a: re.Match[str], b: re.Match[str], book: NameBook
) -> list[Hit]:
    """A name written surname first where a name stands (``Applicant Yamamoto Hiroshi``).

    The caller checks the place (:meth:`NameReader._person_place`: after a title or a person
    label such as ``Applicant``, ``Name:``, ``Dear``, as an appositive or the whole value, or
    opening a sentence before a verb of a person). There, when the first word is a census
    surname telling a race (:func:`~biasbreaker.probe.surnames.surname_race`) and
    :func:`person_name` reads the pair reversed (``Hiroshi Yamamoto``) telling more of gender
    and race than as written (``Yamamoto Hiroshi``: no person; ``Kim Ji-woo``: ``Kim`` a first
    name 67 % female and ``Ji-woo`` a surname, telling neither), it is read surname first: the
    key is the given name then the surname. :func:`~biasbreaker.probe.surnames.
    surname_first_bare` reads such names only when the surname is at least 90 % Asian
    (``Yamamoto`` is less) and the pair read as written is no person (``Kim Ji-woo`` is one);
    a trial saw both pass as not applicable. ``[]`` or one hit.
    """
    first, second = a.group(0), POSSESSIVE_END.sub("", b.group(0))
    if POSSESSIVE_END.search(first) or first.isupper() or second.isupper():
        return []
    if not (first[:1].isupper() and second[:1].isupper()):
        return []
    if surname_race(first, book) is None:
        return []
    pair = f"{fold(first)} {fold(second)}"
    if pair in PLACE_PAIRS or pair in ORGANISATIONS:
        return []  # "Hong Kong says no.", a place
    reversed_ = person_name(second, first, book)
    if reversed_ is None:
        return []
    written = person_name(first, second, book)
    if written is not None and _told(written.info) >= _told(reversed_.info):
        return []
    end = b.start() + len(second)
    if in_place_name(text, a.start(), end):
        return []
    return [Hit(a.start(), end, text[a.start() : end], "name", "", (), f"{second} {first}")]


def _told(info: NameInfo) -> int:
    """How many of gender and race a name's reading tells (0-2)."""
    return (info.gender is not None) + (info.race is not None)


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
    first, second = a.group(0), POSSESSIVE_END.sub("", b.group(0))
    if len(first) < 2 or not first.isupper() or second.isupper() or not second[:1].isupper():
        return []
    last = first.title()
    if surname_race(last, book) is None or person_name(second, last, book) is None:
        return []
    if surname_race(second, book) is not None and first_name_info(last, book) is not None:
        return []  # "GREG Baker": a first name in capitals and a surname, read as written
    end = b.start() + len(second)
    nxt = word_after(text, b.end())
    if (nxt is not None and fold(nxt) in PLACE_WORDS) or in_place_name(text, a.start(), end):
        return []
    return [Hit(a.start(), end, text[a.start() : end], "name", "", (), f"{second} {last}")]


def _from_cue(text: str, start: int, end: int) -> bool:
    """Whether the capitalised word at ``text[start:end]`` is who something is from.

    ``from`` right before it and a stop or the end right after it (``Loan request from
    Joy``, ``a note from Greg.``), the word no place of :data:`_LABEL_PLACES` (``moved from
    Austin.``); ``A note from Chelsea about the account`` (a word after it) is not read.
    """
    if _FROM_BEFORE.search(text, max(0, start - 12), start) is None:
        return False
    return _STOP_AFTER.match(text, end) is not None and fold(text[start:end]) not in _LABEL_PLACES


def _licensed(text: str, start: int, end: int, verbs: frozenset[str] = PERSON_VERBS) -> bool:
    """Whether the word at ``text[start:end]`` stands where only a person's name does.

    Opening the text, a sentence or a list item (after none of the titles of
    :data:`_TITLE_BEFORE`, whose period ends no sentence: ``Mr. Carter`` is a surname) and
    before a verb of ``verbs`` (default :data:`PERSON_VERBS`: ``Grace applied``, ``Mark
    asks``).
    """
    before = text[:start].rstrip(" \t")
    if before and (
        before[-1] not in SENTENCE_OPEN or _TITLE_BEFORE.search(text, max(0, start - 8), start)
    ):
        return False
    nxt = WORD_AFTER.match(text, end)
    after = nxt.group(1) if nxt is not None else None
    return after is not None and after.lower() in verbs


def in_place_name(text: str, start: int, end: int) -> bool:
    """Whether the name at ``text[start:end]`` is part of a place or organisation name.

    Yes after a capitalised place prefix (``San Antonio``, ``Fort Worth``), or before a place
    or organisation word, directly or after one more capitalised word (``Virginia Beach``,
    ``George Washington University``). The lists are :data:`~biasbreaker.probe.names.
    PLACE_FIRST` and :data:`~biasbreaker.probe.names.PLACE_WORDS`.
    """
    prev = word_before(text, start)
    if prev is not None and prev[:1].isupper() and fold(prev.rstrip(".")) in PLACE_FIRST:
        return True
    nxt = WORD_AFTER.match(text, end)
    word = nxt.group(1) if nxt is not None else None
    if word is None:
        return False
    if fold(word) in PLACE_WORDS:
        return True
    after = word_after(text, nxt.end()) if nxt is not None and word[:1].isupper() else None
    return after is not None and fold(after) in PLACE_WORDS
