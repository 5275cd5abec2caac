"""Threshold calibration from control runs (WP6) and the online calibration window.

Two things are learnt from *control* runs (pipelines run without injected bias):

1. **Thresholds.** :func:`calibrate_thresholds` hands the control runs to the configured
   ``calibrator`` plugin (first-party: ``percentile``, a finite-sample conformal quantile of
   the per-run maxima). The false-halt rate is *per run*: the share of control runs that ever
   trip the breaker. What trips is the *trip statistic* of a step: fast B_net, or, with node
   trips on (``[breaker] node_trip``), the larger of fast B_net and the guarded step's own
   local score — the calibrator sees that statistic, so the threshold bounds the trigger the
   machine actually uses. The kernel checks whatever a calibrator returns: consistent
   thresholds, and an empirical per-run false-halt rate on the given control runs at most the
   target.
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

import hashlib
import json
import math
import os
import re
import tempfile
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from biasbreaker.dot import SCHEMA as DOT_SCHEMA
from biasbreaker.errors import InputError, ScoreError, ThresholdError
from biasbreaker.types import JSONValue, Thresholds, check_score

if TYPE_CHECKING:
    from biasbreaker.kernel import Kernel

# --------------------------------------------------------------------------------------------
# Control runs
# --------------------------------------------------------------------------------------------


class ControlStep(NamedTuple):
    """One step of a control run, as the calibration reads it.

    Attributes:
        fast: Fast-scale B_net, in [0, 1].
        slow: Slow-scale B_net, in [0, 1].
        own: The guarded step's own local score (``local_scores[node]``) in [0, 1], or
            ``None`` when the step has none (no node, not applicable, or not recorded).
    """

    fast: float
    slow: float
    own: float | None = None

    def trip(self, node_trip: bool) -> float:
        """The statistic that trips the breaker at this step.

        ``fast``, or with ``node_trip`` the larger of ``fast`` and ``own``: the machine trips
        when this is ``>= tau_enter`` (see :func:`biasbreaker.machine.spike`).
        """
        if node_trip and self.own is not None and self.own > self.fast:
            return self.own
        return self.fast


def unit_score(name: str, value: object) -> float:
    """Validate a B_net value or a local score: a finite number in [0, 1].

    Args:
        name: The field's name (with its place, e.g. ``"control run 2 step 5.fast"``).
        value: The candidate.

    Returns:
        ``value`` as a float.

    Raises:
        ScoreError: If ``value`` is not a number, is NaN, infinite, negative, or above 1 (B_net
            is an average of local scores, each in [0, 1]).
    """
    score = check_score(name, value)
    if score > 1.0:
        raise ScoreError(
            f"{name}={value!r} is above 1: B_net and local bias scores lie in [0, 1]; check "
            "what wrote this value"
        )
    return score


def _own_of(step: object) -> object:
    """The step's own score: ``own``, else ``scores[node]`` (None if it has neither)."""
    if isinstance(step, Mapping):
        if "own" in step:
            return step["own"]
        node, scores = step.get("node"), step.get("scores")
    else:
        if hasattr(step, "own"):
            return step.own
        node, scores = getattr(step, "node", None), getattr(step, "scores", None)
    if isinstance(node, str) and isinstance(scores, Mapping):
        return scores.get(node)
    return None


StepTuple = tuple[float, float, float | None]
"""A validated control step, a plain ``(fast, slow, own)`` tuple (a :class:`ControlStep` is one)."""


