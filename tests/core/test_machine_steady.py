"""ControlMachine's steady path (NORMAL staying NORMAL, nothing scored) against the planned one.

``ControlMachine.step`` takes its commonest step without building a plan
(``ControlMachine._steady``); every other step, and every step it refuses, goes through
``_plan`` and ``_commit`` (``ControlMachine._planned_step``). These tests run the same random
steps through a machine stepped with ``step``/``astep`` and one stepped only through
``_planned_step``, and require the same decisions, errors, trace records and snapshots.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker import machine as machine_module
from biasbreaker.breaker import freeze
from biasbreaker.calibration import ControlStatistics
from biasbreaker.errors import InputError
from biasbreaker.machine import ControlMachine, KatzWeights, MachineConfig
from biasbreaker.trace import StepRecord
from biasbreaker.types import (
    BreakerAction,
    BreakerDecision,
    BreakerState,
    InterventionContext,
    InterventionResult,
    Thresholds,
)

TH = Thresholds(tau_enter=0.5, tau_exit=0.35, tau_warn=0.25, kappa=0.05)
CONTROL = ControlStatistics(mean=0.1, std=0.05, n_steps=1000)
WEIGHTS = {"a": 0.5, "b": 0.5}
OTHER_WEIGHTS = {"a": 0.25, "b": 0.75}


def hook_for(recheck: float) -> Callable[[InterventionContext], InterventionResult]:
    """A repairing hook whose result is a pure function of the context."""

    def hook(context: InterventionContext) -> InterventionResult:
        return InterventionResult(
            freeze({"step": context.step}), True, "madera", [{"attempt": context.attempt}], recheck
        )

    return hook


def _near(value: float) -> list[float]:
    return [value, math.nextafter(value, 0.0), math.nextafter(value, 1.0)]


# floats just around the thresholds, and most steps calm (so the machine returns to NORMAL)
SCORES = st.one_of(
    st.floats(0.0, 0.24),
    st.floats(0.0, 0.24),
    st.floats(0.0, 1.0),
    st.sampled_from([0.0, 1.0, *_near(TH.tau_warn), *_near(TH.tau_enter), *_near(TH.tau_exit)]),
)
GOOD_PROBE = {"status": "not_sampled", "reason": "not sampled at [probe] probe_rate = 0"}
# one argument the machine refuses, or takes only through the planned path's checks
BAD: dict[str, list[object]] = {
    "fast": [0, 1, True, math.nan, math.inf, -1e-300, 1.0000001, 2],
    "slow": [0, True, math.nan, -0.5, 1.5],
    "node": ["", 7],
    "weights": [WEIGHTS, {"a": 2.0}, {"a": math.nan, "b": 1.0}],
    "probe": [{"status": "x"}, {}, {"status": 1, "reason": "x"}],
    "hold": [""],
    "local_scores": [{"a": math.nan}, {"c": 0.1}],
}


@st.composite
def steps(draw: st.DrawFn) -> dict[str, Any]:
    """One step's arguments, mostly what the LangGraph adapter passes with probing off."""
    kwargs: dict[str, Any] = {
        "fast": draw(SCORES),
        "slow": draw(SCORES),
        "node": draw(st.sampled_from([None, "a", "a", "b"])),
        "local_scores": draw(
            st.one_of(
                st.none(),
                st.just({}),
                st.dictionaries(st.sampled_from(["a", "b"]), st.floats(0.0, 1.0), max_size=2),
            )
        ),
        "weights": draw(
            st.sampled_from([None, {}, KatzWeights(WEIGHTS), KatzWeights(OTHER_WEIGHTS)])
        ),
        "payload": draw(st.sampled_from([None, {"text": "x"}, {"n": [1, 2]}])),
        "step_input": draw(st.sampled_from([None, {"q": "y"}])),
        "probe": draw(st.sampled_from([None, GOOD_PROBE, {"status": "scored", "reason": "k"}])),
        "hold": None if draw(st.integers(0, 7)) else "the probe cannot read it",
    }
    if not draw(st.integers(0, 9)):
        field = draw(st.sampled_from(sorted(BAD)))
        kwargs[field] = draw(st.sampled_from(BAD[field]))
    return kwargs


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[MachineConfig, float, list[dict[str, Any]], list[bool]]:
    cfg = MachineConfig(
        thresholds=TH,
        cooldown_steps=draw(st.integers(0, 3)),
        max_retries=draw(st.integers(1, 4)),
        control=draw(st.sampled_from([None, CONTROL])),
        max_history=draw(st.integers(1, 6)),
        history_steps=draw(st.integers(1, 4)),
        seed=draw(st.integers(0, 2**32)),
        probation=draw(st.sampled_from(["hold", "half-open"])),
        node_trip=draw(st.booleans()),
    )
    recheck = draw(st.sampled_from([0.05, 0.05, 0.6]))
    sequence = draw(st.lists(steps(), min_size=5, max_size=60))
    asynchronous = draw(st.lists(st.booleans(), min_size=len(sequence), max_size=len(sequence)))
    return cfg, recheck, sequence, asynchronous


