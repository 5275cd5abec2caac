"""First-party aggregators of skeptic verdicts: ``uniform`` (default, baseline) and ``trust``.

Both receive anonymised verdicts in canonical order (the kernel strips identities first) and
return a :class:`~biasbreaker.intervention.types.PanelResult`, which the kernel then checks
(prune only for overconfidence, never for dissent). Both vote over decisions with weights and
break ties toward the more cautious decision (reject, then revise, then stands): the breaker has
already measured bias, so a tie must not wave the payload through.

``uniform`` gives every verdict weight 1 and prunes nothing: plain majority voting, the baseline
that "Debate or Vote" (arXiv 2508.17536) shows explains most multi-agent debate gains.

``trust`` weights each verdict by ``T = (C + R + I) / S`` and may prune overconfident ones:

* ``C`` (credibility) = evidence presence, 1 if the verdict cites evidence, else 0;
* ``R`` (reliability) = the skeptic kind's observed accuracy from the caller's track record
  (Laplace-smoothed; never agreement with the majority);
* ``I`` (intimacy) = domain match: does the verdict address the attribute the input involves;
* ``S`` (self-orientation) = an **overconfidence** term that grows with overconfidence:
  ``calibration-gap`` (default) ``S = clamp(confidence - R, s_min, 1)``, or ``certainty``
  ``S = clamp(1 - H_norm, s_min, 1)`` with ``H_norm`` the normalised entropy of the verdict's
  distribution over the three decisions. Taking ``S = H_norm`` itself would give the *most*
  confident verdict the *highest* trust, the opposite of the intent; clamping at ``s_min``
  bounds ``T`` by ``3 / s_min`` when ``S -> 0``.

A verdict is pruned by ``trust`` when it is overconfident by the kernel's rule (certainty at
least ``[intervention] overconfidence`` and no evidence) *and* its calibration gap
``confidence - R`` is at least ``prune_gap``; a prune that would leave no verdict is not made.

Source:
    Maister, Green & Galford (2000), *The Trusted Advisor* (T = (C + R + I) / S); Sun et al.
    (2025), CortexDebate, arXiv 2507.03928 (trust-weighted sparse debate, the overconfidence
    dilemma); research note ``intervention-anchors.md`` §0.2 and §2.1 (the direction of S and
    a seeded simulation: accuracy 0.341 with S = H_norm vs 0.765 uniform and 0.800 with
    S = 1 - H_norm); Choi, Zhu & Li (2025), "Debate or Vote", arXiv 2508.17536 (the baseline).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from biasbreaker.hookspecs import hookimpl
from biasbreaker.intervention.invariants import is_overconfident
from biasbreaker.intervention.types import (
    DECISIONS,
    PRUNE_OVERCONFIDENCE,
    AnonymousVerdict,
    Decision,
    PanelResult,
    PrunedVerdict,
    TrustScore,
)
from biasbreaker.registry import BuildContext, NoOptions, Register

N_DECISIONS = len(DECISIONS)


def vote(
    verdicts: Sequence[AnonymousVerdict], weights: dict[str, float]
) -> tuple[Decision, float, str | None]:
    """Weighted vote over decisions among the verdicts in ``weights``.

    Args:
        verdicts: The anonymous verdicts (canonical order).
        weights: Label -> weight > 0 of the kept verdicts.

    Returns:
        ``(decision, confidence, corrected)``: the decision with the largest total weight (ties
        to the more cautious, see :data:`~biasbreaker.intervention.types.DECISIONS`), its share
        of the total weight in [0, 1], and the revision of the heaviest kept verdict with that
        decision that offers one (earliest label on ties), or ``None`` (always ``None`` for
        ``"stands"``).
    """
    kept = [v for v in verdicts if v.label in weights]
    totals = {d: math.fsum(weights[v.label] for v in kept if v.decision == d) for d in DECISIONS}
    total = math.fsum(totals.values())
    decision = max(DECISIONS, key=lambda d: (totals[d], -DECISIONS.index(d)))
    confidence = min(1.0, totals[decision] / total) if total > 0 else 0.0
    corrected: str | None = None
    if decision != "stands":
        offering = [v for v in kept if v.decision == decision and v.revision]
        if offering:
            best = max(offering, key=lambda v: (weights[v.label], -kept.index(v)))
            corrected = best.revision
    return decision, confidence, corrected


class UniformAggregator:
    """Majority vote, every verdict weight 1, nothing pruned (the baseline)."""

    name = "uniform"

    def aggregate(self, verdicts: Sequence[AnonymousVerdict]) -> PanelResult:
        """Vote with equal weights.

        Args:
            verdicts: Anonymous verdicts in canonical order.

        Returns:
            The panel result (no pruning, no trust scores).
        """
        weights = {v.label: 1.0 for v in verdicts}
        decision, confidence, corrected = vote(verdicts, weights)
        return PanelResult(
            decision=decision,
            corrected=corrected,
            confidence=confidence,
            weights=weights,
            aggregator=self.name,
        )


SMode = Literal["calibration-gap", "certainty"]


class TrustOptions(BaseModel):
    """Options of the ``trust`` aggregator (``[plugin.trust]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    s_min: float = Field(
        0.1,
        gt=0.0,
        le=1.0,
        description="Floor of the overconfidence term S, in (0, 1]; bounds T by 3 / s_min.",
    )
    s_mode: SMode = Field(
        "calibration-gap",
        description="How S measures overconfidence: 'calibration-gap' = confidence - R; "
        "'certainty' = 1 - normalised entropy of the verdict's decision distribution.",
    )
    prune_gap: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="Calibration gap (confidence - R) at or above which an overconfident "
        "(certain, evidence-free) verdict is pruned, in [0, 1].",
    )


