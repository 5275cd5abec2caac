"""Probing one guarded call: read it, re-run the node on counterfactual states, say what it was.

A guarded node's task runs the user's function once, then (when the step is probed) the probe
(:class:`biasbreaker.probe.Probe`) re-runs the same function on counterfactual variants of
the node's input and on same-group resamples, concurrently, and scores how much more the
output moves under the swap than under resampling. This module turns a LangGraph call into the
probe's terms:

* :class:`Call` — one guarded call in progress: the guard's state, the node's input and
  output, and their JSON *views* (:mod:`.values`), which are what the probe varies, scores
  and the breaker freezes;
* :func:`split_output` — a node's return value as an update and its ``Command`` destinations;
* :class:`Prober` — the step the probe re-runs: the user's function on a counterfactual view
  rebuilt into the node's own state type, with every stream sink silenced
  (:func:`.streaming.silenced`), so nothing a re-run produces reaches the caller; what the
  probe compares is the update and where the run goes next: the node's ``Command``
  destinations and those its conditional edges pick (:mod:`.routes`).

Every call ends with exactly one **outcome** (``Call.outcome``, recorded in the trace):
``scored``; ``not_applicable`` (the input names no protected group); ``not_sampled``
(``[probe] probe_rate``) or ``not_probed`` (``@guard_node(probe=False)``), both chosen by the
configuration; ``unsupported_language`` (the input is in a language the term lists do not
cover), held for review or let through as ``[probe] unsupported_language`` says; or, held for
review, ``unreadable`` (the probe cannot read the input or the output: the key and type are
named) or ``failed`` (the probe raised).
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import functools
import json
import operator
import os
import re
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.last_value import LastValue
from langgraph.config import get_config
from langgraph.errors import InvalidUpdateError
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send
from pydantic import BaseModel

from biasbreaker.errors import BiasbreakerError, ConfigError
from biasbreaker.probe import Probe, ProbeResult, Routed
from biasbreaker.probe.budget import RunBudgets
from biasbreaker.probe.probe import Drawn, Reruns
from biasbreaker.redaction import redact_text
from biasbreaker.types import BreakerState, LazyPayload
from biasbreaker_plugins.langgraph._internals import (
    interrupted,
    model_update,
    own_scratchpad,
    read_channels,
    task_of,
    thread_of,
    trace_key,
)
from biasbreaker_plugins.langgraph.configurable import (
    CONFIGURABLE_KEY,
    METADATA_KEY,
    configurable_view,
    kept_config,
    metadata_view,
    with_configurable,
    with_metadata,
)
from biasbreaker_plugins.langgraph.context import CONTEXT_KEY, context_of, with_context
from biasbreaker_plugins.langgraph.node import GuardedNode
from biasbreaker_plugins.langgraph.retrying import DISCARDED, retried
from biasbreaker_plugins.langgraph.routes import after_update, destinations
from biasbreaker_plugins.langgraph.shared import Shared
from biasbreaker_plugins.langgraph.state import shown
from biasbreaker_plugins.langgraph.streaming import Capture, silenced, streamed_view, unobserved
from biasbreaker_plugins.langgraph.streaming import injected as rebound
from biasbreaker_plugins.langgraph.values import (
    Unreadable,
    read,
    read_values,
    readable,
    rebuild,
    rebuild_values,
    state_values,
)


@dataclass(frozen=True)
class Rerun:
    """What a re-run of a guarded node needs besides the counterfactual view.

    Args:
        template: The node's input values as it received them (key -> value), onto which a
            counterfactual view is rebuilt; ``None`` when the view is the values themselves
            (plain JSON).
        config: The task's config (the re-run gets a silenced copy).
        injected: The LangGraph objects the call was given (``store`` is passed on).
        extras: The state keys the node's conditional edges read beyond its input, as they
            were before the node ran (key -> value; :mod:`.routes`).
        update: The node's update a repair's re-check rebuilds repaired views onto (to
            evaluate the node's conditional edges on them), or ``None``.
        goto: The destinations of the node's ``Command`` that a repair's re-check is about:
            the halted step's, which are promoted with the repaired update (node names and
            ``Send`` packets; empty for none).
        streamed: What the probe's re-runs record of what they stream and compare
            (:attr:`.streaming.Capture.compared`: ``"custom"``, ``"messages"``); empty for
            nothing.
    """

    template: Mapping[str, Any] | None
    config: RunnableConfig | None
    injected: Mapping[str, Any] = field(default_factory=dict)
    extras: Mapping[str, Any] = field(default_factory=dict)
    update: Mapping[str, Any] | None = None
    goto: Sequence[Any] = ()
    streamed: frozenset[str] = frozenset()


_RERUN: contextvars.ContextVar[Rerun] = contextvars.ContextVar("_RERUN")
"""The re-run context of the guarded call being probed (copied into the probe's tasks)."""


def rerun_context(rerun: Rerun) -> contextvars.Token[Rerun]:
    """Set the re-run context (the probe, or a repair's re-check, is about to re-run a node)."""
    return _RERUN.set(rerun)


def reset_rerun(token: contextvars.Token[Rerun]) -> None:
    """Undo :func:`rerun_context`."""
    _RERUN.reset(token)


def in_rerun() -> bool:
    """Whether the code running is a re-run of a guarded node (probe, resample or re-check)."""
    return _RERUN.get(None) is not None


@dataclass(slots=True)
class Call:
    """One guarded call in progress.

    Args:
        node: The guarded node.
        bb: The guard's state when the node ran: its keys a step reads
            (:data:`~biasbreaker_plugins.langgraph.state.STEP_KEYS`).
        values: The node's input, key -> value, as it received it.
        update: The node's state update (its return value, split).
        goto: Its ``Command`` destinations.
        command: The ``Command`` it returned, or ``None``.
        key: The output's key in the staging buffer, ``"<node>@<super-step>[#push]"``.
        step_id: The id the probe samples and seeds with (the key).
        thread: The run's trace key: its thread id, plus a subgraph's namespace.
        lg_step: The LangGraph super-step.
        view: The output's JSON view (what is scored and frozen); for an output the probe
            cannot read, its :func:`~biasbreaker_plugins.langgraph.state.shown` rendering.
            Built on first read when :meth:`Prober.begin` found the output readable at a
            glance (:func:`~biasbreaker_plugins.langgraph.values.readable`) and did not probe
            it (:meth:`payload`).
        not_json: Why the output cannot be read, or ``None``.
        outcome: ``{"status", "reason"}``: what the probe made of the call (module docstring).
        hold: Why the output cannot be checked (it goes to review), or ``None``.
        coverage: The node's covering-rotation state after its probe (written to
            ``bb_probe_coverage``), or ``None`` when the probe did not draw variants.
        returned_dict: Whether the node returned a plain ``dict`` (its keys that are not
            state keys then reach a conditional edge without its own schema).
        streamed: What the call streamed that the probe compares, as JSON
            (:func:`.streaming.streamed_view`; ``{}`` for nothing), and ``compared``, its
            kinds, which the re-runs record.
    """

    node: GuardedNode
    bb: Mapping[str, Any]
    values: dict[str, Any]
    update: dict[str, Any]
    goto: list[Any]
    command: Command[Any] | None
    key: str
    step_id: str
    thread: str
    lg_step: int
    built_view: Any = None
    lazy_view: LazyPayload | None = None
    not_json: str | None = None
    outcome: dict[str, str] = field(default_factory=dict)
    hold: str | None = None
    sampled: bool = False
    score: float | None = None
    probe_summary: dict[str, Any] = field(default_factory=dict)
    coverage: dict[str, int] | None = None
    config: RunnableConfig | None = None
    injected: Mapping[str, Any] = field(default_factory=dict)
    input_view: dict[str, Any] | None = None
    state: Any = None
    returned_dict: bool = False
    streamed: dict[str, Any] = field(default_factory=dict)
    compared: frozenset[str] = frozenset()

    @property
    def view(self) -> Any:
        """The output's JSON view (see the class docstring), built now if it was left lazy."""
        if self.lazy_view is not None:
            self.built_view = self.lazy_view.value
            self.lazy_view = None
        return self.built_view

    @view.setter
    def view(self, value: Any) -> None:
        self.built_view = value
        self.lazy_view = None

    def payload(self) -> Any:
        """The output's view as the control machine's step takes it: lazy if not built yet."""
        return self.built_view if self.lazy_view is None else self.lazy_view

    def staged_input(self, opaque: frozenset[str]) -> tuple[Any, Any]:
        """(input view, rebuild template) for the staging buffer; ``(None, None)`` if unreadable.

        The template is the node's input values when the view is not those values themselves
        (so a repair's re-check can rebuild counterfactual states), else ``None``.
        """
        view = self.input_view
        values = self.values
        if view is None:
            try:
                values = state_values(self.state)
                view = read_values(values, "state", opaque)
            except Unreadable:
                return None, None
        return view, None if _is_plain(view, values) else values


@dataclass(frozen=True)
class Before:
    """A probed node's input before its own call (:meth:`Prober.snapshot`).

    Args:
        values: The input's values, key -> value, each a deep copy (an ``opaque`` key's value
            as it is): nothing the node does to its own input during its call reaches them.
        view: The input view the probe varies (a deep copy).
        channels: Key -> canonical JSON of the graph's channel value, to find changes in place.
        config: The task's config with its user sections copied
            (:func:`~.configurable.kept_config`): the re-runs' config, whatever the node
            does to its own.
    """

    values: dict[str, Any]
    view: Any
    channels: dict[str, str]
    config: RunnableConfig | None = None


class NodeReturnError(BiasbreakerError, InvalidUpdateError, TypeError):
    """A guarded node returned something that is no state update (a ``str``, a list, …).

    (A list holding a ``Command``, as ``ToolNode`` returns, is one: :func:`split_output`.)

    A fault of the node's code, not of the configuration: LangGraph raises its own
    ``InvalidUpdateError`` ("Expected dict, got …") for the same return value of an unguarded
    node, and this is one too, so code that catches LangGraph's error catches it; it is also a
    ``TypeError``, so LangGraph's default ``RetryPolicy`` does not re-run the node for it.
    Raised in the node's task before anything is staged, probed or written: the run stops
    there (fail closed), no later node runs, and a checkpointed thread stays at that node.
    """


def _bad_return(node: str, what: str, value: Any) -> NodeReturnError:
    shown_value = redact_text(repr(value))
    if len(shown_value) > 60:
        shown_value = shown_value[:57] + "..."
    return NodeReturnError(
        f"guarded node {node!r} returned {what} {shown_value}, not a state update. Return a "
        "dict of the state keys it writes (e.g. {'answer': value}), its state object, a "
        "Command or None."
    )


def split_output(
    node: str, out: Any, channels: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], list[Any], Command[Any] | None]:
    """A node's return value as (update dict, Command destinations, the Command or None).

    A ``Command`` is taken apart first (LangGraph's ``Command`` is a dataclass); any other
    pydantic model or dataclass instance (a node of a model-state graph may return its state
    object) is read as LangGraph writes it. A list holding a ``Command`` (what ``ToolNode``
    returns when a tool returns one) is merged into one ``Command`` (:func:`_merged`).

    Args:
        node: The node's name (for messages).
        out: What the node returned.
        channels: The graph's channels (state key -> channel), to merge a key a list of
            ``Command`` objects writes more than once; ``None`` refuses any such key.

    Raises:
        NodeReturnError: The value is not a dict, a state object, a ``Command``, a list
            holding a ``Command`` or ``None`` (a ``str``, say), or a ``Command`` whose update is
            not a dict, a state object or a list of ``(key, value)`` pairs, or writes a key
            twice; or a list of them writes a key without a reducer twice, which LangGraph
            refuses too.
        ConfigError: A ``Command`` the guard cannot hold (``graph=PARENT``, ``resume=``), or
            a list of them writing a key twice that the guard cannot merge faithfully.
    """
    if out is None:
        return {}, [], None
    if isinstance(out, dict):
        return dict(out), [], None
    if isinstance(out, (list, tuple)) and any(isinstance(item, Command) for item in out):
        return _merged(node, out, channels or {})
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
        elif isinstance(raw, BaseModel) or (
            dataclasses.is_dataclass(raw) and not isinstance(raw, type)
        ):
            update = model_update(raw)
        elif isinstance(raw, (list, tuple)):
            for pair in raw:
                if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                    raise _bad_return(node, "Command(update=...) holding", pair)
                if pair[0] in update:
                    raise NodeReturnError(
                        f"guarded node {node!r} writes {pair[0]!r} twice in one Command; "
                        "return a dict update"
                    )
                update[pair[0]] = pair[1]
        elif raw is not None:
            raise _bad_return(node, f"Command(update=<{type(raw).__name__}>)", raw)
        goto = out.goto
        targets: list[Any] = [goto] if isinstance(goto, (str, Send)) else list(goto) if goto else []
        return update, targets, out
    # after Command, which is itself a dataclass: read as a state object, its update and goto
    # would be lost
    if isinstance(out, BaseModel) or (dataclasses.is_dataclass(out) and not isinstance(out, type)):
        return model_update(out), [], None
    raise _bad_return(node, f"a {type(out).__name__}", out)


