"""Where a guarded node's conditional edges send the run, for the probe to compare.

A conditional edge (``builder.add_conditional_edges(node, path, path_map)``) picks the next
node from the state the node's update produced. A path function that sends one group to
``deny`` and another to ``approve`` is a decision taken outside any node's output: probing
only the update would score it 0 and let the route be taken. So for a guarded, probed node,
the probe evaluates each of the node's conditional edges on the state its update produces —
for the call that ran and for every counterfactual and resample re-run — and adds the
destinations to what is compared, beside any ``Command`` destinations
(:func:`.probing.routed`, :class:`biasbreaker.probe.Routed`): a route taken for one group only
is a decision flip, as a tool call made for one group only is.

What a path function is given is what LangGraph gives it (``BranchSpec._route``, langgraph
1.2.x): the state keys of the edge's input schema (the edge's own, else the node's), read
*after* the node's writes are applied with each key's reducer, coerced to the schema's class
when that is a pydantic model or dataclass; for a dict state with no edge schema, the keys the
node returned that are not state keys are added. Here the node's input keys come from the
(counterfactual) state the node was run on, the update from that run, and any other key the
edge reads from the run's state as it was before the node (unvaried). Its result is mapped
through the edge's ``path_map``.

A path function is evaluated ``k + r + 1`` more times per probed step, with the re-runs'
silenced config: like LangGraph, this assumes it is a function of the state without side
effects. One that raises, or returns no valid destination, fails the probe: the step is held
for review (fail closed). Conditional edges out of an unguarded node are not probed, as that
node is not; those out of ``START`` leave ``bb_entry``, a guarded pass-through node
``guard()`` adds for them, and are probed (docs/langgraph.md §16).
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.types import Send

__all__ = ["Route", "UnprobedRouteWarning", "after_update", "destinations"]


class UnprobedRouteWarning(UserWarning):
    """No longer emitted: a conditional edge out of ``START`` is probed now.

    ``guard()`` warned with it about each conditional edge out of ``START``, which no guarded
    node's probe evaluated; such an edge now leaves ``bb_entry``, a guarded pass-through node
    (:data:`~biasbreaker_plugins.langgraph.names.ENTRY`), and is probed like any other. Kept
    so that code silencing it (``warnings.filterwarnings(..., category=UnprobedRouteWarning)``)
    still imports.
    """


# frozen=False is an equivalent mutant: nothing assigns to a Route's fields
@dataclass(frozen=True)  # pragma: no mutate
class Route:
    """One conditional edge out of a guarded node, as the probe evaluates it.

    Args:
        name: The edge's name in ``builder.branches[node]`` (the path function's name).
        path: The path function as LangGraph stored it (a ``Runnable``).
        ends: ``path_map`` as LangGraph stored it (path result -> node name); ``None`` or
            empty: the result is the node name, or a ``Send``.
        keys: The state keys the path function reads (its input schema's channels, without
            the guard's ``bb_`` keys), in schema order.
        state_type: The class its input is built as (a pydantic model or dataclass), or
            ``None`` for a dict.
        own_schema: Whether the edge declared its own input schema (then the node's extra
            returned keys are not added, as in LangGraph).
    """

    name: str
    path: Runnable[Any, Any]
    ends: Mapping[Hashable, str] | None
    keys: tuple[str, ...]
    state_type: type[Any] | None
    own_schema: bool


def after_update(
    channels: Mapping[str, Any], values: Mapping[str, Any], update: Mapping[str, Any]
) -> dict[str, Any]:
    """The state ``values`` with ``update`` applied by each key's reducer (nothing mutated).

    Each written key's channel is copied (``from_checkpoint``) holding a deep copy of the
    key's current value, and the write applied with ``update([value])``, as LangGraph applies
    a node's writes; a key without a channel is taken as written.

    Args:
        channels: ``StateGraph.channels`` (state key -> channel).
        values: State key -> value before the write.
        update: State key -> written value.

    Returns:
        A new dict: ``values`` with the written keys replaced by their channels' new values (a
        key a write empties is left out).

    Raises:
        Exception: Whatever a reducer raises for a write it refuses (the probe fails closed).
    """
    from langgraph._internal._typing import MISSING

    state = dict(values)
    for key, value in update.items():
        channel = channels.get(key)
        if channel is None:
            state[key] = value
            continue
        current = copy.deepcopy(values[key]) if key in values else MISSING
        fresh = channel.from_checkpoint(current)
        fresh.update([value])
        if fresh.is_available():
            state[key] = fresh.get()
        else:
            state.pop(key, None)
    return state


async def destinations(
    routes: Iterable[Route],
    state: Mapping[str, Any],
    returned: Mapping[str, Any] | None,
    config: RunnableConfig,
) -> list[str | Send]:
    """Where ``routes`` send the run from ``state``, in edge order, each edge's in its order.

    Args:
        routes: The node's conditional edges.
        state: The state after the node's writes (:func:`after_update`), with any key the
            edges read beyond the node's input.
        returned: The node's return value when it was a dict (its keys that are not state
            keys reach an edge without its own schema), else ``None``.
        config: The config the path functions run with (the re-runs' silenced one).

    Returns:
        Node names (``"__end__"`` for ``END``) and ``Send`` packets.

    Raises:
        ValueError: A path function returned a value its ``path_map`` does not map, or no
            destination; anything the path function raises.
    """
    found: list[str | Send] = []
    for route in routes:
        value: Any = {key: state[key] for key in route.keys if key in state}
        if route.state_type is not None:
            value = route.state_type(**value)
        elif returned is not None and not route.own_schema:
            value = {**returned, **value}
        result = await route.path.ainvoke(value, config)
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        if not results:
            raise ValueError(f"conditional edge {route.name!r} returned no destination")
        for item in results:
            if isinstance(item, Send):
                found.append(item)
            elif route.ends:
                if item not in route.ends:
                    raise ValueError(
                        f"conditional edge {route.name!r} returned {item!r}, which its "
                        f"path_map does not map (it maps {sorted(map(str, route.ends))})"
                    )
                found.append(route.ends[item])
            elif isinstance(item, str):
                found.append(item)
            else:
                raise ValueError(
                    f"conditional edge {route.name!r} returned {item!r}, not a node name or a Send"
                )
    return found
