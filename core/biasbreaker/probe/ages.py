"""Ages written in text: the forms read, the age each states, and its mirrored rewrite.

An age mention is one of the :data:`AGE_FORMS`: a number of years (digits or words, ``65 years
old``, ``a sixty-three-year-old``, ``63 y/o``, ``aged 65``, ``Mary Smith, 63,``, ``Mary Smith
(63)``, ``she is 63``, ``a man of 63``, ``At 63, she``), a birth year (``born in 1958``, ``DOB:
1958-04-12``, ``yob 1961``, ``date of birth: 12 April 1958``; in two digits, ``DOB 4/2/61``,
``born '61``), a bound (``applicants over 60``, ``under the age of 25``, ``older than 60``,
``65 or older``) or a decade (``in her sixties``, ``in his late 30s``). Forms whose number could
as well count something else (``is 63``, ``over 60``, ``, 63,``, ``of 63``) count only in a
person context: after a pronoun subject, a person or group noun, or a capitalised word; an
appositive ``, 63`` also needs a closing mark, a verb of its person or the end of the text
after it (``Mary Smith, 63 wants a loan``), and ``At 63,`` a pronoun after it. Forms as
records and case notes write them count in a record's context: beside a sex code (``F/63``,
``63/M``, not after a word that numbers a thing: ``page 63/M``), glued to one or one space or
tab before it (``63F``, ``63 F``, not ``it was 63F``), a bare number or ``63 years`` after a
person noun or at a line start before a further field (``Applicant 63, income 40k``, ``63
years, income``), and a bound sign before a person word (``65+ applicants``).

:func:`age_of` reads the age a surface states (a bound ``over n`` is ``n + 1``, ``under n`` is
``n − 1``; a decade or a range is its middle, ``early``/``late`` its third and eighth year);
:func:`mirrored_age` rewrites it to the mirrored age ``mirror_sum − n`` in the same style
(digits stay digits, words stay words, a birth year becomes the year of the mirrored age, a
range's ends are mirrored and trade places, a bound's direction flips, ``early`` and ``late``
trade places), so the rewrite is an involution and maps itself back. The band rule (which
ages are young or old) is the term file's :class:`~biasbreaker.probe.terms.NumericAge`.

Source:
    own rules (issue 14); ``docs/detection.md`` "What the lists cover" (ages).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from biasbreaker.probe.terms import NumericAge

__all__ = [
    "AGE_FORMS",
    "AgeForm",
    "age_mentions",
    "age_of",
    "glued_sex_codes",
    "mirrored_age",
    "number_words",
    "range_ends",
    "slash_age_before",
]

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_TEENS = [
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORD_VALUE: dict[str, int] = {
    **{w: i for i, w in enumerate(_UNITS)},
    **{w: 10 + i for i, w in enumerate(_TEENS)},
    **{w: 10 * i for i, w in enumerate(_TENS) if w != "_"},
}
_TENS_WORDS = "|".join(_TENS[2:])
_SMALL_WORDS = "|".join(sorted(_UNITS[1:] + _TEENS, key=len, reverse=True))
_WORDS = rf"(?:(?:{_TENS_WORDS})(?:[-\s](?:{'|'.join(_UNITS[1:])}))?|{_SMALL_WORDS})"
_NUM = rf"(?:\d{{1,3}}|{_WORDS})"
_YEAR = r"\d{4}"
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE_BEFORE_YEAR = (
    rf"(?:\d{{1,2}}[-/.]\d{{1,2}}[-/.]|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+|"
    rf"{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+)"
)
_DECADE_WORDS = "teens|twenties|thirties|forties|fifties|sixties|seventies|eighties|nineties"
_END = r"(?![\w-])"
_CLAUSE_END = (
    r"(?=\s*(?:[.,;:!?()]|$|\s(?:and|or|but|with|who|years?|are|is|were|was|get|gets|should|"
    r"must|will|would|may|might|can|cannot|can['’]t|need|needs|do|don['’]t|qualify|have|had|"
    r"last|this|next|in|on|at|when|so|yesterday|today)\b))"
)
_VERB_AFTER = (
    r"(?=\s*$|\s+(?:wants?|wanted|applies|applied|asks?|asked|needs?|needed|seeks?|sought|"
    r"requests?|requested|has|had|is|was|will|would|can|could|earns?|earned|works?|worked|"
    r"lives?|lived|owns?|owned|rents?|rented|(?:co-)?signs?|(?:co-)?signed|who)\b)"
)
"""After an appositive age with no closing comma: a verb of its person, or the end of the text
(``Mary Smith, 63 wants a loan``; ``Applicant: Mary Smith, 63``)."""
_PERSON_NOUNS = (
    r"mother|father|wife|husband|spouse|partner|son|daughter|sister|brother|aunt|uncle|"
    r"grandmother|grandfather|grandparent|widow|widower|man|woman|applicant|borrower|"
    r"candidate|patient|tenant|client|customer|employee|worker|teacher|nurse|driver|retiree|"
    r"veteran|co-signer|cosigner|guarantor|claimant|resident|owner|member|pt\.?"
)
"""Person nouns after which a bare number is a person's age (``my mother, 63,``); ``pt`` is
the clinical note's patient (``Pt 67F w/ chest pain``)."""
_COPULA = r"(?:is|are|was|were|am|['’]s|['’]re|['’]m)"
_PERSON_BEFORE = (
    r"\b(?:anyone|anybody|everyone|everybody|nobody|no\s+one|someone|somebody|people|persons?|"
    r"applicants?|candidates?|those|men|women|adults|workers|employees|customers|clients|"
    r"patients|borrowers|tenants|individuals|residents|hires|renters|users|members|staff|"
    rf"ones|{_PERSON_NOUNS}|she|he|they|who|i)(?:\s+{_COPULA})?"
    r"\s+(?:(?:aged|age|who\s+(?:is|are))\s+)?$"
)
_ADVERB = r"(?:(?:just|now|recently|already)\s+)?"
_SUBJECT_BEFORE = (
    rf"(?:(?:\b(?:she|he|who|i|{_PERSON_NOUNS})|(?-i:\b[A-Z][^\W\d_]+))\s+{_ADVERB}"
    rf"(?:is|was|am|turns|turned|will\s+(?:be|turn))|\b(?:she|he)['’]s)\s+{_ADVERB}$"
)
_PARENTS = r"mother|father|parent|mom|mum|dad|grandmother|grandfather|grandparent"
_OF_BEFORE = (
    rf"\b(?!(?:{_PARENTS})\s)(?:{_PERSON_NOUNS}|person|lady|gentleman|men|women|people)\s+$"
)
"""Before ``of`` and an age: a person (``a woman of 40``); not a parent, whose ``of two`` counts
children (a trial saw ``a single mother of two`` become ``mother of ninety-eight``)."""
_PARENT_OF_BEFORE = rf"\b(?:{_PARENTS})\s+$"
"""Before ``of`` and an age with its unit: a parent (``a mother of 63 years``)."""
_NAME_BEFORE = rf"(?:^|[^\w'’-])(?:[A-Z][^\W\d_]*\.?|(?i:{_PERSON_NOUNS}))$"
_LINE_START = r"(?:^|\n)[ \t*•-]*$"
"""Opening a line (a bullet may stand before): ``63F, smoker``, ``- 63 years, income 40k``."""
_LABEL_BEFORE = rf"(?:{_LINE_START}|\b(?:{_PERSON_NOUNS})\s*:?\s*$)"
"""A line start, or a person noun as a label: ``Applicant 63, income 40k``, ``patient: 63F``."""
_GLUED_BEFORE = rf"(?:{_LABEL_BEFORE}|(?-i:[A-Z][^\W\d_]+)(?:,\s*|\s*\(\s*)$)"
"""Before an age glued to a sex code or one space or tab before it: a line start, a person noun,
or a capitalised word and a comma or an opening bracket (``Mary Smith, 63F``, ``Smith (63 F)``)."""
_NUMBERED = (
    r"page|pages|p|pp|room|rm|seat|row|line|unit|apt|flat|floor|gate|item|section|sec|"
    r"chapter|ch|table|figure|fig|vol|volume|no|nr|number|part|plan|size|grade|class|type|"
    r"option|platform|bus|route|lot|box|suite|block|ward|bed|step|level|version|question|"
    r"slide|exhibit|track|channel|bay|aisle|shelf|pier|dock|lane|zone|sheet|form"
)
"""Words after which a number counts or labels a thing (``page 63/M``, ``Room 63/F``)."""
_CODED_FIRST_BEFORE = (
    rf"(?:{_LINE_START}|[,;]\s*$|(?<![\w.'’-])(?!(?:{_NUMBERED})\b)[^\W\d_][\w'’-]*"
    r"\s*[:,]?\s*\(?\s*$)"
)
"""Before ``63/M``: a line start, a comma, or a word that does not number a thing."""
_PLUS_PERSONS = (
    rf"(?:{_PERSON_NOUNS}|people|persons?|men|women|adults?|individuals?|citizens?|"
    r"households?|users?|hires?|renters?|staff)s?"
)


