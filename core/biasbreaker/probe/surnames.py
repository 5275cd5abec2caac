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
  colon (``Name: Yazzie, Darlene``), and swapped whole like a name written first name first;
* initials and a surname (``R. Begay``, ``Dr. A. Nguyen``, ``J. Washington``):
  :func:`initialled_surnames` gives the surnames that tell a race (no firm of
  :data:`INITIAL_FIRMS`: ``J.P. Morgan``, ``A.T. Kearney``);
  :meth:`~biasbreaker.probe.name_context.NameReader.surname_hits` keeps those with a person
  cue, and they are read and swapped like a titled surname (the initials stay);
* a surname alone opening a sentence before a verb only a person is the subject of (``Begay
  applied``, ``Okafor was denied``): :func:`bare_surnames`, a surname at least
  :data:`BARE_SURNAME_SHARE` % one race; one that is also a country or a US state
  (``Washington was denied``) is held, not read;
* the surname first without a comma (``Zhang Wei applied``, ``Applicant: Nguyen Van An``):
  the order of Chinese, Korean and Vietnamese names. :func:`surname_first_bare` gives the
  candidates (a surname at least :data:`SURNAME_FIRST_SHARE` % Asian in the census, then a
  given name that :func:`~biasbreaker.probe.names.person_name` reads before that surname);
  :meth:`~biasbreaker.probe.name_context.NameReader.surname_hits` keeps those standing where
  a person's name does (after a title or a person label, as a whole value, or opening a
  sentence before a verb of a person).

