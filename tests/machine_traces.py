"""A run trace the real control machine writes, for the verify tests (every property holds)."""

from __future__ import annotations

from pathlib import Path

from biasbreaker.breaker import freeze
from biasbreaker.calibration import ControlStatistics
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.trace import TraceWriter
from biasbreaker.types import InterventionContext, InterventionResult, Thresholds

CONFIG = MachineConfig(
    Thresholds(0.5, 0.35, 0.25, 0.05),
    cooldown_steps=2,
    control=ControlStatistics(0.1, 0.05, 100),
    max_history=3,
)


def repair(context: InterventionContext) -> InterventionResult:
    """A repair that converges (MADERA, re-check score 0.05)."""
    return InterventionResult(freeze("fixed"), True, "madera", (), 0.05)


def write(path: Path, fasts: list[float]) -> Path:
    """A sealed trace of the machine stepped on ``fasts`` (slow 0), its folders made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with TraceWriter(path, CONFIG.trace_header()) as writer:
        machine = ControlMachine(CONFIG, hook=repair, recorder=writer)
        for fast in fasts:
            machine.step(fast, 0.0)
        writer.seal()
    return path