@dataclass(frozen=True, slots=True)
class AgeForm:
    """One way an age is written.

    Args:
        name: Short label (for docs and tests).
        pattern: Regex of the surface (case-insensitive); it may use lookaheads but no
            lookbehind wider than one character, since the surface alone must parse again.
        before: Optional regex searched on the 40 characters before the surface (anchored
            with ``$``): the form counts only in that context.
        minimum: Smallest age this form is read as (smaller numbers count something else).
    """

    name: str
    pattern: re.Pattern[str]
    before: re.Pattern[str] | None = None
    minimum: int = 0


def _form(
    name: str, pattern: str, before: str | None = None, *, case: bool = False, minimum: int = 0
) -> AgeForm:
    flags = 0 if case else re.IGNORECASE
    return AgeForm(
        name,
        re.compile(pattern, re.IGNORECASE),
        re.compile(before, flags) if before is not None else None,
        minimum,
    )


_BOUND = r"(?:over|under|above|below)"
_AGE_LABEL = r"(?:\s+(?:group|band|range|bracket))?(?:\s*\((?:years?|yrs)\))?"
_OR_OLDER = r"\s+(?:or|and)\s+(?:older|younger)"
_RANGE = r"(\d{1,3})(\s*(?:-|–|—|to|and)\s*)(\d{1,3})"
"""Two ages that bound a range (``18-24``, ``25–34``, ``60 and 65``); groups: low, joint, high."""
_AGE_SEP = r"(?:\s*[:=]\s*|\s+-\s+|\s+)"
_DECADE = rf"(?:(?:early|mid|late)[\s-]+)?(?:{_DECADE_WORDS}|[1-9]0['’]?s)"
_DECADE_SURFACE = re.compile(rf"(?:in\s+\w+\s+)?{_DECADE}", re.IGNORECASE)
_YEARS_OLD = r"(?:\s+years?(?:\s+old)?)?"
_DATE_AFTER_YEAR = r"(?:[-/.]\d{1,2}[-/.]\d{1,2})?"
_DOB = (
    r"(?:DOB|D\.O\.B\.?|date\s+of\s+birth|birth\s*date|birthday|YOB|Y\.O\.B\.?|"
    r"year\s+of\s+birth|birth\s*year)"
)
_SHORT_YEAR = r"(?:\d{1,2}[-/.]\d{1,2}[-/.]|['’])\d{2}(?!\d)"
"""A birth year in two digits: after a day and month (``4/2/61``) or an apostrophe (``'61``)."""
_BIRTH_DECADE = rf"the\s+(?:{_YEAR}|['’]?\d0)s"
"""A decade of birth (``the 1960s``, ``the '60s``), read as its first year."""
_BIRTH_YEAR = rf"(?:{_DATE_BEFORE_YEAR}?{_YEAR}{_DATE_AFTER_YEAR}|{_SHORT_YEAR})"

