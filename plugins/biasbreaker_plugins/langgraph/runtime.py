"""The runtime of one guarded graph: what its guarded nodes and added nodes run.

One :class:`GraphGuard` serves one guarded graph (every thread run on it). A guarded node's
task does, in order (docs/langgraph.md §2):

1. run the user's node and split its return value into the state update and its ``Command``
   destinations; nothing is written yet (:mod:`.probing`);
2. probe it: re-run the node on counterfactual variants of the application's part of its
   input state, and on same-group resamples, concurrently (:class:`.probing.Prober`);
3. decide (:class:`.deciding.Decider`): *inline* nodes fold the score into B_net and step
   the control machine in their own task; *queued* nodes (those that may run in parallel with
   another guarded node) stage their output for ``bb_breaker`` (:mod:`.breaker_node`);
4. an output not let through is staged (:mod:`.staging`); ``bb_breaker`` repairs it,
   ``bb_review`` (:mod:`.review`) hands it to a human; outputs let through are promoted.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config

from biasbreaker.errors import ConfigError
from biasbreaker.intervention.runner import InterventionRunner, ProbeRechecker
from biasbreaker.machine import AnyHook, MachineConfig
from biasbreaker.probe import build_probe
from biasbreaker.registry import BuildContext
from biasbreaker.trace.sink import open_sink
from biasbreaker_plugins.langgraph._internals import Halt, read_channels, trace_key
from biasbreaker_plugins.langgraph.breaker_node import BreakerNode
from biasbreaker_plugins.langgraph.deciding import Decider
from biasbreaker_plugins.langgraph.machines import Machines, run_sync
from biasbreaker_plugins.langgraph.node import GuardedNode
from biasbreaker_plugins.langgraph.probing import Call, FreshProbes, Prober
from biasbreaker_plugins.langgraph.review import ReviewNode
from biasbreaker_plugins.langgraph.send_panel import SendPanel
from biasbreaker_plugins.langgraph.shared import Shared
from biasbreaker_plugins.langgraph.staging import Work
from biasbreaker_plugins.langgraph.state import STEP_KEYS
from biasbreaker_plugins.langgraph.streaming import (
    Capture,
    HeldStreams,
    Sinks,
    announce,
    capturing,
    graph_namespace,
    held_view,
    streams_anything,
)
from biasbreaker_plugins.langgraph.streaming import injected as rebound

QUEUED_REASON = (
    "queued: a parallel branch's output waits until the breaker has checked the branches of "
    "its super-step in order; a released event follows when it is let through"
)
"""The ``held`` event's reason for a queued output that carries no reason of its own."""


class GuardOptions(Protocol):
    """The adapter options the runtime reads (``[plugin.langgraph]``)."""

    @property
    def panel(self) -> str:
        """``"in-process"`` or ``"send"``."""
        ...

    @property
    def trace_path(self) -> str:
        """The run trace path template (empty: no trace)."""
        ...

    @property
    def stream_first(self) -> bool:
        """Stream a guarded node's events before its output is checked (leaks; opt-in)."""
        ...


