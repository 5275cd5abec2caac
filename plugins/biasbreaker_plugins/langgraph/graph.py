"""``guard(builder)``: a guarded copy of a ``StateGraph`` builder, compiled as usual.

The copy keeps every node, edge, conditional edge, schema and node policy of the original
(which is left untouched, so the unguarded graph stays available); its guarded nodes run
:meth:`GraphGuard.wrap` instead of the user's function, and it has the breaker node
``bb_breaker`` (breaker and mitigation) and the review node ``bb_review`` (plus
``bb_skeptic`` and ``bb_aggregate`` with ``panel = "send"``). Its
:meth:`GuardedStateGraph.compile` gates the guarded nodes' edges (:mod:`._internals`), so a
held output's successors never run.

**The guard's state is the guard's.** The copy adds the ``bb_`` channels itself (the user's
schema — a TypedDict, a pydantic model or a dataclass, ``MessagesState`` — need not mention
them; one derived from :class:`~biasbreaker_plugins.langgraph.state.BiasState` still works).
Every node's input schema, every conditional edge's, and the graph's input and output schemas
are the user's keys only, so no user node or router ever receives a ``bb_`` key, ``invoke``
returns the application's keys, and no stream mode (values, updates, checkpoints, tasks,
debug) carries the guard's keys — a held output lives only there. The guarded nodes and the
added nodes read the ``bb_`` keys through LangGraph's channel reader
(:func:`~biasbreaker_plugins.langgraph._internals.read_channels`); read them after a run with
:func:`guard_state`.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import typing
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Final, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph._internal._typing import MISSING
from langgraph.channels.base import BaseChannel
from langgraph.errors import EmptyChannelError
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel import Pregel
from pydantic import BaseModel

from biasbreaker.errors import ConfigError
from biasbreaker.machine import AnyHook, MachineConfig
from biasbreaker.propagation import katz_influence
from biasbreaker.registry import BuildContext
from biasbreaker_plugins.langgraph._internals import (
    LeanAggregate,
    as_node_runnable,
    hide_tasks,
    install_gates,
    lean_channels,
    node_function,
)
from biasbreaker_plugins.langgraph.configurable import OPAQUE_PREFIXES
from biasbreaker_plugins.langgraph.names import (
    ADDED_NODES,
    AGGREGATE,
    BREAKER,
    ENTRY,
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
from biasbreaker_plugins.langgraph.probing import in_rerun
from biasbreaker_plugins.langgraph.retrying import retry_policies
from biasbreaker_plugins.langgraph.routes import Route
from biasbreaker_plugins.langgraph.runtime import GraphGuard, GuardOptions
from biasbreaker_plugins.langgraph.state import BB_KEYS, BB_PREFIX, BiasState
from biasbreaker_plugins.langgraph.topology import Topology, read_topology, single_destination
from biasbreaker_plugins.langgraph.values import annotation_problem


class GuardedStateGraph(StateGraph):  # type: ignore[type-arg]
    """A ``StateGraph`` whose ``compile()`` returns a guarded graph.

    Build it with :func:`biasbreaker_plugins.langgraph.guard`; compile and run it exactly like
    the original builder. :attr:`guard` is the runtime shared by its compiled graphs.
    """

    guard: GraphGuard
    guarded_nodes: tuple[str, ...]
    built: tuple[Any, ...] | None = None
    """The graph's shape as :func:`build_guarded` left it (:func:`_shape`); set last."""

    def __deepcopy__(self, memo: dict[int, Any]) -> GuardedStateGraph:
        """A deep copy sharing the guard (:mod:`.shared`), checked as the original is.

        The copy's node runnables are new objects, so its shape is taken again; a builder
        changed after :func:`guard` keeps the shape it was built with, and its copy's
        ``compile()`` refuses as the original's does.
        """
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in vars(self).items():
            setattr(new, key, copy.deepcopy(value, memo))
        if self.built is not None and _shape(self) == self.built:
            new.built = _shape(new)
        return new

    def add_node(self, node: Any, *args: Any, **kwargs: Any) -> Any:
        """Refused once built: see :meth:`_refuse`."""
        self._refuse(f"add_node({getattr(node, '__name__', node)!r})")
        return super().add_node(node, *args, **kwargs)

    def add_edge(self, start_key: Any, end_key: Any) -> Any:
        """Refused once built: see :meth:`_refuse`."""
        self._refuse(f"add_edge({start_key!r}, {end_key!r})")
        return super().add_edge(start_key, end_key)

    def add_conditional_edges(self, source: Any, *args: Any, **kwargs: Any) -> Any:
        """Refused once built: see :meth:`_refuse`."""
        self._refuse(f"add_conditional_edges({source!r}, ...)")
        return super().add_conditional_edges(source, *args, **kwargs)

    def _refuse(self, call: str) -> None:
        """Raise for a change to the graph after :func:`guard` built it.

        The guard decides when it is built which nodes it wraps, which edges it gates and the
        Katz weights of B_net; a node or an edge added to the guarded builder afterwards would
        run unguarded (a new-user trial's late node passed a denial on, and a late conditional
        edge routed a step scored 0 to ``deny``).

        Raises:
            ConfigError: Always, once built, naming the call and the fix.
        """
        if self.built is not None:
            raise ConfigError(
                f"{call} on the builder guard() returned: the guard was built for the graph "
                "as it was then, so the new part would run unguarded; add every node and edge "
                "to your StateGraph first, then call guard(builder)"
            )

    def compile(self, *args: Any, **kwargs: Any) -> CompiledStateGraph[Any, Any, Any, Any]:
        """Compile like ``StateGraph.compile`` (same arguments), then gate the guarded edges.

        For durable halts pass ``durability="sync"`` when invoking: the breaker's transition is
        then checkpointed before the next super-step starts.

        Raises:
            ConfigError: The graph's nodes or edges were changed after :func:`guard` built it
                (e.g. through ``.nodes`` or ``.edges``; the ``add_*`` methods refuse at once).
        """
        if self.built is not None and _shape(self) != self.built:
            raise ConfigError(
                "the builder guard() returned was changed after guard() (its nodes, edges or "
                "conditional edges differ from the graph it guarded), so the new part would "
                "run unguarded; add every node and edge to your StateGraph first, then call "
                "guard(builder)"
            )
        compiled = super().compile(*args, **kwargs)
        # stream(), get_state() and every stream mode read the stream channels: all but ours
        compiled.stream_channels = [
            key for key in compiled.stream_channels_list if key not in BB_KEYS
        ]
        promoters = [n for n in PROMOTERS if n in compiled.nodes]
        install_gates(compiled, self.guarded_nodes, promoters)
        hide_tasks(compiled, [n for n in (SKEPTIC, AGGREGATE) if n in compiled.nodes])
        compiled.__class__ = GuardedCompiledStateGraph
        setattr(compiled, GUARD_ATTR, self.guard)
        return compiled


