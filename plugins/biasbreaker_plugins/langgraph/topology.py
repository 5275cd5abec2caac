"""The user's graph as biasbreaker sees it: who feeds whom, and where it can fan out.

Two questions are answered from a ``StateGraph`` builder's own edges, before compiling:

1. **Influence** (M2): the agent graph ``u -> v`` ("v reads u's output") is every static edge,
   every start of a waiting edge (``add_edge([a, b], c)``), every destination of a conditional
   edge (its ``path_map``, or the ``Literal`` return type of its path function; without either
   LangGraph itself assumes the branch may go to any node, and so do we), and every declared
   ``Command`` destination of a node (``Command[Literal[...]]`` return type or
   ``destinations=``). Katz weights over it come from
   :func:`biasbreaker.propagation.katz_influence`.
2. **Concurrency**: the control machine is sequential, so two guarded nodes must never step it
   in one super-step. A *fan-out source* is ``START`` or a node that can trigger two or more
   tasks at once: two or more static or waiting edges out of it, a static edge and a
   conditional edge (or a declared ``Command`` destination) together, two conditional edges,
   or one conditional edge whose path
   function may return several destinations (its return type is not ``Literal[...]``/``str``:
   a list, ``Send``s, or no annotation). Every node reachable from a fan-out source is checked
   *queued* (its output waits for the breaker node, which takes the queued outputs one after
   another); the other nodes are checked *inline*, inside their own task, at no extra
   super-step.

A ``Command(goto=[a, b])`` or ``Send`` returned by a node at run time is a fan-out the builder
does not show: list its targets in ``guard(..., concurrent=[...])``. If it is missed, the
state's ``bb_breaker`` reducer rejects, fail closed, the super-step in which two tasks stepped
the breaker (LangGraph then applies none of that step's writes).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from biasbreaker.propagation import AgentGraph

START = "__start__"
END = "__end__"


@dataclass(frozen=True)
class Topology:
    """The user's graph, read from a builder.

    Args:
        nodes: The user's node names, in the builder's order (error-handler nodes excluded).
        edges: ``(u, v)`` pairs, ``v`` reads ``u``'s output, START and END excluded, no
            duplicates.
        triggers: node (or START) -> the number of tasks it may trigger in one step (2 means
            "two or more").
        successors: node (or START) -> the nodes it may trigger (END excluded).
    """

    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    triggers: Mapping[str, int]
    successors: Mapping[str, frozenset[str]]

    def agent_graph(self) -> AgentGraph:
        """The influence graph for Katz weights."""
        return AgentGraph.from_edges(self.edges, nodes=self.nodes)

    def fan_out_sources(self) -> list[str]:
        """START and the nodes that may trigger two or more tasks in one step."""
        return [src for src, count in self.triggers.items() if count >= 2]

    def concurrent(self) -> frozenset[str]:
        """The nodes that may run in the same super-step as another node's task.

        Every node reachable (one or more steps) from a fan-out source; conservative: after a
        join the nodes are counted too.
        """
        seen: set[str] = set()
        frontier = [v for src in self.fan_out_sources() for v in self.successors.get(src, ())]
        while frontier:
            node = frontier.pop()
            if node in seen:
                continue
            seen.add(node)
            frontier.extend(self.successors.get(node, ()))
        return frozenset(seen)


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        target = func
        call = getattr(func, "__call__", None)  # noqa: B004 - bound __call__ of a callable object
        if not hasattr(func, "__code__") and call is not None and hasattr(call, "__func__"):
            target = call
        return typing.get_type_hints(target)
    except Exception:
        return {}


def single_destination(func: Callable[..., Any] | None) -> bool:
    """Whether a routing function returns exactly one destination, judged by its return type.

    ``Literal[...]``, ``str`` and unions of those return one destination; anything else (a
    list, a ``Send``, no annotation) may return several.
    """
    if func is None:
        return False
    rtn = _hints(func).get("return")
    if rtn is None:
        return False
    return _single(rtn)


def _single(tp: Any) -> bool:
    if tp is str:
        return True
    origin = get_origin(tp)
    if origin is Literal:
        return True
    if origin is typing.Union or type(tp).__name__ == "UnionType":
        return all(_single(arg) for arg in get_args(tp))
    return False


def read_topology(
    nodes: Iterable[str],
    edges: Iterable[tuple[str, str]],
    waiting_edges: Iterable[tuple[Iterable[str], str]],
    branches: Mapping[str, Mapping[str, tuple[tuple[str, ...] | None, bool]]],
    ends: Mapping[str, tuple[str, ...]],
) -> Topology:
    """Build the :class:`Topology` from the builder's parts (framework-neutral arguments).

    Args:
        nodes: The user's node names.
        edges: Static edges ``(u, v)`` (``u`` may be START, ``v`` may be END).
        waiting_edges: ``(starts, end)`` join edges.
        branches: source -> branch name -> (destinations or ``None`` for "any node",
            whether the path function returns a single destination).
        ends: node -> declared ``Command`` destinations.

    Returns:
        The topology.
    """
    names = tuple(nodes)
    known = set(names)
    pairs: dict[tuple[str, str], None] = {}
    successors: dict[str, set[str]] = {src: set() for src in (START, *names)}
    triggers: dict[str, int] = {src: 0 for src in (START, *names)}

    def link(u: str, v: str) -> None:
        if v in (END, START):
            return
        successors.setdefault(u, set()).add(v)
        if u != START and u in known and v in known:
            pairs[(u, v)] = None

    for u, v in edges:
        link(u, v)
        if v != END:
            triggers[u] = triggers.get(u, 0) + 1
    for starts, end in waiting_edges:
        for u in starts:
            link(u, end)
            if end != END:
                triggers[u] = triggers.get(u, 0) + 1
    for src, by_name in branches.items():
        for destinations, single in by_name.values():
            targets = names if destinations is None else destinations
            for v in targets:
                if v != src or destinations is not None:
                    link(src, v)
            triggers[src] = triggers.get(src, 0) + (1 if single else 2)
    for src, declared in ends.items():
        for v in declared:
            link(src, v)
        if any(v != END for v in declared):
            triggers[src] = triggers.get(src, 0) + 1
    return Topology(
        nodes=names,
        edges=tuple(pairs),
        triggers=triggers,
        successors={k: frozenset(v) for k, v in successors.items()},
    )


__all__ = ["END", "START", "Topology", "read_topology", "single_destination"]
