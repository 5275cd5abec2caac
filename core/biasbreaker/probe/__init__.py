"""The counterfactual probe (M1): detect demographic bias in one guarded step.

* :mod:`~biasbreaker.probe.terms` — the term and name lists (data files, extendable).
* :mod:`~biasbreaker.probe.counterfactual` — the swapper: variants, mappings, map-back.
* :mod:`~biasbreaker.probe.scoring` — the scorer contract of the ``scorer`` extension point.
* :mod:`~biasbreaker.probe.probe` — the probe, its noise floor and :func:`current_sample`.
* :mod:`~biasbreaker.probe.adaptive` — adaptive probing: a first stage, the rest when needed.
* :mod:`~biasbreaker.probe.pairs` — scoring pre-computed response pairs.
"""

from __future__ import annotations

from biasbreaker.probe.adaptive import Adaptive
from biasbreaker.probe.counterfactual import (
    CounterfactualGenerator,
    CounterfactualMapping,
    CounterfactualSet,
    Detection,
    Substitution,
    Variant,
    payload_digest,
)
from biasbreaker.probe.pairs import (
    PairsReport,
    ResponsePair,
    ScorerSummary,
    read_pairs,
    score_pairs,
)
from biasbreaker.probe.probe import (
    ROUTE_PART,
    Probe,
    ProbeResult,
    Routed,
    ScorerParts,
    Step,
    VariantOutcome,
    build_probe,
    current_sample,
    with_current_sample,
)
from biasbreaker.probe.scoring import ReportingScorer, Scorer, as_text, check_scorer, combine
from biasbreaker.probe.terms import DEFAULT_AXES, Axis, TermSet

__all__ = [
    "DEFAULT_AXES",
    "ROUTE_PART",
    "Adaptive",
    "Axis",
    "CounterfactualGenerator",
    "CounterfactualMapping",
    "CounterfactualSet",
    "Detection",
    "PairsReport",
    "Probe",
    "ProbeResult",
    "ReportingScorer",
    "ResponsePair",
    "Routed",
    "Scorer",
    "ScorerParts",
    "ScorerSummary",
    "Step",
    "Substitution",
    "TermSet",
    "Variant",
    "VariantOutcome",
    "as_text",
    "build_probe",
    "check_scorer",
    "combine",
    "current_sample",
    "payload_digest",
    "read_pairs",
    "score_pairs",
    "with_current_sample",
]
