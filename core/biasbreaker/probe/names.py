"""Name data: the shipped name book (coded lists) and the public-record name shares.

The coded lists and their sources are named in ``biasbreaker/data/terms/names.json``
(sources and licences in that folder's ``SOURCE.md``). The public-record shares (2010 Census
surnames, Tzioumis first names, nomquamgender first-name gender) are the reduced tables of
``biasbreaker/data/names/`` (``SOURCE.md`` there; built by ``scripts/build_name_data.py``),
read lazily, once, by :func:`name_shares`. :func:`person_name` applies the documented rule
(docs/detection.md, "Names") that turns a first name and a surname into what they tell.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, overload

from biasbreaker.errors import ConfigError

__all__ = [
    "GENDER_SHARE",
    "GIVEN_GENDER_RECORDS",
    "NATIVE",
    "NATIVE_WORD_SURNAMES",
    "NOT_GIVEN",
    "ORGANISATIONS",
    "PLACE_FIRST",
    "PLACE_WORDS",
    "RACE_SHARE",
    "SURNAME_PLACE_WORDS",
    "NameBook",
    "NameInfo",
    "NameShares",
    "PersonName",
    "ProductNames",
    "Share",
    "first_name_info",
    "fold",
    "given_names",
    "name_shares",
    "packaged_names",
    "person_name",
]

GENDER_SHARE = 90
"""A first name tells the gender when at least this percent of its bearers have it."""
RACE_SHARE = 75
"""A surname (or a first name) tells the race when at least this percent of bearers have it."""
GIVEN_GENDER_RECORDS = 100
"""A name of ``given_names.tsv`` (under 1,000 records) tells a gender only with this many."""
NATIVE = "native-american"
"""The race group whose names are drawn by :meth:`NameShares.native_names`: no first name of
the Tzioumis table has it as its largest group, so no first name tells it."""
NATIVE_WORD_SURNAMES = frozenset(
    """
    active antelope apache baloo bia butterfly charging chief claw clown cowboy gopher hugs
    laughing mustache mute poncho quiver seminole snake soap watchman wildcat yankton yellow
    zuni
    """.split()  # noqa: SIM905
)
"""Surnames of the census table that tell native-american (75 % or more) but are ordinary
English words or a people's name (``Chief`` 91 %, ``Cowboy`` 94 %, ``Yellow`` 88 %,
``Apache`` 79 %): never drawn for a counterfactual, where they would read as a word or as a
term of the race axis rather than as a surname (hand-written from the 447 such surnames)."""
NOT_GIVEN = frozenset(
    """
    dr doctor prof professor mr mrs ms mx miss sir madam dame lord lady rev reverend father
    sister brother pastor rabbi imam captain capt major colonel general sergeant officer judge
    justice senator governor president mayor coach nurse manager director chief agent
    detective inspector principal dean minister deputy sheriff uncle aunt auntie grandma
    grandpa meet deny approve reject ask call email contact thank thanks dear hi hello hey
    team customer client applicant candidate patient tenant borrower chef trooper boss master job
    saint god buddha allah christ holy the a an and or but not no any ever of into to for
    with from by at on in per via as is was this that
    """.split()  # noqa: SIM905
)
"""Words of nomquamgender's world-wide list (titles, roles, greetings, verbs, religious
figures and function words: ``dr`` 297 records, ``meet`` 140, ``deny`` 390, ``chef`` 101)
never read as a given name before a
surname by the rule for names of no US table (:func:`person_name`): ``Dr Wang``, ``Meet Kim``
and ``Deny Garcia`` are no persons of those names."""

# First words of place names that are also first names in the tables (San Antonio, Santa
# Clara, St. Louis, Fort Worth …): a pair starting with one is never read as a person.
PLACE_FIRST = frozenset(
    """
    san santa santo sao los las la le el del de des di da du fort ft saint st port mount mt
    lake palm palo salt baton grand great little long cape glen rio costa puerto hong sri
    buenos new north south east west upper lower old university college
    """.split()  # noqa: SIM905
)
# Words that, right after the pair or as its second word, make it a place or an organisation
# (Virginia Beach, George Washington University, Morgan Stanley Inc).
PLACE_WORDS = frozenset(
    """
    city county beach springs falls heights valley island islands bay harbor harbour creek
    village township parish airport station street st avenue ave road rd boulevard blvd
    square university college institute school academy hospital clinic bank group inc corp
    corporation company co llc ltd plc foundation center centre capital partners associates
    technologies systems labs laboratories museum library church cathedral stadium arena
    hall park river mountains county's state hill hills league leagues
    """.split()  # noqa: SIM905
)
SURNAME_PLACE_WORDS = {"park": "asian"}
"""Place words that are also a common surname of one group (2010 Census: ``Park`` 73.0 %
Asian, 23.3 % white; the third Korean surname), read as the surname when the first name
tells that group (``Wei Park``, ``Mr. Jin Park``), so that ``Stanley Park`` or ``Grant Park``
stay places. Before, every ``… Park`` was no person, and a step about ``Wei Park`` was
*not applicable* (``Wei Chen`` was read)."""
# Firms named like a person (hand-written, from firm names common in resumes and finance
# news, and brands a second new-user trial saw held in lower case: john deere, jim beam,
# ben jerry): never read as one person. A pair followed by ``&`` is a firm too
# (``Merrill Lynch &``).
ORGANISATIONS = frozenset(
    {
        "morgan stanley", "morgan chase", "merrill lynch", "goldman sachs", "charles schwab",
        "edward jones", "raymond james", "smith barney", "dean witter", "booz allen",
        "grant thornton", "lockheed martin", "dow jones", "harley davidson", "marsh mclennan",
        "wells fargo", "johnson controls", "ernst young", "paul weiss", "sullivan cromwell",
        "baker mckenzie", "latham watkins", "arthur andersen", "bain capital", "janney montgomery",
        "stanley morgan", "alex brown", "franklin templeton", "thomas reuters", "thomson reuters",
        "warner bros", "walt disney", "tommy hilfiger", "ralph lauren", "calvin klein",
        "kenneth cole", "marc jacobs", "michael kors", "tory burch", "kate spade",
        "john deere", "jim beam", "ben jerry",
    }
)  # fmt: skip


def unaccent(text: str) -> str:
    """``text`` with its accents removed, case kept (``Género`` → ``Genero``)."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def fold(word: str) -> str:
    """``word`` lower-cased, accents removed (``García`` → ``garcia``): the tables' key."""
    return unaccent(word).lower()


