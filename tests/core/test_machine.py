from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.breaker import freeze, mixing_ratio
from biasbreaker.calibration import ControlStatistics
from biasbreaker.config import load_settings
from biasbreaker.errors import InputError, ScoreError
from biasbreaker.machine import (
    TRANSITIONS,
    ControlMachine,
    Counters,
    GuardInputs,
    MachineConfig,
    cooldown_elapsed,
    noop_hook,
    probation_failed_budget_spent,
    probation_failed_with_budget,
    relapsed_budget_spent,
    relapsed_with_budget,
    select_transition,
)
from biasbreaker.propagation import AgentGraph, katz_influence, network_score
from biasbreaker.trace import StepRecord
from biasbreaker.types import (
    BreakerAction,
    BreakerDecision,
    BreakerState,
    InterventionContext,
    InterventionResult,
    LazyPayload,
    Thresholds,
)

S = BreakerState
A = BreakerAction
TH = Thresholds(tau_enter=0.5, tau_exit=0.35, tau_warn=0.25, kappa=0.05)
# Window bands: over 3σ above 0.25, over 5σ above 0.35.
CONTROL = ControlStatistics(mean=0.1, std=0.05, n_steps=1000)


def config(**changes: object) -> MachineConfig:
    fields: dict[str, object] = dict(
        thresholds=TH, cooldown_steps=3, max_retries=2, control=None, max_history=4, seed=7
    )
    fields.update(changes)
    return MachineConfig(**fields)  # type: ignore[arg-type]


def repairing(
    recheck: float = 0.1, calls: list[InterventionContext] | None = None
) -> Callable[[InterventionContext], InterventionResult]:
    def hook(context: InterventionContext) -> InterventionResult:
        if calls is not None:
            calls.append(context)
        return InterventionResult(
            freeze({"repaired": True, "attempt": context.attempt}),
            True,
            "madera",
            [{"event": "rewrite"}],
            recheck,
        )

    return hook


def run(
    machine: ControlMachine, fasts: Sequence[float], slow: float = 0.0, **step_kwargs: object
) -> list[tuple[BreakerDecision, StepRecord]]:
    out = []
    for fast in fasts:
        decision = machine.step(fast, slow, **step_kwargs)  # type: ignore[arg-type]
        assert machine.last_record is not None
        out.append((decision, machine.last_record))
    return out


def states(steps: list[tuple[BreakerDecision, StepRecord]]) -> list[BreakerState]:
    return [d.state for d, _ in steps]


# -- a payload built only when it is frozen ------------------------------------------------------


def counted(value: object, builds: list[object]) -> LazyPayload:
    def build() -> object:
        builds.append(value)
        return value

    return LazyPayload(build)


def test_a_lazy_payload_is_built_only_by_a_step_that_freezes_it() -> None:
    eager, lazy = (
        ControlMachine(config(), hook=repairing()),
        ControlMachine(config(), hook=repairing()),
    )
    builds: list[object] = []
    for fast, scores in [(0.1, None), (0.2, {"writer": 0.1}), (0.3, None)]:  # steady, planned
        payload = {"text": f"output at {fast}"}
        kwargs = {"node": "writer", "local_scores": scores}
        first = eager.step(fast, 0.0, payload=payload, **kwargs)  # type: ignore[arg-type]
        second = lazy.step(fast, 0.0, payload=counted(payload, builds), **kwargs)  # type: ignore[arg-type]
        assert first == second and first.frozen_payload is None
    assert builds == []  # no step froze it: never built
    payload = {"text": "biased output"}
    tripped = lazy.step(0.6, 0.1, node="writer", payload=counted(payload, builds))
    assert eager.step(0.6, 0.1, node="writer", payload=payload) == tripped
    assert builds == [payload] and tripped.frozen_payload == freeze(payload)
    assert lazy.snapshot() == eager.snapshot()
    held = lazy.step(0.1, 0.0, node="writer", payload=counted([1, 2], builds), hold="unreadable")
    assert held.frozen_payload == freeze([1, 2]) and builds == [payload, [1, 2]]


def test_a_lazy_payload_is_built_once_and_a_failed_build_is_retried() -> None:
    calls: list[int] = []

    def build() -> object:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("not yet")
        return {"a": 1}

    lazy = LazyPayload(build)
    with pytest.raises(ValueError, match="not yet"):
        freeze(lazy)
    assert not lazy.built
    assert freeze(lazy) == freeze({"a": 1}) == freeze(lazy) and lazy.built
    assert len(calls) == 2


# -- the transition table -------------------------------------------------------------------------


def test_transition_table_covers_every_edge_of_the_r3_diagram() -> None:
    edges = {(t.source, t.target) for t in TRANSITIONS}
    assert edges == {
        (S.NORMAL, S.WARNING),
        (S.WARNING, S.NORMAL),
        (S.NORMAL, S.INTERVENTION),
        (S.WARNING, S.INTERVENTION),
        (S.INTERVENTION, S.RECOVERY),
        (S.RECOVERY, S.NORMAL),
        (S.RECOVERY, S.INTERVENTION),
        (S.RECOVERY, S.ESCALATED),
    }
    assert not [t for t in TRANSITIONS if t.source is S.ESCALATED]


# -- the WP3 lifecycle ----------------------------------------------------------------------------


def test_enter_on_spike_freezes_payload_and_calls_the_hook_with_full_context() -> None:
    calls: list[InterventionContext] = []
    machine = ControlMachine(config(), hook=repairing(calls=calls))
    run(machine, [0.1, 0.2], node="writer", local_scores={"writer": 0.1, "reader": 0.0})
    payload = {"text": "biased output"}
    decision = machine.step(
        0.6,
        0.1,
        node="writer",
        payload=payload,
        local_scores={"writer": 0.9, "reader": 0.2},
        weights={"writer": 0.6, "reader": 0.4},
    )
    payload["text"] = "mutated afterwards"
    assert (decision.state, decision.action) == (S.INTERVENTION, A.REROUTE)
    assert decision.frozen_payload is not None
    assert decision.frozen_payload.thaw() == {"text": "biased output"}
    assert decision.reason.startswith("trip: fast 0.6 >= tau_enter 0.5")
    assert decision.mixing_ratio == pytest.approx(1 / (1 + math.exp(-2.0)))
    [context] = calls
    assert (context.step, context.node, context.state, context.attempt) == (
        2,
        "writer",
        S.NORMAL,
        1,
    )
    assert (context.fast, context.slow, context.thresholds) == (0.6, 0.1, TH)
    assert context.history == {"writer": (0.1, 0.1, 0.9), "reader": (0.0, 0.0, 0.2)}
    assert context.magnitudes == {"writer": 0.6 * 0.9, "reader": 0.4 * 0.2}
    assert context.frozen_payload == decision.frozen_payload
    record = machine.last_record
    assert record is not None
    assert record.transition == "trip"
    assert record.episode == 1
    assert record.attempt == 1
    assert record.payload_sha256 == decision.frozen_payload.sha256
    assert record.intervention is not None
    assert record.intervention["strategy"] == "madera"


