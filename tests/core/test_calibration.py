from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.calibration import (
    CalibratedThresholds,
    CalibrationWindow,
    ControlSample,
    ControlStatistics,
    false_halt_rate,
    outlier_level,
    run_calibrator,
    summarise_control_runs,
)
from biasbreaker.errors import InputError, ScoreError, ThresholdError

STATS = ControlStatistics(mean=0.1, std=0.05, n_steps=100)


@dataclass
class Step:
    fast: float
    slow: float


def test_summary_accepts_pairs_mappings_and_objects_and_matches_statistics() -> None:
    runs = [
        [(0.1, 0.05), (0.3, 0.1), (0.2, 0.12)],
        [{"fast": 0.05, "slow": 0.2, "extra": "ignored"}, {"fast": 0.15, "slow": 0.1}],
        [Step(0.4, 0.3)],
    ]
    sample = summarise_control_runs(runs)
    assert sample.fast_maxima == (0.3, 0.15, 0.4)
    assert sample.slow_maxima == (0.12, 0.2, 0.3)
    values = [0.1, 0.3, 0.2, 0.05, 0.15, 0.4]
    assert sample.statistics.mean == pytest.approx(statistics.fmean(values), abs=1e-15)
    assert sample.statistics.std == pytest.approx(statistics.stdev(values), abs=1e-15)
    assert sample.statistics.n_steps == 6
    assert sample.n_runs == 3


@given(st.lists(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=8),
                min_size=2, max_size=8), st.randoms(use_true_random=False))
def test_summary_does_not_depend_on_run_order(runs: list[list[tuple[float, float]]],
                                             rng: random.Random) -> None:
    try:
        first = summarise_control_runs(runs)
    except ThresholdError:
        return  # no spread: covered below
    shuffled = list(runs)
    rng.shuffle(shuffled)
    second = summarise_control_runs(shuffled)
    assert sorted(first.fast_maxima) == sorted(second.fast_maxima)
    assert first.statistics.mean == second.statistics.mean
    assert first.statistics.std == pytest.approx(second.statistics.std, rel=1e-12)


@pytest.mark.parametrize(("runs", "error", "match"), [
    ([], InputError, "no control runs"),
    ([[]], InputError, "control run 0 has no steps"),
    ([[(0.1, 0.1)], [(0.2, math.nan)]], ScoreError, r"control run 1 step 0\.slow=nan"),
    ([[(0.1, 0.1), (-0.2, 0.0)]], ScoreError, r"control run 0 step 1\.fast=-0\.2"),
    ([[(0.1, 0.1, 0.3)]], InputError, "a step is a"),
    ([[{"fast": 0.1}]], InputError, "needs the keys 'fast' and 'slow'"),
    ([[(0.2, 0.1), (0.2, 0.3)]], ThresholdError, "control std is 0"),
])
def test_summary_errors_name_run_and_step(runs: list[list[object]], error: type[Exception],
                                          match: str) -> None:
    with pytest.raises(error, match=match):
        summarise_control_runs(runs)


def test_false_halt_rate_is_per_run_and_inclusive() -> None:
    assert false_halt_rate([0.1, 0.5, 0.5, 0.9], 0.5) == 0.75
    assert false_halt_rate([0.1, 0.2], 0.5) == 0.0
    assert false_halt_rate([], 0.5) == 0.0


# -- kernel checks around a calibrator ------------------------------------------------------------


class Fixed:
    def __init__(self, result: object) -> None:
        self.result = result

    def calibrate(self, sample: ControlSample, *, target_false_halt_rate: float,
                  exit_ratio: float, warn_ratio: float) -> CalibratedThresholds:
        return self.result  # type: ignore[return-value]


SAMPLE = ControlSample(tuple(i / 100 for i in range(100)), tuple(i / 200 for i in range(100)),
                       STATS)


def test_run_calibrator_reports_the_empirical_rate() -> None:
    report = run_calibrator(Fixed(CalibratedThresholds(0.995, 0.7, 0.4)), SAMPLE, name="fixed",
                            target_false_halt_rate=0.01, exit_ratio=0.7, warn_ratio=1.0)
    assert report.empirical_false_halt_rate == 0.0
    assert report.thresholds == (0.995, 0.7, 0.4)
    assert report.to_json()["n_runs"] == 100