def _control_step(step: object, where: str) -> ControlStep:
    fast: object
    slow: object
    own: object = None
    if isinstance(step, Mapping):
        if "fast" not in step or "slow" not in step:
            raise InputError(f"{where} needs the keys 'fast' and 'slow' (and optionally 'own')")
        fast, slow, own = step["fast"], step["slow"], _own_of(step)
    elif hasattr(step, "fast") and hasattr(step, "slow"):
        fast, slow, own = step.fast, step.slow, _own_of(step)
    elif isinstance(step, Sequence) and not isinstance(step, str) and len(step) in (2, 3):
        fast, slow, *rest = step
        own = rest[0] if rest else None
    else:
        raise InputError(
            f"{where} is a {type(step).__name__}; a step is a (fast, slow) pair, a (fast, slow, "
            "own) triple, a mapping with 'fast', 'slow' and optionally 'own' (or 'node' and "
            "'scores'), or an object with .fast and .slow (and optionally .own, or .node and "
            ".scores)"
        )
    return ControlStep(
        unit_score(f"{where}.fast", fast),
        unit_score(f"{where}.slow", slow),
        None if own is None else unit_score(f"{where}.own", own),
    )


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
                "exercise the pipeline (different inputs and seeds). A model that answers the "
                "same whatever the names (temperature 0 and no prompt sensitivity, e.g. the "
                "fake with prompt_sensitivity = 0) never moves B_net: sample at temperature > 0 "
                "(docs/demo.md §3.3)"
            )
        if isinstance(self.n_steps, bool) or not isinstance(self.n_steps, int) or self.n_steps < 2:
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
    """Summary of control runs: per-run maxima, and step statistics.

    Args:
        fast_maxima: For each control run, the maximum of its fast B_net (one float in [0, 1]
            per run, in input order).
        slow_maxima: For each control run, the maximum of its slow B_net.
        statistics: Mean and std of fast B_net over all control steps (the window's bands:
            the window observes fast B_net, whatever trips the breaker).
        trip_maxima: For each control run, the maximum of its trip statistic
            (:meth:`ControlStep.trip`); equal to ``fast_maxima`` without node trips. Default
            ``fast_maxima``.
        node_trip: Whether the trip statistic includes the steps' own scores.
        own_scores: Steps that carried an own score.
    """

    fast_maxima: tuple[float, ...]
    slow_maxima: tuple[float, ...]
    statistics: ControlStatistics
    trip_maxima: tuple[float, ...] | None = None
    node_trip: bool = False
    own_scores: int = 0

    def __post_init__(self) -> None:
        if self.trip_maxima is None:
            object.__setattr__(self, "trip_maxima", self.fast_maxima)

    @property
    def n_runs(self) -> int:
        """Number of control runs."""
        return len(self.fast_maxima)


def summarise_control_runs(
    control_trajectories: Iterable[Iterable[object]], *, node_trip: bool = False
) -> ControlSample:
    """Reduce control runs to per-run maxima and the mean/std of fast B_net.

    Args:
        control_trajectories: One iterable per control run; each step as
            :func:`normalise_control_runs` accepts it (a ``(fast, slow)`` pair, a ``(fast,
            slow, own)`` triple, a mapping, or an object such as a DoT harness step or a
            trace :class:`~biasbreaker.trace.StepRecord`). Values are finite, in [0, 1].
        node_trip: Whether the trip statistic includes the steps' own scores.

    Returns:
        The summary. Mean and std use :func:`math.fsum`, so the result does not depend on the
        order of runs.

    Raises:
        InputError: If there is no run, a run is empty, or a step is malformed.
        ScoreError: If a value is NaN, infinite, negative or above 1 (the message names run
            and step).
        ThresholdError: If fast B_net has no spread over the control steps.
    """
    return _summarise(normalise_control_runs(control_trajectories), node_trip=node_trip)


def _summarise(runs: Sequence[Sequence[StepTuple]], *, node_trip: bool) -> ControlSample:
    fast_maxima = [max(fast for fast, _, _ in run) for run in runs]
    slow_maxima = [max(slow for _, slow, _ in run) for run in runs]
    owns = [max((own for _, _, own in run if own is not None), default=None) for run in runs]
    trip_maxima = [
        fast if not node_trip or own is None or own <= fast else own
        for fast, own in zip(fast_maxima, owns, strict=True)
    ]  # max over steps of max(fast, own) = max(max fast, max own)
    values = [fast for run in runs for fast, _, _ in run]
    if len(values) < 2:
        raise InputError("control runs have fewer than 2 steps in total; record more")
    mean = math.fsum(values) / len(values)
    variance = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return ControlSample(
        tuple(fast_maxima),
        tuple(slow_maxima),
        ControlStatistics(mean, math.sqrt(variance), len(values)),
        tuple(trip_maxima),
        node_trip,
        sum(1 for run in runs for _, _, own in run if own is not None),
    )


def false_halt_rate(trip_maxima: Sequence[float], tau_enter: float) -> float:
    """Return the per-run false-halt rate: the share of runs whose maximum reaches ``tau_enter``.

    Args:
        trip_maxima: Per-run maxima of the trip statistic (fast B_net, or with node trips the
            larger of fast B_net and the step's own score).
        tau_enter: The trip threshold.

    Returns:
        A float in [0, 1] (0 for no runs).
    """
    if not trip_maxima:
        return 0.0
    return sum(1 for m in trip_maxima if m >= tau_enter) / len(trip_maxima)


