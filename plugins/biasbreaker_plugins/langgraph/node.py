"""``@guard_node``: mark a node function as guarded, with per-node options.

::

    @guard_node
    def screener(state: State, config: RunnableConfig) -> dict: ...

    @guard_node(probe=False)          # checked by the breaker, never re-run by the probe
    async def notifier(state: State) -> dict: ...

The decorator keeps the function's name, signature, type hints and sync/async nature
(``functools.wraps`` and ``ParamSpec``), so ``builder.add_node(screener)`` registers it under
its name and LangGraph still injects ``config``/``runtime``/``writer``/``store`` and reads its
input schema and ``Command[Literal[...]]`` destinations — with or without
``from __future__ import annotations``. It is guarded by :func:`guard`, which runs the
decorated node (and, with ``nodes=None``, every other node) through the breaker; a decorated
function called in a graph that was *not* passed to ``guard()`` raises, because its output
would reach the downstream nodes unchecked.

A node that is no function of yours (a ``ToolNode``, any Runnable ``add_node`` takes as it
is) cannot be decorated; ``guard(builder, unprobed=["tools"])`` marks it as
``@guard_node(probe=False)`` would.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, ParamSpec, TypeVar, cast, overload

from langchain_core.runnables import Runnable
from langgraph.types import RetryPolicy

from biasbreaker.errors import ConfigError
from biasbreaker_plugins.langgraph.routes import Route

P = ParamSpec("P")
R = TypeVar("R")

NODE_OPTIONS_ATTR = "__biasbreaker_node__"

INJECTABLE: Final = ("config", "runtime", "writer", "store")
"""The LangGraph-injected parameters a node function may declare."""

Mode = Literal["inline", "queued"]
"""Where a guarded node's output is checked: in its own task, or by ``bb_breaker``."""


@dataclass(frozen=True)
class NodeOptions:
    """Per-node options of a guarded node.

    Args:
        probe: Re-run the node on counterfactual states to score it (default: ``k + r`` more
            calls per step, side effects included). ``False`` for a node that must not run more
            than once per step (it sends e-mail, pays, ...) or that calls ``interrupt()``: its
            output is still checked by the breaker, with no local score of its own, but what
            the node *did* has happened before the check. A side effect that must wait for the
            check belongs in an unguarded node downstream of a guarded one
            (docs/langgraph.md §8).
    """

    probe: bool = True


@dataclass(frozen=True)
class GuardedNode:
    """A guarded node, as ``guard()`` read it from the builder.

    Args:
        name: The node's name in the graph.
        fn: The user's function (sync or async), as written.
        is_async: Whether ``fn`` is a coroutine function.
        probe: Whether the node is probed (``guard_node(probe=False)`` turns it off).
        mode: ``"inline"`` (checked in its own task) or ``"queued"`` (checked by
            ``bb_breaker``, because it may run in parallel with another guarded node).
        first: Name of ``fn``'s first parameter (the state).
        inject: The LangGraph-injected parameters ``fn`` accepts (config, runtime, writer,
            store).
        state_type: The class LangGraph builds the node's input as (a pydantic model or a
            dataclass), or ``None`` for a dict.
        routes: The node's conditional edges (:mod:`.routes`), evaluated by the probe.
        retry: The node's ``RetryPolicy`` list (its own, else the builder's default), which
            the probe's re-runs follow as LangGraph follows it for the node's call
            (:mod:`.retrying`); empty for none.
    """

    name: str
    fn: Callable[..., Any]
    is_async: bool
    probe: bool
    mode: Mode
    first: str
    inject: tuple[str, ...]
    state_type: type[Any] | None = None
    routes: tuple[Route, ...] = ()
    retry: tuple[RetryPolicy, ...] = ()

    def coerce(self, values: Mapping[str, Any]) -> Any:
        """The node's input built from ``values`` as LangGraph builds it (``schema(**values)``)."""
        if self.state_type is None:
            return dict(values)
        return self.state_type(**values)


def _unbound(name: str) -> ConfigError:
    return ConfigError(
        f"node {name!r} is marked @guard_node but runs in a graph that was not guarded: "
        "compile guard(builder) instead of builder (from biasbreaker_plugins.langgraph import "
        "guard), or remove the decorator"
    )


def _runnable_marked(runnable: Runnable[Any, Any], options: NodeOptions) -> ConfigError:
    """``guard_node`` given a Runnable (a ``ToolNode``): say how to guard it instead."""
    how = (
        "guard(builder, unprobed=['<its node name>']) guards it unprobed"
        if not options.probe
        else "guard(builder, nodes=['<its node name>', ...]) guards it (or leave nodes out "
        "to guard every node)"
    )
    return ConfigError(
        f"guard_node marks node functions; {type(runnable).__name__} is a Runnable, which "
        f"add_node takes as it is and a function wrapper would hide: {how}"
    )


@overload
def guard_node(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def guard_node(*, probe: bool = True) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def guard_node(
    fn: Callable[P, R] | None = None, /, *, probe: bool = True
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark a node function (sync or async) as guarded.

    Args:
        fn: The node function, when used as ``@guard_node``.
        probe: See :class:`NodeOptions`.

    Returns:
        The marked function (or a decorator, when called with options). Calling it outside a
        guarded graph raises :class:`~biasbreaker.errors.ConfigError`.

    Raises:
        ConfigError: ``fn`` is a Runnable (a ``ToolNode``): LangGraph adds those as they are;
            mark such a node with ``guard(builder, unprobed=[name])`` instead.
    """
    options = NodeOptions(probe=probe)

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        if isinstance(func, Runnable):
            raise _runnable_marked(func, options)
        name = getattr(func, "__name__", repr(func))
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def marked_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                raise _unbound(name)

            marked = cast(Callable[P, R], marked_async)
        else:

            @functools.wraps(func)
            def marked_sync(*args: P.args, **kwargs: P.kwargs) -> R:
                raise _unbound(name)

            marked = marked_sync
        setattr(marked, NODE_OPTIONS_ATTR, options)
        return marked

    if fn is not None:
        return decorate(fn)
    return decorate


__all__ = ["INJECTABLE", "NODE_OPTIONS_ATTR", "GuardedNode", "Mode", "NodeOptions", "guard_node"]