def _merged(
    node: str, items: Sequence[Any], channels: Mapping[str, Any]
) -> tuple[dict[str, Any], list[Any], Command[Any]]:
    """A list of ``Command`` objects (and updates) as one ``Command``, as LangGraph applies it.

    LangGraph writes every item's update in order (``StateGraph``'s ``_get_updates``) and
    follows every ``Command``'s ``goto`` (``_control_branch``). Here the updates are merged
    in order into one dict and the destinations concatenated. A key written by one item is
    taken as it is; a key written by several is applied by LangGraph through its reducer once
    per write, which one merged write equals only for ``add_messages`` (lists of messages,
    concatenated in order: ids added or replaced as they would be one write after the other)
    and ``operator.add`` over lists or strings (concatenated).

    Raises:
        NodeReturnError: An item is not a ``Command``, a dict, a state object or ``None``, or
            a key without a reducer is written twice (LangGraph's ``InvalidUpdateError``).
        ConfigError: A key written twice whose writes cannot be merged into one faithfully
            (another reducer, an ``Overwrite``, a value that is no list), or a ``Command``
            the guard cannot hold (:func:`split_output`).
    """
    writes: dict[str, list[Any]] = {}
    targets: list[Any] = []
    for item in items:
        state_object = dataclasses.is_dataclass(item) and not isinstance(item, type)
        if not (item is None or state_object or isinstance(item, (dict, Command, BaseModel))):
            raise _bad_return(node, "a list holding", item)
        update, goto, _ = split_output(node, item)
        for key, value in update.items():
            writes.setdefault(key, []).append(value)
        targets += goto
    merged = {
        key: values[0] if len(values) == 1 else _joined(node, key, values, channels.get(key))
        for key, values in writes.items()
    }
    return merged, targets, Command(update=merged, goto=targets)