class GuardedCompiledStateGraph(CompiledStateGraph):  # type: ignore[type-arg]
    """A compiled guarded graph: ``stream``, ``astream`` (and so ``invoke``) seal the trace.

    The thread's run trace is sealed when they return, whether the run ended or paused.
    """

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """``CompiledStateGraph.stream``, then seal the run's trace."""
        try:
            yield from super().stream(input, config, **kwargs)
        finally:
            _seal(self, config)

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """``CompiledStateGraph.astream``, then seal the run's trace."""
        try:
            async for chunk in super().astream(input, config, **kwargs):
                yield chunk
        finally:
            _seal(self, config)

    def astream_events(self, *args: Any, **kwargs: Any) -> Any:
        """Refused unless ``stream_first``: see :func:`_no_event_stream`."""
        _no_event_stream(self, "astream_events")
        return super().astream_events(*args, **kwargs)

    def astream_log(self, *args: Any, **kwargs: Any) -> Any:
        """Refused unless ``stream_first``: see :func:`_no_event_stream`."""
        _no_event_stream(self, "astream_log")
        return super().astream_log(*args, **kwargs)


def _no_event_stream(graph: Any, api: str) -> None:
    """Refuse LangChain's event streams on a guarded graph (they are not held).

    ``astream_events``/``astream_log`` report every run's start and end with its input and
    output, so a guarded node's own run would show the held output in its ``on_chain_end``
    event. ``stream``/``astream`` with any stream mode hold it.

    Raises:
        ConfigError: Unless ``[plugin.langgraph] stream_first = true`` (which leaks anyway).
    """
    guard = getattr(graph, GUARD_ATTR, None)
    if isinstance(guard, GraphGuard) and not guard.stream_first:
        raise ConfigError(
            f"{api}() on a guarded graph would show held outputs (every run's output is in "
            "its end event); use astream(..., stream_mode=[...]) with the modes you need "
            "(messages, custom, updates, values, tasks, debug, checkpoints), which hold them "
            "until they are let through, or set [plugin.langgraph] stream_first = true to "
            "accept the leak"
        )


