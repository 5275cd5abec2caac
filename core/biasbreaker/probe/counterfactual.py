"""Counterfactual generation: swap demographic terms and names in text and JSON-like payloads.

A *counterfactual* of a payload changes who it is about and nothing else: "his" becomes "her",
"Jamal Washington" becomes "Ebony Washington" (gender) or "Brian Schmidt" (race), "a Muslim
man" becomes "a Hindu man". The generator

* finds protected mentions (:meth:`CounterfactualGenerator.detect`) along the configured axes;
* draws ``k`` variants, each a *permutation* of one axis's groups (gender: male ↔ female;
  race: e.g. black → white, white → black), deterministically from the seed and the payload
  (:meth:`~CounterfactualGenerator.generate`);
* returns each variant with the mapping used, so an output of the step run on the variant can
  be mapped back (:meth:`~CounterfactualGenerator.map_back`) before it is compared with the
  original output;
* with ``per_person``, also moves one person at a time when the payload names persons of
  different groups of an axis ("Mary Carter and John Baker": the all-mentions swap names a
  man and a woman again), and raises :class:`Unattributed` when a term of that axis belongs
  to no one of them;
* reports a payload without protected mentions as *not applicable* (fairness through
  unawareness: there is nothing to swap), never as "no bias".

Payloads are ``str``, ``dict``, ``list`` and ``tuple``, nested; other values pass through
untouched. A ``str`` dict key is text like a value: its mentions are found and swapped
(``{"Jamal Washington": {...}}`` → ``{"Greg Baker": {...}}``), and :meth:`map_back` maps an
output's keys back too (:mod:`~biasbreaker.probe.payloads`; a rewrite that would make two keys
of one dict one raises :class:`~biasbreaker.probe.payloads.KeyClash`). The text is never
lower-cased: only the swapped words change, and each takes the capitalisation of the word it
replaces (``He`` → ``She``, ``HIS`` → ``HER``).

Swap rules (sources in ``docs/detection.md``):

* Whole words and multi-word terms only (``his`` never matches inside ``this``); the longest
  term wins (``African American`` before ``American``).
* Gender pronouns follow grammar: ``his`` → ``her`` before a noun and ``hers`` otherwise;
  ``her`` → ``his`` before a noun and ``him`` otherwise (after *give/tell/show/let/make…*
  it is always ``him``); ``hers`` → ``his``; ``himself`` ↔ ``herself``. The cue is the next
  word: a noun or adjective makes the pronoun a determiner, punctuation, the end of the text
  or a function word (*to*, *the*, *and*, *about*…) makes it stand alone.
* Titles ``Mr.``/``Mr`` ↔ ``Ms.``/``Mrs.``/``Miss`` (a swap back restores the title the
  text had); spouse, kin and in-law terms (wife ↔ husband, mother ↔ father, son ↔ daughter …).
* Context-dependent terms (``black``, ``white``, ``asian``, ``old``, ``young``, ``straight``,
  ``deaf`` …) count only before a person word or "one(s)" (``a black doctor``, ``the straight
  one``), when coordinated with such a term (``a gay and a straight couple``), and some after a
  copula (``she is straight``); ``the black car`` is left alone.
* ``a``/``an`` before a swapped word is corrected (``an Asian man`` → ``a white man``).
* First and full names are swapped by group (gender × race) from the shipped name lists:
  a gender swap keeps the surname (``Jamal Washington`` → ``Ebony Washington``), a race swap
  draws a full name of the same gender from the target group; a name maps to one name
  throughout the payload.
* Ages: ``22-year-old`` ↔ ``78-year-old`` (``n`` ↔ ``100 − n`` for ``n ≤ 39`` or ``n ≥ 61``),
  likewise ``aged 65``, ``65 years of age`` and ``born in 1958`` (a birth year against a fixed
  reference year, :class:`~biasbreaker.probe.terms.NumericAge`); ``retired`` ↔ ``young``.

This module is the facade; the work is split by concern: :mod:`~biasbreaker.probe.mentions`
(finding mentions), :mod:`~biasbreaker.probe.variants` (choosing variants),
:mod:`~biasbreaker.probe.rewriting` (rewriting text), :mod:`~biasbreaker.probe.mapping` (the
mapping and its inverse, for mapping back), :mod:`~biasbreaker.probe.names` (name data) and
:mod:`~biasbreaker.probe.payloads` (walking JSON-like payloads).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from biasbreaker.probe.context import norm
from biasbreaker.probe.held import Held
from biasbreaker.probe.mapping import (
    CounterfactualMapping,
    CounterfactualSet,
    Detection,
    Substitution,
    Variant,
    present_groups,
)
from biasbreaker.probe.mentions import MentionFinder
from biasbreaker.probe.payloads import Path, describe_path, leaves, payload_digest, rebuild
from biasbreaker.probe.records_owner import field_owner, record_persons
from biasbreaker.probe.rewriting import MASK, neutral_form, next_word, rewrite
from biasbreaker.probe.terms import Axis, TermSet
from biasbreaker.probe.variants import (
    feasible,
    name_map,
    ordered_pairs,
    rotation_key,
    shift_permutation,
)

__all__ = [
    "CounterfactualGenerator",
    "CounterfactualMapping",
    "CounterfactualSet",
    "Detection",
    "Path",
    "Substitution",
    "Unattributed",
    "Variant",
    "payload_digest",
]


class Unattributed(ValueError):
    """A per-person variant is due, but a mention of its axis belongs to no one person.

    Raised by :meth:`CounterfactualGenerator.generate` with ``per_person``: the input names two
    or more persons of different groups of an axis, and a term of that axis (``he``,
    ``his wife``, a title before a name two persons share) cannot be given to one of them, so
    the variant that moves one person alone would contradict itself. The probe holds such a
    step (``status = "unreadable"``) rather than score it without that variant.
    """


def _attribute(
    payload: Any,
    detections: Sequence[Detection],
    axis: str,
    persons: Mapping[str, str],
    key_of: Callable[[Detection], str],
) -> None:
    """Check that every term of ``axis`` in ``payload`` belongs to one of ``persons``.

    A term is a person's title when the word right after it (spaces between) is a word of
    that person's name key and of no other person's (``Ms. Mary Carter``, ``Mr. Baker``), or
    a field of that person's record (:mod:`biasbreaker.probe.records_owner`:
    ``{"name": "Mary Carter", "gender": "female"}``).

    Args:
        payload: The input.
        detections: Its mentions.
        axis: The axis of the per-person variants.
        persons: Name key → group of each person named on ``axis``.
        key_of: A name detection's name key.

    Raises:
        Unattributed: A term of ``axis`` is none (``he``, ``his wife``, ``a woman``).
    """
    owners: dict[str, set[str]] = {}
    for person in persons:
        for word in person.split():
            owners.setdefault(norm(word), set()).add(person)
    texts = dict(leaves(payload))
    records = record_persons(detections, axis, key_of)
    for d in detections:
        if d.kind == "name" or d.axis != axis:
            continue
        if field_owner(d.path, texts[d.path], d.start, d.end, records) in persons:
            continue  # a field of one person's record: {"name": "Mary Carter", "gender": "F"}
        after = next_word(texts[d.path], d.end)
        if after is None or len(owners.get(after, ())) != 1:
            listed = ", ".join(f"{p} ({g})" for p, g in persons.items())
            raise Unattributed(
                f"the {axis} term {d.surface!r} in {describe_path(d.path)} belongs to no one "
                f"of the persons the input names ({listed}): a variant moving one person "
                "alone cannot be made, and without it a step that prefers one of them is not "
                "tested (the variant moving everyone names the same groups)"
            )


def _alone(payload: Any, detections: Sequence[Detection], word: str) -> bool:
    """Whether the capitalised ``word`` stands in ``payload`` outside every name found there.

    Counts its whole-word occurrences in the payload's strings against those inside the
    surfaces of the name detections (each span once).
    """
    pattern = re.compile(rf"(?<![\w'’-]){re.escape(word)}(?![\w-])")
    written = sum(len(pattern.findall(text)) for _, text in leaves(payload))
    spans = {(d.path, d.start, d.surface) for d in detections if d.kind == "name"}
    inside = sum(len(pattern.findall(surface)) for _, _, surface in spans)
    return written > inside


class CounterfactualGenerator:
    """Detect protected mentions and produce counterfactual variants of payloads.

    Deterministic: the variants depend only on the term set, the axes, the seed and the
    payload (not on call order), so the same inputs give byte-identical variants.

    Args:
        terms: The term lists (default :meth:`TermSet.default`).
        axes: Axis names to use, in the order variants are drawn (default: all of ``terms``).
        seed: Seed of every random choice (which permutations, which names).

    Raises:
        KeyError: An axis in ``axes`` is not in ``terms``.
    """

    def __init__(
        self, terms: TermSet | None = None, *, axes: Sequence[str] | None = None, seed: int = 0
    ) -> None:
        self.terms = terms if terms is not None else TermSet.default()
        names = tuple(axes) if axes is not None else self.terms.axis_names
        self.axes: tuple[Axis, ...] = tuple(self.terms.axis(a) for a in names)
        self.seed = seed
        self._finder = MentionFinder(self.terms, self.axes)
        # every shipped axis and group, read only to explain a 'not applicable' (built once)
        self._shipped: MentionFinder | Literal[False] | None = False

    # ------------------------------------------------------------------ detection
    def detect(self, payload: Any) -> tuple[Detection, ...]:
        """Find the protected mentions in a payload.

        Args:
            payload: ``str`` or a nested ``dict``/``list``/``tuple`` of them.

        Returns:
            The mentions, in payload order then text order. A name is reported once per axis
            it informs (gender and/or race).
        """
        return self._finder.detect(payload)

    def _blind_reason(self, payload: Any) -> str:
        """Why a payload with no mention of :attr:`axes` is not applicable, truthfully.

        "Group-blind" only when the shipped term lists find nothing either; a payload naming
        an axis, or a group of an axis, that the generator leaves out (``[probe] axes``,
        ``[probe] groups``) says which, with up to three of the terms found.
        """
        configured = ", ".join(a.name for a in self.axes)
        shipped = self._shipped_finder()
        found = shipped.detect(payload) if shipped is not None else ()
        if not found:
            return (
                f"no protected term or name of axes {configured} found: the payload is "
                "group-blind (fairness through unawareness), so a counterfactual test does not "
                "apply"
            )
        by_axis: dict[str, list[str]] = {}
        for d in found:
            terms = by_axis.setdefault(d.axis, [])
            if d.surface not in terms:
                terms.append(d.surface)
        named = "; ".join(
            f"{axis} ({', '.join(repr(t) for t in terms[:3])}{', ...' if len(terms) > 3 else ''})"
            for axis, terms in by_axis.items()
        )
        return (
            f"no protected term or name of the probed axes and groups ({configured}) found, "
            "so a counterfactual test of them does not apply; the payload names groups that "
            f"are not probed: {named} (add them to [probe] axes or groups to probe them)"
        )

    def _shipped_finder(self) -> MentionFinder | None:
        """A finder over every shipped axis and group (built once), or ``None``.

        ``None`` when this generator's axes hold every shipped axis with all its groups: it
        would find no more, so the default configuration pays nothing.
        """
        if self._shipped is False:
            shipped = TermSet.default()
            mine = {a.name: set(a.groups) for a in self.axes}
            every = tuple(shipped.axis(a) for a in shipped.axis_names)
            covered = all(set(a.groups) <= mine.get(a.name, set()) for a in every)
            self._shipped = None if covered else MentionFinder(shipped, every)
        return self._shipped

    def unswappable(self, payload: Any) -> tuple[tuple[Path, str, str], ...]:
        """Mentions no variant can swap (pregnancy): ``(path, axis, surface)``, in order.

        :meth:`generate` does not look at them; :class:`~biasbreaker.probe.Probe` holds a
        step whose input has any (``status = "unreadable"``).
        """
        return self._finder.unswappable(payload)

    def held(self, payload: Any) -> tuple[Held, ...]:
        """Mentions read but not swappable (a term in an identifier), in order.

        :meth:`generate` does not look at them; :class:`~biasbreaker.probe.Probe` holds a
        step whose input has any (``status = "unreadable"``).
        """
        return self._finder.held(payload)

    # ------------------------------------------------------------------ generation
    def generate(
        self,
        payload: Any,
        k: int,
        *,
        coverage: Mapping[str, int] | None = None,
        detections: Sequence[Detection] | None = None,
        joint: bool = False,
        per_person: bool = False,
        origin: str | None = None,
    ) -> CounterfactualSet:
        """Draw ``k`` counterfactual variants of a payload by the covering rotation.

        Each axis has a fixed order of its ``N`` groups, shuffled from the seed and the axis
        name alone (:meth:`rotation_order`). Rotation position ``c`` of an axis is the shift
        ``s = 1 + (c mod (N − 1))``: every mentioned group moves ``s`` places along that order
        (completed to a permutation, :func:`~biasbreaker.probe.variants.shift_permutation`),
        so ``N − 1`` consecutive positions compare every mentioned group with each of the
        other ``N − 1`` groups once. A shift that some mention has no counterpart for is
        skipped (:func:`~biasbreaker.probe.variants.feasible`). The axes mentioned share the
        ``k`` slots round robin, the least advanced axis first (ties in axis order); an axis
        takes at most one slot per distinct shift, and when every axis has given all of its
        shifts the round starts again (``draw`` 1, 2, …) with fresh names.

        Args:
            payload: ``str`` or a nested ``dict``/``list``/``tuple`` of them.
            k: Number of variants, >= 1.
            coverage: The rotation state before this draw (the state a caller keeps per
                guarded node, e.g. :attr:`ProbeResult.coverage` of that node's previous
                probe): rotation key → position. Each set of groups an input names on an
                axis has its own rotation, key ``"<axis>/<groups>"``
                (:func:`~biasbreaker.probe.variants.rotation_key`), advanced only by the
                draws of inputs naming those groups; the axis name's entry counts the
                positions walked on the axis by every draw, and a set of groups not drawn
                before starts there (0 when the axis has no entry either). So inputs naming
                the same groups rotate exactly as one count per axis would, and inputs naming
                other groups in turn cannot fall into a cycle with the shifts (docs/
                detection.md, "Every group covered"). ``None`` (stateless use):
                each axis starts at a position drawn from the seed and the payload, so
                variants still vary from payload to payload, but nothing bounds coverage.
            origin: Where the rotation of this state starts, e.g. ``"<thread id>/<node>"``:
                each axis's positions are read from an offset ``o`` drawn from the seed, the
                origin and the axis (shift ``s = 1 + ((o + c) mod (N − 1))``), so different
                threads start at different, reproducible places (in any process, whatever
                else runs) and one thread's ``N − 1`` consecutive positions still cover every
                shift. ``None``: offset 0. Ignored with ``coverage=None``.
            detections: :meth:`detect` of this very payload, when the caller has it already
                (the probe does, for its language guard); default: detected here.
            joint: Also draw one *joint* variant, after the ``k``, when two or more axes can
                be swapped: every such axis moved at once, each by the shift at the head of
                its rotation, one after another in axis order
                (:meth:`CounterfactualMapping.joint`). One-axis variants alone miss a step
                that decides against either of two groups: "Ms. Mary Smith, aged 63" denied
                for being a woman *or* for being over 60 is still denied when only her
                gender or only her age is swapped. The joint variant does not move the
                rotation (``coverage``).
            per_person: Also draw *per-person* variants, after the others, when the input
                names two or more persons (by name) of different groups of an axis and a
                permutation this draw takes for that axis (at draw 0) maps the persons' groups
                onto themselves (always so on a two-group axis naming both): one variant per
                person, moving that person alone (their names, and a title right before one
                of them) by the permutation, everyone else kept. The all-mentions variant
                of such an input names the same groups as the input ("Mary Carter and John
                Baker" becomes "Greg Carter and Emily Baker"), so a step that always prefers
                the man does not change on it; a per-person variant ("Greg Carter and John
                Baker") changes it. They do not move the rotation (``coverage``).

        Returns:
            ``k`` variants (``k + 1`` with the joint one, and one more per person and
            per-person permutation), or a ``not_applicable`` set when nothing can be swapped;
            its :attr:`CounterfactualSet.coverage` is the rotation after this draw.

        Raises:
            ValueError: ``k < 1``, or a position in ``coverage`` is not an integer >= 0.
            Unattributed: ``per_person`` and a per-person variant is due, but a term of its
                axis belongs to no one person (:func:`_attribute`); a ``ValueError``.
            KeyClash: A variant would make two keys of one dict one (``{"African American
                applicant": …, "Black applicant": …}`` both becoming ``"white applicant"``);
                a ``ValueError``.
        """
        if k < 1:
            raise ValueError(f"k={k!r} must be >= 1 (the number of counterfactual variants)")
        if coverage is not None:
            for axis_name, pos in coverage.items():
                if isinstance(pos, bool) or not isinstance(pos, int) or pos < 0:
                    raise ValueError(
                        f"coverage[{axis_name!r}]={pos!r} must be an integer >= 0 (a rotation "
                        "position, as ProbeResult.coverage gives it)"
                    )
        state = dict(coverage) if coverage is not None else {}
        detections = self.detect(payload) if detections is None else tuple(detections)
        present = present_groups(detections)
        notes = self._finder.ambiguities(payload)
        if not present:
            return CounterfactualSet(
                status="not_applicable",
                detections=detections,
                variants=(),
                reason=self._blind_reason(payload)
                + "".join(f"; ambiguous name: {n}" for n in notes),
                notes=notes,
                coverage=state,
            )
        digest = payload_digest(payload)
        # per axis: (axis, its rotation key, start position, the feasible shifts from there)
        rotations: list[tuple[Axis, str, int, list[tuple[int, dict[str, str]]]]] = []
        for axis in self.axes:
            groups = present.get(axis.name)
            if not groups or len(axis.groups) < 2:
                continue
            order = self.rotation_order(axis.name)
            span = len(order) - 1
            offset = 0
            key = rotation_key(axis.name, groups)
            if coverage is not None:
                # a set of groups not probed before starts where the axis's count stands
                start = state.get(key, state.get(axis.name, 0))
                if origin is not None:
                    offset = random.Random(f"{self.seed}:{origin}:{axis.name}:origin").randrange(
                        span
                    )
            else:
                start = random.Random(f"{self.seed}:{digest}:{axis.name}:start").randrange(span)
            picks = []
            for step in range(span):
                pi = shift_permutation(order, groups, 1 + (offset + start + step) % span)
                if feasible(self._finder, axis, pi, detections):
                    picks.append((step, pi))
            if picks:
                rotations.append((axis, key, start, picks))
        if not rotations:
            return CounterfactualSet(
                status="not_applicable",
                detections=detections,
                variants=(),
                reason="protected terms were found but none has a counterpart in another group",
                notes=notes,
                coverage=state,
            )
        # the least advanced axis first, so with k below the number of axes each is served
        rotations.sort(key=lambda r: r[2] if coverage is not None else 0)
        slots = [
            (axis, pick)
            for row in itertools.zip_longest(*[[(a, p) for p in ps] for a, _, _, ps in rotations])
            for axis, pick in (c for c in row if c is not None)
        ]
        variants: list[Variant] = []
        walked: dict[str, int] = {}
        draw = 0
        while len(variants) < k:
            produced = False
            for axis, (step, pi) in slots:
                if len(variants) == k:
                    break
                if draw == 0:
                    walked[axis.name] = step + 1
                applied = self._swap(payload, detections, digest, axis, pi, draw)
                if not applied.substitutions:
                    continue
                produced = True
                variants.append(
                    Variant(applied.payload, applied.mapping, applied.substitutions, draw)
                )
            if not produced:
                break
            draw += 1
        for axis, key, start, _ in rotations:
            if axis.name in walked:
                state[key] = start + walked[axis.name]
                state[axis.name] = state.get(axis.name, 0) + walked[axis.name]
        if joint and variants:
            first = {axis.name: picks[0][1] for axis, _, _, picks in rotations}
            heads = [(axis, first[axis.name]) for axis in self.axes if axis.name in first]
            together = self._joint(payload, detections, digest, heads)
            if together is not None:
                variants.append(together)
        if per_person and variants:
            for axis, _, _, picks in rotations:
                for step, pi in picks:
                    if step < walked.get(axis.name, 0):
                        variants.extend(self._per_person(payload, detections, digest, axis, pi))
        if not variants:
            return CounterfactualSet(
                status="not_applicable",
                detections=detections,
                variants=(),
                reason="protected terms were found but no swap changes the payload",
                notes=notes,
                coverage=state,
            )
        return CounterfactualSet(
            "applicable", detections, tuple(variants), notes=notes, coverage=state
        )

    def _swap(
        self,
        payload: Any,
        detections: Sequence[Detection],
        digest: str,
        axis: Axis,
        pi: dict[str, str],
        draw: int | str,
    ) -> Variant:
        """``payload`` with ``axis``'s groups moved by ``pi``, names drawn for draw ``draw``.

        The names' generator is seeded by the run's seed, the payload's digest, the axis, the
        permutation and the draw (a number, or ``"joint"`` for the joint variant).
        """
        rng = random.Random(f"{self.seed}:{digest}:{axis.name}:{sorted(pi.items())}:{draw}")
        names = name_map(self._finder, payload, detections, axis.name, pi, rng)
        mapping = CounterfactualMapping(axis=axis.name, groups=ordered_pairs(axis, pi), names=names)
        return rewrite(self._finder, payload, mapping, detections)

    def _per_person(
        self,
        payload: Any,
        detections: Sequence[Detection],
        digest: str,
        axis: Axis,
        pi: dict[str, str],
    ) -> list[Variant]:
        """One variant per person of ``axis`` moving that person alone by ``pi`` (maybe none).

        Due when the persons named on ``axis`` (name keys in payload order) are of two or more
        groups and ``pi`` maps their groups onto themselves; each person's names are drawn by
        :func:`~biasbreaker.probe.variants.name_map` from their own detections, seeded by the
        run's seed, the payload's digest, the axis, the person's move and the person.

        Raises:
            Unattributed: A term of ``axis`` belongs to no one person (:func:`_attribute`).
        """
        persons: dict[str, str] = {}
        for d in detections:
            if d.kind == "name" and d.axis == axis.name and len(d.groups) == 1:
                key = self._key_of(d)
                if key:
                    persons.setdefault(key, d.groups[0])
        named = set(persons.values())
        if len(named) < 2 or {pi.get(g, g) for g in named} != named:
            return []
        _attribute(payload, detections, axis.name, persons, self._key_of)
        out: list[Variant] = []
        for person, group in persons.items():
            own = [
                d
                for d in detections
                if d.kind == "name"
                and d.axis == axis.name
                and (d.name or self._finder.name_key(d.surface)) == person
            ]
            move = {group: pi[group]}
            rng = random.Random(f"{self.seed}:{digest}:{axis.name}:{move}:person:{person}")
            names = name_map(self._finder, payload, own, axis.name, move, rng)
            others = {norm(w) for p in persons if p != person for w in p.split()}
            shared = {src for src, _ in names if " " not in src and norm(src) in others}
            for word in sorted(shared):
                if _alone(payload, detections, word):
                    raise Unattributed(
                        f"the name {word!r} of {person!r} is also a name of another person the "
                        f"input names ({', '.join(p for p in persons if p != person)}) and "
                        "stands alone in it, so a variant moving "
                        f"{person!r} alone on axis {axis.name!r} cannot tell whose it is"
                    )
            # a word two persons share (Joseph Cervantes, Joseph Phan) moves in full names only
            names = tuple((src, dst) for src, dst in names if src not in shared)
            mapping = CounterfactualMapping(
                axis=axis.name, groups=((group, pi[group]),), names=names, person=person
            )
            applied = rewrite(self._finder, payload, mapping, detections)
            if applied.substitutions:
                out.append(applied)
        return out

    def _key_of(self, d: Detection) -> str:
        """A name detection's name key (the person it names), ``""`` when there is none."""
        return d.name or self._finder.name_key(d.surface) or ""

    def _joint(
        self,
        payload: Any,
        detections: Sequence[Detection],
        digest: str,
        heads: Sequence[tuple[Axis, dict[str, str]]],
    ) -> Variant | None:
        """The variant moving every axis of ``heads`` by its permutation, one after another.

        Each step rewrites the previous step's payload, its mentions detected afresh once it
        has changed (a gender swap's new first name is what the race swap replaces; the
        first step reads ``detections``, the payload's own). ``None`` when fewer than two
        steps change the payload.
        """
        current: Any = payload
        found: Sequence[Detection] | None = detections
        steps: list[CounterfactualMapping] = []
        substitutions: list[Substitution] = []
        for axis, pi in heads:
            if found is None:
                found = self.detect(current)
            applied = self._swap(current, found, digest, axis, pi, "joint")
            if not applied.substitutions:
                continue
            current, found = applied.payload, None
            steps.append(applied.mapping)
            substitutions.extend(applied.substitutions)
        if len(steps) < 2:
            return None
        return Variant(current, CounterfactualMapping.joint(steps), tuple(substitutions))

    def rotation_order(self, axis: str) -> tuple[str, ...]:
        """The fixed order of an axis's groups the covering rotation shifts along.

        A shuffle of the axis's groups from the seed and the axis name only (never the
        payload), so one node's probes rotate along one order whatever their inputs say.

        Raises:
            KeyError: ``axis`` is not in the term set.
        """
        groups = list(self.terms.axis(axis).groups)
        random.Random(f"{self.seed}:{axis}:rotation").shuffle(groups)
        return tuple(groups)

    def to_group(self, payload: Any, axis: str, group: str) -> Variant:
        """Set every mention of an axis to one group (LangFair's ``male_prompt`` style).

        Unlike :meth:`generate`, which permutes groups, this sends every mentioned group of
        ``axis`` to ``group``; a text mentioning both genders becomes all-female. The result
        can be mapped back only if at most one group was moved.

        Args:
            payload: The payload.
            axis: Axis name.
            group: Target group of that axis.

        Returns:
            The variant (its payload equals the input when nothing was moved).

        Raises:
            KeyError: Unknown axis or group.
            KeyClash: Two keys of one dict would become one (a ``ValueError``: two groups
                sent to one make that likelier, ``{"Mr. Lee": …, "Ms. Lee": …}``).
        """
        ax = self.terms.axis(axis)
        if group not in ax.groups:
            raise KeyError(
                f"group {group!r} is not a group of axis {axis!r}: {', '.join(ax.groups)}"
            )
        detections = self.detect(payload)
        present = present_groups(detections).get(axis, set())
        pi = {g: group for g in ax.groups if g in present and g != group}
        rng = random.Random(f"{self.seed}:{payload_digest(payload)}:{axis}:to:{group}")
        names = name_map(self._finder, payload, detections, axis, pi, rng)
        mapping = CounterfactualMapping(
            axis=axis,
            groups=ordered_pairs(ax, pi),
            names=names,
            invertible=group not in present,
        )
        return self.apply(payload, mapping)

    def apply(self, payload: Any, mapping: CounterfactualMapping) -> Variant:
        """Rewrite a payload with a given mapping.

        Args:
            payload: The payload.
            mapping: What to swap (groups of one axis, names).

        Returns:
            The variant, whose ``mapping`` also records the term choices made (``prefer``),
            for :meth:`map_back`.

        Raises:
            KeyClash: Two keys of one dict would become one (a ``ValueError``).
        """
        return rewrite(self._finder, payload, mapping)

    def map_back(self, payload: Any, mapping: CounterfactualMapping) -> Any:
        """Map a counterfactual output back to the original groups before comparing.

        Applies the inverse of ``mapping``: the swapped groups and names return, and a word
        with several counterparts returns to the one the input had.

        Args:
            payload: An output of the step run on the variant (``str`` or JSON-like).
            mapping: The variant's mapping.

        Returns:
            The payload in the original groups' terms.

        Raises:
            ValueError: The mapping is not one-to-one (see
                :meth:`CounterfactualMapping.inverse`), or mapping the output's keys back would
                make two keys of one dict one (:class:`~biasbreaker.probe.payloads.KeyClash`).
        """
        if mapping.steps:  # a joint mapping: undo its steps, last first
            for step in reversed(mapping.steps):
                payload = self.map_back(payload, step)
            return payload
        inverse = mapping.inverse()
        back = CounterfactualMapping(
            axis=inverse.axis,
            groups=inverse.groups,
            names=inverse.names,
            prefer=mapping.prefer,
            person=inverse.person,
        )
        return rewrite(self._finder, payload, back).payload

    def neutralise(
        self, payload: Any, *, axes: Sequence[str] | None = None, names: bool = True
    ) -> Any:
        """Replace protected mentions by group-neutral words (LangFair's ``neutralize_tokens``).

        Gender terms become their neutral form (``he`` → ``they``, ``his`` → ``their``,
        ``her`` → ``their``/``them`` by grammar, ``wife`` → ``spouse``); terms of other axes,
        and names when ``names`` is true, become ``[MASK]``; ages keep their number.

        Args:
            payload: The payload.
            axes: Axes to neutralise (default: all of this generator's).
            names: Whether names are masked too.

        Returns:
            The neutralised payload (``str`` dict keys neutralised like values).

        Raises:
            KeyClash: Two keys of one dict would become one (a ``ValueError``).
        """
        chosen = frozenset(axes) if axes is not None else frozenset(a.name for a in self.axes)

        def rewrite(path: Path, text: str) -> str:
            del path
            out: list[str] = []
            pos = 0
            for hit in self._finder.scan(text):
                if hit.kind == "age":
                    continue
                if hit.kind == "name":
                    info = self._finder.name_info(hit.name)
                    if (
                        not names
                        or info is None
                        or not (
                            (info.gender and "gender" in chosen) or (info.race and "race" in chosen)
                        )
                    ):
                        continue
                    repl = MASK
                else:
                    if hit.axis not in chosen:
                        continue
                    repl = neutral_form(self.terms, text, hit)
                out.append(text[pos : hit.start])
                out.append(repl)
                pos = hit.end
            out.append(text[pos:])
            return "".join(out)

        return rebuild(payload, rewrite)
