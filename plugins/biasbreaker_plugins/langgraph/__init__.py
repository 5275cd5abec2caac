"""The LangGraph adapter (``framework_adapter`` plugin ``langgraph``): guard a ``StateGraph``.

::

    from biasbreaker_plugins.langgraph import BiasState, guard

    class State(BiasState):
        question: str
        answer: str

    builder = StateGraph(State)
    ...                                                   # nodes and edges as usual
    graph = guard(builder).compile(checkpointer=saver)    # the two lines
    graph.invoke({"question": ...}, {"configurable": {"thread_id": "t1"}}, durability="sync")

Every guarded node's output is probed, held until the control machine lets it through, and
never reaches a downstream node's input if it is not: it is frozen, repaired by the
intervention hook, or handed to a human (``interrupt()``). See ``docs/langgraph.md``.

Importing this package imports LangGraph (the ``langgraph`` extra); the plugin's entry point
(:mod:`biasbreaker_plugins.langgraph_plugin`) does not.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.graph import StateGraph

from biasbreaker.config.advice import ConfigAdviceWarning, advice
from biasbreaker.config.sections import PROBE_OFF, ProbeOffWarning
from biasbreaker.errors import ConfigError, PluginError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import AnyHook
from biasbreaker.redaction import register_environment
from biasbreaker_plugins.langgraph.adapter import LangGraphAdapter
from biasbreaker_plugins.langgraph.graph import GuardedStateGraph, aguard_state, guard_state
from biasbreaker_plugins.langgraph.names import ADDED_NODES, ENTRY
from biasbreaker_plugins.langgraph.node import GuardedNode, NodeOptions, guard_node
from biasbreaker_plugins.langgraph.probing import NodeReturnError
from biasbreaker_plugins.langgraph.review import ReviewDecision, ReviewRequest
from biasbreaker_plugins.langgraph.routes import UnprobedRouteWarning
from biasbreaker_plugins.langgraph.runtime import GraphGuard
from biasbreaker_plugins.langgraph.state import BB_KEYS, BiasState

Config = Kernel | Mapping[str, Any] | str | os.PathLike[str] | None
"""What ``guard(config=...)`` accepts (see :func:`guard`)."""


def load_kernel(config: Config = None) -> Kernel:
    """The kernel for ``config``.

    Args:
        config: ``None`` (the configuration of the current directory: ``biasbreaker.toml``,
            ``pyproject.toml``, environment), a :class:`~biasbreaker.kernel.Kernel`, a mapping
            of explicit settings nested like the TOML (``{"breaker": {"tau_enter": 0.4}}``),
            or the path of a TOML file.

    Raises:
        ConfigError: The configuration is invalid.
    """
    if isinstance(config, Kernel):
        return config
    if config is None:
        return Kernel.load()
    if isinstance(config, Mapping):
        return Kernel.load(overrides=config)
    if not isinstance(config, (str, os.PathLike)):
        raise ConfigError(config_type_problem("guard()", config))
    if not os.path.isfile(config):
        raise ConfigError(config_file_problem("guard()", config))
    return Kernel.load(config_file=config)


def config_file_problem(where: str, path: str | os.PathLike[str]) -> str:
    """The message for a ``config`` path of ``where`` that is not a file."""
    return (
        f"{where}: config={os.fspath(path)!r} is no file (looked for from "
        f"{os.getcwd()!r}); give the path of a TOML file, or a dict of settings nested like "
        "the TOML"
    )


def config_type_problem(where: str, config: object) -> str:
    """The message for a ``config`` argument of ``where`` that is none of the accepted kinds."""
    return (
        f"{where}: config={config!r} ({type(config).__name__}); give None (the configuration "
        "of the current directory), a Kernel, a dict of settings nested like the TOML "
        "({'breaker': {'tau_enter': 0.4}}) or the path of a TOML file"
    )


def guard(
    builder: StateGraph[Any, Any, Any, Any],
    config: Config = None,
    *,
    nodes: Sequence[str] | None = None,
    hook: AnyHook | None = None,
    concurrent: Sequence[str] = (),
    opaque: Sequence[str] = (),
    unprobed: Sequence[str] | None = (),
) -> GuardedStateGraph:
    """Guard a ``StateGraph``: compile the result as usual.

    Args:
        builder: The graph builder (not compiled), with any state schema LangGraph takes (a
            TypedDict — ``MessagesState`` included —, a pydantic model or a dataclass); the
            guard adds its own ``bb_`` keys. It is not modified: ``builder.compile()`` still
            gives the unguarded graph.
        config: The configuration (see :func:`load_kernel`).
        nodes: The nodes to guard; ``None`` guards every node, a ``ToolNode`` without
            probing (as if in ``unprobed``: its tools act, so they run once per step; name
            it here to probe it, which warns ``ProbedToolNodeWarning``). Nodes marked with
            :func:`guard_node` are guarded either way.
        hook: The intervention hook (``Callable[[InterventionContext], InterventionResult]``,
            or a coroutine function); default: the configured one. A hook is the repair:
            the configured router, skeptics and MADERA are neither built nor checked, so it
            needs no ``[llm] client``.
        concurrent: Guarded nodes to check in the breaker node even though the graph's
            edges do not show that they can run in parallel with another guarded node (for a
            fan-out by ``Command(goto=[...])`` or ``Send`` from a node).
        opaque: State keys that name no person (a client, a file handle, an embedding): the
            probe passes them to its re-runs unchanged and never compares them. Any other key
            whose type the probe cannot read is refused here (docs/langgraph.md, "What the
            probe reads"). ``"configurable.<key>"`` and ``"metadata.<key>"`` name a key of
            the run's ``config["configurable"]`` and ``config["metadata"]`` the same way (the
            probe varies the others): a list of strings, each one top-level key (one string,
            a non-string item, ``"metadata."`` or ``"metadata.x.y"`` is a ``ConfigError``).
        unprobed: Nodes to guard without probing, as ``@guard_node(probe=False)`` marks a
            function: their output is checked by the breaker, and they are never re-run (for
            a node that must run once per step: it calls ``interrupt()``, sends, pays). The
            way to mark a node that is no function of yours, such as a ``ToolNode``. Guarded
            whatever ``nodes`` says; a name that is no node of the graph is a ``ConfigError``.

    Returns:
        The guarded builder; ``.compile(...)`` takes the same arguments as
        ``StateGraph.compile``.

    Raises:
        ConfigError: The configuration or the graph cannot be guarded (the message names
            the node or key and the fix).
        PluginError: The selected ``framework_adapter`` is not this one.

    Warns:
        ProbeOffWarning: ``[probe] probe_rate = 0``: every step is recorded, none probed.
        ProbedToolNodeWarning: A ``ToolNode`` named in ``nodes`` is probed (its tools run on
            every probe input; ``unprobed=[...]`` names it to run it once per step).
        ConfigAdviceWarning: Another valid setting that lets outputs through unchecked
            (:func:`biasbreaker.config.advice.advice`: sampled probing, ``node_trip = false``,
            ``tau_enter = 1``, ...).

    The environment's secrets are registered
    (:func:`~biasbreaker.redaction.register_environment`), so an error quoting one (a
    plugin's, a probe re-run's) is redacted in the trace, the state and the review request.
    """
    register_environment()
    kernel = load_kernel(config)
    # what `biasbreaker run` checks, every problem in one ConfigError; a hook is the repair
    kernel.validate(repairs=hook is None)
    for said in advice(kernel.settings):
        category = ProbeOffWarning if said == PROBE_OFF else ConfigAdviceWarning
        warnings.warn(said, category, stacklevel=2)
    adapter = kernel.build("framework_adapter", "langgraph")
    if not isinstance(adapter, LangGraphAdapter):
        raise PluginError(
            f"framework_adapter 'langgraph' built {type(adapter).__name__}, not the LangGraph "
            "adapter; is another plugin registering the name 'langgraph'?"
        )
    given = unprobed
    if nodes is None and not isinstance(unprobed, str):
        # every node guarded: a ToolNode's tools act, so it runs once per step, unprobed
        unprobed = [*(unprobed or ()), *tool_nodes(builder, unprobed)]
    guarded = adapter.guard(
        builder, nodes=nodes, hook=hook, concurrent=concurrent, opaque=opaque, unprobed=unprobed
    )
    tools: tuple[str, ...] = ()
    if nodes is not None:
        tools = tuple(t for t in tool_nodes(builder, given) if t in nodes)
    if tools:
        probe = kernel.settings.probe
        which = (
            f"node {tools[0]!r} is a ToolNode"
            if len(tools) == 1
            else f"nodes {', '.join(map(repr, tools))} are ToolNodes"
        )
        warnings.warn(
            f"{which} and probed: each probed step runs its tools again on every "
            f"counterfactual and resample input (with [probe] k = {probe.k} and r = {probe.r}, "
            f"at least {probe.k + probe.r} more calls, most about invented people). Fine for "
            "tools that only read; for a tool that acts (writes, sends, pays) guard the node "
            f"without probing: guard(..., unprobed={list(tools)!r}) (the model's tool call is "
            "the decision, and it is probed in the node that makes it)",
            ProbedToolNodeWarning,
            stacklevel=2,
        )
    return guarded


class ProbedToolNodeWarning(UserWarning):
    """``guard()`` probes a ``ToolNode``: its tools run again on every probe input."""


def tool_nodes(
    builder: StateGraph[Any, Any, Any, Any], unprobed: Sequence[str] | None
) -> tuple[str, ...]:
    """The ``ToolNode`` nodes of ``builder`` not in ``unprobed``, in order.

    ``()`` when ``langgraph.prebuilt`` is not installed.
    """
    try:
        from langgraph.prebuilt import ToolNode
    except ImportError:  # langgraph-prebuilt is a dependency of langgraph, but optional here
        return ()
    skip = set(unprobed or ())
    nodes = getattr(builder, "nodes", None)  # not a StateGraph: adapter.guard() says so
    return tuple(
        name
        for name, spec in (nodes.items() if isinstance(nodes, Mapping) else ())
        if isinstance(getattr(spec, "runnable", None), ToolNode) and name not in skip
    )


__all__ = [
    "ADDED_NODES",
    "BB_KEYS",
    "ENTRY",
    "BiasState",
    "Config",
    "GraphGuard",
    "GuardedNode",
    "GuardedStateGraph",
    "LangGraphAdapter",
    "NodeOptions",
    "NodeReturnError",
    "ProbedToolNodeWarning",
    "ReviewDecision",
    "ReviewRequest",
    "UnprobedRouteWarning",
    "aguard_state",
    "guard",
    "guard_node",
    "guard_state",
    "load_kernel",
]
