"""``BiasGuardMiddleware``: every model call of a ``create_agent`` agent is a guarded step.

::

    from langchain.agents import create_agent
    from biasbreaker_langchain import BiasGuardMiddleware

    agent = create_agent(model, tools=[...], middleware=[BiasGuardMiddleware()],
                         checkpointer=saver)

In ``wrap_model_call`` (and ``awrap_model_call``) the middleware:

1. calls the model once (the inner handler) with every stream sink *capturing*: its tokens
   are held (:class:`biasbreaker_plugins.langgraph.streaming.Capture`);
2. reads the request (system message + messages, tool results included) and the response
   (messages, tool calls as structured ``{"name", "args"}``, the structured response) into
   JSON views (:func:`biasbreaker_plugins.langgraph.values.read`); a part it cannot read holds
   the step with the key and type named;
3. when the input names a protected group, re-issues the call on ``k`` counterfactual
   variants of the messages and ``r`` same-group resamples (:class:`biasbreaker.probe.Probe`,
   concurrently: coroutines in an async agent, worker threads in a sync one), every re-issue
   silenced, and scores how much more the reply moves under the swap than under resampling;
4. folds the score into B_net and its EWMAs and steps the control machine, restored from and
   saved to the agent's state (``bb_breaker``, ``bb_network_ewma``: checkpointers persist
   them; both are private, so they are not in the agent's input or output schema);
5. on ``PROCEED`` releases the held tokens and returns the response with the state update; on
   any other action the response is **not** returned (so it is never appended to the messages
   and none of its tool calls reaches the tool node): the trace is sealed and the call
   pauses in ``interrupt()`` with a :class:`ReviewRequest`. The resume value
   (:class:`ReviewAnswer`) approves the reply (it is then returned as it was), rejects it (a
   withheld-notice ``AIMessage`` without tool calls is returned instead, so the agent ends) or
   replaces it with the reviewer's text.

On resume LangGraph re-runs the model node: the model is called again, and the reply is
promoted only if its SHA-256 is the one the reviewer approved (``ReviewAnswer.sha256``);
otherwise the new reply goes to review again. Review needs a checkpointer (LangGraph's
``interrupt()`` does); without one the run raises and nothing is appended either way.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import operator
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.config import get_config
from langgraph.types import Command, interrupt
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import NotRequired

from biasbreaker.errors import ConfigError, PluginError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import ControlMachine
from biasbreaker.trace import StepRecord
from biasbreaker.types import BreakerAction, BreakerDecision, FrozenPayload
from biasbreaker_langchain.adapter import LangChainAgentAdapter
from biasbreaker_langchain.plugin import NAME
from biasbreaker_plugins.langgraph import config_file_problem, config_type_problem
from biasbreaker_plugins.langgraph.machines import run_sync
from biasbreaker_plugins.langgraph.probing import clone_probe, probe_outcome
from biasbreaker_plugins.langgraph.state import shown
from biasbreaker_plugins.langgraph.streaming import Capture, capturing, silenced
from biasbreaker_plugins.langgraph.values import Unreadable, read, rebuild

Config = Kernel | Mapping[str, Any] | str | Path | None
"""What ``BiasGuardMiddleware(config=...)`` accepts: ``None`` (the current directory's
configuration), a kernel, a mapping nested like the TOML, or a TOML file's path."""

WITHHELD = (
    "[biasbreaker] The model's reply was withheld: a reviewer rejected it ({reason}). None of "
    "its tool calls ran."
)
"""The text of the ``AIMessage`` that stands in for a rejected reply (``{reason}`` filled)."""

_T = TypeVar("_T")


