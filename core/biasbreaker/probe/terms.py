"""Demographic term lists: the data the counterfactual generator swaps (names: ``names.py``).

A *term file* is a JSON document describing one axis (gender, race, age, …): its groups and
aligned *rows* of surface forms, one per group. Swapping group ``g`` for group ``h`` replaces
``row[g]`` by ``row[h]``. The shipped files live in ``biasbreaker/data/terms/`` (their sources
and licences are in that folder's ``SOURCE.md``); users add their own with
:meth:`TermSet.load` (``extra_files`` or ``inline`` rows), e.g. from the ``[probe]``
configuration.

Term-file schema (every key but ``axis``, ``groups`` and ``rows`` is optional)::

    {
      "axis": "religion",                         # lower-kebab axis name
      "groups": ["christian", "muslim", ...],     # lower-kebab group names
      "neutral_group": "neutral",                 # a row key holding the group-neutral form
      "needs_person_word": ["white", ...],        # forms that count only before a person word
      "predicative": ["straight", ...],           # ... or after a copula ("she is straight")
      "numeric_age": {"young_max": 39, "old_min": 61, "mirror_sum": 100},
      "source": "...", "licence": "...",
      "languages": ["fr"],                        # ISO 639-1 codes its rows cover
      "rows": [
        {"christian": "Christian", "muslim": "Muslim", ..., "pos": "prenominal"},
        {"christian": "church", "muslim": "mosque", ..., "atheist": null}
      ]
    }

A row maps each group to a surface form or ``null`` (no counterpart: a variant that needs one
is not generated). ``pos`` is ``"prenominal"`` (the form stands before a noun: *his* car,
*Chinese* food) or ``"standalone"`` (it does not: *him*, *hers*, the *Chinese*); when one
surface has rows of both kinds, the word after it decides. ``case_sensitive: true`` makes the
row's forms match only when they start with a capital letter (``Mr``, ``Miss``).
``languages`` declares the languages the file's rows are in (a file without it is English,
as the shipped lists are: :data:`SHIPPED_LANGUAGES`), and ``[probe] languages`` may list only
languages every probed axis has rows in (:attr:`TermSet.languages`). A person-words file may
declare it too; it is checked but covers no axis.
A surface form shared by several groups of one axis (``church``) is swapped only when exactly
one of its groups is mentioned elsewhere; it never makes a text "applicable" by itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from biasbreaker.errors import ConfigError
from biasbreaker.probe.names import NameBook, NameInfo, packaged_names

__all__ = [
    "DEFAULT_AXES",
    "REFERENCE_YEAR",
    "SHIPPED_LANGUAGES",
    "Axis",
    "NameBook",
    "NameInfo",
    "NumericAge",
    "Pos",
    "TermEntry",
    "TermRow",
    "TermSet",
]

Pos = Literal["any", "prenominal", "standalone"]
"""Where a row's forms stand: before a noun, alone, or either."""

DEFAULT_AXES: tuple[str, ...] = (
    "gender",
    "race",
    "age",
    "religion",
    "sexual-orientation",
    "disability",
    "nationality",
)
"""The axes shipped with biasbreaker, in the order variants are drawn from them."""

_AXIS_FILES: dict[str, str] = {
    "gender": "gender.json",
    "race": "race.json",
    "age": "age.json",
    "religion": "religion.json",
    "sexual-orientation": "sexual_orientation.json",
    "disability": "disability.json",
    "nationality": "nationality.json",
}
_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
_ROW_META = frozenset({"pos", "case_sensitive"})


REFERENCE_YEAR = 2025
"""The year a birth year is read against when a term file gives no ``reference_year``."""

SHIPPED_LANGUAGES: frozenset[str] = frozenset({"en"})
"""The languages of the shipped term, person-word and name lists (ISO 639-1)."""


@dataclass(frozen=True, slots=True)
class NumericAge:
    """The numeric-age rule of the age axis: ``"22-year-old"`` ↔ ``"78-year-old"``.

    An age ``n <= young_max`` belongs to the young group, ``n >= old_min`` to the old group;
    a swap maps ``n`` to ``mirror_sum - n`` (an involution, so mapping back is the same rule).
    Ages in between are not a protected mention. A birth year ``y`` ("born in 1958") is the
    age ``reference_year - y`` and swaps to the year of the mirrored age,
    ``2 * reference_year - mirror_sum - y`` (an involution too). The forms read are
    :data:`biasbreaker.probe.ages.AGE_FORMS`.

    Args:
        young_max: Largest age (years) counted as young.
        old_min: Smallest age (years) counted as old; greater than ``young_max``.
        mirror_sum: ``n`` is swapped to ``mirror_sum - n``.
        reference_year: The calendar year birth years are read against (fixed, so results
            do not change with the clock; default :data:`REFERENCE_YEAR`).
    """

    young_max: int
    old_min: int
    mirror_sum: int
    reference_year: int = REFERENCE_YEAR


