"""``BiasGuardMiddleware``: every model call of a ``create_agent`` agent is a guarded step.

::

    from langchain.agents import create_agent
    from biasbreaker_langchain import BiasGuardMiddleware

    agent = create_agent(model, tools=[...], middleware=[BiasGuardMiddleware()],
                         checkpointer=saver)

Tool executions are not guarded: a tool that decides (calls a model and returns its
decision) needs its own guarded agent, or the agent built as a ``guard()``ed LangGraph graph
(docs/langchain.md, "Tools that decide are not guarded").

In ``wrap_model_call`` (and ``awrap_model_call``) the middleware:

1. calls the model once (the inner handler) with every stream sink *capturing*: its tokens
   are held (:class:`biasbreaker_plugins.langgraph.streaming.Capture`);
2. reads the request (system message + messages, tool results included) and the response
   (messages, tool calls as structured ``{"name", "args"}``, the structured response) into
   JSON views (:func:`biasbreaker_plugins.langgraph.values.read`); a part it cannot read holds
   the step with the key and type named, and so does a request the model did not receive as
   read (a middleware listed after the guard changed it: :mod:`biasbreaker_langchain.received`);
3. when the input names a protected group, re-issues the call on ``k`` counterfactual
   variants of the messages and ``r`` same-group resamples (:class:`biasbreaker.probe.Probe`,
   concurrently: coroutines in an async agent, worker threads in a sync one), every re-issue
   silenced, and scores how much more the reply moves under the swap than under resampling;
4. folds the score into B_net and its EWMAs and steps the control machine, restored from and
   saved to the agent's state (``bb_breaker``, ``bb_network_ewma``: checkpointers persist
   them; both are private, so they are not in the agent's input or output schema);
5. on ``PROCEED`` releases the held tokens and returns the response with the state update;
   when the step trips, the configured intervention runner (the graph adapter's: route,
   skeptics or MADERA through ``[llm] client``, blend, a measured re-check that re-issues the
   model call) repairs it, and the machine is stepped again on the same reply (the re-step
   protocol of docs/control.md §3a) until the reply proceeds, a repair that passed its
   re-check is returned instead (rebuilt onto the reply's messages, streamed whole), or the
   machine escalates (after ``max_retries`` failed repairs; at once with ``router =
   "human-review"``, or for a held step). Only then is the reply handed to review: it is
   **not** returned (so it is never appended to the messages and none of its tool calls
   reaches the tool node), the trace is sealed, the reply is kept in the agent's store
   (:data:`~biasbreaker_langchain.review.HELD_NAMESPACE`, keyed by the model node's
   ``Runtime.execution_info``) and the call pauses in ``interrupt()`` with a
   :class:`~biasbreaker_langchain.review.ReviewRequest`. The resume value
   (:class:`~biasbreaker_langchain.review.ReviewAnswer`) approves the reply (it is then
   returned as it was), rejects it (a withheld-notice ``AIMessage`` without tool calls is
   returned instead, so the agent ends) or replaces it with the reviewer's text.

On resume LangGraph re-runs the model node: the held reply is found in the store under the
same task key, so the model is not called again, the probe and the machine do not run again,
and the answer applies to the reply the reviewer saw (its SHA-256, ``ReviewAnswer.sha256``).
With ``create_agent(store=...)`` (SQLite, Postgres) the resume works in another process; without
a store the middleware keeps held replies in this process's memory. Review needs a
checkpointer (LangGraph's ``interrupt()`` does).

The agent state never holds the biased reply: ``bb_breaker`` is the machine's snapshot with
the frozen reply and the latest repair standing in as their digests
(:func:`~biasbreaker_langchain.state.shown_snapshot`), so no stream mode shows them; the
reply is in the review request only.

The steps live in modules of their own: :mod:`biasbreaker_langchain.call` (reading and
re-issuing a call), :mod:`biasbreaker_langchain.probing` (steps 2-3),
:mod:`biasbreaker_langchain.deciding` (4-5), :mod:`biasbreaker_langchain.review` (the review)
and :mod:`biasbreaker_langchain.state` (the state keys); this one loads the configuration,
sets up the hooks ``create_agent`` wires, and runs a call through them.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.config import get_config

from biasbreaker.errors import ConfigError, PluginError
from biasbreaker.kernel import Kernel
from biasbreaker_langchain.adapter import LangChainAgentAdapter
from biasbreaker_langchain.call import (
    as_response,
    check_received,
    output_view,
    rebuilt,
    reissue,
    thread_of,
    watching,
    with_config,
)
from biasbreaker_langchain.deciding import Held, adecide, decide
from biasbreaker_langchain.plugin import NAME
from biasbreaker_langchain.probing import CallProber
from biasbreaker_langchain.received import Received, watched
from biasbreaker_langchain.review import (
    HELD_NAMESPACE,
    LocalStore,
    answer_review,
    held_place,
    hold_record,
)
from biasbreaker_langchain.state import BiasGuardState, UnprobedBiasGuardState
from biasbreaker_plugins.langgraph import config_file_problem, config_type_problem
from biasbreaker_plugins.langgraph.machines import run_sync
from biasbreaker_plugins.langgraph.streaming import Capture, silenced

Config = Kernel | Mapping[str, Any] | str | Path | None
"""What ``BiasGuardMiddleware(config=...)`` accepts: ``None`` (the current directory's
configuration), a kernel, a mapping nested like the TOML, or a TOML file's path."""


