from __future__ import annotations

import datetime
import itertools
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from biasbreaker.breaker import CircuitBreaker, freeze, mixing_ratio
from biasbreaker.errors import InputError, ScoreError, ThresholdError
from biasbreaker.types import BreakerAction, BreakerDecision, BreakerState

TAU_ENTER, TAU_EXIT, TAU_WARN, KAPPA = 0.5, 0.35, 0.2, 0.05

scores = st.floats(0.0, 1.0)
band = st.floats(TAU_EXIT, TAU_ENTER, exclude_max=True)


def breaker(**kwargs: object) -> CircuitBreaker:
    return CircuitBreaker(TAU_ENTER, TAU_EXIT, TAU_WARN, KAPPA, **kwargs)  # type: ignore[arg-type]


@given(st.lists(st.tuples(scores, scores), max_size=60))
def test_every_decision_passes_full_validation(steps: list[tuple[float, float]]) -> None:
    cb = breaker()
    for fast, slow in steps:
        decision = cb.check(fast, slow)
        assert isinstance(decision, BreakerDecision)
        assert BreakerDecision(*decision) == decision  # the hot path skips validation
        assert decision.b_net == fast
        assert decision.mixing_ratio == mixing_ratio(fast, TAU_ENTER, KAPPA)
        assert cb.tripped == (decision.state is BreakerState.INTERVENTION)


@given(st.booleans(), st.lists(st.tuples(band, scores), min_size=1, max_size=80))
def test_anti_thrash_no_flip_while_fast_stays_in_the_dead_band(
    tripped: bool, steps: list[tuple[float, float]]
) -> None:
    cb = breaker(tripped=tripped)
    for fast, slow in steps:
        decision = cb.check(fast, slow)
        assert (decision.state is BreakerState.INTERVENTION) == tripped
        assert cb.tripped == tripped


def test_enters_at_tau_enter_and_clears_only_below_tau_exit() -> None:
    cb = breaker()
    below = math.nextafter(TAU_ENTER, 0.0)
    assert cb.check(below, 0.0).state is BreakerState.NORMAL
    trip = cb.check(TAU_ENTER, 0.0)
    assert (trip.state, trip.action) == (BreakerState.INTERVENTION, BreakerAction.HALT)
    assert trip.mixing_ratio == 0.5
    assert cb.check(TAU_EXIT, 0.0).state is BreakerState.INTERVENTION  # tau_exit is not below
    cleared = cb.check(math.nextafter(TAU_EXIT, 0.0), 0.0)
    assert (cleared.state, cleared.action) == (BreakerState.NORMAL, BreakerAction.PROCEED)
    assert cleared.reason.startswith("fast < tau_exit")


def test_slow_scale_raises_a_warning_only_while_closed() -> None:
    cb = breaker()
    assert cb.check(0.1, TAU_WARN).state is BreakerState.WARNING
    assert cb.check(0.1, math.nextafter(TAU_WARN, 0.0)).state is BreakerState.NORMAL
    assert cb.check(0.9, TAU_WARN).state is BreakerState.INTERVENTION
    held = cb.check(0.4, 0.9)
    assert held.state is BreakerState.INTERVENTION  # tripped dominates the warning
    warned = cb.check(0.0, 0.9)
    assert (warned.state, warned.action) == (BreakerState.WARNING, BreakerAction.PROCEED)


def test_near_boundary_oscillation_enters_once_where_a_single_threshold_flips_many_times() -> None:
    rise = [0.1, 0.2, 0.3, 0.4, 0.45]
    oscillation = [TAU_ENTER + 0.02 * (-1) ** k for k in range(40)]  # 0.52, 0.48, 0.52, ...
    trajectory = rise + oscillation + [0.3, 0.2, 0.1]
    cb = breaker()
    states = [cb.check(fast, 0.0).state for fast in trajectory]
    entries = sum(
        1
        for a, b in itertools.pairwise(states)
        if b is BreakerState.INTERVENTION and a is not BreakerState.INTERVENTION
    )
    single = [fast >= TAU_ENTER for fast in trajectory]
    single_flips = sum(1 for a, b in itertools.pairwise(single) if a != b)
    assert entries == 1
    assert single_flips == 40  # the single threshold flips on every oscillation step
    assert states.index(BreakerState.INTERVENTION) == len(rise)
    assert states[len(rise) : len(rise) + len(oscillation)] == [BreakerState.INTERVENTION] * len(
        oscillation
    )
    assert states[-3:] == [BreakerState.NORMAL] * 3


@given(st.floats(-10.0, 10.0), st.floats(-10.0, 10.0), st.floats(1e-6, 10.0))
def test_mixing_ratio_is_monotonic_and_in_unit_interval(a: float, b: float, kappa: float) -> None:
    low, high = sorted((a, b))
    r_low, r_high = mixing_ratio(low, 0.3, kappa), mixing_ratio(high, 0.3, kappa)
    assert 0.0 <= r_low <= r_high <= 1.0