_NO_WEATHER = (
    r"(?![ \t]+(?i:outside|outdoors|inside|indoors|today|tonight|tomorrow|yesterday|overnight|"
    r"degrees?|in\s+the\s+shade|at\s+(?:noon|night|midday)|this\s+(?:morning|afternoon|"
    r"evening))(?![\w-]))"
)
"""Not before a word of the weather or the time of day: ``32 F outside``, ``63F today`` are
temperatures, even at a line start, where ``32 F presents with chest pain`` (a clinical note's
age and sex) is read. Any other word after the code keeps the reading (a needless swap is
safer than a missed one)."""
_GRADUATION = (
    r"(?:class\s+of|graduated(?:\s+from)?(?:\s+(?:high\s+school|secondary\s+school|college|"
    r"university))?(?:\s+in)?|graduation\s+year|year\s+of\s+graduation)"
)
"""A graduation year's label (``Class of 1978``, ``Graduated high school in 1978``,
``graduated from college in 1978``, ``Graduation year: 1978``): an age proxy (the US EEOC
counts a graduation date asked of applicants as one under the ADEA), read as an age
(:func:`age_of`)."""
_GRADUATION_LABEL = re.compile(_GRADUATION, re.IGNORECASE)
_COLLEGE = re.compile(r"college|university", re.IGNORECASE)

