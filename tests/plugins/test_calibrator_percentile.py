from __future__ import annotations

import math
import random
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import biasbreaker_plugins.calibrator_percentile as percentile_plugin
from biasbreaker.calibration import (
    calibrate,
    calibrate_thresholds,
    false_halt_rate,
    round_to_digits,
)
from biasbreaker.errors import ThresholdError
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.types import Thresholds
from biasbreaker_plugins.calibrator_percentile import (
    PercentileCalibrator,
    conformal_rank,
    conformal_upper_bound,
    required_runs,
)
from biasbreaker_plugins.quoted import WIDTH, block, blocks, check


def runs_with_maxima(fast: list[float], slow: list[float]) -> list[list[tuple[float, float]]]:
    """One two-step control run per maximum (the other step is lower)."""
    return [[(f / 2, s / 2), (f, s)] for f, s in zip(fast, slow, strict=True)]


@pytest.mark.parametrize(
    ("alpha", "runs"), [(0.01, 99), (0.05, 19), (0.1, 9), (0.3, 3), (0.5, 1), (0.001, 999)]
)
def test_required_runs(alpha: float, runs: int) -> None:
    assert required_runs(alpha) == runs
    assert conformal_rank(runs, alpha) <= runs
    if runs > 1:
        assert conformal_rank(runs - 1, alpha) > runs - 1


def test_rank_uses_the_decimal_target() -> None:
    # (n + 1)(1 - 0.01) = 99 exactly; a binary 0.01 would round it either way.
    assert conformal_rank(99, 0.01) == 99
    assert conformal_rank(199, 0.01) == 198


def test_too_few_runs_says_how_many_are_needed() -> None:
    runs = runs_with_maxima([i / 20 for i in range(1, 21)], [i / 40 for i in range(1, 21)])
    with pytest.raises(ThresholdError) as info:
        PercentileCalibrator().calibrate(runs, target_false_halt_rate=0.01)
    message = str(info.value)
    assert "20 control runs are too few for a per-run false-halt rate of 0.01" in message
    assert "at least 99 runs" in message
    assert "record 79 more" in message
    assert "at least 0.04762" in message


def test_thresholds_are_the_next_float_above_the_conformal_order_statistic() -> None:
    fast = tuple(float(i) / 100 for i in range(1, 101))  # 0.01 .. 1.00, shuffled below
    slow = tuple(v / 2 for v in fast)
    rng = random.Random(3)
    fast_list, slow_list = list(fast), list(slow)
    rng.shuffle(fast_list)
    rng.shuffle(slow_list)
    result = PercentileCalibrator(exit_ratio=0.7, warn_ratio=0.8).calibrate(
        runs_with_maxima(fast_list, slow_list), target_false_halt_rate=0.05
    )
    k = math.ceil(101 * 0.95)  # 96
    assert result.tau_enter == math.nextafter(k / 100, math.inf)
    assert result.tau_exit == 0.7 * result.tau_enter
    assert result.tau_warn == 0.8 * math.nextafter(k / 200, math.inf)
    assert false_halt_rate(fast, result.tau_enter) == 4 / 100


def test_control_runs_that_never_move_are_an_error() -> None:
    with pytest.raises(ThresholdError, match="fast B_net maxima are 0"):
        conformal_upper_bound([0.0] * 50, 0.1, scale="fast")


def test_a_zero_quantile_with_rare_positive_runs_takes_the_smallest_positive_maximum() -> None:
    maxima = [0.0] * 48 + [0.3, 0.2]  # k = 46: the 46th smallest is 0
    tau = conformal_upper_bound(maxima, 0.1, scale="fast")
    assert tau == 0.2 and false_halt_rate(maxima, tau) == 2 / 50
    # the guarantee still holds: runs that are 0 except for a rare event (probability 4 %)
    rng = random.Random(7)
    rates = []
    for _ in range(2000):
        sample = [rng.random() if rng.random() < 0.04 else 0.0 for _ in range(41)]
        calibration, new = sample[:40], sample[40:]
        if not any(calibration):
            continue
        rates.append(false_halt_rate(new, conformal_upper_bound(calibration, 0.05, scale="fast")))
    mean = sum(rates) / len(rates)
    assert mean <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / len(rates))


