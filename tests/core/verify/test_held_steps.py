"""Held steps (``ControlMachine.step(hold=...)``): the machine, the trace and the replay agree.

A step whose output the probe could not read (or whose probe failed) fails closed: it takes no
transition, its output is escalated to review with its digest, and the probe's outcome is
recorded. The replay re-derives that from the documented rule and catches a record that
claims otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tracegen import edited

from biasbreaker.errors import InputError
from biasbreaker.machine import HELD_FOR_REVIEW, ControlMachine, MachineConfig
from biasbreaker.trace import TraceWriter, read_trace
from biasbreaker.types import BreakerAction, BreakerState, InterventionResult, Thresholds
from biasbreaker.verify import verify_trace

TH = Thresholds(tau_enter=0.5, tau_exit=0.35, tau_warn=0.25, kappa=0.05)
UNREADABLE = {
    "status": "unreadable",
    "reason": "the probe cannot read the input: state['clip'] is bytes",
}
SCORED = {"status": "scored", "reason": "scored: k=4 counterfactual(s), r=2 resample(s)"}


def repair(context: Any) -> InterventionResult:
    from biasbreaker.breaker import freeze

    return InterventionResult(freeze({"fixed": True}), True, "madera", [], 0.1)


def write(path: Path) -> list[Any]:
    """A run with held steps in NORMAL and in RECOVERY; the decisions it took."""
    config = MachineConfig(thresholds=TH, cooldown_steps=2, max_retries=2, seed=3)
    writer = TraceWriter(path, config.trace_header({"writer": "test"}))
    machine = ControlMachine(config, hook=repair, recorder=writer.write)
    weights = {"a": 1.0}
    decisions = [
        machine.step(
            0.1,
            0.1,
            node="a",
            local_scores={"a": 0.1},
            weights=weights,
            payload={"x": 1},
            probe=SCORED,
        ),
        machine.step(
            0.1,
            0.1,
            node="a",
            local_scores={"a": 0.1},
            weights=weights,
            payload={"x": 2},
            probe=UNREADABLE,
            hold=UNREADABLE["reason"],
        ),
        machine.step(
            0.9,
            0.2,
            node="a",
            local_scores={"a": 0.9},
            weights=weights,
            payload={"x": 3},
            probe=SCORED,
        ),
        machine.step(
            0.9,
            0.2,
            node="a",
            local_scores={"a": 0.9},
            weights=weights,
            payload={"x": 4},
            probe=SCORED,
        ),
        machine.step(
            0.9,
            0.2,
            node="a",
            local_scores={"a": 0.9},
            weights=weights,
            payload={"x": 5},
            probe=UNREADABLE,
            hold=UNREADABLE["reason"],
        ),
        machine.step(
            0.1,
            0.2,
            node="a",
            local_scores={"a": 0.1},
            weights=weights,
            payload={"x": 6},
            probe=SCORED,
        ),
    ]
    writer.seal()
    writer.close()
    return decisions


def test_a_held_step_takes_no_transition_and_escalates_its_own_output(tmp_path: Path) -> None:
    decisions = write(tmp_path / "t.jsonl")
    records = read_trace(tmp_path / "t.jsonl").records
    held = records[1]
    assert (
        decisions[1].action is BreakerAction.ESCALATE and decisions[1].state is BreakerState.NORMAL
    )
    assert held.transition == HELD_FOR_REVIEW and held.state is BreakerState.NORMAL
    assert held.reason == f"held for review: {UNREADABLE['reason']}"
    assert held.payload_sha256 == decisions[1].frozen_payload.sha256  # type: ignore[union-attr]
    assert held.probe == UNREADABLE and records[0].probe == SCORED
    # in RECOVERY a held step is no recovery step: the cool-down does not advance
    assert records[3].state is BreakerState.RECOVERY and records[4].state is BreakerState.RECOVERY
    assert (records[4].episode, records[4].attempt) == (records[3].episode, records[3].attempt)
    assert "cooling down: 2/2" in records[5].reason  # the held step did not count
    report = verify_trace(tmp_path / "t.jsonl")
    assert report.holds, report


def test_hold_and_probe_arguments_are_checked() -> None:
    machine = ControlMachine(MachineConfig(thresholds=TH, cooldown_steps=1, max_retries=1))
    with pytest.raises(InputError, match="hold=''"):
        machine.step(0.1, 0.1, payload={"x": 1}, hold="")
    with pytest.raises(InputError, match="must be {'status': str, 'reason': str}"):
        machine.step(0.1, 0.1, probe={"status": "scored"})
    assert machine.steps_taken == 0  # refused steps change nothing


@pytest.mark.parametrize(
    ("line", "changes", "field"),
    [
        (2, {"action": "proceed"}, "action"),  # the held output let through
        (2, {"transition": "hold", "reason": "normal", "action": "proceed"}, "transition"),
        (2, {"probe": SCORED}, "probe"),  # held although the probe read it
        (2, {"payload_sha256": None}, "payload_sha256"),
        (2, {"attempt": 1}, "attempt"),  # a held step keeps the counters
        (2, {"reason": "held for review: zzz"}, "reason"),  # sorts after the probe's reason
        (2, {"reason": "held for review: "}, "reason"),  # and before it
        (2, {"episode": 1}, "episode"),
        (5, {"state": "normal"}, "state"),  # a held step that left RECOVERY
        (2, {"state": "warning"}, "state"),  # and one that left NORMAL
        (5, {"attempt": 0}, "attempt"),  # counters below the replayed ones
        (5, {"episode": 0}, "episode"),
        (1, {"probe": UNREADABLE}, "transition"),  # unreadable, yet not held
    ],
)
def test_the_replay_catches_a_held_step_recorded_otherwise(
    tmp_path: Path, line: int, changes: dict[str, Any], field: str
) -> None:
    path = tmp_path / "t.jsonl"
    write(path)
    report = verify_trace(edited(path, line, **changes))
    assert not report.replay.holds
    violations = report.replay.violations
    assert any(v.step == line - 1 and f"{field}:" in v.message for v in violations), violations


@pytest.mark.parametrize(("probe", "shown"), [(None, "None"), (SCORED, "'scored'")])
def test_a_held_step_without_a_holding_probe_names_what_was_recorded(
    tmp_path: Path, probe: dict[str, str] | None, shown: str
) -> None:
    path = tmp_path / "t.jsonl"
    write(path)
    report = verify_trace(edited(path, 2, probe=probe))
    assert any(v.message.startswith(f"probe: recorded {shown},") for v in report.replay.violations)


def failing(context: Any) -> InterventionResult:
    """A repair whose re-check fails: every cool-down ends in a retry."""
    from biasbreaker.breaker import freeze

    return InterventionResult(freeze({"fixed": False}), True, "madera", [], 0.5)


@pytest.mark.parametrize(
    ("hook", "fasts"), [(repair, (0.9, 0.1, 0.1) * 260), (failing, (0.9,) * 520)]
)
def test_a_held_step_past_256_episodes_or_attempts_replays_clean(
    tmp_path: Path, hook: Any, fasts: tuple[float, ...]
) -> None:
    """Counts read back from the trace past 256 are not CPython's cached small ints.

    ``repair``: 260 episodes (trip, recover-start, recover); ``failing``: one episode of 260
    attempts (a retry every second step). Then a held step.
    """
    config = MachineConfig(thresholds=TH, cooldown_steps=1, max_retries=300, seed=3)
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, config.trace_header({"writer": "test"})) as writer:
        machine = ControlMachine(config, hook=hook, recorder=writer.write)
        for fast in fasts:
            machine.step(fast, 0.1)
        machine.step(0.1, 0.1, payload={"x": 1}, probe=UNREADABLE, hold=UNREADABLE["reason"])
        writer.seal()
    held = read_trace(path).records[-1]
    assert held.transition == HELD_FOR_REVIEW and max(held.episode, held.attempt) == 260
    report = verify_trace(path)
    assert report.replay.holds, report.replay.violations