# --------------------------------------------------------------------------------------------
# Calibrators
# --------------------------------------------------------------------------------------------


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
    """

    thresholds: CalibratedThresholds
    statistics: ControlStatistics
    n_runs: int
    target_false_halt_rate: float
    empirical_false_halt_rate: float
    calibrator: str
    node_trip: bool = False
    own_scores: int = 0

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
        }


def _check_target(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise ThresholdError(
            f"target_false_halt_rate={value!r} must be in (0, 1): it is the share of control "
            "runs allowed to trip the breaker, e.g. 0.01 for 1 %"
        )
    return float(value)


def normalise_control_runs(
    control_trajectories: Iterable[Iterable[object]],
) -> tuple[tuple[StepTuple, ...], ...]:
    """Validate control runs into tuples of ``(fast, slow, own)`` steps.

    Args:
        control_trajectories: One iterable per run; each step is

            - a ``(fast, slow)`` pair or a ``(fast, slow, own)`` triple;
            - a mapping with ``"fast"``, ``"slow"`` and optionally ``"own"`` (or ``"node"``
              and ``"scores"``, the own score being ``scores[node]``);
            - an object with ``.fast`` and ``.slow`` and optionally ``.own`` (or ``.node`` and
              ``.scores``: a DoT harness step, a trace :class:`~biasbreaker.trace.StepRecord`).

            ``own`` is the guarded step's own local score, or ``None`` when it has none.

    Returns:
        The runs as nested tuples: each step a ``(fast, slow, own)`` tuple of floats (``own``
        may be ``None``); a valid triple given as a tuple is kept as it is, any other shape
        becomes a :class:`ControlStep`.

    Raises:
        InputError: If there is no run, a run is empty, or a step is malformed.
        ScoreError: If a value is not a finite number in [0, 1] (the message names run and
            step).
    """
    runs = []
    for run_index, run in enumerate(control_trajectories):
        checked: list[StepTuple] = []
        for step_index, step in enumerate(run):
            # The common case inline (a million steps in a fraction of a second): float pairs
            # or triples, or steps read from a file, already in range.
            if type(step) is tuple or type(step) is ControlStep:
                size = len(step)
                if size == 3:
                    fast, slow, own = valid = step
                elif size == 2:
                    fast, slow = step
                    own = None
                    valid = (fast, slow, None)
                else:
                    fast = None  # not a float: the full check below explains
                if (
                    type(fast) is float
                    and type(slow) is float
                    and 0.0 <= fast <= 1.0
                    and 0.0 <= slow <= 1.0
                    and (own is None or (type(own) is float and 0.0 <= own <= 1.0))
                ):
                    checked.append(valid)
                    continue
            checked.append(_control_step(step, f"control run {run_index} step {step_index}"))
        steps = tuple(checked)
        if not steps:
            raise InputError(f"control run {run_index} has no steps")
        runs.append(steps)
    if not runs:
        raise InputError("no control runs given; calibration needs recorded control runs")
    return tuple(runs)


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
    sample = _summarise(runs, node_trip=node_trip)
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
    thresholds = check_calibration(result, sample, name=name, target_false_halt_rate=target)
    return CalibrationReport(
        thresholds=thresholds,
        statistics=sample.statistics,
        n_runs=sample.n_runs,
        target_false_halt_rate=target,
        empirical_false_halt_rate=false_halt_rate(sample.trip_maxima or (), thresholds.tau_enter),
        calibrator=name,
        node_trip=node_trip,
        own_scores=sample.own_scores,
    )


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


# --------------------------------------------------------------------------------------------
# Files: control trajectories in, calibrated TOML out
# --------------------------------------------------------------------------------------------


STEP_RECORD_KEYS: Final = ("fast", "own", "run", "seed", "slow")
"""The keys a step record (a line of a control-trajectory file without ``"kind"``) may have."""


@dataclass(frozen=True, slots=True)
class ControlRuns:
    """Control runs read from a file.

    Args:
        runs: One tuple of :class:`ControlStep` per run, in order of first appearance.
        names: Each run's name: ``trace N`` for the N-th run trace, ``run=<value>`` or
            ``seed=<value>`` for step records (the value as JSON, so ``run=3`` and
            ``run="3"`` are different runs), ``dot <preset> seed=<seed>`` for DoT records.
        sha256: SHA-256 of the file's bytes.
        skipped: Steps skipped because they had no score yet (``fast`` or ``slow`` null).
        truncated: Whether a cut last line (no newline, not valid JSON) was ignored.
    """

    runs: tuple[tuple[ControlStep, ...], ...]
    names: tuple[str, ...]
    sha256: str
    skipped: int
    truncated: bool = False


class _FileRuns:
    """The state of one pass over a control-trajectory file (see read_control_trajectories)."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.runs: dict[str, list[ControlStep]] = {}
        self.trace: str | None = None  # the run trace whose steps follow, if any
        self.next_step = 0
        self.traces = 0
        self.skipped = 0
        self.run_key: tuple[str, int] | None = None  # ("run" or "seed", first line)
        self.dot_steps: dict[str, tuple[int, int]] = {}  # DoT run -> (last step, its line)

    def fail(self, number: int, message: str) -> InputError:
        return InputError(f"{self.file}:{number}: {message}")

    def value(self, number: int, name: str, value: object) -> float:
        try:
            return unit_score(name, value)
        except ScoreError as exc:
            raise self.fail(number, str(exc)) from None

    def record(self, number: int, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind == "header":
            self.header(number, record)
        elif kind == "step":
            self.trace_step(number, record)
        elif kind is not None:
            raise self.fail(
                number, f"unknown kind {kind!r}; a run trace has 'header' and 'step' lines"
            )
        elif record.get("schema") == DOT_SCHEMA:
            self.dot_step(number, record)
        else:
            self.step_record(number, record)

    def header(self, number: int, record: dict[str, Any]) -> None:
        from biasbreaker.errors import TraceError
        from biasbreaker.trace import TraceHeader

        try:
            TraceHeader.from_json(record)
        except TraceError as exc:
            raise self.fail(number, str(exc)) from None
        self.traces += 1
        self.trace = f"trace {self.traces}"
        self.runs[self.trace] = []
        self.next_step = 0

    def trace_step(self, number: int, record: dict[str, Any]) -> None:
        from biasbreaker.errors import TraceError
        from biasbreaker.trace import StepRecord

        if self.trace is None:
            raise self.fail(
                number, "a run-trace step before any header line; put each trace's header first"
            )
        try:
            step = StepRecord.from_json(record)
        except TraceError as exc:
            raise self.fail(number, str(exc)) from None
        if step.step != self.next_step:
            raise self.fail(
                number,
                f"step {step.step} of {self.trace} is out of order; expected step "
                f"{self.next_step} (is a trace cut short before the next header?)",
            )
        self.next_step += 1
        for node, score in step.scores.items():
            self.value(number, f"scores[{node!r}]", score)
        own = None if step.node is None else step.scores.get(step.node)
        self.runs[self.trace].append(
            ControlStep(
                self.value(number, "fast", step.fast), self.value(number, "slow", step.slow), own
            )
        )

    def dot_step(self, number: int, record: dict[str, Any]) -> None:
        seed, preset, node, scores = (record.get(k) for k in ("seed", "preset", "node", "scores"))
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise self.fail(number, f"DoT record seed={seed!r} must be an integer")
        if not isinstance(preset, str) or not isinstance(node, str):
            raise self.fail(number, "DoT record needs a string 'preset' and 'node'")
        if not isinstance(scores, dict):
            raise self.fail(number, "DoT record needs 'scores', an object of node -> score")
        checked = {n: self.value(number, f"scores[{n!r}]", v) for n, v in scores.items()}
        name = f"dot {preset} seed={seed}"
        step = record.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise self.fail(number, f"DoT record step={step!r} must be an integer >= 0")
        last = self.dot_steps.get(name)
        if last is not None and step <= last[0]:
            raise self.fail(
                number,
                f"DoT record {preset!r} seed {seed} step {step} follows step {last[0]} (line "
                f"{last[1]}) of the same run: the file holds one simulation twice, or two with "
                "the same preset and seed; give each simulation its own --seed",
            )
        self.dot_steps[name] = (step, number)
        self.add(number, name, record, checked.get(node))

    def step_record(self, number: int, record: dict[str, Any]) -> None:
        unknown = sorted(set(record) - set(STEP_RECORD_KEYS))
        if unknown:
            raise self.fail(
                number,
                f"unknown key(s) {', '.join(map(repr, unknown))} in a step record; allowed: "
                f"{', '.join(STEP_RECORD_KEYS)} ('run' or 'seed' names the run, 'own' is the "
                "guarded step's own local score, optional); run traces start with a header line",
            )
        keys = [key for key in ("run", "seed") if key in record]
        if not keys:
            raise self.fail(
                number,
                "a step without a run: add a 'run' (or 'seed') key, or put the steps of each "
                "run after its run-trace header",
            )
        if len(keys) == 2:
            raise self.fail(
                number, "a step record has both 'run' and 'seed'; name its run with one of them"
            )
        [key] = keys
        if self.run_key is None:
            self.run_key = (key, number)
        elif self.run_key[0] != key:
            first, line = self.run_key
            raise self.fail(
                number,
                f"this step record names its run by {key!r}, but line {line} named its run by "
                f"{first!r}; a file names runs one way (run 3 and seed 3 are not the same run): "
                "rename the key, or split the file",
            )
        value = record[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, str))
            or (key == "seed" and not isinstance(value, int))
        ):
            allowed = "an integer" if key == "seed" else "a string or an integer"
            raise self.fail(number, f"{key}={value!r} must be {allowed}")
        own = record.get("own")
        self.add(
            number,
            f"{key}={json.dumps(value)}",
            record,
            None if own is None else self.value(number, "own", own),
        )

    def add(self, number: int, name: str, record: dict[str, Any], own: float | None) -> None:
        fast, slow = record.get("fast"), record.get("slow")
        if fast is None or slow is None:
            if "fast" not in record or "slow" not in record:
                raise self.fail(number, "a step record needs 'fast' and 'slow' (null: not scored)")
            self.skipped += 1
            return
        step = ControlStep(self.value(number, "fast", fast), self.value(number, "slow", slow), own)
        self.runs.setdefault(name, []).append(step)