@dataclass(frozen=True, slots=True)
class TermRow:
    """One aligned row of an axis: the same word for each group.

    Args:
        forms: ``(group, surface or None)`` for every group of the axis, in axis order.
        pos: Whether the forms stand before a noun, alone, or either.
        case_sensitive: Whether a form matches only when it starts with a capital letter.
        neutral: The group-neutral form (``"they"`` for ``he``/``she``), or ``None``.
    """

    forms: tuple[tuple[str, str | None], ...]
    pos: Pos = "any"
    case_sensitive: bool = False
    neutral: str | None = None

    def form(self, group: str) -> str | None:
        """Return this row's surface form for ``group`` (``None`` if it has none)."""
        for g, surface in self.forms:
            if g == group:
                return surface
        return None


@dataclass(frozen=True, slots=True)
class TermEntry:
    """Where a lower-cased surface form occurs: axis, group and row index."""

    axis: str
    group: str
    row: int


@dataclass(frozen=True)
class Axis:
    """One demographic axis: its groups and aligned term rows.

    Args:
        name: Axis name, lower-kebab (``"sexual-orientation"``).
        groups: Group names, lower-kebab, at least two.
        rows: The aligned term rows.
        needs_person_word: Lower-cased forms that count only before a person word.
        predicative: Lower-cased forms of ``needs_person_word`` that also count after a copula.
        numeric_age: The numeric-age rule (age axis only), or ``None``.
        source: Where the lists come from.
        licence: Their licence.
    """

    name: str
    groups: tuple[str, ...]
    rows: tuple[TermRow, ...]
    needs_person_word: frozenset[str] = frozenset()
    predicative: frozenset[str] = frozenset()
    numeric_age: NumericAge | None = None
    source: str = ""
    licence: str = ""
    index: Mapping[str, tuple[TermEntry, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, list[TermEntry]] = {}
        for i, row in enumerate(self.rows):
            for group, surface in row.forms:
                if surface is None:
                    continue
                key = _norm(surface)
                entry = TermEntry(self.name, group, i)
                bucket = index.setdefault(key, [])
                if entry not in bucket:
                    bucket.append(entry)
        object.__setattr__(self, "index", {k: tuple(v) for k, v in index.items()})

    def surfaces(self) -> frozenset[str]:
        """Every lower-cased, whitespace-normalised surface form of this axis."""
        return frozenset(self.index)


@dataclass(frozen=True)
class TermSet:
    """The axes, person words and names a counterfactual generator works with.

    Build it with :meth:`default` (the shipped lists) or :meth:`load` (a subset of axes, plus
    term files and inline rows from the configuration). Loading checks that no surface form
    belongs to two axes.

    Args:
        axes: The axes, in the order variants are drawn from them.
        person_words: Lower-cased person nouns (singular and plural) that license
            context-dependent terms such as ``black`` or ``old``.
        names: The name book, or ``None`` to swap no names.
        languages: ISO 639-1 codes of the languages *every* axis has terms in: the shipped
            lists' (:data:`SHIPPED_LANGUAGES`) and those term files declare (``"languages"``;
            a file that declares none is English). A French gender file alone does not cover
            French while religion is an axis: a French input naming only a religion would
            find no group and pass as *not applicable*.
        axis_languages: Axis name → the languages its rows are in (for messages).
    """

    axes: tuple[Axis, ...]
    person_words: frozenset[str]
    names: NameBook | None = None
    languages: frozenset[str] = frozenset({"en"})
    axis_languages: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def default(cls) -> TermSet:
        """The shipped lists for every axis in :data:`DEFAULT_AXES`, with names."""
        return _default_termset()

    @classmethod
    def load(
        cls,
        *,
        axes: Sequence[str] | None = None,
        extra_files: Sequence[str | Path] = (),
        inline: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        groups: Mapping[str, Sequence[str]] | None = None,
        names: bool = True,
    ) -> TermSet:
        """Load the shipped lists, restricted and extended.

        Args:
            axes: Axis names to keep (default: all shipped axes plus those the extra files
                add), in the order variants are drawn from them.
            extra_files: Paths of term files (schema in the module docstring). A file for an
                existing axis appends rows (its groups must be the axis's groups); a file for
                a new axis adds it. A file with ``"kind": "person_words"`` and a ``words`` list
                adds person words.
            inline: Axis name → extra rows, each a mapping group → surface (and optionally
                ``pos``/``case_sensitive``), e.g. ``{"gender": [{"male": "knight",
                "female": "dame"}]}``.
            groups: Axis name → the only groups to use (at least two), e.g.
                ``{"religion": ["christian", "muslim", "jewish"]}``; the other groups' words
                are then neither detected nor written.
            names: Whether to swap first and full names (gender and race axes).

        Returns:
            The term set.

        Raises:
            ConfigError: A file is missing or malformed, an axis name is unknown, a row names
                an unknown group, or a surface form belongs to two axes. The message names the
                file (or ``inline``), the field and the fix.
        """
        loaded: dict[str, Axis] = {}
        for axis_name, filename in _AXIS_FILES.items():
            loaded[axis_name] = _parse_axis(
                _read_packaged_json(filename), f"biasbreaker:{filename}"
            )
        person = set(_packaged_person_words())
        spoken = {name: set(SHIPPED_LANGUAGES) for name in loaded}
        for path in extra_files:
            doc = _read_user_json(Path(path))
            where = str(path)
            declared = _languages_from(doc, where) or ["en"]
            if doc.get("kind") == "person_words":
                person.update(_person_words_from(doc, where))
                continue
            extra = _parse_axis(doc, where)
            loaded[extra.name] = _merge_axis(loaded.get(extra.name), extra, where)
            spoken.setdefault(extra.name, set()).update(declared)
        for axis_name, rows in (inline or {}).items():
            base = loaded.get(axis_name)
            if base is None:
                raise ConfigError(
                    f"inline term rows name axis {axis_name!r}, which is not loaded; known axes: "
                    f"{', '.join(sorted(loaded))}. Add a term file for a new axis instead."
                )
            where = f"inline rows for axis {axis_name!r}"
            parsed = tuple(
                _parse_row(dict(row), base.groups, None, f"{where}, row {i}")
                for i, row in enumerate(rows)
            )
            loaded[axis_name] = _merge_axis(
                base,
                Axis(name=axis_name, groups=base.groups, rows=parsed, source="configuration"),
                where,
            )
        for axis_name, keep in (groups or {}).items():
            base = loaded.get(axis_name)
            if base is None:
                raise ConfigError(
                    f"probe groups name axis {axis_name!r}, which is not loaded; known axes: "
                    f"{', '.join(sorted(loaded))}"
                )
            loaded[axis_name] = _restrict(base, list(keep))
        order = list(axes) if axes is not None else list(loaded)
        chosen: list[Axis] = []
        for axis_name in order:
            if axis_name not in loaded:
                raise ConfigError(
                    f"probe axis {axis_name!r} is not known; known axes: "
                    f"{', '.join(sorted(loaded))}. Check the spelling or add a term file for it."
                )
            chosen.append(loaded[axis_name])
        _check_disjoint(chosen)
        book: NameBook | None = None
        if names and any(a.name in ("gender", "race") for a in chosen):
            all_surfaces = [s for a in chosen for s in a.surfaces()]
            book = packaged_names().without(all_surfaces)
        by_axis = {a.name: frozenset(spoken.get(a.name, {"en"})) for a in chosen}
        return cls(
            axes=tuple(chosen),
            person_words=frozenset(_with_plurals(person)),
            names=book,
            languages=frozenset.intersection(*by_axis.values()),
            axis_languages=by_axis,
        )

    def axis(self, name: str) -> Axis:
        """Return the axis called ``name``.

        Raises:
            KeyError: No such axis is loaded (the message lists the loaded ones).
        """
        for a in self.axes:
            if a.name == name:
                return a
        raise KeyError(f"axis {name!r} is not loaded; loaded: {', '.join(self.axis_names)}")

    @property
    def axis_names(self) -> tuple[str, ...]:
        """The names of the loaded axes, in order."""
        return tuple(a.name for a in self.axes)


def _norm(surface: str) -> str:
    return " ".join(surface.lower().split())


def _default_termset() -> TermSet:
    cached = _CACHE.get("default")
    if cached is None:
        cached = TermSet.load()
        _CACHE["default"] = cached
    return cached


_CACHE: dict[str, TermSet] = {}


def _data_dir() -> Any:
    return resources.files("biasbreaker").joinpath("data")


def _read_packaged_json(filename: str) -> dict[str, Any]:
    text = _data_dir().joinpath("terms", filename).read_text(encoding="utf-8")
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ConfigError(f"biasbreaker:{filename} must hold a JSON object")
    return doc


def _read_user_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"term file {str(path)!r} cannot be read ({exc.strerror}); check probe.term_files"
        ) from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"term file {str(path)!r} is not valid JSON at line {exc.lineno}, column "
            f"{exc.colno}: {exc.msg}"
        ) from exc
    if not isinstance(doc, dict):
        raise ConfigError(
            f"term file {str(path)!r} must hold a JSON object, got {type(doc).__name__}"
        )
    return doc


