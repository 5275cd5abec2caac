"""Protected attributes held in structured fields, which the probe cannot vary.

The probe makes counterfactuals by rewriting text (:mod:`~biasbreaker.probe.payloads`: the
strings of a payload); a number, a bool or a code is passed through unchanged. A form or
database pipeline often carries the attribute that way: ``{"age": 63}``, ``{"sex": "F"}``,
``{"is_female": True}``, ``{"gender_code": "F"}``. A node that denies on such a field is not
seen by the text probe, and calling the step "not applicable" (no protected group named) would
be false: the payload names the group, in a form the probe cannot swap. So a step whose input
has such a field is held for review with the field named (fail closed), before anything is
drawn or run.

A field counts when a word of its key (split at ``_``, ``-``, spaces, digits and camelCase,
lower-cased) is in :data:`FIELD_WORDS` for one of the configured axes, and its value is a
number, a bool, or a string of at most :data:`CODE_LENGTH` characters with no protected term
the text probe found (``"F"``, ``"M"``, ``"B"``, ``"2"``). A longer string is text, which the
probe reads: ``{"sex": "female"}`` is swapped like any other mention. ``None`` is absent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from biasbreaker.probe.payloads import Path

__all__ = ["CODE_LENGTH", "FIELD_WORDS", "opaque_fields", "opaque_reason"]

FIELD_WORDS: Final[Mapping[str, frozenset[str]]] = {
    "gender": frozenset({"sex", "gender", "female", "male", "woman", "man"}),
    "race": frozenset({"race", "ethnicity", "ethnic", "racial"}),
    "age": frozenset({"age", "dob", "birthdate", "birthday", "birthyear"}),
    "religion": frozenset({"religion", "faith", "religious"}),
    "sexual-orientation": frozenset({"orientation", "lgbt", "lgbtq", "gay"}),
    "disability": frozenset({"disability", "disabled", "handicap", "handicapped"}),
    "nationality": frozenset({"nationality", "citizenship", "citizen"}),
}
"""Axis → the key words that make a field carry that axis's attribute."""

CODE_LENGTH: Final = 3
"""Longest string value read as a code (``"F"``, ``"NH"``) rather than as text."""

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def _words(key: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(key)}


def opaque_fields(
    payload: Any, axes: Sequence[str], found: frozenset[Path] = frozenset()
) -> Iterator[tuple[Path, str, Any]]:
    """The fields of ``payload`` that carry a protected attribute the probe cannot vary.

    Args:
        payload: The step's input: nested ``dict`` / ``list`` / ``tuple`` of values.
        axes: The configured axes (``[probe] axes``); a field counts for these only.
        found: Paths of strings where the text probe found a protected term (those are
            swapped, so they do not count).

    Yields:
        ``(path, axis, value)`` for each such field, in payload order.
    """
    words = {axis: FIELD_WORDS[axis] for axis in axes if axis in FIELD_WORDS}
    yield from _walk(payload, (), words, found)


def _walk(
    value: Any, path: Path, words: Mapping[str, frozenset[str]], found: frozenset[Path]
) -> Iterator[tuple[Path, str, Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = (*path, key)
            if isinstance(key, str) and _opaque(item) and here not in found:
                key_words = _words(key)
                axis = next((a for a, ws in words.items() if key_words & ws), None)
                if axis is not None:
                    yield here, axis, item
                    continue
            yield from _walk(item, here, words, found)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, (*path, i), words, found)


def _opaque(value: Any) -> bool:
    if isinstance(value, (bool, int, float)):
        return True
    return isinstance(value, str) and 0 < len(value.strip()) <= CODE_LENGTH


def opaque_reason(fields: Sequence[tuple[Path, str, Any]]) -> str:
    """The hold reason for :func:`opaque_fields`' fields: each field, its axis and value."""
    shown = ", ".join(
        f"{'.'.join(str(p) for p in path)} = {value!r} ({axis})" for path, axis, value in fields
    )
    return (
        f"the probe cannot vary a protected attribute held in a structured field: {shown}; it "
        "rewrites text only. Write the attribute as text the probe reads (e.g. 'aged 63', "
        "'sex: female'), leave it out of what the step sees, or set probe=False for this "
        "step and review its outputs (docs/detection.md, 'Structured fields')"
    )