def _seal(graph: Any, config: RunnableConfig | None) -> None:
    guard = getattr(graph, GUARD_ATTR, None)
    if isinstance(guard, GraphGuard):
        guard.seal_run(config)


GUARD_ATTR: Final = "__biasbreaker_guard__"
"""The attribute a guarded compiled graph carries its :class:`GraphGuard` in."""


def guard_of(graph: Any) -> GraphGuard | None:
    """The guard of a compiled graph built by ``guard(builder).compile()``, else ``None``."""
    found = getattr(graph, GUARD_ATTR, None)
    return found if isinstance(found, GraphGuard) else None


def guard_state(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig
) -> dict[str, Any]:
    """The guard's keys (``bb_local_scores``, ``bb_breaker``, ``bb_frozen``, …) of a thread.

    ``graph.get_state(config).values`` and ``invoke``'s result hold the application's keys
    only; this reads the guard's from the thread's latest checkpoint.

    Args:
        graph: A guarded compiled graph, with a checkpointer.
        config: The run's config (``{"configurable": {"thread_id": ...}}``; a
            ``checkpoint_ns`` reads a subgraph's).

    Returns:
        ``bb_`` key -> value, for the keys written so far.

    Raises:
        ConfigError: ``graph`` was not guarded, or it has no checkpointer.
    """
    found = _saver_of(graph, "guard_state").get_tuple(config)
    return {} if found is None else _guard_keys(graph, found.checkpoint)


async def aguard_state(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig
) -> dict[str, Any]:
    """:func:`guard_state` through the checkpointer's async interface (``aget_tuple``).

    Use it inside an event loop with an async-only saver (``AsyncPostgresSaver``,
    ``AsyncSqliteSaver``), whose synchronous calls refuse to run on the loop's thread.

    Raises:
        ConfigError: As :func:`guard_state`.
    """
    found = await _saver_of(graph, "aguard_state").aget_tuple(config)
    return {} if found is None else _guard_keys(graph, found.checkpoint)


def _saver_of(graph: CompiledStateGraph[Any, Any, Any, Any], name: str) -> Any:
    if guard_of(graph) is None:
        raise ConfigError(
            f"{name}() reads a graph compiled from guard(builder); this one was not guarded"
        )
    saver = graph.checkpointer
    if saver is None or saver is True or saver is False:
        raise ConfigError(
            f"{name}() reads the thread's checkpoint: compile the guarded graph with a "
            "checkpointer, e.g. .compile(checkpointer=InMemorySaver())"
        )
    return saver