def read_control_trajectories(path: str | os.PathLike[str]) -> ControlRuns:
    """Read control runs from a JSON Lines file.

    Three layouts are accepted, and may be concatenated:

    - **run traces** (``biasbreaker simulate`` or a guarded run): a ``"kind": "header"`` line
      starts a new run; its ``"kind": "step"`` lines follow (validated as trace records, steps
      numbered from 0). A step's own score is ``scores[node]``;
    - **step records**: each line has ``fast``, ``slow``, a run key and optionally ``own`` (the
      guarded step's own local score, for node trips) and nothing else. The run key is
      ``run`` (a string or an integer) or ``seed`` (an integer), the same key throughout the
      file: a file mixing them is refused rather than merging ``run 3`` with ``seed 3``. Lines
      of different runs may interleave;
    - **DoT harness records** (``biasbreaker simulate --trajectory``, ``"schema":
      "biasbreaker.dot/1"``), one run per preset and seed; the own score is ``scores[node]``.
      A run's steps must increase: the same simulation twice (or two with the same preset and
      seed) is refused, not merged into one longer run.

    Steps whose ``fast`` or ``slow`` is ``null`` (nothing scored yet) are skipped and counted.
    Every value must be a finite number in [0, 1]. A last line without its newline that is not
    valid JSON was cut while being written: it is ignored with a
    :class:`~biasbreaker.trace.TraceTruncatedWarning` (``biasbreaker verify`` does the same).

    Args:
        path: The file.

    Returns:
        The runs and the file's digest.

    Raises:
        InputError: If the file cannot be read, a line is not a JSON object, a value is not a
            finite number in [0, 1], a step record has an unknown key or no run (or the file
            mixes ``run`` and ``seed``), a trace line is malformed or out of order, or the
            file holds no scored step; the message names the file and line.
    """
    from biasbreaker.trace import TraceTruncatedWarning

    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError(f"{file}: cannot read the control trajectories: {exc}") from exc
    state = _FileRuns(file)
    lines = data.split(b"\n")
    truncated = False
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            if number == len(lines):  # no newline after it: cut while being written
                truncated = True
                warnings.warn(
                    f"{file}:{number}: the last line is cut mid-record (the writer crashed?); "
                    f"read the {number - 1} whole lines before it",
                    TraceTruncatedWarning,
                    stacklevel=2,
                )
                break
            raise state.fail(number, f"not valid JSON: {exc}") from exc
        if not isinstance(record, dict):
            raise state.fail(number, "each line must be a JSON object")
        state.record(number, record)
    non_empty = {name: steps for name, steps in state.runs.items() if steps}
    if not non_empty:
        raise InputError(
            f"{file}: no scored step found; it should hold control runs (JSON "
            "Lines with fast and slow B_net)"
        )
    return ControlRuns(
        tuple(tuple(steps) for steps in non_empty.values()),
        tuple(non_empty),
        hashlib.sha256(data).hexdigest(),
        state.skipped,
        truncated,
    )