@pytest.mark.parametrize("cooldown", [0, 1, 3, 5])
def test_cooldown_gates_recovery_even_when_everything_else_is_fine(cooldown: int) -> None:
    machine = ControlMachine(config(cooldown_steps=cooldown), hook=repairing())
    steps = run(machine, [0.9] + [0.0] * 10)
    recovery_steps = max(cooldown, 1)
    assert states(steps) == (
        [S.INTERVENTION] + [S.RECOVERY] * recovery_steps + [S.NORMAL] * (10 - recovery_steps)
    )
    recovered, record = steps[1 + recovery_steps]
    assert record.transition == "recover"
    assert recovered.action is A.PROCEED
    assert recovered.frozen_payload is not None
    assert recovered.frozen_payload.thaw() == {"repaired": True, "attempt": 1}


def test_recovery_waits_for_fast_below_tau_exit_after_the_cooldown() -> None:
    machine = ControlMachine(config(), hook=repairing())
    steps = run(machine, [0.9, 0.6, 0.45, 0.4, 0.36, TH.tau_exit, 0.34, 0.1])
    assert states(steps) == [S.INTERVENTION] + [S.RECOVERY] * 5 + [S.NORMAL] * 2
    assert steps[5][0].reason == "recovery holds: fast 0.35 >= tau_exit 0.35"


def test_retry_on_recheck_bad_then_recover() -> None:
    calls: list[InterventionContext] = []
    outcomes = iter([0.4, 0.05])  # first repair re-checks at 0.4 >= tau_exit, second passes

    def hook(context: InterventionContext) -> InterventionResult:
        calls.append(context)
        return InterventionResult(
            freeze({"try": context.attempt}), True, "skeptics", (), next(outcomes)
        )

    machine = ControlMachine(config(cooldown_steps=2), hook=hook)
    steps = run(machine, [0.9] + [0.0] * 8, payload={"text": "x"})
    assert states(steps) == [
        S.INTERVENTION,
        S.RECOVERY,
        S.RECOVERY,
        S.INTERVENTION,
        S.RECOVERY,
        S.RECOVERY,
        S.NORMAL,
        S.NORMAL,
        S.NORMAL,
    ]
    assert [r.transition for _, r in steps[:7]] == [
        "trip",
        "recover-start",
        "hold",
        "retry",
        "recover-start",
        "hold",
        "recover",
    ]
    assert [c.attempt for c in calls] == [1, 2]
    assert calls[1].state is S.RECOVERY
    assert calls[1].frozen_payload == calls[0].frozen_payload  # the retry repairs the same output
    assert calls[0].seed != calls[1].seed
    assert steps[3][0].reason.startswith("retry 2/2")
    assert steps[6][0].frozen_payload is not None
    assert steps[6][0].frozen_payload.thaw() == {"try": 2}


def test_default_noop_hook_escalates_after_max_retries_and_stays_escalated() -> None:
    machine = ControlMachine(config(cooldown_steps=2, max_retries=3))
    steps = run(machine, [0.9] + [0.0] * 15, payload={"text": "frozen"})
    expected = ([S.INTERVENTION, S.RECOVERY, S.RECOVERY] * 3) + [S.ESCALATED] * 7
    assert states(steps) == expected
    actions = [d.action for d, _ in steps]
    assert actions[:3] == [A.HALT, A.HALT, A.HALT]  # the no-op routes nowhere: HALT, not REROUTE
    assert actions[9:] == [A.ESCALATE] * 7
    assert steps[9][1].transition == "escalate"
    # the no-op repaired nothing: the reason says so rather than counting interventions
    assert "no repair was made (3 attempt(s), the last routed to 'none'), max_retries 3" in (
        steps[9][0].reason
    )
    for decision, _ in steps[9:]:
        assert decision.frozen_payload is not None
        assert decision.frozen_payload.thaw() == {"text": "frozen"}
    assert A.PROCEED not in actions


def test_an_escalation_after_repairs_that_ran_counts_the_interventions() -> None:
    def unconverged(context: InterventionContext) -> InterventionResult:
        return InterventionResult(strategy="madera", trail=[{"event": "rewrite"}])

    machine = ControlMachine(config(cooldown_steps=0, max_retries=2), hook=unconverged)
    steps = run(machine, [0.9] + [0.0] * 5, payload={"text": "frozen"})
    (reason,) = [d.reason for d, r in steps if r.transition == "escalate"]
    assert reason.startswith("escalate: 2 intervention(s) made, max_retries 2"), reason


def test_without_repair_the_machine_escalates_two_re_steps_after_the_trip() -> None:
    machine = ControlMachine(config(cooldown_steps=3, max_retries=2).without_repair())
    steps = run(machine, [0.9] + [0.0] * 3, payload={"text": "frozen"})
    assert [r.transition for _, r in steps[:3]] == ["trip", "recover-start", "escalate"]
    assert [d.action for d, _ in steps[:3]] == [A.HALT, A.HALT, A.ESCALATE]
    assert (machine.config.max_retries, machine.config.cooldown_steps) == (1, 0)


def test_a_later_output_held_while_escalated_is_the_decisions_own_payload() -> None:
    machine = ControlMachine(config(cooldown_steps=0, max_retries=1))
    run(machine, [0.9, 0.0, 0.0], node="assess", payload={"verdict": "hire"})
    assert machine.state is S.ESCALATED
    escalated = freeze({"verdict": "hire"})
    decision = machine.step(0.0, 0.0, node="notify", payload={"letter": "hired"})
    # notify's output goes to review itself: the decision and the record refer to it
    assert decision.action is A.ESCALATE
    assert decision.frozen_payload == freeze({"letter": "hired"})
    assert machine.last_record is not None
    assert machine.last_record.payload_sha256 == freeze({"letter": "hired"}).sha256
    # the escalated episode's output stays the machine's frozen payload
    assert machine.snapshot()["frozen_payload"] == escalated.to_json()
    no_payload = machine.step(0.0, 0.0, node="notify")
    assert no_payload.frozen_payload == escalated