def _guard_keys(graph: CompiledStateGraph[Any, Any, Any, Any], checkpoint: Any) -> dict[str, Any]:
    values = checkpoint["channel_values"]
    out: dict[str, Any] = {}
    for key in sorted(BB_KEYS):
        # a reducer key never written reads as its channel's default (an empty dict or list)
        spec = graph.channels[key]
        if not isinstance(spec, BaseChannel):
            continue
        channel = spec.from_checkpoint(values.get(key, MISSING))
        try:
            out[key] = channel.get()
        except EmptyChannelError:
            if isinstance(spec, LeanAggregate):  # empty until written: its empty value
                out[key] = spec.typ()
    return out


def _entry(state: Any) -> dict[str, Any]:
    """``bb_entry``: no update; its conditional edges (those of ``START``) decide."""
    return {}


def _with_entry(builder: StateGraph[Any, Any, Any, Any]) -> StateGraph[Any, Any, Any, Any]:
    """A copy of ``builder`` whose conditional edges out of ``START`` leave ``bb_entry``.

    ``START → bb_entry`` is added and ``bb_entry`` takes over ``START``'s conditional edges
    (their path functions, ``path_map`` and input schemas unchanged), so a guarded node is
    there for the probe to evaluate them on (:mod:`~biasbreaker_plugins.langgraph.routes`):
    where they send the run is compared for every counterfactual of the input, and the run
    goes on only once ``bb_entry``'s step is promoted. ``START``'s plain edges stay.
    """
    work = copy.copy(builder)
    work.nodes = dict(builder.nodes)
    work.edges = set(builder.edges)
    work.waiting_edges = set(builder.waiting_edges)
    work.branches = defaultdict(
        dict, {k: dict(v) for k, v in builder.branches.items() if k != START}
    )
    work.channels = dict(builder.channels)
    work.managed = dict(builder.managed)
    work.schemas = dict(builder.schemas)
    work.compiled = False
    work.add_node(ENTRY, _entry)
    work.add_edge(START, ENTRY)
    work.branches[ENTRY] = dict(builder.branches[START])
    return work


def _entered(
    builder: StateGraph[Any, Any, Any, Any], chosen: list[str], names: list[str]
) -> tuple[StateGraph[Any, Any, Any, Any], list[str], list[str]]:
    """``builder``, ``chosen`` and ``names`` with ``bb_entry`` added, if START needs it.

    ``bb_entry`` is added (:func:`_with_entry`) and put first in the nodes to guard
    (``chosen``) and in those whose topology is read (``names``) only when the graph has
    conditional edges out of ``START`` and guards some node; otherwise the three are
    returned unchanged.
    """
    if chosen and builder.branches.get(START):
        return _with_entry(builder), [ENTRY, *chosen], [ENTRY, *names]
    return builder, chosen, names


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


def _model_class(schema: Any) -> type[Any] | None:
    """``schema`` if LangGraph builds a node's input as an instance of it, else ``None``."""
    if isinstance(schema, type) and (
        issubclass(schema, BaseModel) or dataclasses.is_dataclass(schema)
    ):
        return schema
    return None


def _routes(builder: StateGraph[Any, Any, Any, Any], name: str) -> tuple[Route, ...]:
    """The conditional edges out of node ``name``, as the probe evaluates them (:mod:`.routes`).

    Each reads its own input schema's keys, else the node's (as LangGraph's ``attach_branch``).
    """
    routes = []
    for branch_name, branch in builder.branches.get(name, {}).items():
        schema = branch.input_schema or builder.nodes[name].input_schema
        keys = builder.schemas.get(schema) or builder.schemas[builder.state_schema]
        routes.append(
            Route(
                name=branch_name,
                path=branch.path,
                ends=branch.ends,
                keys=tuple(k for k in keys if k not in BB_KEYS),
                state_type=_model_class(schema),
                own_schema=branch.input_schema is not None,
            )
        )
    return tuple(routes)


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


