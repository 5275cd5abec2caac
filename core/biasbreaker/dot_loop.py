"""The whole control loop on simulated debates: DoT harness -> B_net -> control machine -> trace.

**Simulated.** The B_net trajectories come from :mod:`biasbreaker.dot` (a stochastic model of a
multi-agent debate, no model is called). The control machine, the calibration window and the
run trace are the real ones, so a simulated run exercises exactly the code a guarded pipeline
runs, and ``biasbreaker verify`` checks its trace.

Each simulated step is one guarded step: its fast and slow B_net go to
:meth:`~biasbreaker.machine.ControlMachine.step` with the speaking agent as the node, the
agents' latest local scores, their Katz weights, and the step's record as the payload (the
stand-in for the agent's output, frozen if the step trips the breaker). Steps before the first
local score (fast and slow still ``None``: nothing to decide on) are not guarded and are counted
as skipped.

The harness's own repair events (e.g. the ``recovery`` preset's repair at step 110) are part of
the simulated debate and happen whatever the machine decides: the loop is open. The mitigation
hook is the machine's (default: the no-op, so a tripped run escalates after ``max_retries``
interventions, the honest outcome while no repair strategy is installed).

Source:
    Phase 3 design (M3), WP7 "breaker behavior on DoT trajectories"; the seeds' README, "DoT
    trajectories".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from biasbreaker.calibration import ControlStatistics, summarise_control_runs
from biasbreaker.dot import PRESETS, DotConfig, DotStep, iter_dot
from biasbreaker.machine import AnyHook, ControlMachine, MachineConfig
from biasbreaker.propagation import katz_influence
from biasbreaker.trace import StepRecord
from biasbreaker.types import BreakerDecision, BreakerState

CONTROL_FIRST_SEED = 10_000
"""First seed of the simulated control runs that give the window its statistics."""


def simulated_control_statistics(
    debate: DotConfig, *, runs: int = 20, steps: int = 200, first_seed: int = CONTROL_FIRST_SEED
) -> ControlStatistics:
    """Mean and std of fast B_net over simulated control runs (the ``control`` preset).

    The control preset gets ``debate``'s propagation parameters (Katz attenuation or alpha,
    EWMA half-lives or smoothing factors), so the statistics match the runs they calibrate.

    Args:
        debate: The debate whose propagation parameters to use.
        runs: Number of control runs, >= 1.
        steps: Steps per control run, >= 2.
        first_seed: Seed of the first run; run ``i`` uses ``first_seed + i``.

    Returns:
        The statistics (simulated data).

    Raises:
        ThresholdError: If fast B_net never varies in the control runs.
    """
    control = replace(
        PRESETS["control"],
        attenuation=debate.attenuation,
        alpha=debate.alpha,
        fast_half_life=debate.fast_half_life,
        slow_half_life=debate.slow_half_life,
        fast_smoothing=debate.fast_smoothing,
        slow_smoothing=debate.slow_smoothing,
    )
    trajectories = [
        [
            (s.fast, s.slow)
            for s in iter_dot(control, seed=first_seed + i, steps=steps)
            if s.fast is not None and s.slow is not None
        ]
        for i in range(runs)
    ]
    return summarise_control_runs(trajectories).statistics


@dataclass(frozen=True, slots=True)
class LoopSummary:
    """What happened in a simulated run.

    Args:
        steps: Simulated steps.
        guarded: Steps given to the machine (the others had no score yet).
        interventions: Entries into INTERVENTION.
        first_trip: Simulated step of the first one, or ``None``.
        recoveries: Returns from RECOVERY to NORMAL.
        escalated_at: Simulated step at which the machine escalated, or ``None``.
        final_state: The machine's state after the last step.
    """

    steps: int
    guarded: int
    interventions: int
    first_trip: int | None
    recoveries: int
    escalated_at: int | None
    final_state: BreakerState


def run_dot_loop(
    debate: DotConfig,
    *,
    seed: int,
    steps: int,
    machine_config: MachineConfig,
    hook: AnyHook | None = None,
    recorder: Callable[[StepRecord], None] | None = None,
) -> tuple[list[tuple[DotStep, BreakerDecision | None]], LoopSummary]:
    """Run a simulated debate through the control machine.

    Args:
        debate: The simulated debate (a preset of :data:`biasbreaker.dot.PRESETS` or a custom
            :class:`~biasbreaker.dot.DotConfig`).
        seed: The debate's seed.
        steps: Simulated steps, >= 0.
        machine_config: The control machine's configuration.
        hook: The mitigation hook (default: the no-op).
        recorder: Receives each guarded step's trace record (e.g. a
            :class:`~biasbreaker.trace.TraceWriter`).

    Returns:
        Each simulated step with the machine's decision (``None`` for an unguarded step), and
        a summary.

    Raises:
        ConfigError: On an invalid debate, seed or step count.
    """
    weights = dict(
        katz_influence(debate.graph(), attenuation=debate.attenuation, alpha=debate.alpha).weights
    )
    machine = ControlMachine(machine_config, hook=hook, recorder=recorder)
    out: list[tuple[DotStep, BreakerDecision | None]] = []
    previous = BreakerState.NORMAL
    interventions = recoveries = 0
    first_trip = escalated_at = None
    for dot_step in iter_dot(debate, seed=seed, steps=steps):
        if dot_step.fast is None or dot_step.slow is None:
            out.append((dot_step, None))
            continue
        decision = machine.step(
            dot_step.fast,
            dot_step.slow,
            node=dot_step.node,
            local_scores=dot_step.scores,
            weights=weights,
            payload=dot_step.to_dict(),
        )
        state = decision.state
        if state is BreakerState.INTERVENTION and previous is not BreakerState.INTERVENTION:
            interventions += 1
            if first_trip is None:
                first_trip = dot_step.step
        if previous is BreakerState.RECOVERY and state is BreakerState.NORMAL:
            recoveries += 1
        if state is BreakerState.ESCALATED and escalated_at is None:
            escalated_at = dot_step.step
        previous = state
        out.append((dot_step, decision))
    summary = LoopSummary(
        steps=len(out),
        guarded=machine.steps_taken,
        interventions=interventions,
        first_trip=first_trip,
        recoveries=recoveries,
        escalated_at=escalated_at,
        final_state=machine.state,
    )
    return out, summary


def states_of(run: Sequence[tuple[DotStep, BreakerDecision | None]]) -> list[BreakerState]:
    """The machine's state at each guarded step of a run."""
    return [decision.state for _, decision in run if decision is not None]


__all__ = [
    "CONTROL_FIRST_SEED",
    "LoopSummary",
    "run_dot_loop",
    "simulated_control_statistics",
    "states_of",
]
