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
    ``middleware``: :class:`~biasbreaker_langchain.middleware.BiasGuardMiddleware`: loading
    the configuration, the hooks ``create_agent`` wires, and the flow of a guarded call.
    ``call``: one model call as the guard reads and re-issues it.
    ``probing``: whether a call is probed, and its counterfactual re-issues.
    ``deciding``: stepping the control machine on a call; repair.
    ``review``: a held reply's review (``interrupt()``) and where it waits.
    ``state``: the private agent-state keys and the snapshot they show.

Importing this package imports no LangChain until one of its names is used; the entry point
never does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from biasbreaker_langchain.middleware import BiasGuardMiddleware
    from biasbreaker_langchain.review import WITHHELD, ReviewAnswer, ReviewRequest
    from biasbreaker_langchain.state import BiasGuardState, UnprobedBiasGuardState

__version__ = "0.1.0"

__all__ = [
    "WITHHELD",
    "BiasGuardMiddleware",
    "BiasGuardState",
    "ReviewAnswer",
    "ReviewRequest",
    "UnprobedBiasGuardState",
]


def __getattr__(name: str) -> Any:
    """Import the middleware (and LangChain) on first use (PEP 562).

    Loading the entry-point module ``biasbreaker_langchain.plugin``, which every biasbreaker
    process does, then imports neither LangChain nor LangGraph.
    """
    if name in __all__:
        import importlib

        return getattr(importlib.import_module(_HOMES[name], __name__), name)
    raise AttributeError(f"module 'biasbreaker_langchain' has no attribute {name!r}")


_HOMES = {
    "WITHHELD": ".review",
    "BiasGuardMiddleware": ".middleware",
    "BiasGuardState": ".state",
    "ReviewAnswer": ".review",
    "ReviewRequest": ".review",
    "UnprobedBiasGuardState": ".state",
}
"""The module of each name in ``__all__``."""
