"""Sex codes where a form or an export writes them: after a person's id, or as a record field.

:meth:`~biasbreaker.probe.term_context.TermReader._coded` reads a one-letter ``F``/``M`` as a
sex code after a sex label, beside an age, or in brackets after a person word. A new-user
trial found forms that write it otherwise, each "not applicable" (or its age swapped and the
code kept, so a step denying women scored 0):

* in brackets after a person word and an id: ``Candidate #12 (F)``, ``Applicant ID 4471
  (F)``, ``Patient no. 7 (M, 63)`` (:func:`id_bracket_before`);
* as a field of a delimited record (``|``, ``,``, ``;`` or a tab between fields):
  ``Applicant 4471 | F | 35 | 60k``, ``Applicant, 35, F, income 60k``
  (:func:`record_code`).

A record field is a code when the record opens with a person reference (a person word,
optionally an id: ``Applicant 4471``, ``Candidate #12``), or when a field next to it is an
adult age (16–119) and the record has a person word. A lone upper-case ``F``/``M`` beside an
adult age in a record with no person word (``4471 | F | 35 | 60k``) may be a sex code or not:
it is *unsure*, and the probe holds the step rather than guess. A record in which another
field is a single letter too (``S, M, 36``: sizes; ``A, B, F``: grades) is a list of letters,
not a sex code. Only upper-case codes count in a record (``f``/``m`` alone are often units or
words there); the labelled forms (``sex: f``) are read by the sex label rule.
"""

from __future__ import annotations

import re
from typing import Final, Literal

__all__ = ["id_bracket_before", "record_code"]

_ID = r"(?:(?:ID|No\.?|Nr\.?|number|#)[ \t]*[:#]?[ \t]*)?#?[A-Za-z]{0,3}-?\d[\w-]*"
"""An id after a person word: ``#12``, ``ID 4471``, ``No. 7``, ``4471``, ``A-17``."""
_ID_OPEN = re.compile(
    rf"(?<![\w'’-])([^\W\d_][\w'’-]*)[ \t]+{_ID}[ \t]*\([ \t]*(?:\d{{1,3}}[ \t]*[,/][ \t]*)?$",
    re.IGNORECASE,
)
_PERSON_REF = re.compile(rf"^[ \t]*(?:the[ \t]+)?([^\W\d_]+)(?:[ \t]+{_ID})?[ \t]*:?[ \t]*$", re.I)
_ADULT_AGE = re.compile(
    r"^[ \t]*(?:age[ \t]*:?[ \t]*)?(?:1[6-9]|[2-9]\d|1[01]\d)"
    r"(?:[ \t]*(?:y/o|yo|yrs?|years?))?[ \t]*$",
    re.IGNORECASE,
)
_SEPARATORS: Final = "|,;\t"
_LETTER: Final = re.compile(r"^[ \t]*(?:[^\W\d_]+[ \t]*:)?[ \t]*[A-Za-z][ \t]*$")
"""A field that is one letter, maybe after a label (``S``, ``Sizes: S``)."""

Reading = Literal["code", "unsure"]


def id_bracket_before(before: str, person_words: frozenset[str]) -> bool:
    """Whether ``before`` ends with a person word, an id and an open bracket.

    ``Candidate #12 (``, ``Applicant ID 4471 (``, ``Patient no. 7 (63, `` are; ``Figure 12 (``
    and ``Section 4 (`` are not (no person word).
    """
    m = _ID_OPEN.search(before)
    return m is not None and m.group(1).lower() in person_words


def _fields(line: str, sep: str) -> list[tuple[int, int]]:
    """The spans of the fields of ``line`` split at ``sep``."""
    spans, start = [], 0
    for i, c in enumerate(line):
        if c == sep:
            spans.append((start, i))
            start = i + 1
    spans.append((start, len(line)))
    return spans


def record_code(text: str, start: int, end: int, person_words: frozenset[str]) -> Reading | None:
    """How a lone code at ``text[start:end]`` reads as a field of a delimited record.

    Args:
        text: The string.
        start: Where the code starts.
        end: Where it ends.
        person_words: Lower-case words naming a person (``applicant``, ``candidate``).

    Returns:
        ``"code"`` when it is a sex code (the module's rule), ``"unsure"`` when it stands
        beside an adult age in a record with no person word (hold), ``None`` when it is no
        field of a record, or a field the rule does not read.
    """
    if not text[start:end][:1].isupper():
        return None
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", end)
    hi = len(text) if hi == -1 else hi
    before = text[lo:start].rstrip(" \t")
    after = text[end:hi].lstrip(" \t")
    seps = {c for c in (before[-1:], after[:1]) if c and c in _SEPARATORS}
    if len(seps) != 1:
        return None
    if not (before == "" or before[-1] in seps) or not (after in ("", ".") or after[0] in seps):
        return None
    sep = seps.pop()
    line = text[lo:hi].rstrip(".")
    spans = _fields(line, sep)
    at = next(i for i, (s, e) in enumerate(spans) if s <= start - lo < e or s == start - lo)
    values = [line[s:e] for s, e in spans]
    head = _PERSON_REF.match(values[0])
    if at > 0 and head is not None and head.group(1).lower() in person_words:
        return "code"
    near = [values[i] for i in (at - 1, at + 1) if 0 <= i < len(values)]
    if not any(_ADULT_AGE.match(v) for v in near):
        return None
    words = {w.lower() for w in re.findall(r"[^\W\d_]+", line)}
    if words & person_words:
        return "code"
    if any(_LETTER.match(v) for i, v in enumerate(values) if i != at):
        return None
    return "unsure"
