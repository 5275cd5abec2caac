"""Stepping the control machine on a model call: let it through, repair it, or hold it.

:func:`decide` (:func:`adecide` in an async agent) folds the call's score into B_net and its
EWMAs, steps the machine restored from (or kept with) the state's ``bb_breaker``, and, when
it trips, runs the configured intervention runner (:class:`Repair`, built at the first trip)
and re-steps on the same reply (docs/control.md §3a, :class:`Deciding`) until the reply
proceeds, a repair that passed its re-check is returned (:func:`usable_repair`), or the
machine escalates: then the reply goes to review (:class:`Held`,
:mod:`biasbreaker_langchain.review`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage
from langgraph.types import Command

from biasbreaker.intervention.runner import InterventionRunner
from biasbreaker.types import (
    BreakerAction,
    BreakerDecision,
    InterventionContext,
    InterventionResult,
)
from biasbreaker_langchain.adapter import LangChainAgentAdapter, MachineHandle
from biasbreaker_langchain.call import Call, output_view
from biasbreaker_langchain.state import shown_snapshot
from biasbreaker_plugins.langgraph.machines import run_sync
from biasbreaker_plugins.langgraph.streaming import Sinks, graph_namespace
from biasbreaker_plugins.langgraph.values import Unreadable, rebuild


# the return annotation's `|` replaced: equivalent mutants, annotations are never
# evaluated (`from __future__ import annotations`)
def decide(
    adapter: LangChainAgentAdapter, call: Call, step: Callable[..., Awaitable[Any]]
) -> ExtendedModelResponse[Any] | Held:  # pragma: no mutate
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
    deciding = start_deciding(adapter, call, step, sync=True)
    machine = deciding.handle.machine
    fast, slow, kwargs = deciding.fast, deciding.slow, deciding.kwargs
    while True:
        decision = machine.step(fast, slow, **kwargs)
        if deciding.settled(decision):
            return decided(adapter, call, deciding, decision)


# the return annotation's `|` replaced: equivalent mutants (as `decide`'s)
async def adecide(
    adapter: LangChainAgentAdapter, call: Call, step: Callable[..., Awaitable[Any]]
) -> ExtendedModelResponse[Any] | Held:  # pragma: no mutate
    """:func:`decide` for async agents: the machine steps with ``astep``."""
    deciding = start_deciding(adapter, call, step, sync=False)
    machine = deciding.handle.machine
    fast, slow, kwargs = deciding.fast, deciding.slow, deciding.kwargs
    while True:
        decision = await machine.astep(fast, slow, **kwargs)
        if deciding.settled(decision):
            return decided(adapter, call, deciding, decision)


def start_deciding(
    adapter: LangChainAgentAdapter,
    call: Call,
    step: Callable[..., Awaitable[Any]],
    # `*` -> `/` is an equivalent mutant: both callers pass `sync` by keyword
    *,  # pragma: no mutate
    sync: bool,
) -> Deciding:
    """The machine of the call (kept or restored from ``bb_breaker``) and its step."""
    state = call.request.state
    node = adapter.node
    repair = Repair(adapter, step)
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
    return Deciding(
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


# the return annotation's `|` replaced: equivalent mutants (as `decide`'s)
def decided(
    adapter: LangChainAgentAdapter, call: Call, deciding: Deciding, decision: BreakerDecision
) -> ExtendedModelResponse[Any] | Held:  # pragma: no mutate
    """Write the steps' trace records and the state update; release or hold the reply."""
    handle = deciding.handle
    machine = handle.machine
    deciding.repair.keep_track_record()
    if handle.recorder is not None:  # a trace is kept (MachineCache: recorded)
        adapter.traces.write(call.thread, machine, handle.recorder.records)
    snapshot, exact = shown_snapshot(machine)
    if exact:  # the next call reads this very object from the state: keep the machine
        adapter.machines.release(handle, snapshot)
    writes: dict[str, Any] = {"bb_breaker": snapshot}
    if deciding.ewma is not call.request.state.get("bb_network_ewma"):
        # a call that moved the EWMAs (Decider.fold gives the state's own value back
        # when nothing was scored): the channel keeps its value otherwise
        writes["bb_network_ewma"] = deciding.ewma
    if call.coverage is not None:
        writes["bb_probe_coverage"] = call.coverage
    if deciding.released:  # the reply as it is (settled on PROCEED, nothing held)
        call.capture.release(call.config)
        return respond(call.response, call, writes)
    repaired = deciding.repaired
    if repaired is not None:
        # the reply's own tokens show the biased reply: dropped; the repair is streamed
        # whole to stream_mode="messages" consumers, as the graph adapter does
        Sinks.of(call.config).messages(
            {"messages": list(repaired.result)},
            call.capture.metadata,
            graph_namespace(call.config),
        )
        return respond(repaired, call, writes)
    adapter.traces.seal(call.thread)
    step_id = f"{adapter.node}@{machine.steps_taken - 1}"
    return Held(decision, step_id, writes, deciding.trail)


def respond(
    response: ModelResponse[Any], call: Call, writes: dict[str, Any]
) -> ExtendedModelResponse[Any]:
    """``response`` with the state update ``writes`` (over an inner middleware's update)."""
    update = dict(writes)
    inner = call.command
    if inner is not None and isinstance(inner.update, Mapping):
        update = {**inner.update, **update}
    return ExtendedModelResponse(model_response=response, command=Command(update=update))


@dataclass
class Held:
    """A reply the machine did not let through: it goes to review with these writes."""

    decision: BreakerDecision
    step_id: str
    writes: dict[str, Any]
    trail: list[Any]


class Repair:
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
class Deciding:
    """One call's machine steps in progress (:func:`decide`)."""

    call: Call
    handle: MachineHandle
    repair: Repair
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
        # `==` for `is` is an equivalent mutant (an enum member is its only instance); the
        # comparison's other operators are marked with it (the pragma is per line)
        proceeds = decision.action is BreakerAction.PROCEED  # pragma: no mutate
        if proceeds and call.hold is None:
            # released before the step's record is read: no trail is wanted, and a machine
            # that records nothing builds the record only when it is read (MachineCache)
            self.released = True
            return True
        # the result of this very step's intervention, if the hook ran on it (its record
        # carries the result's summary; a record is None only before the first step): only
        # a step that enters INTERVENTION runs it (ControlMachine._plan)
        ran = getattr(machine.last_record, "intervention", None) is not None
        result = machine.last_result if ran else None
        if result is not None:
            events = result.to_json()["trail"]
            self.trail = list(events) if isinstance(events, list) else []
        if (
            result is not None
            and result.repaired is not None
            and result.recheck_passes(self.tau_exit)
        ):
            self.repaired = usable_repair(call.request, call.response, result.repaired.thaw())
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
def usable_repair(
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
    view = output_view(response)
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
        if output_view(out) != repaired:
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


__all__ = [
    "Deciding",
    "Held",
    "Repair",
    "adecide",
    "decide",
    "decided",
    "respond",
    "start_deciding",
    "usable_repair",
]