PYPROJECT_NAME: Final = "pyproject.toml"


def write_calibration_toml(
    path: str | os.PathLike[str],
    report: CalibrationReport,
    *,
    calibrated_on: date,
    source_sha256: str,
) -> None:
    """Write calibrated thresholds and window statistics into a TOML configuration file.

    Sets ``[breaker] tau_enter, tau_exit, tau_warn, node_trip`` (the trigger the thresholds
    were calibrated for) and ``[calibration] target_false_halt_rate, calibrated_on,
    source_sha256`` and ``[calibration.control] mean, std, n_steps``. In a file named
    ``pyproject.toml`` these tables go under ``[tool.biasbreaker]``, where biasbreaker reads
    them. The file is edited with tomlkit, which keeps its style: everything but these keys
    (comments, blank lines, inline arrays, key order, other tools' tables) stays byte for
    byte as it was. A key that exists gets its new value in place (a comment on its line
    stays); a missing key or table is added in its parent's style (inline inside an inline
    table, as dotted keys under a dotted key, else as a ``[table]``). A file whose lines all end
    in CRLF keeps CRLF, the added lines too. A missing file is created; a missing folder is an
    error.

    The new text is validated first by loading it as biasbreaker would
    (:func:`biasbreaker.config.load_settings`, from a temporary directory, with this process's
    ``BIASBREAKER_*`` environment), so a key the file already had wrong (``tau_entre``) or a
    value out of range is reported instead of producing a file that does not load, and every
    written value is read back from the file as the loader sees it (``[tool.biasbreaker]`` of a
    ``pyproject.toml``), so a value that would not take effect is refused. Then it is
    written to a temporary file in the same directory and moved over the target atomically
    (keeping the target's permission bits; a symbolic link stays a link and the file it points
    to is replaced): on any error the original file is unchanged.

    Args:
        path: The TOML file, e.g. ``biasbreaker.toml`` or ``pyproject.toml``.
        report: The calibration.
        calibrated_on: The date to record (pass it explicitly: no clock is read here).
        source_sha256: SHA-256 of the control trajectories the calibration used.

    Raises:
        ConfigError: If the file's folder does not exist, the existing file is not valid
            TOML, the result would not load or would not set a written key (the message names
            the key and says the file was left unchanged), or it cannot be written.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from biasbreaker.config import PYPROJECT_TABLE
    from biasbreaker.errors import ConfigError

    file = Path(path)
    target = file.resolve() if file.is_symlink() else file  # write through a link, keep it
    if not target.parent.is_dir():
        raise ConfigError(
            f"{file}: cannot write the calibration: the folder {target.parent} does not exist; "
            "create it first or give a file in an existing folder (nothing was written)"
        )
    pyproject = file.name == PYPROJECT_NAME
    where = f"{file} [tool.biasbreaker]" if pyproject else str(file)
    original = ""
    if target.exists():
        try:  # bytes, decoded without newline translation: CRLF line endings stay CRLF
            original = target.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{file}: cannot update it, it is not readable: {exc}") from exc
    try:
        document = tomlkit.parse(original)
    except TOMLKitError as exc:
        raise ConfigError(f"{file}: cannot update it, it is not readable TOML: {exc}") from exc
    tau_enter, tau_exit, tau_warn = report.thresholds
    written: dict[str, Any] = {
        "breaker": {
            "tau_enter": tau_enter,
            "tau_exit": tau_exit,
            "tau_warn": tau_warn,
            "node_trip": report.node_trip,
        },
        "calibration": {
            "target_false_halt_rate": report.target_false_halt_rate,
            "calibrated_on": calibrated_on,
            "source_sha256": source_sha256,
            "control": dict(report.statistics.to_json()),
        },
    }
    edits: dict[str, Any] = written
    for key in reversed(PYPROJECT_TABLE if pyproject else ()):
        edits = {key: edits}
    created: list[Any] = []
    try:
        for key, values in edits.items():
            _put(document, key, values, file, created)
    except ConfigError:
        raise
    except (TOMLKitError, ValueError) as exc:  # tomlkit raises both for what it cannot add
        raise ConfigError(
            f"{where}: cannot write the calibration into this file's layout ({exc}); write "
            "[breaker] and [calibration] as ordinary tables (the file was left unchanged)"
        ) from exc
    # tomlkit separates the tables it adds by a blank line, but not the last one from a header
    # that follows it (an added [tool.biasbreaker.breaker] before [tool.black]): add that one,
    # and drop it again at the end of the file, which keeps the original's ending
    if created and not created[-1].as_string().endswith("\n\n"):
        created[-1].add(tomlkit.nl())
    text = tomlkit.dumps(document)
    # tomlkit keeps the file's own line endings but ends the lines it adds with LF
    eol = "\r\n" if "\r\n" in original and "\n" not in original.replace("\r\n", "") else "\n"
    if eol == "\r\n":
        text = re.sub(r"(?<!\r)\n", "\r\n", text)
    if text.endswith(eol * 2) and not original.endswith(eol * 2):
        text = text.rstrip("\r\n") + eol
    name = file.name if pyproject else "calibrated.toml"
    _check_loads(text, name, pyproject, where, written)
    _replace_atomically(target, text, file)


def _put(
    parent: MutableMapping[str, Any],
    key: str,
    values: Mapping[str, Any],
    file: Path,
    created: list[Any],
    dotted: bool = False,
) -> None:
    """Set ``values`` (a nested mapping: a mapping value is a sub-table) in ``parent[key]``.

    Each table is edited in the file's own style. An existing one (``[t]``, ``t = { ... }``
    or dotted ``t.k = v``) is updated in place. A missing one is added as an inline table
    inside an inline table, as dotted keys (``calibration.control.mean = ...``) under a
    dotted-key table (``dotted``), or else as a ``[table]`` (appended to ``created``).

    Raises:
        ConfigError: If a key on the way holds a value that is not a table.
    """
    import tomlkit
    from tomlkit.items import InlineTable, Item

    from biasbreaker.config import PYPROJECT_TABLE
    from biasbreaker.errors import ConfigError

    if key not in parent:
        if isinstance(parent, InlineTable):
            _set_inline(parent, key, tomlkit.inline_table())
        elif dotted:  # parent was written as ``name.key = value``: continue that way
            for path, value in _nested_leaves(values, (key,)):
                parent.append(tomlkit.key(list(path)), value)  # type: ignore[attr-defined]
            return
        else:
            # [tool] and [tool.biasbreaker] are only written as the prefix of the tables below
            parent[key] = tomlkit.table(is_super_table=key in PYPROJECT_TABLE)
            created.append(parent[key])
    table = parent[key]
    if not isinstance(table, MutableMapping):
        shown = table.unwrap() if isinstance(table, Item) else table
        raise ConfigError(
            f"{file}: cannot write the calibration: {key!r} is {shown!r}, not a table; fix "
            "the file (the file was left unchanged)"
        )
    dotted = dotted or _is_dotted(parent, key)
    for name, value in values.items():
        if isinstance(value, Mapping):
            _put(table, name, value, file, created, dotted)
        elif isinstance(table, InlineTable):
            _set_inline(table, name, value)
        else:
            table[name] = value


def _nested_leaves(
    values: Mapping[str, Any], prefix: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(key path, value) for every non-mapping value in the nested ``values``."""
    for name, value in values.items():
        if isinstance(value, Mapping):
            yield from _nested_leaves(value, (*prefix, name))
        else:
            yield (*prefix, name), value


