"""An unsupported-language step in a trace: held, or let through, as its reason's category says.

The probe outcome ``unsupported_language`` carries its policy in its reason: "unsupported
language (held for review): …" (``[probe] unsupported_language = "hold"``, the default) must be
a held step; "unsupported language (proceeding unprobed): …" (``"proceed"``) is read like
"not applicable" and leaves the decision to the table; any other reason of that outcome must be
held (fail closed). The replay checks each.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tracegen import edited

from biasbreaker.machine import HELD_FOR_REVIEW, ControlMachine, MachineConfig
from biasbreaker.trace import TraceWriter, read_trace
from biasbreaker.trace.records import UNSUPPORTED_HELD, UNSUPPORTED_PROCEEDED
from biasbreaker.types import BreakerAction, Thresholds
from biasbreaker.verify import verify_trace

TH = Thresholds(tau_enter=0.5, tau_exit=0.35, tau_warn=0.25, kappa=0.05)
WHY = "the input reads as French (fr, p = 0.99); the probe's term lists cover English only"
HELD = {"status": "unsupported_language", "reason": UNSUPPORTED_HELD + WHY}
PROCEEDED = {"status": "unsupported_language", "reason": UNSUPPORTED_PROCEEDED + WHY}
SCORED = {"status": "scored", "reason": "scored: k=4 counterfactual(s), r=2 resample(s)"}


def write(path: Path) -> None:
    """Scored, unsupported and held, unsupported and let through, scored."""
    config = MachineConfig(thresholds=TH, cooldown_steps=2, max_retries=2, seed=3)
    with TraceWriter(path, config.trace_header({"writer": "test"})) as writer:
        machine = ControlMachine(config, recorder=writer.write)
        weights = {"a": 1.0}
        machine.step(
            0.1,
            0.1,
            node="a",
            local_scores={"a": 0.1},
            weights=weights,
            payload={"x": 1},
            probe=SCORED,
        )
        machine.step(
            0.1, 0.1, node="a", weights=weights, payload={"x": 2}, probe=HELD, hold=HELD["reason"]
        )
        machine.step(0.1, 0.1, node="a", weights=weights, payload={"x": 3}, probe=PROCEEDED)
        machine.step(
            0.1,
            0.1,
            node="a",
            local_scores={"a": 0.1},
            weights=weights,
            payload={"x": 4},
            probe=SCORED,
        )
        writer.seal()


def test_held_and_proceeding_unsupported_steps_verify(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path)
    records = read_trace(path).records
    held, proceeded = records[1], records[2]
    assert held.transition == HELD_FOR_REVIEW and held.action is BreakerAction.ESCALATE
    assert held.reason == f"held for review: {HELD['reason']}" and held.probe == HELD
    assert proceeded.action is BreakerAction.PROCEED and proceeded.reason == "normal"
    assert proceeded.probe == PROCEEDED
    report = verify_trace(path)
    assert report.holds, report


@pytest.mark.parametrize(
    ("line", "probe", "field"),
    [
        # a step held for an unsupported language whose outcome says it proceeds
        (2, PROCEEDED, "probe"),
        # a step let through whose outcome says it is held
        (3, HELD, "transition"),
        # let through on an unsupported language whose reason names no policy: fails closed
        (3, {"status": "unsupported_language", "reason": WHY}, "transition"),
        (
            3,
            {"status": "unsupported_language", "reason": "unsupported language: " + WHY},
            "transition",
        ),
    ],
)
def test_the_replay_catches_an_unsupported_step_recorded_otherwise(
    tmp_path: Path, line: int, probe: dict[str, str], field: str
) -> None:
    path = tmp_path / "t.jsonl"
    write(path)
    report = verify_trace(edited(path, line, probe=probe))
    assert not report.replay.holds
    violations = report.replay.violations
    assert any(v.step == line - 1 and f"{field}:" in v.message for v in violations), violations
