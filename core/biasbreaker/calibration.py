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

import hashlib
import json
import math
import os
import sys
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from biasbreaker.errors import InputError, ThresholdError
from biasbreaker.types import JSONValue, Thresholds, check_score

if TYPE_CHECKING:
    from biasbreaker.kernel import Kernel

# --------------------------------------------------------------------------------------------
# Control runs
# --------------------------------------------------------------------------------------------


def _step_pair(step: object, where: str) -> tuple[float, float]:
    if type(step) is tuple and len(step) == 2:
        fast, slow = step
        if (
            type(fast) is float
            and type(slow) is float
            and 0.0 <= fast < math.inf
            and 0.0 <= slow < math.inf
        ):
            return step  # the common case, already valid
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
    return _summarise(normalise_control_runs(control_trajectories))


def _summarise(runs: Sequence[Sequence[tuple[float, float]]]) -> ControlSample:
    fast_maxima = [max(fast for fast, _ in run) for run in runs]
    slow_maxima = [max(slow for _, slow in run) for run in runs]
    values = [fast for run in runs for fast, _ in run]
    if len(values) < 2:
        raise InputError("control runs have fewer than 2 steps in total; record more")
    mean = math.fsum(values) / len(values)
    variance = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return ControlSample(
        tuple(fast_maxima),
        tuple(slow_maxima),
        ControlStatistics(mean, math.sqrt(variance), len(values)),
    )


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


Trajectory = Sequence[tuple[float, float]]
"""One control run: its ``(fast, slow)`` B_net pairs in step order."""


class Calibrator(Protocol):
    """What a ``calibrator`` plugin's factory returns."""

    def calibrate(
        self, trajectories: Sequence[Trajectory], *, target_false_halt_rate: float
    ) -> CalibratedThresholds:
        """Choose thresholds from control runs.

        Args:
            trajectories: One sequence of ``(fast, slow)`` pairs per control run (validated by
                the kernel: finite, >= 0, every run non-empty).
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


def _check_target(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise ThresholdError(
            f"target_false_halt_rate={value!r} must be in (0, 1): it is the share of control "
            "runs allowed to trip the breaker, e.g. 0.01 for 1 %"
        )
    return float(value)


def normalise_control_runs(
    control_trajectories: Iterable[Iterable[object]],
) -> tuple[tuple[tuple[float, float], ...], ...]:
    """Validate control runs into tuples of ``(fast, slow)`` float pairs.

    Args:
        control_trajectories: One iterable per run; each step a ``(fast, slow)`` pair, a
            mapping with ``"fast"`` and ``"slow"``, or an object with ``.fast`` and ``.slow``.

    Returns:
        The runs as nested tuples.

    Raises:
        InputError: If there is no run, a run is empty, or a step is malformed.
        ScoreError: If a score is NaN, infinite or negative (the message names run and step).
    """
    runs = []
    for run_index, run in enumerate(control_trajectories):
        pairs = tuple(
            _step_pair(step, f"control run {run_index} step {step_index}")
            for step_index, step in enumerate(run)
        )
        if not pairs:
            raise InputError(f"control run {run_index} has no steps")
        runs.append(pairs)
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
    rate = false_halt_rate(sample.fast_maxima, checked.tau_enter)
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
) -> CalibrationReport:
    """Calibrate thresholds and the window statistics from control runs, with a full report.

    Dispatches to the configured ``calibrator`` plugin (``[calibration] calibrator``, default
    ``percentile``) and checks its result (see :func:`check_calibration`).

    Args:
        control_trajectories: Control runs (see :func:`normalise_control_runs`).
        target_false_halt_rate: Per-run false-halt rate in (0, 1); default
            ``[calibration] target_false_halt_rate``.
        kernel: The kernel whose configuration and plugins to use; default
            :meth:`Kernel.load() <biasbreaker.kernel.Kernel.load>` (configuration of the
            current directory, installed plugins).

    Returns:
        The report: thresholds, control statistics, run count, target and empirical rate.

    Raises:
        InputError: On malformed runs.
        ScoreError: On invalid scores.
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
    runs = normalise_control_runs(control_trajectories)
    sample = _summarise(runs)
    name = settings.calibrator
    calibrator = kernel.build("calibrator", name)
    try:
        result = calibrator.calibrate(runs, target_false_halt_rate=target)  # type: ignore[attr-defined]
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
        empirical_false_halt_rate=false_halt_rate(sample.fast_maxima, thresholds.tau_enter),
        calibrator=name,
    )


def calibrate_thresholds(
    control_trajectories: Iterable[Iterable[object]],
    *,
    target_false_halt_rate: float | None = None,
    kernel: Kernel | None = None,
) -> CalibratedThresholds:
    """Choose ``(tau_enter, tau_exit, tau_warn)`` from control runs at a per-run false-halt rate.

    The false-halt rate is per run: the share of control runs whose fast B_net ever reaches
    ``tau_enter``. With the first-party ``percentile`` calibrator, a new control run
    exchangeable with the given ones trips with probability at most the target (the conformal
    guarantee; see :mod:`biasbreaker_plugins.calibrator_percentile`). The result is a starting
    point for this deployment, not a validated constant.

    Args:
        control_trajectories: Control runs (see :func:`normalise_control_runs`).
        target_false_halt_rate: Per-run false-halt rate in (0, 1); default from the
            configuration.
        kernel: The kernel to use; default ``Kernel.load()``.

    Returns:
        The thresholds, a named tuple.

    Raises:
        ThresholdError: As :func:`calibrate`, e.g. 20 runs for a 1 % target ("needs at least
            99 runs").
    """
    return calibrate(
        control_trajectories, target_false_halt_rate=target_false_halt_rate, kernel=kernel
    ).thresholds


