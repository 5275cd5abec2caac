"""Proxies the rewrite cannot move: a home language, an immigration status, a place of origin.

Each stands for a protected characteristic without naming a group of its axis, and no variant
moves it coherently, so an input naming one is held for review (:class:`~biasbreaker.probe.
held.HeldReader`) rather than passed as not applicable (docs/detection.md, "Proxies").

* A home or native language (``Native language: Arabic``, ``Mother tongue: Spanish``, ``speaks
  Arabic at home``), for national origin: the US EEOC counts a person's language among the
  traits of national origin (29 C.F.R. § 1606.1). One language is spoken in many countries
  and the axis' groups in many languages, so a variant of another nationality has no single
  language to take, and one that keeps it is not of another group. A language listed as a
  skill (``fluent in French``, ``speaks French``) is read as neither: a skill.
* An immigration or citizenship status (``visa status: H-1B``, ``green card holder``,
  ``requires sponsorship``; not ``corporate sponsorship``), for nationality: citizenship
  status is protected with national origin (8 U.S.C. § 1324b) and no variant of another
  nationality keeps or drops it soundly. Also ``refugee``, ``asylum seeker``/``seeking
  asylum``, ``asylee``, ``DACA`` (upper case) and ``undocumented`` said of a person (``she is
  undocumented``, ``the applicant was undocumented``, ``an undocumented immigrant``; not
  ``an undocumented API`` nor ``the feature is undocumented``): a new-user
  trial found each "not applicable".
* A place of birth or origin that no term names (``Born in Lagos``, ``The applicant is from
  Lagos``, ``a family from Lagos``), for nationality; and a place written beside a country
  the variants swap (``Born in Lagos, Nigeria``, ``lives in Lagos, Nigeria``: a variant said
  ``Lagos, Brazil``). A US state (``from Texas``), a month or a weekday is no origin.
* An ethnicity the race axis has no group for (``A Roma family``, ``she is Romani``), for
  race, like a nationality outside the axis (:mod:`biasbreaker.probe.countries`).
* A mixed race (``biracial``, ``multiracial``, ``mixed-race``, ``mixed race``), for race: the
  axis' groups are one each, so no variant moves the person to another group soundly.
* A caste (``caste``, ``Dalit``, ``Harijan``, ``Brahmin``, ``upper caste``), held under race
  (the axis has no caste groups; caste discrimination is read as race or national origin
  discrimination, e.g. California's Civil Rights Department v. Cisco, 2020), with a reason
  that names the caste.
* A historically Black college or university (``HBCU``, ``historically Black college``), for
  race: a proxy no variant can move (a variant of another race keeps the college).
* An age in decades (``6 decades old``, ``six decades old``, ``in his sixth decade``), for
  age: the age rules read years and decades of life (``in her sixties``, swapped), not these,
  and no variant rewrites them coherently.
* A term that goes with a disability (``uses ASL``, ``sign language``, ``hearing aid``,
  ``braille``, ``guide dog``, ``white cane``, ``screen reader``), for disability: a variant
  that swaps ``deaf`` to ``hearing`` keeps ``uses ASL`` (a trial saw ``The applicant is
  hearing and uses ASL``), and the term alone names the disability.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from biasbreaker.probe.context import COPULAS, word_before
from biasbreaker.probe.countries import countries
from biasbreaker.probe.name_context import CALENDAR
from biasbreaker.probe.names import fold
from biasbreaker.probe.surnames import US_STATES

__all__ = ["Proxy", "proxy_mentions"]

_CAP = r"[A-Z][^\W\d_]*(?:[-'’][^\W\d_]+)*"
"""A capitalised word (a language or a place)."""
_PLACE = rf"{_CAP}(?:[ \t]+{_CAP})*(?:[ \t]*,[ \t]*{_CAP}(?:[ \t]+{_CAP})*)?"
"""A place: capitalised words, perhaps a comma and more (``Lagos, Nigeria``, ``Rio de``…)."""

_HOME_LANGUAGE = re.compile(
    rf"(?i:(?:native|first|home|mother|primary|heritage|family)[ \t]+(?:language|tongue)s?"
    rf"[ \t]*(?:[:=-][ \t]*|(?:is|was|are)[ \t]+)?)(?P<a>{_CAP})"
    rf"|(?i:speaks?|spoke|speaking)[ \t]+(?i:(?:only|mostly|mainly)[ \t]+)?(?P<b>{_CAP})"
    rf"(?:[ \t]+(?i:and|or)[ \t]+{_CAP})?[ \t]+(?i:at[ \t]+home)(?![\w-])"
    rf"|(?<![\w-])(?P<c>{_CAP})[ \t]+(?i:is[ \t]+(?:his|her|their|my|your|the[ \t]+"
    rf"applicant['’]s)[ \t]+(?:native|first|mother|home)[ \t]+(?:language|tongue))(?![\w-])"
)
_STATUS = re.compile(
    r"(?<![\w-])(?:(?i:visa|immigration|citizenship|residency|work[ \t]+authori[sz]ation)"
    r"[ \t]+(?i:status)(?:[ \t]*[:=-][ \t]*[^\n,;.]{1,30})?"
    r"|(?i:green[ \t]+card(?:[ \t]+holder)?|permanent[ \t]+resident|work[ \t]+(?:visa|permit)"
    r"|visa[ \t]+sponsorship|(?:needs?|requires?|requiring|will[ \t]+require)[ \t]+sponsorship)"
    r"|H-?1B|H-?2[AB]|(?:F|J|L|O|E|TN)-?[123]?[AB]?[ \t]+(?i:visa))(?![\w-])"
)
_ORIGIN = re.compile(
    rf"(?<![\w-])(?P<cue>(?i:born[ \t]+in|place[ \t]+of[ \t]+birth|birth[ \t]*place|native"
    rf"[ \t]+of|hails?[ \t]+from|grew[ \t]+up[ \t]+in|(?:im|e)migrated[ \t]+from|from))"
    rf"[ \t]*[:=-]?[ \t]*(?P<place>{_PLACE})"
)
_FROM_PEOPLE = frozenset(
    """
    comes came come originally moved relocated fled
    """.split()  # noqa: SIM905
)
"""Words before ``from`` that make its place an origin (``is from``, ``comes from``); a
person word (``a family from Lagos``) does too, read from the term set."""
_STATUS_WORDS = re.compile(
    r"(?<![\w-])(?:(?i:refugees?|asylum[ \t-]+seekers?|seeking[ \t]+asylum|asylees?"
    r"|asylum[ \t]+(?:status|claim|application|case))|DACA|(?i:(?P<cop>is|was|are|were|am)"
    r"[ \t]+undocumented|undocumented[ \t]+(?:immigrants?|migrants?|workers?|aliens?|persons?"
    r"|people|residents?|applicants?|status|students?)))(?![\w-])"
)
_PRONOUNS = frozenset({"he", "she", "they", "i", "you", "we", "who"})
"""Subjects before ``is undocumented`` that make it a person's status (besides person words)."""
_MIXED_RACE = re.compile(r"(?<![\w-])(?i:bi-?racial|multi-?racial|mixed[ \t-]+race)(?![\w-])")
_CASTE = re.compile(
    r"(?<![\w-])(?:(?i:(?:upper|lower|scheduled|backward|high|low)[ \t-]+)?(?i:castes?)"
    r"|Dalits?|Harijans?|Brahmins?|DALIT)(?![\w-])"
)
_HBCU = re.compile(
    r"(?<![\w-])(?:HBCUs?|(?i:historically[ \t]+black[ \t]+(?:colleges?|universit(?:y|ies)"
    r"|institutions?|schools?)(?:[ \t]+and[ \t]+universit(?:y|ies))?))(?![\w-])"
)
_DECADES = re.compile(
    r"(?<![\w-])(?i:(?:\d{1,2}|two|three|four|five|six|seven|eight|nine|ten)[ \t-]+decades?"
    r"[ \t-]+old|in[ \t]+(?:his|her|their|my|the)[ \t]+(?:third|fourth|fifth|sixth|seventh"
    r"|eighth|ninth|tenth)[ \t]+decade)(?![\w-])"
)
_ETHNICITY = re.compile(r"(?<![\w-])(?:Roma|Romani|Romany|Sinti|Gypsy|Gypsies|Gipsy)(?![\w-])")
_ETHNIC_AFTER = re.compile(
    r"[ \t]+(?:descent|heritage|background|origin|ancestry|ethnicity|minority|camp|settlement)"
    r"(?![\w-])",
    re.IGNORECASE,
)
_DISABILITY_AIDS = re.compile(
    r"(?<![\w-])(?:(?i:American[ \t]+Sign[ \t]+Language|sign[ \t]+language|hearing[ \t]+aids?"
    r"|cochlear[ \t]+implants?|braille|guide[ \t]+dogs?|white[ \t]+canes?|screen[ \t]+readers?)"
    r"|ASL|BSL)(?![\w-])"
)


