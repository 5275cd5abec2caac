"""Choosing thresholds from control runs: the configured calibrator and the kernel's checks.

:func:`calibrate_thresholds` (and :func:`calibrate`, which also reports) hands the control runs
to the configured ``calibrator`` plugin (first-party: ``percentile``, a finite-sample conformal
quantile of the per-run maxima). The false-halt rate is *per run*: the share of control runs
that ever trip the breaker. What trips is the *trip statistic* of a step: fast B_net, or, with
node trips on (``[breaker] node_trip``), the larger of fast B_net and the guarded step's own
local score — the calibrator sees that statistic, so the threshold bounds the trigger the
machine actually uses. The kernel checks whatever a calibrator returns
(:func:`check_calibration`): consistent thresholds, and an empirical per-run false-halt rate on
the given control runs at most the target.

Source:
    Phase 3 design (M3), R6 and WP6; ``docs/control.md`` §5.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

from biasbreaker.calibration.runs import (
    ControlSample,
    false_halt_rate,
    normalise_control_runs,
    summarise_normalised,
)
from biasbreaker.errors import InputError, ThresholdError
from biasbreaker.types import ControlStatistics, JSONValue, Thresholds

if TYPE_CHECKING:
    from biasbreaker.kernel import Kernel


class CalibrationWarning(UserWarning):
    """The calibration ran, but covers less than asked (e.g. node trips without own scores)."""


class CalibratedThresholds(NamedTuple):
    """Thresholds chosen from control runs: ``(tau_enter, tau_exit, tau_warn)``."""

    tau_enter: float
    tau_exit: float
    tau_warn: float


Trajectory = Sequence[tuple[float, float]]
"""One control run as a calibrator sees it: ``(trip statistic, slow B_net)`` pairs in step order.

The trip statistic is fast B_net, or with node trips on the larger of fast B_net and the
step's own local score (:meth:`ControlStep.trip`): the value the machine compares with
``tau_enter``."""


class Calibrator(Protocol):
    """What a ``calibrator`` plugin's factory returns."""

    def calibrate(
        self, trajectories: Sequence[Trajectory], *, target_false_halt_rate: float
    ) -> CalibratedThresholds:
        """Choose thresholds from control runs.

        Args:
            trajectories: One sequence of ``(trip statistic, slow)`` pairs per control run
                (see :data:`Trajectory`; validated by the kernel: in [0, 1], every run
                non-empty). ``tau_enter`` bounds the first, ``tau_warn`` the second.
            target_false_halt_rate: Per-run false-halt rate to stay under, in (0, 1).

        Returns:
            ``(tau_enter, tau_exit, tau_warn)``.

        Raises:
            ThresholdError: If the runs cannot support the target (e.g. too few runs; the
                message says how many are needed).
        """
        ...


@dataclass(frozen=True, slots=True)
class CalibrationReport:
    """The outcome of a calibration, as printed by ``biasbreaker calibrate``.

    Args:
        thresholds: ``(tau_enter, tau_exit, tau_warn)``.
        statistics: Mean and std of fast B_net over the control steps (the window's bands).
        n_runs: Number of control runs.
        target_false_halt_rate: The requested per-run rate.
        empirical_false_halt_rate: Share of the given control runs whose trip statistic
            reaches ``tau_enter`` (always at most the target; the kernel checks it).
        calibrator: Name of the calibrator used.
        node_trip: Whether the calibrated trigger includes the steps' own scores (the
            machine's ``node_trip``).
        own_scores: Control steps that carried an own score (with ``node_trip`` and none,
            the thresholds bound fast-B_net trips only).
        zero_floor: The thresholds (``"tau_enter"``, ``"tau_warn"``) whose scale is exactly 0
            on every control run, so that no quantile gives them a scale: the ``percentile``
            calibrator then sets them from ``[calibration] zero_floor`` (``tau_enter =
            zero_floor``, ``tau_warn = warn_ratio x zero_floor x`` :data:`ZERO_WARN_RATIO`).
            Empty when every scale moved.
    """

    thresholds: CalibratedThresholds
    statistics: ControlStatistics
    n_runs: int
    target_false_halt_rate: float
    empirical_false_halt_rate: float
    calibrator: str
    node_trip: bool = False
    own_scores: int = 0
    zero_floor: tuple[str, ...] = ()

    def to_json(self) -> dict[str, JSONValue]:
        """Return the report as plain JSON."""
        return {
            "tau_enter": self.thresholds.tau_enter,
            "tau_exit": self.thresholds.tau_exit,
            "tau_warn": self.thresholds.tau_warn,
            "control": self.statistics.to_json(),
            "n_runs": self.n_runs,
            "target_false_halt_rate": self.target_false_halt_rate,
            "empirical_false_halt_rate": self.empirical_false_halt_rate,
            "calibrator": self.calibrator,
            "node_trip": self.node_trip,
            "own_scores": self.own_scores,
            "zero_floor": list(self.zero_floor),
        }


