"""Choosing variants: which permutations of an axis's groups to try, and which names to draw.

A variant permutes the groups of one axis (:func:`candidate_permutations`); it is feasible
when every mention of a moved group has a counterpart in its target group
(:func:`feasible`); the names it swaps are drawn by :func:`name_map` from the name book.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from biasbreaker.probe.mapping import Detection
from biasbreaker.probe.mentions import MentionFinder, norm
from biasbreaker.probe.payloads import leaves
from biasbreaker.probe.terms import Axis

__all__ = [
    "candidate_permutations",
    "feasible",
    "name_map",
    "ordered_pairs",
]

_MAX_ENUMERATED = 5000


def _complete(sigma: Mapping[str, str]) -> dict[str, str]:
    """Extend an injective map to a permutation; drop fixed points."""
    pi = dict(sigma)
    image_only = [t for t in sigma.values() if t not in sigma]
    domain_only = [g for g in sigma if g not in sigma.values()]
    for a, b in zip(image_only, domain_only, strict=False):
        pi[a] = b
    return {a: b for a, b in pi.items() if a != b}


def candidate_permutations(
    groups: Sequence[str], present: set[str], rng: random.Random
) -> list[dict[str, str]]:
    """Every permutation moving some mentioned group, shuffled; sampled when too many."""
    sources = [g for g in groups if g in present]
    total = 1
    for i in range(len(sources)):
        total *= len(groups) - i
    seen: set[tuple[tuple[str, str], ...]] = set()
    out: list[dict[str, str]] = []

    def add(targets: Sequence[str]) -> None:
        pi = _complete(dict(zip(sources, targets, strict=True)))
        key = tuple(sorted(pi.items()))
        if pi and key not in seen:
            seen.add(key)
            out.append(pi)

    if total <= _MAX_ENUMERATED:
        for targets in itertools.permutations(groups, len(sources)):
            add(targets)
        rng.shuffle(out)
    else:
        for _ in range(_MAX_ENUMERATED):
            add(rng.sample(list(groups), len(sources)))
    return out


def ordered_pairs(axis: Axis, pi: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``pi`` as ``(from, to)`` pairs in the axis's group order."""
    return tuple((g, pi[g]) for g in axis.groups if g in pi)


def _pick(pool: Sequence[str], taken: set[str], rng: random.Random) -> str | None:
    """Draw a name none of whose words (first, last, or the whole) is already taken.

    Every part must be free, not only the first name: two people given one surname (or a
    surname already in the text) would make the variant impossible to map back.
    """
    if not pool:
        return None

    def free(name: str) -> bool:
        low = name.lower()
        return low not in taken and all(part not in taken for part in low.split())

    for _ in range(8):  # the pools are large and the taken set small: a few draws suffice
        name = rng.choice(pool)
        if free(name):
            return name
    candidates = [n for n in pool if free(n)]
    return rng.choice(candidates) if candidates else None


def feasible(
    finder: MentionFinder, axis: Axis, pi: Mapping[str, str], detections: Sequence[Detection]
) -> bool:
    """Whether every mention of a moved group has a counterpart in its target group."""
    book = finder.terms.names
    for det in detections:
        if det.axis != axis.name or len(det.groups) != 1 or det.groups[0] not in pi:
            continue
        g = det.groups[0]
        if det.kind == "name":
            key = finder.compiled.name_key.get(norm(det.surface))
            info = finder.name_info(key) if key else None
            if book is None or info is None:
                continue
            if axis.name == "gender":
                ok = bool(book.first_pool(pi[g], info.race) or book.first_pool(pi[g], None))
            elif key in book.full and info.gender is not None:
                ok = bool(book.full_pool(info.gender, pi[g]))
            else:
                ok = info.gender is not None and bool(book.first_pool(info.gender, pi[g]))
            if not ok:
                return False
            continue
        if det.kind != "term":
            continue
        entries = axis.index[norm(det.surface)]
        if not any(axis.rows[e.row].form(pi[g]) is not None for e in entries if e.group == g):
            return False
    return True


def name_map(
    finder: MentionFinder,
    payload: Any,
    detections: Sequence[Detection],
    axis: str,
    pi: Mapping[str, str],
    rng: random.Random,
) -> tuple[tuple[str, str], ...]:
    """The ``(original, replacement)`` names a variant of ``axis`` under ``pi`` swaps.

    One name maps to one name across the payload; a drawn name shares no word with the
    payload or with another drawn name (so the variant maps back).
    """
    book = finder.terms.names
    if book is None or axis not in ("gender", "race") or not pi:
        return ()
    taken = {w for _, text in leaves(payload) for w in re.findall(r"\w+", text.lower())}
    seen: dict[str, None] = {}
    for det in detections:
        if det.kind == "name" and det.axis == axis and det.groups[0] in pi:
            key = finder.compiled.name_key.get(norm(det.surface))
            if key is not None:
                seen.setdefault(key, None)
    pairs: list[tuple[str, str]] = []
    used: set[str] = set()
    for name in seen:
        info = book.full.get(name) or book.first.get(name)
        if info is None:
            continue
        is_full = name in book.full
        first, _, last = name.partition(" ")
        if axis == "gender":
            assert info.gender is not None
            pool = book.first_pool(pi[info.gender], info.race) or book.first_pool(
                pi[info.gender], None
            )
            new_first = _pick(pool, taken | used, rng)
            if new_first is None:
                continue
            used.add(new_first.lower())
            if is_full:
                pairs.append((name, f"{new_first} {last}"))
            pairs.append((first, new_first))
        else:
            assert info.race is not None
            if is_full:
                assert info.gender is not None
                pool = book.full_pool(info.gender, pi[info.race])
                new = _pick(pool, taken | used, rng)
                if new is None:
                    continue
                new_first, _, new_last = new.partition(" ")
                used.update((new.lower(), new_first.lower(), new_last.lower()))
                pairs.append((name, new))
                pairs.append((first, new_first))
                if book.last.get(last) == info.race:
                    pairs.append((last, new_last))
            elif info.gender is not None:
                pool = book.first_pool(info.gender, pi[info.race])
                new_first = _pick(pool, taken | used, rng)
                if new_first is None:
                    continue
                used.add(new_first.lower())
                pairs.append((first, new_first))
    unique: dict[str, str] = {}
    for src, dst in pairs:
        unique.setdefault(src, dst)
    return tuple(unique.items())