@given(
    st.lists(st.floats(0.001, 10.0), min_size=1, max_size=300),
    st.sampled_from([0.01, 0.02, 0.05, 0.1, 0.2, 0.5]),
)
def test_empirical_rate_on_the_calibration_runs_is_below_the_target(
    maxima: list[float], alpha: float
) -> None:
    if len(maxima) < required_runs(alpha):
        with pytest.raises(ThresholdError, match=f"at least {required_runs(alpha)} runs"):
            conformal_upper_bound(maxima, alpha, scale="fast")
        return
    tau = conformal_upper_bound(maxima, alpha, scale="fast")
    assert false_halt_rate(maxima, tau) <= alpha
    assert tau > sorted(maxima)[conformal_rank(len(maxima), alpha) - 1]


def _mean_rate_on_new_runs(
    n: int, alpha: float, repeats: int, seed: int, *, steps: int, levels: int | None
) -> float:
    """Average, over repeated calibrations, of the exact false-halt rate on new runs.

    Each control run has ``steps`` i.i.d. fast scores, uniform on [0, 1) (``levels=None``) or
    uniform on {0, 1/levels, ..., 1} (ties). The exact probability that a new run's maximum
    reaches tau is computed in closed form, so the only Monte Carlo error is over calibrations.
    """
    rng = random.Random(seed)

    def score() -> float:
        if levels is None:
            return rng.random()
        return rng.randint(0, levels) / levels

    def p_new_run_trips(tau: float) -> float:
        if levels is None:
            return 1.0 - min(tau, 1.0) ** steps
        below = sum(1 for j in range(levels + 1) if j / levels < tau) / (levels + 1)
        return 1.0 - below**steps

    total = 0.0
    calibrator = PercentileCalibrator()
    for _ in range(repeats):
        runs = [[(score(), 0.5 + score()) for _ in range(steps)] for _ in range(n)]
        thresholds = calibrator.calibrate(runs, target_false_halt_rate=alpha)
        total += p_new_run_trips(thresholds.tau_enter)
    return total / repeats


@pytest.mark.parametrize(
    ("n", "alpha", "levels"), [(99, 0.01, None), (40, 0.05, None), (30, 0.1, 20), (19, 0.05, 6)]
)
def test_conformal_guarantee_holds_on_simulated_exchangeable_runs(
    n: int, alpha: float, levels: int | None
) -> None:
    repeats = 4000
    rate = _mean_rate_on_new_runs(n, alpha, repeats, seed=n, steps=5, levels=levels)
    # Exact expectation for continuous scores is (n + 1 - k) / (n + 1) <= alpha; allow 4
    # standard errors of the mean over repeats (each term is a probability in [0, 1]).
    assert rate <= alpha + 4 * math.sqrt(alpha * (1 - alpha) / repeats)
    if levels is None:
        k = conformal_rank(n, alpha)
        assert rate == pytest.approx((n + 1 - k) / (n + 1), abs=4 * math.sqrt(alpha / repeats))


def test_one_rank_lower_would_break_the_guarantee() -> None:
    """The test above can fail: the (k-1)-th order statistic overshoots the target."""
    n, alpha, repeats = 99, 0.01, 4000
    rng = random.Random(5)
    total = 0.0
    for _ in range(repeats):
        maxima = sorted(max(rng.random() for _ in range(5)) for _ in range(n))
        tau = maxima[conformal_rank(n, alpha) - 2]
        total += 1.0 - tau**5
    assert total / repeats > alpha + 4 * math.sqrt(alpha * (1 - alpha) / repeats)


@given(st.integers(0, 2**32), st.sampled_from([0.05, 0.1, 0.2]))
def test_guarantee_property_over_seeds(seed: int, alpha: float) -> None:
    repeats = 300
    n = required_runs(alpha) + seed % 17
    rate = _mean_rate_on_new_runs(n, alpha, repeats, seed=seed, steps=3, levels=None)
    assert rate <= alpha + 5 * math.sqrt(alpha * (1 - alpha) / repeats)


def test_ratios_are_validated() -> None:
    with pytest.raises(ThresholdError, match=r"exit_ratio=0\.9"):
        PercentileCalibrator(exit_ratio=0.9)
    with pytest.raises(ThresholdError, match=r"warn_ratio=0\.0"):
        PercentileCalibrator(warn_ratio=0.0)