class GraphGuard(Shared):
    """The runtime of one guarded graph (shared by every run and thread of it).

    Args:
        options: ``[plugin.langgraph]``.
        context: The kernel's build context (settings, seed, plugins).
        machine_config: The control machine's configuration.
        nodes: The guarded nodes by name.
        weights: Katz influence weights of every node of the user's graph (sum to 1).
        hook: The intervention hook, or ``None`` for the configured intervention runner.
        channels: The graph's channels (``StateGraph.channels``, state key -> channel): a
            reviewer's update may write only the application's keys among them, with values
            their reducers accept. ``None``: only the ``bb_`` keys are refused.
        opaque: State keys the probe passes to re-runs unchanged and never compares
            (``guard(opaque=...)``).

    Raises:
        ConfigError: ``panel = "send"`` with ``hook=...``.
    """

    def __init__(
        self,
        options: GuardOptions,
        context: BuildContext,
        machine_config: MachineConfig,
        nodes: Mapping[str, GuardedNode],
        weights: Mapping[str, float],
        hook: AnyHook | None,
        channels: Mapping[str, Any] | None = None,
        opaque: frozenset[str] = frozenset(),
    ) -> None:
        settings = context.settings
        self.nodes = dict(nodes)
        self.weights = dict(weights)
        self.panel_mode = options.panel
        self.stream_first = options.stream_first
        self.opaque = opaque
        self.traces = open_sink(context, options.trace_path, adapter="langgraph")
        self.tracing = self.traces.enabled  # read once: whether records are kept
        self.held_streams = HeldStreams()
        self.pool = ThreadPoolExecutor(
            max_workers=settings.probe.max_concurrency,
            thread_name_prefix="biasbreaker-probe",
        )
        self.prober = Prober(
            build_probe(context),
            self.nodes,
            self.pool,
            opaque,
            channels,
            speculative=settings.probe.speculative,
        )
        self.runner: InterventionRunner | None = None
        if hook is None:
            self.runner = InterventionRunner.from_context(
                context,
                rechecker=ProbeRechecker(
                    FreshProbes(self.prober.base), self.prober.steps, self.prober.compared
                ),
                attributes=self.prober.attributes,
            )
            hook = self.runner.ahook
            # with nothing that can pass a re-check, the first trip goes to review (docs §5)
            machine_config = self.runner.machine_config(machine_config)
        elif self.panel_mode == "send":
            raise ConfigError(
                "[plugin.langgraph] panel = 'send' runs the configured intervention runner's "
                "skeptics as Send branches; it cannot be combined with guard(hook=...)"
            )
        self.hook: AnyHook = hook
        self.decider = Decider(
            Machines(machine_config, record=self.tracing),
            self.traces,
            self.weights,
            settings.propagation.network_ewma,
            opaque,
        )
        self.send_panel = (
            SendPanel(self.runner, self.decider)
            if self.panel_mode == "send" and self.runner is not None
            else None
        )
        self.breaker_node = BreakerNode(self.decider, hook, self.send_panel, self.settle)
        self.review_node = ReviewNode(channels, self.settle, self.seal)

    def wrap(self, spec: GuardedNode) -> Callable[..., Any]:
        """The function LangGraph runs for a guarded node (same name, signature and hints).

        ``functools.wraps`` keeps ``__name__``, ``__annotations__`` and ``__wrapped__``, so
        LangGraph infers the same input schema and ``Command`` destinations and resolves
        string annotations in the function's own module. ``__signature__`` is the function's
        plus a keyword-only ``config`` if it lacks one, so LangGraph injects the run config
        the guard needs; the function receives exactly the arguments it declares, with its
        stream sinks capturing (:mod:`.streaming`) unless ``stream_first`` is set.
        """
        fn = spec.fn
        wants_config = "config" in spec.inject

        if spec.is_async:

            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                config = kwargs["config"] if wants_config else kwargs.pop("config")
                state, bb, capture, own = self._enter(spec, args, kwargs, config)
                before = (
                    None  # Prober.snapshot's own first test, without the call
                    if not spec.probe or self.prober.base.probe_rate <= 0.0
                    else self.prober.snapshot(spec, state, config)
                )
                # a probed call's re-runs start with its own call (Prober.speculate)
                ahead = self.prober.speculate(
                    spec, bb, config, kwargs, before, capture, threaded=False
                )
                try:
                    token = var_child_runnable_config.set(own[0])
                    try:
                        out = await fn(*args, **own[1])
                    finally:
                        var_child_runnable_config.reset(token)
                    call = self.prober.begin(spec, state, bb, out, config, kwargs, before, capture)
                    if call.sampled:
                        await self.prober.probe(call, ahead)
                finally:
                    if ahead is not None:  # done with, or the node raised, or not probed
                        ahead.discard()
                result = self.decider.finish(call)
                if capture is None and not isinstance(result, Halt):
                    return result  # what _leave returns for it, without the call
                return self._leave(call, result, capture, config)

            wrapper: Callable[..., Any] = guarded_async
        else:

            @functools.wraps(fn)
            def guarded_sync(*args: Any, **kwargs: Any) -> Any:
                config = kwargs["config"] if wants_config else kwargs.pop("config")
                state, bb, capture, own = self._enter(spec, args, kwargs, config)
                before = (
                    None  # Prober.snapshot's own first test, without the call
                    if not spec.probe or self.prober.base.probe_rate <= 0.0
                    else self.prober.snapshot(spec, state, config)
                )
                # a probed call's re-runs start with its own call (Prober.speculate)
                ahead = self.prober.speculate(
                    spec, bb, config, kwargs, before, capture, threaded=True
                )
                try:
                    token = var_child_runnable_config.set(own[0])
                    try:
                        out = fn(*args, **own[1])
                    finally:
                        var_child_runnable_config.reset(token)
                    call = self.prober.begin(spec, state, bb, out, config, kwargs, before, capture)
                    if call.sampled:
                        run_sync(self.prober.probe(call, ahead))
                finally:
                    if ahead is not None:  # done with, or the node raised, or not probed
                        ahead.discard()
                result = self.decider.finish(call)
                if capture is None and not isinstance(result, Halt):
                    return result  # what _leave returns for it, without the call
                return self._leave(call, result, capture, config)

            wrapper = guarded_sync
        signature = inspect.signature(fn)
        if not wants_config:
            params = list(signature.parameters.values())
            position = len(params)
            if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD:
                position -= 1
            params.insert(
                position,
                inspect.Parameter(
                    "config", inspect.Parameter.KEYWORD_ONLY, annotation=RunnableConfig
                ),
            )
            signature = signature.replace(parameters=params)
        wrapper.__signature__ = signature  # type: ignore[attr-defined]
        return wrapper

    def _enter(
        self,
        spec: GuardedNode,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        config: RunnableConfig,
    ) -> tuple[Any, dict[str, Any], Capture | None, tuple[RunnableConfig, dict[str, Any]]]:
        """Read the guard's state (its :data:`.state.STEP_KEYS`), check the trace, set up the call.

        Returns:
            (the node's input, the guard's state, the capture of its stream events or
            ``None`` with ``stream_first`` or when nothing could stream
            (:func:`.streaming.streams_anything`), (the config and keyword arguments to call it
            with)).

        Raises:
            TraceError: The thread has no breaker state yet (a new run, not a resume) but its
                trace file already holds records.
        """
        state = args[0] if args else kwargs.get(spec.first)
        bb = read_channels(config, STEP_KEYS)
        if self.tracing and not bb.get("bb_breaker"):
            self.traces.check_new_run(trace_key(config))
        if self.stream_first or not streams_anything(config):
            return state, bb, None, (config, kwargs)
        capture = Capture()
        own = capturing(config, capture)
        return state, bb, capture, (own, {**kwargs, **rebound(kwargs, own, spec.inject)})

    def _leave(
        self, call: Call, result: Any, capture: Capture | None, config: RunnableConfig
    ) -> Any:
        """Release the call's stream events if its output was let through, else keep them.

        A held output's staged entry gets ``stream``, the JSON of the events kept
        (:func:`.streaming.held_view`; and ``stream_not_json``, why, when one is not JSON):
        what a review shows and an approval releases.

        ``capture`` is ``None`` with ``stream_first`` (nothing is held) or when nothing could
        stream; a held output then keeps an empty capture, as it would have had.
        """
        if self.stream_first:
            return result
        if not isinstance(result, Halt):
            if capture is not None:
                capture.release(config)
            return result
        if capture is None:
            capture = Capture()
        writes = result.update if isinstance(result.update, dict) else {}
        staged = (writes.get("bb_unverified_output") or {}).get(call.key) or {}
        if capture.events and staged:
            # what approving would release, shown to a reviewer and covered by the approval
            staged["stream"], unreadable = held_view(capture)
            if unreadable is not None:
                staged["stream_not_json"] = unreadable
        where = (call.thread, "|".join(graph_namespace(config)), call.key)
        self.held_streams.keep(where, capture)
        status = str(staged.get("status", ""))
        reason = call.hold or str(staged.get("reason", ""))
        if not reason and status == "queued":  # a stream consumer asked why it was held
            reason = QUEUED_REASON
        announce(config, "held", call.node.name, call.key, status, reason)
        return result

    def seal(self, config: RunnableConfig) -> None:
        """Seal the trace of the task's run (it pauses for review)."""
        self.traces.seal(trace_key(config))

    def seal_run(self, config: RunnableConfig | None) -> None:
        """Seal the trace of a run of the guarded graph that returned (ended or paused).

        ``config`` is the one ``stream``/``invoke`` was called with; a subgraph's carries the
        parent task's namespace, which is its graph's namespace.
        """
        if not self.traces.enabled:
            return
        ns = str(((config or {}).get("configurable") or {}).get("checkpoint_ns") or "")
        thread = trace_key(config)
        if ns:
            thread = ".".join([thread, *(part.replace(":", "-") for part in ns.split("|"))])
        self.traces.seal(thread)

    def settle(self, work: Work, config: RunnableConfig) -> None:
        """Stream what a ``bb_breaker`` or ``bb_review`` task decided about held outputs.

        A promoted output's held events are released in order after a ``released`` event (its
        messages streamed whole when none was captured: the run that held it did not stream
        ``"messages"``); a repair or an edit is announced and its messages streamed whole; a
        rejected output's events are dropped with a ``rejected`` event.
        """
        ns = graph_namespace(config)
        for staged in work.promoted:
            capture = self.held_streams.take((work.thread, "|".join(ns), staged["key"]))
            how = str(staged.get("how", "released"))
            announce(config, how, staged["node"], staged["key"], "cleared", "")
            if how == "released" and capture is not None:
                streamed = any(kind == "messages" for kind, _ in capture.events)
                capture.release(config)
                if streamed:
                    continue
            # a repair or an edit, or an output let through whose messages were never
            # captured (the run that held it did not stream "messages", or another process
            # held it): its messages go out whole, as LangGraph streams a node's returned ones
            metadata = capture.metadata if capture is not None else {}
            if not metadata:  # nothing was captured: this task's, attributed to the node
                metadata = {**(config.get("metadata") or {}), "langgraph_node": staged["node"]}
            Sinks.of(config).messages(staged["final"], metadata, ns)
        for staged in work.rejected:
            self.held_streams.take((work.thread, "|".join(ns), staged["key"]))
            announce(config, "rejected", staged["node"], staged["key"], "rejected", "")


__all__ = ["GraphGuard", "GuardOptions"]