AGE_FORMS: tuple[AgeForm, ...] = (
    _form("date of birth", rf"(?<![\w.-]){_DOB}\s*[:=-]?\s*{_BIRTH_YEAR}{_END}"),
    _form("born", rf"(?<![\w-])born\s+(?:(?:in|on)\s+)?(?:{_BIRTH_YEAR}|{_BIRTH_DECADE})"
          r"(?![\w-]|[.,]\d)"),
    _form("graduation", rf"(?<![\w-]){_GRADUATION}\s*[:=-]?\s*(?:19|20)\d\d(?![\w-]|[.,]\d)"),
    _form("birthday", rf"(?<![\w-])\d{{1,3}}(?:st|nd|rd|th)\s+birthday{_END}"),
    _form("years old", rf"(?<![\w.-]){_NUM}(?:\s*-\s*|\s+)years?(?:\s*-\s*|\s+)"
          rf"(?:old|young){_END}"),
    _form("years of age", rf"(?<![\w.-]){_NUM}\s+years?\s+of\s+age{_END}"),
    _form("y/o", rf"(?<![\w.-])\d{{1,3}}(?:\s*(?:y/o|y\.o\.|yo)|(?:\s*-\s*|\s*)yrs?\.?"
          rf"(?:(?:\s*-\s*|\s+)old|{_CLAUSE_END})){_END}"),
    _form("b.", rf"(?<!\w)\(b\.\s*(?:{_YEAR}|{_SHORT_YEAR})(?=\))"),
    _form("range", rf"(?<![\w-])(?:aged|ages?{_AGE_LABEL}){_AGE_SEP}(?:between\s+)?{_RANGE}"
          r"(?:\s+years?)?(?![\w-]|[.,]\d)"),
    _form("aged", rf"(?<![\w-])(?:aged|age{_AGE_LABEL}){_AGE_SEP}(?:≤\s*)?{_NUM}"
          rf"(?:\s*\+|\s+years?)?(?![\w-]|[.,]\d|(?:\s+years?)?{_OR_OLDER})"),
    _form("than", rf"(?<![\w-])(?:older|younger)\s+than\s+{_NUM}{_YEARS_OLD}{_END}"),
    _form("the age of", rf"(?<![\w-]){_BOUND}\s+the\s+age\s+of\s+{_NUM}{_END}"),
    _form("or older", rf"(?<![\w.-]){_NUM}(?:\s+years?)?{_OR_OLDER}{_END}"),
    _form("over", rf"(?<![\w-]){_BOUND}\s+{_NUM}{_YEARS_OLD}{_CLAUSE_END}", _PERSON_BEFORE),
    _form("over-60s", r"(?<![\w-])(?:over|under)-\d{1,3}['’]?s(?![\w-])"),
    _form("decade", rf"(?<![\w-]){_DECADE}{_END}", r"(?<![\w-])in\s+(?:his|her|their|my|your)\s+$"),
    _form("is", rf"{_NUM}{_YEARS_OLD}{_CLAUSE_END}", _SUBJECT_BEFORE),
    _form("appositive", rf",\s*{_NUM}{_YEARS_OLD}(?:(?=\s*[,;)]|\.(?:\s|$))|{_VERB_AFTER})",
          _NAME_BEFORE, case=True, minimum=16),
    _form("of", rf"(?<![\w-])of\s+{_NUM}{_YEARS_OLD}{_CLAUSE_END}", _OF_BEFORE),
    _form("of", rf"(?<![\w-])of\s+{_NUM}\s+years?(?:\s+old)?(?![\w-])", _PARENT_OF_BEFORE),
    _form("at", rf"(?<![\w-])at\s+(?:the\s+age\s+of\s+|age\s+)?{_NUM}\s*,"
          rf"(?=\s*(?:she|he|they|I|we)\b)", minimum=16),
    _form("in brackets", rf"\s*\((?:\d{{1,3}}|{_WORDS})(?:\)|(?=\s*[,;]))", _NAME_BEFORE, case=True,
          minimum=16),
    _form("turning", rf"(?<![\w-])turning\s+{_NUM}{_CLAUSE_END}", minimum=16),
    # beside a sex code and a slash, as forms write them: "F/63", "63/M"
    _form("coded", r"/\s*\d{1,3}(?![\w.-]|[.,]\d)", r"(?<![\w.])[FM]\s*$", minimum=16),
    _form("coded first", r"(?<![\w.-])\d{1,3}(?=\s*/\s*[FM](?!\w))", _CODED_FIRST_BEFORE,
          minimum=16),
    # glued to a sex code, or one space or tab before it, as forms and case notes write it:
    # "63F", "Applicant 63M", "Pt 67 F" (the surface is the number; the space stays)
    _form("glued", rf"(?<![\w.-])\d{{1,3}}(?=[ \t]?(?-i:[FM])(?![\w-]){_NO_WEATHER})",
          _GLUED_BEFORE, minimum=16),
    # a bare number after a person noun as a label, before a further field: "Applicant 63,
    # income 40k" (not "Applicant 17" alone, a number naming the applicant)
    _form("labelled", r"(?<![\w.#-])\d{1,3}(?=\s*[,;]\s*[^\W\d_])", _LABEL_BEFORE, minimum=16),
    # years with no "old", at a line start or after a person noun: "63 years, income 40k"
    _form("years", r"(?<![\w.-])\d{1,3}\s+(?:years?|yrs?\.?)(?=\s*(?:[,;]|$|\n))",
          _LABEL_BEFORE, minimum=16),
    # a bound before a person word: "65+ applicants" <-> "≤35 applicants"
    _form("plus", rf"(?<![\w.-])(?:≤\s*\d{{1,3}}|\d{{1,3}}\s*\+)(?=\s+{_PLUS_PERSONS}\b)"),
)  # fmt: skip
"""The age forms, in the order they are tried (earlier forms win at the same text)."""