def test_registered_through_the_calibrator_hook_and_configured_from_calibration(
    register_plugin: Any, make_kernel: Any
) -> None:
    register_plugin(percentile_plugin, name="calibrator-percentile")
    kernel = make_kernel(
        {
            "calibration": {"exit_ratio": 0.6, "warn_ratio": 0.5, "target_false_halt_rate": 0.05},
            "breaker": {"node_trip": False},  # pairs: fast B_net only
        }
    )
    built = kernel.build("calibrator")
    assert isinstance(built, PercentileCalibrator)
    assert (built.exit_ratio, built.warn_ratio) == (0.6, 0.5)
    rng = random.Random(9)
    runs = [[(rng.random() * 0.3, rng.random() * 0.1) for _ in range(10)] for _ in range(200)]
    report = calibrate(runs, kernel=kernel)
    assert report.calibrator == "percentile"
    assert report.target_false_halt_rate == 0.05
    assert report.empirical_false_halt_rate <= 0.05
    assert report.thresholds.tau_exit == pytest.approx(0.6 * report.thresholds.tau_enter, 1e-3)
    # the kernel keeps the calibrator's thresholds to 4 significant digits: enter and warn up
    raw = PercentileCalibrator(0.6, 0.5).calibrate(runs, target_false_halt_rate=0.01)
    assert calibrate_thresholds(runs, target_false_halt_rate=0.01, kernel=kernel) == (
        round_to_digits(raw.tau_enter, up=True),
        round_to_digits(raw.tau_exit, up=None),
        round_to_digits(raw.tau_warn, up=True),
    )
    with pytest.raises(ThresholdError, match="needs at least 99 runs"):
        calibrate_thresholds(runs[:20], target_false_halt_rate=0.01, kernel=kernel)


def _control_run(rng: random.Random, steps: int) -> list[tuple[float, float, float]]:
    """A control run with a node's own score per step: fast B_net diluted, own scores not."""
    fast = slow = 0.0
    run = []
    for _ in range(steps):
        own = rng.random() * 0.6
        b_net = 0.3 * own + 0.1 * rng.random()  # the network average dilutes the node
        fast, slow = 0.3 * fast + 0.7 * b_net, 0.9 * slow + 0.1 * b_net
        run.append((fast, slow, own))
    return run


def _machine_trips(thresholds: Any, run: list[tuple[float, float, float]]) -> bool:
    config = MachineConfig(Thresholds(*thresholds, kappa=0.05), node_trip=True)
    machine = ControlMachine(config)
    for fast, slow, own in run:
        if machine.step(fast, slow, node="n", local_scores={"n": own}).state.tripped:
            return True
    return False


def test_the_guarantee_covers_node_trips_on_the_real_machine(
    register_plugin: Any, make_kernel: Any
) -> None:
    """Calibrated with node trips, the real machine (node trips on) trips at most α of new runs.

    Calibrated on fast B_net alone, the same machine trips most new control runs: the node
    trigger must be calibrated, and the test can fail. docs/control.md §5 quotes the measured
    rates (the passage ``calibration: node trips on the real machine``), checked here.
    """
    register_plugin(percentile_plugin, name="calibrator-percentile")
    kernel = make_kernel({"breaker": {"node_trip": True}})
    rng = random.Random(11)
    n, alpha, repeats, new_runs, steps, literal_repeats = 29, 0.1, 300, 10, 6, 20
    tripped = literal_tripped = 0
    for i in range(repeats):
        control = [_control_run(rng, steps) for _ in range(n)]
        fresh = [_control_run(rng, steps) for _ in range(new_runs)]
        combined = calibrate_thresholds(control, target_false_halt_rate=alpha, kernel=kernel)
        tripped += sum(_machine_trips(combined, run) for run in fresh)
        if i < literal_repeats:  # 20 calibrations suffice for the contrast
            literal = calibrate_thresholds(
                control, target_false_halt_rate=alpha, kernel=kernel, node_trip=False
            )
            literal_tripped += sum(_machine_trips(literal, run) for run in fresh)
    rate = tripped / (repeats * new_runs)
    literal_rate = literal_tripped / (literal_repeats * new_runs)
    # exact expectation (n + 1 - k)/(n + 1) = 3/30 = alpha; 4 standard errors over calibrations
    assert rate <= alpha + 4 * math.sqrt(alpha * (1 - alpha) / repeats)
    assert rate > alpha / 2  # the bound is tight: the threshold is not needlessly high
    assert literal_rate > 0.9
    measured = textwrap.fill(
        f"Tested on the real machine: {repeats} calibrations at α = {alpha} on {n} simulated "
        f"control runs whose own scores exceed fast B_net, {new_runs} new runs each, trip "
        f"{rate:.3f} of the new runs with node trips on; thresholds calibrated on fast alone "
        f"({literal_repeats} of the calibrations) trip {literal_rate:.3f} of them with the same "
        "machine.",
        WIDTH,
        break_on_hyphens=False,
    )
    doc = (Path(__file__).parents[2] / "docs" / "control.md").read_text(encoding="utf-8")
    label = "calibration: node trips on the real machine"
    assert label in blocks(doc)
    assert check(block(label, measured), doc) == []


