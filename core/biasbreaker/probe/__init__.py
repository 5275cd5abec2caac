"""The counterfactual probe (M1): detect demographic bias in one guarded step.

See :mod:`biasbreaker.probe.counterfactual` (the swapper), :mod:`biasbreaker.probe.scoring`
(the scorer contract), :mod:`biasbreaker.probe.probe` (the probe and its noise floor) and
:mod:`biasbreaker.probe.pairs` (scoring pre-computed response pairs).
"""

from __future__ import annotations

from biasbreaker.probe.counterfactual import (
    CounterfactualGenerator,
    CounterfactualMapping,
    CounterfactualSet,
    Detection,
    Substitution,
    Variant,
)
from biasbreaker.probe.terms import DEFAULT_AXES, Axis, TermSet

__all__ = [
    "DEFAULT_AXES",
    "Axis",
    "CounterfactualGenerator",
    "CounterfactualMapping",
    "CounterfactualSet",
    "Detection",
    "Substitution",
    "TermSet",
    "Variant",
]
