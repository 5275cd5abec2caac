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
* reports a payload without protected mentions as *not applicable* (fairness through
  unawareness: there is nothing to swap), never as "no bias".

Payloads are ``str``, ``dict`` (values are rewritten, keys are not), ``list`` and ``tuple``,
nested; other values pass through untouched. The text is never lower-cased: only the swapped
words change, and each takes the capitalisation of the word it replaces (``He`` → ``She``,
``HIS`` → ``HER``).

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
* Ages: ``22-year-old`` ↔ ``78-year-old`` (``n`` ↔ ``100 − n`` for ``n ≤ 39`` or ``n ≥ 61``).

This module is the facade; the work is split by concern: :mod:`~biasbreaker.probe.mentions`
(finding mentions), :mod:`~biasbreaker.probe.variants` (choosing variants),
:mod:`~biasbreaker.probe.rewriting` (rewriting text), :mod:`~biasbreaker.probe.mapping` (the
mapping and its inverse, for mapping back), :mod:`~biasbreaker.probe.names` (name data) and
:mod:`~biasbreaker.probe.payloads` (walking JSON-like payloads).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

from biasbreaker.probe.mapping import (
    CounterfactualMapping,
    CounterfactualSet,
    Detection,
    Substitution,
    Variant,
    present_groups,
)
from biasbreaker.probe.mentions import MentionFinder
from biasbreaker.probe.payloads import Path, payload_digest, rebuild
from biasbreaker.probe.rewriting import MASK, neutral_form, rewrite
from biasbreaker.probe.terms import Axis, TermSet
from biasbreaker.probe.variants import candidate_permutations, feasible, name_map, ordered_pairs

__all__ = [
    "CounterfactualGenerator",
    "CounterfactualMapping",
    "CounterfactualSet",
    "Detection",
    "Path",
    "Substitution",
    "Variant",
    "payload_digest",
]


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

    # ------------------------------------------------------------------ generation
    def generate(self, payload: Any, k: int) -> CounterfactualSet:
        """Draw ``k`` counterfactual variants of a payload.

        Each variant permutes the groups of one axis mentioned in the payload. Candidate
        permutations are shuffled per axis from the seed and the payload, then taken round
        robin across axes (in axis order) so the variants cover every mentioned axis; when
        there are fewer distinct permutations than ``k``, they are drawn again (``draw`` 1,
        2, …) with fresh names.

        Args:
            payload: ``str`` or a nested ``dict``/``list``/``tuple`` of them.
            k: Number of variants, >= 1.

        Returns:
            ``k`` variants, or a ``not_applicable`` set when nothing can be swapped.

        Raises:
            ValueError: ``k < 1``.
        """
        if k < 1:
            raise ValueError(f"k={k!r} must be >= 1 (the number of counterfactual variants)")
        detections = self.detect(payload)
        present = present_groups(detections)
        notes = self._finder.ambiguities(payload)
        if not present:
            return CounterfactualSet(
                status="not_applicable",
                detections=detections,
                variants=(),
                reason=(
                    "no protected term or name of axes "
                    f"{', '.join(a.name for a in self.axes)} found: the payload is group-blind "
                    "(fairness through unawareness), so a counterfactual test does not apply"
                    + "".join(f"; ambiguous name: {n}" for n in notes)
                ),
                notes=notes,
            )
        digest = payload_digest(payload)
        per_axis: list[list[tuple[str, dict[str, str]]]] = []
        for axis in self.axes:
            groups = present.get(axis.name)
            if not groups:
                continue
            rng = random.Random(f"{self.seed}:{digest}:{axis.name}:order")
            cands = [
                (axis.name, pi)
                for pi in candidate_permutations(axis.groups, groups, rng)
                if feasible(self._finder, axis, pi, detections)
            ]
            if cands:
                per_axis.append(cands)
        if not per_axis:
            return CounterfactualSet(
                status="not_applicable",
                detections=detections,
                variants=(),
                reason="protected terms were found but none has a counterpart in another group",
                notes=notes,
            )
        round_robin = [c for row in itertools.zip_longest(*per_axis) for c in row if c is not None]
        variants: list[Variant] = []
        draw = 0
        while len(variants) < k:
            produced = False
            for axis_name, pi in round_robin:
                if len(variants) == k:
                    break
                rng = random.Random(f"{self.seed}:{digest}:{axis_name}:{sorted(pi.items())}:{draw}")
                names = name_map(self._finder, payload, detections, axis_name, pi, rng)
                mapping = CounterfactualMapping(
                    axis=axis_name,
                    groups=ordered_pairs(self.terms.axis(axis_name), pi),
                    names=names,
                )
                applied = rewrite(self._finder, payload, mapping, detections)
                if not applied.substitutions:
                    continue
                produced = True
                variants.append(
                    Variant(applied.payload, applied.mapping, applied.substitutions, draw)
                )
            if not produced:
                break
            draw += 1
        if not variants:
            return CounterfactualSet(
                status="not_applicable",
                detections=detections,
                variants=(),
                reason="protected terms were found but no swap changes the payload",
                notes=notes,
            )
        return CounterfactualSet("applicable", detections, tuple(variants), notes=notes)

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
                :meth:`CounterfactualMapping.inverse`).
        """
        inverse = mapping.inverse()
        back = CounterfactualMapping(
            axis=inverse.axis,
            groups=inverse.groups,
            names=inverse.names,
            prefer=mapping.prefer,
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
            The neutralised payload.
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
