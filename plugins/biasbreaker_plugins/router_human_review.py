"""The ``human-review`` router: no LLM repair; every tripped step goes to a human.

Select it with ``[intervention] router = "human-review"`` to guard a graph without any LLM
client: it routes every tripped step to ``"none"``, and declares that it can return nothing
else (``routes``), so neither the skeptic panel nor MADERA is built and ``[llm] client`` may
stay unset. The control machine then handles the step as it handles any step with no repair
(the seed's honest default, :func:`biasbreaker.machine.noop_hook`): the output is held, the
episode's ``max_retries`` attempts find no repair, and the run escalates, pausing for human
review with the held output.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from biasbreaker.hookspecs import hookimpl
from biasbreaker.registry import BuildContext, Register
from biasbreaker.types import InterventionContext, Route


class HumanReviewOptions(BaseModel):
    """Options of the ``human-review`` router (``[plugin.human-review]``): none."""

    model_config = ConfigDict(extra="forbid")


class HumanReviewRouter:
    """Routes every tripped step to ``"none"``: held, then escalated to human review.

    Attributes:
        routes: ``{"none"}``: no repair strategy is built.
    """

    routes: frozenset[Route] = frozenset({"none"})

    def route(self, context: InterventionContext) -> Route:
        """Return ``"none"`` whatever the context."""
        return "none"


def make_human_review(options: HumanReviewOptions, context: BuildContext) -> HumanReviewRouter:
    """Factory of the ``human-review`` router."""
    return HumanReviewRouter()


@hookimpl
def classify_route(register: Register[object]) -> None:
    """Register the ``human-review`` router."""
    register(
        "human-review",
        make_human_review,
        options=HumanReviewOptions,
        summary="no LLM repair: every tripped step is held and escalated to human review",
    )


__all__ = ["HumanReviewOptions", "HumanReviewRouter", "classify_route", "make_human_review"]
