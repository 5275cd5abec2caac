"""biasbreaker for LangChain agents: ``BiasGuardMiddleware`` for ``create_agent``.

::

    from langchain.agents import create_agent
    from biasbreaker_langchain import BiasGuardMiddleware

    agent = create_agent(model, tools=[...], middleware=[BiasGuardMiddleware()],
                         checkpointer=saver)

Every model call of the agent is probed with counterfactual messages; a reply that trips the
breaker is never appended and none of its tool calls runs: it goes to human review through
``interrupt()``. See ``docs/langchain.md``.

Modules:
    ``plugin``: the entry-point module (options, factory, hook); imports no LangChain.
    ``adapter``: :class:`~biasbreaker_langchain.adapter.LangChainAgentAdapter`.
    ``middleware``: :class:`~biasbreaker_langchain.middleware.BiasGuardMiddleware`.

Importing this package imports LangChain; the entry point does not.
"""

from __future__ import annotations

from biasbreaker_langchain.middleware import (
    WITHHELD,
    BiasGuardMiddleware,
    BiasGuardState,
    ReviewAnswer,
    ReviewRequest,
)

__version__ = "0.1.0"

__all__ = [
    "WITHHELD",
    "BiasGuardMiddleware",
    "BiasGuardState",
    "ReviewAnswer",
    "ReviewRequest",
]