def _joined(node: str, key: str, values: list[Any], channel: Any) -> Any:
    """The one write equal to LangGraph applying ``values`` to ``key`` in turn (:func:`_merged`)."""
    times = f"{'key' if channel is None else 'state key'} {key!r} {len(values)} times"
    if isinstance(channel, LastValue):
        raise NodeReturnError(
            f"guarded node {node!r} returned a list of Commands writing {times}; LangGraph "
            "takes one value per step for a key without a reducer (its InvalidUpdateError "
            "'Can receive only one value per step'): write the key once, or declare it with a "
            "reducer (Annotated[list, operator.add])"
        )
    reducer = channel.operator if isinstance(channel, BinaryOperatorAggregate) else None
    if reducer is add_messages and all(isinstance(v, (list, tuple, BaseMessage)) for v in values):
        return [m for v in values for m in (v if isinstance(v, (list, tuple)) else [v])]
    if reducer is operator.add:
        if all(isinstance(v, list) for v in values):
            return [x for v in values for x in v]
        if all(isinstance(v, str) for v in values):
            return "".join(values)
    what = (
        "it is not a state key"
        if channel is None
        else f"LangGraph applies each write in turn through its reducer "
        f"{getattr(reducer, '__name__', type(channel).__name__)}"
    )
    raise ConfigError(
        f"guarded node {node!r} returned a list of Commands writing {times}, and {what}; the "
        "guard holds one update per key and can merge several writes faithfully only for "
        "add_messages and operator.add over lists or strings (concatenated in order), not "
        f"these ({', '.join(type(v).__name__ for v in values)}); have one Command write "
        f"{key!r}, or leave the node out of guard(nodes=[...])"
    )


def routed(
    node: str,
    view: Any,
    goto: list[Any],
    opaque: frozenset[str],
    streamed: Mapping[str, Any] | None = None,
) -> Any:
    """The output the probe compares: the update's view, its destinations, what it streamed.

    A :class:`~biasbreaker.probe.Routed` of ``view`` and the destinations (a node name as
    itself, a ``Send`` as ``{"send": node, "arg": <the arg's view>}``) when the node returned
    a ``Command`` with ``goto`` or has conditional edges, else ``view`` unchanged. The probe
    compares the destinations as a decision of their own (part ``route`` of the score), so
    ``goto="approve"`` for one group and ``"deny"`` for another is a flip, as a tool call
    made for one group only is, and a route that is the same for every group dilutes nothing.

    What the node streamed to the caller (``streamed``, :func:`.streaming.streamed_view`),
    when it streamed anything, is the ``Routed``'s ``streamed``: every scorer compares it
    beside the update, so a decision shown only in the stream is a change of the output.

    Raises:
        Unreadable: A ``Send`` argument the probe cannot read (the step is held).
    """
    if not goto:
        return Routed(view, None, dict(streamed)) if streamed else view
    targets = [
        t
        if isinstance(t, str)
        else {
            "send": t.node,
            "arg": read_values(t.arg, "send", opaque, role="output")
            if isinstance(t.arg, Mapping)
            else read(t.arg, "send", role="output"),
        }
        for t in goto
    ]
    return Routed(view, targets, dict(streamed) if streamed else None)


def _is_plain(view: Any, values: Any) -> bool:
    """Whether a view is the values themselves (plain JSON, no rebuilding needed)."""
    return view is values or view == values


@dataclass
class Speculation:
    """A probed call's re-runs, started beside the node's own call (:meth:`Prober.speculate`).

    Args:
        probe: The call's probe (:meth:`Prober.new_probe`).
        drawn: What :meth:`Probe.draw` gave: the calls started, a result that needs no
            re-run, or the exception it raised (raised again where :meth:`Probe.probe` would
            raise it, so the outcome is the sequential one).
        reruns: The re-runs in flight, or ``None``.
        view: The input view drawn from, for a caller that checks it is still the one it
            probes (the LangChain middleware).
    """

    probe: Probe
    drawn: Drawn | ProbeResult | Exception
    reruns: Reruns | None = None
    view: Any = None
    stopped: threading.Event = field(default_factory=threading.Event)

    def discard(self) -> None:
        """Cancel the re-runs still running; their results are never read (idempotent).

        A sync re-run already in a worker thread finishes its current call there, but is not
        retried (:data:`.retrying.DISCARDED`, which :meth:`Prober.speculate` sets to
        :attr:`stopped` in the re-runs' context).
        """
        self.stopped.set()
        future = self.reruns.future if self.reruns is not None else None
        if future is not None and not future.done():
            future.cancel()

    @classmethod
    def launch(
        cls,
        probe: Probe,
        step: Any,
        view: Any,
        # `*` -> `/` is an equivalent mutant: both callers pass these by keyword
        *,  # pragma: no mutate
        step_id: str,
        step_name: str,
        coverage: Mapping[str, int],
        # the annotations' `|` replaced: equivalent mutants (never evaluated: `from
        # __future__ import annotations`)
        origin: str | None,  # pragma: no mutate
        loop: asyncio.AbstractEventLoop | None,  # pragma: no mutate
        full: str = "",
    ) -> Speculation:
        """Draw the re-runs of ``view`` (:meth:`Probe.draw`) and start them on ``loop``.

        What the draw or the start raises (a probe failure, a budget exceeded) is kept and
        raised by :meth:`result`, where probing after the call raises it; a draw that needs no
        re-run is kept as its result. The re-runs run with :data:`.retrying.DISCARDED` set to
        :attr:`stopped`, so they stop retrying once discarded.

        Args:
            probe: The call's probe (its budget set).
            step: The step the re-runs call (:meth:`Prober._probe_step`, the middleware's).
            view: The input view the variants are drawn from.
            step_id: The call's step id.
            step_name: The node's name.
            coverage: The rotation the draw starts from.
            origin: Where that rotation starts (:func:`origin_of`).
            loop: The loop the re-runs run on (:data:`HELPER_LOOP` for a sync caller), or
                ``None`` for the running one.
            full: With adaptive probing, why the full probe must run (:meth:`Probe.draw`);
                only the first stage is started otherwise, the rest by :meth:`result`.
        """
        try:
            drawn = probe.draw(
                step,
                view,
                step_id=step_id,
                step_name=step_name,
                coverage=coverage,
                origin=origin,
                full=full,
            )
        except Exception as exc:  # raised by the probe after the call too: kept for result()
            return cls(probe, exc, view=view)
        if isinstance(drawn, ProbeResult):
            return cls(probe, drawn, view=view)
        stopped = threading.Event()
        discarded = DISCARDED.set(stopped)
        try:  # the re-runs' tasks copy this context
            reruns = probe.start(drawn, loop)
        except Exception as exc:  # over budget: held where probing after the call holds it
            return cls(probe, exc, view=view)
        finally:
            DISCARDED.reset(discarded)
        return cls(probe, drawn, reruns, view=view, stopped=stopped)

    async def result(self, output: Any) -> ProbeResult:
        """The probe's result on the node's output, once the re-runs are in.

        Raises:
            ProbeError: As :meth:`Probe.probe` (also what :meth:`Probe.draw` raised).
        """
        drawn = self.drawn
        if isinstance(drawn, Exception):
            raise drawn
        if isinstance(drawn, ProbeResult):
            return drawn
        assert self.reruns is not None  # started with every drawn set of calls
        return await self.probe.finish(drawn, self.reruns, output)


