"""Name data: first and full names tagged by gender and race, and the shipped name book.

The lists and their sources are named in ``biasbreaker/data/terms/names.json`` (sources and
licences in that folder's ``SOURCE.md``).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from biasbreaker.errors import ConfigError

__all__ = ["NameBook", "NameInfo", "packaged_names"]


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
    """

    first: Mapping[str, NameInfo]
    full: Mapping[str, NameInfo]
    last: Mapping[str, str | None]
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
    return NameBook(first=first, full=full, last=last)
