"""The ``langgraph`` framework adapter: the plugin object that guards ``StateGraph`` builders.

The entry point (:mod:`biasbreaker_plugins.langgraph_plugin`) registers a factory that builds
a :class:`LangGraphAdapter` for a kernel; :meth:`LangGraphAdapter.guard` builds the guarded
copy of a builder (:mod:`.graph`), whose guarded nodes run :class:`.runtime.GraphGuard`.
See ``docs/langgraph.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.graph import StateGraph

from biasbreaker.errors import ConfigError
from biasbreaker.machine import AnyHook, MachineConfig
from biasbreaker.registry import BuildContext
from biasbreaker.trace.sink import check_sink_choice
from biasbreaker_plugins.langgraph.graph import GuardedStateGraph, build_guarded
from biasbreaker_plugins.langgraph.runtime import GuardOptions
from biasbreaker_plugins.langgraph.traces import check_trace_folder


class LangGraphAdapter:
    """The ``langgraph`` framework adapter: builds guarded graphs for one kernel.

    Args:
        options: ``[plugin.langgraph]``.
        context: The kernel (settings, seed, plugins).

    Raises:
        ConfigError: ``[breaker] probation`` is not ``"half-open"``, the ``trace_path``
            folder cannot be created (:func:`.traces.check_trace_folder`), or ``trace_path``
            is set while ``[trace] sink`` is a database sink (one of them would be ignored).
    """

    def __init__(self, options: GuardOptions, context: BuildContext) -> None:
        check_sink_choice(context.settings, options.trace_path, adapter="langgraph")
        check_trace_folder(options.trace_path)
        self.options = options
        self.context = context
        settings = context.settings
        if settings.breaker.probation != "half-open":
            raise ConfigError(
                f"[breaker] probation = {settings.breaker.probation!r}: a guarded LangGraph "
                "graph needs 'half-open' (in 'hold' mode every output after a repair is held "
                "until the machine is NORMAL again, so nothing downstream could ever run); "
                "set [breaker] probation = 'half-open' (the default)"
            )
        self.machine_config = MachineConfig.from_settings(settings)

    def guard(
        self,
        builder: StateGraph[Any, Any, Any, Any],
        *,
        nodes: Sequence[str] | None = None,
        hook: AnyHook | None = None,
        concurrent: Sequence[str] = (),
        opaque: Sequence[str] = (),
        unprobed: Sequence[str] | None = (),
    ) -> GuardedStateGraph:
        """A guarded copy of ``builder``; see :func:`biasbreaker_plugins.langgraph.guard`."""
        return build_guarded(
            builder,
            options=self.options,
            context=self.context,
            machine_config=self.machine_config,
            nodes=nodes,
            hook=hook,
            concurrent=concurrent,
            opaque=opaque,
            unprobed=unprobed,
        )


__all__ = ["LangGraphAdapter"]
