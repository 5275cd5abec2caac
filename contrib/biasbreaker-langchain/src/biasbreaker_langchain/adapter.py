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
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

from biasbreaker.errors import ConfigError
from biasbreaker.intervention.runner import InterventionRunner, ProbeRechecker
from biasbreaker.machine import AnyHook, ControlMachine, MachineConfig
from biasbreaker.probe import Probe, build_probe
from biasbreaker.registry import BuildContext
from biasbreaker.trace import StepRecord
from biasbreaker.trace.sink import check_sink_choice, open_sink
from biasbreaker.types import InterventionContext, InterventionResult
from biasbreaker_plugins.langgraph.deciding import Decider
from biasbreaker_plugins.langgraph.machines import Machines, SnapshotCache
from biasbreaker_plugins.langgraph.probing import FreshProbes
from biasbreaker_plugins.langgraph.traces import check_trace_folder

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from biasbreaker_langchain.plugin import LangChainAgentOptions


class _Hook:
    """The hook a kept machine is built with: the hook of the model call stepping it."""

    __slots__ = ("target",)

    def __init__(self, target: AnyHook) -> None:
        self.target = target

    def __call__(
        self, context: InterventionContext
    ) -> InterventionResult | Awaitable[InterventionResult]:
        return self.target(context)


class _Recorder:
    """The recorder a kept machine is built with: a fresh list of records per model call."""

    __slots__ = ("records",)

    def __init__(self) -> None:
        self.records: list[StepRecord] = []

    def __call__(self, record: StepRecord) -> None:
        self.records.append(record)


@dataclasses.dataclass(eq=False)
class MachineHandle:
    """A control machine checked out for one model call (:class:`MachineCache`).

    Args:
        machine: The machine, in the state of ``base``.
        hook: Its hook (the call's, set at checkout).
        recorder: Its recorder; ``recorder.records`` are the steps taken since checkout.
            ``None`` in a cache that records nothing (no trace kept: the machine then
            builds a step's record only if ``last_record`` is read).
        base: The ``bb_breaker`` value it was restored from or wrote (kept alive, so its
            identity stays a valid cache key), or ``None`` for a new thread's machine.
    """

    machine: ControlMachine
    hook: _Hook
    recorder: _Recorder | None
    base: object = None


class MachineCache:
    """Machines kept between model calls, keyed by the identity of the snapshot they wrote.

    A model call restores the control machine from the agent state's ``bb_breaker``, which
    validates the whole snapshot and costs more than the step. The machine whose snapshot a
    call wrote is kept under that snapshot object's identity; the next model call of the
    thread reads the very same object from the state channel and takes that machine back
    instead of restoring one (:class:`~biasbreaker_plugins.langgraph.machines.SnapshotCache`,
    which the LangGraph adapter's machines use too). A checkpoint load, another
    process or any copy is another object, restored as before; a handle is taken out of the
    cache while in use, so two calls never share a machine, and one whose call failed is
    never put back. Only a machine that :meth:`ControlMachine.restore` would rebuild exactly
    from the value written is kept (the caller's ``exact``): the state's snapshot stands the
    frozen reply and the repair in as digests, and a machine holding the real ones is not
    the one a restore of it gives.

    Args:
        recorded: Whether the machines record their steps (the adapter keeps a trace).
        size: Handles kept, the least recently released evicted.
    """

    def __init__(self, recorded: bool, size: int = 64) -> None:
        self._recorded = recorded
        self._kept: SnapshotCache[MachineHandle] = SnapshotCache(size)

    def acquire(
        self, value: Mapping[str, Any] | None, hook: AnyHook, config: MachineConfig
    ) -> MachineHandle:
        """Check out the machine of ``value`` (a ``bb_breaker`` snapshot), stepping ``hook``.

        A new machine of ``config`` for an empty ``value`` (the thread's first call).

        Raises:
            InputError: The snapshot is malformed or of another version.
        """
        if value:
            handle = self._kept.take(value)
            if handle is not None:
                handle.hook.target = hook
                if handle.recorder is not None:
                    handle.recorder.records = []
                return handle
        shared = _Hook(hook)
        recorder = _Recorder() if self._recorded else None
        if value:
            machine = ControlMachine.restore(value, hook=cast(AnyHook, shared), recorder=recorder)
        else:
            machine = ControlMachine(config, hook=cast(AnyHook, shared), recorder=recorder)
        return MachineHandle(machine, shared, recorder, value)

    def release(self, handle: MachineHandle, value: Mapping[str, Any]) -> None:
        """Keep a handle whose machine ``ControlMachine.restore(value)`` rebuilds exactly."""
        self._kept.keep(handle, value)


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
        # the machines of the latest model calls, by the snapshot they wrote to the state;
        # their steps recorded only for a trace kept
        self.machines = MachineCache(recorded=self.traces.enabled)
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


__all__ = ["LangChainAgentAdapter", "MachineCache", "MachineHandle"]