def test_run_calibrator_fails_closed_on_a_calibrator_that_misses_the_target() -> None:
    with pytest.raises(ThresholdError, match=r"halts 0\.1000 of the control runs, above the "
                                             r"target 0\.05"):
        run_calibrator(Fixed(CalibratedThresholds(0.9, 0.6, 0.4)), SAMPLE, name="greedy",
                       target_false_halt_rate=0.05, exit_ratio=0.7, warn_ratio=1.0)


@pytest.mark.parametrize("result", [(0.5, 0.6, 0.1), (0.5, 0.3), (0.5, 0.3, -1.0), "nope"])
def test_run_calibrator_rejects_inconsistent_results(result: object) -> None:
    with pytest.raises(ThresholdError, match="calibrator 'odd'"):
        run_calibrator(Fixed(result), SAMPLE, name="odd", target_false_halt_rate=0.5,
                       exit_ratio=0.7, warn_ratio=1.0)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"target_false_halt_rate": 0.0}, r"target_false_halt_rate=0\.0 must be in \(0\.0, 1\.0\)"),
    ({"target_false_halt_rate": 1.0}, "target_false_halt_rate=1.0"),
    ({"exit_ratio": 0.9}, r"exit_ratio=0\.9 must be in \[0\.6, 0\.8\]"),
    ({"warn_ratio": 0.0}, "warn_ratio=0.0"),
])
def test_run_calibrator_checks_its_arguments(kwargs: dict[str, float], match: str) -> None:
    args = {"target_false_halt_rate": 0.05, "exit_ratio": 0.7, "warn_ratio": 1.0, **kwargs}
    with pytest.raises(ThresholdError, match=match):
        run_calibrator(Fixed(CalibratedThresholds(0.995, 0.7, 0.4)), SAMPLE, name="x", **args)


# -- the window -----------------------------------------------------------------------------------


def test_outlier_level_is_one_sided_and_strict() -> None:
    assert outlier_level(0.25, STATS) == 0  # exactly mean + 3σ is not beyond it
    assert outlier_level(0.2500001, STATS) == 3
    assert outlier_level(0.35, STATS) == 3
    assert outlier_level(0.3500001, STATS) == 5
    assert outlier_level(0.0, STATS) == 0  # far below the mean is not a bias event


@given(st.integers(1, 8), st.lists(st.floats(0.0, 0.6), max_size=60))
def test_window_counts_match_a_brute_force_recount(max_history: int,
                                                   values: list[float]) -> None:
    window = CalibrationWindow(STATS, max_history)
    for index, value in enumerate(values):
        peeked = window.peek(value)
        counts = window.observe(value)
        assert peeked == counts
        recent = values[max(0, index + 1 - max_history):index + 1]
        assert counts.size == len(recent)
        assert counts.beyond_3 == sum(1 for v in recent if v > 0.25)
        assert counts.beyond_5 == sum(1 for v in recent if v > 0.35)
        assert counts.dirty == any(v > 0.25 for v in recent)
        assert window.counts == counts


def test_window_peek_does_not_change_it_and_restores_from_levels() -> None:
    window = CalibrationWindow(STATS, 3)
    for value in [0.3, 0.1, 0.4]:
        window.observe(value)
    assert window.levels() == [3, 0, 5]
    window.peek(0.9)
    assert window.levels() == [3, 0, 5]
    clone = CalibrationWindow(STATS, 3, window.levels())
    assert clone.counts == window.counts
    assert clone.observe(0.0) == window.observe(0.0)


@pytest.mark.parametrize(("max_history", "levels", "match"), [
    (0, [], "max_history=0"),
    (2, [0, 0, 0], "at most max_history=2"),
    (3, [4], "each 0, 3 or 5"),
])
def test_window_rejects_bad_arguments(max_history: int, levels: list[int], match: str) -> None:
    with pytest.raises(InputError, match=match):
        CalibrationWindow(STATS, max_history, levels)


def test_control_statistics_round_trip_and_validation() -> None:
    assert ControlStatistics.from_json(STATS.to_json()) == STATS
    assert STATS.bound(3) == pytest.approx(0.25)
    with pytest.raises(ThresholdError, match="n_steps=1"):
        ControlStatistics(0.1, 0.1, 1)
    with pytest.raises(InputError, match="need 'mean'"):
        ControlStatistics.from_json({"mean": 0.1})
