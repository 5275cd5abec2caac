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
from langgraph.config import get_config

from biasbreaker.errors import ConfigError
from biasbreaker.intervention.runner import InterventionRunner, ProbeRechecker
from biasbreaker.machine import AnyHook, MachineConfig
from biasbreaker.probe import build_probe
from biasbreaker.registry import BuildContext
from biasbreaker_plugins.langgraph._internals import thread_of
from biasbreaker_plugins.langgraph.breaker_node import BreakerNode
from biasbreaker_plugins.langgraph.deciding import Decider
from biasbreaker_plugins.langgraph.machines import Machines, run_sync
from biasbreaker_plugins.langgraph.node import GuardedNode
from biasbreaker_plugins.langgraph.probing import FreshProbes, Prober
from biasbreaker_plugins.langgraph.review import ReviewNode
from biasbreaker_plugins.langgraph.send_panel import SendPanel
from biasbreaker_plugins.langgraph.traces import Traces


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


class GraphGuard:
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
    ) -> None:
        settings = context.settings
        self.nodes = dict(nodes)
        self.weights = dict(weights)
        self.panel_mode = options.panel
        self.traces = Traces(options.trace_path, fsync=settings.trace.fsync)
        self.pool = ThreadPoolExecutor(
            max_workers=settings.probe.max_concurrency,
            thread_name_prefix="biasbreaker-probe",
        )
        self.prober = Prober(build_probe(context), self.nodes, self.pool)
        self.decider = Decider(
            Machines(machine_config),
            self.traces,
            self.weights,
            settings.propagation.network_ewma,
        )
        self.runner: InterventionRunner | None = None
        if hook is None:
            self.runner = InterventionRunner.from_context(
                context,
                rechecker=ProbeRechecker(FreshProbes(self.prober.base), self.prober.steps),
                attributes=self.prober.attributes,
            )
            hook = self.runner.ahook
        elif self.panel_mode == "send":
            raise ConfigError(
                "[plugin.langgraph] panel = 'send' runs the configured intervention runner's "
                "skeptics as Send branches; it cannot be combined with guard(hook=...)"
            )
        self.hook: AnyHook = hook
        self.send_panel = (
            SendPanel(self.runner, self.decider)
            if self.panel_mode == "send" and self.runner is not None
            else None
        )
        self.breaker_node = BreakerNode(self.decider, self.nodes, hook, self.send_panel)
        self.review_node = ReviewNode(channels)

    def wrap(self, spec: GuardedNode) -> Callable[..., Any]:
        """The function LangGraph runs for a guarded node (same name, signature and hints).

        ``functools.wraps`` keeps ``__name__``, ``__annotations__`` and ``__wrapped__``, so
        LangGraph infers the same input schema and ``Command`` destinations and resolves
        string annotations in the function's own module. ``__signature__`` is the function's
        plus a keyword-only ``config`` if it lacks one, so LangGraph injects the run config
        the guard needs; the function receives exactly the arguments it declares.
        """
        fn = spec.fn
        wants_config = "config" in spec.inject
        prober, decider = self.prober, self.decider

        if spec.is_async:

            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                config = kwargs["config"] if wants_config else kwargs.pop("config", None)
                self._check_trace(spec, args, kwargs, config)
                out = await fn(*args, **kwargs)
                call = prober.begin(spec, args, kwargs, out, config)
                if call.sampled:
                    await prober.probe(call)
                return decider.finish(call)

            wrapper: Callable[..., Any] = guarded_async
        else:

            @functools.wraps(fn)
            def guarded_sync(*args: Any, **kwargs: Any) -> Any:
                config = kwargs["config"] if wants_config else kwargs.pop("config", None)
                self._check_trace(spec, args, kwargs, config)
                out = fn(*args, **kwargs)
                call = prober.begin(spec, args, kwargs, out, config)
                if call.sampled:
                    run_sync(prober.probe(call))
                return decider.finish(call)

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

    def _check_trace(
        self,
        spec: GuardedNode,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        config: Mapping[str, Any] | None,
    ) -> None:
        """Before a thread's first breaker step: refuse to overwrite another run's trace.

        Raises:
            TraceError: The thread has no breaker state yet (a new run, not a resume) but its
                trace file already holds records.
        """
        if not self.traces.template:
            return
        state = args[0] if args else kwargs.get(spec.first)
        if isinstance(state, Mapping) and not state.get("bb_breaker"):
            self.traces.check_new_run(thread_of(config if config is not None else get_config()))


__all__ = ["GraphGuard", "GuardOptions"]
