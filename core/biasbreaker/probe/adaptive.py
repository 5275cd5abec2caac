"""Adaptive probing: a first stage of a probe's re-runs, the rest only when it is not clean.

A full probe re-runs a step on ``k`` counterfactual variants (one more for the joint variant,
one more per person for per-person variants) and ``r`` same-group resamples. With adaptive
probing (``[probe] adaptive = true``) the probe draws exactly the variants of the full probe
(the same rotation, names and seeds) and runs them in two stages:

1. *first stage*: the first ``first`` variants of the covering rotation and their same-group
   twins, resamples ``1 … min(r, first)`` (variant ``j`` is paired with resample
   ``1 + (j mod r)``, so these are the twins of variants ``0 … first − 1``); the local score
   of these runs is computed with the probe's own estimator (``clip(D_cf − D_same, 0, 1)``
   per swap, the largest swap's);
2. *second stage*: when the first stage's score is above ``stop_below``, every other re-run of
   the full draw (the other rotation variants, the joint and per-person variants, the other
   resamples), and the step is scored on all of them: the full probe's result, its calls
   split over two stages.

The stopping rule is a pure function of the outputs (the first stage's score against a fixed
bound), so a run is as deterministic as with full probing. The full probe always runs when
the caller forces it (the LangGraph guard and the LangChain middleware do while the breaker is
not NORMAL; a repair's re-check always does), and when the first stage would already run every
re-run of the draw.

The rotation. A probe that stops after the first stage has compared the input with the groups
of its first-stage variants only, so the node's covering rotation advances by those slots, not
by the full draw's (:attr:`FirstStage.coverage`): the groups it did not compare come first in
the next probe of the node naming those groups. The rotation is kept per set of groups an input
names (:func:`~biasbreaker.probe.variants.rotation_key`), so every other group of an axis with
``N`` groups is compared with the groups an input names within ``ceil((N − 1) · A / first)``
probes of the node on inputs naming them (of the same ``A`` axes; each probe advances their
rotation by at least ``first`` slots, a full probe by ``k``), instead of
``ceil((N − 1) · A / k)``, whatever the node's other inputs name in between
(docs/detection.md, "Every group covered" and "Adaptive probing").

Cost. A clean first stage costs ``first + min(r, first)`` re-runs instead of ``k + r`` (one
more with a joint variant, one more per person with per-person variants): 2 at the default
``first = 1`` with ``r >= 1``. A step whose first stage is not clean costs the full probe's
re-runs, in two rounds (with speculative probing the first stage starts beside the step's own
call, the second after the first is scored).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from biasbreaker.errors import InputError

__all__ = [
    "FIRST_STAGE",
    "FULL_PROBE",
    "Adaptive",
    "FirstStage",
    "first_resamples",
    "report_note",
    "stop_sentence",
]

FIRST_STAGE: Final = 1
"""``ProbeResult.stage`` of a step whose probe stopped after the first stage."""

FULL_PROBE: Final = 2
"""``ProbeResult.stage`` of a step whose probe ran the full draw with adaptive probing on."""


@dataclass(frozen=True)
class Adaptive:
    """The sequential test of adaptive probing.

    Args:
        first: Rotation variants of the first stage, an integer >= 1 (``[probe]
            adaptive_first``).
        stop_below: The first stage stops the probe when its local score is at most this,
            a number in [0, 1) (``[probe] adaptive_stop``).

    Raises:
        InputError: An argument is out of range (the message names it and the fix).
    """

    first: int = 1
    stop_below: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.first, bool) or not isinstance(self.first, int) or self.first < 1:
            raise InputError(
                f"adaptive first={self.first!r} must be an integer >= 1 (the rotation variants "
                "of the first stage); use 1 for the cheapest first stage"
            )
        stop = self.stop_below
        if isinstance(stop, bool) or not isinstance(stop, (int, float)) or not 0.0 <= stop < 1.0:
            raise InputError(
                f"adaptive stop_below={stop!r} must be a number in [0, 1) (the first stage's "
                "largest local score that stops the probe); use 0 to stop only on a first "
                "stage with no excess at all"
            )


@dataclass(frozen=True)
class FirstStage:
    """The first stage of an adaptive probe's draw (:meth:`Probe.draw`).

    Args:
        variants: The first ``variants`` variants of the draw run first (rotation variants).
        resamples: Same-group resamples ``1 … resamples`` run first (the variants' twins).
        coverage: The node's covering rotation after the first-stage variants alone: the
            probe's coverage when it stops there.
    """

    variants: int
    resamples: int
    coverage: Mapping[str, int] = field(default_factory=dict)


def first_resamples(variants: int, r: int) -> int:
    """The resamples a first stage of ``variants`` variants needs: ``min(r, variants)``.

    Variant ``j`` runs with, and is compared against, resample ``1 + (j mod r)``
    (:mod:`biasbreaker.probe.probe`); for ``j < variants`` these are resamples ``1 …
    min(r, variants)``, their twins. With ``r = 0`` there is no twin.
    """
    return min(r, variants)


def stop_sentence(stage: int, score: float, stop_below: float, why: str = "") -> str:
    """What the trace says of an adaptive probe's stage (``ProbeResult.stage_reason``).

    Args:
        stage: :data:`FIRST_STAGE` or :data:`FULL_PROBE`.
        score: The first stage's local score (ignored when ``why`` is given).
        stop_below: The bound it was compared with.
        why: For a full probe that had no first stage, why (the breaker's state, every
            re-run in the first stage); empty when the first stage ran.
    """
    if why:
        return f"adaptive: full probe, {why}"
    if stage == FIRST_STAGE:
        return (
            f"adaptive: stopped after the first stage, its score {score:.6g} <= stop {stop_below:g}"
        )
    return f"adaptive: full probe, the first stage scored {score:.6g} > stop {stop_below:g}"


def report_note(probe: Mapping[str, object]) -> str:
    """What a run's report says of adaptive probing, from its ``[probe]`` settings (a dict).

    Returns:
        Empty when ``adaptive`` is off; else a sentence (leading space) naming the first
        stage and the stop, for the report's line on the probe.
    """
    if not probe.get("adaptive"):
        return ""
    return (
        f" **Adaptive probing on**: a first stage of {probe['adaptive_first']} rotation "
        f"variant(s) and their same-group twins, the full probe only when it scores above "
        f"{probe['adaptive_stop']:g} (always while the breaker is not NORMAL and in "
        "re-checks); each step's trace says where its probe stopped (docs/detection.md, "
        "'Adaptive probing')."
    )
