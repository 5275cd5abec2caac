"""Threshold calibration from control runs (WP6) and the online calibration window.

Two things are learnt from *control* runs (pipelines run without injected bias):

1. **Thresholds.** :func:`calibrate_thresholds` summarises each control run by the maximum of
   its fast (and slow) B_net and hands the summaries to the configured ``calibrator`` plugin
   (first-party: ``percentile``, a finite-sample conformal quantile). The false-halt rate is
   *per run*: the share of control runs whose fast B_net ever reaches ``tau_enter``. The
   kernel checks whatever a calibrator returns: consistent thresholds, and an empirical
   per-run false-halt rate on the given control runs at most the target.
2. **The calibration window** (the history of ADR-0034, RLB-v1): the mean and standard
   deviation of fast B_net over all control steps (:class:`ControlStatistics`), and online a
   sliding window of the last ``W`` observations (``max_history``) counting those beyond 3σ
   and beyond 5σ (:class:`CalibrationWindow`). A step is *dirty* while a count is above zero;
   the control machine recovers only on a clean step.

Everything here is pure Python over plain data, deterministic, and O(total steps).

Source:
    Phase 3 design (M3), R6 and WP6; ADR-0034 (RLB-v1) as corrected in ``docs/control.md``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from biasbreaker.errors import InputError, ThresholdError
from biasbreaker.types import JSONValue, Thresholds, check_score

# --------------------------------------------------------------------------------------------
# Control runs
# --------------------------------------------------------------------------------------------


def _step_pair(step: object, where: str) -> tuple[float, float]:
    if isinstance(step, Mapping):
        if "fast" not in step or "slow" not in step:
            raise InputError(f"{where} needs the keys 'fast' and 'slow'")
        fast, slow = step["fast"], step["slow"]
    elif hasattr(step, "fast") and hasattr(step, "slow"):
        fast, slow = step.fast, step.slow
    elif isinstance(step, Sequence) and not isinstance(step, str) and len(step) == 2:
        fast, slow = step
    else:
        raise InputError(
            f"{where} is a {type(step).__name__}; a step is a (fast, slow) pair, a mapping with "
            "'fast' and 'slow', or an object with .fast and .slow"
        )
    return check_score(f"{where}.fast", fast), check_score(f"{where}.slow", slow)


@dataclass(frozen=True, slots=True)
class ControlStatistics:
    """Mean and standard deviation of fast B_net over every step of the control runs.

    Args:
        mean: Mean fast B_net, finite and >= 0.
        std: Sample standard deviation (n - 1 denominator), finite and > 0.
        n_steps: Number of steps it was estimated from, >= 2.

    Raises:
        ThresholdError: If ``std`` is 0 (the control runs never move, so "beyond kσ" is
            undefined) or a value is out of range.
    """

    mean: float
    std: float
    n_steps: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", check_score("control mean", self.mean))
        object.__setattr__(self, "std", check_score("control std", self.std))
        if self.std <= 0.0:
            raise ThresholdError(
                "control std is 0: fast B_net never varies in the control runs, so the "
                "calibration window's 3σ/5σ bands are undefined; record control runs that "
                "exercise the pipeline (different inputs and seeds)"
            )
        if isinstance(self.n_steps, bool) or not isinstance(self.n_steps, int) \
                or self.n_steps < 2:
            raise ThresholdError(f"control n_steps={self.n_steps!r} must be an int >= 2")

    def bound(self, sigmas: float) -> float:
        """Return ``mean + sigmas * std``, the level above which an observation counts."""
        return self.mean + sigmas * self.std

    def to_json(self) -> dict[str, JSONValue]:
        """Return the statistics as plain JSON."""
        return {"mean": self.mean, "std": self.std, "n_steps": self.n_steps}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ControlStatistics:
        """Rebuild from :meth:`to_json` output.

        Raises:
            InputError: On a missing field.
            ThresholdError: On an invalid value.
        """
        if not isinstance(data, Mapping) or not {"mean", "std", "n_steps"} <= set(data):
            raise InputError("control statistics need 'mean', 'std' and 'n_steps'")
        return cls(data["mean"], data["std"], data["n_steps"])


@dataclass(frozen=True, slots=True)
class ControlSample:
    """What a calibrator sees of the control runs: per-run maxima, and step statistics.

    Args:
        fast_maxima: For each control run, the maximum of its fast B_net (one float >= 0 per
            run, in input order).
        slow_maxima: For each control run, the maximum of its slow B_net.
        statistics: Mean and std of fast B_net over all control steps.
    """

    fast_maxima: tuple[float, ...]
    slow_maxima: tuple[float, ...]
    statistics: ControlStatistics

    @property
    def n_runs(self) -> int:
        """Number of control runs."""
        return len(self.fast_maxima)


def summarise_control_runs(control_trajectories: Iterable[Iterable[object]]) -> ControlSample:
    """Reduce control runs to per-run maxima and the mean/std of fast B_net.

    Args:
        control_trajectories: One iterable per control run; each step is a ``(fast, slow)``
            pair, a mapping with ``"fast"`` and ``"slow"``, or an object with ``.fast`` and
            ``.slow`` (e.g. a DoT harness step). Scores are finite and >= 0.

    Returns:
        The summary. Mean and std use :func:`math.fsum`, so the result does not depend on the
        order of runs.

    Raises:
        InputError: If there is no run, a run is empty, or a step is malformed.
        ScoreError: If a score is NaN, infinite or negative (the message names run and step).
        ThresholdError: If fast B_net has no spread over the control steps.
    """
    fast_maxima: list[float] = []
    slow_maxima: list[float] = []
    values: list[float] = []
    for run_index, run in enumerate(control_trajectories):
        fast_max = slow_max = -1.0
        for step_index, step in enumerate(run):
            fast, slow = _step_pair(step, f"control run {run_index} step {step_index}")
            values.append(fast)
            fast_max = max(fast_max, fast)
            slow_max = max(slow_max, slow)
        if fast_max < 0.0:
            raise InputError(f"control run {run_index} has no steps")
        fast_maxima.append(fast_max)
        slow_maxima.append(slow_max)
    if not fast_maxima:
        raise InputError("no control runs given; calibration needs recorded control runs")
    if len(values) < 2:
        raise InputError("control runs have fewer than 2 steps in total; record more")
    mean = math.fsum(values) / len(values)
    variance = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return ControlSample(tuple(fast_maxima), tuple(slow_maxima),
                         ControlStatistics(mean, math.sqrt(variance), len(values)))


def false_halt_rate(fast_maxima: Sequence[float], tau_enter: float) -> float:
    """Return the per-run false-halt rate: the share of runs whose fast B_net reaches ``tau_enter``.

    Args:
        fast_maxima: Per-run maxima of fast B_net.
        tau_enter: The trip threshold.

    Returns:
        A float in [0, 1] (0 for no runs).
    """
    if not fast_maxima:
        return 0.0
    return sum(1 for m in fast_maxima if m >= tau_enter) / len(fast_maxima)


# --------------------------------------------------------------------------------------------
# Calibrators
# --------------------------------------------------------------------------------------------


class CalibratedThresholds(NamedTuple):
    """Thresholds chosen from control runs: ``(tau_enter, tau_exit, tau_warn)``."""

    tau_enter: float
    tau_exit: float
    tau_warn: float


class Calibrator(Protocol):
    """What a ``calibrator`` plugin's factory returns."""

    def calibrate(self, sample: ControlSample, *, target_false_halt_rate: float,
                  exit_ratio: float, warn_ratio: float) -> CalibratedThresholds:
        """Choose thresholds from a control sample.

        Args:
            sample: Per-run maxima and step statistics of the control runs.
            target_false_halt_rate: Per-run false-halt rate to stay under, in (0, 1).
            exit_ratio: ``tau_exit / tau_enter``, in [0.6, 0.8] by configuration.
            warn_ratio: Multiplier applied to the slow-scale threshold, in (0, 1].

        Returns:
            The thresholds.

        Raises:
            ThresholdError: If the sample cannot support the target (e.g. too few runs).
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
        empirical_false_halt_rate: Share of the given control runs whose fast B_net reaches
            ``tau_enter`` (always at most the target; the kernel checks it).
        calibrator: Name of the calibrator used.
    """

    thresholds: CalibratedThresholds
    statistics: ControlStatistics
    n_runs: int
    target_false_halt_rate: float
    empirical_false_halt_rate: float
    calibrator: str

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
        }