SIGNIFICANT_DIGITS: Final = 4
"""Significant digits the calibrated thresholds and window statistics are kept to.

Four digits are far finer than the sampling error of any calibration (the conformal quantile of
n runs moves by a whole order statistic between samples) and print as what they are
(``0.08351``, not ``0.08350467216930139``)."""


def round_to_digits(value: float, *, up: bool | None, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``value`` rounded to ``digits`` significant digits: up, down, or (``None``) to nearest.

    The rounding is done on the float's shortest decimal form (``repr``: 0.05, not the exact
    binary expansion 0.05000000000000000277, which would round up to 0.05001), and the result
    is the float nearest the rounded decimal. Since that decimal reads back as ``value`` and
    rounding to the nearest float is monotone, rounding up never gives a float below ``value``
    and rounding down never one above it. So a threshold rounded up still lies strictly above
    every value it was strictly above: a recorded control maximum below the calibrated
    ``tau_enter`` stays below the stored one.

    Args:
        value: A finite float >= 0.
        up: ``True``: towards +infinity; ``False``: towards 0; ``None``: to the nearest
            (ties to even).
        digits: Significant digits, >= 1.

    Returns:
        The rounded float (0.0 stays 0.0; a value with at most ``digits`` significant digits,
        such as 0.3, is returned unchanged).
    """
    if value == 0.0:
        return value
    shortest = Decimal(repr(value))
    step = Decimal(1).scaleb(shortest.adjusted() - digits + 1)
    mode = ROUND_HALF_EVEN if up is None else ROUND_CEILING if up else ROUND_FLOOR
    return float(shortest.quantize(step, rounding=mode))


def _check_target(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise ThresholdError(
            f"target_false_halt_rate={value!r} must be in (0, 1): it is the share of control "
            "runs allowed to trip the breaker, e.g. 0.01 for 1 %"
        )
    return float(value)


def check_calibration(
    result: object, sample: ControlSample, *, name: str, target_false_halt_rate: float
) -> CalibratedThresholds:
    """Enforce the kernel's checks on a calibrator's result (fail closed).

    Args:
        result: What the calibrator returned.
        sample: The control runs' summary.
        name: The calibrator's name, for messages.
        target_false_halt_rate: The target per-run rate.

    Returns:
        The thresholds.

    Raises:
        ThresholdError: If the result is not three thresholds, they are inconsistent
            (``tau_enter <= tau_exit``, not positive, not finite, above 1 — B_net's range),
            or ``tau_enter`` halts more than the target share of the control runs.
    """
    if not isinstance(result, tuple) or len(result) != 3:
        raise ThresholdError(
            f"calibrator {name!r} returned {result!r}; expected (tau_enter, tau_exit, tau_warn)"
        )
    try:
        # Any positive kappa validates the three thresholds together.
        checked = Thresholds(result[0], result[1], result[2], kappa=1.0)
    except ThresholdError as exc:
        raise ThresholdError(f"calibrator {name!r} returned invalid thresholds: {exc}") from exc
    for key, value in (("tau_enter", checked.tau_enter), ("tau_warn", checked.tau_warn)):
        if value > 1.0:
            raise ThresholdError(
                f"calibrator {name!r} chose {key}={value!r}, above 1, the largest B_net: the "
                "control runs reach the top of the scale, so no threshold separates them; check "
                "the control runs (are they really unbiased?)"
            )
    assert sample.trip_maxima is not None
    rate = false_halt_rate(sample.trip_maxima, checked.tau_enter)
    if rate > target_false_halt_rate:
        raise ThresholdError(
            f"calibrator {name!r} chose tau_enter={checked.tau_enter!r}, which halts "
            f"{rate:.4f} of the control runs, above the target {target_false_halt_rate}; the "
            "calibrator is broken, choose another one"
        )
    return CalibratedThresholds(checked.tau_enter, checked.tau_exit, checked.tau_warn)


def calibrate(
    control_trajectories: Iterable[Iterable[object]],
    *,
    target_false_halt_rate: float | None = None,
    kernel: Kernel | None = None,
    node_trip: bool | None = None,
) -> CalibrationReport:
    """Calibrate thresholds and the window statistics from control runs, with a full report.

    Dispatches to the configured ``calibrator`` plugin (``[calibration] calibrator``, default
    ``percentile``) and checks its result (see :func:`check_calibration`). The calibrator gets
    each step's *trip statistic* (:meth:`ControlStep.trip`): fast B_net, or with node trips
    the larger of fast B_net and the step's own score, so ``tau_enter`` bounds the trigger
    the machine uses. With node trips on and no own score in the control runs, the thresholds
    bound fast-B_net trips only (the report's ``own_scores`` is 0 and a
    :class:`CalibrationWarning` says so).

    Args:
        control_trajectories: Control runs (see :func:`normalise_control_runs`).
        target_false_halt_rate: Per-run false-halt rate in (0, 1); default
            ``[calibration] target_false_halt_rate``.
        kernel: The kernel whose configuration and plugins to use; default
            :meth:`Kernel.load() <biasbreaker.kernel.Kernel.load>` (configuration of the
            current directory, installed plugins).
        node_trip: Whether the machine the thresholds are for trips on own scores too;
            default ``[breaker] node_trip``.

    Returns:
        The report: thresholds, control statistics, run count, target and empirical rate.

    Raises:
        InputError: On malformed runs.
        ScoreError: On invalid scores (not finite, or outside [0, 1]).
        ThresholdError: If the target is out of range, the runs cannot support it, or the
            calibrator's result fails the kernel's checks.
        PluginError: If the calibrator cannot be built or raises something else.
        ConfigError: If the configured calibrator is not installed.
    """
    from biasbreaker.errors import BiasbreakerError, PluginError
    from biasbreaker.kernel import Kernel

    if kernel is None:
        kernel = Kernel.load()
    settings = kernel.settings.calibration
    target = _check_target(
        settings.target_false_halt_rate
        if target_false_halt_rate is None
        else target_false_halt_rate
    )
    if node_trip is None:
        node_trip = kernel.settings.breaker.node_trip
    elif not isinstance(node_trip, bool):
        raise InputError(f"node_trip={node_trip!r} must be a bool or None")
    runs = normalise_control_runs(control_trajectories)
    sample = summarise_normalised(
        runs, node_trip=node_trip, std_floor=settings.zero_floor / ZERO_STD_DIVISOR
    )
    if sample.std_floored:
        level, std = sample.statistics.mean, sample.statistics.std
        warnings.warn(
            f"fast B_net is {level!r} on every control step (std 0): the calibration window's "
            f"std is floored at [calibration] zero_floor / {ZERO_STD_DIVISOR:g} = {std:.4g}, so "
            f"a step counts as an outlier above {level + 3 * std:.4g} (3σ) and "
            f"{level + 5 * std:.4g} (5σ), and RECOVERY ends only once fast B_net is back at or "
            "below the 3σ level",
            CalibrationWarning,
            stacklevel=2,
        )
    if node_trip and sample.own_scores == 0:
        warnings.warn(
            "node trips are on ([breaker] node_trip) but no control step carries its own "
            "score: the thresholds bound fast-B_net trips only, not node trips; record the "
            "control runs as run traces (they carry node and scores) or add 'own' to the "
            "step records, or set [breaker] node_trip = false",
            CalibrationWarning,
            stacklevel=2,
        )
    trajectories = [
        [
            (fast if not node_trip or own is None or own <= fast else own, slow)
            for fast, slow, own in run
        ]
        for run in runs
    ]  # ControlStep.trip, inlined: a million steps
    name = settings.calibrator
    calibrator = kernel.build("calibrator", name)
    try:
        result = calibrator.calibrate(trajectories, target_false_halt_rate=target)  # type: ignore[attr-defined]
    except BiasbreakerError:
        raise
    except Exception as exc:
        raise PluginError(
            f"calibrator {name!r} raised {type(exc).__name__}: {exc}; no thresholds were chosen"
        ) from exc
    thresholds = check_calibration(
        _rounded(result), sample, name=name, target_false_halt_rate=target
    )
    statistics = sample.statistics
    return CalibrationReport(
        thresholds=thresholds,
        statistics=ControlStatistics(
            round_to_digits(statistics.mean, up=False),
            round_to_digits(statistics.std, up=False),
            statistics.n_steps,
        ),
        n_runs=sample.n_runs,
        target_false_halt_rate=target,
        empirical_false_halt_rate=false_halt_rate(sample.trip_maxima or (), thresholds.tau_enter),
        calibrator=name,
        node_trip=node_trip,
        own_scores=sample.own_scores,
        zero_floor=tuple(
            key
            for key, maxima in (("tau_enter", sample.trip_maxima), ("tau_warn", sample.slow_maxima))
            if not any(maxima or ())
        ),
    )


ZERO_STD_DIVISOR: Final = 5.0
"""With no spread in fast B_net, the window's std is ``[calibration] zero_floor`` / this: the
5σ band then sits ``zero_floor`` above the control level, the 3σ band 0.6 of it above."""

ZERO_WARN_RATIO: Final = 0.5
"""With slow B_net 0 on every control run, its bound is ``zero_floor`` x this, not ``zero_floor``.

``tau_warn = warn_ratio x zero_floor`` would equal ``tau_enter`` (the floor too, with the
default ``warn_ratio = 1``): a drift warning would need slow B_net, which lags fast B_net, to
reach the trip level, so it would never come before a trip. Half the floor is the shipped
defaults' ratio (``tau_warn / tau_enter = 0.15 / 0.30``) and lies below ``tau_exit = exit_ratio
x zero_floor`` (``exit_ratio >= 0.6``), so the three thresholds are distinct. Any positive
value keeps the rate of drift warnings on the control runs at 0 (none of them moves)."""


def _rounded(result: object) -> object:
    """A calibrator's three thresholds at :data:`SIGNIFICANT_DIGITS` (anything else unchanged).

    ``tau_enter`` and ``tau_warn`` are rounded up (no control run the calibrator kept below
    them reaches them after rounding, so the false-halt and drift-warning rates on the control
    runs can only fall), ``tau_exit`` to the nearest (down if that would reach ``tau_enter``;
    no guarantee rests on it, it only sets the dead-band). The kernel's checks then run on the
    rounded values: what is stored is what was checked.
    """
    if not isinstance(result, tuple) or len(result) != 3:
        return result
    values = list(result)
    if not all(
        isinstance(v, float) and math.isfinite(v) and v > 0.0 for v in values
    ):  # left to check_calibration to explain
        return result
    tau_enter, tau_exit, tau_warn = (round_to_digits(v, up=True) for v in values)
    tau_exit = round_to_digits(values[1], up=None)
    if tau_exit >= tau_enter:
        tau_exit = round_to_digits(values[1], up=False)
    return CalibratedThresholds(tau_enter, tau_exit, tau_warn)


def calibrate_thresholds(
    control_trajectories: Iterable[Iterable[object]],
    *,
    target_false_halt_rate: float | None = None,
    kernel: Kernel | None = None,
    node_trip: bool | None = None,
) -> CalibratedThresholds:
    """Choose ``(tau_enter, tau_exit, tau_warn)`` from control runs at a per-run false-halt rate.

    The false-halt rate is per run: the share of control runs that ever trip the breaker,
    i.e. whose trip statistic (fast B_net, or with node trips the larger of fast B_net and the
    guarded step's own score) ever reaches ``tau_enter``. With the first-party ``percentile``
    calibrator, a new control run exchangeable with the given ones trips — by either trigger
    when node trips are on and the runs carry own scores — with probability at most the target
    (the conformal guarantee; see :mod:`biasbreaker_plugins.calibrator_percentile`). The
    result is a starting point for this deployment, not a validated constant.

    Args:
        control_trajectories: Control runs (see :func:`normalise_control_runs`).
        target_false_halt_rate: Per-run false-halt rate in (0, 1); default from the
            configuration.
        kernel: The kernel to use; default ``Kernel.load()``.
        node_trip: Whether to calibrate the node-trip trigger too; default ``[breaker]
            node_trip``.

    Returns:
        The thresholds, a named tuple.

    Raises:
        ThresholdError: As :func:`calibrate`, e.g. 20 runs for a 1 % target ("needs at least
            99 runs").
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = calibrate(
            control_trajectories,
            target_false_halt_rate=target_false_halt_rate,
            kernel=kernel,
            node_trip=node_trip,
        )
    for item in caught:  # raised again at the caller's line, under the caller's filters
        warnings.warn(item.message, item.category, stacklevel=2)
    return report.thresholds


__all__ = [
    "SIGNIFICANT_DIGITS",
    "ZERO_STD_DIVISOR",
    "ZERO_WARN_RATIO",
    "CalibratedThresholds",
    "CalibrationReport",
    "CalibrationWarning",
    "Calibrator",
    "Trajectory",
    "calibrate",
    "calibrate_thresholds",
    "check_calibration",
    "round_to_digits",
]