def _subgraph_step(name: str, subgraph: Pregel[Any, Any, Any, Any]) -> Callable[..., Any]:
    """A node function that runs a compiled subgraph (so it can be guarded as one step).

    Its own call runs the subgraph inside the node's task, as LangGraph runs a subgraph called
    from a node (its checkpoints, interrupts and streamed events included). The probe's
    re-runs (:class:`~biasbreaker_plugins.langgraph.probing.Prober`) call it with a silenced
    copy of the task's config; without the task, they run the subgraph on its own with no
    checkpointer, so a re-run never writes the thread's checkpoints.
    """
    isolated = subgraph.copy(update={"checkpointer": None})

    def run_subgraph(state: Any, config: RunnableConfig) -> Any:
        if in_rerun():
            return isolated.invoke(state, {"callbacks": config.get("callbacks")})
        return subgraph.invoke(state, config)

    run_subgraph.__name__ = name
    return run_subgraph


def _readable(builder: StateGraph[Any, Any, Any, Any], opaque: frozenset[str]) -> None:
    """Refuse a state key whose declared type the probe cannot read (docs: the values table).

    Raises:
        ConfigError: Naming the key, its type and the fixes.
    """
    seen: set[str] = set()
    for schema in (builder.state_schema, builder.input_schema, builder.output_schema):
        try:
            hints = typing.get_type_hints(schema, include_extras=True)
        except (NameError, TypeError):
            continue
        for key, hint in hints.items():
            if key in seen or key in BB_KEYS or key in opaque:
                continue
            seen.add(key)
            problem = annotation_problem(hint)
            if problem is not None:
                raise ConfigError(
                    f"state key {key!r} is declared as {_shown_type(hint)}, which the probe "
                    f"cannot read ({problem}); a guarded step would be held for review every "
                    "time. Declare it with a type the probe reads (docs/langgraph.md, 'What the "
                    "probe reads': text, numbers, lists, dicts, messages, pydantic models, "
                    f"dataclasses), or, if it names no person, pass guard(..., opaque=[{key!r}]) "
                    "so the probe passes it through unchanged"
                )


