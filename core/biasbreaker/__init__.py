"""biasbreaker: stop demographic bias from spreading through multi-agent LLM pipelines.

The kernel: types, extension points, configuration, the counterfactual probe, propagation,
the circuit breaker and control machine, intervention orchestration, the run trace and its
property verifiers. First-party plugins live in :mod:`biasbreaker_plugins`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from biasbreaker.breaker import CircuitBreaker, freeze
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.types import (
    BreakerAction,
    BreakerDecision,
    BreakerState,
    FrozenPayload,
    InterventionContext,
    InterventionResult,
    Thresholds,
)

__all__ = [
    "BreakerAction",
    "BreakerDecision",
    "BreakerState",
    "CircuitBreaker",
    "ControlMachine",
    "FrozenPayload",
    "InterventionContext",
    "InterventionResult",
    "MachineConfig",
    "Thresholds",
    "__version__",
    "freeze",
]