class BiasGuardState(AgentState[Any]):
    """The agent state keys the middleware adds (private: not in the input/output schema).

    ``bb_breaker``: the control machine's snapshot (``ControlMachine.snapshot()``), or absent
    before the thread's first guarded call. ``bb_network_ewma``: the fast and slow EWMAs of
    B_net (``NetworkEwma.to_dict()``). ``bb_reviews``: one record per answered review
    (``{"step", "action", "sha256", "reason"}``), appended. ``bb_probe_coverage``: the
    probe's covering-rotation state of the model node, axis -> position
    (``ProbeResult.coverage``; docs/detection.md, "Every group covered").
    """

    bb_breaker: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    bb_network_ewma: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    bb_reviews: NotRequired[Annotated[list[dict[str, Any]], operator.add, PrivateStateAttr]]
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


@dataclass
class _Call:
    """One guarded model call in progress (views, what the probe made of it, held tokens)."""

    request: ModelRequest[Any]
    response: ModelResponse[Any]
    command: Command[Any] | None
    config: RunnableConfig
    capture: Capture
    thread: str
    input_view: Any = None
    view: Any = None
    outcome: dict[str, str] = field(default_factory=dict)
    hold: str | None = None
    sampled: bool = False
    score: float | None = None
    coverage: dict[str, int] | None = None


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


def _thread(config: RunnableConfig) -> str:
    """The trace key of a run: its thread id (``"default"`` without one), plus a namespace."""
    conf = config.get("configurable") or {}
    thread = str(conf.get("thread_id", "default"))
    namespace = str(conf.get("checkpoint_ns", ""))
    # the model node's own namespace is "model:<task id>"; only a parent graph's part counts
    parent = "|".join(part for part in namespace.split("|")[:-1] if part)
    return f"{thread}/{parent.replace(':', '_')}" if parent else thread


def _resuming(config: RunnableConfig) -> bool:
    """Whether the running node is re-run to answer an ``interrupt()`` (a resume value waits).

    Reads LangGraph's task scratchpad (``__pregel_scratchpad``: ``resume`` values addressed
    to this task, or a resume value not addressed to any interrupt).
    """
    scratchpad = (config.get("configurable") or {}).get("__pregel_scratchpad")
    if scratchpad is None:
        return False
    if getattr(scratchpad, "resume", None):
        return True
    null_resume = getattr(scratchpad, "get_null_resume", None)
    return null_resume is not None and null_resume(False) is not None


def _with_config(config: RunnableConfig, fn: Callable[..., _T], *args: Any) -> _T:
    token = var_child_runnable_config.set(config)
    try:
        return fn(*args)
    finally:
        var_child_runnable_config.reset(token)


