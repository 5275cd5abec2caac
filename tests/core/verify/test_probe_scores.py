"""A step's probe outcome agrees with its own node's score (a new-user trial's edit).

The trial changed a tripped step's probe outcome to ``not_applicable`` and kept its score of 1
and its trip: every property held. A ``scored`` step has its node's score in ``scores``, a
``not_applicable`` one has none; the replay says which record contradicts itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tracegen import edited

from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.trace import TraceWriter
from biasbreaker.types import Thresholds
from biasbreaker.verify import verify_trace

TH = Thresholds(tau_enter=0.5, tau_exit=0.35, tau_warn=0.25, kappa=0.05)
SCORED = {"status": "scored", "reason": "scored: k=4 counterfactual(s), r=2 resample(s)"}
BLIND = {"status": "not_applicable", "reason": "no protected term found"}
UNSAMPLED = {"status": "not_sampled", "reason": "not sampled at [probe] probe_rate = 0.5"}


def write(path: Path) -> None:
    """Scored, not applicable (no score), not sampled (the earlier score kept), a trip."""
    config = MachineConfig(thresholds=TH, cooldown_steps=2, max_retries=2, seed=3)
    with TraceWriter(path, config.trace_header({"writer": "test"})) as writer:
        machine = ControlMachine(config, recorder=writer.write)
        weights = {"a": 0.5, "b": 0.5}
        machine.step(0.1, 0.1, node="a", local_scores={"a": 0.1}, weights=weights, probe=SCORED)
        machine.step(0.1, 0.1, node="b", local_scores={"a": 0.1}, weights=weights, probe=BLIND)
        machine.step(0.1, 0.1, node="a", local_scores={"a": 0.1}, weights=weights, probe=UNSAMPLED)
        machine.step(
            1.0,
            1.0,
            node="a",
            local_scores={"a": 1.0},
            weights=weights,
            payload={"x": 1},
            probe=SCORED,
        )
        writer.seal()


def test_outcomes_that_agree_with_the_scores_verify(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write(path)
    assert verify_trace(path).holds


@pytest.mark.parametrize(
    ("line", "probe"),
    [
        (4, BLIND),  # the trip's outcome rewritten "not applicable", its score of 1 kept
        (2, SCORED),  # a not-applicable step rewritten "scored", with no score of its node
    ],
)
def test_an_outcome_that_contradicts_the_scores_is_a_violation(
    tmp_path: Path, line: int, probe: dict[str, str]
) -> None:
    path = tmp_path / "t.jsonl"
    write(path)
    report = verify_trace(edited(path, line, probe=probe))
    violations = report.replay.violations
    assert any(v.step == line - 1 and "probe:" in v.message for v in violations), violations