def _shown_type(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else repr(hint).replace("typing.", "")


def _hidden(guarded: StateGraph[Any, Any, Any, Any], schema: Any) -> Any:
    """``schema`` without the ``bb_`` keys (a TypedDict registered with the same channels)."""
    keys = guarded.schemas.get(schema)
    if keys is None or not any(key in BB_KEYS for key in keys):
        return schema
    try:
        hints = typing.get_type_hints(schema, include_extras=True)
    except (NameError, TypeError):
        hints = {}
    fields = {k: hints.get(k, Any) for k in keys if k not in BB_KEYS}
    name = getattr(schema, "__name__", "State")
    filtered = TypedDict(name, fields, total=False)  # type: ignore[misc]
    filtered.__module__ = getattr(schema, "__module__", __name__)
    guarded.schemas[filtered] = {k: v for k, v in keys.items() if k not in BB_KEYS}
    return filtered


class _NoInput(TypedDict):
    """The input schema of the guard's own nodes: nothing (they read the ``bb_`` keys)."""


def _opaque_keys(opaque: Any, builder: StateGraph[Any, Any, Any, Any]) -> frozenset[str]:
    """``guard(opaque=...)`` as a set of names, each checked for its form.

    Raises:
        ConfigError: ``opaque`` is one string (it would be read as its characters), not a
            list of strings, or names a config key in another form than
            ``"configurable.<key>"``/``"metadata.<key>"`` of one top-level key.
    """
    if isinstance(opaque, str):
        raise ConfigError(
            f"guard(opaque={opaque!r}) is one string, read as the keys {sorted(set(opaque))}; "
            f"give a list of keys, e.g. opaque=[{opaque!r}]"
        )
    try:
        names = list(opaque)
    except TypeError:
        names = [opaque]
    wrong = [name for name in names if not isinstance(name, str)]
    if wrong:
        raise ConfigError(
            f"guard(opaque=...) names {wrong!r}, which are not strings; give the keys as "
            "strings: a state key ('key'), 'configurable.<key>' or 'metadata.<key>'"
        )
    bad = sorted(
        name
        for name in names
        if name not in builder.channels
        and name.startswith(OPAQUE_PREFIXES)
        and not _one_config_key(name)
    )
    if bad:
        raise ConfigError(
            f"guard(opaque=...) names {bad}, which are no key of the run's config: write "
            "'configurable.<key>' or 'metadata.<key>' with <key> one top-level key of that "
            "section (a key's whole value is passed through; there are no nested paths)"
        )
    return frozenset(names)


def _one_config_key(name: str) -> bool:
    """Whether ``name`` is ``"<section>.<key>"`` with ``<key>`` one non-empty, undotted key."""
    key = name.split(".", 1)[1]
    return bool(key) and "." not in key


def _unprobed_nodes(
    unprobed: Any, names: Sequence[str], guarded_subgraphs: set[str]
) -> frozenset[str]:
    """``guard(unprobed=...)`` as a set of node names, each checked (``None``: no node).

    Raises:
        ConfigError: ``unprobed`` is one string (it would be read as its characters), names
            something that is not a node of the graph, or a guarded subgraph (which keeps its
            own breaker over its own nodes).
    """
    if unprobed is None:  # as nodes=None means every node, unprobed=None means none
        return frozenset()
    if isinstance(unprobed, str):
        raise ConfigError(
            f"guard(unprobed={unprobed!r}) is one string, read as the node names "
            f"{sorted(set(unprobed))}; give a list of node names, e.g. unprobed=[{unprobed!r}]"
        )
    try:
        given = list(unprobed)
    except TypeError:
        given = [unprobed]
    unknown = sorted((n for n in given if n not in names), key=repr)
    if unknown:
        raise ConfigError(
            f"guard(unprobed=...) names unknown nodes {unknown}; nodes: {list(names)}"
        )
    already = sorted(set(given) & guarded_subgraphs)
    if already:
        raise ConfigError(
            f"guard(unprobed=...) names {already}, compiled from guard(...) already: a guarded "
            "subgraph keeps its own breaker over its own nodes; leave it out of unprobed=[...]"
        )
    return frozenset(given)


def build_guarded(
    builder: StateGraph[Any, Any, Any, Any],
    *,
    options: GuardOptions,
    context: BuildContext,
    machine_config: MachineConfig,
    nodes: Sequence[str] | None,
    hook: AnyHook | None,
    concurrent: Sequence[str],
    opaque: Sequence[str] = (),
    unprobed: Sequence[str] | None = (),
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
        opaque: State keys the probe passes through unchanged (never varied or compared), and
            keys of the run's ``config["configurable"]`` and ``config["metadata"]`` written
            ``"configurable.<key>"`` and ``"metadata.<key>"``.
        unprobed: Nodes guarded but never re-run by the probe, like ``@guard_node(probe=False)``
            (for a node that is no function of the user's: a ``ToolNode``, any Runnable).

    Raises:
        ConfigError: ``builder`` is not a ``StateGraph`` or has no node; a state key starts
            with ``bb_`` but is not the guard's, or has a type the probe cannot read; a named
            node (in ``nodes``, ``concurrent`` or ``unprobed``) does not exist, is not a
            function or a compiled graph, or is a guarded subgraph; a node name clashes with
            the breaker nodes.
    """
    if not isinstance(builder, StateGraph):
        raise ConfigError(
            f"guard() takes a StateGraph builder (before compile()), got {type(builder).__name__}; "
            "the functional API (@entrypoint/@task) has no edges for the guard to hold: build "
            "the step as a StateGraph, guard it, and invoke the guarded graph in your @task "
            "(docs/langgraph.md, 'The functional API')"
        )
    if isinstance(builder, GuardedStateGraph):
        raise ConfigError(
            "guard(builder): this builder is already guarded (guard() returned it); guard the "
            "original StateGraph once, with every node it should guard"
        )
    if not builder.nodes:
        raise ConfigError(
            "guard(builder): the builder has no node yet; add every node and edge to your "
            "StateGraph first, then call guard(builder) (the guard is built for the graph as "
            "it is then, and the builder it returns refuses new nodes and edges)"
        )
    if "__root__" in builder.channels:
        schema = getattr(builder.state_schema, "__name__", builder.state_schema)
        raise ConfigError(
            f"the state schema {schema} has no named keys (LangGraph keeps it as one root "
            "value), so the guard has nowhere to keep its own keys; declare the state as a "
            "TypedDict, a pydantic model or a dataclass with named fields"
        )
    reserved = sorted(k for k in builder.channels if k.startswith(BB_PREFIX) and k not in BB_KEYS)
    if reserved:
        raise ConfigError(
            f"state keys {reserved} start with {BB_PREFIX!r}, which is reserved for the guard's "
            "own keys; rename them"
        )
    clash = sorted(set(builder.nodes) & set(ADDED_NODES))
    if clash:
        raise ConfigError(f"node names {clash} are reserved for the breaker nodes; rename them")
    opaque_keys = _opaque_keys(opaque, builder)
    unknown_opaque = sorted(
        k for k in opaque_keys - set(builder.channels) if not k.startswith(OPAQUE_PREFIXES)
    )
    if unknown_opaque:
        raise ConfigError(
            f"guard(opaque=...) names {unknown_opaque}, which are not state keys "
            f"(keys: {sorted(set(builder.channels) - BB_KEYS)}) nor keys of the run's "
            "config['configurable'] or config['metadata'] (written 'configurable.<key>' or "
            "'metadata.<key>')"
        )
    names = _user_nodes(builder)
    guarded_subgraphs = {n for n in names if guard_of(builder.nodes[n].runnable) is not None}
    marked = {
        name
        for name in names
        if hasattr(node_function(builder.nodes[name].runnable), NODE_OPTIONS_ATTR)
    }
    if isinstance(nodes, str):
        raise ConfigError(
            f"guard(nodes={nodes!r}) is one string, read as the node names {sorted(set(nodes))}; "
            f"give a list of node names, e.g. nodes=[{nodes!r}]"
        )
    unprobed_nodes = _unprobed_nodes(unprobed, names, guarded_subgraphs)
    marked |= unprobed_nodes  # guarded either way, as a node marked @guard_node(probe=False)
    if nodes is not None and not nodes and not marked and not guarded_subgraphs:
        raise ConfigError(
            "guard(nodes=[]) guards no node (none is marked with @guard_node, none is a "
            "guarded subgraph), so nothing would be probed or held; name the nodes to guard "
            f"(nodes: {names}), or leave nodes out to guard every node"
        )
    if nodes is None:
        chosen = [n for n in names if n not in guarded_subgraphs]
    else:
        unknown = sorted(set(nodes) - set(names))
        if unknown:
            raise ConfigError(f"guard(nodes=...) names unknown nodes {unknown}; nodes: {names}")
        already = sorted(set(nodes) & guarded_subgraphs)
        if already:
            raise ConfigError(
                f"guard(nodes=...) names {already}, compiled from guard(...) already: a guarded "
                "subgraph keeps its own breaker over its own nodes; leave it out of nodes=[...]"
            )
        chosen = [n for n in names if n in set(nodes) or n in marked]
    unknown_concurrent = sorted(set(concurrent) - set(chosen))
    if unknown_concurrent:
        raise ConfigError(
            f"guard(concurrent=...) names {unknown_concurrent}, which are not guarded nodes"
        )
    if chosen:
        _readable(builder, opaque_keys)
    builder, chosen, names = _entered(builder, chosen, names)
    topology = _topology(builder, names)
    parallel = topology.concurrent() | set(concurrent)
    specs: dict[str, GuardedNode] = {}
    for name in chosen:
        runnable = builder.nodes[name].runnable
        fn = node_function(runnable)
        if fn is None and isinstance(runnable, Pregel):
            fn = _subgraph_step(name, runnable)
        if fn is None:
            raise ConfigError(
                f"node {name!r} is a {type(runnable).__name__}, neither a function nor a "
                "compiled graph, so it cannot be guarded; wrap it in a function "
                "(def node(state): return runnable.invoke(state)) or leave it out of "
                "guard(..., nodes=[...])"
            )
        cached = builder.nodes[name].cache_policy or builder._node_defaults.cache_policy
        if cached is not None:
            raise ConfigError(
                f"guarded node {name!r} has a CachePolicy: a cached result replays the node's "
                "writes without running it, and so without the guard (its breaker steps, its "
                "hold); drop the cache policy of guarded nodes, or leave the node out of "
                "guard(..., nodes=[...])"
            )
        marks: NodeOptions = getattr(fn, NODE_OPTIONS_ATTR, NodeOptions())
        original = getattr(fn, "__wrapped__", fn) if hasattr(fn, NODE_OPTIONS_ATTR) else fn
        first, inject = _injected(original)
        specs[name] = GuardedNode(
            name=name,
            fn=original,
            is_async=inspect.iscoroutinefunction(original),
            probe=marks.probe and name not in unprobed_nodes,
            mode="queued" if name in parallel else "inline",
            first=first,
            inject=inject,
            state_type=_model_class(builder.nodes[name].input_schema),
            routes=_routes(builder, name),
            retry=retry_policies(
                builder.nodes[name].retry_policy or builder._node_defaults.retry_policy
            ),
        )
    influence = katz_influence(
        topology.agent_graph(),
        attenuation=context.settings.propagation.attenuation,
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
    if not set(guarded.channels) >= BB_KEYS:
        guarded._add_schema(BiasState)
    guarded.channels.update(lean_channels(guarded.channels, BB_KEYS))
    runtime = GraphGuard(
        options,
        context,
        machine_config,
        specs,
        dict(influence.weights),
        hook,
        channels=guarded.channels,
        opaque=opaque_keys,
    )
    for node_spec in guarded.nodes.values():
        node_spec.input_schema = _hidden(guarded, node_spec.input_schema)
    for by_name in guarded.branches.values():
        for branch_name, branch in by_name.items():
            if branch.input_schema is not None:
                by_name[branch_name] = branch._replace(
                    input_schema=_hidden(guarded, branch.input_schema)
                )
    guarded.input_schema = _hidden(guarded, builder.input_schema)
    guarded.output_schema = _hidden(guarded, builder.output_schema)
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
        guarded.add_node(name, action, input_schema=_NoInput)
    if runtime.send_panel is not None:
        guarded.add_edge(SKEPTIC, AGGREGATE)
    assert isinstance(guarded, GuardedStateGraph)
    guarded.guard = runtime
    guarded.guarded_nodes = tuple(specs)
    guarded.built = _shape(guarded)
    return guarded


def _shape(builder: StateGraph[Any, Any, Any, Any]) -> tuple[Any, ...]:
    """The graph's shape, which a change after :func:`guard` would alter.

    Returns:
        The node names with their runnables, the edges, the waiting edges and each source's
        conditional edges (their names and path functions), comparable with ``==``.
    """
    return (
        tuple((name, id(spec.runnable)) for name, spec in builder.nodes.items()),
        frozenset(builder.edges),
        frozenset(builder.waiting_edges),
        tuple(
            (source, tuple((name, id(branch.path)) for name, branch in by_name.items()))
            for source, by_name in builder.branches.items()
            if by_name
        ),
    )


__all__ = [
    "GUARD_ATTR",
    "GuardedStateGraph",
    "aguard_state",
    "build_guarded",
    "guard_of",
    "guard_state",
]