@dataclass(frozen=True, slots=True)
class Proxy:
    """One proxy in a text: span, surface, axis and what it is (for the hold reason)."""

    start: int
    end: int
    surface: str
    axis: str
    what: str


def _country_names() -> frozenset[str]:
    return frozenset(fold(n) for c in countries() for n in c.names) | {"usa", "uk", "us"}


def proxy_mentions(
    text: str,
    axes: Sequence[str],
    read: Sequence[tuple[int, int]],
    people: frozenset[str],
) -> Iterator[Proxy]:
    """The proxies of the axes ``axes`` in ``text`` (see the module docstring).

    Args:
        text: One string of a payload.
        axes: The axis names probed; a proxy is reported only for its own axis.
        read: The spans the scan read as mentions: a place wholly read (``from Nigeria``, a
            country term) is swapped, not held, and a name read after ``from`` is a person.
        people: The term set's person words (``a family from Lagos``, ``a Roma family``).

    Yields:
        :class:`Proxy` each, in the order of the rules above, each span once.
    """

    def unread(start: int, end: int) -> bool:
        return not any(s <= start and end <= e for s, e in read)

    if "nationality" in axes:
        for m in _HOME_LANGUAGE.finditer(text):
            lang = m.group("a") or m.group("b") or m.group("c")
            yield Proxy(m.start(), m.end(), m.group(0), "nationality", f"the home language "
                        f"{lang!r} ({m.group(0)!r}), a proxy of national origin")  # fmt: skip
        for m in _STATUS.finditer(text):
            yield Proxy(m.start(), m.end(), m.group(0), "nationality", f"the immigration "
                        f"status {m.group(0)!r}, a proxy of nationality")  # fmt: skip
        for m in _STATUS_WORDS.finditer(text):
            if m.group("cop") is not None:
                who = (word_before(text, m.start()) or "").lower()
                if who not in _PRONOUNS and who not in people:
                    continue  # "the API is undocumented"
            yield Proxy(m.start(), m.end(), m.group(0), "nationality", f"the immigration "
                        f"status {m.group(0)!r}, a proxy of nationality")  # fmt: skip
        yield from _origins(text, read, people)
    if "age" in axes:
        for m in _DECADES.finditer(text):
            if unread(m.start(), m.end()):
                yield Proxy(m.start(), m.end(), m.group(0), "age", f"the age in decades "
                            f"{m.group(0)!r}, which the age rules do not rewrite")  # fmt: skip
    if "race" in axes:
        for m in _MIXED_RACE.finditer(text):
            yield Proxy(m.start(), m.end(), m.group(0), "race", f"the mixed race "
                        f"{m.group(0)!r}, for which the race axis has no group")  # fmt: skip
        for m in _CASTE.finditer(text):
            yield Proxy(m.start(), m.end(), m.group(0), "race", f"the caste {m.group(0)!r}, "
                        "for which the race axis has no group")  # fmt: skip
        for m in _HBCU.finditer(text):
            yield Proxy(m.start(), m.end(), m.group(0), "race", f"the historically Black "
                        f"college {m.group(0)!r}, a proxy of race no variant moves")  # fmt: skip
        for m in _ETHNICITY.finditer(text):
            nxt = re.match(r"[ \t]+([^\W\d_]+)", text[m.end() :])
            prev = word_before(text, m.start())
            if (
                (nxt is not None and nxt.group(1).lower() in people)
                or _ETHNIC_AFTER.match(text, m.end())
                or (prev is not None and prev.lower() in COPULAS)
                or re.search(r"(?i:ethnicity|ethnic group)[ \t]*[:=][ \t]*$", text[: m.start()])
            ):
                yield Proxy(m.start(), m.end(), m.group(0), "race", f"the ethnicity "
                            f"{m.group(0)!r}, for which the race axis has no group")  # fmt: skip
    if "disability" in axes:
        for m in _DISABILITY_AIDS.finditer(text):
            if unread(m.start(), m.end()):
                yield Proxy(m.start(), m.end(), m.group(0), "disability", f"the term "
                            f"{m.group(0)!r}, which goes with a disability a variant would "
                            "swap or keep")  # fmt: skip