def test_mixing_ratio_is_stable_for_extreme_arguments() -> None:
    assert mixing_ratio(0.3, 0.3, 1e-300) == 0.5
    assert mixing_ratio(1e300, 0.0, 1e-300) == 1.0
    assert mixing_ratio(0.0, 1e300, 1e-300) == 0.0
    assert mixing_ratio(1.0, 0.0, 1e-3) == 1.0
    assert mixing_ratio(0.0, 1.0, 1e-3) == 0.0
    assert mixing_ratio(0.31, 0.3, 0.01) == pytest.approx(1 / (1 + math.exp(-1.0)))


@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, float("inf"), -0.01, 1.0000001, 5, 7.0, "0.4", None, True]
)
def test_check_rejects_invalid_scores_naming_the_argument_and_keeps_state(bad: object) -> None:
    cb = breaker()
    cb.check(0.9, 0.0)
    with pytest.raises(ScoreError, match=r"fast="):
        cb.check(bad, 0.0)  # type: ignore[arg-type]
    with pytest.raises(ScoreError, match=r"slow="):
        cb.check(0.1, bad)  # type: ignore[arg-type]
    assert cb.tripped


def test_check_accepts_both_ends_of_the_unit_interval() -> None:
    cb = breaker()
    assert cb.check(1.0, 1.0).state is BreakerState.INTERVENTION
    assert cb.check(0.0, 0.0).state is BreakerState.NORMAL


def test_a_slow_b_net_above_1_is_refused_not_a_warning() -> None:
    cb = breaker()
    with pytest.raises(ScoreError, match=r"slow=5 is above 1"):
        cb.check(0.1, 5)
    assert not cb.tripped


def test_check_accepts_ints() -> None:
    assert breaker().check(1, 0).state is BreakerState.INTERVENTION


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0.3, 0.5, 0.2, 0.05), "tau_enter=0.3 must be greater than tau_exit=0.5"),
        ((0.5, 0.5, 0.2, 0.05), "tau_enter=0.5 must be greater than tau_exit=0.5"),
        ((0.5, 0.3, 0.2, 0.0), "kappa=0.0"),
        ((0.5, 0.3, 0.2, -0.1), "kappa=-0.1"),
        ((0.5, 0.3, math.nan, 0.1), "tau_warn=nan"),
    ],
)
def test_constructor_rejects_bad_thresholds(args: tuple[float, ...], match: str) -> None:
    with pytest.raises(ThresholdError, match=match):
        CircuitBreaker(*args)
    with pytest.raises(ValueError, match=match):  # a ThresholdError is a ValueError (seed WP2)
        CircuitBreaker(*args)


def test_thresholds_by_keyword_and_tripped_only_by_keyword() -> None:
    cb = CircuitBreaker(tau_enter=TAU_ENTER, tau_exit=TAU_EXIT, tau_warn=TAU_WARN, kappa=KAPPA)
    assert not cb.tripped and cb.thresholds == breaker().thresholds
    restored = CircuitBreaker.from_thresholds(thresholds=cb.thresholds, tripped=True)
    assert restored.tripped
    assert not CircuitBreaker.from_thresholds(cb.thresholds).tripped  # closed by default
    with pytest.raises(TypeError):
        CircuitBreaker(TAU_ENTER, TAU_EXIT, TAU_WARN, KAPPA, True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        CircuitBreaker.from_thresholds(cb.thresholds, True)  # type: ignore[call-arg]


def test_the_ratio_just_above_tau_enter_is_mixing_ratio_to_the_bit() -> None:
    """0 < x < 1: the two sigmoid forms differ in the last bit there; check uses mixing_ratio's."""
    for k in range(1, 200):
        fast = TAU_ENTER + KAPPA * k / 200
        assert breaker().check(fast, 0.0).mixing_ratio == mixing_ratio(fast, TAU_ENTER, KAPPA)


def test_snapshot_restore_and_reset() -> None:
    cb = breaker()
    cb.check(0.9, 0.0)
    again = CircuitBreaker.restore(cb.snapshot())
    assert again.tripped
    assert again.thresholds == cb.thresholds
    assert again.check(0.4, 0.0).state is BreakerState.INTERVENTION
    again.reset()
    assert again.check(0.4, 0.0).state is BreakerState.NORMAL
    with pytest.raises(InputError, match="tripped"):
        CircuitBreaker.restore({"thresholds": cb.thresholds.to_json()})


@given(
    st.lists(st.tuples(scores, scores), max_size=40),
    st.lists(st.tuples(scores, scores), max_size=40),
)
def test_restored_breaker_continues_identically(
    prefix: list[tuple[float, float]], suffix: list[tuple[float, float]]
) -> None:
    assume(prefix)
    cb = breaker()
    for fast, slow in prefix:
        cb.check(fast, slow)
    clone = CircuitBreaker.restore(cb.snapshot())
    assert [cb.check(f, s) for f, s in suffix] == [clone.check(f, s) for f, s in suffix]


def test_freeze_snapshot_is_recoverable_and_unmutated() -> None:
    output = {"candidate": "A", "ranking": [3, 1, 2]}
    frozen = freeze(output)
    output["ranking"].append(4)  # type: ignore[attr-defined]
    assert frozen.thaw() == {"candidate": "A", "ranking": [3, 1, 2]}
    assert frozen == freeze({"ranking": [3, 1, 2], "candidate": "A"})
    with pytest.raises(InputError, match=r"payload\['when'\].*datetime"):
        freeze({"when": datetime.datetime(2026, 1, 1)})
