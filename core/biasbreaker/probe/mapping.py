"""What a counterfactual is: the mentions found, the mapping a variant applied and its inverse.

:class:`CounterfactualMapping.inverse` is what maps a counterfactual output back to the
original groups (:meth:`biasbreaker.probe.CounterfactualGenerator.map_back` applies it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from biasbreaker.probe.payloads import Key, Path

__all__ = [
    "CounterfactualMapping",
    "CounterfactualSet",
    "Detection",
    "Substitution",
    "Variant",
    "present_groups",
    "unswapped_keys",
]


@dataclass(frozen=True, slots=True)
class Detection:
    """One protected mention found in a payload.

    Args:
        path: Where the string sits in the payload (``()`` for a plain string); a mention in
            a dict key's text ends with :class:`~biasbreaker.probe.payloads.Key`
            (``("applicants", Key("Jamal Washington"))``).
        start: Character offset of the mention in that string (inclusive).
        end: Character offset after the mention.
        surface: The mention as written.
        axis: The axis it belongs to (a name may be reported twice: gender and race).
        groups: The group(s) of that axis it names; more than one for a shared form such as
            ``church``, which alone does not make a payload applicable.
        kind: ``"term"``, ``"name"`` or ``"age"``.
        name: For a name, its name key (the person it names: ``"Mei Nguyen"`` for the
            surface ``"Mei L. Nguyen"`` or for the first-name field ``"Mei"`` beside the
            surname field ``"Nguyen"``); ``""`` for other mentions.
    """

    path: Path
    start: int
    end: int
    surface: str
    axis: str
    groups: tuple[str, ...]
    kind: Literal["term", "name", "age"]
    name: str = ""


@dataclass(frozen=True, slots=True)
class CounterfactualMapping:
    """The mapping one variant applied, enough to map an output back.

    Args:
        axis: The swapped axis.
        groups: ``(from_group, to_group)`` pairs of the groups it moves (a permutation for
            variants drawn by :meth:`CounterfactualGenerator.generate`).
        names: ``(original, replacement)`` name strings (full names, first names, surnames),
            Title-cased.
        prefer: ``(replacement, original)`` term surfaces as written, used when mapping back:
            a replacement found verbatim in an output returns to exactly the original word
            (``Mr.`` back to ``Mrs.`` rather than ``Ms.``, ``Black people`` back to
            ``white people``).
        invertible: False when the payload already mentioned a target group, so its
            mentions cannot be told from the swapped ones (a ``to_group`` variant of a text
            mentioning both genders).
        steps: Empty for a one-axis mapping. For a *joint* mapping (every axis the input
            mentions swapped at once, :meth:`CounterfactualGenerator.generate` with
            ``joint``), the one-axis mappings applied one after another, in axis order;
            ``axis`` is then their axes joined by ``+`` (``"gender+age"``) and ``groups`` and
            ``names`` their pairs in that order.
        person: Empty for a variant that moves every mention of the axis. For a *per-person*
            variant (:meth:`CounterfactualGenerator.generate` with ``per_person``), the name
            key of the one person it moves (``"Mary Carter"``; in the inverse, the name that
            person was given): ``names`` hold that person's names only, and of the axis's
            terms only a title right before one of those names moves (``Ms. Mary Carter``,
            ``Mr. Baker``); every other mention stays.
    """

    axis: str
    groups: tuple[tuple[str, str], ...]
    names: tuple[tuple[str, str], ...] = ()
    prefer: tuple[tuple[str, str], ...] = ()
    invertible: bool = True
    steps: tuple[CounterfactualMapping, ...] = ()
    person: str = ""

    @property
    def axes(self) -> tuple[str, ...]:
        """The axes this mapping swaps: one, or a joint mapping's axes in order."""
        return tuple(s.axis for s in self.steps) if self.steps else (self.axis,)

    @classmethod
    def joint(cls, steps: Sequence[CounterfactualMapping]) -> CounterfactualMapping:
        """The mapping that applies ``steps`` (one-axis mappings, >= 2) one after another.

        Raises:
            ValueError: Fewer than two steps, or a step is itself joint.
        """
        if len(steps) < 2 or any(s.steps for s in steps):
            raise ValueError(
                f"a joint mapping needs two or more one-axis steps, got {len(steps)} "
                f"({', '.join(s.axis for s in steps) or 'none'})"
            )
        return cls(
            axis="+".join(s.axis for s in steps),
            groups=tuple(p for s in steps for p in s.groups),
            names=tuple(p for s in steps for p in s.names),
            invertible=all(s.invertible for s in steps),
            steps=tuple(steps),
        )

    def inverse(self) -> CounterfactualMapping:
        """The mapping that undoes this one.

        Raises:
            ValueError: The mapping sends two groups (or two names) to one, so it has no
                inverse (e.g. a :meth:`CounterfactualGenerator.to_group` variant of a text
                that mentions both groups).
        """
        if self.steps:
            return CounterfactualMapping.joint([s.inverse() for s in reversed(self.steps)])
        targets = [t for _, t in self.groups]
        name_targets = [t for _, t in self.names]
        if (
            not self.invertible
            or len(set(targets)) != len(targets)
            or len(set(name_targets)) != len(name_targets)
        ):
            raise ValueError(
                f"mapping {self.groups!r} on axis {self.axis!r} is not one-to-one (or the payload "
                "already mentioned a target group), so it cannot be inverted; map outputs back "
                "only for variants drawn by generate()"
            )
        return CounterfactualMapping(
            axis=self.axis,
            groups=tuple((t, s) for s, t in self.groups),
            names=tuple((t, s) for s, t in self.names),
            prefer=(),
            person=dict(self.names).get(self.person, self.person),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form."""
        return {
            "axis": self.axis,
            "groups": [list(p) for p in self.groups],
            "names": [list(p) for p in self.names],
            "prefer": [list(p) for p in self.prefer],
            "invertible": self.invertible,
            **({"steps": [s.to_dict() for s in self.steps]} if self.steps else {}),
            **({"person": self.person} if self.person else {}),
        }


@dataclass(frozen=True, slots=True)
class Substitution:
    """One replaced span: where, what it was and what it became.

    ``path`` is the string's path as in :class:`Detection` (ending with
    :class:`~biasbreaker.probe.payloads.Key` for a dict key's text), in the payload that was
    rewritten; ``start`` and ``end`` are offsets in that string.
    """

    path: Path
    start: int
    end: int
    original: str
    replacement: str


@dataclass(frozen=True)
class Variant:
    """One counterfactual payload with the mapping that produced it.

    Args:
        payload: The rewritten payload (same structure as the input).
        mapping: The mapping applied.
        substitutions: Every replaced span, in order (article corrections not included).
        draw: 0 for the first variant of this mapping, 1 for its second draw, … (later draws
            differ in the names drawn and in the sample index the probe uses).
    """

    payload: Any
    mapping: CounterfactualMapping
    substitutions: tuple[Substitution, ...]
    draw: int = 0


@dataclass(frozen=True)
class CounterfactualSet:
    """The result of :meth:`CounterfactualGenerator.generate`.

    Args:
        status: ``"applicable"`` when variants were produced, else ``"not_applicable"``.
        detections: The protected mentions found.
        variants: ``k`` variants when applicable, else empty.
        reason: Why it is not applicable (empty when applicable).
        notes: The names whose data leave an axis unknown, one note per name and axis
            (docs/detection.md, "Names"): such a name is swapped on the axes it tells only.
        coverage: Rotation key (``"<axis>/<groups named>"``) → rotation position after this
            draw (the ``coverage`` to pass to the next
            :meth:`CounterfactualGenerator.generate` of the same node).
    """

    status: Literal["applicable", "not_applicable"]
    detections: tuple[Detection, ...]
    variants: tuple[Variant, ...]
    reason: str = ""
    notes: tuple[str, ...] = ()
    coverage: Mapping[str, int] = field(default_factory=dict)


def present_groups(detections: Sequence[Detection]) -> dict[str, set[str]]:
    """Axis → the groups named by a detection that names exactly one group."""
    present: dict[str, set[str]] = {}
    for d in detections:
        if len(d.groups) == 1:
            present.setdefault(d.axis, set()).add(d.groups[0])
    return present


def unswapped_keys(
    detections: Sequence[Detection], variants: Sequence[Variant]
) -> tuple[Detection, ...]:
    """The mentions in dict keys that the variants of their axis left as they were.

    A mention counts when it sits in a key's text (its path ends with
    :class:`~biasbreaker.probe.payloads.Key`), names one group, and one or more one-axis
    variants swap its axis but none replaced a span overlapping it: a step keyed by that
    person or group sees the same key in every counterfactual of that axis, so it is not
    tested on it (a name no counterpart could be drawn for, an age no mirror changes). Joint
    variants are left out: their later steps rewrite keys the earlier ones changed, at other
    paths, and the one-axis variants are the test of each axis.

    Args:
        detections: The mentions of the payload the variants were made of.
        variants: Its variants (:attr:`CounterfactualSet.variants`).

    Returns:
        Those mentions, in the order of ``detections``.
    """
    out: list[Detection] = []
    for d in detections:
        if len(d.groups) != 1 or not d.path or not isinstance(d.path[-1], Key):
            continue
        of_axis = [v for v in variants if not v.mapping.steps and v.mapping.axis == d.axis]
        if of_axis and not any(
            s.path == d.path and s.start < d.end and d.start < s.end
            for v in of_axis
            for s in v.substitutions
        ):
            out.append(d)
    return tuple(out)