class BiasGuardMiddleware(AgentMiddleware[BiasGuardState, Any, Any]):
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

    state_schema = BiasGuardState

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
        # covered"), the latest in any thread: where a thread without bb_probe_coverage starts
        self._coverage: dict[str, int] = {}

    # -- the hooks ---------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Call the model, probe the call, let the reply through or hold it for review."""
        config = get_config()
        capture = Capture()
        result = _with_config(capturing(config, capture), handler, request)
        call = self._begin(request, result, config, capture)
        if call.sampled:
            pool = self.adapter.pool

            async def step(payload: Any) -> Any:
                quiet = silenced(call.config)
                job = functools.partial(
                    contextvars.copy_context().run,
                    _with_config,
                    quiet,
                    handler,
                    _rebuilt(call.request, payload),
                )
                out = await asyncio.get_running_loop().run_in_executor(pool, job)
                return _output_view(_as_response(out)[0])

            run_sync(self._probe(call, step))
        return self._finish(call)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """The async agent's :meth:`wrap_model_call`: the probe's re-issues are coroutines."""
        config = get_config()
        capture = Capture()
        token = var_child_runnable_config.set(capturing(config, capture))
        try:
            result = await handler(request)
        finally:
            var_child_runnable_config.reset(token)
        call = self._begin(request, result, config, capture)
        if call.sampled:

            async def step(payload: Any) -> Any:
                inner = var_child_runnable_config.set(silenced(call.config))
                try:
                    out = await handler(_rebuilt(call.request, payload))
                finally:
                    var_child_runnable_config.reset(inner)
                return _output_view(_as_response(out)[0])

            await self._probe(call, step)
        return self._finish(call)

    def after_agent(self, state: BiasGuardState, runtime: Any) -> dict[str, Any] | None:
        """Seal the run's trace when the agent's turn ends (a cut trace fails ``verify``)."""
        self.adapter.traces.seal(_thread(get_config()))
        return None

    async def aafter_agent(self, state: BiasGuardState, runtime: Any) -> dict[str, Any] | None:
        """:meth:`after_agent` for async agents."""
        return self.after_agent(state, runtime)

    # -- the steps ---------------------------------------------------------------------------

    def _begin(
        self, request: ModelRequest[Any], result: Any, config: RunnableConfig, capture: Capture
    ) -> _Call:
        """Read the call; decide whether the probe runs (``sampled``) or the step is held."""
        response, command = _as_response(result)
        call = _Call(request, response, command, config, capture, _thread(config))
        try:
            call.view = _output_view(response)
        except Unreadable as exc:
            call.view = shown([m.model_dump() for m in response.result])
            call.hold = f"the probe cannot read the reply: {exc}"
            call.outcome = {"status": "unreadable", "reason": call.hold}
            return call
        probe = self.adapter.probe
        step_id = self._step_id(request.state)
        if probe.probe_rate <= 0.0 or not probe.should_probe(step_id):
            reason = f"not sampled at [probe] probe_rate = {probe.probe_rate:g}"
            call.outcome = {"status": "not_sampled", "reason": reason}
            return call
        try:
            call.input_view = _input_view(request)
        except Unreadable as exc:
            call.hold = f"the probe cannot read the request: {exc}"
            call.outcome = {"status": "unreadable", "reason": call.hold}
            return call
        call.sampled = True
        return call

    def _step_id(self, state: Mapping[str, Any]) -> str:
        raw = state.get("bb_breaker")
        step = int(raw["step"]) if isinstance(raw, Mapping) and "step" in raw else 0
        return f"{self.adapter.node}@{step}"

    def _rotation(self, state: Mapping[str, Any]) -> dict[str, int]:
        """The rotation state the probe starts from: the thread's, else the latest seen."""
        saved = state.get("bb_probe_coverage")
        if isinstance(saved, Mapping):
            return {str(axis): pos for axis, pos in saved.items()}
        return dict(self._coverage)

    async def _probe(self, call: _Call, step: Callable[[Any], Awaitable[Any]]) -> None:
        """Score the call (``score``, ``outcome``), or hold it with why the probe failed."""
        probe = clone_probe(self.adapter.probe)
        try:
            result = await probe.probe(
                step,
                call.input_view,
                call.view,
                step_id=self._step_id(call.request.state),
                step_name=self.adapter.node,
                coverage=self._rotation(call.request.state),
            )
        except Exception as exc:  # fail closed: the reply goes to review, named why
            call.sampled = False
            call.hold = f"probe failed: {type(exc).__name__}: {exc}"
            call.outcome = {"status": "failed", "reason": call.hold}
            return
        if result.status == "not_sampled":
            call.sampled = False
            call.outcome = {"status": "not_sampled", "reason": result.reason}
            return
        self._coverage = dict(result.coverage)
        call.coverage = dict(result.coverage)
        call.score = result.score
        call.outcome = probe_outcome(result)
        if result.holds:  # an unsupported language, [probe] unsupported_language = "hold"
            call.hold = result.reason

    def _finish(self, call: _Call) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Step the machine; return the reply with the state update, or hold it for review."""
        adapter = self.adapter
        state = call.request.state
        node = adapter.node
        raw: Any = state.get("bb_breaker")
        records: list[StepRecord] = []
        if raw:
            machine = ControlMachine.restore(raw, recorder=records.append)
        elif _resuming(call.config):
            # the thread's first call, re-run on resume after a review: the file holds only
            # this very step, written before interrupt(); it is written again from step 0
            path = adapter.traces.path(call.thread)
            if path is not None and path.exists():
                path.unlink()
            machine = ControlMachine(adapter.machine_config, recorder=records.append)
        else:
            adapter.traces.check_new_run(call.thread)
            machine = ControlMachine(adapter.machine_config, recorder=records.append)
        scores: dict[str, float | None] = {}
        ewma, fast, slow, _ = adapter.decider.fold(state, scores, node, call.sampled, call.score)
        step_id = f"{node}@{machine.steps_taken}"
        decision = machine.step(
            fast,
            slow,
            node=node,
            local_scores={n: s for n, s in scores.items() if s is not None},
            weights=adapter.decider.katz,
            payload=call.view,
            step_input=call.input_view,
            probe=call.outcome or None,
            hold=call.hold,
        )
        adapter.traces.write(call.thread, machine, records)
        writes: dict[str, Any] = {"bb_breaker": machine.snapshot(), "bb_network_ewma": ewma}
        if call.coverage is not None:
            writes["bb_probe_coverage"] = call.coverage
        if decision.action is BreakerAction.PROCEED and call.hold is None:
            call.capture.release(call.config)
            return self._respond(call.response, call, writes)
        adapter.traces.seal(call.thread)
        return self._review(call, decision, step_id, writes)

    def _review(
        self, call: _Call, decision: BreakerDecision, step_id: str, writes: dict[str, Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Pause in ``interrupt()`` until a reviewer answers for this exact reply."""
        sha256 = FrozenPayload.of(call.view).sha256
        request = ReviewRequest(
            node=self.adapter.node,
            step=step_id,
            action=decision.action.value,
            state=decision.state.value,
            reason=call.hold or decision.reason,
            b_net=decision.b_net,
            probe=call.outcome,
            reply=call.view,
            sha256=sha256,
        )
        how = (
            'resume with Command(resume={"action": "approve" | "reject" | "edit", "sha256": '
            f'"{sha256}"[, "content": "..."]}})'
        )
        error: str | None = None
        while True:
            # a bad answer pauses again with the error (raising would replay the same bad
            # resume value into this interrupt() on every later resume: the thread would jam)
            shown_request = request.model_dump()
            if error is not None:
                shown_request["error"] = error
            raw = interrupt(shown_request)
            try:
                answer = ReviewAnswer.model_validate(raw)
            except ValueError as exc:
                error = f"the resume value of a biasbreaker review is invalid ({exc}); {how}"
                continue
            if answer.action == "edit" and not answer.content:
                error = f'"edit" needs "content", the replacement text; {how}'
                continue
            if answer.sha256 == sha256:
                break
            # the re-run model answered differently from what was reviewed: review this one
            error = f"the sha256 answered is not this reply's (it changed, or is mistyped); {how}"
        record = {
            "step": step_id,
            "action": answer.action,
            "sha256": sha256,
            "reason": request.reason,
            "note": answer.note,
        }
        writes["bb_reviews"] = [record]
        if answer.action == "approve" and call.hold is None:
            call.capture.release(call.config)
            return self._respond(call.response, call, writes)
        if answer.action == "approve":
            # a held reply the probe could not read: approving it lets it through as it is
            return self._respond(call.response, call, writes)
        if answer.action == "edit":
            return self._respond(ModelResponse(result=[AIMessage(answer.content)]), call, writes)
        notice = AIMessage(WITHHELD.format(reason=request.reason))
        return self._respond(ModelResponse(result=[notice]), call, writes)

    @staticmethod
    def _respond(
        response: ModelResponse[Any], call: _Call, writes: dict[str, Any]
    ) -> ExtendedModelResponse[Any]:
        update = dict(writes)
        inner = call.command
        if inner is not None and isinstance(inner.update, Mapping):
            update = {**inner.update, **update}
        return ExtendedModelResponse(model_response=response, command=Command(update=update))


__all__ = [
    "WITHHELD",
    "BiasGuardMiddleware",
    "BiasGuardState",
    "Config",
    "ReviewAnswer",
    "ReviewRequest",
]
