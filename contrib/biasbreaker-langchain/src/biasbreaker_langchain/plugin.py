"""The entry-point module: registers the ``langchain-agent`` framework adapter.

Loading this module is cheap: it imports pydantic and biasbreaker's hook marker, never
LangChain. The adapter (and LangChain with it) is imported inside the factory, only when the
configuration selects ``[adapter] framework = "langchain-agent"`` and a
:class:`~biasbreaker_langchain.BiasGuardMiddleware` is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from biasbreaker.errors import PluginError
from biasbreaker.hookspecs import hookimpl
from biasbreaker_plugins.langgraph_plugin import TraceTemplate

if TYPE_CHECKING:
    from biasbreaker.registry import BuildContext, Register

NAME = "langchain-agent"
"""The implementation name: ``[adapter] framework = "langchain-agent"``, options under
``[plugin.langchain-agent]``."""


class LangChainAgentOptions(BaseModel):
    """Options of the ``langchain-agent`` adapter (``[plugin.langchain-agent]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trace_path: TraceTemplate = Field(
        "",
        description="Run trace file (JSON Lines, one record per guarded model call); "
        "'{thread_id}' in the path is replaced by the run's thread id. Empty: no trace.",
    )
    node: str = Field(
        "model",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="The name under which the agent's model calls are scored and traced.",
    )


def make_adapter(options: LangChainAgentOptions, context: BuildContext) -> object:
    """Factory of the ``langchain-agent`` adapter: imports LangChain here, not at import.

    Returns:
        A :class:`biasbreaker_langchain.adapter.LangChainAgentAdapter` (typed ``object`` here:
        this module must not import LangChain).

    Raises:
        PluginError: LangChain (>= 1) is not installed.
        ConfigError: ``[breaker] probation`` is not ``"half-open"``.
    """
    try:
        from biasbreaker_langchain.adapter import LangChainAgentAdapter
    except ImportError as exc:  # pragma: no cover - exercised only without langchain
        raise PluginError(
            f"framework_adapter {NAME!r} needs LangChain >= 1: pip install 'langchain>=1' ({exc})"
        ) from exc
    return LangChainAgentAdapter(options, context)


@hookimpl
def framework_adapter(register: Register[Any]) -> None:
    """Register the ``langchain-agent`` adapter."""
    register(
        NAME,
        make_adapter,
        options=LangChainAgentOptions,
        summary="guards a LangChain create_agent agent: every model call probed in a "
        "middleware, a biased reply halted before its tool calls run, interrupt() review",
        requires=("langchain",),
        install="pip install biasbreaker-langchain",
    )


__all__ = ["NAME", "LangChainAgentOptions", "framework_adapter", "make_adapter"]