def _check_rate(name: str, value: object, low: float, high: float, *,
                low_open: bool = True, high_open: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        raise ThresholdError(f"{name}={value!r} must be a finite number")
    ok_low = value > low if low_open else value >= low
    ok_high = value < high if high_open else value <= high
    if not (ok_low and ok_high):
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ThresholdError(f"{name}={value!r} must be in {interval}")
    return float(value)


def run_calibrator(calibrator: Calibrator, sample: ControlSample, *, name: str,
                   target_false_halt_rate: float, exit_ratio: float,
                   warn_ratio: float) -> CalibrationReport:
    """Run a calibrator and enforce the kernel's checks on its result (fail closed).

    Args:
        calibrator: The calibrator object.
        sample: The control sample.
        name: The calibrator's registry name (for messages and the report).
        target_false_halt_rate: Per-run false-halt rate, in (0, 1).
        exit_ratio: ``tau_exit / tau_enter``, in [0.6, 0.8].
        warn_ratio: Multiplier of the slow-scale threshold, in (0, 1].

    Returns:
        The calibration report.

    Raises:
        ThresholdError: If an argument is out of range, the calibrator cannot meet the target,
            returns inconsistent thresholds, or returns a ``tau_enter`` whose per-run
            false-halt rate on the control runs exceeds the target.
    """
    target = _check_rate("target_false_halt_rate", target_false_halt_rate, 0.0, 1.0)
    exit_ratio = _check_rate("exit_ratio", exit_ratio, 0.6, 0.8, low_open=False,
                             high_open=False)
    warn_ratio = _check_rate("warn_ratio", warn_ratio, 0.0, 1.0, high_open=False)
    result = calibrator.calibrate(sample, target_false_halt_rate=target, exit_ratio=exit_ratio,
                                  warn_ratio=warn_ratio)
    if not isinstance(result, tuple) or len(result) != 3:
        raise ThresholdError(
            f"calibrator {name!r} returned {result!r}; expected (tau_enter, tau_exit, tau_warn)"
        )
    try:
        # Any positive kappa validates the three thresholds together.
        checked = Thresholds(result[0], result[1], result[2], kappa=1.0)
    except ThresholdError as exc:
        raise ThresholdError(f"calibrator {name!r} returned invalid thresholds: {exc}") from exc
    rate = false_halt_rate(sample.fast_maxima, checked.tau_enter)
    if rate > target:
        raise ThresholdError(
            f"calibrator {name!r} chose tau_enter={checked.tau_enter!r}, which halts "
            f"{rate:.4f} of the control runs, above the target {target}; the calibrator is "
            "broken, choose another one"
        )
    return CalibrationReport(
        thresholds=CalibratedThresholds(checked.tau_enter, checked.tau_exit, checked.tau_warn),
        statistics=sample.statistics,
        n_runs=sample.n_runs,
        target_false_halt_rate=target,
        empirical_false_halt_rate=rate,
        calibrator=name,
    )


# --------------------------------------------------------------------------------------------
# The online calibration window
# --------------------------------------------------------------------------------------------


class WindowCounts(NamedTuple):
    """The calibration window after one observation.

    Attributes:
        size: Observations in the window, 1..W.
        beyond_3: How many are above ``mean + 3·std`` (including those above 5σ).
        beyond_5: How many are above ``mean + 5·std``.
    """

    size: int
    beyond_3: int
    beyond_5: int

    @property
    def dirty(self) -> bool:
        """Whether the window holds an outlier (``beyond_3 + beyond_5 > 0``)."""
        return self.beyond_3 + self.beyond_5 > 0


def outlier_level(value: float, statistics: ControlStatistics) -> int:
    """Classify one observation: 5 if above mean + 5σ, 3 if above mean + 3σ, else 0.

    One-sided on purpose: a B_net far *below* the control mean is not a bias event.
    """
    if value > statistics.mean + 5.0 * statistics.std:
        return 5
    if value > statistics.mean + 3.0 * statistics.std:
        return 3
    return 0


class CalibrationWindow:
    """Sliding window of the last ``max_history`` fast-B_net observations, counting outliers.

    Each :meth:`observe` appends one observation's outlier level (0, 3 or 5; see
    :func:`outlier_level`) and, once the window is full, evicts the oldest. The counts are
    kept incrementally, so an observation costs O(1).

    Args:
        statistics: Control mean and std of fast B_net.
        max_history: Window length W, >= 1.
        levels: Outlier levels of the observations already in the window, oldest first (to
            restore a window); at most ``max_history`` of them, each 0, 3 or 5.

    Raises:
        InputError: On a bad ``max_history`` or ``levels``.

    Source:
        ADR-0034 (RLB-v1), "CalibrationHistory" built with ``max_history=W``.
    """

    __slots__ = ("_beyond_3", "_beyond_5", "_levels", "_max_history", "_statistics")

    def __init__(self, statistics: ControlStatistics, max_history: int,
                 levels: Iterable[int] = ()) -> None:
        if isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1:
            raise InputError(f"max_history={max_history!r} must be an int >= 1")
        self._statistics = statistics
        self._max_history = max_history
        restored = list(levels)
        if len(restored) > max_history or any(level not in (0, 3, 5) for level in restored):
            raise InputError(
                f"window levels {restored!r} must be at most max_history={max_history} values, "
                "each 0, 3 or 5"
            )
        self._levels: deque[int] = deque(restored, maxlen=max_history)
        self._beyond_3 = sum(1 for level in restored if level >= 3)
        self._beyond_5 = sum(1 for level in restored if level == 5)

    @property
    def statistics(self) -> ControlStatistics:
        """The control statistics the bands come from."""
        return self._statistics

    @property
    def max_history(self) -> int:
        """The window length W."""
        return self._max_history

    @property
    def counts(self) -> WindowCounts:
        """The current counts."""
        return WindowCounts(len(self._levels), self._beyond_3, self._beyond_5)

    def peek(self, value: float) -> WindowCounts:
        """Return the counts after observing ``value``, without changing the window."""
        level = outlier_level(value, self._statistics)
        beyond_3, beyond_5 = self._beyond_3, self._beyond_5
        size = len(self._levels)
        if size == self._max_history:
            oldest = self._levels[0]
            beyond_3 -= oldest >= 3
            beyond_5 -= oldest == 5
        else:
            size += 1
        return WindowCounts(size, beyond_3 + (level >= 3), beyond_5 + (level == 5))

    def observe(self, value: float) -> WindowCounts:
        """Add one observation (fast B_net, finite >= 0) and return the new counts."""
        level = outlier_level(value, self._statistics)
        if len(self._levels) == self._max_history:
            oldest = self._levels[0]
            self._beyond_3 -= oldest >= 3
            self._beyond_5 -= oldest == 5
        self._levels.append(level)
        self._beyond_3 += level >= 3
        self._beyond_5 += level == 5
        return WindowCounts(len(self._levels), self._beyond_3, self._beyond_5)

    def levels(self) -> list[int]:
        """The outlier levels in the window, oldest first (plain data for a snapshot)."""
        return list(self._levels)


__all__ = [
    "CalibratedThresholds",
    "CalibrationReport",
    "CalibrationWindow",
    "Calibrator",
    "ControlSample",
    "ControlStatistics",
    "WindowCounts",
    "false_halt_rate",
    "outlier_level",
    "run_calibrator",
    "summarise_control_runs",
]