class _HelperLoop:
    """An event loop on a daemon thread of its own, started on first use.

    A sync node's task has no running loop while the node runs: its re-runs are started on
    this one (they run in the guard's worker threads; the loop only dispatches and waits),
    and scored on the task's own loop afterwards. One per process (a forked child starts its
    own).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        """The running helper loop."""
        loop = self._loop
        if loop is not None and self._pid == os.getpid():
            return loop
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="biasbreaker-speculation", daemon=True
                ).start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop


HELPER_LOOP = _HelperLoop()
"""Where a sync node's speculative re-runs are started (:meth:`Prober.speculate`)."""


def origin_of(config: Mapping[str, Any] | None, node: str) -> str | None:
    """Where the covering rotation of ``node`` starts in this run: ``"<thread id>/<node>"``.

    A thread's first probe of a node reads each axis from an offset drawn from the seed and
    this origin (:meth:`~biasbreaker.probe.Probe.probe`, ``origin``), so threads start at
    different places that depend on nothing but the seed, the thread id and the node: the
    same in any process, whatever other threads run at the same time (docs/detection.md,
    "Every group covered"). ``None`` for a run without a thread id (no checkpointer): its
    rotation continues where the previous such run left the node.
    """
    conf = (config or {}).get("configurable") or {}
    thread = conf.get("thread_id")
    if thread is None:
        return None
    return f"{thread}/{node}"