# -- a deterministic pipeline: every control score 0 ---------------------------------------------


def test_every_maximum_zero_takes_the_floor_when_one_is_given() -> None:
    assert conformal_upper_bound([0.0] * 50, 0.1, scale="fast", zero_floor=0.05) == 0.05
    with pytest.raises(ThresholdError, match="too few"):  # the floor is no licence for 5 runs
        conformal_upper_bound([0.0] * 5, 0.1, scale="fast", zero_floor=0.05)


def test_all_zero_control_runs_calibrate_to_the_floor_with_a_warning(
    register_plugin: Any, make_kernel: Any
) -> None:
    from biasbreaker.calibration import CalibrationWarning

    register_plugin(percentile_plugin, name="calibrator-percentile")
    kernel = make_kernel({"calibration": {"zero_floor": 0.08, "exit_ratio": 0.6}})
    runs = [[(0.0, 0.0, 0.0)] * 6 for _ in range(40)]
    with pytest.warns(CalibrationWarning) as caught:
        report = calibrate(runs, kernel=kernel)
    # tau_warn is half the floor, below tau_exit: it was the floor, tau_enter's own value
    assert report.thresholds == (0.08, 0.048, 0.04)
    assert report.zero_floor == ("tau_enter", "tau_warn")
    assert report.to_json()["zero_floor"] == ["tau_enter", "tau_warn"]
    assert report.empirical_false_halt_rate == 0.0
    assert report.statistics.mean == 0.0 and report.statistics.std == pytest.approx(0.016)
    text = " ".join(str(w.message) for w in caught)
    assert "scores exactly 0" in text and "zero_floor = 0.08" in text
    assert "Any step that reaches it trips" in text and "zero_floor x 0.5" in text
    assert "std is floored at [calibration] zero_floor / 5" in text
    # the floor only stands in for a missing scale: one moving run gives the usual bound
    moving = [*runs[:-1], [(0.0, 0.0, 0.0), (0.2, 0.01, 0.3)]]
    moved = calibrate(moving, kernel=kernel)
    assert moved.thresholds.tau_enter == 0.3  # k = 39: the point mass
    assert moved.zero_floor == ()
    with pytest.raises(ThresholdError, match="zero_floor"):
        PercentileCalibrator(zero_floor=0.0)


def test_the_stored_tau_enter_trips_exactly_at_its_value_and_not_at_the_control_maximum(
    register_plugin: Any, make_kernel: Any
) -> None:
    """Rounded up to 4 digits, tau_enter stays strictly above the quantile it was chosen from."""
    register_plugin(percentile_plugin, name="calibrator-percentile")
    kernel = make_kernel({"breaker": {"node_trip": True}})
    rng = random.Random(5)
    for _ in range(30):
        runs = [
            [(rng.random() * 0.1, rng.random() * 0.05, rng.random() * 0.3) for _ in range(4)]
            for _ in range(19)
        ]
        # the control maximum the conformal rank picks at 5 % with 19 runs: the largest
        top = max(max(max(fast, own) for fast, _, own in run) for run in runs)
        report = calibrate(runs, kernel=kernel)
        tau_enter = report.thresholds.tau_enter
        assert top < tau_enter <= math.nextafter(top, 1.0) + 1e-4 * top * 10
        assert len(repr(tau_enter).replace("0.", "", 1).lstrip("0")) <= 4
        config = MachineConfig(Thresholds(*report.thresholds, kappa=0.05), node_trip=True)
        for own, trips in (
            (top, False),
            (math.nextafter(tau_enter, 0.0), False),
            (tau_enter, True),
        ):
            machine = ControlMachine(config)
            state = machine.step(0.0, 0.0, node="n", local_scores={"n": own}).state
            assert state.tripped is trips, (own, tau_enter)
