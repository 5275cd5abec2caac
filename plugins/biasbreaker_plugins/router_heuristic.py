"""The ``heuristic`` router: broad contamination -> skeptics, one persistent node -> MADERA.

A heuristic awaiting validation (seed R7): it encodes the design's intuition, not a measured
classifier. Bias that has spread through several nodes is read as conformity (agents
converging on a shared answer) and sent to a skeptic panel; bias concentrated in one node that
has scored high for several steps in a row is read as that node's parametric bias and sent to
MADERA's diagnose -> retrieve -> rewrite loop; anything else gets no mitigation.

The rule, over the :class:`~biasbreaker.types.InterventionContext` of a tripped step:

1. *contaminated* nodes are those whose local score ``b_i >= node_threshold``;
2. if at least ``broad_min_nodes`` nodes are contaminated -> ``"skeptics"``;
3. if exactly one node is contaminated, its last ``persistence_steps`` scores (its history,
   ending with this step) are all ``>= node_threshold``, and it carries at least ``min_share``
   of B_net (its ``w_i·b_i`` over ``Σ w_j·b_j``; not applied when the context has no weight
   for it) -> ``persistent_route`` (default ``"madera"``);
4. otherwise -> ``"none"``.

``persistent_route = "skeptics"`` sends the lone persistent node to the panel instead. MADERA's
editor sees the output and the evidence, not the task, so it can reword a text but cannot
re-solve a structured decision (rank candidates again); the skeptics see the task.

Source:
    Phase 3 design (M3), R7 "bias-type routing seam".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from biasbreaker.errors import ConfigError
from biasbreaker.hookspecs import hookimpl
from biasbreaker.registry import BuildContext, Register
from biasbreaker.types import InterventionContext, Route


class HeuristicRouterOptions(BaseModel):
    """Options of the ``heuristic`` router (``[plugin.heuristic]``): unvalidated starting points."""

    model_config = ConfigDict(extra="forbid")

    node_threshold: float = Field(
        0.3,
        gt=0.0,
        le=1.0,
        description="Local score b_i (in [0, 1], noise floor removed) at or above which a node "
        "counts as contaminated.",
    )
    broad_min_nodes: int = Field(
        2,
        ge=2,
        description="Contaminated nodes (count) from which contamination is broad -> skeptics.",
    )
    persistence_steps: int = Field(
        3,
        ge=1,
        description="Consecutive steps (count, including this one) a single node must have "
        "been contaminated to count as persistent -> madera.",
    )
    min_share: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="Share of B_net (w_i*b_i / sum of w_j*b_j, in (0, 1]) the persistent node "
        "must carry for madera.",
    )
    persistent_route: Literal["madera", "skeptics"] = Field(
        "madera",
        description="Strategy for a lone persistent node: 'madera' (rewrites the output with "
        "evidence; it does not see the task) or 'skeptics' (the panel sees the task, so it can "
        "re-solve a structured decision such as a ranking).",
    )


class HeuristicRouter:
    """The R7 heuristic as a plain class (see the module docstring for the rule).

    Args:
        node_threshold: Contamination threshold on local scores, in (0, 1].
        broad_min_nodes: Contaminated nodes from which contamination is broad, >= 2.
        persistence_steps: Steps a lone contaminated node must persist, >= 1. The machine's
            per-node history must keep at least this many steps (``history_steps``).
        min_share: Share of B_net the persistent node must carry, in (0, 1].
        persistent_route: Where a lone persistent node goes, ``"madera"`` or ``"skeptics"``.

    Attributes:
        routes: The routes it can return (``"skeptics"``, ``persistent_route``, ``"none"``):
            with ``persistent_route = "skeptics"`` MADERA is not built.
    """

    def __init__(
        self,
        node_threshold: float = 0.3,
        broad_min_nodes: int = 2,
        persistence_steps: int = 3,
        min_share: float = 0.5,
        persistent_route: Literal["madera", "skeptics"] = "madera",
    ) -> None:
        options = HeuristicRouterOptions(
            node_threshold=node_threshold,
            broad_min_nodes=broad_min_nodes,
            persistence_steps=persistence_steps,
            min_share=min_share,
            persistent_route=persistent_route,
        )
        self.options = options
        self.routes: frozenset[Route] = frozenset({"skeptics", persistent_route, "none"})

    def contaminated(self, context: InterventionContext) -> list[str]:
        """Return the contaminated nodes, sorted by name."""
        threshold = self.options.node_threshold
        return sorted(node for node, score in context.local_scores.items() if score >= threshold)

    def persistent(self, context: InterventionContext, node: str) -> bool:
        """Whether ``node``'s last ``persistence_steps`` scores are all contaminated."""
        steps = self.options.persistence_steps
        recent = context.history.get(node, ())[-steps:]
        return len(recent) == steps and all(s >= self.options.node_threshold for s in recent)

    def share(self, context: InterventionContext, node: str) -> float | None:
        """``node``'s share of ``Σ w_i·b_i``, or ``None`` without weights or with zero B_net."""
        magnitudes = context.magnitudes
        total = sum(magnitudes.values())
        if node not in magnitudes or total <= 0.0:
            return None
        return magnitudes[node] / total

    def route(self, context: InterventionContext) -> Route:
        """Return ``"skeptics"``, ``"madera"`` or ``"none"`` by the rule of the module docstring."""
        contaminated = self.contaminated(context)
        if len(contaminated) >= self.options.broad_min_nodes:
            return "skeptics"
        if len(contaminated) == 1:
            node = contaminated[0]
            share = self.share(context, node)
            if self.persistent(context, node) and (
                share is None or share >= self.options.min_share
            ):
                return self.options.persistent_route
        return "none"


def make_heuristic(options: HeuristicRouterOptions, context: BuildContext) -> HeuristicRouter:
    """Factory of the ``heuristic`` router (options from ``[plugin.heuristic]``).

    Raises:
        ConfigError: If ``persistence_steps`` exceeds ``[breaker] history_steps`` (the
            machine would never keep enough history for a node to count as persistent).
    """
    history = context.settings.breaker.history_steps
    if options.persistence_steps > history:
        raise ConfigError(
            f"plugin.heuristic.persistence_steps = {options.persistence_steps} exceeds "
            f"breaker.history_steps = {history}: no node could ever count as persistent; "
            "lower the first or raise the second"
        )
    return HeuristicRouter(**options.model_dump())


@hookimpl
def classify_route(register: Register[object]) -> None:
    """Register the ``heuristic`` router."""
    register(
        "heuristic",
        make_heuristic,
        options=HeuristicRouterOptions,
        summary="R7 heuristic (unvalidated): broad contamination -> skeptics, one persistent "
        "node -> madera",
    )


__all__ = ["HeuristicRouter", "HeuristicRouterOptions", "classify_route", "make_heuristic"]
