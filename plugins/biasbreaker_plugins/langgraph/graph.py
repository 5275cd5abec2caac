"""``guard(builder)``: a guarded copy of a ``StateGraph`` builder, compiled as usual.

The copy keeps every node, edge, conditional edge, schema and node policy of the original
(which is left untouched, so the unguarded graph stays available); its guarded nodes run
:meth:`GraphGuard.wrap` instead of the user's function, and it has the breaker node
``bb_breaker`` (breaker and mitigation) and the review node ``bb_review`` (plus
``bb_skeptic`` and ``bb_aggregate`` with ``panel = "send"``). Its
:meth:`GuardedStateGraph.compile` gates the guarded nodes' edges (:mod:`._internals`), so a
held output's successors never run.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel

from biasbreaker.errors import ConfigError
from biasbreaker.machine import AnyHook, MachineConfig
from biasbreaker.propagation import katz_influence
from biasbreaker.registry import BuildContext
from biasbreaker_plugins.langgraph._internals import (
    as_node_runnable,
    install_gates,
    node_function,
)
from biasbreaker_plugins.langgraph.names import (
    ADDED_NODES,
    AGGREGATE,
    BREAKER,
    PROMOTERS,
    REVIEW,
    SKEPTIC,
)
from biasbreaker_plugins.langgraph.node import (
    INJECTABLE,
    NODE_OPTIONS_ATTR,
    GuardedNode,
    NodeOptions,
)
from biasbreaker_plugins.langgraph.runtime import GraphGuard, GuardOptions
from biasbreaker_plugins.langgraph.state import BB_KEYS
from biasbreaker_plugins.langgraph.topology import Topology, read_topology, single_destination


class GuardedStateGraph(StateGraph):  # type: ignore[type-arg]
    """A ``StateGraph`` whose ``compile()`` returns a guarded graph.

    Build it with :func:`biasbreaker_plugins.langgraph.guard`; compile and run it exactly like
    the original builder. :attr:`guard` is the runtime shared by its compiled graphs.
    """

    guard: GraphGuard
    guarded_nodes: tuple[str, ...]

    def compile(self, *args: Any, **kwargs: Any) -> CompiledStateGraph[Any, Any, Any, Any]:
        """Compile like ``StateGraph.compile`` (same arguments), then gate the guarded edges.

        For durable halts pass ``durability="sync"`` when invoking: the breaker's transition is
        then checkpointed before the next super-step starts.
        """
        compiled = super().compile(*args, **kwargs)
        promoters = [n for n in PROMOTERS if n in compiled.nodes]
        install_gates(compiled, self.guarded_nodes, promoters)
        return compiled


def _user_nodes(builder: StateGraph[Any, Any, Any, Any]) -> list[str]:
    return [
        name
        for name, spec in builder.nodes.items()
        if not spec.is_error_handler and name not in ADDED_NODES
    ]


def _topology(builder: StateGraph[Any, Any, Any, Any], names: list[str]) -> Topology:
    branches: dict[str, dict[str, tuple[tuple[str, ...] | None, bool]]] = {}
    for source, by_name in builder.branches.items():
        for branch_name, branch in by_name.items():
            targets = tuple(branch.ends.values()) if branch.ends is not None else None
            path = branch.path
            func = getattr(path, "func", None) or getattr(path, "afunc", None)
            branches.setdefault(source, {})[branch_name] = (targets, single_destination(func))
    declared_ends: dict[str, tuple[str, ...]] = {}
    for name in names:
        declared = builder.nodes[name].ends
        if declared:
            declared_ends[name] = tuple(declared.keys() if isinstance(declared, dict) else declared)
    return read_topology(names, builder.edges, builder.waiting_edges, branches, declared_ends)


def _model_kind(schema: Any) -> str | None:
    """``"pydantic model"`` or ``"dataclass"`` for such a state schema, else ``None``."""
    if dataclasses.is_dataclass(schema):
        return "dataclass"
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return "pydantic model"
    return None


def _injected(fn: Any) -> tuple[str, tuple[str, ...]]:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cannot read the signature of node function {fn!r}: {exc}") from exc
    names = list(params)
    if not names:
        raise ConfigError(f"node function {fn!r} takes no state argument")
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    inject = tuple(n for n in INJECTABLE if n in params and params[n].kind in kinds)
    return names[0], inject


def build_guarded(
    builder: StateGraph[Any, Any, Any, Any],
    *,
    options: GuardOptions,
    context: BuildContext,
    machine_config: MachineConfig,
    nodes: Sequence[str] | None,
    hook: AnyHook | None,
    concurrent: Sequence[str],
) -> GuardedStateGraph:
    """Build the guarded copy of ``builder``.

    Args:
        builder: The user's builder (not modified).
        options: ``[plugin.langgraph]``.
        context: The kernel's build context.
        machine_config: The control machine's configuration.
        nodes: The nodes to guard (``None``: all), see :func:`biasbreaker_plugins.langgraph.guard`.
        hook: The intervention hook, or ``None`` for the configured runner.
        concurrent: Guarded nodes to check in ``bb_breaker`` although the edges show no fan-out.

    Raises:
        ConfigError: ``builder`` is not a ``StateGraph``, its state lacks the ``BiasState``
            keys, a named node does not exist or is not a plain function, or a node name
            clashes with the breaker nodes.
    """
    if not isinstance(builder, StateGraph):
        raise ConfigError(
            f"guard() takes a StateGraph builder (before compile()), got {type(builder).__name__}"
        )
    schema = builder.state_schema
    kind = _model_kind(schema)
    if kind is not None:
        raise ConfigError(
            f"the state schema {getattr(schema, '__name__', schema)} is a {kind}; the biasbreaker "
            "adapter guards graphs whose state is a dict: declare it as a TypedDict derived "
            "from BiasState with the same fields, `class State(BiasState, total=False): ...` "
            "(from biasbreaker_plugins.langgraph import BiasState), and read it as "
            "state['field'] in the nodes"
        )
    missing = sorted(BB_KEYS - set(builder.channels))
    if missing:
        raise ConfigError(
            f"the state schema {getattr(builder.state_schema, '__name__', builder.state_schema)}"
            f" lacks the biasbreaker keys {missing}; derive it from BiasState: "
            "`class State(BiasState): ...` (from biasbreaker_plugins.langgraph import BiasState)"
        )
    clash = sorted(set(builder.nodes) & set(ADDED_NODES))
    if clash:
        raise ConfigError(f"node names {clash} are reserved for the breaker nodes; rename them")
    names = _user_nodes(builder)
    marked = {
        name
        for name in names
        if hasattr(node_function(builder.nodes[name].runnable), NODE_OPTIONS_ATTR)
    }
    if nodes is None:
        chosen = list(names)
    else:
        unknown = sorted(set(nodes) - set(names))
        if unknown:
            raise ConfigError(f"guard(nodes=...) names unknown nodes {unknown}; nodes: {names}")
        chosen = [n for n in names if n in set(nodes) or n in marked]
    unknown_concurrent = sorted(set(concurrent) - set(chosen))
    if unknown_concurrent:
        raise ConfigError(
            f"guard(concurrent=...) names {unknown_concurrent}, which are not guarded nodes"
        )
    topology = _topology(builder, names)
    parallel = topology.concurrent() | set(concurrent)
    specs: dict[str, GuardedNode] = {}
    for name in chosen:
        fn = node_function(builder.nodes[name].runnable)
        if fn is None:
            raise ConfigError(
                f"node {name!r} is a {type(builder.nodes[name].runnable).__name__}, not a "
                "function, so it cannot be guarded (a compiled subgraph or a Runnable); guard "
                "the subgraph's own nodes, or pass guard(..., nodes=[...]) without it"
            )
        marks: NodeOptions = getattr(fn, NODE_OPTIONS_ATTR, NodeOptions())
        original = getattr(fn, "__wrapped__", fn) if hasattr(fn, NODE_OPTIONS_ATTR) else fn
        first, inject = _injected(original)
        specs[name] = GuardedNode(
            name=name,
            fn=original,
            is_async=inspect.iscoroutinefunction(original),
            probe=marks.probe,
            mode="queued" if name in parallel else "inline",
            first=first,
            inject=inject,
        )
    influence = katz_influence(
        topology.agent_graph(),
        attenuation=context.settings.propagation.attenuation,
    )
    runtime = GraphGuard(
        options,
        context,
        machine_config,
        specs,
        dict(influence.weights),
        hook,
        channels=builder.channels,
    )

    guarded = copy.copy(builder)
    guarded.__class__ = GuardedStateGraph
    guarded.nodes = {n: dataclasses.replace(spec) for n, spec in builder.nodes.items()}
    guarded.edges = set(builder.edges)
    guarded.waiting_edges = set(builder.waiting_edges)
    guarded.branches = defaultdict(dict, {k: dict(v) for k, v in builder.branches.items()})
    guarded.channels = dict(builder.channels)
    guarded.managed = dict(builder.managed)
    guarded.schemas = dict(builder.schemas)
    guarded._node_defaults = copy.copy(builder._node_defaults)
    guarded.compiled = False
    for name, spec in specs.items():
        guarded.nodes[name].runnable = as_node_runnable(runtime.wrap(spec), name)
    added: list[tuple[str, Any]] = [
        (BREAKER, runtime.breaker_node.__call__),
        (REVIEW, runtime.review_node.__call__),
    ]
    if runtime.send_panel is not None:
        added += [
            (SKEPTIC, runtime.send_panel.skeptic_node),
            (AGGREGATE, runtime.send_panel.aggregate_node),
        ]
    for name, action in added:
        guarded.add_node(name, action)
    if runtime.send_panel is not None:
        guarded.add_edge(SKEPTIC, AGGREGATE)
    assert isinstance(guarded, GuardedStateGraph)
    guarded.guard = runtime
    guarded.guarded_nodes = tuple(specs)
    return guarded


__all__ = ["GuardedStateGraph", "build_guarded"]