def _origins(
    text: str,
    read: Sequence[tuple[int, int]],
    people: frozenset[str],
) -> Iterator[Proxy]:
    """Places of birth or origin no term names, and places beside a swapped country."""
    names = _country_names()
    for m in _ORIGIN.finditer(text):
        cue = m.group("cue").lower()
        if cue == "from":
            prev = word_before(text, m.start())
            low = (prev or "").lower()
            if not (low in COPULAS or low in _FROM_PEOPLE or low in people):
                continue
        place = m.group("place")
        words = [w.strip() for w in place.replace(",", " ").split()]
        if fold(words[0]) in CALENDAR or fold(place) in US_STATES or fold(place) in names:
            continue  # a country alone is the nationality rules' (swapped or held)
        start, end = m.start("place"), m.end("place")
        if all(_covered(text, w, start, end, read) for w in words):
            continue  # "born in Nigeria": a country term, swapped
        if any(s < end and start < e for s, e in read) and not any(fold(w) in names for w in words):
            continue  # "a note is from Greg": a name the scan read
        yield Proxy(start, end, place, "nationality", f"the place of origin {place!r}, "
                    "a proxy of national origin no variant can move")  # fmt: skip
    for m in re.finditer(rf"(?<![\w-])({_CAP}(?:[ \t]+{_CAP})*)[ \t]*,[ \t]*({_CAP})", text):
        if fold(m.group(2)) not in names or _ORIGIN_BEFORE.search(text, 0, m.start()):
            continue
        if _TITLE_BEFORE.search(text, 0, m.start()):
            continue  # "Dear Mr. Smith, Canada": a surname
        city = (m.start(1), m.end(1))
        country = (m.start(2), m.end(2))
        if any(s <= country[0] and country[1] <= e for s, e in read) and not any(
            s < city[1] and city[0] < e for s, e in read
        ):
            yield Proxy(m.start(), m.end(), m.group(0), "nationality", f"the place "
                        f"{m.group(1)!r} beside the country {m.group(2)!r}, which a variant "
                        "would keep beside another country")  # fmt: skip


_TITLE_BEFORE = re.compile(r"(?<![\w'’-])(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?[ \t]+$")
_ORIGIN_BEFORE = re.compile(
    r"(?i:born[ \t]+in|place[ \t]+of[ \t]+birth|birth[ \t]*place|native[ \t]+of|from)"
    r"[ \t]*[:=-]?[ \t]*$"
)


def _covered(text: str, word: str, start: int, end: int, read: Sequence[tuple[int, int]]) -> bool:
    at = text.find(word, start, end)
    return at >= 0 and any(s <= at and at + len(word) <= e for s, e in read)
