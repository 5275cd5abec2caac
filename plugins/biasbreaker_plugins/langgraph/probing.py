"""Probing one guarded call: read the node's output, re-run the node on counterfactual states.

A guarded node's task runs the user's function once, then (when the step is sampled) the
probe (:class:`biasbreaker.probe.Probe`) re-runs the same function on counterfactual variants
of the application's part of its input state and on same-group resamples, concurrently, and
scores how much more the output moves under the swap than under resampling. This module
turns a LangGraph call into the probe's terms: :class:`Call` (one guarded call in progress),
:func:`split_output` (a node's return value as an update and its ``Command`` destinations)
and :class:`Prober` (the step the probe re-runs, with the LangGraph objects the call was
given).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from langgraph.config import get_config, get_store, get_stream_writer
from langgraph.runtime import get_runtime
from langgraph.types import Command, Send

from biasbreaker.errors import ConfigError
from biasbreaker.probe import Probe
from biasbreaker_plugins.langgraph._internals import interrupted, task_of, thread_of
from biasbreaker_plugins.langgraph.node import GuardedNode
from biasbreaker_plugins.langgraph.state import json_problem, user_part

_INJECTED: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar("_INJECTED")
"""The LangGraph objects injected into the guarded call being probed, for its re-runs."""


@dataclass
class Call:
    """One guarded call in progress.

    Args:
        node: The guarded node.
        state: The state the node was called with.
        update: The node's state update (its return value, split).
        goto: Its ``Command`` destinations.
        command: The ``Command`` it returned, or ``None``.
        key: The output's key in the staging buffer, ``"<node>@<super-step>[#push]"``.
        step_id: The id the probe samples and seeds with (the key).
        thread: The run's thread id.
        lg_step: The LangGraph super-step.
    """

    node: GuardedNode
    state: Mapping[str, Any]
    update: dict[str, Any]
    goto: list[Any]
    command: Command[Any] | None
    key: str
    step_id: str
    thread: str
    lg_step: int
    given_input: dict[str, Any] | None = None
    sampled: bool = False
    score: float | None = None
    probe_error: str | None = None
    json_error: str | None = None
    probe_summary: dict[str, Any] = field(default_factory=dict)
    injected: Mapping[str, Any] = field(default_factory=dict)

    @property
    def probe_input(self) -> dict[str, Any]:
        """The application's part of the input state (what the probe varies), computed once."""
        if self.given_input is None:
            self.given_input = user_part(dict(self.state))
        return self.given_input


def split_output(node: str, out: Any) -> tuple[dict[str, Any], list[Any], Command[Any] | None]:
    """A node's return value as (update dict, Command destinations, the Command or None).

    Raises:
        ConfigError: The value is not a dict, a ``Command`` or ``None``, or a ``Command`` the
            guard cannot hold (``graph=PARENT``, ``resume=``, an update that is not a dict or a
            list of ``(key, value)`` pairs, a key written twice).
    """
    if out is None:
        return {}, [], None
    if isinstance(out, dict):
        return dict(out), [], None
    if isinstance(out, Command):
        if out.graph is not None:
            raise ConfigError(
                f"guarded node {node!r} returned Command(graph={out.graph!r}); a guarded node's "
                "output must stay in its graph (guard the parent graph's node instead)"
            )
        if out.resume is not None:
            raise ConfigError(f"guarded node {node!r} returned Command(resume=...); not allowed")
        update: dict[str, Any] = {}
        raw = out.update
        if isinstance(raw, dict):
            update = dict(raw)
        elif isinstance(raw, (list, tuple)):
            for pair in raw:
                if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                    raise ConfigError(
                        f"guarded node {node!r} returned Command(update={raw!r}); give a dict"
                    )
                if pair[0] in update:
                    raise ConfigError(
                        f"guarded node {node!r} writes {pair[0]!r} twice in one Command; "
                        "return a dict update"
                    )
                update[pair[0]] = pair[1]
        elif raw is not None:
            raise ConfigError(
                f"guarded node {node!r} returned Command(update=<{type(raw).__name__}>); give "
                "a dict"
            )
        goto = out.goto
        targets: list[Any] = [goto] if isinstance(goto, (str, Send)) else list(goto) if goto else []
        return update, targets, out
    raise ConfigError(
        f"guarded node {node!r} returned {type(out).__name__}; a guarded node returns a dict "
        "update, a Command or None"
    )


