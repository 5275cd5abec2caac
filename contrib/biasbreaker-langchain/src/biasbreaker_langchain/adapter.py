"""The ``langchain-agent`` adapter object: what one kernel's guarded agents share.

The factory (:func:`biasbreaker_langchain.plugin.make_adapter`) builds one
:class:`LangChainAgentAdapter` per kernel; every
:class:`~biasbreaker_langchain.middleware.BiasGuardMiddleware` built from that kernel uses
its probe, machine configuration, B_net fold and run traces.

The building blocks come from the LangGraph adapter through its modules' public names, not
copies: the message views the probe varies and compares
(:mod:`biasbreaker_plugins.langgraph.values`), stream capture and release
(:mod:`biasbreaker_plugins.langgraph.streaming`), the B_net fold
(:class:`biasbreaker_plugins.langgraph.deciding.Decider`) and the per-thread run traces
(through the configured trace sink, :func:`biasbreaker.trace.sink.open_sink`). The repair is
the graph adapter's too:
the configured :class:`~biasbreaker.intervention.runner.InterventionRunner` (``[intervention]``:
router, skeptic panel, MADERA, through ``[llm] client``), whose re-check re-issues the model
call through the same probe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from biasbreaker.errors import ConfigError
from biasbreaker.intervention.runner import InterventionRunner, ProbeRechecker
from biasbreaker.machine import MachineConfig
from biasbreaker.probe import Probe, build_probe
from biasbreaker.registry import BuildContext
from biasbreaker.trace.sink import check_sink_choice, open_sink
from biasbreaker_plugins.langgraph.deciding import Decider
from biasbreaker_plugins.langgraph.machines import Machines
from biasbreaker_plugins.langgraph.probing import FreshProbes
from biasbreaker_plugins.langgraph.traces import check_trace_folder

if TYPE_CHECKING:
    from biasbreaker_langchain.plugin import LangChainAgentOptions


class LangChainAgentAdapter:
    """The ``langchain-agent`` framework adapter for one kernel.

    Args:
        options: ``[plugin.langchain-agent]``.
        context: The kernel (settings, seed, plugins).

    Raises:
        ConfigError: ``[breaker] probation`` is not ``"half-open"``; the intervention
            runner cannot be built (a strategy needs an LLM and ``[llm] client`` is unset);
            or the ``trace_path`` folder cannot be created (``check_trace_folder``).
        ProbeError, ConfigError: The probe cannot be built (``[probe]``).
        PluginError: A selected router, skeptic or MADERA stage failed to build.
    """

    def __init__(self, options: LangChainAgentOptions, context: BuildContext) -> None:
        check_trace_folder(options.trace_path, adapter="langchain-agent")
        settings = context.settings
        if settings.breaker.probation != "half-open":
            raise ConfigError(
                f"[breaker] probation = {settings.breaker.probation!r}: a guarded LangChain "
                "agent needs 'half-open' (in 'hold' mode every model reply after a halt would "
                "be held until the machine is NORMAL again); set [breaker] probation = "
                "'half-open' (the default)"
            )
        self.options = options
        self.context = context
        self.node = options.node
        self.probe: Probe = build_probe(context)
        # the runner's re-check re-issues the model call being repaired: its step is given
        # per call (:meth:`runner_for`); this one is the template every call copies
        self.runner = InterventionRunner.from_context(
            context,
            rechecker=ProbeRechecker(FreshProbes(self.probe), {}),
            attributes=self.attributes,
        )
        # with nothing that can pass a re-check, the first trip goes to review, as in guard()
        self.machine_config = self.runner.machine_config(MachineConfig.from_settings(settings))
        check_sink_choice(settings, options.trace_path, adapter="langchain-agent")
        # the configured trace sink (``[trace] sink``; the file sink at trace_path by default)
        self.traces = open_sink(context, options.trace_path, adapter="langchain-agent")
        # one guarded step per model call: B_net is that call's score (Katz weight 1)
        self.decider = Decider(
            Machines(self.machine_config),
            self.traces,
            {self.node: 1.0},
            settings.propagation.network_ewma,
        )
        self.pool = ThreadPoolExecutor(
            max_workers=settings.probe.max_concurrency,
            thread_name_prefix="biasbreaker-langchain-probe",
        )

    def attributes(self, task: Any) -> list[str]:
        """The demographic axes a call's input view mentions (the skeptics' domain match)."""
        return sorted({d.axis for d in self.probe.generator.detect(task)})

    def runner_for(self, step: Callable[..., Any]) -> InterventionRunner:
        """The configured runner whose re-check re-issues ``step`` (one model call's).

        ``step(view)`` (a coroutine function) maps a request view to a reply view. The copy
        shares the router, panel and MADERA; the skeptics' track record is handed back with
        :meth:`keep_track_record` after the call.
        """
        rechecker = ProbeRechecker(FreshProbes(self.probe), {self.node: step})
        return dataclasses.replace(self.runner, rechecker=rechecker)

    def keep_track_record(self, runner: InterventionRunner) -> None:
        """Keep what a call's runner learnt about the skeptics (the trust formula's ``R``)."""
        self.runner.track_record = runner.track_record

    def close(self) -> None:
        """Close the trace files and the probe's worker threads."""
        self.traces.close()
        self.pool.shutdown(wait=False)


__all__ = ["LangChainAgentAdapter"]
