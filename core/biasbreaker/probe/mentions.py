"""Finding protected mentions: terms (with their context rules), ages and names.

:class:`MentionFinder` compiles the term and name lists of a :class:`~biasbreaker.probe.terms.
TermSet` into two regexes (:mod:`biasbreaker.probe.patterns`) and reports each mention of the
configured axes as a :class:`~biasbreaker.probe.mapping.Detection`. The work is split by
concern: when a term counts (:mod:`biasbreaker.probe.term_context`), where a name stands
(:mod:`biasbreaker.probe.name_context`), what is read but held (:mod:`biasbreaker.probe.held`)
and the words around a mention (:mod:`biasbreaker.probe.context`); the rewriting that uses
them is :mod:`biasbreaker.probe.rewriting`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from biasbreaker.probe.ages import age_mentions, range_ends
from biasbreaker.probe.context import capitalised, norm
from biasbreaker.probe.held import UNSWAPPABLE, Held, HeldReader
from biasbreaker.probe.mapping import Detection
from biasbreaker.probe.name_context import NameReader, in_place_name
from biasbreaker.probe.name_fields import field_names
from biasbreaker.probe.names import PersonName, first_name_info, fold, person_name
from biasbreaker.probe.patterns import Hit, compile_patterns, non_overlapping
from biasbreaker.probe.payloads import Key, Path, leaves
from biasbreaker.probe.shared import shared_scan
from biasbreaker.probe.surnames import key_surname, surname_race
from biasbreaker.probe.term_context import TermReader
from biasbreaker.probe.terms import Axis, NameInfo, NumericAge, TermSet

__all__ = ["SCANNED", "SCANNED_CHARS", "MentionFinder"]


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
        self._terms = TermReader(terms, self.compiled)
        self._names = NameReader(terms)
        self._held = HeldReader(terms, self.axes, self.compiled, self._terms)
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
                whole = [d for d in at if " " in d.name and key_surname(d.name) is None]
                if at and (" " not in person.name or whole):
                    continue  # the text scan read a name there already
                # a first name or a surname the scan read alone is the field person's
                # ({"first_name": "Siobhan", "last_name": "O'Brien"}, {"first_name":
                # "Darlene", "last_name": "Yazzie"}): the person, first name and surname, wins
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
        """The mentions of the configured axes that no variant can swap.

        The words are :data:`~biasbreaker.probe.held.UNSWAPPABLE`'s.

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

        Returns:
            One :class:`~biasbreaker.probe.held.Held` per mention, in payload then text order
            (:meth:`~biasbreaker.probe.held.HeldReader.held` lists what is held).
        """
        texts = [
            (p, t, self.scan(t)) for p, t in leaves(payload) if not (p and isinstance(p[-1], Key))
        ]
        return self._held.held(texts)

    def _full_names(self) -> Mapping[str, NameInfo]:
        book = self.terms.names
        return book.full if book is not None else {}

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
                hit = self._terms.term_hit(text, m)
                if hit is not None:
                    hits.append(hit)
        hits.extend(self._terms.glued_hits(text))
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
        if comp.names is None:
            return ()
        hits: list[Hit] = []
        for m in comp.names.finditer(text):
            surface = m.group(0)
            if not capitalised(surface):
                continue
            key = comp.name_key.get(norm(surface))
            if key is not None and not in_place_name(text, m.start(), m.end()):
                hits.append(Hit(m.start(), m.end(), surface, "name", "", (), key))
        # after the book's hits: at one span (a listed full name) the book's reading wins
        people = self._names.person_hits(text) + self._names.surname_hits(text)
        hits.extend(people)
        hits.extend(self._names.labelled_first_names(text))
        surnames = {fold(h.name.split()[-1]) for h in people if " " in h.name}
        # a surname alone after a title is that person's surname, never a first name
        surnames |= {fold(h.surface) for h in people if key_surname(h.name) is not None}
        hits.extend(self._names.lone_first_names(text, surnames))
        return tuple(hits)


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