class Prober(Shared):
    """Probes the guarded calls of one graph.

    Args:
        base: The configured probe (scorers, generator, k, r, seed); each call gets a fresh
            copy (:meth:`new_probe`).
        nodes: The guarded nodes by name.
        pool: The worker threads sync nodes are re-run on.
        opaque: State keys passed to re-runs unchanged, never varied or compared.
        channels: The graph's channels (state key -> channel), with which a node's update is
            applied before its conditional edges are evaluated (:func:`.routes.after_update`).
        speculative: Start a probed call's re-runs beside the node's own call
            (:meth:`speculate`; ``[probe] speculative``), rather than after it.
    """

    def __init__(
        self,
        base: Probe,
        nodes: Mapping[str, GuardedNode],
        pool: ThreadPoolExecutor,
        opaque: frozenset[str] = frozenset(),
        channels: Mapping[str, Any] | None = None,
        speculative: bool = True,
    ) -> None:
        self.base = base
        self.speculative = speculative
        self.pool = pool
        self.opaque = opaque
        self.channels: Mapping[str, Any] = channels or {}
        # the probe's steps compare the update and where a Command or a conditional edge
        # routes (a route taken for one group only is a decision flip); the re-check's steps
        # return the update with the Command's destinations apart (a Routed), since a repair
        # rewrites the update and never the destinations
        self.steps: dict[str, Callable[..., Any]] = {
            name: self._probe_step(spec, routes="command") for name, spec in nodes.items()
        }
        self.routed_steps: dict[str, Callable[..., Any]] = {
            name: self._probe_step(spec, routes="all") for name, spec in nodes.items()
        }
        # ... and adds where the Command and the node's conditional edges send the repaired
        # state (ProbeRechecker.compared), or a route that depends on the group would pass
        # the re-check of a rewritten neutral update, and the halted step's goto would run
        self.compared: dict[str, Callable[[Any, Any], Awaitable[Any]]] = {
            name: self._repaired_routes(spec) for name, spec in nodes.items()
        }
        # node → the probe's covering rotation (docs/detection.md, "Every group covered"),
        # the latest the guard saw in a run without a thread id: where the next such run
        # starts, so one-shot runs without a checkpointer rotate too (a run with a thread id
        # starts from its own bb_probe_coverage entry and origin, never from this)
        self.coverage: dict[str, dict[str, int]] = {}
        self.not_sampled = f"not sampled at [probe] probe_rate = {base.probe_rate:g}"
        """The outcome's reason for a call ``[probe] probe_rate`` does not sample."""
        # thread id -> the run's probe budget ([probe] max_calls_per_*, max_tokens_per_run),
        # subgraphs included; in memory only (biasbreaker.probe.budget)
        self.budgets = RunBudgets(base.budget)

    def new_probe(self) -> Probe:
        """A fresh probe with the configured scorers and generator (one per probed call).

        A probe's call cache is per instance; a fresh one per call keeps concurrent calls (Send
        branches of one node, threads of several runs) from sharing it.
        """
        return clone_probe(self.base)

    def attributes(self, task: Any) -> list[str]:
        """The demographic axes a step's input mentions (the panel's domain-match input)."""
        return sorted({d.axis for d in self.base.generator.detect(task)})

    def snapshot(
        self, spec: GuardedNode, state: Any, config: RunnableConfig | None
    ) -> Before | None:
        """The node's input as it is before its own call, if the step will be probed.

        Two things a node can do to its input during its call, after it has decided on it:

        * change the graph's own value in place (``state["messages"].append(...)`` on a
          TypedDict or dataclass state, then ``return {}``): a change the guard cannot hold,
          made before the breaker decides. :meth:`begin` reads the channels again after the
          call and holds the step when they differ;
        * change its own copy (``state["q"] = "[redacted]"``, ``state.pop("q")``, a pydantic
          field, ``config["metadata"]["x"] = ...``): harmless to the graph, but the probe must
          vary what the node *decided on*, so the input view is read here, before the call.

        Returns:
            ``None`` for a step the probe will not run (``probe=False``, not sampled), outside
            a LangGraph task, or whose input the probe cannot read (:meth:`begin` reads it
            again and holds the step, naming the value).
        """
        if not spec.probe or self.base.probe_rate <= 0.0 or config is None:
            return None
        lg_step, suffix = task_of(config)
        if not self.base.should_probe(f"{spec.name}@{lg_step}{suffix}"):
            return None
        try:
            values, view = self._read_input(state, config)
            channels = _canonical(
                read_values(read_channels(config, sorted(values)), "state", self.opaque)
            )
        except Unreadable:
            return None
        kept = {
            key: value if key in self.opaque else _copied(value) for key, value in values.items()
        }
        return Before(
            values=kept,
            view=copy.deepcopy(view),
            channels=channels,
            config=kept_config(config, self.opaque),
        )

    def _read_input(self, state: Any, config: RunnableConfig) -> tuple[dict[str, Any], Any]:
        """(the node's input values, the input view the probe varies) of a probed call.

        The view holds the state's view, and the run's ``runtime.context``, configurable and
        metadata user keys under their ``bb_`` keys (each varied with the state).

        Raises:
            Unreadable: A value the probe cannot read (the path names it).
        """
        values = state_values(state)
        view = read_values(values, "state", self.opaque)
        context = context_of(config)
        if context is not None:  # varied with the state (.context)
            view = {**view, CONTEXT_KEY: read(context, "runtime.context")}
        configurable = configurable_view(config, self.opaque)
        if configurable is not None:  # varied with the state (.configurable)
            view = {**view, CONFIGURABLE_KEY: configurable}
        metadata = metadata_view(config, self.opaque)
        if metadata is not None:  # likewise
            view = {**view, METADATA_KEY: metadata}
        return values, view

    def begin(
        self,
        spec: GuardedNode,
        state: Any,
        bb: Mapping[str, Any],
        out: Any,
        config: RunnableConfig | None,
        injected: Mapping[str, Any],
        before: Before | None = None,
        capture: Capture | None = None,
    ) -> Call:
        """The call the node's task made: read its input and output, decide whether to probe.

        Args:
            spec: The guarded node.
            state: Its input.
            bb: The guard's state keys it read.
            out: What the node returned.
            config: Its task's config.
            injected: The LangGraph objects the call was given.
            before: :meth:`snapshot` before the call: its input view is the one probed, and
                a step whose input channels changed during the call is held (status
                ``unreadable``, the keys named) instead of probed.
            capture: What the call streamed (:mod:`.streaming`), or ``None``: a probed call
                is compared on it too (:func:`.streaming.streamed_view`), and held (status
                ``unreadable``) when the probe cannot read a custom event it wrote.

        Raises:
            NodeReturnError, ConfigError: The output cannot be split (:func:`split_output`).
        """
        goto: list[Any]
        command: Command[Any] | None
        if type(out) is dict:  # split_output's first case, without the call
            update, goto, command = dict(out), [], None
        else:
            update, goto, command = split_output(spec.name, out, self.channels)
        if config is None:
            config = get_config()
        lg_step, suffix = task_of(config)
        key = f"{spec.name}@{lg_step}{suffix}"
        # Call.__init__ on a new instance: calling the class with these keywords makes
        # type.__call__ gather them into a dict and unpack it again for __init__
        call = object.__new__(Call)
        Call.__init__(
            call,
            node=spec,
            bb=bb,
            state=state,
            values={},
            update=update,
            goto=goto,
            command=command,
            key=key,
            step_id=key,
            thread=trace_key(config),
            lg_step=lg_step,
            config=config,
            injected=injected,
            returned_dict=isinstance(out, dict),
        )
        try:
            if readable(update, self.opaque):
                # certainly readable: the view is built if a step freezes it or the probe runs
                call.lazy_view = LazyPayload(functools.partial(_output_view, update, self.opaque))
            else:
                call.view = read_values(update, "output", self.opaque, role="output")
        except Unreadable as exc:
            call.not_json = redact_text(str(exc))
            call.view = shown(update)
            call.hold = (
                f"the probe cannot read the output: {call.not_json}; a guarded node returns "
                "values the probe reads (docs/langgraph.md, 'What the probe reads')"
            )
            call.outcome = {"status": "unreadable", "reason": call.hold}
            return call
        if not spec.probe:
            call.outcome = {
                "status": "not_probed",
                "reason": "@guard_node(probe=False) or guard(unprobed=[...])",
            }
            return call
        if self.base.probe_rate <= 0.0 or not self.base.should_probe(call.step_id):
            call.outcome = {"status": "not_sampled", "reason": self.not_sampled}
            return call
        try:
            if before is not None:  # what the node decided on, read before its call
                call.values, call.input_view = before.values, before.view
                call.config = before.config or config
            else:
                call.values, call.input_view = self._read_input(state, config)
            changed = self._changed_in_place(before, config)
            if changed and spec.mode == "queued":  # a node beside it may have changed them
                call.hold = (
                    f"the probe cannot read the input node {spec.name!r} decided on: the "
                    f"graph's values of {changed} changed in place during its call, by the "
                    "node or by a node that may run beside it in the same super-step and "
                    "shares the value (the guard cannot tell which), and a change in place is "
                    "no node's return value, which is what the guard holds; return changes as "
                    "updates instead of changing a node's input, in every node sharing it"
                )
                call.outcome = {"status": "unreadable", "reason": call.hold}
                return call
            if changed:
                call.hold = (
                    f"the probe cannot read the input node {spec.name!r} decided on: the node "
                    f"changed the graph's values of {changed} in place, which the guard cannot "
                    "hold (it holds what a node returns); return the change as an update "
                    "instead of changing the input"
                )
                call.outcome = {"status": "unreadable", "reason": call.hold}
                return call
        except Unreadable as exc:
            call.hold = f"the probe cannot read the input: {redact_text(str(exc))}; " + _input_fix(
                exc.path
            )
            call.outcome = {"status": "unreadable", "reason": call.hold}
            return call
        if capture is not None and capture.compared:
            try:
                call.streamed = streamed_view(capture, update)
            except Unreadable as exc:
                call.hold = (
                    f"the probe cannot read what node {spec.name!r} streamed: "
                    f"{redact_text(str(exc))}; write custom stream events the probe reads "
                    "(docs/langgraph.md, 'What the probe reads')"
                )
                call.outcome = {"status": "unreadable", "reason": call.hold}
                return call
            call.compared = capture.compared
        call.sampled = True
        if call.lazy_view is not None:  # built before the re-runs, which call the node again
            call.view = call.lazy_view.value
        return call

    def speculate(
        self,
        spec: GuardedNode,
        bb: Mapping[str, Any],
        config: RunnableConfig,
        injected: Mapping[str, Any],
        # the annotations' `|` replaced: equivalent mutants (never evaluated: `from __future__
        # import annotations`)
        before: Before | None,  # pragma: no mutate
        capture: Capture | None,  # pragma: no mutate
        # `*` -> `/` is an equivalent mutant: both callers pass `threaded` by keyword
        *,  # pragma: no mutate
        threaded: bool,
    ) -> Speculation | None:  # pragma: no mutate (an annotation, as above)
        """Start a probed call's re-runs before the node's own call (speculative probing).

        The variants need only the node's input, which :meth:`snapshot` read: they are drawn
        here, from the rotation the thread has saved, and every re-run starts at once, on the
        running loop (an async node) or on the helper loop (``threaded``: a sync node, whose
        re-runs run in the guard's worker threads as they do after the call). The node's
        output is staged as without speculation: :meth:`probe` scores it once the re-runs are
        in, with the result, the outcome and the trace of probing after the call. The caller
        discards the speculation (:meth:`Speculation.discard`) when the node raises or the
        call is not probed after all (an unreadable output, an input changed in place): the
        re-runs' results are never read.

        The re-runs share a scratchpad of their own (:func:`._internals.own_scratchpad`), so
        the node's own ``interrupt()`` and the graphs it invokes count as if they ran first.

        Returns:
            ``None`` for a call not probed (no snapshot), with ``[probe] speculative = false``,
            or when the inputs of the re-runs cannot be read before the call: the call is
            then probed after the node's own call, as without speculation.
        """
        if before is None or not self.speculative:
            return None
        given = before.config or config
        try:
            lg_step, suffix = task_of(config)
            extras = self._edge_extras(spec, before.values, given)
            rerun_config = own_scratchpad(given)
        except Exception:  # probe() reads them again after the call and says what failed
            return None
        probe = self.new_probe()
        probe.budget = self.budgets.get(thread_of(config))
        template = None if _is_plain(before.view, before.values) else before.values
        compared = capture.compared if capture is not None else frozenset()
        token = rerun_context(Rerun(template, rerun_config, injected, extras, streamed=compared))
        try:  # the re-runs' tasks copy this context
            return Speculation.launch(
                probe,
                self.routed_steps[spec.name],
                before.view,
                step_id=f"{spec.name}@{lg_step}{suffix}",
                step_name=spec.name,
                coverage=self._rotation(bb, spec.name, config),
                origin=origin_of(config, spec.name),
                loop=HELPER_LOOP.get() if threaded else None,
                full=full_probe_reason(_machine(bb)),
            )
        finally:
            reset_rerun(token)

    def _changed_in_place(self, before: Before | None, config: RunnableConfig) -> list[str]:
        """The input keys whose channel value differs from :meth:`snapshot`'s (sorted)."""
        if before is None:
            return []
        keys = sorted(before.channels)
        try:
            after = _canonical(read_values(read_channels(config, keys), "state", self.opaque))
        except Unreadable:
            return keys  # readable before the call, not after: changed
        return [key for key in keys if before.channels.get(key) != after.get(key)]

    async def probe(self, call: Call, speculation: Speculation | None = None) -> None:
        """Score ``call`` (``score``, ``outcome``), or hold it with why the probe failed.

        Args:
            call: The call (:meth:`begin` sampled it).
            speculation: Its re-runs, started beside the node's own call (:meth:`speculate`),
                or ``None`` to start them now. The outcome is the same either way; the caller
                discards the speculation when it is done (:meth:`Speculation.discard`).
        """
        if speculation is not None:
            probe = speculation.probe
        else:
            probe = self.new_probe()
            probe.budget = self.budgets.get(thread_of(call.config))
        assert call.input_view is not None  # begin() read it for every sampled call
        template = None if _is_plain(call.input_view, call.values) else call.values
        # the re-runs get this call's config and injected objects (the probe's tasks and
        # worker threads copy this context); looking them up again from a worker thread fails
        # on Python 3.10, where an async run cannot hand its config to a sync node's thread
        token: contextvars.Token[Rerun] | None = None
        try:
            extras = self._edge_extras(call.node, call.values, call.config)
            unvaried = {k: v for k, v in extras.items() if k not in call.update}
            named = [k for k, v in sorted(unvaried.items()) if self._names_a_group(k, v)]
            if named:
                call.sampled = False
                call.hold = (
                    f"the conditional edges of node {call.node.name!r} read state keys "
                    f"{named} that the node does not take as input, and they name a "
                    "protected group: the probe varies the node's input only, so it cannot "
                    "vary what the edges read; add those keys to the node's input schema"
                )
                call.outcome = {"status": "unreadable", "reason": call.hold}
                return
            token = rerun_context(
                Rerun(template, call.config, call.injected, extras, streamed=call.compared)
            )
            goto = call.goto
            if call.node.routes:
                goto = goto + await destinations(
                    call.node.routes,
                    {**extras, **after_update(self.channels, call.values, call.update)},
                    call.update if call.returned_dict else None,
                    silenced(call.config or get_config()),
                )
            output = routed(call.node.name, call.view, goto, self.opaque, call.streamed)
            if speculation is not None:
                result = await speculation.result(output)
            else:
                result = await probe.probe(
                    self.routed_steps[call.node.name],
                    call.input_view,
                    output,
                    step_id=call.step_id,
                    step_name=call.node.name,
                    coverage=self.rotation(call),
                    origin=origin_of(call.config, call.node.name),
                    full=full_probe_reason(_machine(call.bb)),
                )
        except Exception as exc:  # the probe fails closed: the output goes to human review
            # a variant's input that cannot be rebuilt (.values) or a re-run's store search
            # (.scratch_store) is unreadable; a re-run's unreadable output, a probe failure
            cause = exc.__cause__
            if isinstance(cause, Unreadable) and cause.path.startswith(("state[", "config[")):
                call.sampled = False
                call.hold = (
                    f"the probe cannot vary the input: {redact_text(str(cause))}; "
                    + _input_fix(cause.path)
                )
                call.outcome = {"status": "unreadable", "reason": call.hold}
                return
            if isinstance(cause, Unreadable) and cause.path.startswith("store."):
                call.sampled = False
                call.hold = (
                    f"the probe cannot re-run node {call.node.name!r}: {redact_text(str(cause))}"
                )
                call.outcome = {"status": "unreadable", "reason": call.hold}
                return
            # the hold reason goes to the state, the trace and the review request
            error = redact_text(f"{type(exc).__name__}: {exc}")
            if interrupted(exc):  # what to do, not LangGraph's GraphInterrupt(...) repr
                name = call.node.name
                error = (
                    f"node {name!r} calls interrupt(), so the probe cannot re-run it: mark "
                    f"it unprobed, guard(..., unprobed=[{name!r}]) (or @guard_node(probe=False) "
                    "on its function), and its output is still checked by the breaker; or "
                    "leave it out of guard(nodes=...). A re-run would ask its question again, "
                    "about a person the probe invented, which no one can answer"
                )
            call.sampled = False
            call.hold = f"probe failed: {error}"
            call.outcome = {"status": "failed", "reason": call.hold}
            return
        finally:
            if token is not None:
                reset_rerun(token)
        if result.status == "not_sampled":
            call.sampled = False
            call.outcome = {"status": "not_sampled", "reason": result.reason}
            return
        if origin_of(call.config, call.node.name) is None:
            self.coverage[call.node.name] = dict(result.coverage)
        call.coverage = dict(result.coverage)
        call.score = result.score
        call.outcome = probe_outcome(result, _unread(call.input_view, self.opaque))
        if result.holds:  # an unsupported language, [probe] unsupported_language = "hold"
            call.hold = result.reason
        call.probe_summary = {
            "status": result.status,
            "score": result.score,
            "k": result.k,
            "r": result.r,
            "calls": result.calls,
            "reason": call.outcome["reason"]
            if result.status == "not_applicable"
            else result.reason,
        }

    def _names_a_group(self, key: str, value: Any) -> bool:
        """Whether state ``key`` holding ``value`` names a protected group (the probe's rule)."""
        return bool(self.base.generator.detect(read_values({key: value}, "state", self.opaque)))

    def _edge_extras(
        self, spec: GuardedNode, values: Mapping[str, Any], config: RunnableConfig | None
    ) -> dict[str, Any]:
        """The state keys the node's conditional edges read beyond its input (unvaried)."""
        missing = {k for route in spec.routes for k in route.keys} - set(values)
        if not missing or config is None:
            return {}
        return read_channels(config, sorted(missing))

    def rotation(self, call: Call) -> dict[str, int]:
        """The covering-rotation state the node's probe starts from.

        The thread's checkpointed ``bb_probe_coverage`` entry for the node; else ``{}`` in
        a run with a thread id (read from the thread's own origin, :func:`origin_of`); else,
        in a run without one, the latest state the guard left the node in such a run.
        """
        return self._rotation(call.bb, call.node.name, call.config)

    def _rotation(
        self, bb: Mapping[str, Any], node: str, config: RunnableConfig | None
    ) -> dict[str, int]:
        saved = (bb.get("bb_probe_coverage") or {}).get(node)
        if isinstance(saved, Mapping):
            return {str(axis): pos for axis, pos in saved.items()}
        if origin_of(config, node) is not None:
            return {}
        return dict(self.coverage.get(node, {}))

    def _repaired_routes(self, spec: GuardedNode) -> Callable[[Any, Any], Awaitable[Any]]:
        """What a repair's re-check compares for ``spec``: the repaired view and its routes.

        ``async (repaired view, input view) -> Routed(view, destinations)``, or the view
        itself when the node routes nowhere. The destinations: the ``Command``'s, which a
        repair does not rewrite (a re-run's repaired output comes as a :class:`Routed` with
        the re-run's own; the repaired output being checked as a bare view, and gets the
        halted step's, :class:`Rerun` ``goto``, which are promoted with it), then, for a node
        with conditional edges, the edges evaluated (:mod:`.routes`) on the view rebuilt onto
        the node's update (:class:`Rerun` ``update``) applied to the input rebuilt onto its
        template, as they will be when the repaired output is promoted.

        Raises:
            ValueError: No re-run context (the re-check fails closed), or, for a node with
                conditional edges, none with the node's update, a repaired view that is not
                an object of the node's keys, or anything the edges raise.
        """
        opaque = self.opaque
        channels = self.channels

        async def compared(view: Any, input_view: Any) -> Any:
            rerun = _RERUN.get(None)
            if rerun is None:
                raise ValueError(
                    f"cannot re-check the routes of node {spec.name!r}: no re-run context"
                )
            if isinstance(view, Routed):
                view, goto = view.output, list(view.route)
            else:
                goto = list(rerun.goto)
            if not spec.routes:
                return routed(spec.name, view, goto, opaque)
            if rerun.update is None or rerun.config is None:
                raise ValueError(
                    f"cannot re-check the routes of node {spec.name!r}: no re-run context"
                )
            if not isinstance(view, dict) or set(view) - set(rerun.update):
                raise ValueError(
                    f"a repaired output of node {spec.name!r} is not an update of its keys "
                    f"{sorted(rerun.update)}"
                )
            template = rerun.template
            values = (
                input_view if template is None else rebuild_values(template, input_view, opaque)
            )
            update = rebuild_values({k: v for k, v in rerun.update.items() if k in view}, view)
            # `|` or `^` for `-` are equivalent mutants: a key also in `values` is read from
            # the run as well, and after_update's value of it wins in the merge below
            keys = {k for route in spec.routes for k in route.keys}
            missing = keys - set(values)  # pragma: no mutate
            extras = read_channels(rerun.config, sorted(missing)) if missing else {}
            goto += await destinations(
                spec.routes,
                {**extras, **after_update(channels, values, update)},
                None,  # promoted by bb_breaker's Promote, which is no dict
                silenced(rerun.config),
            )
            return routed(spec.name, view, goto, opaque)

        return compared

    def _probe_step(
        self, spec: GuardedNode, routes: Literal["command", "all"]
    ) -> Callable[..., Any]:
        """The step the probe re-runs: the user's function on a counterfactual view.

        It rebuilds the view into the node's own state type (messages keep their ids, models
        their class), calls the function with every stream sink silenced and the LangGraph
        objects it declares, and returns the JSON view of its update with where it sends the
        run: with ``routes="all"``, where its ``Command`` and its conditional edges send it
        (:func:`routed`, :mod:`.routes`), what the probe compares; with ``"command"``, the
        update's view and the ``Command``'s destinations as they are (``Routed(view,
        [node name or Send, ...])``, or the bare view for a node that returned none), what a
        repair's re-check rewrites and completes (:meth:`_repaired_routes`). A sync function
        runs in a worker thread, so the probe's calls overlap. A call that raises is retried
        as the node's ``RetryPolicy`` says (:mod:`.retrying`).
        """
        fn = retried(spec.fn, spec.retry, spec.is_async)  # the node's RetryPolicy (.retrying)
        opaque = self.opaque
        channels = self.channels

        def prepare(
            payload: Any,
        ) -> tuple[Any, RunnableConfig, dict[str, Any], Any, Capture | None]:
            rerun = _RERUN.get(None)
            config = rerun.config if rerun is not None and rerun.config is not None else None
            if config is None:
                config = get_config()
            # what the node streams is compared as part of its output (not by a re-check,
            # whose repaired output is promoted without the node's stream events)
            record = (
                Capture(compared=rerun.streamed)
                if rerun is not None and rerun.streamed and routes == "all"
                else None
            )
            quiet = silenced(config, record)
            if isinstance(payload, dict) and CONTEXT_KEY in payload:
                payload = dict(payload)
                quiet = with_context(quiet, _variant_context(config, payload.pop(CONTEXT_KEY)))
            if isinstance(payload, dict) and CONFIGURABLE_KEY in payload:
                payload = dict(payload)
                quiet = with_configurable(quiet, payload.pop(CONFIGURABLE_KEY), opaque)
            if isinstance(payload, dict) and METADATA_KEY in payload:
                payload = dict(payload)
                quiet = with_metadata(quiet, payload.pop(METADATA_KEY), opaque)
            template = rerun.template if rerun is not None else None
            # a copy: a resample's payload is the input's own view, which for a plain state
            # is the live state itself, and a node that changes its input in place would
            # change it for the graph (and for the other re-runs)
            values = (
                copy.deepcopy(payload)
                if template is None
                else rebuild_values(template, payload, opaque)
            )
            given = rerun.injected if rerun is not None else {}
            return spec.coerce(values), quiet, rebound(given, quiet, spec.inject), values, record

        def run(fn_: Callable[..., Any], state: Any, quiet: RunnableConfig, kwargs: Any) -> Any:
            token = var_child_runnable_config.set(quiet)
            try:
                with unobserved():
                    return fn_(state, **kwargs)
            except StopIteration as exc:
                raise stop_iteration(spec.name, exc) from exc
            finally:
                var_child_runnable_config.reset(token)

        async def step(payload: Any, sample: int = 0) -> Any:
            state, quiet, kwargs, values, record = prepare(payload)
            if spec.is_async:
                token = var_child_runnable_config.set(quiet)
                try:
                    with unobserved():
                        out = await fn(state, **kwargs)
                finally:
                    var_child_runnable_config.reset(token)
            else:
                # like asyncio.to_thread (context copied), on the guard's long-lived pool
                call = functools.partial(
                    contextvars.copy_context().run, run, fn, state, quiet, kwargs
                )
                out = await asyncio.get_running_loop().run_in_executor(self.pool, call)
            update, goto, command = split_output(spec.name, out, channels)
            view = read_values(update, "output", opaque, role="output")
            streamed = streamed_view(record, update) if record is not None else None
            if routes == "command":
                return Routed(view, goto) if goto else view
            if spec.routes:
                rerun = _RERUN.get(None)
                extras = rerun.extras if rerun is not None else {}
                goto = goto + await destinations(
                    spec.routes,
                    {**extras, **after_update(channels, values, update)},
                    update if command is None and isinstance(out, dict) else None,
                    quiet,
                )
            return routed(spec.name, view, goto, opaque, streamed)

        return step


