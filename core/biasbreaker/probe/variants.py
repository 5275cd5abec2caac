"""Choosing variants: which permutations of an axis's groups to try, and which names to draw.

A variant permutes the groups of one axis (:func:`shift_permutation`, one position of the
covering rotation); it is feasible when every mention of a moved group has a counterpart in
its target group (:func:`feasible`); the names it swaps are drawn by :func:`name_map` from
the name book.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from biasbreaker.probe.context import norm
from biasbreaker.probe.mapping import Detection
from biasbreaker.probe.mentions import MentionFinder
from biasbreaker.probe.name_context import WORD_NAMES
from biasbreaker.probe.names import (
    NATIVE,
    NameBook,
    NameInfo,
    ProductNames,
    first_name_info,
    fold,
    name_shares,
)
from biasbreaker.probe.payloads import leaves
from biasbreaker.probe.surnames import key_surname
from biasbreaker.probe.terms import Axis

__all__ = [
    "feasible",
    "name_map",
    "native_pool",
    "ordered_pairs",
    "rotation_key",
    "shift_permutation",
    "surname_pool",
]


def _complete(sigma: Mapping[str, str]) -> dict[str, str]:
    """Extend an injective map to a permutation; drop fixed points."""
    pi = dict(sigma)
    image_only = [t for t in sigma.values() if t not in sigma]
    domain_only = [g for g in sigma if g not in sigma.values()]
    for a, b in zip(image_only, domain_only, strict=False):
        pi[a] = b
    return {a: b for a, b in pi.items() if a != b}


def rotation_key(axis: str, groups: set[str] | frozenset[str]) -> str:
    """The covering rotation's state key for an input naming ``groups`` of ``axis``.

    ``"<axis>/<groups>"``, the groups sorted and joined by ``+`` (``"religion/christian"``,
    ``"race/black+white"``). The rotation is kept per mentioned group (per set of groups)
    rather than per axis, so the position an input's groups read was advanced only by earlier
    inputs naming the same groups: the ``N − 1`` shifts of one key compare those groups with
    every other group of the axis whatever other groups the inputs between name
    (docs/detection.md, "Every group covered"; a rotation per axis fell into a cycle with a
    thread whose inputs named six religions in turn).

    Args:
        axis: The axis name.
        groups: The groups of ``axis`` the input names (one or more).
    """
    return f"{axis}/{'+'.join(sorted(groups))}"


def shift_permutation(order: Sequence[str], present: set[str], shift: int) -> dict[str, str]:
    """The permutation moving each mentioned group ``shift`` places along ``order``.

    Each group of ``present`` goes to ``order[(i + shift) mod N]`` (``i`` its place); the map
    is completed to a permutation of the axis (:func:`_complete`) so it inverts. For one
    mentioned group it is the swap of that group and its target.

    Args:
        order: The axis's groups in rotation order (``N`` of them).
        present: The mentioned groups (a subset of ``order``).
        shift: Places to move, in ``1…N−1``.

    Returns:
        ``{from: to}`` without fixed points.
    """
    n = len(order)
    place = {g: i for i, g in enumerate(order)}
    return _complete({g: order[(place[g] + shift) % n] for g in order if g in present})


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


def _name_pool(
    finder: MentionFinder, name: str, info: NameInfo, axis: str, target: str
) -> Sequence[str]:
    """The names a swap of ``name`` to group ``target`` of ``axis`` draws from (sorted).

    Gender: first names of the target gender and the name's race (else of unknown race, else
    of any race), the surname kept. Race, for a full name (a listed full name or a person's
    first name and surname): full names of the target race and the name's gender; when the
    first name tells no gender, a first name of the target race that tells none either
    (:meth:`~biasbreaker.probe.names.NameShares.ambiguous_first_names`) with a listed surname
    of that race. Race to native-american, for a full name: a given name of
    :meth:`~biasbreaker.probe.names.NameShares.native_given` (same gender, or none) with a
    surname of :attr:`~biasbreaker.probe.names.NameShares.native_surnames` (no shipped list
    has the group). Race, for a lone first name: first names of the target race and gender
    (none for native-american, which no first name tells).
    """
    book = finder.terms.names
    if book is None:
        return ()
    if key_surname(name) is not None:
        return surname_pool(finder, target) if axis == "race" else ()
    if axis == "gender":
        pool = book.first_pool(target, info.race) or book.first_pool(target, None)
        if not pool and info.race is None:
            pool = tuple(sorted(n for n, i in book.first.items() if i.gender == target))
        return pool
    if " " in name and target == NATIVE:
        return native_pool(finder, info.gender)
    if " " in name:
        if info.gender is not None:
            return book.full_pool(info.gender, target)
        lasts = sorted(n for n, r in book.last.items() if r == target)
        firsts = name_shares().ambiguous_first_names(target)
        return tuple(f"{first} {last}" for first in firsts for last in lasts)
    if info.gender is None:
        return ()
    return book.first_pool(info.gender, target)


_NATIVE_POOLS: dict[tuple[int, str | None], tuple[NameBook, ProductNames]] = {}
""":func:`native_pool` per name book (by identity, the book kept beside it) and gender."""


def native_pool(finder: MentionFinder, gender: str | None) -> Sequence[str]:
    """Full names of the native-american group for a person of ``gender``, each part readable.

    Every given name of :meth:`~biasbreaker.probe.names.NameShares.native_given` with every
    surname of :attr:`~biasbreaker.probe.names.NameShares.native_surnames`, sorted by given
    name then surname (:class:`~biasbreaker.probe.names.ProductNames`), leaving out a word the
    finder would not read as part of a name (a term of an axis, ``India``; an English word of
    ``names.json``'s ``exclude`` list or of :data:`WORD_NAMES`) and a given name the finder
    reads with another gender (``Dominique``, tagged male by the shipped lists, is no name
    that tells no gender). Built once per name book and gender.

    Args:
        finder: The finder whose name book and axis terms apply.
        gender: ``"female"``, ``"male"`` or ``None`` (a first name that tells no gender).
    """
    book = finder.terms.names
    assert book is not None
    cached = _NATIVE_POOLS.get((id(book), gender))
    if cached is not None and cached[0] is book:
        return cached[1]
    shares = name_shares()
    banned = book.excluded | book.words | WORD_NAMES

    def reads_as(name: str) -> bool:
        info = first_name_info(name, book)  # None: tells neither gender nor race
        return (info.gender if info is not None else None) == gender

    firsts = [n for n in shares.native_given(gender) if fold(n) not in banned and reads_as(n)]
    lasts = [n for n in shares.native_surnames if fold(n) not in banned]
    pool = ProductNames(firsts, lasts)
    _NATIVE_POOLS[(id(book), gender)] = (book, pool)
    return pool


def surname_pool(finder: MentionFinder, race: str) -> Sequence[str]:
    """Surnames of group ``race`` a person named by a surname alone is given (sorted).

    The shipped lists' surnames tagged ``race``; for native-american, which no shipped list
    covers, the surnames of :func:`native_pool` (the census surnames telling the group, less
    English words). A race variant of ``Mr. Yazzie`` draws ``Mr. Nguyen`` or ``Mr. Schwartz``.
    """
    book = finder.terms.names
    assert book is not None
    if race == NATIVE:
        banned = book.excluded | book.words | WORD_NAMES
        return tuple(n for n in name_shares().native_surnames if fold(n) not in banned)
    return tuple(sorted(n for n, r in book.last.items() if r == race))


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
            key = det.name or finder.name_key(det.surface)
            info = finder.name_info(key) if key else None
            if book is None or info is None or key is None:
                continue
            if not _name_pool(finder, key, info, axis.name, pi[g]):
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
    reversed_forms: dict[str, set[str]] = {}  # "Wei Zhang" -> {"Zhang Wei"}: surname first
    for det in detections:
        if det.kind == "name" and det.axis == axis and det.groups[0] in pi:
            key = det.name or finder.name_key(det.surface)
            if key is not None:
                seen.setdefault(key, None)
                written = det.surface.split()
                first, _, last = key.partition(" ")
                if len(written) > 1 and written[0] == last != first == written[-1]:
                    reversed_forms.setdefault(key, set()).add(det.surface)
    pairs: list[tuple[str, str]] = []
    used: set[str] = set()
    for name in seen:
        info = finder.name_info(name)
        if info is None:
            continue
        first, _, last = name.partition(" ")
        group = info.gender if axis == "gender" else info.race
        assert group is not None
        pool = _name_pool(finder, name, info, axis, pi[group])
        new = _pick(pool, taken | used, rng)
        if new is None:
            continue
        used.update(w.lower() for w in (new, *new.split()))
        surname = key_surname(name)
        if surname is not None:  # a surname alone ("Mr. Yazzie"): a surname for it
            pairs.append((surname, new))
            continue
        if " " not in new:  # a first name: the surname stays
            if last:
                pairs.append((name, f"{new} {last}"))
            pairs.append((first, new))
            continue
        # a whole name for a whole name: full name, first name and surname (later mentions)
        new_first, _, new_last = new.partition(" ")
        # a name written surname first without a comma ("Zhang Wei", "Nguyen Van An")
        # becomes the new name whole, in its own order ("Jamal Washington"), middle name too
        pairs.extend((form, new) for form in sorted(reversed_forms.get(name, ())))
        pairs.append((name, new))
        pairs.append((first, new_first))
        if last:
            pairs.append((last, new_last))
    # One source, one target: a word two names share (one's surname, the other's first name)
    # keeps its first mapping, and no target is given to two sources, so the map inverts.
    unique: dict[str, str] = {}
    targets: set[str] = set()
    for src, dst in pairs:
        if src not in unique and dst not in targets:
            unique[src] = dst
            targets.add(dst)
    return tuple(unique.items())
