"""The compiled patterns of a mention finder and the hits they give.

:func:`compile_patterns` builds two regexes from a term set's axes and name book (tries of
every surface, longest first, :func:`literal_regex` one of given literals);
:func:`non_overlapping` keeps the longest hit at each place.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from biasbreaker.probe.context import norm
from biasbreaker.probe.terms import Axis, NameBook

__all__ = ["Compiled", "Hit", "compile_patterns", "literal_regex", "non_overlapping"]


@dataclass(frozen=True, slots=True)
class Hit:
    """One mention in one string: span, surface, kind, axis and groups (names: the book key)."""

    start: int
    end: int
    surface: str
    kind: Literal["term", "name", "age"]
    axis: str
    groups: tuple[str, ...]
    name: str = ""


@dataclass
class Compiled:
    """The compiled patterns of a finder."""

    terms: re.Pattern[str] | None
    names: re.Pattern[str] | None
    axis_of: dict[str, Axis]
    name_key: dict[str, str] = field(default_factory=dict)


def _alternation(surfaces: Sequence[str]) -> str:
    """A regex matching any of ``surfaces`` (lower-cased, single-spaced), built as a trie.

    A trie-shaped pattern lets ``re`` reject a position after one character instead of trying
    thousands of alternatives; the greedy optional tails make the longest surface win.
    A space matches any run of whitespace.
    """
    trie: dict[str, Any] = {}
    for surface in surfaces:
        node = trie
        for ch in surface:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        ends = "" in node
        alts = [
            (r"\s+" if ch == " " else re.escape(ch)) + build(child)
            for ch, child in sorted(node.items())
            if ch != ""
        ]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if ends:
            return "(?:" + body + ")?" if len(alts) > 1 or len(body) > 1 else body + "?"
        return body

    return build(trie)


def compile_patterns(axes: Sequence[Axis], book: NameBook | None) -> Compiled:
    """The term pattern of ``axes`` and, when gender or race is among them, the book's names."""
    axis_of: dict[str, Axis] = {}
    for axis in axes:
        for s in axis.surfaces():
            axis_of[s] = axis
    terms = None
    if axis_of:
        terms = re.compile(
            r"(?<![\w-])(?:" + _alternation(list(axis_of)) + r")(?![\w-])", re.IGNORECASE
        )
    names = None
    name_key: dict[str, str] = {}
    axis_names = {a.name for a in axes}
    if book is not None and axis_names & {"gender", "race"}:
        for n in list(book.full) + list(book.first):
            name_key.setdefault(norm(n), n)
        names = re.compile(
            r"(?<![\w'’-])(?:" + _alternation(list(name_key)) + r")(?![\w-])", re.IGNORECASE
        )
    return Compiled(terms=terms, names=names, axis_of=axis_of, name_key=name_key)


def literal_regex(literals: Sequence[str]) -> re.Pattern[str] | None:
    """A whole-word, case-insensitive regex of ``literals`` (``None`` when there are none)."""
    if not literals:
        return None
    return re.compile(
        r"(?<![\w'’-])(?:" + _alternation(sorted({norm(x) for x in literals})) + r")(?![\w-])",
        re.IGNORECASE,
    )


def non_overlapping(hits: Sequence[Hit]) -> list[Hit]:
    """The hits left to right, the longest first at one start, dropping any that overlap."""
    ordered = sorted(hits, key=lambda h: (h.start, -(h.end - h.start)))
    out: list[Hit] = []
    end = -1
    for h in ordered:
        if h.start >= end:
            out.append(h)
            end = h.end
    return out