A surname alone that a full name of the same payload carries (``Jamal Washington … Mr.
Washington``) is a later mention of that person, not a person of its own
(:meth:`~biasbreaker.probe.mentions.MentionFinder.detect` drops it).
"""

from __future__ import annotations

import re
from typing import Final

from biasbreaker.probe.countries import countries
from biasbreaker.probe.names import (
    NOT_GIVEN,
    ORGANISATIONS,
    PLACE_WORDS,
    RACE_SHARE,
    NameBook,
    first_name_info,
    fold,
    name_shares,
    person_name,
    surname_share_of,
)

__all__ = [
    "BARE_SURNAME_SHARE",
    "CASTE_WORDS",
    "FIRM_WORDS",
    "INITIAL_FIRMS",
    "PLACE_PAIRS",
    "SURNAME_FIRST_SHARE",
    "SURNAME_MARK",
    "US_STATES",
    "VIETNAMESE_MIDDLE",
    "bare_surnames",
    "initialled_surnames",
    "key_surname",
    "surname_first",
    "surname_first_bare",
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


CASTE_WORDS: Final = frozenset({"dalit", "dalits", "harijan", "harijans", "brahmin", "brahmins"})
"""Names of castes, which the census table also has as surnames (``Dalit``, 95 % asian): never
read as a surname alone (a trial saw ``{"caste": "Dalit"}`` swapped to ``Keller``); a caste is
held (:mod:`~biasbreaker.probe.proxies`)."""


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
    if len(s) < 2 or s in book.excluded or s in PLACE_WORDS or s in NOT_GIVEN or s in CASTE_WORDS:
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


SURNAME_FIRST_SHARE: Final = 90
"""A word opens a name written surname first without a comma only when at least this
percent of its census bearers are Asian (``Zhang`` 99 %, ``Nguyen`` 98 %, ``Hong`` 90 %;
``Park`` 74 %, ``Long`` 81 % white, ``Young``, ``White``, ``Rice``: none): the order is that
of Chinese, Korean and Vietnamese names, and a weaker or other surname before a capitalised
word is far more often a place, a firm or a given name (``Long Beach``, ``Rice University``)."""
VIETNAMESE_MIDDLE: Final = frozenset({"van", "thi"})
"""Vietnamese middle names (folded ``Văn``, ``Thị``) read between a surname and a given name
(``Nguyen Van An``, ``Tran Thi Lan``): the census counts ``Van`` 69 % Asian, so it would not
pass as an Asian syllable."""
_BARE_WORD = re.compile(r"(?<![\w'’-])[A-Z][^\W\d_]*(?:-[^\W\d_]+)?(?:['’]s?)?(?![\w'’-])")
"""A capitalised word, maybe possessive (a hyphenated Korean given name, ``Min-jun``, is one)."""
_WORD_NEXT = re.compile(r"(?:['’]s?)?[ \t]+([^\W\d_]+)")
_GAP = re.compile(r"[ \t]+")
PLACE_PAIRS = frozenset(
    {
        "hong kong", "ho chi", "chiang mai", "chiang rai", "da nang", "hai phong", "ha noi",
        "sai gon", "mong kok", "wan chai", "tai po", "sha tin", "tsim sha", "lan kwai",
    }
)  # fmt: skip
"""Places of East and Southeast Asia whose two first words read as a surname and a given
name (``Hong`` 90 % Asian, ``Kong`` a given name before it): never a name written surname
first (``Hong Kong says``)."""


def _asian_syllable(word: str) -> bool:
    """Whether ``word`` may be a syllable of an Asian given name (``Van``, ``Wei``, ``Ming``)."""
    f = fold(word)
    if f in VIETNAMESE_MIDDLE:
        return True
    share = surname_share_of(f, name_shares().surname_race)
    return share is not None and share.group == "asian" and share.percent >= RACE_SHARE


def _opens_surname_first(word: str, book: NameBook) -> bool:
    """Whether ``word`` is a surname that may open a name written surname first."""
    f = fold(word)
    if word.isupper() or f in book.excluded or f in PLACE_WORDS or f in _NOT_SURNAME:
        return False
    share = surname_share_of(f, name_shares().surname_race)
    return share is not None and share.group == "asian" and share.percent >= SURNAME_FIRST_SHARE


def surname_first_bare(text: str, book: NameBook) -> list[tuple[int, int, str, str]]:
    """Candidate names written surname first without a comma: ``(start, end, given, surname)``.

    Two capitalised words on one line (``Zhang Wei``), the first a surname at least
    :data:`SURNAME_FIRST_SHARE` % Asian in the census and the second a given name that
    :func:`~biasbreaker.probe.names.person_name` reads before it (``person_name("Wei",
    "Zhang")``), when the pair read first name first is no person (``Wei Chen`` is read as
    written, by :mod:`~biasbreaker.probe.mentions`). Or three words (``Nguyen Van An``, ``Chen
    Wei Ming``): the surname, a middle word that is an Asian syllable (a surname at least
    :data:`~biasbreaker.probe.names.RACE_SHARE` % Asian, or a word of
    :data:`VIETNAMESE_MIDDLE`) and a given name read as above; the middle word is kept inside
    the span. No word in capitals, no place or organisation word among or right after them
    (``Ho Chi Minh City``), the pair no firm of :data:`~biasbreaker.probe.names.ORGANISATIONS`.
    The caller decides whether the span stands where a name does; a possessive ending stays
    outside the span.

    Returns:
        ``(start, end, given, surname)`` each, ``text[start:end]`` the name as written.
    """
    words = list(_BARE_WORD.finditer(text))
    out: list[tuple[int, int, str, str]] = []

    def joined(a: re.Match[str], b: re.Match[str]) -> bool:
        return _GAP.fullmatch(text, a.end(), b.start()) is not None

    def free_after(end: int) -> bool:
        after = _WORD_NEXT.match(text, end)
        return after is None or fold(after.group(1)) not in PLACE_WORDS

    for i, w1 in enumerate(words):
        surname = w1.group(0)
        if _POSSESSIVE_END.search(surname) or not _opens_surname_first(surname, book):
            continue
        rest = words[i + 1 : i + 3]
        if not rest or not joined(w1, rest[0]):
            continue
        middle = rest[0].group(0)
        found: tuple[int, str] | None = None
        if (
            len(rest) == 2
            and joined(rest[0], rest[1])
            and not _POSSESSIVE_END.search(middle)
            and _asian_syllable(middle)
        ):
            # after Van or Thi the word is a given name, even one that is an English word (An)
            found = _given(text, rest[1], surname, book, fold(middle) in VIETNAMESE_MIDDLE)
        if found is None:
            found = _given(text, rest[0], surname, book)
            if found is not None and person_name(surname, found[1], book) is not None:
                found = None  # read first name first ("Wei Chen"), by the pair rule
        if found is None or not free_after(found[0]):
            continue
        out.append((w1.start(), found[0], found[1], surname))
    return out


def _given(
    text: str, m: re.Match[str], surname: str, book: NameBook, marked: bool = False
) -> tuple[int, str] | None:
    """``(end, given)`` when the word ``m`` is a given name before ``surname``, else ``None``.

    ``marked``: a Vietnamese middle name stands before it, so a word of :data:`_NOT_SURNAME`
    (``An``, an article in English) is read too.
    """
    word = _POSSESSIVE_END.sub("", m.group(0))
    f = fold(word)
    if word.isupper() or f in PLACE_WORDS or (f in _NOT_SURNAME and not marked):
        return None
    if f"{fold(surname)} {f}" in PLACE_PAIRS:
        return None
    if f"{fold(surname)} {f}" in ORGANISATIONS or person_name(word, surname, book) is None:
        return None
    return m.start() + len(word), word


INITIAL_FIRMS: Final = frozenset(
    {
        "jp morgan", "at kearney", "jc penney", "ag edwards", "t rowe", "de shaw", "wp carey",
        "jm smucker", "sc johnson", "ll bean", "ao smith", "hj heinz", "rj reynolds", "jb hunt",
        "ch robinson", "tj maxx", "j crew", "ew scripps", "hb fuller", "wr grace",
        "ww grainger", "jd power", "rr donnelley", "dr horton", "ap moller", "jw marriott",
        "js bach", "cs lewis", "jrr tolkien", "ee cummings", "pt barnum", "jk rowling",
        "hg wells", "ts eliot", "fw woolworth", "aj wright", "ja henckels", "wk kellogg",
    }
)  # fmt: skip
"""Firms and brands (and a few authors no input names as an applicant) written as initials
and a surname: never a person of the race the surname tells (``J.P. Morgan`` is a bank, and
``Morgan`` tells white). Keyed by the initials run together and the folded surname; a new
firm of this shape beside a person cue (``J.P. Morgan said``) is read, a needless swap, so
the cue is required (:meth:`~biasbreaker.probe.name_context.NameReader._person_place`)."""
_INITIALLED = re.compile(
    r"(?<![\w'’.&-])((?:[A-Z]\.[ \t]?){0,2}[A-Z]\.)[ \t]+"
    r"([A-Z][^\W\d_]*(?:[-'’][^\W\d_]+)*)(?:['’]s?)?(?![\w'’-])"
)
"""One to three initials and a capitalised word (``R. Begay``, ``J.P. Morgan``, ``A. T.
Kearney``, ``Nguyen's``)."""
_NAME_BEFORE = re.compile(r"(?<![\w'’-])([A-Z][^\W\d_]+)[ \t]+$")
"""A capitalised word right before the initials: a middle initial of a full name (``Mei L.
Nguyen``), read by the pair rule."""


def initialled_surnames(text: str, book: NameBook) -> list[tuple[int, int, int, str]]:
    """Surnames after initials that tell a race: ``(lead, start, end, surname)`` each.

    ``R. Begay applied`` gives the span of ``Begay`` (96 % native-american; a possessive
    ending stays outside) and ``lead``, where the initials start. Not: a surname that tells
    no race (``J. Smith``: 72 % white), a capitalised word after it (``J. Washington
    Post``), a firm of :data:`INITIAL_FIRMS` (``J.P. Morgan``, ``A.T. Kearney``), a middle
    initial after a first name (``Mei L. Nguyen``: a full name, read by the pair rule;
    ``Dr. A. Nguyen`` and ``Applicant R. Begay`` are read, the word before being no first
    name). The caller requires a person cue.
    """
    out: list[tuple[int, int, int, str]] = []
    for m in _INITIALLED.finditer(text):
        word = _POSSESSIVE_END.sub("", m.group(2))
        initials = "".join(c for c in m.group(1) if c.isalpha()).lower()
        if f"{initials} {fold(word)}" in INITIAL_FIRMS:
            continue
        if _CAPITALISED_AFTER.match(text, m.end()) or surname_race(word, book) is None:
            continue
        prev = _NAME_BEFORE.search(text, max(0, m.start() - 40), m.start())
        if prev is not None and first_name_info(prev.group(1), book) is not None:
            continue
        out.append((m.start(), m.start(2), m.start(2) + len(word), word))
    return out


BARE_SURNAME_SHARE: Final = 90
"""Least census share (%) of one race among a surname's bearers for the surname to be read
alone before a verb of a person (``Begay applied``): stricter than :data:`~biasbreaker.
probe.names.RACE_SHARE`, as no title or initial says a person is named."""
_BARE_VERB = re.compile(
    r"(?:['’]s)?[ \t]+(?:applie[sd]|asked|asks|earn(?:s|ed)|request(?:s|ed)|borrow(?:s|ed)|"
    r"rent(?:s|ed)|owe[sd]|(?:was|is|has[ \t]+been|got|gets)[ \t]+(?:hired|denied|approved|"
    r"rejected|interviewed|fired|promoted|admitted|evicted|arrested|refused|declined|"
    r"shortlisted))(?![\w'’-])"
)
"""A verb only a person (an applicant) is the subject of: not ``said``, ``announced``,
``reported`` (a firm, a state or a country says things), nor ``was founded``/``was built``."""
US_STATES: Final = frozenset(
    """
    alabama alaska arizona arkansas california colorado connecticut delaware florida georgia
    hawaii idaho illinois indiana iowa kansas kentucky louisiana maine maryland massachusetts
    michigan minnesota mississippi missouri montana nebraska nevada hampshire jersey mexico
    york carolina dakota ohio oklahoma oregon pennsylvania rhode tennessee texas utah vermont
    virginia washington wisconsin wyoming
    """.split()  # noqa: SIM905
)
"""US states (and the second words of the two-word ones): ``Washington``, ``Maryland`` and
``Tennessee`` are census surnames at least 90 % black, ``Oregon`` 90 % hispanic."""
FIRM_WORDS: Final = frozenset(
    """
    honda toyota suzuki yamaha hyundai samsung nissan mazda kia huawei lenovo alibaba tata
    mitsubishi hitachi toshiba sony fujitsu nintendo xiaomi wipro infosys subaru panasonic
    canon nikon kubota komatsu baidu tencent
    """.split()  # noqa: SIM905
)
"""Firms named by one word that is a census surname (``Honda applied for a patent``):
never read as a person."""


def bare_surnames(text: str, book: NameBook) -> list[tuple[int, int, str, bool]]:
    """Surnames alone before a verb of a person: ``(start, end, surname, place)`` each.

    A capitalised word opening the text, a sentence, a line or a field, before a verb of
    :data:`_BARE_VERB` (``Begay applied``, ``Okafor was denied``) or as the whole text
    (``{"applicant": "Begay"}``, ``Begay``: a trial saw it pass as not applicable), whose
    census bearers are at least :data:`BARE_SURNAME_SHARE` % one race (``Begay`` 95 %
    native-american, ``Okafor`` 98 % black). Not: a word the shipped lists or a term list
    exclude, a place or title word, a firm of :data:`FIRM_WORDS`, a first name that tells a
    gender (``Kim applied`` is read as a first name), a surname under the share (``Jordan`` 63
    % white, ``Lincoln`` 77 %). ``place`` is true for a country of the Factbook or a US state
    (``Washington`` 91 % black, ``Senegal``, ``Poland``): a state can be denied funds, so the
    caller holds it.
    """
    out: list[tuple[int, int, str, bool]] = []
    for m in _BARE_WORD.finditer(text):
        word = _POSSESSIVE_END.sub("", m.group(0))
        before = text[: m.start()].rstrip(" \t")
        if before and before[-1] not in _OPENS:
            continue
        alone = not before and not text[m.start() + len(word) :].strip(" \t.")
        if not (alone or _BARE_VERB.match(text, m.start() + len(word))) or not word[1:].islower():
            continue
        s = fold(word)
        if s in book.excluded or s in PLACE_WORDS or s in NOT_GIVEN or s in FIRM_WORDS:
            continue
        share = surname_share_of(s, name_shares().surname_race)
        if share is None or share.percent < BARE_SURNAME_SHARE or share.group == "multiple":
            continue
        place = s in US_STATES or any(fold(n) == s for c in countries() for n in c.names)
        if not place:
            info = first_name_info(word, book)
            if info is not None and info.gender is not None:
                continue
        out.append((m.start(), m.start() + len(word), word, place))
    return out