class Prober:
    """Probes the guarded calls of one graph.

    Args:
        base: The configured probe (scorers, generator, k, r, seed); each call gets a fresh
            copy (:meth:`new_probe`).
        nodes: The guarded nodes by name.
        pool: The worker threads sync nodes are re-run on.
    """

    def __init__(
        self, base: Probe, nodes: Mapping[str, GuardedNode], pool: ThreadPoolExecutor
    ) -> None:
        self.base = base
        self.pool = pool
        self.steps: dict[str, Callable[..., Any]] = {
            name: self._probe_step(spec) for name, spec in nodes.items()
        }

    def new_probe(self) -> Probe:
        """A fresh probe with the configured scorers and generator (one per probed call).

        A probe's call cache is per instance; a fresh one per call keeps concurrent calls (Send
        branches of one node, threads of several runs) from sharing it.
        """
        return clone_probe(self.base)

    def attributes(self, task: Any) -> list[str]:
        """The demographic axes a step's input mentions (the panel's domain-match input)."""
        return sorted({d.axis for d in self.base.generator.detect(task)})

    def begin(
        self,
        spec: GuardedNode,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        out: Any,
        config: Mapping[str, Any] | None,
    ) -> Call:
        """The call the node's task made: its state, split output, key and sampling decision.

        Raises:
            ConfigError: The state is not a dict, or the output cannot be split
                (:func:`split_output`).
        """
        state = args[0] if args else kwargs[spec.first]
        if not isinstance(state, Mapping):
            raise ConfigError(
                f"guarded node {spec.name!r} received a {type(state).__name__} state; the "
                "biasbreaker adapter guards graphs whose state is a dict (a TypedDict schema)"
            )
        update, goto, command = split_output(spec.name, out)
        if config is None:
            config = get_config()
        lg_step, suffix = task_of(config)
        key = f"{spec.name}@{lg_step}{suffix}"
        call = Call(
            node=spec,
            state=state,
            update=update,
            goto=goto,
            command=command,
            key=key,
            step_id=key,
            thread=thread_of(config),
            lg_step=lg_step,
            injected={name: kwargs[name] for name in spec.inject if name in kwargs},
        )
        call.json_error = json_problem(update)
        call.sampled = (
            call.json_error is None
            and spec.probe
            and self.base.probe_rate > 0.0
            and self.base.should_probe(call.step_id)
        )
        return call

    async def probe(self, call: Call) -> None:
        """Score ``call`` (its ``score`` and ``probe_summary``), or record why it failed closed."""
        probe = self.new_probe()
        # the re-runs get the objects LangGraph injected into this call (the probe's tasks and
        # worker threads copy this context); looking them up again from a worker thread fails
        # on Python 3.10, where an async run cannot hand its config to a sync node's thread
        token = _INJECTED.set(call.injected)
        try:
            result = await probe.probe(
                self.steps[call.node.name],
                call.probe_input,
                call.update,
                step_id=call.step_id,
                step_name=call.node.name,
            )
        except Exception as exc:  # the probe fails closed: the output goes to human review
            call.probe_error = f"{type(exc).__name__}: {exc}"
            if interrupted(exc):
                call.probe_error += (
                    f"; node {call.node.name!r} calls interrupt(), which cannot answer the "
                    "probe's re-runs on counterfactual states: mark it "
                    "@guard_node(probe=False) (from biasbreaker_plugins.langgraph import "
                    "guard_node), or leave it out of guard(nodes=...)"
                )
            return
        finally:
            _INJECTED.reset(token)
        if result.status == "not_sampled":
            call.sampled = False
            return
        call.score = result.score
        call.probe_summary = {
            "status": result.status,
            "score": result.score,
            "k": result.k,
            "r": result.r,
            "calls": result.calls,
            "reason": result.reason,
        }

    def _probe_step(self, spec: GuardedNode) -> Callable[..., Any]:
        """The step the probe re-runs: the user's function on a variant of the state.

        It takes the application's keys of the state (the probe's payload), calls the function
        with the LangGraph objects it declares resolved for the running task, and returns the
        state update. A sync function runs in a worker thread, so the probe's calls overlap.
        """
        fn = spec.fn
        inject = spec.inject

        def injected() -> dict[str, Any]:
            given = _INJECTED.get({})
            values: dict[str, Any] = {}
            for name in inject:
                if name in given:
                    values[name] = given[name]
                elif name == "config":
                    values[name] = get_config()
                elif name == "runtime":
                    values[name] = get_runtime()
                elif name == "writer":
                    values[name] = get_stream_writer()
                else:
                    values[name] = get_store()
            return values

        async def step(payload: Any, sample: int = 0) -> dict[str, Any]:
            kwargs = injected()
            if spec.is_async:
                out = await fn(payload, **kwargs)
            else:
                # like asyncio.to_thread (context copied), on the guard's long-lived pool
                call = functools.partial(
                    contextvars.copy_context().run, functools.partial(fn, payload, **kwargs)
                )
                out = await asyncio.get_running_loop().run_in_executor(self.pool, call)
            update, _, _ = split_output(spec.name, out)
            return update

        return step


class FreshProbes:
    """Anything-with-``probe``: a fresh probe per call (for the runner's re-check)."""

    def __init__(self, base: Probe) -> None:
        self.base = base

    async def probe(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`biasbreaker.probe.Probe.probe` on a fresh copy of the base probe."""
        return await clone_probe(self.base).probe(*args, **kwargs)


def clone_probe(base: Probe) -> Probe:
    """A probe configured like ``base``, with an empty call cache."""
    return Probe(
        base.scorers,
        generator=base.generator,
        k=base.k,
        r=base.r,
        probe_rate=base.probe_rate,
        seed=base.seed,
        combine=base.combine,
        bootstrap=base.bootstrap,
        confidence=base.confidence,
        max_concurrency=base.max_concurrency,
        cache_size=base.cache_size,
    )


__all__ = ["Call", "FreshProbes", "Prober", "clone_probe", "split_output"]
