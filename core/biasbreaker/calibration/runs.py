"""Control runs: validating them and reducing them to the statistics a calibration needs.

A *control run* is the pipeline run without injected bias. Each step gives fast and slow B_net
and, optionally, the guarded step's own local score; :func:`normalise_control_runs` validates
any of the accepted step shapes into plain ``(fast, slow, own)`` tuples, and
:func:`summarise_control_runs` reduces the runs to per-run maxima (of fast, slow and the trip
statistic) and the mean and standard deviation of fast B_net over every step (the calibration
window's bands).

Source:
    Phase 3 design (M3), R6 and WP6; ``docs/control.md`` §5.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from biasbreaker.errors import InputError
from biasbreaker.types import ControlStatistics, check_unit_score


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

    The kernel's :func:`biasbreaker.types.check_unit_score`, the same rule the breaker and
    the control machine apply.

    Raises:
        ScoreError: If ``value`` is not a number, is NaN, infinite, negative, or above 1.
    """
    return check_unit_score(name, value)


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
        std_floored: Whether fast B_net had no spread (the same value on every step) and the
            statistics' ``std`` is the floor given to :func:`summarise_normalised`.
    """

    fast_maxima: tuple[float, ...]
    slow_maxima: tuple[float, ...]
    statistics: ControlStatistics
    trip_maxima: tuple[float, ...] | None = None
    node_trip: bool = False
    own_scores: int = 0
    std_floored: bool = False

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
    return summarise_normalised(normalise_control_runs(control_trajectories), node_trip=node_trip)


def summarise_normalised(
    runs: Sequence[Sequence[StepTuple]], *, node_trip: bool, std_floor: float | None = None
) -> ControlSample:
    """Like :func:`summarise_control_runs`, for runs :func:`normalise_control_runs` validated.

    Args:
        runs: The validated runs.
        node_trip: Whether the trip statistic includes the steps' own scores.
        std_floor: The std to use when fast B_net has no spread (std exactly 0: the same value
            on every step, e.g. a deterministic pipeline that always scores 0), in (0, 1];
            ``None``: no spread is a :class:`~biasbreaker.errors.ThresholdError`.
    """
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
    std = math.sqrt(variance)
    if min(values) == max(values):  # no spread: exactly, not a rounding residue of fsum
        mean, std = values[0], 0.0
    floored = std == 0.0 and std_floor is not None
    if floored:
        assert std_floor is not None
        std = std_floor
    return ControlSample(
        tuple(fast_maxima),
        tuple(slow_maxima),
        ControlStatistics(mean, std, len(values)),
        tuple(trip_maxima),
        node_trip,
        sum(1 for run in runs for _, _, own in run if own is not None),
        floored,
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


__all__ = [
    "ControlSample",
    "ControlStep",
    "StepTuple",
    "false_halt_rate",
    "normalise_control_runs",
    "summarise_control_runs",
    "summarise_normalised",
    "unit_score",
]