_T = TypeVar("_T")


def _kernel(config: Config) -> Kernel:
    """The kernel for ``config``, with ``[adapter] framework = "langchain-agent"`` selected.

    Raises:
        ConfigError: The configuration is invalid, or a given kernel selects another adapter.
    """
    select = {"adapter": {"framework": NAME}}
    if isinstance(config, Kernel):
        chosen = config.selected("framework_adapter")
        if chosen != [NAME]:
            raise ConfigError(
                f"[adapter] framework = {chosen!r}: BiasGuardMiddleware needs "
                f"'{NAME}'; set [adapter] framework = '{NAME}' in the configuration"
            )
        return config
    if config is None:
        return Kernel.load(overrides=select)
    if isinstance(config, Mapping):
        adapter = dict(config.get("adapter") or {})
        framework = adapter.get("framework", NAME)
        if framework != NAME:
            raise ConfigError(
                f"adapter.framework = {framework!r}: BiasGuardMiddleware needs '{NAME}'; "
                "leave it out or set it to that"
            )
        return Kernel.load(overrides={**config, "adapter": {**adapter, "framework": NAME}})
    if not isinstance(config, (str, Path)):
        raise ConfigError(config_type_problem("BiasGuardMiddleware()", config))
    if not Path(config).is_file():
        raise ConfigError(config_file_problem("BiasGuardMiddleware()", config))
    return Kernel.load(config_file=config, overrides=select)


def _signed(method: Callable[..., _T], instance: object) -> Callable[..., _T]:
    """``method`` bound to ``instance`` as a partial whose ``__signature__`` is computed once."""
    bound = functools.partial(method, instance)
    bound.__signature__ = inspect.signature(bound)  # type: ignore[attr-defined]
    return bound


