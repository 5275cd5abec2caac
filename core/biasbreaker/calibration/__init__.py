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

Everything here is pure Python over plain data, deterministic, and O(total steps). One module
per concern: :mod:`~biasbreaker.calibration.runs` (validating control runs, their maxima and
statistics), :mod:`~biasbreaker.calibration.thresholds` (the calibrator and the kernel's
checks), :mod:`~biasbreaker.calibration.files` (control runs from files),
:mod:`~biasbreaker.calibration.toml` (writing the result into a user's TOML) and
:mod:`~biasbreaker.calibration.window` (the online window).

Source:
    Phase 3 design (M3), R6 and WP6; ADR-0034 (RLB-v1) as corrected in ``docs/control.md``.
"""

from biasbreaker.calibration.files import (
    HEADER_CONFIGURATION,
    STEP_RECORD_KEYS,
    ControlRuns,
    read_control_runs,
    read_control_trajectories,
)
from biasbreaker.calibration.runs import (
    ControlSample,
    ControlStep,
    StepTuple,
    false_halt_rate,
    normalise_control_runs,
    summarise_control_runs,
    unit_score,
)
from biasbreaker.calibration.thresholds import (
    SIGNIFICANT_DIGITS,
    ZERO_STD_DIVISOR,
    ZERO_WARN_RATIO,
    CalibratedThresholds,
    CalibrationReport,
    CalibrationWarning,
    Calibrator,
    Trajectory,
    calibrate,
    calibrate_thresholds,
    check_calibration,
    round_to_digits,
)
from biasbreaker.calibration.toml import write_calibration_toml
from biasbreaker.calibration.window import CalibrationWindow, outlier_level
from biasbreaker.types import ControlStatistics, WindowCounts

__all__ = [
    "HEADER_CONFIGURATION",
    "SIGNIFICANT_DIGITS",
    "STEP_RECORD_KEYS",
    "ZERO_STD_DIVISOR",
    "ZERO_WARN_RATIO",
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
    "read_control_runs",
    "read_control_trajectories",
    "round_to_digits",
    "summarise_control_runs",
    "unit_score",
    "write_calibration_toml",
]