def _outcome(call: Callable[..., BreakerDecision], kwargs: dict[str, Any]) -> object:
    try:
        return call(**kwargs)
    except Exception as exc:  # compared: the same error, type and message, on both paths
        return (type(exc), str(exc))


@given(scenarios())
def test_property_the_steady_path_decides_records_and_snapshots_as_the_planned_path(
    scenario: tuple[MachineConfig, float, list[dict[str, Any]], list[bool]],
) -> None:
    cfg, recheck, sequence, asynchronous = scenario
    fast_records: list[StepRecord] = []
    slow_records: list[StepRecord] = []
    stepped = ControlMachine(cfg, hook=hook_for(recheck), recorder=fast_records.append)
    planned = ControlMachine(cfg, hook=hook_for(recheck), recorder=slow_records.append)
    for kwargs, run_async in zip(sequence, asynchronous, strict=True):
        if run_async:
            got = _outcome(lambda **kw: asyncio.run(stepped.astep(**kw)), kwargs)
        else:
            got = _outcome(stepped.step, kwargs)
        want = _outcome(planned._planned_step, kwargs)
        assert got == want
        assert type(got) is type(want)
        assert fast_records == slow_records
        assert stepped.last_record == planned.last_record
        assert stepped.snapshot() == planned.snapshot()


@given(scenarios(), st.lists(st.booleans(), min_size=60, max_size=60))
def test_property_without_a_recorder_the_last_record_is_the_recorded_one(
    scenario: tuple[MachineConfig, float, list[dict[str, Any]], list[bool]], reads: list[bool]
) -> None:
    """A machine without a recorder builds a steady step's record only when it is read."""
    cfg, recheck, sequence, _ = scenario
    records: list[StepRecord] = []
    recorded = ControlMachine(cfg, hook=hook_for(recheck), recorder=records.append)
    unrecorded = ControlMachine(cfg, hook=hook_for(recheck))
    for kwargs, read in zip(sequence, reads[: len(sequence)], strict=True):
        assert _outcome(unrecorded.step, kwargs) == _outcome(recorded.step, kwargs)
        if read:
            assert unrecorded.last_record == recorded.last_record
    assert unrecorded.last_record == recorded.last_record
    assert unrecorded.last_record == (records[-1] if records else None)
    assert unrecorded.snapshot() == recorded.snapshot()


def _refuse(*args: object, **kwargs: object) -> BreakerDecision:
    raise AssertionError("the planned path was taken")


