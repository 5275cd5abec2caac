"""Registers the ``langgraph`` framework adapter (``framework_adapter`` extension point).

This entry-point module is imported whenever plugins load, so it must stay cheap: it does
not import LangGraph (the ``langgraph`` extra). The factory imports the adapter, and with it
LangGraph, only when a guarded graph is built. The adapter itself lives in
:mod:`biasbreaker_plugins.langgraph`; see ``docs/langgraph.md``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from biasbreaker.errors import PluginError
from biasbreaker.hookspecs import hookimpl
from biasbreaker.registry import BuildContext, Register

_PLACEHOLDER = re.compile(r"\{[^{}]*\}?|\}")


def check_trace_template(template: str) -> str:
    """A ``trace_path`` whose only placeholder is ``{thread_id}`` (returned unchanged).

    The path is filled by replacing ``{thread_id}`` literally, so any other brace would stay
    in the file name: ``"{thread}.jsonl"`` wrote every thread into one file named
    ``{thread}.jsonl``, and the second thread's run was refused as a trace already taken.

    Raises:
        ValueError: ``template`` holds a brace other than in ``{thread_id}`` (pydantic reports
            it as a configuration error naming the key).
    """
    for match in _PLACEHOLDER.finditer(template):
        if match.group(0) != "{thread_id}":
            raise ValueError(
                f"{match.group(0)!r} in {template!r} is no placeholder: the only one is "
                "'{thread_id}' (the run's thread id), and a path holds no other brace"
            )
    return template


TraceTemplate = Annotated[str, AfterValidator(check_trace_template)]
"""A ``trace_path`` option: a path, ``{thread_id}`` its only placeholder."""


class LangGraphOptions(BaseModel):
    """Options of the ``langgraph`` adapter (``[plugin.langgraph]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    panel: Literal["in-process", "send"] = Field(
        "in-process",
        description="How the skeptic panel runs when the router chooses 'skeptics': "
        "'in-process' (the intervention runner's asyncio panel inside the mitigation node) or "
        "'send' (one LangGraph Send branch per skeptic, then an aggregation node).",
    )
    stream_first: bool = Field(
        False,
        description="Stream a guarded node's own tokens and custom events as they happen, "
        "before its output is checked (NeMo Guardrails' 'stream_first'): lower latency, but a "
        "biased output is shown to the caller before it is held. Default false: they are held "
        "until the output is let through. The probe's re-runs are never streamed.",
    )
    trace_path: TraceTemplate = Field(
        "",
        description="Run trace file (JSON Lines, one record per guarded step); '{thread_id}' "
        "in the path is replaced by the run's thread id. Empty: no trace.",
    )


def make_langgraph_adapter(options: LangGraphOptions, context: BuildContext) -> object:
    """Factory of the ``langgraph`` adapter: imports LangGraph here, not at module import.

    Returns:
        A :class:`biasbreaker_plugins.langgraph.adapter.LangGraphAdapter` (typed ``object``
        here: this module must not depend on the LangGraph extra, nor the adapter on it).

    Raises:
        PluginError: If LangGraph is not installed (install the ``langgraph`` extra).
    """
    try:
        from biasbreaker_plugins.langgraph.adapter import LangGraphAdapter
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise PluginError(
            "framework_adapter 'langgraph' needs LangGraph: pip install 'biasbreaker[langgraph]'"
        ) from exc
    return LangGraphAdapter(options, context)


@hookimpl
def framework_adapter(register: Register[object]) -> None:
    """Register the ``langgraph`` adapter."""
    register(
        "langgraph",
        make_langgraph_adapter,
        options=LangGraphOptions,
        summary="guards a LangGraph StateGraph: staged outputs, Command reroute, Send panel, "
        "interrupt() review",
        requires=("langgraph",),
        install="pip install 'biasbreaker[langgraph]'",
    )


__all__ = ["LangGraphOptions", "framework_adapter", "make_langgraph_adapter"]