_YEAR_TOKEN = re.compile(r"(?<!\d)\d{4}(?!\d)")
_SHORT_YEAR_TOKEN = re.compile(r"(?<!\d)\d{2}(?=s?$)")
_BIRTH_LABEL = re.compile(r"\(?(?:born|DOB|D\.O\.B|YOB|Y\.O\.B|year|date|birth|b\.)", re.I)
_RANGE_TOKEN = re.compile(_RANGE)
_GROUP_BOUND = re.compile(r"(over|under)-(\d{1,3})(['’]?s)", re.IGNORECASE)
_ORDINAL = re.compile(r"(?:st|nd|rd|th)(?=\s)", re.IGNORECASE)
_NUMBER_TOKEN = re.compile(
    rf"(?<![\w-])(?:\d{{1,3}}(?!\d)(?!['’]?s\b)|{_WORDS}(?!\w)(?!-(?:{'|'.join(_UNITS[1:])})\b))",
    re.IGNORECASE,
)
_DECADE_TOKEN = re.compile(rf"(?<!\w)(?:{_DECADE_WORDS}|([1-9])0(['’]?)s)(?![\w-])", re.I)
_HALF = re.compile(r"(?<![\w-])(early|mid|late)(?![\w])", re.IGNORECASE)
_DIRECTION = re.compile(r"(?<![\w-])(over|under|above|below|older|younger)(?![\w-])", re.I)
_FLIP = {
    "over": "under",
    "under": "over",
    "above": "below",
    "below": "above",
    "older": "younger",
    "younger": "older",
    "early": "late",
    "late": "early",
}
_DECADES = _DECADE_WORDS.split("|")
_HALF_YEAR = {"early": 2, "mid": 5, "late": 8}