@pytest.mark.parametrize("control", [None, CONTROL])
def test_a_normal_unscored_step_takes_the_steady_path(
    monkeypatch: pytest.MonkeyPatch, control: ControlStatistics | None
) -> None:
    assert machine_module._STEADY  # the NORMAL rows are the ones the steady path assumes
    records: list[StepRecord] = []
    cfg = MachineConfig(thresholds=TH, control=control)
    machine = ControlMachine(cfg, recorder=records.append)
    monkeypatch.setattr(ControlMachine, "_planned_step", _refuse)
    monkeypatch.setattr(ControlMachine, "_plan", _refuse)
    weights = KatzWeights(WEIGHTS)
    first = machine.step(0.1, 0.2, node="a", weights=weights, probe=GOOD_PROBE)
    second = asyncio.run(machine.astep(0.0, 0.0, node=None, local_scores={}, weights=weights))
    for decision in (first, second):
        assert (decision.state, decision.action, decision.reason) == (
            BreakerState.NORMAL,
            BreakerAction.PROCEED,
            "normal",
        )
        assert BreakerDecision(*decision) == decision  # the steady path skips validation
    assert [r.weights for r in records] == [WEIGHTS, None]
    assert [r.step for r in records] == [0, 1] and machine.steps_taken == 2
    assert (records[0].window is None) == (control is None)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fast": TH.tau_enter, "slow": 0.0},  # trips
        {"fast": 0.1, "slow": TH.tau_warn},  # warns
        {"fast": 0.1, "slow": 0.0, "local_scores": {"a": 0.1}, "node": "a"},  # scored
        {"fast": 0.1, "slow": 0.0, "hold": "unreadable"},  # held
        {"fast": 0, "slow": 0.0},  # an int: the planned path's check
        {"fast": 0.1, "slow": 0.0, "weights": dict(WEIGHTS)},  # unchecked weights
        {"fast": 0.1, "slow": 0.0, "node": ""},  # refused
    ],
)
def test_every_other_step_takes_the_planned_path(kwargs: dict[str, Any]) -> None:
    calls: list[str] = []
    machine = ControlMachine(MachineConfig(thresholds=TH), hook=hook_for(0.05))
    planned = machine._planned_step

    def spy(*args: Any, **kw: Any) -> BreakerDecision:
        calls.append("planned")
        return planned(*args, **kw)

    machine._planned_step = spy  # type: ignore[method-assign]
    _outcome(machine.step, kwargs)
    assert calls == ["planned"]


@pytest.mark.parametrize("scored", [False, True])
@pytest.mark.parametrize("probe", [{"status": "scored"}, {"status": 1, "reason": "x"}])
def test_a_malformed_probe_changes_nothing_with_a_window_or_scores(
    scored: bool, probe: dict[str, Any]
) -> None:
    """Checked before anything is committed: the window, the history and the step stay."""
    records: list[StepRecord] = []
    machine = ControlMachine(MachineConfig(thresholds=TH, control=CONTROL), recorder=records.append)
    machine.step(0.1, 0.1, node="a", local_scores={"a": 0.1})
    before = machine.snapshot()
    scores = {"a": 0.2} if scored else None
    with pytest.raises(InputError, match=r"probe=.* must be \{'status': str, 'reason': str\}"):
        machine.step(0.45, 0.1, node="a", local_scores=scores, probe=probe)
    assert machine.snapshot() == before and len(records) == 1


def test_a_restored_normal_machine_with_counters_steps_the_same_on_both_paths() -> None:
    """NORMAL with attempts left over (a snapshot written so): the record carries them."""
    records: list[StepRecord] = []
    snapshot = ControlMachine(MachineConfig(thresholds=TH, control=CONTROL)).snapshot()
    snapshot.update(attempts=2, episode=3, step=5)
    stepped = ControlMachine.restore(snapshot, recorder=records.append)
    planned = ControlMachine.restore(snapshot, recorder=records.append)
    kwargs: dict[str, Any] = {
        "fast": 0.3,
        "slow": 0.1,
        "node": "a",
        "local_scores": None,
        "weights": None,
        "payload": None,
        "step_input": None,
        "probe": GOOD_PROBE,
        "hold": None,
    }
    assert stepped.step(**kwargs) == planned._planned_step(**kwargs)
    assert records[0] == records[1]
    assert (records[0].attempt, records[0].episode, records[0].step) == (2, 3, 5)
    assert stepped.snapshot() == planned.snapshot()


def test_the_snapshot_config_is_built_once_and_is_the_configs_json() -> None:
    cfg = MachineConfig(thresholds=TH, control=CONTROL, node_trip=True)
    machine = ControlMachine(cfg)
    first = machine.snapshot()
    machine.step(0.1, 0.1)
    second = machine.snapshot()
    assert first["config"] == cfg.to_json() and second["config"] is first["config"]
    assert ControlMachine.restore(second).snapshot() == second
