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
   (:data:`HELD_NAMESPACE`, keyed by the model node's ``Runtime.execution_info``) and the
   call pauses in ``interrupt()`` with a :class:`ReviewRequest`. The resume value
   (:class:`ReviewAnswer`) approves the reply (it is then returned as it was), rejects it (a
   withheld-notice ``AIMessage`` without tool calls is returned instead, so the agent ends) or
   replaces it with the reviewer's text.

On resume LangGraph re-runs the model node: the held reply is found in the store under the
same task key, so the model is not called again, the probe and the machine do not run again,
and the answer applies to the reply the reviewer saw (its SHA-256, ``ReviewAnswer.sha256``).
With ``create_agent(store=...)`` (SQLite, Postgres) the resume works in another process; without
a store the middleware keeps held replies in this process's memory. Review needs a
checkpointer (LangGraph's ``interrupt()`` does).

The agent state never holds the biased reply: ``bb_breaker`` is the machine's snapshot with
the frozen reply and the latest repair standing in as their digests (:func:`_shown_snapshot`),
so no stream mode shows them; the reply is in the review request only.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import operator
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import (
    AIMessage,
    SystemMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.config import get_config
from langgraph.store.base import BaseStore
from langgraph.types import Command, interrupt
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import NotRequired

from biasbreaker.errors import ConfigError, PluginError
from biasbreaker.intervention.runner import InterventionRunner
from biasbreaker.kernel import Kernel
from biasbreaker.machine import ControlMachine
from biasbreaker.probe.budget import RunBudgets
from biasbreaker.types import (
    BreakerAction,
    BreakerDecision,
    FrozenPayload,
    InterventionContext,
    InterventionResult,
    LazyPayload,
)
from biasbreaker_langchain.adapter import LangChainAgentAdapter, MachineHandle
from biasbreaker_langchain.plugin import NAME
from biasbreaker_langchain.received import Received, changed, watched
from biasbreaker_plugins.langgraph import config_file_problem, config_type_problem
from biasbreaker_plugins.langgraph.machines import run_sync
from biasbreaker_plugins.langgraph.probing import (
    HELPER_LOOP,
    Speculation,
    clone_probe,
    full_probe_reason,
    origin_of,
    probe_outcome,
    stop_iteration,
)
from biasbreaker_plugins.langgraph.state import plain_json, shown
from biasbreaker_plugins.langgraph.streaming import (
    Capture,
    Sinks,
    capturing,
    graph_namespace,
    silenced,
)
from biasbreaker_plugins.langgraph.values import Unreadable, read, rebuild

Config = Kernel | Mapping[str, Any] | str | Path | None
"""What ``BiasGuardMiddleware(config=...)`` accepts: ``None`` (the current directory's
configuration), a kernel, a mapping nested like the TOML, or a TOML file's path."""

WITHHELD = (
    "[biasbreaker] The model's reply was withheld: a reviewer rejected it ({reason}). None of "
    "its tool calls ran."
)
"""The text of the ``AIMessage`` that stands in for a rejected reply (``{reason}`` filled)."""

HELD_NAMESPACE = ("biasbreaker", "langchain", "held")
"""The store namespace of replies held for review (key: thread | checkpoint ns | checkpoint id)."""

_T = TypeVar("_T")


class UnprobedBiasGuardState(AgentState[Any]):
    """The agent state keys of a middleware that never probes (``[probe] probe_rate = 0``).

    Private (not in the input/output schema). ``bb_breaker``: the control machine's snapshot
    (``ControlMachine.snapshot()``), or absent before the thread's first guarded call.
    ``bb_network_ewma``: the fast and slow EWMAs of B_net (``NetworkEwma.to_dict()``).
    ``bb_reviews``: one record per answered review (``{"step", "action", "sha256",
    "reason"}``), appended. Each key is a channel of the agent's graph, which LangGraph reads,
    copies and checkpoints at every step of the agent (a model or a tool call): a middleware
    adds only the keys it can write.
    """

    bb_breaker: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    bb_network_ewma: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    bb_reviews: NotRequired[Annotated[list[dict[str, Any]], operator.add, PrivateStateAttr]]


class BiasGuardState(UnprobedBiasGuardState):
    """The agent state keys the middleware adds (private: not in the input/output schema).

    Those of :class:`UnprobedBiasGuardState`, and ``bb_probe_coverage``: the probe's
    covering-rotation state of the model node, axis -> position (``ProbeResult.coverage``;
    docs/detection.md, "Every group covered"), written by probed calls only, so a middleware
    at ``[probe] probe_rate = 0`` has the unprobed schema instead.
    """

    bb_probe_coverage: NotRequired[Annotated[dict[str, int] | None, PrivateStateAttr]]


class ReviewRequest(BaseModel):
    """What ``interrupt()`` hands the reviewer for a held model reply (``.model_dump()``).

    Fields: ``kind`` (always ``"biasbreaker-review"``), ``node``, ``step`` (the guarded call's
    id, ``"<node>@<machine step>"``), ``action`` and ``state`` (the machine's decision),
    ``reason``, ``b_net`` (fast-scale, >= 0), ``probe`` (``{"status", "reason"}``), ``reply``
    (the JSON view of the held messages: text and tool calls as ``{"name", "args"}``) and
    ``sha256`` (of ``reply``'s canonical JSON: echo it in the answer).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["biasbreaker-review"] = "biasbreaker-review"
    node: str
    step: str
    action: str
    state: str
    reason: str
    b_net: float
    probe: dict[str, str]
    reply: Any
    sha256: str
    trail: list[Any] = Field(default_factory=list)


class ReviewAnswer(BaseModel):
    """The resume value of a review: ``Command(resume={"action": ..., "sha256": ...})``.

    Args:
        action: ``"approve"`` (return the held reply as it is), ``"reject"`` (return a
            withheld notice without tool calls: the agent ends) or ``"edit"`` (return an
            ``AIMessage`` with ``content`` and no tool calls; not probed again).
        sha256: The ``sha256`` of the :class:`ReviewRequest` answered; a reply whose hash
            differs (the model answered differently when the node re-ran) is reviewed again.
        content: The replacement text, required for ``"edit"`` only.
        note: Free text kept in ``bb_reviews``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["approve", "reject", "edit"]
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    content: str | None = None
    note: str = ""


@dataclass(frozen=True)
class _Kept:
    """A record kept by :class:`_LocalStore` (``.value``, as a store's ``Item``)."""

    value: dict[str, Any]


class _LocalStore:
    """Where held replies wait for review in an agent without a store: this process's memory.

    The part of ``BaseStore`` the middleware uses (``get``, ``put``, ``delete`` and their
    async forms) over a dict: the lookup every model call makes for a held reply would run a
    batch of store operations in an ``InMemoryStore``. Pass ``create_agent(store=...)`` to
    resume a review in another process.
    """

    def __init__(self) -> None:
        self._kept: dict[tuple[tuple[str, ...], str], _Kept] = {}

    def get(self, namespace: tuple[str, ...], key: str) -> _Kept | None:
        """The record under ``key``, or ``None``."""
        return self._kept.get((namespace, key))

    def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        """Keep ``value`` under ``key`` (replacing what was there)."""
        self._kept[(namespace, key)] = _Kept(value)

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Forget the record under ``key``, if any."""
        self._kept.pop((namespace, key), None)

    async def aget(self, namespace: tuple[str, ...], key: str) -> _Kept | None:
        """:meth:`get`, awaitable."""
        return self.get(namespace, key)

    async def aput(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        """:meth:`put`, awaitable."""
        self.put(namespace, key, value)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """:meth:`delete`, awaitable."""
        self.delete(namespace, key)


@dataclass
class _Call:
    """One guarded model call in progress (views, what the probe made of it, held tokens)."""

    request: ModelRequest[Any]
    response: ModelResponse[Any]
    command: Command[Any] | None
    config: RunnableConfig
    capture: Capture
    input_view: Any = None
    reply: LazyPayload | Any = None
    outcome: dict[str, str] = field(default_factory=dict)
    hold: str | None = None
    sampled: bool = False
    score: float | None = None
    coverage: dict[str, int] | None = None

    @functools.cached_property
    def thread(self) -> str:
        """The run's trace key (:func:`_thread`), computed when first needed."""
        return _thread(self.config)

    @property
    def view(self) -> Any:
        """The JSON view of the reply (:func:`_output_view`).

        Built on the first read when :attr:`reply` defers it (a reply certainly read:
        :func:`_plain_reply`).
        """
        reply = self.reply
        return reply.value if isinstance(reply, LazyPayload) else reply


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


def _as_response(result: Any) -> tuple[ModelResponse[Any], Command[Any] | None]:
    """A handler's result as (``ModelResponse``, the ``Command`` an inner middleware added)."""
    if isinstance(result, ExtendedModelResponse):
        return result.model_response, result.command
    if isinstance(result, AIMessage):
        return ModelResponse(result=[result]), None
    if isinstance(result, ModelResponse):
        return result, None
    raise PluginError(
        f"the model call returned {type(result).__name__}; BiasGuardMiddleware expects a "
        "ModelResponse, an AIMessage or an ExtendedModelResponse from the inner handler"
    )


def _output_view(response: ModelResponse[Any]) -> dict[str, Any]:
    """The JSON view of a reply: ``{"messages": [...], ["structured": ...]}``.

    Raises:
        Unreadable: A message or the structured response cannot be read.
    """
    view: dict[str, Any] = {"messages": read(list(response.result), "reply")}
    if response.structured_response is not None:
        view["structured"] = read(response.structured_response, "reply.structured_response")
    return view


def _plain_reply(response: ModelResponse[Any]) -> bool:
    """Whether :func:`_output_view` reads ``response`` without raising, judged at a glance.

    ``True`` only for what it certainly reads: no structured response, and exact
    ``AIMessage`` replies with text content, tool calls whose arguments are plain JSON
    (:func:`~biasbreaker_plugins.langgraph.state.plain_json`), no invalid tool calls, no
    legacy function call, and ``additional_kwargs`` of plain JSON without OpenAI's
    ``"audio"`` (read by its fields). The fields are read from the message's ``__dict__``
    (pydantic's attribute reads are slow), which :data:`_AI_FIELDS_IN_DICT` says gives the
    same values. ``False`` means "read it to know", never "unreadable".
    """
    if not _AI_FIELDS_IN_DICT or response.structured_response is not None:
        return False
    for message in response.result:
        if type(message) is not AIMessage:
            return False
        fields = message.__dict__
        extra = fields.get("additional_kwargs")
        calls = fields.get("tool_calls")
        if (
            type(fields.get("content")) is not str
            or not isinstance(fields.get("name"), (str, type(None)))
            or fields.get("invalid_tool_calls")
            or type(calls) is not list
            or type(extra) is not dict
            or "audio" in extra
            or extra.get("function_call") is not None
            or not plain_json(list(extra.values()))
        ):
            return False
        for call in calls:
            if type(call) is not dict or "name" not in call or "args" not in call:
                return False
            if not plain_json(call["args"]):
                return False
    return True


_AI_FIELDS_IN_DICT: Final = all(
    name in AIMessage.model_fields and not any(name in vars(klass) for klass in AIMessage.__mro__)
    for name in ("content", "name", "tool_calls", "invalid_tool_calls", "additional_kwargs")
)
"""Whether an ``AIMessage``'s instance dict holds what reading these fields as attributes
returns: each is a declared pydantic field and no class of its MRO defines the name."""


def _input_view(request: ModelRequest[Any]) -> dict[str, Any]:
    """The JSON view of a request: ``{"system": view or None, "messages": [...]}``.

    Raises:
        Unreadable: A message cannot be read.
    """
    system = request.system_message
    return {
        "system": None if system is None else read(system, "request.system_message"),
        "messages": read(list(request.messages), "request.messages"),
    }


def _rebuilt(request: ModelRequest[Any], view: Mapping[str, Any]) -> ModelRequest[Any]:
    """``request`` with the messages of a counterfactual view (ids and metadata kept)."""
    messages = rebuild(list(request.messages), view["messages"])
    system = request.system_message
    if system is not None:
        rebuilt = rebuild(system, view["system"])
        assert isinstance(rebuilt, SystemMessage)
        return request.override(messages=messages, system_message=rebuilt)
    return request.override(messages=messages)


def _check_received(request: ModelRequest[Any], received: Received) -> None:
    """Fail a re-issue whose model received another request than ``request``.

    Raises:
        PluginError: A middleware after the guard changed the re-issued request (the probe
            then fails closed: the step is held, this reason named).
    """
    moved = changed(request, received)
    if moved is not None:
        raise PluginError(f"re-issue: {moved}")


def _reissued(config: RunnableConfig, handler: Callable[[Any], Any], request: Any) -> Any:
    """A sync re-issue in a worker thread; a ``StopIteration`` becomes a ``RuntimeError``.

    asyncio cannot set a ``StopIteration`` on a future, so a re-issue whose model ran out of
    replies (a fake chat model's iterator) would wait out ``call_timeout_s`` and be blamed on
    a time-out (:func:`~biasbreaker_plugins.langgraph.probing.stop_iteration`).
    """
    try:
        return _with_config(config, handler, request)
    except StopIteration as exc:
        raise stop_iteration("the model call", exc) from exc


def _thread(config: RunnableConfig) -> str:
    """The trace key of a run: its thread id (``"default"`` without one), plus a namespace."""
    conf = config.get("configurable") or {}
    thread = str(conf.get("thread_id", "default"))
    namespace = str(conf.get("checkpoint_ns", ""))
    # the model node's own namespace is "model:<task id>"; only a parent graph's part counts
    parent = "|".join(part for part in namespace.split("|")[:-1] if part)
    return f"{thread}/{parent.replace(':', '_')}" if parent else thread


def _watching(
    config: RunnableConfig, capture: Capture, received: Received | None
) -> RunnableConfig:
    """The config of the guarded call: its streams captured, what its model receives watched.

    ``config`` itself when nothing streams and nothing watches
    (:func:`~biasbreaker_plugins.langgraph.streaming.capturing`, ``received`` ``None``).
    """
    given = capturing(config, capture)
    return given if received is None else watched(given, received)


def _signed(method: Callable[..., _T], instance: object) -> Callable[..., _T]:
    """``method`` bound to ``instance`` as a partial whose ``__signature__`` is computed once."""
    bound = functools.partial(method, instance)
    bound.__signature__ = inspect.signature(bound)  # type: ignore[attr-defined]
    return bound


def _with_config(config: RunnableConfig, fn: Callable[..., _T], *args: Any) -> _T:
    token = var_child_runnable_config.set(config)
    try:
        return fn(*args)
    finally:
        var_child_runnable_config.reset(token)


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
        # the probe's covering rotation of the model node (docs/detection.md, "Every group
        # covered"), the latest in a run without a thread id: where the next such run starts
        # (a run with a thread id starts from its bb_probe_coverage and origin, never this)
        self._coverage: dict[str, int] = {}
        # thread -> the run's probe budget ([probe] max_calls_per_*, max_tokens_per_run)
        self._budgets = RunBudgets(adapter.probe.budget)
        # where held replies wait for their review when the agent has no store (this
        # process only: pass create_agent(store=...) to resume in another process)
        self._store = _LocalStore()
        # a probed call writes its rotation state: its key is a channel only where one can be
        if adapter.probe.probe_rate <= 0.0:
            self.state_schema = UnprobedBiasGuardState
        # the outcome of a call not sampled, the same for every such call
        self._not_sampled = f"not sampled at [probe] probe_rate = {adapter.probe.probe_rate:g}"
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
        store, key = self._held_place(request)
        found = None if key is None else store.get(HELD_NAMESPACE, key)
        if found is not None:  # a resume: the reply under review is the held one
            answered = self._answer(found.value)
            store.delete(HELD_NAMESPACE, key or "")
            return answered
        capture = Capture()
        received = self._watcher(request)
        given = _watching(config, capture, received)
        pool = self.adapter.pool

        async def step(payload: Any) -> Any:
            reissued = _rebuilt(request, payload)
            seen = Received()
            quiet = watched(silenced(config), seen)
            job = functools.partial(
                contextvars.copy_context().run, _reissued, quiet, handler, reissued
            )
            out = await asyncio.get_running_loop().run_in_executor(pool, job)
            _check_received(reissued, seen)
            return _output_view(_as_response(out)[0])

        # its re-issues start with the model's own call (speculative probing)
        ahead = self._speculate(request, received, step, config, threaded=True)
        try:
            result = handler(request) if given is config else _with_config(given, handler, request)
            call = self._begin(request, result, config, capture, received)
            if call.sampled:
                run_sync(self._probe(call, step, ahead))
        finally:
            if ahead is not None:  # the call raised, or it was not probed
                ahead.discard()
        outcome = self._decide(call, step)
        if not isinstance(outcome, _Held):
            return outcome
        record = self._hold(call, outcome, key)
        store.put(HELD_NAMESPACE, key or "", record)
        return self._answer(record)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """The async agent's :meth:`wrap_model_call`: the probe's re-issues are coroutines."""
        config = get_config()
        store, key = self._held_place(request)
        found = None if key is None else await store.aget(HELD_NAMESPACE, key)
        if found is not None:
            answered = self._answer(found.value)
            await store.adelete(HELD_NAMESPACE, key or "")
            return answered
        capture = Capture()
        received = self._watcher(request)
        given = _watching(config, capture, received)

        async def step(payload: Any) -> Any:
            reissued = _rebuilt(request, payload)
            seen = Received()
            inner = var_child_runnable_config.set(watched(silenced(config), seen))
            try:
                out = await handler(reissued)
            finally:
                var_child_runnable_config.reset(inner)
            _check_received(reissued, seen)
            return _output_view(_as_response(out)[0])

        # its re-issues start with the model's own call (speculative probing)
        ahead = self._speculate(request, received, step, config, threaded=False)
        try:
            if given is config:  # the call's own config: nothing to set
                result = await handler(request)
            else:
                token = var_child_runnable_config.set(given)
                try:
                    result = await handler(request)
                finally:
                    var_child_runnable_config.reset(token)
            call = self._begin(request, result, config, capture, received)
            if call.sampled:
                await self._probe(call, step, ahead)
        finally:
            if ahead is not None:  # the call raised, or it was not probed
                ahead.discard()
        outcome = await self._adecide(call, step)
        if not isinstance(outcome, _Held):
            return outcome
        record = self._hold(call, outcome, key)
        await store.aput(HELD_NAMESPACE, key or "", record)
        return self._answer(record)

    # -- the steps ---------------------------------------------------------------------------

    def _begin(
        self,
        request: ModelRequest[Any],
        result: Any,
        config: RunnableConfig,
        capture: Capture,
        # an annotation's `|` replaced: equivalent mutants (never evaluated: `from __future__
        # import annotations`)
        received: Received | None,  # pragma: no mutate
    ) -> _Call:
        """Read the call; decide whether the probe runs (``sampled``) or the step is held.

        ``received`` watched the call exactly when it may be sampled (:meth:`_watcher`). A
        sampled call whose model received another request than the guard read (a
        middleware listed after the guard changed it: :mod:`biasbreaker_langchain.received`)
        is held as unreadable, the reason naming the fix.
        """
        response, command = _as_response(result)
        call = _Call(request, response, command, config, capture)
        try:
            if _plain_reply(response):
                # certainly readable: the view is built if the machine freezes it, the probe
                # scores it or a review shows it (most calls do neither when not sampled)
                call.reply = LazyPayload(functools.partial(_output_view, response))
            else:
                call.reply = _output_view(response)
        except Unreadable as exc:
            call.reply = shown([m.model_dump() for m in response.result])
            call.hold = f"the probe cannot read the reply: {exc}"
            call.outcome = {"status": "unreadable", "reason": call.hold}
            return call
        if received is None:  # not sampled (_watcher)
            call.outcome = {"status": "not_sampled", "reason": self._not_sampled}
            return call
        try:
            call.input_view = _input_view(request)
        except Unreadable as exc:
            call.hold = f"the probe cannot read the request: {exc}"
            call.outcome = {"status": "unreadable", "reason": call.hold}
            return call
        moved = changed(request, received)
        if moved is not None:
            call.hold = moved
            call.outcome = {"status": "unreadable", "reason": moved}
            return call
        call.sampled = True
        return call

    # the return annotation's `|` replaced: equivalent mutants (as `_decide`'s)
    def _watcher(self, request: ModelRequest[Any]) -> Received | None:  # pragma: no mutate
        """What watches the request the model receives, when the call may be sampled.

        Whether a call is sampled is a pure function of the seed and the step id
        (:meth:`Probe.should_probe`), known before the model is called; a call that is not
        sampled is never compared with what its model received (:meth:`_begin`), so it is
        not watched (no callback handler is added to it).
        """
        probe = self.adapter.probe
        # at probe_rate 0 no step is sampled (should_probe is u < 0 with u >= 0): no hash
        if probe.probe_rate <= 0.0 or not probe.should_probe(self._step_id(request.state)):
            return None
        return Received()

    def _step_id(self, state: Mapping[str, Any]) -> str:
        raw = state.get("bb_breaker")
        step = int(raw["step"]) if isinstance(raw, Mapping) and "step" in raw else 0
        return f"{self.adapter.node}@{step}"

    def _rotation(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, int]:
        """The rotation state the probe starts from.

        The thread's ``bb_probe_coverage``; else ``{}`` in a run with a thread id (read from
        its origin, :func:`~biasbreaker_plugins.langgraph.probing.origin_of`); else the
        latest state a run without one left.
        """
        saved = state.get("bb_probe_coverage")
        if isinstance(saved, Mapping):
            return {str(axis): pos for axis, pos in saved.items()}
        if origin_of(config, self.adapter.node) is not None:
            return {}
        return dict(self._coverage)

    def _speculate(
        self,
        request: ModelRequest[Any],
        # the annotations' `|` replaced: equivalent mutants (never evaluated: `from __future__
        # import annotations`)
        received: Received | None,  # pragma: no mutate
        step: Callable[[Any], Awaitable[Any]],
        config: RunnableConfig,
        # `*` -> `/` is an equivalent mutant: both callers pass `threaded` by keyword
        *,  # pragma: no mutate
        threaded: bool,
    ) -> Speculation | None:  # pragma: no mutate
        """Start a sampled call's re-issues before the model's own call (speculative probing).

        As the LangGraph adapter does (``Prober.speculate``): the variants need only the
        request, so they are drawn now and re-issued at once, on the running loop or, for a
        sync agent (``threaded``), on the helper loop; :meth:`_probe` scores once the reply
        and all of them are in, with the result probing after the call gives. ``None`` for a
        call not sampled, with ``[probe] speculative = false``, or a request the probe cannot
        read (held after the call, as without speculation).
        """
        if received is None or not self.adapter.context.settings.probe.speculative:
            return None
        try:
            view = _input_view(request)
        except Unreadable:
            return None
        probe = clone_probe(self.adapter.probe)
        probe.budget = self._budgets.get(_thread(config))  # the call's run (its trace key)
        return Speculation.launch(
            probe,
            step,
            view,
            step_id=self._step_id(request.state),
            step_name=self.adapter.node,
            coverage=self._rotation(request.state, config),
            origin=origin_of(config, self.adapter.node),
            loop=HELPER_LOOP.get() if threaded else None,
            full=full_probe_reason(request.state.get("bb_breaker")),
        )

    async def _probe(
        self,
        call: _Call,
        step: Callable[[Any], Awaitable[Any]],
        ahead: Speculation | None = None,  # pragma: no mutate (an annotation, as above)
    ) -> None:
        """Score the call (``score``, ``outcome``), or hold it with why the probe failed.

        ``ahead``: its re-issues started with the model's own call (:meth:`_speculate`), used
        when they were drawn from the request the call was read with, else discarded.
        """
        if ahead is not None and ahead.view != call.input_view:
            ahead.discard()  # the request changed during the call: probe what was read after
            ahead = None
        try:
            if ahead is not None:
                result = await ahead.result(call.view)
            else:
                probe = clone_probe(self.adapter.probe)
                probe.budget = self._budgets.get(call.thread)
                result = await probe.probe(
                    step,
                    call.input_view,
                    call.view,
                    step_id=self._step_id(call.request.state),
                    step_name=self.adapter.node,
                    coverage=self._rotation(call.request.state, call.config),
                    origin=origin_of(call.config, self.adapter.node),
                    full=full_probe_reason(call.request.state.get("bb_breaker")),
                )
        except Exception as exc:  # fail closed: the reply goes to review, named why
            # `True` is an equivalent mutant: after the probe, `sampled` is read only by
            # `Decider.fold`, whose scores start empty for the middleware's one node, so a
            # `None` score and no score give the same B_net (none); false says what happened
            call.sampled = False  # pragma: no mutate
            call.hold = f"probe failed: {type(exc).__name__}: {exc}"
            call.outcome = {"status": "failed", "reason": call.hold}
            return
        # a guard that cannot fire: this call is sampled because should_probe held for its
        # step id before the call (_watcher), and the probe decides on the same id with the
        # same seed and rate (clone_probe). So `is` for `==` (the literal is interned) is an
        # equivalent mutant, and `sampled = True` (also as above); the comparison's other
        # operators, killed (a scored result taken for a not-sampled one), are marked with it
        if result.status == "not_sampled":  # pragma: no mutate
            call.sampled = False  # pragma: no mutate
            call.outcome = {"status": "not_sampled", "reason": result.reason}
            return
        if origin_of(call.config, self.adapter.node) is None:
            self._coverage = dict(result.coverage)
        call.coverage = dict(result.coverage)
        call.score = result.score
        call.outcome = probe_outcome(result)
        if result.holds:  # an unsupported language, [probe] unsupported_language = "hold"
            call.hold = result.reason

    def _held_place(
        self, request: ModelRequest[Any]
    ) -> tuple[BaseStore | _LocalStore, str | None]:  # pragma: no mutate (an annotation)
        """Where this call's held reply is kept: the agent's store (else this process's), key.

        The key is the model node's task as LangGraph re-runs it on resume: thread id,
        checkpoint namespace (the node's task id in it) and checkpoint id
        (``Runtime.execution_info``), the same on every re-run of that task and in a new
        process. ``None`` without execution info (then nothing can be held for a resume).
        """
        runtime = getattr(request, "runtime", None)
        store = getattr(runtime, "store", None)
        info = getattr(runtime, "execution_info", None)
        if not isinstance(store, BaseStore):
            store = self._store
        if info is None:
            return store, None
        return store, f"{info.thread_id}|{info.checkpoint_ns}|{info.checkpoint_id}"

    # the return annotation's `|` replaced: equivalent mutants, annotations are never
    # evaluated (`from __future__ import annotations`)
    def _decide(
        self, call: _Call, step: Callable[..., Awaitable[Any]]
    ) -> ExtendedModelResponse[Any] | _Held:  # pragma: no mutate
        """Step the machine until the reply is let through, repaired, or goes to review.

        The first step runs the configured intervention runner when it trips (route, skeptics
        or MADERA, blend, measured re-check that re-issues the model call through ``step``);
        then the re-step protocol of docs/control.md §3a, as the graph adapter's
        ``bb_breaker`` node: the same reply, the same fast and slow B_net, one machine step at
        a time, until ``PROCEED`` (the reply as it is), a repair whose re-check passed (the
        repair, rebuilt onto the reply's messages) or ``ESCALATE`` (human review). A held
        step (the probe could not read or failed) escalates at once.

        The sync agent's: the machine steps synchronously (``ControlMachine.step``), so a
        step that does not trip, as most do, needs no event loop; a trip runs the runner's
        coroutine hook to completion on this thread's loop
        (:func:`~biasbreaker_plugins.langgraph.machines.run_sync`), as the whole decision
        did before.
        """
        deciding = self._deciding(call, step, sync=True)
        machine = deciding.handle.machine
        fast, slow, kwargs = deciding.fast, deciding.slow, deciding.kwargs
        while True:
            decision = machine.step(fast, slow, **kwargs)
            if deciding.settled(decision):
                return self._decided(call, deciding, decision)

    # the return annotation's `|` replaced: equivalent mutants (as `_decide`'s)
    async def _adecide(
        self, call: _Call, step: Callable[..., Awaitable[Any]]
    ) -> ExtendedModelResponse[Any] | _Held:  # pragma: no mutate
        """:meth:`_decide` for async agents: the machine steps with ``astep``."""
        deciding = self._deciding(call, step, sync=False)
        machine = deciding.handle.machine
        fast, slow, kwargs = deciding.fast, deciding.slow, deciding.kwargs
        while True:
            decision = await machine.astep(fast, slow, **kwargs)
            if deciding.settled(decision):
                return self._decided(call, deciding, decision)

    def _deciding(
        self,
        call: _Call,
        step: Callable[..., Awaitable[Any]],
        # `*` -> `/` is an equivalent mutant: both callers pass `sync` by keyword
        *,  # pragma: no mutate
        sync: bool,
    ) -> _Deciding:
        """The machine of the call (kept or restored from ``bb_breaker``) and its step."""
        adapter = self.adapter
        state = call.request.state
        node = adapter.node
        repair = _Repair(adapter, step)
        raw: Any = state.get("bb_breaker")
        if not raw and adapter.traces.enabled:  # a sink that keeps no records checks none
            adapter.traces.check_new_run(call.thread)
        hook = repair.hook if sync else repair.ahook
        handle = adapter.machines.acquire(raw, hook, adapter.machine_config)
        # a local annotation is never evaluated: its `|` replaced is an equivalent mutant
        scores: dict[str, float | None] = {}  # pragma: no mutate
        ewma, fast, slow, _ = adapter.decider.fold(state, scores, node, call.sampled, call.score)
        local = {n: s for n, s in scores.items() if s is not None}
        machine = handle.machine
        kwargs: dict[str, Any] = {
            "node": node,
            "local_scores": local,
            "weights": adapter.decider.katz,
            "payload": call.reply,
            "step_input": call.input_view,
            "probe": call.outcome or None,
            "hold": call.hold,
        }
        # every re-step either proceeds, repairs, retries after the cool-down or spends the
        # retry budget (docs/control.md §3a); the bound only fails closed if that ever breaks
        budget = (machine.config.max_retries + 1) * (machine.config.cooldown_steps + 3)
        return _Deciding(
            call,
            handle,
            repair,
            ewma,
            fast,
            slow,
            kwargs,
            machine.config.thresholds.tau_exit,
            machine.steps_taken,
            budget,
        )

    # the return annotation's `|` replaced: equivalent mutants (as `_decide`'s)
    def _decided(
        self, call: _Call, deciding: _Deciding, decision: BreakerDecision
    ) -> ExtendedModelResponse[Any] | _Held:  # pragma: no mutate
        """Write the steps' trace records and the state update; release or hold the reply."""
        adapter = self.adapter
        handle = deciding.handle
        machine = handle.machine
        deciding.repair.keep_track_record()
        if adapter.traces.enabled:  # else its records are not kept (TraceSink.enabled)
            adapter.traces.write(call.thread, machine, handle.recorder.records)
        shown_snapshot, exact = _shown_snapshot(machine)
        if exact:  # the next call reads this very object from the state: keep the machine
            adapter.machines.release(handle, shown_snapshot)
        writes: dict[str, Any] = {"bb_breaker": shown_snapshot}
        if deciding.ewma is not call.request.state.get("bb_network_ewma"):
            # a call that moved the EWMAs (Decider.fold gives the state's own value back
            # when nothing was scored): the channel keeps its value otherwise
            writes["bb_network_ewma"] = deciding.ewma
        if call.coverage is not None:
            writes["bb_probe_coverage"] = call.coverage
        if deciding.released:  # the reply as it is (settled on PROCEED, nothing held)
            call.capture.release(call.config)
            return self._respond(call.response, call, writes)
        repaired = deciding.repaired
        if repaired is not None:
            # the reply's own tokens show the biased reply: dropped; the repair is streamed
            # whole to stream_mode="messages" consumers, as the graph adapter does
            Sinks.of(call.config).messages(
                {"messages": list(repaired.result)},
                call.capture.metadata,
                graph_namespace(call.config),
            )
            return self._respond(repaired, call, writes)
        adapter.traces.seal(call.thread)
        step_id = f"{adapter.node}@{machine.steps_taken - 1}"
        return _Held(decision, step_id, writes, deciding.trail)

    def _hold(self, call: _Call, held: _Held, key: str | None) -> dict[str, Any]:
        """The record of a reply held for review, as the store keeps it (plain JSON).

        Raises:
            PluginError: No key (LangGraph gave the model node no ``execution_info``): the
                reply could not be found again on resume.
        """
        if key is None:
            raise PluginError(
                "BiasGuardMiddleware holds a reply for review under the model node's "
                "Runtime.execution_info, which this LangGraph does not provide; install "
                "langgraph >= 1.1"
            )
        decision = held.decision
        sha256 = FrozenPayload.of(call.view).sha256
        request = ReviewRequest(
            node=self.adapter.node,
            step=held.step_id,
            action=decision.action.value,
            state=decision.state.value,
            reason=call.hold or decision.reason,
            b_net=decision.b_net,
            probe=call.outcome,
            reply=call.view,
            sha256=sha256,
            trail=held.trail,
        )
        inner = call.command
        update = inner.update if inner is not None else None
        response = call.response
        return {
            "request": request.model_dump(),
            "messages": messages_to_dict(list(response.result)),
            "structured": response.structured_response,
            "writes": held.writes,
            "inner": dict(update) if isinstance(update, Mapping) else None,
        }

    def _answer(self, record: Mapping[str, Any]) -> ExtendedModelResponse[Any]:
        """Pause in ``interrupt()`` until a reviewer answers for the held reply of ``record``.

        On resume LangGraph re-runs the model node and this runs again from the stored
        record: the model is not called again, the machine does not step again, and the
        answer applies to the very reply the reviewer saw.
        """
        request: dict[str, Any] = dict(record["request"])
        sha256 = str(request["sha256"])
        how = (
            'resume with Command(resume={"action": "approve" | "reject" | "edit", "sha256": '
            f'"{sha256}"[, "content": "..."]}})'
        )
        error: str | None = None
        while True:
            # a bad answer pauses again with the error (raising would replay the same bad
            # resume value into this interrupt() on every later resume: the thread would jam)
            shown_request = dict(request)
            if error is not None:
                shown_request["error"] = error
            raw = interrupt(shown_request)
            try:
                answer = ReviewAnswer.model_validate(raw)
            except ValueError as exc:
                error = f"the resume value of a biasbreaker review is invalid ({exc}); {how}"
                continue
            # `is` for `==` is an equivalent mutant: pydantic gives a validated Literal the
            # Literal's own constant, interned by CPython as this one is (docs/mutants.md,
            # 2026-12-04); the comparison's other operators are marked with it (per line)
            edit = answer.action == "edit"  # pragma: no mutate
            if edit and not answer.content:
                error = f'"edit" needs "content", the replacement text; {how}'
                continue
            if answer.sha256 == sha256:
                break
            error = f"the sha256 answered is not this reply's (it is mistyped or stale); {how}"
        review = {
            "step": request["step"],
            "action": answer.action,
            "sha256": sha256,
            "reason": request["reason"],
            "note": answer.note,
        }
        writes = {**record["writes"], "bb_reviews": [review]}
        inner = record.get("inner")
        if isinstance(inner, Mapping):
            writes = {**inner, **writes}
        match answer.action:  # one of the three (ReviewAnswer), compared by equality
            case "approve":
                messages = messages_from_dict(list(record["messages"]))
                structured = record.get("structured")
                response = ModelResponse(result=messages, structured_response=structured)
            case "edit":
                response = ModelResponse(result=[AIMessage(answer.content)])
            case _:
                withheld = WITHHELD.format(reason=request["reason"])
                response = ModelResponse(result=[AIMessage(withheld)])
        return ExtendedModelResponse(model_response=response, command=Command(update=writes))

    @staticmethod
    def _respond(
        response: ModelResponse[Any], call: _Call, writes: dict[str, Any]
    ) -> ExtendedModelResponse[Any]:
        update = dict(writes)
        inner = call.command
        if inner is not None and isinstance(inner.update, Mapping):
            update = {**inner.update, **update}
        return ExtendedModelResponse(model_response=response, command=Command(update=update))


class _SealingBiasGuardMiddleware(BiasGuardMiddleware):
    """A :class:`BiasGuardMiddleware` whose trace sink keeps records: it seals the trace.

    Its ``after_agent`` hook (a node ``create_agent`` adds for it) seals the run's trace when
    the agent's turn ends, as a pause for review does (a cut trace fails ``verify``).
    """

    def after_agent(self, state: UnprobedBiasGuardState, runtime: Any) -> dict[str, Any] | None:
        """Seal the run's trace when the agent's turn ends."""
        self.adapter.traces.seal(_thread(get_config()))
        return None

    async def aafter_agent(
        self, state: UnprobedBiasGuardState, runtime: Any
    ) -> dict[str, Any] | None:
        """:meth:`after_agent` for async agents."""
        return self.after_agent(state, runtime)


@dataclass
class _Held:
    """A reply the machine did not let through: it goes to review with these writes."""

    decision: BreakerDecision
    step_id: str
    writes: dict[str, Any]
    trail: list[Any]


class _Repair:
    """A model call's intervention runner, built when the machine first trips in the call.

    Most calls never trip: building the runner (a copy of the adapter's, whose re-check
    re-issues this call through ``step``: :meth:`LangChainAgentAdapter.runner_for`) waits
    for the machine's first hook call.
    """

    def __init__(self, adapter: LangChainAgentAdapter, step: Callable[..., Awaitable[Any]]):
        self.adapter = adapter
        self.step = step
        self.runner: InterventionRunner | None = None

    def _runner(self) -> InterventionRunner:
        if self.runner is None:
            self.runner = self.adapter.runner_for(self.step)
        return self.runner

    def ahook(self, context: InterventionContext) -> Awaitable[InterventionResult]:
        """The runner's coroutine hook (``ControlMachine.astep``)."""
        return self._runner().ahook(context)

    def hook(self, context: InterventionContext) -> InterventionResult:
        """The runner's coroutine hook run to completion (``ControlMachine.step``)."""
        return run_sync(self._runner().ahook(context))

    def keep_track_record(self) -> None:
        """Keep what the runner learnt about the skeptics, if the call built one."""
        if self.runner is not None:
            self.adapter.keep_track_record(self.runner)


@dataclass(eq=False)
class _Deciding:
    """One call's machine steps in progress (:meth:`BiasGuardMiddleware._decide`)."""

    call: _Call
    handle: MachineHandle
    repair: _Repair
    ewma: dict[str, Any]
    fast: float
    slow: float
    kwargs: dict[str, Any]
    tau_exit: float
    first: int
    budget: int
    repaired: ModelResponse[Any] | None = None
    released: bool = False
    trail: list[Any] = field(default_factory=list)

    def settled(self, decision: BreakerDecision) -> bool:
        """Whether the steps end with ``decision`` (the step the machine just took).

        They end on ``PROCEED`` of a step that is not held (:attr:`released`), on a repair
        whose re-check passed and that rebuilds onto the reply (:attr:`repaired`), on
        ``ESCALATE``, and after :attr:`budget` steps. The trail of the latest intervention
        is kept (:attr:`trail`).
        """
        machine = self.handle.machine
        call = self.call
        # the result of this very step's intervention, if the hook ran on it (its record
        # carries the result's summary; a record is None only before the first step): only
        # a step that enters INTERVENTION runs it (ControlMachine._plan)
        ran = getattr(machine.last_record, "intervention", None) is not None
        result = machine.last_result if ran else None
        if result is not None:
            events = result.to_json()["trail"]
            self.trail = list(events) if isinstance(events, list) else []
        # `==` for `is` is an equivalent mutant (an enum member is its only instance); the
        # comparison's other operators are marked with it (the pragma is per line)
        proceeds = decision.action is BreakerAction.PROCEED  # pragma: no mutate
        if proceeds and call.hold is None:
            self.released = True
            return True
        if (
            result is not None
            and result.repaired is not None
            and result.recheck_passes(self.tau_exit)
        ):
            self.repaired = _usable_repair(call.request, call.response, result.repaired.thaw())
            if self.repaired is not None:
                return True
        # `==` and `<=` for `is` are equivalent mutants: a BreakerDecision's action is a
        # BreakerAction (a str enum) and "escalate" sorts before "halt", "proceed", "reroute"
        escalates = decision.action is BreakerAction.ESCALATE  # pragma: no mutate
        spent = machine.steps_taken - self.first  # the steps on this reply: 1, 2, 3, ...
        # `==` for `>=` is an equivalent mutant: each step is checked, the count grows by one
        # a step from 1 and the budget is at least 6 (MachineConfig), so it meets it exactly; the
        # comparison's other operators are marked with it (the pragma is per line)
        over = spent >= self.budget  # pragma: no mutate
        return escalates or over


# the return annotation's `|` replaced: equivalent mutants, annotations are never evaluated
# (`from __future__ import annotations`)
def _usable_repair(
    request: ModelRequest[Any], response: ModelResponse[Any], repaired: Any
) -> ModelResponse[Any] | None:  # pragma: no mutate
    """The repaired view rebuilt onto the reply's messages, or ``None`` if unusable.

    The repair is rebuilt onto the reply (ids, types and metadata kept:
    :func:`~biasbreaker_plugins.langgraph.values.rebuild`); a tool call may be renamed to
    another tool of the request. Unusable: a repair of another shape (a key, a message or a
    tool call more or less), a tool the agent does not have, a changed structured response,
    or any part the rebuilt reply does not carry as repaired (its view must be the repaired
    view exactly: what is promoted is what was re-checked).
    """
    view = _output_view(response)
    if not isinstance(repaired, Mapping) or set(repaired) != set(view):
        return None
    if "structured" in view and repaired["structured"] != view["structured"]:
        return None
    seen = repaired["messages"]
    try:
        messages = rebuild(list(response.result), seen)
    except ValueError:
        return None
    # a provider's built-in tool has no name (None): never a call's, which is a str
    tools = {_tool_name(t) for t in request.tools}
    named: list[Any] = []
    # strict=False is an equivalent mutant: rebuild() of a list returns one item per item of
    # the view or raises ValueError (above), so `messages` and `seen` are as long
    for message, item in zip(
        messages,
        seen,
        strict=True,  # pragma: no mutate
    ):
        if isinstance(message, AIMessage) and message.tool_calls and isinstance(item, Mapping):
            wanted = item.get("tool_calls") or []  # as many as the reply's: rebuild checked
            # strict=False is an equivalent mutant: rebuild() raised ValueError (above) for
            # an item with more or fewer tool calls than its message (none, [] or None too)
            calls = [
                {**call, "name": str(want.get("name", call["name"]))}
                for call, want in zip(message.tool_calls, wanted, strict=True)  # pragma: no mutate
            ]
            if any(call["name"] not in tools for call in calls):
                return None
            message = message.model_copy(update={"tool_calls": calls})
        named.append(message)
    out = ModelResponse(result=named, structured_response=response.structured_response)
    try:
        if _output_view(out) != repaired:
            return None
    except Unreadable:
        return None
    return out


def _tool_name(given: Any) -> str | None:
    """The name of a tool as the agent was given it, or ``None`` (a provider's built-in tool).

    A ``BaseTool``, or a provider-format dict: ``{"name": ...}`` as Anthropic's,
    ``{"type": "function", "function": {"name": ...}}`` as OpenAI's.
    """
    if isinstance(given, Mapping):
        function = given.get("function")
        name = function.get("name") if isinstance(function, Mapping) else given.get("name")
    else:
        name = getattr(given, "name", None)
    return name if isinstance(name, str) else None


def _stand_in(sha256: Any) -> dict[str, Any]:
    """A frozen payload that names a withheld one by its digest (``FrozenPayload.to_json``)."""
    return FrozenPayload.of({"withheld": {"sha256": str(sha256)}}).to_json()


def _shown_snapshot(machine: ControlMachine) -> tuple[dict[str, Any], bool]:
    """The machine's snapshot as the agent state keeps it: no reply and no repair in it.

    The state is streamed (``values``, ``updates``, ``debug``, ``tasks``, ``checkpoints``,
    ``astream_events``), so the frozen reply and the latest intervention's repair stand in
    as their digests and its trail is left out; the reply itself is in the review request
    (and the store until answered), its digest in the trace. The machine restored from it
    steps as the full one would: the frozen payload is read only by a repair within the
    model call that froze it, and every later step freezes its own reply.

    Returns:
        The snapshot, and whether it is the machine's own (nothing stood in or left out:
        no frozen reply, no intervention result), which ``ControlMachine.restore`` rebuilds
        exactly into this machine (then the machine may be kept: :class:`MachineCache`).
    """
    snapshot = machine.snapshot()  # a new dict (its "config" shared, never changed here)
    exact = True
    frozen = snapshot.get("frozen_payload")
    if isinstance(frozen, Mapping):
        snapshot["frozen_payload"] = _stand_in(frozen["sha256"])
        exact = False
    result = snapshot.get("result")
    if isinstance(result, Mapping):
        shown_result = dict(result)
        repaired = shown_result.get("repaired")
        if isinstance(repaired, Mapping):
            shown_result["repaired"] = _stand_in(repaired["sha256"])
        shown_result["trail"] = []
        snapshot["result"] = shown_result
        exact = False
    return snapshot, exact


__all__ = [
    "WITHHELD",
    "BiasGuardMiddleware",
    "BiasGuardState",
    "Config",
    "ReviewAnswer",
    "ReviewRequest",
    "UnprobedBiasGuardState",
]
