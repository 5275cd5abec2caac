"""The skeptic panel as LangGraph ``Send`` branches (``[plugin.langgraph] panel = "send"``).

The in-process panel (:class:`biasbreaker.intervention.panel.SkepticPanel`) reviews a payload
with every skeptic concurrently under asyncio. With ``panel = "send"`` the adapter runs the
same reviews as graph branches: ``bb_mitigate`` previews the machine's step, and when the
router chooses ``"skeptics"`` it returns one ``Send("bb_skeptic", ...)`` per skeptic; each
branch runs :meth:`SkepticPanel._one <biasbreaker.intervention.panel.SkepticPanel>` for its
skeptic (the panel's own time-out and failure rules) and writes the outcome to ``bb_verdicts``;
``bb_aggregate`` then runs the machine's step with the intervention runner, whose panel is a
:class:`ReplayPanel`: for the reviewed request it hands back the branches' outcomes, so the
panel's anonymisation, aggregation and kernel checks run unchanged; any other request (the
runner's re-check reviews each counterfactual output) is reviewed in process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from biasbreaker.intervention.panel import Skeptic, SkepticPanel
from biasbreaker.intervention.types import ReviewRequest, SkepticFailure, SkepticVerdict

Outcome = SkepticVerdict | SkepticFailure


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    """A branch's outcome as plain JSON (``{"type": "verdict"|"failure", "value": {...}}``)."""
    kind = "verdict" if isinstance(outcome, SkepticVerdict) else "failure"
    return {"type": kind, "value": outcome.model_dump(mode="json")}


def outcome_from_json(data: Mapping[str, Any]) -> Outcome:
    """Inverse of :func:`outcome_to_json` (validated)."""
    if data["type"] == "verdict":
        return SkepticVerdict.model_validate(data["value"])
    return SkepticFailure.model_validate(data["value"])


@dataclass
class ReplayPanel(SkepticPanel):
    """A panel that answers one request with outcomes gathered elsewhere (the Send branches).

    Args:
        request: The request the branches reviewed.
        outcomes: Skeptic kind -> its outcome for ``request``.
    """

    request: ReviewRequest | None = None
    outcomes: Mapping[str, Outcome] = field(default_factory=dict)

    @classmethod
    def of(
        cls, panel: SkepticPanel, request: ReviewRequest, outcomes: Mapping[str, Outcome]
    ) -> ReplayPanel:
        """A replay of ``panel`` (same skeptics, aggregator and rules) for ``request``."""
        return cls(
            panel.skeptics,
            panel.aggregator,
            aggregator_name=panel.aggregator_name,
            timeout_s=panel.timeout_s,
            overconfidence=panel.overconfidence,
            request=request,
            outcomes=dict(outcomes),
        )

    async def _one(self, skeptic: Skeptic, request: ReviewRequest) -> Outcome:
        if request == self.request and skeptic.kind in self.outcomes:
            return self.outcomes[skeptic.kind]
        return await super()._one(skeptic, request)


async def review_one(panel: SkepticPanel, kind: str, request: ReviewRequest) -> Outcome:
    """One skeptic's review of ``request`` under the panel's rules (one Send branch)."""
    for skeptic in panel.skeptics:
        if skeptic.kind == kind:
            return await panel._one(skeptic, request)
    return SkepticFailure(kind=kind, failure="error", reason=f"no skeptic of kind {kind!r}")


__all__ = ["Outcome", "ReplayPanel", "outcome_from_json", "outcome_to_json", "review_one"]
