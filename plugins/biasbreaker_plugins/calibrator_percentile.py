"""The ``percentile`` calibrator: thresholds from a finite-sample (conformal) quantile.

Given ``n`` control runs summarised by the maximum of their *trip statistic*, ``M_1 … M_n``,
and a target per-run false-halt rate ``α``, it sets

    k = ⌈(n + 1)(1 − α)⌉,    tau_enter = the smallest float above M_(k)

(``M_(k)`` the k-th smallest maximum). The trip statistic of a step is what the control machine
compares with ``tau_enter``: fast B_net, or with node trips on (``[breaker] node_trip``) the
larger of fast B_net and the guarded step's own local score. The kernel computes it
(:meth:`biasbreaker.calibration.ControlStep.trip`) and hands this calibrator ``(trip statistic,
slow B_net)`` pairs. **Guarantee:** if a new control run is exchangeable with the ``n``
calibration runs (e.g. all i.i.d.), then

    P(max trip statistic of the new run >= tau_enter) <= (n + 1 − k) / (n + 1) <= α,

the probability taken over the calibration runs and the new run together. A closed breaker
trips at a step exactly when that step's trip statistic reaches ``tau_enter`` — by the network
trigger (fast B_net) or, with node trips on, by the node trigger (the own score) — so a run
that trips at all has a maximum ``>= tau_enter``: the expected per-run false-halt rate of the
combined trigger on new control runs is at most ``α``. (Only for the own scores the control
runs carry: with node trips on and no own score recorded, the bound covers fast B_net only.)
Proof sketch:
the new run trips only if its maximum is strictly above ``M_(k)``, hence strictly above at
least ``k`` of the other ``n`` maxima; among any ``n + 1`` values at most ``n + 1 − k`` are
strictly above ``k`` others, and by exchangeability the new run is any one of the ``n + 1``
with equal probability. Ties are harmless because ``tau_enter`` sits strictly above
``M_(k)``. If the maxima have no ties the rate is also at least ``α − 1 / (n + 1)``, so the
bound is tight.

``k <= n`` needs ``n >= (1 − α) / α`` runs (99 for 1 %, 19 for 5 %); with fewer, no order
statistic of the sample guarantees the target, and the calibrator says how many are needed.

**A point mass at 0.** When ``M_(k) = 0`` but some maxima are positive (control runs that are
exactly 0 except for rare events, e.g. a deterministic model that seldom changes its answer),
the smallest float above 0 would make ``tau_exit`` underflow; any threshold above ``M_(k)``
keeps the guarantee (the proof only needs ``tau_enter > M_(k)``), so ``tau_enter`` is then the
smallest positive maximum: the same runs trip on the calibration sample, at most ``n − k`` of
them.

**No spread at 0.** If every maximum on a scale is 0 (a deterministic pipeline whose answers
never change under a counterfactual swap: every control step scores exactly 0), the quantile
gives no scale at all, and any positive threshold keeps the guarantee (no control run reaches
it). The threshold is then the floor ``[calibration] zero_floor`` (default 0.05; on the slow
scale ``zero_floor x`` :data:`~biasbreaker.calibration.ZERO_WARN_RATIO`, half of it, so that
``tau_warn`` lies below ``tau_exit`` rather than at ``tau_enter``), with a
:class:`~biasbreaker.calibration.CalibrationWarning` saying what it means: any step whose trip
statistic reaches the floor trips, so on such a pipeline a single node whose answer changes under
a swap trips the breaker, and so does a fresh control run on inputs the control runs did not
cover if the pipeline answers them less steadily.

``tau_exit = exit_ratio · tau_enter``. ``tau_warn = warn_ratio ·`` the same conformal bound
computed on the runs' slow-B_net maxima (the slow scale only: own scores never enter it), so
with ``warn_ratio = 1`` the per-run rate of drift warnings on control runs is also at most
``α``.

Source:
    Vovk, Gammerman & Shafer (2005), *Algorithmic Learning in a Random World*, ch. 2
    (conformal prediction); Angelopoulos & Bates (2021), "A Gentle Introduction to Conformal
    Prediction and Distribution-Free Uncertainty Quantification", arXiv:2107.07511, §1 (the
    conformal coverage guarantee, proved in the paper's appendix). Phase 3 design (M3), R6
    and WP6.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from fractions import Fraction

from biasbreaker.calibration import (
    ZERO_WARN_RATIO,
    CalibratedThresholds,
    CalibrationWarning,
    Trajectory,
)
from biasbreaker.errors import ThresholdError
from biasbreaker.hookspecs import hookimpl
from biasbreaker.registry import BuildContext, NoOptions, Register


def _exact(alpha: float) -> Fraction:
    # Use the decimal the user wrote (0.01 is 1/100), not the nearest binary float.
    return Fraction(repr(alpha))


def conformal_rank(n: int, alpha: float) -> int:
    """Return ``k = ⌈(n + 1)(1 − α)⌉``, the rank of the conformal upper bound.

    Args:
        n: Number of calibration runs, >= 1.
        alpha: Target rate, in (0, 1).

    Returns:
        ``k``, in 1..n+1 (``k = n + 1`` means the sample is too small).
    """
    return math.ceil((n + 1) * (1 - _exact(alpha)))


def required_runs(alpha: float) -> int:
    """Return the fewest calibration runs for which the conformal bound exists: ⌈(1 − α)/α⌉."""
    exact = _exact(alpha)
    return max(1, math.ceil((1 - exact) / exact))


_SCALES = {
    "fast": "fast B_net",
    "slow": "slow B_net",
    "trip": "trip-statistic (fast B_net, or with node trips the larger of it and the step's own "
    "score)",
}


def conformal_upper_bound(
    maxima: Sequence[float], alpha: float, *, scale: str, zero_floor: float | None = None
) -> float:
    """Return the smallest float strictly above the conformal quantile of ``maxima``.

    Args:
        maxima: Per-run maxima, one float >= 0 per calibration run.
        alpha: Target per-run exceedance rate, in (0, 1).
        scale: ``"trip"``, ``"fast"`` or ``"slow"``: what the maxima are of, for error
            messages.
        zero_floor: The threshold when every maximum is 0, in (0, 1]; ``None``: that is an
            error.

    Returns:
        The threshold: a new exchangeable run's maximum reaches it with probability <= alpha.
        When the quantile is 0 and some maximum is positive, the smallest positive maximum;
        when every maximum is 0, ``zero_floor`` (see the module docstring).

    Raises:
        ThresholdError: If there are too few runs for ``alpha`` (the message gives the number
            needed), or every maximum is 0 and no ``zero_floor`` is given.
    """
    n = len(maxima)
    k = conformal_rank(n, alpha)
    if k > n:
        needed = required_runs(alpha)
        raise ThresholdError(
            f"{n} control runs are too few for a per-run false-halt rate of {alpha}: the "
            f"conformal bound needs at least {needed} runs (⌈(1 − α)/α⌉); record "
            f"{needed - n} more control runs, or raise the target to at least "
            f"{1 / (n + 1):.4g}"
        )
    quantile = sorted(maxima)[k - 1]
    if quantile <= 0.0:
        positive = [m for m in maxima if m > 0.0]
        if positive:
            return min(positive)
        if zero_floor is not None:
            return zero_floor
        label = _SCALES.get(scale, scale)
        raise ThresholdError(
            f"all {n} control runs' {label} maxima are 0: the control runs never move on "
            "this scale, so no threshold separates them from anything; check that the "
            "control runs exercise the probe"
        )
    return math.nextafter(quantile, math.inf)


class PercentileCalibrator:
    """Finite-sample conformal calibration of the breaker's thresholds (module docstring).

    Args:
        exit_ratio: ``tau_exit / tau_enter``, in [0.6, 0.8].
        warn_ratio: Multiplier of the slow-scale bound, in (0, 1].
        zero_floor: The bound on the trip scale when its every control maximum is 0, in (0,
            0.5]; a slow scale whose every maximum is 0 gets ``zero_floor x ZERO_WARN_RATIO``.

    Raises:
        ThresholdError: If a ratio or the floor is out of range.
    """

    def __init__(
        self, exit_ratio: float = 0.7, warn_ratio: float = 1.0, zero_floor: float = 0.05
    ) -> None:
        if not 0.6 <= exit_ratio <= 0.8:
            raise ThresholdError(f"exit_ratio={exit_ratio!r} must be in [0.6, 0.8]")
        if not 0.0 < warn_ratio <= 1.0:
            raise ThresholdError(f"warn_ratio={warn_ratio!r} must be in (0, 1]")
        if not 0.0 < zero_floor <= 0.5:
            raise ThresholdError(f"zero_floor={zero_floor!r} must be in (0, 0.5]")
        self.exit_ratio = exit_ratio
        self.warn_ratio = warn_ratio
        self.zero_floor = zero_floor

    def calibrate(
        self, trajectories: Sequence[Trajectory], *, target_false_halt_rate: float
    ) -> CalibratedThresholds:
        """Choose ``(tau_enter, tau_exit, tau_warn)`` from control runs.

        Args:
            trajectories: One sequence of ``(trip statistic, slow B_net)`` pairs per control
                run (the kernel's :data:`~biasbreaker.calibration.Trajectory`; the trip
                statistic is fast B_net when node trips are off).
            target_false_halt_rate: ``α``, the per-run false-halt rate to stay under, (0, 1).

        Returns:
            The thresholds.

        Raises:
            ThresholdError: If there are too few runs for ``α`` or a quantile is 0.
        """
        trip_maxima = [max(trip for trip, _ in run) for run in trajectories]
        slow_maxima = [max(slow for _, slow in run) for run in trajectories]
        floor = self.zero_floor
        alpha = target_false_halt_rate
        tau_enter = conformal_upper_bound(trip_maxima, alpha, scale="trip", zero_floor=floor)
        slow_bound = conformal_upper_bound(
            slow_maxima, alpha, scale="slow", zero_floor=floor * ZERO_WARN_RATIO
        )
        tau_warn = self.warn_ratio * slow_bound
        floored = [
            name
            for name, maxima in (("tau_enter", trip_maxima), ("tau_warn", slow_maxima))
            if not any(maxima)
        ]
        if floored:
            message = _floor_warning(floored, floor, len(trajectories))
            warnings.warn(message, CalibrationWarning, stacklevel=2)
        return CalibratedThresholds(tau_enter, self.exit_ratio * tau_enter, tau_warn)


def _floor_warning(floored: Sequence[str], floor: float, runs: int) -> str:
    """What a threshold at ``[calibration] zero_floor`` means (see the module docstring)."""
    scales = {
        "tau_enter": "the trip statistic (fast B_net, and the steps' own scores with node trips)",
        "tau_warn": "slow B_net",
    }
    which = " and ".join(scales[name] for name in floored)
    return (
        f"every one of the {runs} control runs scores exactly 0 on {which}: a deterministic "
        "pipeline whose answers never change under a counterfactual swap, so the conformal "
        f"quantile is 0 and gives no scale; {' and '.join(floored)} set from the floor "
        f"[calibration] zero_floor = {floor:g} (tau_exit = exit_ratio x tau_enter, tau_warn = "
        f"warn_ratio x zero_floor x {ZERO_WARN_RATIO:g}, below tau_exit, so a drift warning can "
        "come before a trip). Any step that reaches it trips (or warns): on this pipeline "
        "that is any answer that changes under a swap by that much, which a fair pipeline's "
        "control runs never showed. If fresh control runs trip, the pipeline is less steady on "
        "them than on these inputs: record control runs on more varied inputs, or raise "
        "zero_floor to trip only on larger changes"
    )


def make_percentile(options: NoOptions, context: BuildContext) -> PercentileCalibrator:
    """Factory: ``exit_ratio``, ``warn_ratio`` and ``zero_floor`` come from ``[calibration]``."""
    settings = context.settings.calibration
    return PercentileCalibrator(settings.exit_ratio, settings.warn_ratio, settings.zero_floor)


@hookimpl
def calibrator(register: Register[object]) -> None:
    """Register the ``percentile`` calibrator."""
    register(
        "percentile",
        make_percentile,
        summary="conformal quantile of per-run maxima of the trip statistic: "
        "P(new control run trips) <= target",
    )


__all__ = [
    "PercentileCalibrator",
    "calibrator",
    "conformal_rank",
    "conformal_upper_bound",
    "make_percentile",
    "required_runs",
]