def stop_iteration(step: str, exc: StopIteration) -> RuntimeError:
    """What a re-run that raised ``StopIteration`` in a worker thread raises instead.

    asyncio cannot set a ``StopIteration`` on a future ("interacts badly with generators"):
    the re-run would never finish and the probe would wait out ``call_timeout_s``, then
    blame a time-out. As a ``RuntimeError`` it fails the probe at once, naming the cause (an
    iterator the step reads ran dry: a fake model's list of replies, say).
    """
    return RuntimeError(
        f"{step!r} raised StopIteration{f' ({exc})' if str(exc) else ''}: an iterator it reads "
        "ran out (a fake chat model's replies?), so this re-run has no result"
    )


def _output_view(update: Mapping[str, Any], opaque: frozenset[str]) -> Any:
    """The JSON view of a node's update (a lazy view's builder: no keyword to bind per call)."""
    return read_values(update, "output", opaque, role="output")


def _copied(value: Any) -> Any:
    """A deep copy of an input value, or the value itself if it cannot be copied.

    The copy is the template variants are rebuilt into: a node that changes its own copy of
    the input in place (a pydantic state's list) must not change it. A value that cannot be
    copied is kept as it is; if the node then changes it, rebuilding fails and the probe
    holds the step.
    """
    try:
        return copy.deepcopy(value)
    except Exception:  # any object's __deepcopy__ may raise anything
        return value