def number_words(n: int, *, hyphen: str = "-") -> str:
    """``n`` (0–99) in English words, lower case: ``63`` → ``"sixty-three"``.

    Raises:
        ValueError: ``n`` outside 0–99.
    """
    if not 0 <= n <= 99:
        raise ValueError(f"number_words: n = {n} is outside 0-99")
    if n < 10:
        return _UNITS[n]
    if n < 20:
        return _TEENS[n - 10]
    tens, unit = divmod(n, 10)
    return _TENS[tens] + (hyphen + _UNITS[unit] if unit else "")


def _ordinal_suffix(n: int) -> str:
    """The English ordinal suffix of ``n``: ``st``, ``nd``, ``rd`` or ``th`` (``11th``)."""
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _word_value(token: str) -> int:
    parts = re.split(r"[-\s]+", token.lower())
    return sum(_WORD_VALUE[p] for p in parts)


def _decade(m: re.Match[str]) -> int:
    if m.group(1) is not None:
        return 10 * int(m.group(1))
    return 10 + 10 * _DECADES.index(m.group(0).lower())


def age_of(surface: str, rule: NumericAge) -> int | None:
    """The age in years that an age surface states, or ``None`` (no number in it).

    A birth year ``y`` is ``reference_year − y``; a two-digit one (``'61``, ``4/2/61``) is
    the age below 100 it gives against ``reference_year`` (``'61`` is 1961 and ``'05`` 2005
    for 2025), so no clock is read; ``over``/``above``/``older than n`` is
    ``n + 1``, ``under``/``below``/``younger than n`` is ``n − 1`` (``n or older`` is ``n``);
    a decade ``D`` is ``D + 5`` (``early`` ``D + 2``, ``late`` ``D + 8``); a range after an age
    label (``Age group: 18-24``) is its middle, rounded down, and ``None`` when its low end is
    above its high end; ``over-60s`` is 61, ``under-25s`` 24.
    """
    span = _RANGE_TOKEN.search(surface) if re.match(r"age", surface, re.I) else None
    if span is not None:
        low, high = int(span.group(1)), int(span.group(3))
        return (low + high) // 2 if low <= high else None
    group = _GROUP_BOUND.fullmatch(surface)
    if group is not None:
        return int(group.group(2)) + (1 if group.group(1).lower() == "over" else -1)
    dec = _DECADE_TOKEN.search(surface)
    if dec is not None and _DECADE_SURFACE.fullmatch(surface):
        half = _HALF.search(surface)
        return _decade(dec) + _HALF_YEAR[half.group(1).lower() if half else "mid"]
    year = _YEAR_TOKEN.search(surface)
    if year is not None:
        return rule.reference_year - int(year.group(0)) + _graduation_age(surface)
    short = _SHORT_YEAR_TOKEN.search(surface) if _BIRTH_LABEL.match(surface) else None
    if short is not None:
        return (rule.reference_year - int(short.group(0))) % 100
    num = _NUMBER_TOKEN.search(surface)
    if num is None:
        return None
    token = num.group(0)
    n = int(token) if token.isdigit() else _word_value(token)
    direction = _DIRECTION.search(surface)
    if direction is None or re.search(r"\s(?:or|and)\s+(?:older|younger)", surface, re.I):
        return n
    return n + 1 if direction.group(1).lower() in ("over", "above", "older") else n - 1


def _graduation_age(surface: str) -> int:
    """The age at graduation a surface's year is counted from: 0 for a birth year.

    A graduation year (:data:`_GRADUATION`) is counted from age 22 after ``college`` or
    ``university`` and from 18 otherwise (``Class of 1978`` is read as a high-school class,
    the youngest reading: a college class of 1978 would be four years older, in the same band
    but for ages within four years of a band's edge). So ``Class of 1978`` is 65 in 2025, old,
    and swaps to ``Class of 2008`` (35); the rewrite is its own inverse.
    """
    if not _GRADUATION_LABEL.match(surface):
        return 0
    return 22 if _COLLEGE.search(surface) else 18


def range_ends(surface: str) -> tuple[int, int] | None:
    """The low and high end of a range after an age label (``Age group: 55-64`` → 55, 64).

    ``None`` for any other age surface, and for a range whose low end is above its high end.
    """
    span = _RANGE_TOKEN.search(surface) if re.match(r"age", surface, re.I) else None
    if span is None:
        return None
    low, high = int(span.group(1)), int(span.group(3))
    return (low, high) if low <= high else None