class BiasGuardMiddleware(AgentMiddleware[UnprobedBiasGuardState, Any, Any]):
    """Guard every model call of a LangChain ``create_agent`` agent (module docstring).

    Args:
        config: The configuration (:data:`Config`); ``[adapter] framework`` is set to
            ``"langchain-agent"`` for ``None``, a mapping or a path, and must already be for a
            kernel.

    Raises:
        ConfigError: The configuration is invalid (every problem listed, as
            ``biasbreaker run`` would), or selects another adapter.
        PluginError: The ``langchain-agent`` adapter built is not this distribution's.
    """

    # the keys of a middleware that may probe; one at probe_rate 0 has the unprobed ones
    state_schema: type[UnprobedBiasGuardState] = BiasGuardState

    def __init__(self, config: Config = None) -> None:
        super().__init__()
        kernel = _kernel(config)
        kernel.validate()
        adapter = kernel.build("framework_adapter", NAME)
        if not isinstance(adapter, LangChainAgentAdapter):
            raise PluginError(
                f"framework_adapter {NAME!r} built {type(adapter).__name__}, not "
                "biasbreaker-langchain's adapter; is another plugin registering that name?"
            )
        self.kernel = kernel
        self.adapter = adapter
        self.tools = []
        # whether each model call is probed, and its probe
        self._prober = CallProber(adapter)
        # where held replies wait for their review when the agent has no store (this
        # process only: pass create_agent(store=...) to resume in another process)
        self._store = LocalStore()
        # a probed call writes its rotation state: its key is a channel only where one can be
        if adapter.probe.probe_rate <= 0.0:
            self.state_schema = UnprobedBiasGuardState
        # create_agent wraps each middleware's wrap_model_call in LangSmith's ``traceable``,
        # which reads the hook's signature on every call (for a ``run_tree`` parameter), tracing
        # on or off; a bound method's is rebuilt on each read (its ``self`` dropped). The hooks
        # create_agent takes from this instance are partials carrying their signature, which
        # ``inspect.signature`` returns as is
        vars(self).update(
            wrap_model_call=_signed(type(self).wrap_model_call, self),
            awrap_model_call=_signed(type(self).awrap_model_call, self),
        )
        if adapter.traces.enabled:
            # the hook that seals the trace when the agent's turn ends: create_agent adds an
            # ``after_agent`` node only for a class that defines the hook, so a middleware
            # that keeps no trace (the default: no trace_path) runs without that node
            self.__class__ = _SealingBiasGuardMiddleware

    @property
    def name(self) -> str:
        """The middleware's name in the agent's node names (``BiasGuardMiddleware.<hook>``)."""
        return "BiasGuardMiddleware"

    # -- the hooks ---------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Call the model, probe the call, let the reply through, repair it or hold it."""
        config = get_config()
        store, key = held_place(request, self._store)
        found = None if key is None else store.get(HELD_NAMESPACE, key)
        if found is not None:  # a resume: the reply under review is the held one
            answered = answer_review(found.value)
            store.delete(HELD_NAMESPACE, key or "")
            return answered
        capture = Capture()
        received = self._prober.watcher(request)
        given = watching(config, capture, received)
        pool = self.adapter.pool

        async def step(payload: Any) -> Any:
            reissued = rebuilt(request, payload)
            seen = Received()
            quiet = watched(silenced(config), seen)
            job = functools.partial(
                contextvars.copy_context().run, reissue, quiet, handler, reissued
            )
            out = await asyncio.get_running_loop().run_in_executor(pool, job)
            check_received(reissued, seen)
            return output_view(as_response(out)[0])

        # its re-issues start with the model's own call (speculative probing)
        ahead = self._prober.speculate(request, received, step, config, threaded=True)
        try:
            result = handler(request) if given is config else with_config(given, handler, request)
            call = self._prober.begin(request, result, config, capture, received)
            if call.sampled:
                run_sync(self._prober.probe(call, step, ahead))
        finally:
            if ahead is not None:  # the call raised, or it was not probed
                ahead.discard()
        outcome = decide(self.adapter, call, step)
        if not isinstance(outcome, Held):
            return outcome
        record = hold_record(self.adapter.node, call, outcome, key)
        store.put(HELD_NAMESPACE, key or "", record)
        return answer_review(record)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """The async agent's :meth:`wrap_model_call`: the probe's re-issues are coroutines."""
        config = get_config()
        store, key = held_place(request, self._store)
        found = None if key is None else await store.aget(HELD_NAMESPACE, key)
        if found is not None:
            answered = answer_review(found.value)
            await store.adelete(HELD_NAMESPACE, key or "")
            return answered
        capture = Capture()
        received = self._prober.watcher(request)
        given = watching(config, capture, received)

        async def step(payload: Any) -> Any:
            reissued = rebuilt(request, payload)
            seen = Received()
            inner = var_child_runnable_config.set(watched(silenced(config), seen))
            try:
                out = await handler(reissued)
            finally:
                var_child_runnable_config.reset(inner)
            check_received(reissued, seen)
            return output_view(as_response(out)[0])

        # its re-issues start with the model's own call (speculative probing)
        ahead = self._prober.speculate(request, received, step, config, threaded=False)
        try:
            if given is config:  # the call's own config: nothing to set
                result = await handler(request)
            else:
                token = var_child_runnable_config.set(given)
                try:
                    result = await handler(request)
                finally:
                    var_child_runnable_config.reset(token)
            call = self._prober.begin(request, result, config, capture, received)
            if call.sampled:
                await self._prober.probe(call, step, ahead)
        finally:
            if ahead is not None:  # the call raised, or it was not probed
                ahead.discard()
        outcome = await adecide(self.adapter, call, step)
        if not isinstance(outcome, Held):
            return outcome
        record = hold_record(self.adapter.node, call, outcome, key)
        await store.aput(HELD_NAMESPACE, key or "", record)
        return answer_review(record)


class _SealingBiasGuardMiddleware(BiasGuardMiddleware):
    """A :class:`BiasGuardMiddleware` whose trace sink keeps records: it seals the trace.

    Its ``after_agent`` hook (a node ``create_agent`` adds for it) seals the run's trace when
    the agent's turn ends, as a pause for review does (a cut trace fails ``verify``).
    """

    def after_agent(self, state: UnprobedBiasGuardState, runtime: Any) -> dict[str, Any] | None:
        """Seal the run's trace when the agent's turn ends."""
        self.adapter.traces.seal(thread_of(get_config()))
        return None

    async def aafter_agent(
        self, state: UnprobedBiasGuardState, runtime: Any
    ) -> dict[str, Any] | None:
        """:meth:`after_agent` for async agents."""
        return self.after_agent(state, runtime)


__all__ = ["BiasGuardMiddleware", "Config"]
