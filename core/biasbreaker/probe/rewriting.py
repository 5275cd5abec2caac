"""Rewriting text: replace the mentions a mapping moves, keeping everything else byte for byte.

Each replacement takes the capitalisation of the word it replaces (:func:`match_case`), a
form is chosen by the word after it (:func:`~biasbreaker.probe.context.by_context`), and
``a``/``an`` before a replaced word is corrected (:func:`fix_article`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from biasbreaker.probe.ages import mirrored_age
from biasbreaker.probe.context import by_context, capitalised, norm
from biasbreaker.probe.mapping import (
    CounterfactualMapping,
    Detection,
    Substitution,
    Variant,
    present_groups,
)
from biasbreaker.probe.mentions import MentionFinder
from biasbreaker.probe.patterns import Hit, literal_regex, non_overlapping
from biasbreaker.probe.payloads import Path, rebuild
from biasbreaker.probe.records_owner import field_owner, record_persons
from biasbreaker.probe.residuals import pair_hits
from biasbreaker.probe.terms import Axis, TermSet

__all__ = [
    "MASK",
    "fix_article",
    "match_case",
    "neutral_form",
    "next_word",
    "replacement",
    "rewrite",
    "title_of",
]

_ARTICLE_BEFORE = re.compile(r"(?<![\w'’-])(an?)(\s+)$", re.IGNORECASE)

MASK = "[MASK]"
"""What :meth:`~biasbreaker.probe.CounterfactualGenerator.neutralise` writes for a mention
without a neutral form."""


def rewrite(
    finder: MentionFinder,
    payload: Any,
    mapping: CounterfactualMapping,
    detections: Sequence[Detection] | None = None,
) -> Variant:
    """Rewrite every string of ``payload`` with ``mapping``.

    Names are replaced where they are written capitalised, and a swapped person's first name
    and surname side by side in any case or joined by ``.``, ``_`` or ``-`` (``mary carter``,
    ``mary.carter@…``, ``Mary_Carter``) are replaced too, each word in its case
    (:func:`~biasbreaker.probe.residuals.pair_hits`).

    Args:
        finder: Finds the mentions.
        payload: The payload.
        mapping: Groups of one axis and names to swap.
        detections: The payload's mentions when already known (else found again).

    Returns:
        The variant, its mapping recording the term choices made (``prefer``).
    """
    axis = finder.terms.axis(mapping.axis)
    pi = dict(mapping.groups)
    prefer = dict(mapping.prefer)
    name_map = {norm(src): dst for src, dst in mapping.names}
    name_re = literal_regex([src for src, _ in mapping.names])
    found = finder.detect(payload) if detections is None else detections
    present = present_groups(found).get(axis.name, set())
    subs: list[Substitution] = []
    chosen: dict[str, str] = {}

    # a per-person mapping moves a term only as a title of that person, or as a field of that
    # person's record (docs/detection.md, "Two persons of different groups")
    own = {norm(w) for src, _ in mapping.names for w in src.split()} if mapping.person else None
    records = record_persons(found, axis.name, lambda d: d.name or finder.name_key(d.surface) or "")

    def owned(path: Path, text: str, hit: Hit) -> bool:
        assert own is not None
        return title_of(text, hit.end, own) or (
            field_owner(path, text, hit.start, hit.end, records) == mapping.person
        )

    def rewrite(path: Path, text: str) -> str:
        hits = [h for h in finder.scan(text) if h.kind != "name"]
        if own is not None:
            hits = [h for h in hits if h.axis != axis.name or owned(path, text, h)]
        if name_re is not None:
            for m in name_re.finditer(text):
                if capitalised(m.group(0)):
                    hits.append(
                        Hit(m.start(), m.end(), m.group(0), "name", axis.name, (), m.group(0))
                    )
        pairs: dict[Hit, str] = {}
        for pair in pair_hits(text, mapping):
            # a person's first name and surname in a form the name scan does not read
            # (``mary carter``, ``Mary_Carter``, ``mary.carter@…``): swapped exactly
            hit = Hit(pair.start, pair.end, text[pair.start : pair.end], "name", "", ())
            if hit not in pairs:
                pairs[hit] = pair.replacement
                hits.append(hit)
        out: list[str] = []
        pos = 0
        for hit in non_overlapping(hits):
            if hit in pairs:
                repl: str | None = pairs[hit]
            else:
                repl = replacement(text, hit, axis, pi, prefer, present, name_map)
            if repl is None or repl == hit.surface:
                continue
            segment = text[pos : hit.start]
            out.append(fix_article(segment, hit.surface, repl))
            out.append(repl)
            pos = hit.end
            subs.append(Substitution(path, hit.start, hit.end, hit.surface, repl))
            if hit.kind == "term":
                prev = chosen.get(repl)
                chosen[repl] = hit.surface if prev in (None, hit.surface) else ""
        out.append(text[pos:])
        return "".join(out)

    new_payload = rebuild(payload, rewrite)
    record = tuple((k, v) for k, v in chosen.items() if v)
    return Variant(
        payload=new_payload,
        mapping=CounterfactualMapping(
            axis=mapping.axis,
            groups=mapping.groups,
            names=mapping.names,
            prefer=record,
            invertible=mapping.invertible,
            person=mapping.person,
        ),
        substitutions=tuple(subs),
    )


_NEXT_WORD = re.compile(r"[ \t]+([^\W\d_][\w'’-]*)")


def next_word(text: str, end: int) -> str | None:
    """The word right after ``text[:end]``, spaces or tabs between, normed, ``'s`` dropped.

    ``None`` when no word follows on that line (punctuation, a digit, the end).
    """
    m = _NEXT_WORD.match(text, end)
    return None if m is None else re.sub(r"['’]s$", "", norm(m.group(1)))


def title_of(text: str, end: int, words: set[str]) -> bool:
    """Whether the word right after ``text[:end]`` (:func:`next_word`) is one of ``words``.

    ``words`` are :func:`~biasbreaker.probe.context.norm`-ed name words: a term ending at
    ``end`` is then a title of that person (``Ms.`` in ``Ms. Mary Carter``, ``Mr.`` in
    ``Mr. Baker``, ``Mr. Baker's``).
    """
    return next_word(text, end) in words


def replacement(
    text: str,
    hit: Hit,
    axis: Axis,
    pi: Mapping[str, str],
    prefer: Mapping[str, str],
    present: set[str],
    name_map: Mapping[str, str],
) -> str | None:
    """The replacement of one hit under the permutation ``pi``, or ``None`` to keep it."""
    if hit.kind == "name":
        target = name_map.get(norm(hit.surface))
        return match_case(hit.surface, target) if target is not None else None
    if hit.axis != axis.name:
        return None
    if hit.kind == "age":
        rule = axis.numeric_age
        if rule is None or hit.groups[0] not in pi:
            return None
        return mirrored_age(hit.surface, rule)
    entries = axis.index[norm(hit.surface)]
    moved = list(dict.fromkeys(e.group for e in entries if e.group in pi))
    if not moved:
        return None
    if len(moved) > 1:
        moved = [g for g in moved if g in present]
        if len(moved) != 1:
            return None
    g = moved[0]
    h = pi[g]
    rows = [axis.rows[e.row] for e in entries if e.group == g]
    rows = [r for r in rows if r.form(h) is not None]
    if not rows:
        return None
    wanted = prefer.get(hit.surface)
    if wanted and any(norm(r.form(h) or "") == norm(wanted) for r in rows):
        return wanted
    rows = by_context(rows, text, hit.start, hit.end, predicate=axis.name != "gender")
    target = rows[0].form(h)
    assert target is not None
    return match_case(hit.surface, target, rows[0].form(g))


def neutral_form(terms: TermSet, text: str, hit: Hit) -> str:
    """The group-neutral form of a term hit (``he`` → ``they``), else :data:`MASK`."""
    axis = terms.axis(hit.axis)
    rows = [axis.rows[e.row] for e in axis.index[norm(hit.surface)]]
    rows = by_context(rows, text, hit.start, hit.end, predicate=axis.name != "gender")
    neutral = rows[0].neutral if rows else None
    return match_case(hit.surface, neutral) if neutral else MASK


def match_case(source: str, target: str, stored: str | None = None) -> str:
    """Give ``target`` the capitalisation the text gave ``source``.

    ``stored`` is how the term list writes ``source``. Written as stored → ``target`` as
    stored (``Asian`` → ``white``, ``Black`` → ``Hispanic``); all capitals (two or more
    letters) → all capitals; capitalised where the list has lower case (sentence start) →
    capitalised (every word when every source word is); lower case where the list has a
    capital → lower-case first letter.
    """
    letters = [c for c in source if c.isalpha()]
    if len(letters) >= 2 and all(c.isupper() for c in letters):
        return target.upper()
    if stored is not None and _same_initials(source, stored):
        return target
    if source[:1].isupper():
        words = source.split()
        if len(words) > 1 and all(w[:1].isupper() for w in words):
            return " ".join(w[:1].upper() + w[1:] for w in target.split())
        return target[:1].upper() + target[1:]
    if stored is not None:
        return target[:1].lower() + target[1:]
    return target


def _same_initials(a: str, b: str) -> bool:
    wa, wb = a.split(), b.split()
    return len(wa) == len(wb) and all(x[:1] == y[:1] for x, y in zip(wa, wb, strict=True))


def _vowel_sound(word: str) -> bool:
    if re.match(r"[A-Z](?:[A-Z]|\.[A-Z])", word):  # an initialism, read letter by letter
        return word[0] in "AEFHILMNORSX"  # "an FBI", "an MBA"; "a US citizen", "a UK"
    w = word.lower()
    if w[:1].isdigit():
        digits = re.match(r"\d+", w)
        d = digits.group(0) if digits else ""
        return d.startswith("8") or (d[:2] in ("11", "18") and len(d) in (2, 5))
    if w.startswith(("eu", "uni", "use", "usu", "uti", "one", "once", "ubiq", "ewe")):
        return False
    if w.startswith(("hour", "honest", "honor", "honour", "heir")):
        return True
    return w[:1] in ("a", "e", "i", "o", "u")


def fix_article(segment: str, old: str, new: str) -> str:
    """Correct "a"/"an" at the end of ``segment`` when the word after it changed."""
    m = _ARTICLE_BEFORE.search(segment)
    if m is None or _vowel_sound(old) == _vowel_sound(new):
        return segment
    article = m.group(1)
    wanted = "an" if _vowel_sound(new) else "a"
    if article.isupper() and len(article) > 1:
        wanted = wanted.upper()
    elif article[:1].isupper():
        wanted = wanted.capitalize()
    return segment[: m.start(1)] + wanted + segment[m.end(1) :]