def _styled(original: str, new: str) -> str:
    """``new`` in the letter case of ``original``: upper, each part capitalised, or first only."""
    if original.isupper() and len(original) > 1:
        return new.upper()
    parts = re.split(r"([-\s]+)", original)
    if len(parts) > 1 and all(p[:1].isupper() for p in parts[::2]):
        return re.sub(r"[^\W\d_]+", lambda w: w.group(0).capitalize(), new)
    return new[:1].upper() + new[1:] if original[:1].isupper() else new


def mirrored_age(surface: str, rule: NumericAge) -> str | None:
    """``surface`` with its age mirrored, or ``None`` (no age in it, or no mirrored form).

    An age ``n`` becomes ``mirror_sum − n`` in the surface's own style (digits or words); a
    birth year becomes the year of the mirrored age (in two digits when it had two, ``None``
    when the mirrored age is not 0–99); a bound's direction flips (``over 60`` ↔
    ``under 40``, ``aged 65+`` ↔ ``aged ≤35``); a decade ``D`` becomes ``mirror_sum − D − 10``
    with ``early`` ↔ ``late`` (``sixties`` ↔ ``thirties``; ``None`` when ``mirror_sum`` is not a
    multiple of ten or the result is not a decade 10–90). Each rewrite is its own inverse.
    """
    span = _RANGE_TOKEN.search(surface) if re.match(r"age", surface, re.I) else None
    if span is not None:
        low, high = int(span.group(1)), int(span.group(3))
        if not low <= high <= rule.mirror_sum:
            return None
        ends = f"{rule.mirror_sum - high}{span.group(2)}{rule.mirror_sum - low}"
        return surface[: span.start()] + ends + surface[span.end() :]
    group = _GROUP_BOUND.fullmatch(surface)
    if group is not None:
        if int(group.group(2)) > rule.mirror_sum:
            return None
        flipped = _styled(group.group(1), _FLIP[group.group(1).lower()])
        return f"{flipped}-{rule.mirror_sum - int(group.group(2))}{group.group(3)}"
    dec = _DECADE_TOKEN.search(surface)
    if dec is not None and _DECADE_SURFACE.fullmatch(surface):
        new_decade = rule.mirror_sum - _decade(dec) - 10
        if rule.mirror_sum % 10 or not 10 <= new_decade <= 90:
            return None
        if dec.group(1) is not None:
            text = f"{new_decade}{dec.group(2)}s"
        else:
            text = _styled(dec.group(0), _DECADES[new_decade // 10 - 1])
        out = surface[: dec.start()] + text + surface[dec.end() :]
        return _HALF.sub(lambda h: _styled(h.group(1), _FLIP.get(h.group(1).lower(), "mid")), out)
    year = _YEAR_TOKEN.search(surface)
    if year is not None:
        at = _graduation_age(surface)
        new_age = rule.mirror_sum - (rule.reference_year - int(year.group(0)) + at)
        if new_age < 0:
            return None
        new_year = str(rule.reference_year - new_age + at)
        return surface[: year.start()] + new_year + surface[year.end() :]
    short = _SHORT_YEAR_TOKEN.search(surface) if _BIRTH_LABEL.match(surface) else None
    if short is not None:
        new_age = rule.mirror_sum - (rule.reference_year - int(short.group(0))) % 100
        if not 0 <= new_age <= 99:  # two digits cannot say it
            return None
        new_year = f"{(rule.reference_year - new_age) % 100:02d}"
        return surface[: short.start()] + new_year + surface[short.end() :]
    num = _NUMBER_TOKEN.search(surface)
    if num is None:
        return None
    token = num.group(0)
    n = int(token) if token.isdigit() else _word_value(token)
    new = rule.mirror_sum - n
    if new < 0:
        return None
    if token.isdigit():
        text = str(new)
    else:
        if new > 99:
            return None
        text = _styled(token, number_words(new, hyphen=" " if " " in token.strip() else "-"))
    head, tail = surface[: num.start()], surface[num.end() :]
    if token.isdigit() and _ORDINAL.match(tail):  # "63rd birthday" <-> "37th birthday"
        tail = _styled(tail[:2], _ordinal_suffix(new)) + tail[2:]
    plus, at_most = re.match(r"(\s*)\+", tail), re.search(r"≤(\s*)$", head)
    if plus is not None:  # "65+" <-> "≤35": the bound's direction flips, spacing kept
        head, tail = head + "≤" + plus.group(1), tail[plus.end() :]
    elif at_most is not None:
        head, tail = head[: at_most.start()], at_most.group(1) + "+" + tail
    out = head + text + tail
    return _DIRECTION.sub(lambda d: _styled(d.group(1), _FLIP[d.group(1).lower()]), out)


_KEPT = 64
"""Texts whose age mentions are kept (the least recently used dropped first)."""
_KEPT_CHARS = 65536
"""The longest text whose age mentions are kept."""


def age_mentions(text: str, rule: NumericAge) -> Iterator[tuple[re.Match[str], int]]:
    """Every age form's matches in ``text`` that stand in their context, with the age stated.

    Yields ``(match, age)`` for ages within ``0..mirror_sum`` (a birth year in the future, or
    an age the mirror cannot reach, is not a mention) and at least the form's ``minimum``.
    Matches of different forms may overlap; the caller keeps one per span.

    A pure function of ``text`` and ``rule``, so the mentions of the last :data:`_KEPT` texts
    (of at most :data:`_KEPT_CHARS` characters) are kept: finders of two term sets that share
    the age rule read the same text one after the other (the fake LLM's masking and its
    mentions), and the forms' search is most of a finder's scan.
    """
    if len(text) > _KEPT_CHARS:
        return iter(_age_mentions(text, rule))
    return iter(_kept_age_mentions(text, rule))


def _age_mentions(text: str, rule: NumericAge) -> tuple[tuple[re.Match[str], int], ...]:
    out: list[tuple[re.Match[str], int]] = []
    for form in AGE_FORMS:
        for m in form.pattern.finditer(text):
            # the window only bounds the search: every context the forms name fits in it
            window = text[max(0, m.start() - 40) : m.start()]  # pragma: no mutate
            if form.before is not None and not form.before.search(window):
                continue
            n = age_of(m.group(0), rule)
            if n is None or n < max(0, form.minimum) or n > rule.mirror_sum:
                continue
            out.append((m, n))
    return tuple(out)


_kept_age_mentions = functools.lru_cache(maxsize=_KEPT)(_age_mentions)


_GLUED = re.compile(rf"(?<![\w.-])(\d{{1,3}})[ \t]?([FM])(?![\w-]){_NO_WEATHER}")
_GLUED_CONTEXT = re.compile(_GLUED_BEFORE, re.IGNORECASE)


_SLASH_AGE_END = re.compile(r"(?<![\w.-])(\d{1,3})\s*/\s*$")
_CODED_FIRST_CONTEXT = re.compile(_CODED_FIRST_BEFORE, re.IGNORECASE)


def slash_age_before(before: str) -> bool:
    """Whether ``before``, the text before a sex code, ends in an adult age and a slash.

    The age is 16–120 and in the context of the age form ``coded first`` (a line start, a
    comma, or a word that does not number a thing), so the ``F`` of ``67/F`` and ``Pt 67/F``
    is a code and the ``M`` of ``page 63/M`` is not.
    """
    m = _SLASH_AGE_END.search(before)
    return (
        m is not None
        and 16 <= int(m.group(1)) <= 120
        and _CODED_FIRST_CONTEXT.search(before[: m.start()]) is not None
    )


def glued_sex_codes(text: str) -> Iterator[tuple[int, int]]:
    """The spans of sex codes glued to an adult age (``63F``, ``Applicant 40M``) in ``text``.

    One space or tab may stand between (``Pt 67 F``, ``Smith (63 M)``); the span is the letter
    alone. The letter is upper case and followed by no word character or hyphen, the age
    16–120 and in the context of the age form ``glued`` (a line start, a person noun, a
    capitalised word and a comma or bracket), so a temperature (``it was 63F``, ``Temperature:
    63 F``), a size or a number (``page 63 F``) is no code.
    """
    for m in _GLUED.finditer(text):
        window = text[max(0, m.start() - 40) : m.start()]  # pragma: no mutate
        if 16 <= int(m.group(1)) <= 120 and _GLUED_CONTEXT.search(window):
            yield m.start(2), m.end(2)