def _norm(surface: str) -> str:
    return " ".join(surface.lower().split())


def _data_dir() -> Any:
    return resources.files("biasbreaker").joinpath("data")


def _read_packaged_json(filename: str) -> dict[str, Any]:
    doc = json.loads(_data_dir().joinpath("terms", filename).read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ConfigError(f"biasbreaker:{filename} must hold a JSON object")
    return doc


@dataclass(frozen=True, slots=True)
class NameInfo:
    """What a name tells about its bearer: gender and race group, each possibly unknown."""

    gender: str | None
    race: str | None


@dataclass(frozen=True)
class NameBook:
    """First names and full names tagged by gender (``male``/``female``) and race group.

    A first name whose lists disagree on the gender (or race) has that field ``None``; a first
    name with neither is not kept. Full names always carry both.

    Args:
        first: Title-cased first name → what it tells.
        full: Title-cased ``"First Last"`` → what it tells.
        last: Title-cased last name → race group (``None`` if the lists disagree).
        excluded: Lower-cased words never read as part of a person's name: the terms of an
            axis :meth:`without` dropped (``Christian``, ``Black``). ``names.json``'s
            ``exclude`` list (English words and places such as ``Grace``, ``Washington``) only
            keeps a word from being read as a name on its own.
        words: Lower-cased, accents folded: ``names.json``'s ``exclude`` list, English words and
            places that are also first names (``grace``, ``mark``, ``austin``): never read as
            a first name standing alone, from the lists or from the public-record tables.
    """

    first: Mapping[str, NameInfo]
    full: Mapping[str, NameInfo]
    last: Mapping[str, str | None]
    excluded: frozenset[str] = frozenset()
    words: frozenset[str] = frozenset()
    _pools: dict[tuple[str, str | None, str | None], tuple[str, ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        pools: dict[tuple[str, str | None, str | None], list[str]] = {}
        for kind, table in (("first", self.first), ("full", self.full)):
            for n, info in table.items():
                pools.setdefault((kind, info.gender, info.race), []).append(n)
        object.__setattr__(self, "_pools", {k: tuple(sorted(v)) for k, v in pools.items()})

    def first_pool(self, gender: str | None, race: str | None) -> tuple[str, ...]:
        """First names with exactly this gender and race tag, sorted."""
        return self._pools.get(("first", gender, race), ())

    def full_pool(self, gender: str, race: str) -> tuple[str, ...]:
        """Full names with this gender and race, sorted."""
        return self._pools.get(("full", gender, race), ())

    def without(self, surfaces: Iterable[str]) -> NameBook:
        """Drop names whose lower-cased form collides with any of ``surfaces``."""
        banned = {_norm(s) for s in surfaces}
        return NameBook(
            first={n: i for n, i in self.first.items() if _norm(n) not in banned},
            full={n: i for n, i in self.full.items() if _norm(n) not in banned},
            last={n: r for n, r in self.last.items() if _norm(n) not in banned},
            excluded=self.excluded | banned,
            words=self.words,
        )


def packaged_names() -> NameBook:
    """The shipped name book, built from the lists ``data/terms/names.json`` names.

    Raises:
        ConfigError: ``names.json`` names a list format this module does not read.
    """
    cfg = _read_packaged_json("names.json")
    excluded = {_norm(n) for n in cfg.get("exclude", [])}
    first_tags: dict[str, set[tuple[str, str | None]]] = {}
    full: dict[str, NameInfo] = {}
    last_tags: dict[str, set[str]] = {}
    bbq_race_first: dict[str, set[tuple[str, str]]] = {}
    bbq_last_by_race: dict[str, list[str]] = {}
    for spec in cfg["lists"]:
        text = _data_dir().joinpath(*spec["file"].split("/")).read_text(encoding="utf-8")
        races: dict[str, str] = spec["races"]
        if spec["format"] == "bbq-proper-names":
            for rec in csv.DictReader(io.StringIO(text)):
                name = rec["Name"].strip()
                gender = {"F": "female", "M": "male"}.get(rec["gender"].strip())
                race = races.get(rec["ethnicity"].strip())
                kind = rec["First_last"].strip()
                if kind in ("first", "first_only") and gender:
                    first_tags.setdefault(name, set()).add((gender, race))
                    if race:
                        bbq_race_first.setdefault(name, set()).add((gender, race))
                elif kind == "last" and race:
                    last_tags.setdefault(name, set()).add(race)
                    bbq_last_by_race.setdefault(race, []).append(name)
        elif spec["format"] == "bloomberg-full-names":
            gender = spec["gender"]
            for code, names in json.loads(text).items():
                race = races[code]
                for raw in names:
                    parts = raw.title().split()
                    first_name, last_name = parts[0], " ".join(parts[1:])
                    full[f"{first_name} {last_name}"] = NameInfo(gender, race)
                    first_tags.setdefault(first_name, set()).add((gender, race))
                    last_tags.setdefault(last_name, set()).add(race)
        else:
            raise ConfigError(f"names.json: unknown list format {spec['format']!r}")
    # Full names for groups without Bloomberg lists: BBQ first names x BBQ last names.
    covered = {(i.gender, i.race) for i in full.values()}
    for name, race_tags in sorted(bbq_race_first.items()):
        for tag_gender, tag_race in sorted(race_tags):
            if (tag_gender, tag_race) in covered:
                continue
            for last_name in sorted(bbq_last_by_race.get(tag_race, [])):
                full[f"{name} {last_name}"] = NameInfo(tag_gender, tag_race)
    first: dict[str, NameInfo] = {}
    for name, tags in first_tags.items():
        if _norm(name) in excluded:
            continue
        genders = {g for g, _ in tags}
        races_seen = {r for _, r in tags}
        info = NameInfo(
            gender=next(iter(genders)) if len(genders) == 1 else None,
            race=next(iter(races_seen)) if len(races_seen) == 1 else None,
        )
        if info.gender is not None or info.race is not None:
            first[name] = info
    last = {
        n: (next(iter(r)) if len(r) == 1 else None)
        for n, r in last_tags.items()
        if _norm(n) not in excluded
    }
    return NameBook(first=first, full=full, last=last, words=frozenset(fold(w) for w in excluded))


@dataclass(frozen=True, slots=True)
class Share:
    """The largest group among a name's bearers and its share, in whole percent (0-100)."""

    group: str
    percent: int


@dataclass(frozen=True)
class NameShares:
    """The public-record tables of ``data/names/``, keyed by :func:`fold`-ed name.

    Args:
        first_gender: First name → ``female``/``male`` share (nomquamgender 0.1.4).
        first_race: First name → race share (Tzioumis 2018).
        surname_race: Surname → race share (2010 Census).
    """

    first_gender: Mapping[str, Share]
    first_race: Mapping[str, Share]
    surname_race: Mapping[str, Share]

    def ambiguous_first_names(self, race: str) -> tuple[str, ...]:
        """Title-cased first names that tell ``race`` but no gender, sorted.

        Drawn for a race swap of a person whose first name tells no gender (``Wei Chen``),
        so the counterfactual does not add a gender the original did not carry.
        """
        return self._ambiguous_pools.get(race, ())

    @functools.cached_property
    def _ambiguous_pools(self) -> dict[str, tuple[str, ...]]:
        pools: dict[str, list[str]] = {}
        for name, share in self.first_race.items():
            gender = self.first_gender.get(name)
            if share.percent >= RACE_SHARE and gender is not None and gender.percent < GENDER_SHARE:
                pools.setdefault(share.group, []).append(name.title())
        return {race: tuple(sorted(v)) for race, v in pools.items()}

    @functools.cached_property
    def native_surnames(self) -> tuple[str, ...]:
        """Title-cased census surnames that tell native-american, sorted (420).

        Those whose largest group is native-american with at least :data:`RACE_SHARE` % of
        their bearers (447 of the 2010 table: ``Begay`` 95 %, ``Yazzie`` 96 %, ``Tsosie``
        96 %, ``Locklear`` 76 %), minus the English words and peoples' names of
        :data:`NATIVE_WORD_SURNAMES`, the place words of :data:`PLACE_WORDS` and the surnames
        that are also first names of the tables (``Alexie``), which a reader could take for a
        given name.
        """
        return tuple(
            sorted(
                name.title()
                for name, share in self.surname_race.items()
                if share.group == NATIVE
                and share.percent >= RACE_SHARE
                and name not in NATIVE_WORD_SURNAMES
                and name not in PLACE_WORDS
                and name not in self.first_gender
                and name not in self.first_race
            )
        )

    def native_given(self, gender: str | None) -> tuple[str, ...]:
        """Title-cased given names drawn with a native-american surname, sorted.

        First names of the Tzioumis table whose largest group is white with less than
        :data:`RACE_SHARE` % (so they tell no race: ``Agnes``, ``Alvin``, ``Darrell``) that
        tell ``gender`` (nomquamgender at :data:`GENDER_SHARE` % or more), or, for ``None``,
        tell no gender (under :data:`GENDER_SHARE` %); none of :data:`PLACE_FIRST` or
        :data:`NOT_GIVEN` (``Santa``), after which no pair is read as a person. The table has
        no first name whose largest group is native-american, so a given name cannot carry
        the group; these are names shared across groups, and one that tells no race leaves
        the surname to tell it (:func:`person_name`).

        Args:
            gender: ``"female"``, ``"male"`` or ``None``.
        """
        return self._native_given.get(gender, ())

    @functools.cached_property
    def _native_given(self) -> dict[str | None, tuple[str, ...]]:
        pools: dict[str | None, list[str]] = {}
        for name, share in self.first_race.items():
            told = self.first_gender.get(name)
            if share.group != "white" or share.percent >= RACE_SHARE or told is None:
                continue
            if name in PLACE_FIRST or name in NOT_GIVEN:  # Santa, Major: no person's pair
                continue
            gender = told.group if told.percent >= GENDER_SHARE else None
            pools.setdefault(gender, []).append(name.title())
        return {g: tuple(sorted(v)) for g, v in pools.items()}


class ProductNames(Sequence[str]):
    """Every ``"First Last"`` of ``firsts`` × ``lasts``, indexed without building the list.

    ``random.Random.choice`` draws from it uniformly, which is a first name and a surname
    drawn independently and uniformly. Index ``i`` is ``firsts[i // len(lasts)]`` with
    ``lasts[i % len(lasts)]``.

    Args:
        firsts: Given names, title-cased.
        lasts: Surnames, title-cased.
    """

    def __init__(self, firsts: Sequence[str], lasts: Sequence[str]) -> None:
        self._firsts = tuple(firsts)
        self._lasts = tuple(lasts)

    def __len__(self) -> int:
        return len(self._firsts) * len(self._lasts)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"name index {index} out of range for {n} names")
        index %= n
        first, last = divmod(index, len(self._lasts))
        return f"{self._firsts[first]} {self._lasts[last]}"


def _read_shares(filename: str) -> dict[str, Share]:
    text = _data_dir().joinpath("names", filename).read_text(encoding="utf-8")
    out: dict[str, Share] = {}
    distinct: dict[tuple[str, str], Share] = {}  # at most 6 groups x 101 shares: one object each
    for line in text.splitlines()[1:]:
        name, group, percent = line.split("\t")
        share = distinct.get((group, percent))
        if share is None:
            share = distinct[(group, percent)] = Share(group, int(percent))
        out[name] = share
    return out


@functools.cache
def given_names() -> Mapping[str, tuple[Share, int]]:
    """``given_names.tsv``, read on first use and kept: name → (gender share, records).

    nomquamgender's names with 10 to 999 records (123,619), too rare in its sources for
    ``first_gender.tsv``; read only by :func:`person_name`'s rule for a given name of no US
    table before a race-coded surname.
    """
    text = _data_dir().joinpath("names", "given_names.tsv").read_text(encoding="utf-8")
    out: dict[str, tuple[Share, int]] = {}
    distinct: dict[tuple[str, str], Share] = {}
    for line in text.splitlines()[1:]:
        name, group, percent, records = line.split("\t")
        share = distinct.get((group, percent))
        if share is None:
            share = distinct[(group, percent)] = Share(group, int(percent))
        out[name] = (share, int(records))
    return out


@functools.cache
def name_shares() -> NameShares:
    """The shipped public-record tables, read on first use and kept (184,019 names)."""
    return NameShares(
        first_gender=_read_shares("first_gender.tsv"),
        first_race=_read_shares("first_race.tsv"),
        surname_race=_read_shares("surname_race.tsv"),
    )


def surname_share_of(folded: str, table: Mapping[str, Share]) -> Share | None:
    """The census share of a :func:`fold`-ed surname, apostrophes and hyphens allowed for.

    The 2010 Census table stores surnames without punctuation (``obrien``), so ``'`` and
    ``’`` are dropped before the lookup (``o'brien`` → ``obrien``). A hyphenated surname in
    the table whole is read whole; else from its parts (``smith-jones``): the parts found
    must agree on the group, and the share is the smallest of theirs (a mixed or partly
    unknown name never tells more than its weakest part); parts that disagree give
    ``Share("multiple", 0)``, which tells no race. ``None`` when no part is in the table.
    """
    key = folded.replace("'", "").replace("\u2019", "")
    whole = table.get(key)
    if whole is not None or "-" not in key:
        return whole
    parts = [table[p] for p in key.split("-") if p in table]
    if not parts:
        return None
    if len({s.group for s in parts}) > 1:
        return Share("multiple", 0)
    return min(parts, key=lambda s: s.percent)


@dataclass(frozen=True, slots=True)
class PersonName:
    """A first name and a surname read as one person, and what they tell.

    Args:
        first: The first name as written.
        last: The surname as written.
        info: Gender and race it tells, each ``None`` when the data are weak or disagree.
        ambiguous: One note per axis left unknown, naming the evidence and the threshold
            (``"gender of 'Wei Chen': first name 'Wei' 69 % male (< 90 %)"``).
    """

    first: str
    last: str
    info: NameInfo
    ambiguous: tuple[str, ...] = ()


def person_name(first: str, last: str, book: NameBook) -> PersonName | None:
    """Read ``first last`` as a person's name, or ``None`` when it is not one.

    Rule (docs/detection.md, "Names"): ``first`` must be a first name of the shipped lists
    or of the Tzioumis table (US first names), or a first name of nomquamgender only (its
    world-wide list holds words and nicknames such as ``Tiger``) when ``last`` is a census
    surname and ``first`` is none (``Aaliyah Robinson``; ``Tiger Woods`` is no person:
    ``tiger`` is a census surname), or, before a surname that tells a race, a given name of
    nomquamgender's world-wide list read by :func:`_given_before_coded_surname` (``Yuki
    Tanaka``, ``Ji-woo Kim``, ``Chidi Okonkwo``); ``last`` a surname of the
    shipped lists or of the census table; neither an excluded word, ``first`` no place
    prefix (``San``, ``Fort``, ``New`` …) and ``last`` no place or organisation word
    (``Beach``, ``University``); the pair no firm of :data:`ORGANISATIONS`.

    Gender: from the shipped lists when they tag the first name, else from nomquamgender at
    :data:`GENDER_SHARE` % or more (with :data:`GIVEN_GENDER_RECORDS` records or more for a
    name of ``given_names.tsv``). Race: from the surname (the shipped lists, else the
    census table at :data:`RACE_SHARE` % or more), else from the first name (the shipped
    lists, else Tzioumis at :data:`RACE_SHARE` %); when both tell a race and they differ,
    the race is unknown, unless the surname tells native-american, which no first name of
    the tables can tell (``Darlene Yazzie``: ``darlene`` 87 % white, ``yazzie`` 96 %
    native-american, is native-american). An unknown axis is noted in :attr:`PersonName.ambiguous`.
    """
    f, s = fold(first), fold(last)
    if (
        f in book.excluded
        or s in book.excluded
        or f in PLACE_FIRST
        or (s in PLACE_WORDS and not _surname_here(first, f, s, book))
        or len(f) < 2
        or len(s) < 2
        or f"{f} {s}" in ORGANISATIONS
    ):
        return None
    data = name_shares()
    listed = book.first.get(first) or book.first.get(first.title())
    gender_share = data.first_gender.get(f)
    first_race = data.first_race.get(f)
    strong_gender = gender_share is not None and gender_share.percent >= GENDER_SHARE
    surname_share = surname_share_of(s, data.surname_race)
    gender_only_first = (  # Aaliyah Robinson: yes; Tiger Woods: no, tiger is a surname
        gender_share is not None
        and surname_share is not None
        and surname_share_of(f, data.surname_race) is None
    )
    listed_last = book.last.get(last.title())
    records: int | None = None  # the records of a name of given_names.tsv
    if listed is None and first_race is None and not gender_only_first:
        given = _given_before_coded_surname(first, f, listed_last or _told(surname_share))
        if given is None:
            given = _hyphenated_given(first, book)
        if given is None:
            return None
        gender_share, records = given
        strong_gender = gender_share.percent >= GENDER_SHARE and (
            records is None or records >= GIVEN_GENDER_RECORDS
        )
    if surname_share is None and last.title() not in book.last:
        return None
    whole = f"{first} {last}"
    notes: list[str] = []
    gender = listed.gender if listed is not None else None
    if gender is None and strong_gender:
        assert gender_share is not None
        gender = gender_share.group
    if gender is None and records is not None and records < GIVEN_GENDER_RECORDS:
        assert gender_share is not None
        notes.append(
            f"gender of {whole!r}: first name {first!r} {gender_share.percent} % "
            f"{gender_share.group} of {records} records (< {GIVEN_GENDER_RECORDS})"
        )
    elif gender is None:
        evidence = (
            f"{gender_share.percent} % {gender_share.group}"
            if gender_share is not None
            else "in no gender table"
        )
        notes.append(f"gender of {whole!r}: first name {first!r} {evidence} (< {GENDER_SHARE} %)")
    race_last = listed_last
    if race_last is None and surname_share is not None and surname_share.percent >= RACE_SHARE:
        race_last = surname_share.group if surname_share.group != "multiple" else None
    race_first = listed.race if listed is not None else None
    if race_first is None and first_race is not None and first_race.percent >= RACE_SHARE:
        race_first = first_race.group if first_race.group != "multiple" else None
    race = race_last or race_first
    if race_last == NATIVE:
        # no first name tells native-american (none has it as its largest group), so the
        # first name's race is no evidence against a surname that tells it (Darlene Yazzie)
        race = race_last
    elif race_last is not None and race_first is not None and race_last != race_first:
        race = None
        notes.append(
            f"race of {whole!r}: surname {last!r} tells {race_last}, first name {first!r} "
            f"tells {race_first}"
        )
    elif race is None:
        evidence = (
            f"{surname_share.percent} % {surname_share.group}"
            if surname_share is not None
            else "in no race table"
        )
        notes.append(
            f"race of {whole!r}: surname {last!r} {evidence} (< {RACE_SHARE} %) and first "
            f"name {first!r} tells none"
        )
    return PersonName(first, last, NameInfo(gender, race), tuple(notes))


def _surname_here(first: str, f: str, s: str, book: NameBook) -> bool:
    """Whether the place word ``s`` is a surname after ``first`` (:data:`SURNAME_PLACE_WORDS`).

    Yes when ``first`` tells the group the word is a surname of: the shipped lists' race tag,
    else Tzioumis at :data:`RACE_SHARE` %.
    """
    group = SURNAME_PLACE_WORDS.get(s)
    if group is None:
        return False
    listed = book.first.get(first) or book.first.get(first.title())
    if listed is not None and listed.race is not None:
        return listed.race == group
    share = name_shares().first_race.get(f)
    return share is not None and share.percent >= RACE_SHARE and share.group == group


def _told(share: Share | None) -> str | None:
    """The race group a census share tells (at least :data:`RACE_SHARE` %), else ``None``."""
    if share is None or share.percent < RACE_SHARE or share.group == "multiple":
        return None
    return share.group


def _given_before_coded_surname(
    first: str, f: str, race: str | None
) -> tuple[Share, int | None] | None:
    """``first`` (:func:`fold`-ed: ``f``), of no US first-name table, read as a given name.

    Before a surname that tells ``race`` (``None``: no given name is read), a word is a given
    name when nomquamgender lists it (``first_gender.tsv``, or ``given_names.tsv`` with 10 to
    999 records; whole, else without its hyphens: ``ji-woo`` → ``jiwoo``), it is none of
    :data:`NOT_GIVEN` nor written in capitals (``JSON Lines``: an acronym), and it is no
    census surname, or one that tells the same race and is a name of ``first_gender.tsv``
    (``Yuki Tanaka``: ``yuki`` 90 % and ``tanaka`` 85 % Asian, 2,629 records; ``Full
    Stack``, ``full`` 14 records, and ``Tiger Woods`` stay no persons). Returns the gender
    share and, for a name of ``given_names.tsv``, its records (``None`` for
    ``first_gender.tsv``): such a name tells a gender at :data:`GENDER_SHARE` % only with
    :data:`GIVEN_GENDER_RECORDS` records or more.
    """
    if race is None or f in NOT_GIVEN or (len(first) > 1 and first.isupper()):
        return None
    data = name_shares()
    as_surname = data.surname_race.get(f)  # whole: "ji-woo" is no compound of ji and woo
    if as_surname is not None and (_told(as_surname) != race or f not in data.first_gender):
        return None
    for key in dict.fromkeys((f, f.replace("-", ""))):
        share = data.first_gender.get(key)
        if share is not None:
            return share, None
        rare = given_names().get(key)
        if rare is not None:
            return rare
    return None


def _hyphenated_given(first: str, book: NameBook) -> tuple[Share, None] | None:
    """A hyphenated given name whose every part is a first name of one gender (``Mary-Ann``).

    ``Mary-Ann``, ``Anna-Lena``, ``John-Paul`` are in no first-name table as written; each part
    is. The compound is read as a given name when it has two or three parts, each of two
    letters or more, no English word (``names.json``'s ``exclude`` list), and each tells the
    same gender: the shipped lists' tag, else nomquamgender at :data:`GENDER_SHARE` % or
    more. Returns that gender with the smallest share among the parts (100 for a listed
    part), as :func:`_given_before_coded_surname` does; ``None`` otherwise (``Mary-John``,
    ``Ann-Smith``). A new-user trial found ``Ref: Mary-Ann Carter`` read as nothing: before a
    surname that tells no race (``Carter``), only whole names were looked up.
    """
    parts = first.split("-")
    if not 2 <= len(parts) <= 3:
        return None
    data = name_shares()
    genders: set[str] = set()
    percent = 100
    for part in parts:
        p = fold(part)
        if len(p) < 2 or p in book.words or p in book.excluded:
            return None
        listed = book.first.get(part.title())
        if listed is not None and listed.gender is not None:
            genders.add(listed.gender)
            continue
        share = data.first_gender.get(p)
        if share is None or share.percent < GENDER_SHARE:
            return None
        genders.add(share.group)
        percent = min(percent, share.percent)
    if len(genders) != 1:
        return None
    return Share(genders.pop(), percent), None


def first_name_info(first: str, book: NameBook) -> NameInfo | None:
    """What a first name standing alone tells, or ``None`` when it tells nothing.

    Read only where the context says the word is a first name: the value of a name field
    (``{"first_name": "Mei"}``, :mod:`~biasbreaker.probe.name_fields`) or a capitalised word
    after a person label (``Applicant Mei, income 85k``). Gender: the shipped lists' tag, else
    nomquamgender at :data:`GENDER_SHARE` % or more. Race: the shipped lists' tag, else
    Tzioumis at :data:`RACE_SHARE` % or more (``multiple`` is no group). A term of an axis
    (``Christian``) or a word shorter than two letters is no first name.

    Args:
        first: The word as written (``"Mei"``, ``"Siobhan"``, ``"O'Neil"``).
        book: The name book (its lists and its excluded terms).

    Returns:
        The gender and race it tells (either may be ``None``, not both), or ``None``.
    """
    f = fold(first)
    if len(f) < 2 or f in book.excluded:
        return None
    listed = book.first.get(first) or book.first.get(first.title())
    data = name_shares()
    gender = listed.gender if listed is not None else None
    if gender is None:
        share = data.first_gender.get(f)
        if share is not None and share.percent >= GENDER_SHARE:
            gender = share.group
    race = listed.race if listed is not None else None
    if race is None:
        share = data.first_race.get(f)
        if share is not None and share.percent >= RACE_SHARE and share.group != "multiple":
            race = share.group
    if gender is None and race is None:
        return None
    return NameInfo(gender, race)
