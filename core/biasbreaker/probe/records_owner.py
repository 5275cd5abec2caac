"""Whose term a record field is: ``{"name": "Mary Carter", "gender": "female"}``.

A per-person variant moves one person alone, so every term of its axis must belong to one
person (:func:`biasbreaker.probe.counterfactual._attribute`). In running text that is a title
before the person's name (``Ms. Mary Carter``). In a record it is a field beside the name: a
term that is a field's whole value belongs to the one person named in the same record (the
same dict, list or tuple), and moves with that person. A record naming two persons on the axis
(``{"name": "Mary Carter", "spouse": "John Baker", "gender": "female"}``) owns no term; a term
inside longer text (``"bio": "She met him in 2010"``) is not a field and is never owned this
way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from biasbreaker.probe.mapping import Detection
from biasbreaker.probe.payloads import Path


def record_persons(
    detections: Sequence[Detection], axis: str, key_of: Callable[[Detection], str]
) -> dict[Path, str]:
    """Record path → the one person named in it on ``axis``.

    Args:
        detections: The payload's mentions.
        axis: The axis of the per-person variants.
        key_of: A name detection's name key (the person it names), ``""`` when unknown.

    Returns:
        For each container holding a name of ``axis`` directly (the parent of the name's
        path), the person's name key, when that container names exactly one person.
    """
    named: dict[Path, set[str]] = {}
    for d in detections:
        if d.kind != "name" or d.axis != axis or not d.path:
            continue
        key = key_of(d)
        if key:
            named.setdefault(d.path[:-1], set()).add(key)
    return {parent: next(iter(keys)) for parent, keys in named.items() if len(keys) == 1}


def field_owner(
    path: Path, text: str, start: int, end: int, owners: Mapping[Path, str]
) -> str | None:
    """The person whose record field ``text[start:end]`` is, or ``None``.

    Args:
        path: The string's path in the payload.
        text: The string.
        start: The term's start in ``text``.
        end: The term's end in ``text``.
        owners: :func:`record_persons`.

    Returns:
        The person's name key when the term is ``text``'s whole value (spaces aside) and
        ``text`` sits in a record naming one person; else ``None``.
    """
    if not path or text[:start].strip() or text[end:].strip():
        return None
    return owners.get(path[:-1])
