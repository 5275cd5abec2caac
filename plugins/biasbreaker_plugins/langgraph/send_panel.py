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

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, Send

from biasbreaker.errors import ConfigError
from biasbreaker.intervention.panel import Skeptic, SkepticPanel
from biasbreaker.intervention.router import checked_route
from biasbreaker.intervention.runner import InterventionRunner, as_text
from biasbreaker.intervention.types import (
    PanelRun,
    ReviewRequest,
    SkepticFailure,
    SkepticVerdict,
    TrackRecord,
)
from biasbreaker.machine import AnyHook
from biasbreaker.types import InterventionContext
from biasbreaker_plugins.langgraph._internals import read_channels
from biasbreaker_plugins.langgraph.deciding import Decider
from biasbreaker_plugins.langgraph.machines import run_sync
from biasbreaker_plugins.langgraph.names import BREAKER, SKEPTIC
from biasbreaker_plugins.langgraph.shared import Shared
from biasbreaker_plugins.langgraph.staging import Work, staged_with

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


class SendPanel(Shared):
    """The ``Send`` panel's nodes and the breaker node's part in it.

    Args:
        runner: The configured intervention runner (its panel is the one fanned out), or
            ``None`` when ``guard(hook=...)`` replaced it (the Send panel then never fans out).
        decider: Previews the machine's step to see whether it would run the panel.
    """

    def __init__(self, runner: InterventionRunner | None, decider: Decider) -> None:
        self.runner = runner
        self.decider = decider

    def fan_out(self, work: Work, staged: dict[str, Any]) -> list[Send] | None:
        """The ``Send`` branches of the skeptic panel if this step would run it, else ``None``.

        Previews the step: when it would call the hook and the router chooses ``"skeptics"``,
        the step is not taken; the panel's request goes to one branch per skeptic and the entry
        waits (status ``"fanout"``). Otherwise the caller takes the step in process.
        """
        runner = self.runner
        if runner is None or runner.panel is None:
            return None
        handle = self.decider.machines.acquire(work.breaker)
        _, context = self.decider.preview(handle, staged, staged["input"], staged["step"])
        if context is None or context.frozen_payload is None:
            return None
        route = checked_route(runner.router, context, name=runner.router_name)
        if route != "skeptics":
            return None
        request = self._request(runner, context)
        fan = {"request": request.model_dump(mode="json"), "attempt": context.attempt}
        work.put({**staged, "status": "fanout", "fanout": {**fan, "from": staged["status"]}})
        return [
            Send(SKEPTIC, {"key": staged["key"], "kind": skeptic.kind, **fan})
            for skeptic in runner.panel.skeptics
        ]

    @staticmethod
    def _request(runner: InterventionRunner, context: InterventionContext) -> ReviewRequest:
        """The request the runner's panel reviews for ``context`` (as the runner builds it)."""
        original = context.frozen_payload.thaw() if context.frozen_payload is not None else None
        task = None if context.step_input is None else context.step_input.thaw()
        attributes: tuple[str, ...] = ()
        if runner.attributes is not None and task is not None:
            attributes = tuple(sorted(set(runner.attributes(task))))
        return ReviewRequest(
            payload=as_text(original),
            task=None if task is None else as_text(task),
            node=context.node,
            attributes=attributes,
            seed=context.seed,
        )

    def _panel(self) -> tuple[InterventionRunner, SkepticPanel]:
        runner = self.runner
        if runner is None or runner.panel is None:
            raise ConfigError("the Send panel needs the configured intervention runner's panel")
        return runner, runner.panel

    def skeptic_node(self, branch: dict[str, Any]) -> Any:
        """``bb_skeptic``: one skeptic's review (a ``Send`` branch), written to ``bb_verdicts``."""
        _, panel = self._panel()
        request = ReviewRequest.model_validate(branch["request"])
        outcome = run_sync(review_one(panel, branch["kind"], request))
        slot = f"{branch['key']}/{branch['attempt']}/{branch['kind']}"
        return {"bb_verdicts": {slot: outcome_to_json(outcome)}}

    def aggregate_node(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        """``bb_aggregate``: join the skeptic branches and aggregate their verdicts.

        The panel's own code runs on the branches' outcomes (anonymisation, the configured
        aggregator, the kernel's checks; fewer than two valid verdicts fail it closed); the
        panel run is stored and ``bb_breaker`` takes the machine's step with it. It reads the
        guard's keys itself (its input is empty).
        """
        runner, panel = self._panel()
        state = read_channels(config, ("bb_unverified_output", "bb_verdicts"))
        updates: dict[str, Any] = {}
        for staged in staged_with(state, "fanout"):
            fan = staged["fanout"]
            prefix = f"{staged['key']}/{fan['attempt']}/"
            slots = state.get("bb_verdicts") or {}
            if prefix + "panel" in slots:
                continue
            kinds = {s.kind for s in panel.skeptics}
            outcomes = {
                slot[len(prefix) :]: outcome_from_json(value)
                for slot, value in slots.items()
                if slot.startswith(prefix) and slot[len(prefix) :] in kinds
            }
            if set(outcomes) != kinds:
                continue
            request = ReviewRequest.model_validate(fan["request"])
            replay = ReplayPanel.of(panel, request, outcomes=outcomes)
            run = run_sync(replay.run(request, track_record=runner.track_record))
            updates[prefix + "panel"] = run.model_dump(mode="json")
        if not updates:
            return {}
        return Command(update={"bb_verdicts": updates}, goto=BREAKER)

    @staticmethod
    def aggregated(state: Mapping[str, Any], staged: Mapping[str, Any]) -> Any:
        """The aggregated panel run of ``staged``'s fan-out, or ``None`` while it runs."""
        fan = staged["fanout"]
        slot = f"{staged['key']}/{fan['attempt']}/panel"
        return (state.get("bb_verdicts") or {}).get(slot)

    def replay_hook(self, staged: Mapping[str, Any], recorded: Mapping[str, Any]) -> AnyHook:
        """The runner's hook with the Send panel's aggregated run replayed for its request."""
        runner, panel = self._panel()
        request = ReviewRequest.model_validate(staged["fanout"]["request"])
        replay = dataclasses.replace(
            runner, panel=ReplayPanel.of(panel, request, recorded=PanelRun.model_validate(recorded))
        )

        async def hook(context: InterventionContext) -> Any:
            result = await replay.ahook(context)
            runner.track_record = replay.track_record
            return result

        return hook


__all__ = [
    "Outcome",
    "ReplayPanel",
    "SendPanel",
    "outcome_from_json",
    "outcome_to_json",
    "review_one",
]