def _parse_axis(doc: Mapping[str, Any], where: str) -> Axis:
    name = doc.get("axis")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"{where}: field 'axis' = {name!r} must be a lower-kebab name such as 'religion'"
        )
    groups = doc.get("groups")
    if (
        not isinstance(groups, list)
        or len(groups) < 2
        or not all(isinstance(g, str) and _NAME_RE.match(g) for g in groups)
        or len(set(groups)) != len(groups)
    ):
        raise ConfigError(
            f"{where}: field 'groups' = {groups!r} must list at least two distinct lower-kebab "
            "group names"
        )
    neutral = doc.get("neutral_group")
    if neutral is not None and (not isinstance(neutral, str) or neutral in groups):
        raise ConfigError(
            f"{where}: field 'neutral_group' = {neutral!r} must be a row key that is not a group"
        )
    rows_doc = doc.get("rows")
    if not isinstance(rows_doc, list) or not rows_doc:
        raise ConfigError(f"{where}: field 'rows' must be a non-empty list of row objects")
    rows = tuple(
        _parse_row(row, tuple(groups), neutral, f"{where}, rows[{i}]")
        for i, row in enumerate(rows_doc)
    )
    needs = _str_list(doc.get("needs_person_word", []), where, "needs_person_word")
    pred = _str_list(doc.get("predicative", []), where, "predicative")
    if not set(pred) <= set(needs):
        raise ConfigError(
            f"{where}: field 'predicative' lists {sorted(set(pred) - set(needs))}, which are not "
            "in 'needs_person_word'; list them there too"
        )
    age = doc.get("numeric_age")
    numeric: NumericAge | None = None
    if age is not None:
        try:
            numeric = NumericAge(
                young_max=int(age["young_max"]),
                old_min=int(age["old_min"]),
                mirror_sum=int(age["mirror_sum"]),
                reference_year=int(age.get("reference_year", REFERENCE_YEAR)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"{where}: field 'numeric_age' = {age!r} needs integer young_max, old_min and "
                "mirror_sum (and, optionally, an integer reference_year)"
            ) from exc
        if numeric.young_max >= numeric.old_min or len(groups) != 2:
            raise ConfigError(
                f"{where}: field 'numeric_age' needs young_max < old_min and exactly two groups "
                "(young first, old second)"
            )
    return Axis(
        name=name,
        groups=tuple(groups),
        rows=rows,
        needs_person_word=frozenset(_norm(s) for s in needs),
        predicative=frozenset(_norm(s) for s in pred),
        numeric_age=numeric,
        source=str(doc.get("source", "")),
        licence=str(doc.get("licence", "")),
    )


def _str_list(value: Any, where: str, field_name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: field {field_name!r} must be a list of strings")
    return list(value)


def _parse_row(row: Any, groups: tuple[str, ...], neutral: str | None, where: str) -> TermRow:
    if not isinstance(row, dict):
        raise ConfigError(f"{where}: a row must be an object mapping group to surface form")
    allowed = set(groups) | _ROW_META | ({neutral} if neutral else set())
    unknown = sorted(set(row) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {unknown}; allowed: groups {list(groups)}"
            + (f", neutral group {neutral!r}" if neutral else "")
            + ", 'pos', 'case_sensitive'"
        )
    forms: list[tuple[str, str | None]] = []
    for g in groups:
        surface = row.get(g)
        if surface is not None and (not isinstance(surface, str) or not surface.strip()):
            raise ConfigError(f"{where}: {g!r} = {surface!r} must be a non-empty string or null")
        forms.append((g, surface.strip() if isinstance(surface, str) else None))
    if sum(1 for _, s in forms if s is not None) < 2:
        raise ConfigError(f"{where}: a row needs surface forms for at least two groups")
    pos = row.get("pos", "any")
    if pos not in ("any", "prenominal", "standalone"):
        raise ConfigError(f"{where}: 'pos' = {pos!r} must be 'prenominal', 'standalone' or 'any'")
    case_sensitive = row.get("case_sensitive", False)
    if not isinstance(case_sensitive, bool):
        raise ConfigError(f"{where}: 'case_sensitive' = {case_sensitive!r} must be true or false")
    neutral_form = row.get(neutral) if neutral else None
    if neutral_form is not None and not isinstance(neutral_form, str):
        raise ConfigError(f"{where}: {neutral!r} = {neutral_form!r} must be a string")
    return TermRow(forms=tuple(forms), pos=pos, case_sensitive=case_sensitive, neutral=neutral_form)


def _merge_axis(base: Axis | None, extra: Axis, where: str) -> Axis:
    if base is None:
        return extra
    if not set(extra.groups) <= set(base.groups):
        raise ConfigError(
            f"{where}: groups {sorted(set(extra.groups) - set(base.groups))} are not groups of "
            f"axis {base.name!r} ({', '.join(base.groups)}); use the axis's group names"
        )
    rows = tuple(
        TermRow(
            forms=tuple((g, row.form(g)) for g in base.groups),
            pos=row.pos,
            case_sensitive=row.case_sensitive,
            neutral=row.neutral,
        )
        for row in extra.rows
    )
    return Axis(
        name=base.name,
        groups=base.groups,
        rows=base.rows + rows,
        needs_person_word=base.needs_person_word | extra.needs_person_word,
        predicative=base.predicative | extra.predicative,
        numeric_age=base.numeric_age or extra.numeric_age,
        source=base.source + (f"; {extra.source}" if extra.source else ""),
        licence=base.licence,
    )


def _restrict(axis: Axis, keep: list[str]) -> Axis:
    unknown = [g for g in keep if g not in axis.groups]
    if unknown or len(set(keep)) < 2:
        raise ConfigError(
            f"probe groups for axis {axis.name!r} = {keep!r}: give at least two of its groups "
            f"({', '.join(axis.groups)})" + (f"; unknown: {unknown}" if unknown else "")
        )
    kept = tuple(g for g in axis.groups if g in keep)
    rows = []
    for row in axis.rows:
        forms = tuple((g, row.form(g)) for g in kept)
        if sum(1 for _, f in forms if f is not None) >= 2:
            rows.append(
                TermRow(
                    forms=forms, pos=row.pos, case_sensitive=row.case_sensitive, neutral=row.neutral
                )
            )
    if not rows:
        raise ConfigError(f"probe groups for axis {axis.name!r} = {keep!r} leave no term rows")
    numeric = axis.numeric_age if kept == axis.groups else None
    return Axis(
        name=axis.name,
        groups=kept,
        rows=tuple(rows),
        needs_person_word=axis.needs_person_word,
        predicative=axis.predicative,
        numeric_age=numeric,
        source=axis.source,
        licence=axis.licence,
    )


def _check_disjoint(axes: Sequence[Axis]) -> None:
    owner: dict[str, str] = {}
    for a in axes:
        for s in a.surfaces():
            other = owner.get(s)
            if other is not None and other != a.name:
                raise ConfigError(
                    f"the surface form {s!r} belongs to axes {other!r} and {a.name!r}; a form may "
                    "belong to one axis only — remove it from one of the term lists"
                )
            owner[s] = a.name


def _languages_from(doc: Mapping[str, Any], where: str) -> list[str]:
    """A term file's ``languages``: lower-cased ISO 639-1 codes (none when absent).

    Raises:
        ConfigError: ``languages`` is not a list of two-letter codes (names the file).
    """
    if "languages" not in doc:
        return []
    codes = _str_list(doc.get("languages"), where, "languages")
    bad = [c for c in codes if not (len(c) == 2 and c.isascii() and c.isalpha())]
    if bad:
        raise ConfigError(
            f'{where}: languages {bad!r} are not ISO 639-1 codes; write e.g. "languages": ["fr"]'
        )
    return [c.lower() for c in codes]


def _person_words_from(doc: Mapping[str, Any], where: str) -> list[str]:
    return [_norm(w) for w in _str_list(doc.get("words"), where, "words")]


def _packaged_person_words() -> list[str]:
    """LangFair's and our person nouns plus the BLS occupation heads (``occupations.json``)."""
    words = _person_words_from(_read_packaged_json("person_words.json"), "person_words.json")
    words += _person_words_from(_read_packaged_json("occupations.json"), "occupations.json")
    return words


def _with_plurals(words: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for w in words:
        out.add(w)
        if w.endswith("man"):
            out.add(w[:-3] + "men")
        elif w.endswith(("s", "x", "ch", "sh")):
            out.add(w + "es")
        elif w.endswith("y") and len(w) > 1 and w[-2] not in "aeiou":
            out.add(w[:-1] + "ies")
        else:
            out.add(w + "s")
    return out
