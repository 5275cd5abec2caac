"""The names of the nodes ``guard()`` adds to a graph.

Every name starts with ``bb_`` (:data:`~biasbreaker_plugins.langgraph.state.BB_PREFIX`), so
it cannot clash with an application's node; ``guard()`` refuses a graph that uses one.
"""

from __future__ import annotations

from typing import Final

BREAKER: Final = "bb_breaker"
"""The breaker and mitigation node: steps held outputs, runs repairs, promotes."""
REVIEW: Final = "bb_review"
"""The human review node: pauses with ``interrupt()`` for an escalated output."""
SKEPTIC: Final = "bb_skeptic"
"""One skeptic's review, as a ``Send`` branch (``[plugin.langgraph] panel = "send"``)."""
AGGREGATE: Final = "bb_aggregate"
"""Joins the ``Send`` skeptic branches and aggregates their verdicts."""
ENTRY: Final = "bb_entry"
"""A guarded pass-through node between ``START`` and the graph's conditional edges out of
``START``, added only when there are such edges: it returns no update, and its probe
evaluates those edges on every counterfactual of the run's input, so a route taken from
``START`` for one group only is held like a route out of any guarded node."""
ADDED_NODES: Final = (BREAKER, REVIEW, SKEPTIC, AGGREGATE, ENTRY)
"""Names of the nodes ``guard()`` adds (the Send panel's two only with ``panel = "send"``,
``bb_entry`` only with a conditional edge out of ``START``)."""
PROMOTERS: Final = (BREAKER, REVIEW)
"""The added nodes that may promote a held output (their edges copy the guarded nodes')."""

__all__ = ["ADDED_NODES", "AGGREGATE", "BREAKER", "ENTRY", "PROMOTERS", "REVIEW", "SKEPTIC"]
