from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tracegen import CONTROL, TH, forge

from biasbreaker.breaker import freeze
from biasbreaker.calibration import CalibrationWindow, ControlStatistics
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.trace import TraceWriter
from biasbreaker.types import BreakerState, InterventionContext, InterventionResult
from biasbreaker.verify import verify_trace
from biasbreaker.verify.properties.rlb import RecoveryTracker, RecoveryTransition

OVER, WITHIN = 0.3, 0.1  # with CONTROL, 0.3 is beyond 3σ (0.25) and 0.1 is not
N = BreakerState.NORMAL


def transitions(outcomes: tuple[bool, ...], max_history: int) -> list[RecoveryTransition]:
    """Run over/within outcomes through a real window and the verifier's tracker."""
    window = CalibrationWindow(CONTROL, max_history)
    tracker = RecoveryTracker()
    found = []
    for step, over in enumerate(outcomes):
        counts = window.observe(OVER if over else WITHIN)
        transition = tracker.feed(
            step, over=over, beyond_3=counts.beyond_3, beyond_5=counts.beyond_5
        )
        if transition is not None:
            found.append(transition)
    return found


def test_smallest_counterexample_to_the_adr_literal_statement() -> None:
    # W = 1 and outcomes (over, over, within): two dirty cycles, then a clean one.
    [transition] = transitions((True, True, False), max_history=1)
    assert (transition.step, transition.dirty_run, transition.peak) == (2, 2, 1)
    # The ADR's literal L(t) <= peak(t) + W - 1 = 1 is false, and so is its witness's
    # dirty_run <= W ...
    assert not transition.literal_bound_holds(1)
    assert not transition.dirty_run <= 1
    # ... while the corrected bound (counted from the last over-threshold outcome) holds.
    assert transition.latency == 1
    assert transition.corrected_bound_holds(1)


def test_the_counterexample_is_the_smallest_and_the_corrected_bound_never_fails() -> None:
    smallest = None
    for length in range(1, 9):
        for max_history in range(1, 5):
            for outcomes in itertools.product((False, True), repeat=length):
                for t in transitions(outcomes, max_history):
                    assert t.corrected_bound_holds(max_history)
                    assert t.latency == max_history  # a sliding window is exactly W late
                    if not t.literal_bound_holds(max_history) and smallest is None:
                        smallest = (length, max_history, outcomes)
    assert smallest == (3, 1, (True, True, False))


def test_a_burst_longer_than_w_breaks_the_literal_bound_in_general() -> None:
    for max_history in range(1, 6):
        for burst in range(1, 12):
            [t] = transitions((True,) * burst + (False,) * (max_history + 1), max_history)
            assert t.dirty_run == burst + max_history - 1
            assert t.peak == min(burst, max_history)
            assert t.literal_bound_holds(max_history) == (burst <= max_history)


def test_verify_reports_the_counterexample_run(tmp_path: Path) -> None:
    trace_path = forge(
        tmp_path / "run.jsonl",
        [(N, WITHIN), (N, OVER), (N, OVER), (N, WITHIN), (N, WITHIN)],
        max_history=1,
    )
    rlb = verify_trace(trace_path).rlb
    assert rlb.holds
    assert not rlb.vacuous
    assert (rlb.property_version, rlb.max_history, rlb.cycles_total) == ("RLB-v1", 1, 5)
    assert (rlb.recovery_transitions, rlb.first_recovery_step) == (1, 3)
    assert rlb.literal_bound_exceeded == 1
    assert len(rlb.trace_sha256) == 64


def test_a_window_that_evicts_too_slowly_is_a_violation(tmp_path: Path) -> None:
    # The header says W = 3 but the recorded counts come from a window of 5.
    trace_path = forge(
        tmp_path / "run.jsonl", [(N, OVER)] * 2 + [(N, WITHIN)] * 8, max_history=3, window_length=5
    )
    rlb = verify_trace(trace_path).rlb
    assert not rlb.holds
    assert rlb.violation_count == 1
    [violation] = rlb.violations
    assert violation.step == 6
    assert (
        "window clean 5 steps after the last over-threshold outcome (step 1), more than "
        "W=3" in violation.message
    )


def test_a_window_dirty_without_any_outlier_is_a_violation(tmp_path: Path) -> None:
    trace_path = forge(tmp_path / "run.jsonl", [(N, WITHIN)] * 4, max_history=2)
    lines = trace_path.read_text().splitlines()
    lines[2] = lines[2].replace('"beyond_3":0', '"beyond_3":1')
    trace_path.write_text("\n".join(lines) + "\n")
    rlb = verify_trace(trace_path).rlb
    assert not rlb.holds
    assert "no over-threshold outcome was recorded" in rlb.violations[0].message


def test_sustained_drift_holds_vacuously_and_says_so(tmp_path: Path) -> None:
    trace_path = forge(tmp_path / "run.jsonl", [(N, WITHIN)] * 3 + [(N, OVER)] * 20, max_history=4)
    rlb = verify_trace(trace_path).rlb
    assert rlb.holds
    assert rlb.vacuous
    assert rlb.recovery_transitions == 0
    assert rlb.first_recovery_step is None
    assert "holds vacuously: no recovery transition" in rlb.note


def test_a_run_without_a_window_holds_vacuously(tmp_path: Path) -> None:
    trace_path = forge(tmp_path / "run.jsonl", [(N, OVER), (N, WITHIN)], max_history=None)
    rlb = verify_trace(trace_path).rlb
    assert rlb.vacuous
    assert rlb.max_history == 32
    assert "2 step(s) recorded no calibration window" in rlb.note


def test_a_different_w_from_the_run_is_noted(tmp_path: Path) -> None:
    trace_path = forge(tmp_path / "run.jsonl", [(N, OVER)] * 3 + [(N, WITHIN)] * 4, max_history=3)
    rlb = verify_trace(trace_path, max_history=2).rlb
    assert not rlb.holds  # against W=2 the real W=3 recovery is too late
    assert "checked with W=2 but the run's window had W=3" in rlb.note
    assert verify_trace(trace_path).rlb.holds


def _hook(context: InterventionContext) -> InterventionResult:
    return InterventionResult(freeze("fixed"), True, "skeptics", (), 0.05)


@given(
    st.integers(1, 6),
    st.integers(0, 3),
    st.lists(st.tuples(st.integers(1, 8), st.integers(0, 12)), min_size=1, max_size=8),
    st.data(),
)
def test_property_rlb_holds_on_generated_multi_cycle_runs(
    max_history: int, cooldown: int, cycles: list[tuple[int, int]], data: st.DataObject
) -> None:
    """Bursts of over-threshold outcomes and calm stretches, driven through the machine."""
    import tempfile

    control = ControlStatistics(0.1, 0.05, 1000)
    config = MachineConfig(
        TH, cooldown_steps=cooldown, max_retries=3, control=control, max_history=max_history, seed=1
    )
    fasts: list[float] = []
    expected = 0
    for burst, calm in cycles:
        fasts += [data.draw(st.floats(0.2501, 1.0)) for _ in range(burst)]
        fasts += [data.draw(st.floats(0.0, 0.25)) for _ in range(calm)]
        expected += calm >= max_history
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        with TraceWriter(path, config.trace_header()) as writer:
            machine = ControlMachine(config, hook=_hook, recorder=writer)
            for fast in fasts:
                machine.step(fast, fast / 2)
            writer.seal()
        report = verify_trace(path)
    assert report.rlb.holds
    assert report.rlb.recovery_transitions == expected
    assert report.holds