def _set_inline(table: Any, key: str, value: Any) -> None:
    """Set ``table[key]`` in a tomlkit inline table; a new key goes before its closing space.

    ``{ a = 1 }`` becomes ``{ a = 1, b = 2 }``: the space before ``}`` is lifted off, the key
    appended (``append`` puts ``", "`` before it) and the space put back after it.
    """
    from tomlkit.items import Whitespace

    if key in table:
        table[key] = value
        return
    body = table.value.body
    closing = None
    if body and body[-1][0] is None:
        last = body[-1][1]
        if isinstance(last, Whitespace) and "," not in last.s:
            closing = body.pop()[1]
    table.append(key, value)
    if closing is not None:
        table.value.append(None, closing)


def _is_dotted(parent: Mapping[str, Any], key: str) -> bool:
    """Whether ``parent`` holds ``key`` as a dotted key (``key.sub = value``)."""
    container = getattr(parent, "value", parent)  # a tomlkit Table wraps a Container
    body = getattr(container, "body", ())
    return any(k is not None and k.key == key and k.is_dotted() for k, _ in body)


def _check_loads(
    text: str,
    name: str,
    pyproject: bool,
    where: str,
    written: Mapping[str, Any],
) -> None:
    """Load ``text`` as biasbreaker would (as ``pyproject.toml`` or via ``--config``).

    Then read every value in the nested ``written`` back from the file as the
    loader sees it: a value missing or different there (written outside
    ``[tool.biasbreaker]``, say) would silently not take effect, so it is refused.
    """
    from biasbreaker.config import _file_layers, load_settings
    from biasbreaker.errors import ConfigError

    with tempfile.TemporaryDirectory(prefix="biasbreaker-calibrate-") as tmp:
        candidate = Path(tmp) / name
        candidate.write_bytes(text.encode("utf-8"))
        config_file = None if pyproject else candidate
        try:
            load_settings(config_file, cwd=tmp)
            layers = _file_layers(config_file, Path(tmp))
        except ConfigError as exc:
            message = str(exc).replace(str(candidate), where)
            raise ConfigError(
                f"{where}: the calibrated configuration would not load, so the file was left "
                f"unchanged: {message}"
            ) from exc
    data: Any = layers[0][1] if layers else {}
    for path, value in _nested_leaves(written, ()):
        found: Any = data
        for part in path:
            found = found.get(part) if isinstance(found, Mapping) else None
        if found != value or type(found) is not type(value):
            raise ConfigError(
                f"{where}: the calibrated file would not set {'.'.join(path)} (it would read "
                f"back as {found!r}, not {value!r}); the file's layout is one this command "
                "cannot edit safely, so it was left unchanged: write [breaker] and "
                "[calibration] as ordinary tables and run it again"
            )