def test_escalated_is_terminal_whatever_the_inputs() -> None:
    machine = ControlMachine(config(max_retries=1, cooldown_steps=0))
    run(machine, [0.9, 0.0, 0.0])
    assert machine.state is S.ESCALATED
    for fast, slow in [(0.0, 0.0), (0.9, 0.9), (0.4, 0.1)]:
        assert machine.step(fast, slow).state is S.ESCALATED


def test_a_raising_hook_fails_closed_and_counts_as_an_attempt() -> None:
    def hook(context: InterventionContext) -> InterventionResult:
        raise ValueError("skeptic panel exploded")

    machine = ControlMachine(config(cooldown_steps=1, max_retries=2), hook=hook)
    steps = run(machine, [0.9, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert states(steps) == [
        S.INTERVENTION,
        S.RECOVERY,
        S.INTERVENTION,
        S.RECOVERY,
        S.ESCALATED,
        S.ESCALATED,
    ]
    decision, record = steps[0]
    assert decision.action is A.HALT
    assert (
        "intervention failed closed: intervention hook raised ValueError: skeptic panel "
        "exploded" in decision.reason
    )
    assert record.intervention is not None
    assert record.intervention["error"] == (
        "intervention hook raised ValueError: skeptic panel exploded"
    )
    assert all(d.action is not A.PROCEED for d, _ in steps)


@pytest.mark.parametrize("returned", [None, {"repaired": True}, "ok"])
def test_a_hook_returning_the_wrong_type_fails_closed(returned: object) -> None:
    machine = ControlMachine(config(), hook=lambda context: returned)  # type: ignore[arg-type,return-value]
    decision = machine.step(0.9, 0.0)
    assert decision.action is A.HALT
    assert "expected InterventionResult" in decision.reason


def test_async_hook_with_astep() -> None:
    async def hook(context: InterventionContext) -> InterventionResult:
        await asyncio.sleep(0)
        return InterventionResult(freeze("fixed"), True, "skeptics", (), 0.0)

    async def drive() -> list[BreakerState]:
        machine = ControlMachine(config(cooldown_steps=1), hook=hook)
        return [(await machine.astep(f, 0.0)).state for f in [0.9, 0.0, 0.0]]

    assert asyncio.run(drive()) == [S.INTERVENTION, S.RECOVERY, S.NORMAL]


def test_sync_hook_also_works_with_astep() -> None:
    async def drive() -> BreakerDecision:
        return await ControlMachine(config(), hook=repairing()).astep(0.9, 0.0)

    assert asyncio.run(drive()).action is A.REROUTE


def test_coroutine_hook_driven_by_step_fails_closed_without_leaking_the_coroutine() -> None:
    async def hook(context: InterventionContext) -> InterventionResult:
        return InterventionResult.noop()

    machine = ControlMachine(config(), hook=hook)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a never-awaited coroutine would warn
        decision = machine.step(0.9, 0.0)
    assert decision.action is A.HALT
    assert "returned an awaitable; drive the machine with astep()" in decision.reason


def test_cancelled_astep_leaves_the_machine_unchanged() -> None:
    started = asyncio.Event()

    async def hook(context: InterventionContext) -> InterventionResult:
        started.set()
        await asyncio.sleep(3600)
        raise AssertionError("not reached")

    async def drive() -> tuple[object, object]:
        machine = ControlMachine(config(control=CONTROL), hook=hook)
        await machine.astep(0.1, 0.0, local_scores={"a": 0.1})
        before = machine.snapshot()
        task = asyncio.create_task(machine.astep(0.9, 0.0, local_scores={"a": 0.9}))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return before, machine.snapshot()

    before, after = asyncio.run(drive())
    assert before == after


def test_a_dirty_calibration_window_blocks_recovery_until_w_steps_after_the_last_outlier() -> None:
    machine = ControlMachine(
        config(control=CONTROL, max_history=4, cooldown_steps=1), hook=repairing()
    )
    # 0.3 is below tau_exit (0.35) but above the control 3σ band (0.25): the window stays dirty.
    fasts = [0.9, 0.3, 0.3, 0.3, 0.2, 0.2, 0.2, 0.2, 0.2]
    steps = run(machine, fasts)
    last_outlier = 3
    assert states(steps)[: last_outlier + 4] == [S.INTERVENTION] + [S.RECOVERY] * 6
    assert steps[last_outlier + 3][0].reason == "recovery holds: calibration window dirty"
    assert states(steps)[last_outlier + 4] is S.NORMAL  # exactly W = 4 steps later
    window = steps[last_outlier + 4][1].window
    assert window is not None
    assert not window.dirty


def test_warning_follows_the_slow_scale_and_trip_from_warning() -> None:
    calls: list[InterventionContext] = []
    machine = ControlMachine(config(), hook=repairing(calls=calls))
    assert machine.step(0.1, 0.3).state is S.WARNING
    assert machine.step(0.1, 0.3).state is S.WARNING
    calm = machine.step(0.1, 0.2)
    assert calm.state is S.NORMAL
    assert calm.reason.startswith("calm")
    assert machine.step(0.1, 0.3).state is S.WARNING
    assert machine.step(0.7, 0.3).state is S.INTERVENTION
    assert calls[0].state is S.WARNING


def test_warning_holds_while_slow_is_exactly_tau_warn() -> None:
    machine = ControlMachine(config(), hook=repairing())
    assert machine.step(0.1, TH.tau_warn).state is S.WARNING  # slow >= tau_warn warns
    held = machine.step(0.1, TH.tau_warn)  # slow >= tau_warn: the drift has not subsided
    assert held.state is S.WARNING
    assert machine.last_record is not None and machine.last_record.transition == "hold"
    assert machine.step(0.1, math.nextafter(TH.tau_warn, 0.0)).state is S.NORMAL


@pytest.mark.parametrize("attempts", range(5))
def test_the_budget_guards_split_every_attempt_count_in_two(attempts: int) -> None:
    """With max_retries=2: spent iff attempts >= 2, with budget iff attempts < 2, never both.

    Counts past the budget (3, 4) are checked too: the guards are the table's whole logic, and
    a guard that is right only at the budget would retry a restored machine for ever.
    """
    relapsed = Counters(S.RECOVERY, attempts=attempts, recovery_steps=3, recheck_ok=False)
    probation = Counters(S.RECOVERY, attempts=attempts, recovery_steps=0, recheck_ok=True)
    for counters, spent, with_budget in (
        (relapsed, relapsed_budget_spent, relapsed_with_budget),
        (probation, probation_failed_budget_spent, probation_failed_with_budget),
    ):
        # own score exactly tau_exit fails probation (>= tau_exit)
        g = GuardInputs(counters, 0.2, 0.0, False, TH, 3, 2, TH.tau_exit, True, False)
        assert spent(g) is (attempts >= 2)
        assert with_budget(g) is (attempts < 2)


def test_a_cooldown_of_zero_still_takes_one_recovery_step() -> None:
    for steps, elapsed in ((0, False), (1, True)):
        counters = Counters(S.RECOVERY, attempts=1, recovery_steps=steps, recheck_ok=True)
        g = GuardInputs(counters, 0.1, 0.0, False, TH, 0, 2)
        assert cooldown_elapsed(g) is elapsed


def test_half_open_holds_the_output_that_leaves_intervention_at_exactly_tau_exit() -> None:
    machine = ControlMachine(config(probation="half-open"), hook=repairing(0.05))
    machine.step(0.6, 0.1, node="a", local_scores={"a": 0.6}, payload={"out": 1})
    # the re-check passed, but this output's own score is not below tau_exit: held
    held = machine.step(0.4, 0.1, node="b", local_scores={"b": TH.tau_exit}, payload={"out": 2})
    assert (held.state, held.action) == (S.RECOVERY, A.HALT)
    clean = math.nextafter(TH.tau_exit, 0.0)
    passed = machine.step(0.4, 0.1, node="c", local_scores={"c": clean}, payload={"out": 3})
    assert (passed.state, passed.action) == (S.RECOVERY, A.PROCEED)


def test_invalid_inputs_raise_and_leave_the_machine_unchanged() -> None:
    machine = ControlMachine(config(control=CONTROL))
    machine.step(0.1, 0.0, local_scores={"a": 0.1})
    before = machine.snapshot()
    with pytest.raises(ScoreError, match="fast=nan"):
        machine.step(math.nan, 0.0)
    with pytest.raises(ScoreError, match="slow=-1"):
        machine.step(0.1, -1)
    with pytest.raises(ScoreError, match=r"local_scores\['a'\]"):
        machine.step(0.1, 0.0, local_scores={"a": math.inf})
    with pytest.raises(ScoreError, match=r"local_scores\['a'\]=7 is above 1"):
        machine.step(0.1, 0.0, local_scores={"a": 7})
    with pytest.raises(ScoreError, match=r"fast=1\.5 is above 1"):
        machine.step(1.5, 0.0)
    with pytest.raises(ScoreError, match=r"slow=5 is above 1"):
        machine.step(0.1, 5)
    with pytest.raises(ScoreError, match=r"local_scores\['a'\]='0\.4' is not a score"):
        machine.step(0.1, 0.0, local_scores={"a": "0.4"})
    with pytest.raises(ScoreError, match=r"local_scores\['a'\]=True is not a score"):
        machine.step(0.1, 0.0, local_scores={"a": True})
    with pytest.raises(InputError, match=r"payload\['x'\].*set"):
        machine.step(0.9, 0.0, payload={"x": {1}})
    with pytest.raises(InputError, match="node="):
        machine.step(0.1, 0.0, node="")
    assert machine.snapshot() == before


def test_history_keeps_the_last_history_steps_scores_per_node() -> None:
    calls: list[InterventionContext] = []
    machine = ControlMachine(config(history_steps=3), hook=repairing(calls=calls))
    for score in [0.1, 0.2, 0.3, 0.4]:
        machine.step(0.1, 0.0, local_scores={"a": score})
    machine.step(0.9, 0.0, local_scores={"a": 0.5, "b": 0.6})
    assert calls[0].history == {"a": (0.3, 0.4, 0.5), "b": (0.6,)}


def test_intervention_seeds_are_deterministic_and_distinct_per_episode() -> None:
    def seeds(seed: int) -> list[int]:
        calls: list[InterventionContext] = []
        machine = ControlMachine(config(seed=seed, cooldown_steps=1), hook=repairing(calls=calls))
        run(machine, [0.9, 0.0, 0.0, 0.9, 0.0, 0.0])
        return [c.seed for c in calls]

    first = seeds(1)
    assert len(first) == 2
    assert first[0] != first[1]
    assert seeds(1) == first
    assert seeds(2) != first


def test_seed_success_test_rise_oscillate_enter_once_no_flip_recover_after_cooldown() -> None:
    """The seed's one-sentence success test, on a hand-written trajectory.

    (The DoT-harness version lives with the simulate command's tests.)
    """
    rise = [0.1, 0.2, 0.3, 0.4, 0.48]
    oscillation = [0.53, 0.47, 0.52, 0.46, 0.54, 0.45, 0.51, 0.49] * 3
    fall = [0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1]
    trajectory = rise + oscillation + fall

    def once() -> list[tuple[BreakerDecision, StepRecord]]:
        machine = ControlMachine(config(cooldown_steps=3), hook=repairing())
        return run(machine, trajectory)

    steps = once()
    st_ = states(steps)
    entries = [
        i
        for i in range(len(st_))
        if st_[i] is S.INTERVENTION and (i == 0 or st_[i - 1] is not S.INTERVENTION)
    ]
    assert entries == [len(rise)]  # enters exactly once, at the breach
    tripped = [s.tripped for s in st_]
    band = range(len(rise), len(rise) + len(oscillation))
    assert all(tripped[i] for i in band)  # no flip during the oscillation
    first_normal = next(i for i in range(len(rise), len(st_)) if st_[i] is S.NORMAL)
    assert trajectory[first_normal] < TH.tau_exit
    assert st_[first_normal - 3 : first_normal] == [S.RECOVERY] * 3  # cool-down elapsed
    single = [f >= TH.tau_enter for f in trajectory]
    assert sum(a != b for a, b in itertools.pairwise(single)) > 20  # a single threshold thrashes
    assert once() == steps  # deterministic


# -- properties -----------------------------------------------------------------------------------

OUTCOMES = st.sampled_from(["ok", "bad", "raise", "none"])


def scripted_hook(plan: Sequence[str]) -> Callable[[InterventionContext], InterventionResult]:
    """A hook whose behaviour is a pure function of the context (so restores agree)."""

    def hook(context: InterventionContext) -> InterventionResult:
        outcome = plan[(context.step + context.attempt) % len(plan)]
        if outcome == "raise":
            raise RuntimeError(f"scripted failure at step {context.step}")
        if outcome == "none":
            return InterventionResult.noop()
        score = 0.05 if outcome == "ok" else 0.6
        return InterventionResult(
            freeze({"step": context.step}), True, "madera", [{"outcome": outcome}], score
        )

    return hook


Step = tuple[float, float, "float | None"]
"""(fast, slow, the step's own local score or None for a step without one)."""


def step_kwargs(own: float | None, **extra: object) -> dict[str, object]:
    """Arguments giving the machine a step of node "n" with its own score (or none)."""
    scores = dict(extra.pop("local_scores", {}))  # type: ignore[call-overload]
    if own is not None:
        scores["n"] = own
    return {"node": "n", "local_scores": scores, **extra}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[MachineConfig, list[str], list[Step]]:
    cfg = config(
        cooldown_steps=draw(st.integers(0, 4)),
        max_retries=draw(st.integers(1, 3)),
        control=draw(st.sampled_from([None, CONTROL])),
        max_history=draw(st.integers(1, 6)),
        seed=draw(st.integers(0, 2**32)),
        probation=draw(st.sampled_from(["hold", "half-open"])),
        node_trip=draw(st.booleans()),
    )
    plan = draw(st.lists(OUTCOMES, min_size=1, max_size=5))
    segments = draw(
        st.lists(
            st.tuples(st.sampled_from(["calm", "burst", "band", "any"]), st.integers(1, 10)),
            min_size=1,
            max_size=10,
        )
    )
    ranges = {
        "calm": (0.0, 0.2),
        "burst": (0.5, 1.0),
        "band": (TH.tau_exit, 0.4999),
        "any": (0.0, 1.0),
    }
    steps: list[Step] = []
    own_scores = st.one_of(st.none(), st.floats(0.0, 1.0))
    for kind, length in segments:
        low, high = ranges[kind]
        for _ in range(length):
            steps.append((draw(st.floats(low, high)), draw(st.floats(0.0, 0.5)), draw(own_scores)))
    return cfg, plan, steps


@given(scenarios())
def test_property_anti_thrash_on_the_machine(
    scenario: tuple[MachineConfig, list[str], list[Step]],
) -> None:
    cfg, plan, steps = scenario
    machine = ControlMachine(cfg, hook=scripted_hook(plan))
    previous = S.NORMAL
    for fast, slow, own in steps:
        state = machine.step(fast, slow, **step_kwargs(own)).state  # type: ignore[arg-type]
        node_trip = cfg.node_trip and own is not None and own >= TH.tau_enter
        if TH.tau_exit <= fast < TH.tau_enter:
            if previous.tripped:
                assert state.tripped  # clearing needs fast < tau_exit, node trips or not
            else:
                # the one exception to "no flip in the dead-band": a node trip
                assert state.tripped == node_trip
        if not previous.tripped and state.tripped:
            assert fast >= TH.tau_enter or node_trip
        previous = state


@given(scenarios())
def test_property_a_closed_breaker_never_passes_a_step_that_meets_its_trigger(
    scenario: tuple[MachineConfig, list[str], list[Step]],
) -> None:
    cfg, plan, steps = scenario
    machine = ControlMachine(cfg, hook=scripted_hook(plan))
    for fast, slow, own in steps:
        before = machine.state
        decision = machine.step(fast, slow, **step_kwargs(own))  # type: ignore[arg-type]
        triggered = fast >= TH.tau_enter or (
            cfg.node_trip and own is not None and own >= TH.tau_enter
        )
        if not before.tripped:
            # closed: the step trips exactly when its trigger fires, and then is not promoted
            assert decision.state.tripped == triggered
            if triggered:
                assert decision.state is S.INTERVENTION
                assert decision.action is not A.PROCEED


@given(scenarios())
def test_property_transitions_are_a_function_of_state_inputs_counters_and_window(
    scenario: tuple[MachineConfig, list[str], list[Step]],
) -> None:
    cfg, plan, steps = scenario
    machine = ControlMachine(cfg, hook=scripted_hook(plan))
    for fast, slow, own in steps:
        counters = machine.counters
        window = machine._window.peek(fast) if machine._window is not None else None
        expected = select_transition(
            GuardInputs(
                counters,
                fast,
                slow,
                window is not None and window.dirty,
                cfg.thresholds,
                cfg.cooldown_steps,
                cfg.max_retries,
                own,
                cfg.probation == "half-open",
                cfg.node_trip,
            )
        )
        state = machine.step(fast, slow, **step_kwargs(own)).state  # type: ignore[arg-type]
        assert state is (counters.state if expected is None else expected.target)


@given(scenarios(), st.integers(0, 10**6), st.integers(0, 50))
def test_property_state_sequence_ignores_everything_but_state_counters_and_window(
    scenario: tuple[MachineConfig, list[str], list[Step]],
    other_seed: int,
    other_step: int,
) -> None:
    cfg, plan, steps = scenario
    split = len(steps) // 2
    machine = ControlMachine(cfg, hook=scripted_hook(plan))
    for fast, slow, own in steps[:split]:
        machine.step(fast, slow, **step_kwargs(own, local_scores={"a": fast}))  # type: ignore[arg-type]
    snap = json.loads(json.dumps(machine.snapshot()))
    altered = dict(
        snap,
        step=snap["step"] + other_step,
        episode=snap["episode"] + 3,
        history={"zzz": [0.9, 0.9]},
        config=dict(snap["config"], seed=other_seed),
        frozen_payload=freeze({"other": True}).to_json(),
    )
    # A hook that ignores the context, so only the machine's own logic differs.
    fixed = scripted_hook(["ok"])
    original = ControlMachine.restore(snap, hook=lambda c: fixed(c))
    perturbed = ControlMachine.restore(altered, hook=lambda c: fixed(c))
    first = [original.step(f, s, **step_kwargs(o)).state for f, s, o in steps[split:]]  # type: ignore[arg-type]
    second = [perturbed.step(f, s, **step_kwargs(o)).state for f, s, o in steps[split:]]  # type: ignore[arg-type]
    assert first == second


@given(scenarios(), st.data())
def test_property_snapshot_restore_continues_identically(
    scenario: tuple[MachineConfig, list[str], list[Step]], data: st.DataObject
) -> None:
    cfg, plan, steps = scenario
    split = data.draw(st.integers(0, len(steps)))
    hook = scripted_hook(plan)
    machine = ControlMachine(cfg, hook=hook)
    for fast, slow, own in steps[:split]:
        machine.step(
            fast,
            slow,
            **step_kwargs(own, payload={"f": fast}, local_scores={"a": fast, "b": slow}),  # type: ignore[arg-type]
        )
    snapshot = json.loads(json.dumps(machine.snapshot()))  # plain JSON all the way
    clone = ControlMachine.restore(snapshot, hook=hook)
    assert clone.snapshot() == machine.snapshot()
    for fast, slow, own in steps[split:]:
        kwargs = step_kwargs(own, payload={"f": fast}, local_scores={"a": fast, "b": slow})
        assert machine.step(fast, slow, **kwargs) == clone.step(fast, slow, **kwargs)  # type: ignore[arg-type]
        assert machine.last_record == clone.last_record


def test_restore_rejects_unknown_versions_and_malformed_snapshots() -> None:
    snap = ControlMachine(config(control=CONTROL)).snapshot()
    with pytest.raises(InputError, match="version 99"):
        ControlMachine.restore(dict(snap, version=99))
    with pytest.raises(InputError, match="'attempts'"):
        ControlMachine.restore({k: v for k, v in snap.items() if k != "attempts"})
    with pytest.raises(InputError, match="attempts=-1"):
        ControlMachine.restore(dict(snap, attempts=-1))
    with pytest.raises(InputError, match="window levels"):
        ControlMachine.restore(dict(snap, window=[7]))
    with pytest.raises(InputError, match="'window' must be present"):
        ControlMachine.restore(dict(snap, window=None))


def test_default_hook_is_the_noop() -> None:
    context = InterventionContext(
        step=0, node=None, state=S.NORMAL, fast=0.9, slow=0.0, mixing_ratio=1.0, thresholds=TH
    )
    assert noop_hook(context).to_json() == InterventionResult.noop().to_json()


def test_machine_config_validation() -> None:
    with pytest.raises(InputError, match="max_retries=0"):
        config(max_retries=0)
    with pytest.raises(InputError, match="cooldown_steps=-1"):
        config(cooldown_steps=-1)
    with pytest.raises(InputError, match="node_trip=1 must be a bool"):
        config(node_trip=1)
    with pytest.raises(InputError, match="MachineConfig"):
        ControlMachine(TH)  # type: ignore[arg-type]


# -- half-open probation (guarded pipelines) ------------------------------------------------------


def test_half_open_pipeline_repair_then_downstream_outputs_proceed_on_probation() -> None:
    calls: list[InterventionContext] = []
    machine = ControlMachine(config(probation="half-open"), hook=repairing(0.05, calls))
    # the ranker trips the breaker: its output is frozen and repaired in the same step
    trip = machine.step(0.6, 0.1, node="ranker", local_scores={"ranker": 0.6}, payload=["x"])
    assert (trip.state, trip.action) == (S.INTERVENTION, A.REROUTE)
    assert machine.last_result is not None
    assert machine.last_result.recheck_passes(TH.tau_exit)
    assert machine.last_result.repaired is not None  # the caller promotes this now
    # downstream nodes run while the breaker is still tripped: clean outputs proceed
    scores = {"ranker": 0.05}
    first = machine.step(0.45, 0.1, node="reviewer", local_scores={**scores, "reviewer": 0.02})
    assert (first.state, first.action, first.frozen_payload) == (S.RECOVERY, A.PROCEED, None)
    assert "on probation" in first.reason
    # a step without a score of its own (not applicable) proceeds too
    second = machine.step(0.40, 0.1, node="formatter", local_scores=scores)
    assert (second.state, second.action) == (S.RECOVERY, A.PROCEED)
    third = machine.step(0.30, 0.1, node="decider", local_scores={**scores, "decider": 0.0})
    assert (third.state, third.action) == (S.RECOVERY, A.PROCEED)
    # cool-down done (3 steps) and fast < tau_exit: back to NORMAL; the recovering step
    # promotes its own output, not the episode's repair
    done = machine.step(0.2, 0.1, node="decider", local_scores={**scores, "decider": 0.0})
    assert (done.state, done.action, done.frozen_payload) == (S.NORMAL, A.PROCEED, None)
    assert len(calls) == 1


def test_half_open_failed_probation_intervenes_on_that_output_then_escalates() -> None:
    calls: list[InterventionContext] = []
    machine = ControlMachine(
        config(probation="half-open", max_retries=2), hook=repairing(0.05, calls)
    )
    machine.step(0.6, 0.1, node="ranker", local_scores={"ranker": 0.6}, payload={"out": "ranker"})
    # a downstream output measured biased on its own fails probation: it is held on the step
    # that leaves INTERVENTION, and the caller steps the held output again (the re-step
    # protocol), which intervenes on it (attempt 2)
    reviewer = {
        "node": "reviewer",
        "local_scores": {"reviewer": 0.4},
        "payload": {"out": "reviewer"},
    }
    held = machine.step(0.5, 0.1, **reviewer)  # type: ignore[arg-type]
    assert (held.state, held.action) == (S.RECOVERY, A.HALT)
    relapse = machine.step(0.5, 0.1, **reviewer)  # type: ignore[arg-type]
    assert (relapse.state, relapse.action) == (S.INTERVENTION, A.REROUTE)
    assert machine.last_record is not None
    assert machine.last_record.transition == "relapse"
    assert calls[-1].attempt == 2
    assert calls[-1].frozen_payload is not None
    assert calls[-1].frozen_payload.thaw() == {"out": "reviewer"}
    machine.step(0.5, 0.1, node="reviewer", local_scores={"reviewer": 0.01})  # recover-start
    # the budget is spent: another failed probation escalates with that output for review
    escalate = machine.step(
        0.5, 0.1, node="decider", local_scores={"decider": 0.9}, payload={"out": "decider"}
    )
    assert (escalate.state, escalate.action) == (S.ESCALATED, A.ESCALATE)
    assert machine.last_record.transition == "relapse-escalate"
    assert escalate.frozen_payload is not None
    assert escalate.frozen_payload.thaw() == {"out": "decider"}
    assert len(calls) == 2


def test_half_open_never_lets_output_through_after_a_failed_recheck() -> None:
    machine = ControlMachine(config(probation="half-open"))  # no-op hook: re-check fails
    steps = [machine.step(0.6, 0.1, node="n", local_scores={"n": 0.0})]
    steps += [machine.step(0.1, 0.1, node="n", local_scores={"n": 0.0}) for _ in range(12)]
    assert A.PROCEED not in [d.action for d in steps]
    assert steps[-1].state is S.ESCALATED


def test_hold_mode_keeps_holding_where_half_open_proceeds() -> None:
    outputs = []
    for mode in ("hold", "half-open"):
        machine = ControlMachine(config(probation=mode), hook=repairing(0.05))
        machine.step(0.6, 0.1, node="a", local_scores={"a": 0.6})
        outputs.append(machine.step(0.45, 0.1, node="b", local_scores={"b": 0.0}).action)
    assert outputs == [A.HALT, A.PROCEED]


@given(scenarios())
def test_property_tripped_outputs_proceed_only_on_probation_after_a_passed_recheck(
    scenario: tuple[MachineConfig, list[str], list[Step]],
) -> None:
    cfg, plan, steps = scenario
    machine = ControlMachine(cfg, hook=scripted_hook(plan))
    entries = 0
    for fast, slow, own in steps:
        before = machine.counters
        decision = machine.step(fast, slow, **step_kwargs(own))  # type: ignore[arg-type]
        record = machine.last_record
        assert record is not None
        if before.state is S.ESCALATED:
            assert decision.state is S.ESCALATED
        if decision.state is S.RECOVERY and decision.action is A.PROCEED:
            assert cfg.probation == "half-open"
            assert machine.counters.recheck_ok
            assert own is None or own < TH.tau_exit
        if decision.state is S.INTERVENTION and before.state is not S.INTERVENTION:
            entries = entries + 1 if before.state.tripped else 1
            assert entries <= cfg.max_retries


# -- node trips ------------------------------------------------------------------------------------


CHAIN = ("intake", "screener", "decider", "notify")


def guarded_chain(
    biased: str, *, node_trip: bool, bias: float = 1.0
) -> list[tuple[str, float, BreakerDecision]]:
    """The new user's chain with the shipped defaults: one node at ``bias``, the others clean.

    intake -> screener -> decider -> notify, Katz weights and the fast/slow EWMAs from the
    default settings, the machine from the default ``[breaker]`` (thresholds 0.3 / 0.2 / 0.15,
    half-open) with ``node_trip`` as given. Each guarded node (not ``notify``) is one step, as
    the LangGraph adapter runs it; the walk stops at the first output that is not promoted.
    """
    settings = load_settings(cwd=Path(__file__).parent).settings
    weights = dict(
        katz_influence(
            AgentGraph.from_edges(list(itertools.pairwise(CHAIN))),
            attenuation=settings.propagation.attenuation,
        ).weights
    )
    machine = ControlMachine(replace(MachineConfig.from_settings(settings), node_trip=node_trip))
    ewma = settings.propagation.network_ewma()
    scores: dict[str, float | None] = {}
    out = []
    for node in CHAIN[:-1]:
        scores[node] = bias if node == biased else 0.0
        ewma = ewma.update(network_score(weights, scores).b_net)
        assert ewma.fast.value is not None and ewma.slow.value is not None
        decision = machine.step(
            ewma.fast.value,
            ewma.slow.value,
            node=node,
            local_scores={n: v for n, v in scores.items() if v is not None},
            weights=weights,
            payload={"node": node, "decision": "yes"},
        )
        out.append((node, ewma.fast.value, decision))
        if decision.action is not A.PROCEED:
            break
    return out


@pytest.mark.parametrize("biased", ["screener", "decider"])
def test_a_fully_biased_late_node_passes_without_node_trips(biased: str) -> None:
    # the new user's report: fast B_net stays below tau_enter 0.3, so every output proceeds
    # and notify sees the biased decision
    steps = guarded_chain(biased, node_trip=False)
    assert [node for node, _, _ in steps] == list(CHAIN[:-1])
    assert all(d.action is A.PROCEED for _, _, d in steps)
    fast = dict((node, f) for node, f, _ in steps)[biased]
    assert fast < 0.3
    if biased == "decider":
        assert fast == pytest.approx(0.0712, abs=1e-4)  # the report's 0.0712


@pytest.mark.parametrize("biased", ["screener", "decider"])
def test_a_fully_biased_late_node_trips_and_is_held_with_node_trips(biased: str) -> None:
    steps = guarded_chain(biased, node_trip=True)
    node, fast, decision = steps[-1]
    assert node == biased  # the walk stopped at the biased node: nothing downstream ran
    assert fast < 0.3  # the network trigger alone would not have fired
    assert (decision.state, decision.action) == (S.INTERVENTION, A.HALT)
    assert decision.frozen_payload is not None
    assert decision.frozen_payload.thaw() == {"node": biased, "decision": "yes"}
    assert decision.reason.startswith(
        f"trip (node): the own score 1 of node {biased!r} >= tau_enter 0.3, while fast"
    )
    assert all(d.action is A.PROCEED for _, _, d in steps[:-1])


def test_the_first_node_trips_by_both_triggers_and_the_reason_says_so() -> None:
    [(node, fast, decision)] = guarded_chain("intake", node_trip=True)
    assert (node, fast, decision.state) == ("intake", 1.0, S.INTERVENTION)
    assert decision.reason.startswith(
        "trip: fast 1 >= tau_enter 0.3, and the own score 1 of node 'intake' >= tau_enter"
    )
    [(_, _, literal)] = guarded_chain("intake", node_trip=False)
    assert literal.reason.startswith("trip: fast 1 >= tau_enter 0.3; intervention")


def test_a_node_trip_repairs_at_the_severity_of_its_own_score_not_of_fast() -> None:
    # fast 0.1 alone gives sigmoid((0.1 - 0.5) / kappa) ~ 0, below the blend's 0.5 cut-off:
    # every categorical repair (a ranking, a decision, a text) would be discarded and the
    # "repair" would be the biased output itself
    calls: list[InterventionContext] = []
    machine = ControlMachine(config(node_trip=True), hook=repairing(0.05, calls))
    decision = machine.step(0.1, 0.0, node="b", local_scores={"a": 0.0, "b": 0.9})
    assert decision.state is S.INTERVENTION
    expected = mixing_ratio(0.9, TH.tau_enter, TH.kappa)
    assert expected > 0.5
    assert decision.mixing_ratio == expected == calls[0].mixing_ratio
    # a retry of the same held output keeps that severity
    for _ in range(4):
        machine.step(0.1, 0.0, node="b", local_scores={"a": 0.0, "b": 0.9})
    assert len(calls) >= 1 and all(c.mixing_ratio == expected for c in calls)
    # fast above the own score: fast is the severity; without node trips, fast always is
    both = ControlMachine(config(node_trip=True)).step(0.8, 0.0, node="b", local_scores={"b": 0.6})
    assert both.mixing_ratio == mixing_ratio(0.8, TH.tau_enter, TH.kappa)
    literal = ControlMachine(config()).step(0.1, 0.0, node="b", local_scores={"b": 0.9})
    assert literal.mixing_ratio == mixing_ratio(0.1, TH.tau_enter, TH.kappa) < 0.5


def test_node_trips_leave_closing_and_other_nodes_scores_alone() -> None:
    machine = ControlMachine(config(node_trip=True), hook=repairing(0.05))
    # another node's score at 0.9 is not this step's own score: no trip
    calm = machine.step(0.1, 0.0, node="b", local_scores={"a": 0.9, "b": 0.1})
    assert (calm.state, calm.action) == (S.NORMAL, A.PROCEED)
    # a step without a node, or whose node has no score, cannot node-trip
    assert machine.step(0.1, 0.0, local_scores={"a": 0.9}).state is S.NORMAL
    assert machine.step(0.1, 0.0, node="c", local_scores={"a": 0.9}).state is S.NORMAL
    tripped = machine.step(0.1, 0.0, node="a", local_scores={"a": 0.5})  # own == tau_enter
    assert tripped.state is S.INTERVENTION
    assert machine.last_record is not None
    assert machine.last_record.transition == "trip"
    # closing is unchanged: cool-down, passed re-check, fast below tau_exit
    states_after = [machine.step(0.1, 0.0, node="b", local_scores={"b": 0.0}).state]
    states_after += [machine.step(0.1, 0.0, node="b", local_scores={"b": 0.0}).state]
    states_after += [machine.step(0.1, 0.0, node="b", local_scores={"b": 0.0}).state]
    states_after += [machine.step(0.1, 0.0, node="b", local_scores={"b": 0.0}).state]
    assert states_after == [S.RECOVERY, S.RECOVERY, S.RECOVERY, S.NORMAL]


def test_node_trip_is_kept_in_the_config_json_the_snapshot_and_the_trace_header() -> None:
    on = config(node_trip=True)
    assert on.to_json()["node_trip"] is True
    assert MachineConfig.from_json(json.loads(json.dumps(on.to_json()))) == on
    legacy = {k: v for k, v in on.to_json().items() if k != "node_trip"}
    assert MachineConfig.from_json(legacy).node_trip is False  # older snapshots: literal
    machine = ControlMachine(on)
    assert ControlMachine.restore(json.loads(json.dumps(machine.snapshot()))).config == on
    assert on.trace_header().node_trip is True
    assert on.trace_header().to_json()["node_trip"] is True
    assert config().trace_header().node_trip is False


def test_from_settings_turns_node_trips_on_by_default_and_off_on_request(
    tmp_path: Path,
) -> None:
    assert MachineConfig(TH).node_trip is False  # the seed's literal machine
    assert MachineConfig.from_settings(load_settings(cwd=tmp_path).settings).node_trip is True
    (tmp_path / "biasbreaker.toml").write_text("[breaker]\nnode_trip = false\n")
    assert MachineConfig.from_settings(load_settings(cwd=tmp_path).settings).node_trip is False


@pytest.mark.parametrize(
    ("weights", "scores", "message"),
    [
        ({"b": 4.0, "writer": 3.0}, {"writer": 0.9}, "weights sum to 7, not 1"),
        ({"writer": 1.0}, {"writer": 0.9, "reader": 0.1}, "node(s) ['reader'] that have no weight"),
        ({"writer": float("nan")}, {"writer": 0.9}, "weights['writer']"),
    ],
)
def test_katz_weights_are_checked_before_anything_changes(
    weights: dict[str, float], scores: dict[str, float], message: str
) -> None:
    machine = ControlMachine(config())
    before = machine.snapshot()
    with pytest.raises((InputError, ScoreError), match=re.escape(message)):
        machine.step(0.9, 0.0, node="writer", local_scores=scores, weights=weights)
    assert machine.snapshot() == before
    fine = machine.step(0.9, 0.0, node="writer", local_scores=scores, weights=None)
    assert fine.state is S.INTERVENTION


@pytest.mark.parametrize("checked", [False, True])
def test_katz_weights_are_recorded_when_first_given_and_when_they_change(checked: bool) -> None:
    """The trace carries the weights once and again on a change, whether given as a dict or as
    ``KatzWeights`` (the adapter's pre-checked form, compared with the recorded dict)."""
    from biasbreaker.machine import KatzWeights

    records: list[StepRecord] = []
    machine = ControlMachine(config(), recorder=records.append)
    first = {"a": 0.25, "b": 0.75}
    second = {"a": 0.5, "b": 0.5}
    for weights in (first, first, second, second, first):
        given = KatzWeights(weights) if checked else weights
        machine.step(0.0, 0.0, node="a", local_scores={"a": 0.0}, weights=given)
    assert [r.weights for r in records] == [first, None, second, None, first]


class _Outcome(dict[str, str]):
    """A mapping of another type than ``dict`` (the probe outcome's checked slow path)."""


@pytest.mark.parametrize(
    "probe",
    [
        {"status": "scored"},
        {"reason": "x"},
        {"status": "scored", "reason": None},
        {"status": 1, "reason": "x"},
        {"status": "scored", "reason": "x", "extra": "y"},
        {"status": "scored", "why": "x"},
        {},
        _Outcome(status="scored", reason=None),  # type: ignore[arg-type]
        _Outcome(status="scored"),
    ],
)
def test_a_malformed_probe_outcome_is_refused_and_changes_nothing(probe: dict[str, str]) -> None:
    records: list[StepRecord] = []
    machine = ControlMachine(config(), recorder=records.append)
    before = machine.snapshot()
    with pytest.raises(InputError, match=r"probe=.* must be \{'status': str, 'reason': str\}"):
        machine.step(0.1, 0.1, probe=probe)
    assert machine.snapshot() == before and records == []


@pytest.mark.parametrize(
    "probe",
    [{"status": "scored", "reason": "k=4"}, _Outcome(status="not_applicable", reason="none")],
)
def test_a_probe_outcome_is_recorded_as_given(probe: dict[str, str]) -> None:
    records: list[StepRecord] = []
    machine = ControlMachine(config(), recorder=records.append)
    machine.step(0.1, 0.1, probe=probe)
    assert records[0].probe == dict(probe) and type(records[0].probe) is dict


@pytest.mark.parametrize("field", ["fast", "slow"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -0.5, 1.5, -1e-300, 1.0000001])
def test_a_float_outside_the_unit_interval_is_refused_for_fast_and_slow(
    field: str, bad: float
) -> None:
    # floats take step()'s inline check; ints and others go through check_unit_score
    machine = ControlMachine(config())
    before = machine.snapshot()
    values = {"fast": 0.1, "slow": 0.1, field: bad}
    with pytest.raises(ScoreError, match=f"^{field}="):
        machine.step(values["fast"], values["slow"])
    assert machine.snapshot() == before
