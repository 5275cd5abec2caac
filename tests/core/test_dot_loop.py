"""The control loop on DoT trajectories from the harness (simulated debates)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from biasbreaker.breaker import CircuitBreaker, freeze
from biasbreaker.calibration import summarise_control_runs
from biasbreaker.dot import PRESETS, RepairEvent, simulate_dot
from biasbreaker.dot_loop import run_dot_loop, simulated_control_statistics, states_of
from biasbreaker.machine import MachineConfig
from biasbreaker.trace import TraceWriter
from biasbreaker.types import BreakerState, InterventionContext, InterventionResult, Thresholds
from biasbreaker.verify import verify_trace

S = BreakerState
TH = Thresholds(tau_enter=0.30, tau_exit=0.20, tau_warn=0.15, kappa=0.05)  # the [breaker] defaults
CONTROL = simulated_control_statistics(PRESETS["control"])
CONFIG = MachineConfig(TH, cooldown_steps=3, max_retries=2, control=CONTROL, max_history=32)

# Rises through tau_enter near step 82, oscillates around it, then a permanent repair of every
# agent at step 150 brings it down: the trajectory of the seed's one-sentence success test.
RISE_OSCILLATE_FALL = replace(
    PRESETS["oscillate-near-threshold"],
    name="rise-oscillate-fall",
    repairs=(RepairEvent(150, strength=1.0, permanent=True),),
)


def stub_repair(context: InterventionContext) -> InterventionResult:
    """A stand-in for M4: a repair whose re-check passes (simulated, for the control plane)."""
    return InterventionResult(freeze({"repaired": context.step}), True, "skeptics", (), 0.05)


def entries(states: list[BreakerState]) -> list[int]:
    return [
        i
        for i, s in enumerate(states)
        if s is S.INTERVENTION and (i == 0 or states[i - 1] is not S.INTERVENTION)
    ]


def test_seed_success_test_on_a_dot_trajectory() -> None:
    """Rises through tau_enter, oscillates near it: one entry, no flip; Normal only after
    B_net < tau_exit and the cool-down; deterministically."""
    run, summary = run_dot_loop(
        RISE_OSCILLATE_FALL, seed=1, steps=240, machine_config=CONFIG, hook=stub_repair
    )
    fast = [dot.fast for dot, _ in run]
    states = states_of(run)
    assert len(states) == 240  # every step guarded
    trip = fast.index(next(f for f in fast if f is not None and f >= TH.tau_enter))
    assert entries(states) == [trip]  # enters INTERVENTION exactly once, at the breach
    normal = next(i for i in range(trip, len(states)) if states[i] is S.NORMAL)
    # The oscillation: fast crosses tau_enter again and again between the trip and the repair...
    window = fast[trip:150]
    crossings = sum(
        (a >= TH.tau_enter) != (b >= TH.tau_enter)  # type: ignore[operator]
        for a, b in itertools.pairwise(window)
    )
    assert crossings >= 3  # the preset's wave has a 40-step period: 3 crossings here
    # ...and the breaker never flips back to closed during it.
    assert all(state.tripped for state in states[trip:normal])
    assert min(f for f in fast[trip:150] if f is not None) >= TH.tau_exit
    # Normal only after fast < tau_exit and the cool-down (and a clean window).
    assert fast[normal] < TH.tau_exit  # type: ignore[operator]
    assert states[normal - CONFIG.cooldown_steps : normal] == [S.RECOVERY] * CONFIG.cooldown_steps
    assert normal > 150
    assert summary.interventions == 1 and summary.recoveries == 1
    assert summary.final_state is S.NORMAL
    again, _ = run_dot_loop(
        RISE_OSCILLATE_FALL, seed=1, steps=240, machine_config=CONFIG, hook=stub_repair
    )
    assert again == run  # deterministic


def test_the_bare_breaker_enters_once_where_a_single_threshold_thrashes() -> None:
    trajectory = [s.fast for s in simulate_dot("oscillate-near-threshold", seed=1, steps=200)]
    breaker = CircuitBreaker(TH.tau_enter, TH.tau_exit, TH.tau_warn, TH.kappa)
    states = [breaker.check(f, 0.0).state for f in trajectory]  # type: ignore[arg-type]
    single = [f >= TH.tau_enter for f in trajectory]  # type: ignore[operator]
    assert len(entries(states)) == 1
    single_entries = sum(b and not a for a, b in itertools.pairwise(single))
    assert single_entries >= 3  # a single threshold re-enters on every swing


def test_the_oscillate_preset_enters_once_and_never_recovers() -> None:
    run, summary = run_dot_loop(
        PRESETS["oscillate-near-threshold"],
        seed=1,
        steps=200,
        machine_config=CONFIG,
        hook=stub_repair,
    )
    states = states_of(run)
    first = entries(states)
    assert len(first) == 1
    assert all(s.tripped for s in states[first[0] :])
    assert summary.final_state is S.RECOVERY  # fast never falls below tau_exit: held, halted


def test_default_noop_hook_escalates_after_max_retries_on_a_dot_trajectory() -> None:
    run, summary = run_dot_loop(PRESETS["recovery"], seed=1, steps=200, machine_config=CONFIG)
    states = states_of(run)
    trip = entries(states)[0]
    assert states[trip : trip + 9] == [
        S.INTERVENTION, S.RECOVERY, S.RECOVERY, S.RECOVERY,
        S.INTERVENTION, S.RECOVERY, S.RECOVERY, S.RECOVERY,
        S.ESCALATED,
    ]  # fmt: skip
    assert set(states[trip + 8 :]) == {S.ESCALATED}  # terminal, though B_net recovers at 110
    assert summary.escalated_at == trip + 8
    assert summary.interventions == CONFIG.max_retries


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("hook", [None, stub_repair], ids=["noop", "stub-repair"])
def test_every_property_holds_on_every_preset(preset: str, hook: object, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with TraceWriter(path, CONFIG.trace_header({"preset": preset})) as writer:
        run_dot_loop(
            PRESETS[preset],
            seed=2,
            steps=200,
            machine_config=CONFIG,
            hook=hook,  # type: ignore[arg-type]
            recorder=writer,
        )
        writer.seal()  # the run ended: a trace that is not sealed does not verify
    report = verify_trace(path)
    assert report.holds, report.to_json()
    assert report.steps == 200


def test_simulated_control_statistics_come_from_the_control_preset() -> None:
    runs = [
        [(s.fast, s.slow) for s in simulate_dot("control", seed=10_000 + i, steps=200)]
        for i in range(20)
    ]
    expected = summarise_control_runs(runs).statistics  # type: ignore[arg-type]
    assert expected == CONTROL
    other = simulated_control_statistics(replace(PRESETS["control"], fast_half_life=4.0))
    assert other != CONTROL  # the propagation settings are carried over