def _replace_atomically(file: Path, text: str, named: Path) -> None:
    """Write ``text`` to ``file`` via a temporary file beside it; errors name ``named``."""
    from biasbreaker.errors import ConfigError

    existed = file.exists()
    unchanged = "the file was left unchanged" if existed else "nothing was written"
    temporary, handle = _create_beside(file, named, unchanged)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if existed:
            os.chmod(temporary, file.stat().st_mode & 0o7777)
        os.replace(temporary, file)
    except OSError as exc:
        raise ConfigError(
            f"{named}: cannot write the calibrated configuration ({unchanged}): "
            f"{exc.strerror or exc}"
        ) from exc
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _create_beside(file: Path, named: Path, unchanged: str) -> tuple[Path, int]:
    """Create a new empty file next to ``file`` (mode 0o666 less the umask); (path, fd)."""
    from biasbreaker.errors import ConfigError

    for attempt in range(100):
        temporary = file.with_name(f".{file.name}.{os.getpid()}-{attempt}.tmp")
        try:
            return temporary, os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            # the error is about the temporary file: say what it means for the folder
            raise ConfigError(
                f"{named}: cannot write the calibrated configuration ({unchanged}): cannot "
                f"create a file in {file.parent}: {exc.strerror or exc}"
            ) from exc
    raise ConfigError(
        f"{named}: cannot write the calibrated configuration: 100 temporary files "
        f".{file.name}.{os.getpid()}-*.tmp already exist next to it; remove them"
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

    def __init__(
        self, statistics: ControlStatistics, max_history: int, levels: Iterable[int] = ()
    ) -> None:
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
    "STEP_RECORD_KEYS",
    "CalibratedThresholds",
    "CalibrationReport",
    "CalibrationWarning",
    "CalibrationWindow",
    "Calibrator",
    "ControlRuns",
    "ControlSample",
    "ControlStatistics",
    "ControlStep",
    "StepTuple",
    "Trajectory",
    "WindowCounts",
    "calibrate",
    "calibrate_thresholds",
    "check_calibration",
    "false_halt_rate",
    "normalise_control_runs",
    "outlier_level",
    "read_control_trajectories",
    "summarise_control_runs",
    "unit_score",
    "write_calibration_toml",
]
