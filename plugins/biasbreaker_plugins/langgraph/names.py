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
ADDED_NODES: Final = (BREAKER, REVIEW, SKEPTIC, AGGREGATE)
"""Names of the nodes ``guard()`` adds (the Send panel's two only with ``panel = "send"``)."""
PROMOTERS: Final = (BREAKER, REVIEW)
"""The added nodes that may promote a held output (their edges copy the guarded nodes')."""

__all__ = ["ADDED_NODES", "AGGREGATE", "BREAKER", "PROMOTERS", "REVIEW", "SKEPTIC"]