def normalised_entropy(confidence: float, n: int = N_DECISIONS) -> float:
    """Normalised entropy ``H(P) / log n`` of ``P = (c, (1-c)/(n-1), ...)`` over ``n`` decisions.

    Args:
        confidence: Probability of the chosen decision, in [0, 1].
        n: Number of decisions, >= 2.

    Returns:
        A value in [0, 1]: 0 for a certain verdict (c = 1), 1 for a uniform one (c = 1/n).
    """
    rest = (1.0 - confidence) / (n - 1)
    probs = [confidence] + [rest] * (n - 1)
    h = -math.fsum(p * math.log(p) for p in probs if p > 0.0)
    return min(1.0, max(0.0, h / math.log(n)))


def overconfidence_term(verdict: AnonymousVerdict, mode: SMode) -> float:
    """The unclamped ``S`` of a verdict: larger means more overconfident.

    Args:
        verdict: The verdict.
        mode: ``"calibration-gap"`` (``confidence - R``, may be negative) or ``"certainty"``
            (``1 - H_norm``).

    Returns:
        The raw term; :class:`~biasbreaker.intervention.types.TrustScore` clamps it.
    """
    if mode == "calibration-gap":
        return verdict.confidence - verdict.reliability
    return 1.0 - normalised_entropy(verdict.confidence)


class TrustAggregator:
    """Trust-weighted vote ``T = (C + R + I) / S``, pruning only overconfident verdicts.

    Args:
        options: The plugin options.
        overconfidence: The kernel's certainty bound (``[intervention] overconfidence``).
    """

    name = "trust"

    def __init__(self, options: TrustOptions, overconfidence: float) -> None:
        self.options = options
        self.overconfidence = overconfidence

    def score(self, verdict: AnonymousVerdict) -> TrustScore:
        """The verdict's trust score (see the module docstring for each term)."""
        return TrustScore.compute(
            c=1.0 if verdict.has_evidence else 0.0,
            r=verdict.reliability,
            i=verdict.domain_match,
            s_raw=overconfidence_term(verdict, self.options.s_mode),
            s_min=self.options.s_min,
        )

    def prunable(self, verdict: AnonymousVerdict) -> bool:
        """Overconfident by the kernel's rule and miscalibrated by at least ``prune_gap``."""
        return (
            is_overconfident(verdict, self.overconfidence)
            and verdict.confidence - verdict.reliability >= self.options.prune_gap
        )

    def aggregate(self, verdicts: Sequence[AnonymousVerdict]) -> PanelResult:
        """Prune overconfident verdicts, then vote with trust weights.

        Args:
            verdicts: Anonymous verdicts in canonical order.

        Returns:
            The panel result, with every verdict's trust score.
        """
        scores = {v.label: self.score(v) for v in verdicts}
        to_prune = [v for v in verdicts if self.prunable(v)]
        if len(to_prune) == len(verdicts):
            to_prune = []
        pruned = tuple(
            PrunedVerdict(
                label=v.label,
                reason=PRUNE_OVERCONFIDENCE,
                detail=f"confidence {v.confidence:.3f} without evidence; R {v.reliability:.3f}",
            )
            for v in to_prune
        )
        dropped = {p.label for p in pruned}
        # T >= 0; a kept verdict with C = R = I = 0 still needs a positive weight
        weights = {
            v.label: max(scores[v.label].value, 1e-9) for v in verdicts if v.label not in dropped
        }
        decision, confidence, corrected = vote(verdicts, weights)
        return PanelResult(
            decision=decision,
            corrected=corrected,
            confidence=confidence,
            weights=weights,
            pruned=pruned,
            trust=scores,
            aggregator=self.name,
        )


def make_uniform(options: NoOptions, context: BuildContext) -> UniformAggregator:
    """Build the ``uniform`` aggregator."""
    return UniformAggregator()


def make_trust(options: TrustOptions, context: BuildContext) -> TrustAggregator:
    """Build the ``trust`` aggregator with the kernel's overconfidence bound."""
    return TrustAggregator(options, context.settings.intervention.overconfidence)


@hookimpl
def aggregator(register: Register[object]) -> None:
    """Register ``uniform`` and ``trust``."""
    factories: list[tuple[str, Callable[..., object], type[BaseModel], str]] = [
        ("uniform", make_uniform, NoOptions, "majority vote, equal weights (the baseline)"),
        ("trust", make_trust, TrustOptions, "T = (C + R + I) / S, prunes only overconfidence"),
    ]
    for name, factory, options, summary in factories:
        register(name, factory, options=options, summary=summary)