def _canonical(view: Mapping[str, Any]) -> dict[str, str]:
    """Key -> the canonical JSON text of its view (what :meth:`Prober.snapshot` keeps)."""
    return {
        key: json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
        for key, value in view.items()
    }


def _input_fix(path: str) -> str:
    """How to make the unreadable input at ``path`` readable (the hold reason's advice)."""
    match = re.match(r"config\['(configurable|metadata)'\]\[('[^']*'|\"[^\"]*\")\]", path)
    if match:
        name = f"{match.group(1)}.{match.group(2)[1:-1]}"
        return (
            "pass the value in a type the probe reads, or list it in "
            f"guard(..., opaque=[{name!r}]) if it names no person"
        )
    match = re.match(r"state\[('[^']*'|\"[^\"]*\")\]", path)
    named = repr(match.group(1)[1:-1]) if match else "..."
    return (
        "declare the key with a type the probe reads, or list it in "
        f"guard(..., opaque=[{named}]) if it names no person"
    )


def _variant_context(config: RunnableConfig, view: Any) -> Any:
    """The run's ``runtime.context`` rebuilt from a variant's view of it (:mod:`.context`).

    Raises:
        ValueError: The run has no context any more (a re-check in a run started without
            the context the step was probed with), or the view does not fit it.
    """
    original = context_of(config)
    if original is None:
        raise ValueError(
            "the step was probed with a runtime.context this run does not have; resume the "
            "thread with the same context=..."
        )
    return rebuild(original, view)