# --------------------------------------------------------------------------------------------
# Files: control trajectories in, calibrated TOML out
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControlRuns:
    """Control runs read from a file.

    Args:
        runs: One tuple of ``(fast, slow)`` pairs per run, in order of first appearance.
        names: Each run's name (its ``run``/``seed`` value, or ``trace N`` for run traces).
        sha256: SHA-256 of the file's bytes.
        skipped: Steps skipped because they had no score yet (``fast`` or ``slow`` null).
    """

    runs: tuple[tuple[tuple[float, float], ...], ...]
    names: tuple[str, ...]
    sha256: str
    skipped: int


def read_control_trajectories(path: str | os.PathLike[str]) -> ControlRuns:
    """Read control runs from a JSON Lines file.

    Two layouts are accepted, and may be concatenated:

    - **run traces** (``biasbreaker simulate`` or a guarded run): a ``"kind": "header"`` line
      starts a new run; its ``"kind": "step"`` lines follow;
    - **step records** with a run key (e.g. DoT harness output): each line has ``fast``,
      ``slow`` and ``run`` (or, without ``run``, ``seed``) naming the run it belongs to;
      lines of different runs may interleave.

    Steps whose ``fast`` or ``slow`` is ``null`` (nothing scored yet) are skipped and counted.

    Args:
        path: The file.

    Returns:
        The runs and the file's digest.

    Raises:
        InputError: If the file cannot be read, a line is not a JSON object, a step has no
            run, or the file holds no step; the message names the file and line.
        ScoreError: If a score is NaN, infinite or negative (named with file and line).
    """
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError(f"{file}: cannot read the control trajectories: {exc}") from exc
    runs: dict[str, list[tuple[float, float]]] = {}
    current: str | None = None
    traces = 0
    skipped = 0
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise InputError(f"{file}:{number}: not valid JSON: {exc}") from exc
        if not isinstance(record, dict):
            raise InputError(f"{file}:{number}: each line must be a JSON object")
        if record.get("kind") == "header":
            traces += 1
            current = f"trace {traces}"
            runs[current] = []
            continue
        if record.get("kind") == "step" and current is not None:
            name = current
        elif "run" in record or "seed" in record:
            name = str(record.get("run", record.get("seed")))
        else:
            raise InputError(
                f"{file}:{number}: a step without a run: add a 'run' (or 'seed') key, or put "
                "the steps of each run after its run-trace header"
            )
        fast, slow = record.get("fast"), record.get("slow")
        if fast is None or slow is None:
            skipped += 1
            continue
        runs.setdefault(name, []).append(
            (
                check_score(f"{file}:{number}: fast", fast),
                check_score(f"{file}:{number}: slow", slow),
            )
        )
    non_empty = {name: steps for name, steps in runs.items() if steps}
    if not non_empty:
        raise InputError(
            f"{file}: no scored step found; it should hold control runs (JSON "
            "Lines with fast and slow B_net)"
        )
    return ControlRuns(
        tuple(tuple(steps) for steps in non_empty.values()),
        tuple(non_empty),
        hashlib.sha256(data).hexdigest(),
        skipped,
    )


def write_calibration_toml(
    path: str | os.PathLike[str],
    report: CalibrationReport,
    *,
    calibrated_on: date,
    source_sha256: str,
) -> None:
    """Write calibrated thresholds and window statistics into a TOML configuration file.

    Sets ``[breaker] tau_enter, tau_exit, tau_warn`` and ``[calibration]
    target_false_halt_rate, calibrated_on, source_sha256`` and ``[calibration.control]
    mean, std, n_steps``. An existing file keeps its other tables and keys (its comments are
    not kept: the file is rewritten); a missing file is created.

    Args:
        path: The TOML file, e.g. ``biasbreaker.toml``.
        report: The calibration.
        calibrated_on: The date to record (pass it explicitly: no clock is read here).
        source_sha256: SHA-256 of the control trajectories the calibration used.

    Raises:
        ConfigError: If the existing file is not valid TOML or cannot be written.
    """
    import tomli_w

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    from biasbreaker.errors import ConfigError

    file = Path(path)
    document: dict[str, Any] = {}
    if file.exists():
        try:
            document = tomllib.loads(file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{file}: cannot update it, it is not readable TOML: {exc}") from exc
    breaker = document.setdefault("breaker", {})
    tau_enter, tau_exit, tau_warn = report.thresholds
    breaker.update({"tau_enter": tau_enter, "tau_exit": tau_exit, "tau_warn": tau_warn})
    calibration = document.setdefault("calibration", {})
    calibration.update(
        {
            "target_false_halt_rate": report.target_false_halt_rate,
            "calibrated_on": calibrated_on,
            "source_sha256": source_sha256,
            "control": report.statistics.to_json(),
        }
    )
    try:
        file.write_text(tomli_w.dumps(document), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{file}: cannot write the calibrated configuration: {exc}") from exc


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
    "CalibratedThresholds",
    "CalibrationReport",
    "CalibrationWindow",
    "Calibrator",
    "ControlRuns",
    "ControlSample",
    "ControlStatistics",
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
    "write_calibration_toml",
]
