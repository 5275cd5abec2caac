"""The skeptic panel as LangGraph ``Send`` branches (``[plugin.langgraph] panel = "send"``).

The in-process panel (:class:`biasbreaker.intervention.panel.SkepticPanel`) reviews a payload
with every skeptic concurrently under asyncio. With ``panel = "send"`` the adapter runs the
same reviews as graph branches: ``bb_breaker`` previews the machine's step, and when the
router chooses ``"skeptics"`` it returns one ``Send("bb_skeptic", ...)`` per skeptic instead
of taking the step. Each branch runs the panel's per-skeptic review (``SkepticPanel._one``:
the panel's own time-out and failure rules) and writes the outcome to ``bb_verdicts``.
``bb_aggregate`` joins the branches and runs :meth:`SkepticPanel.run` on a
:class:`ReplayPanel` that hands back those outcomes, so anonymisation, the configured
aggregator and the kernel's checks are the panel's own; the resulting panel run is stored.
``bb_breaker`` then takes the machine's step with the intervention runner, whose panel replays
the stored run for the reviewed request; any other request (the runner's re-check reviews
each counterfactual output) is reviewed in process.

``SkepticPanel._one`` is a private method of the kernel's panel: this module is the only
place that relies on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from biasbreaker.intervention.panel import Skeptic, SkepticPanel
from biasbreaker.intervention.types import (
    PanelRun,
    ReviewRequest,
    SkepticFailure,
    SkepticVerdict,
    TrackRecord,
)

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
    """A panel that answers one request with results gathered elsewhere (the Send branches).

    Args:
        request: The request the branches reviewed.
        outcomes: Skeptic kind -> its outcome for ``request`` (used by :meth:`run`'s reviews).
        recorded: The whole panel run for ``request``, returned by :meth:`run` as it is.
    """

    request: ReviewRequest | None = None
    outcomes: Mapping[str, Outcome] = field(default_factory=dict)
    recorded: PanelRun | None = None

    @classmethod
    def of(
        cls,
        panel: SkepticPanel,
        request: ReviewRequest,
        *,
        outcomes: Mapping[str, Outcome] | None = None,
        recorded: PanelRun | None = None,
    ) -> ReplayPanel:
        """A replay of ``panel`` (same skeptics, aggregator and rules) for ``request``."""
        return cls(
            panel.skeptics,
            panel.aggregator,
            aggregator_name=panel.aggregator_name,
            timeout_s=panel.timeout_s,
            overconfidence=panel.overconfidence,
            request=request,
            outcomes=dict(outcomes or {}),
            recorded=recorded,
        )

    async def run(
        self, request: ReviewRequest, *, track_record: TrackRecord | None = None
    ) -> PanelRun:
        """The recorded run for the replayed request; any other request is reviewed afresh."""
        if self.recorded is not None and request == self.request:
            return self.recorded
        return await super().run(request, track_record=track_record)

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