class FreshProbes:
    """Anything-with-``probe``: a fresh probe per call (for the runner's re-check).

    A re-check is never sampled out: the copy probes every call whatever ``[probe]
    probe_rate`` says (that rate chooses which guarded steps are probed, and a repair of one
    that was must be measured; sampled out, its re-check failed as "not_sampled" and every
    repair of a step whose re-check id hashed above the rate went to a human).
    """

    def __init__(self, base: Probe) -> None:
        self.base = base

    async def probe(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`biasbreaker.probe.Probe.probe` on a fresh copy of the base probe.

        With adaptive probing the re-check is the full probe (``full``), never a first stage.
        """
        if self.base.adaptive is not None:
            kwargs.setdefault("full", "a repair's re-check")
        return await clone_probe(self.base, probe_rate=1.0).probe(*args, **kwargs)


NOT_VARIED = (
    "; the probe read the node's input only (its state, context and the config keys it "
    "varies): data the node reads from elsewhere (the store, a database, a file, an API) is "
    "not varied, so a node deciding on such data is not checked on it (docs/langgraph.md §8)"
)
"""What a ``not_applicable`` outcome of a LangGraph node adds to the probe's reason. The
generator's "the payload is group-blind" is about the payload it was given; a node that reads
the applicant from the store and denies women was recorded "group-blind (fairness through
unawareness)" with nothing saying that the store was never looked at (a new-user trial)."""


def probe_outcome(
    result: ProbeResult, unread: list[str] | None = None, not_varied: str = NOT_VARIED
) -> dict[str, str]:
    """The trace's ``probe`` outcome of a probe that ran: ``{"status", "reason"}``.

    ``scored`` says how many counterfactuals and resamples were compared; any other status
    (``not_applicable``, ``unsupported_language``) carries the probe's reason, or that no
    protected group was named. A ``not_applicable`` reason adds what the probe read
    (:data:`NOT_VARIED`: the node's input, not the store or a database), and one with keys
    passed through unread (``unread``, :func:`_unread`) names them: the probe did not look
    there. ``not_varied`` is that clause (the LangChain middleware names the model request).
    """
    if result.status == "scored":
        reason = f"scored: k={result.k} counterfactual(s), r={result.r} resample(s)"
        if result.stage_reason:  # adaptive probing: where the probe stopped, and why
            reason += f"; {result.stage_reason}"
    else:
        reason = result.reason or "no protected group named in the input"
    if result.status == "not_applicable":
        reason += not_varied
    if result.status == "not_applicable" and unread:
        reason += (
            f"; not read: {unread}, passed through unread by guard(opaque=...) (if one of "
            "them names a person, the step was not checked on it)"
        )
    return {"status": result.status, "reason": reason}


def full_probe_reason(machine: Any) -> str:
    """Why a step needs the full probe under adaptive probing: the breaker is not NORMAL.

    Args:
        machine: The control machine's snapshot (``ControlMachine.snapshot()``: its
            ``"state"``), or ``None`` for a thread with no machine yet.

    Returns:
        ``"the breaker is in WARNING"`` (or INTERVENTION, RECOVERY, ESCALATED), or empty
        for a NORMAL breaker or a thread with no machine yet (its first step).
    """
    state = machine.get("state") if isinstance(machine, Mapping) else None
    if not isinstance(state, str) or state == BreakerState.NORMAL.value:
        return ""
    return f"the breaker is in {state.upper()}"


def _machine(bb: Mapping[str, Any]) -> Any:
    """The machine's snapshot in the guard's ``bb_breaker`` (``{"machine": ..., "by": ...}``)."""
    value = bb.get("bb_breaker")
    return value.get("machine") if isinstance(value, Mapping) else None


def _unread(view: Any, opaque: frozenset[str]) -> list[str]:
    """The ``guard(opaque=...)`` names of the input's keys the probe passed through unread."""
    if not opaque or not isinstance(view, Mapping):
        return []
    names = [key for key in view if key in opaque]
    for section, key in (("configurable", CONFIGURABLE_KEY), ("metadata", METADATA_KEY)):
        data = view.get(key)
        if isinstance(data, Mapping):
            names += [f"{section}.{k}" for k in data if f"{section}.{k}" in opaque]
    return sorted(names)


def clone_probe(base: Probe, probe_rate: float | None = None) -> Probe:
    """A probe configured like ``base`` (or with ``probe_rate``), with an empty call cache.

    Every constructor setting is copied but ``budget``: the adapters give each run's probe its
    own account (:class:`~biasbreaker.probe.budget.RunBudgets`).
    """
    return Probe(
        base.scorers,
        generator=base.generator,
        k=base.k,
        joint=base.joint,
        per_person=base.per_person,
        r=base.r,
        probe_rate=base.probe_rate if probe_rate is None else probe_rate,
        seed=base.seed,
        combine=base.combine,
        bootstrap=base.bootstrap,
        confidence=base.confidence,
        max_concurrency=base.max_concurrency,
        cache_size=base.cache_size,
        call_timeout_s=base.call_timeout_s,
        clock=base.clock,
        language=base.language,
        adaptive=base.adaptive,
    )


__all__ = [
    "NOT_VARIED",
    "Call",
    "FreshProbes",
    "NodeReturnError",
    "Prober",
    "Rerun",
    "Speculation",
    "clone_probe",
    "full_probe_reason",
    "in_rerun",
    "origin_of",
    "probe_outcome",
    "rerun_context",
    "reset_rerun",
    "split_output",
    "stop_iteration",
]
