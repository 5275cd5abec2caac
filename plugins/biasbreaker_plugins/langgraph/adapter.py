"""The guard of one LangGraph graph: probe, propagate, decide, stage, promote, repair, review.

One :class:`GraphGuard` serves one guarded graph (every thread run on it). A guarded node's
task does, in order (docs/langgraph.md):

1. run the user's node and split its return value into the state update and its ``Command``
   destinations; nothing is written yet;
2. probe it (:class:`biasbreaker.probe.Probe`): re-run the node on counterfactual variants of
   the application's part of its input state, and on same-group resamples, concurrently;
3. *inline* nodes fold the local score into ``bb_local_scores``, compute B_net
   (:func:`biasbreaker.propagation.network_score` with the graph's Katz weights) and the EWMAs,
   and preview the control machine's step: if the step would *not* start an intervention it
   is committed (snapshot to ``bb_breaker``, trace record) and, on ``PROCEED``, the update is
   returned together with the ``bb_`` keys: promoted in the node's own task. Otherwise the
   update is staged in ``bb_unverified_output`` and the node returns :class:`Halt` rerouting to
   ``bb_breaker`` (trip or held) or ``bb_review`` (escalated); its edges do not fire;
4. *queued* nodes (those that may run in parallel with another guarded node) stage their
   update and score and reroute to ``bb_breaker``, which checks the staged outputs one after
   another (step 3 for each).

``bb_breaker`` is the only node that steps the machine for held outputs, one step per
super-step (so each transition is checkpointed before the next starts): the pending step with
the real intervention hook, then the re-step protocol of docs/control.md §3a with the same held
output and the same fast and slow B_net, until the output is let through (probation passed,
or a repair that passed its re-check) or escalated to ``bb_review``. ``bb_review`` pauses with
``interrupt()``; resuming with a :class:`~biasbreaker_plugins.langgraph.review.ReviewDecision`
lets the output through, edits it or drops it. Outputs let through by ``bb_breaker`` or
``bb_review`` are promoted with the other outputs of their super-step (:class:`_Work`).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config, get_store, get_stream_writer
from langgraph.errors import GraphInterrupt
from langgraph.runtime import get_runtime
from langgraph.types import Command, Send, interrupt

from biasbreaker.errors import ConfigError
from biasbreaker.intervention.panel import SkepticPanel
from biasbreaker.intervention.router import checked_route
from biasbreaker.intervention.runner import InterventionRunner, ProbeRechecker, as_text
from biasbreaker.intervention.types import PanelRun
from biasbreaker.intervention.types import ReviewRequest as SkepticRequest
from biasbreaker.machine import AnyHook, ControlMachine, MachineConfig
from biasbreaker.probe import Probe, build_probe
from biasbreaker.propagation import NetworkEwma, network_score
from biasbreaker.registry import BuildContext
from biasbreaker.types import (
    BreakerAction,
    BreakerDecision,
    BreakerState,
    FrozenPayload,
    InterventionContext,
    canonical_json,
)
from biasbreaker_plugins.langgraph._internals import Halt, Promote, write_problem
from biasbreaker_plugins.langgraph._machines import (
    Handle,
    Machines,
    Traces,
    commit_records,
    run_sync,
)
from biasbreaker_plugins.langgraph._panel import (
    ReplayPanel,
    outcome_from_json,
    outcome_to_json,
    review_one,
)
from biasbreaker_plugins.langgraph.review import ReviewDecision, ReviewRequest
from biasbreaker_plugins.langgraph.state import (
    BB_KEYS,
    annotation_problem,
    json_problem,
    shown,
    user_part,
)

if TYPE_CHECKING:
    from langgraph.graph import StateGraph

    from biasbreaker_plugins.langgraph.graph import GuardedStateGraph
    from biasbreaker_plugins.langgraph_plugin import LangGraphOptions

BREAKER: Final = "bb_breaker"
REVIEW: Final = "bb_review"
SKEPTIC: Final = "bb_skeptic"
AGGREGATE: Final = "bb_aggregate"
ADDED_NODES: Final = (BREAKER, REVIEW, SKEPTIC, AGGREGATE)
"""Names of the nodes ``guard()`` adds (the Send panel's two only with ``panel = "send"``)."""
PROMOTERS: Final = (BREAKER, REVIEW)

INJECTABLE: Final = ("config", "runtime", "writer", "store")
_INJECTED: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar("_INJECTED")
"""The LangGraph objects injected into the guarded call being probed, for its re-runs."""
Mode = Literal["inline", "queued"]


def _interrupt(value: Any, config: RunnableConfig) -> Any:
    """LangGraph's ``interrupt(value)``, also inside async runs on Python 3.10.

    ``interrupt()`` finds its task through the current runnable config. On Python < 3.11 an
    async run cannot hand that config to a sync node it executes in a worker thread (asyncio
    tasks take no context argument there), so ``interrupt()`` raises "Called get_config
    outside of a runnable context". The node is given its config anyway; set it for the call.
    """
    if sys.version_info >= (3, 11):
        return interrupt(value)
    from langchain_core.runnables.config import var_child_runnable_config

    token = var_child_runnable_config.set(config)
    try:
        return interrupt(value)
    finally:
        var_child_runnable_config.reset(token)


@dataclass(frozen=True)
class GuardedNode:
    """A guarded node.

    Args:
        name: The node's name in the graph.
        fn: The user's function (sync or async), as written.
        is_async: Whether ``fn`` is a coroutine function.
        probe: Whether the node is probed (``guard_node(probe=False)`` turns it off).
        mode: ``"inline"`` (checked in its own task) or ``"queued"`` (checked by
            ``bb_breaker``, because it may run in parallel with another guarded node).
        first: Name of ``fn``'s first parameter (the state).
        inject: The LangGraph-injected parameters ``fn`` accepts (config, runtime, writer,
            store).
    """

    name: str
    fn: Callable[..., Any]
    is_async: bool
    probe: bool
    mode: Mode
    first: str
    inject: tuple[str, ...]


@dataclass
class _Call:
    """One guarded call in progress."""

    node: GuardedNode
    state: Mapping[str, Any]
    update: dict[str, Any]
    goto: list[Any]
    command: Command[Any] | None
    key: str
    step_id: str
    thread: str
    lg_step: int
    given_input: dict[str, Any] | None = None
    sampled: bool = False
    score: float | None = None
    probe_error: str | None = None
    json_error: str | None = None
    probe_summary: dict[str, Any] = field(default_factory=dict)
    injected: Mapping[str, Any] = field(default_factory=dict)

    @property
    def probe_input(self) -> dict[str, Any]:
        """The application's part of the input state (what the probe varies), computed once."""
        if self.given_input is None:
            self.given_input = user_part(dict(self.state))
        return self.given_input


def _split_output(node: str, out: Any) -> tuple[dict[str, Any], list[Any], Command[Any] | None]:
    """A node's return value as (update dict, Command destinations, the Command or None)."""
    if out is None:
        return {}, [], None
    if isinstance(out, dict):
        return dict(out), [], None
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
        elif isinstance(raw, (list, tuple)):
            for pair in raw:
                if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                    raise ConfigError(
                        f"guarded node {node!r} returned Command(update={raw!r}); give a dict"
                    )
                if pair[0] in update:
                    raise ConfigError(
                        f"guarded node {node!r} writes {pair[0]!r} twice in one Command; "
                        "return a dict update"
                    )
                update[pair[0]] = pair[1]
        elif raw is not None:
            raise ConfigError(
                f"guarded node {node!r} returned Command(update=<{type(raw).__name__}>); give "
                "a dict"
            )
        goto = out.goto
        targets: list[Any] = [goto] if isinstance(goto, (str, Send)) else list(goto) if goto else []
        return update, targets, out
    raise ConfigError(
        f"guarded node {node!r} returned {type(out).__name__}; a guarded node returns a dict "
        "update, a Command or None"
    )


def _goto_json(node: str, goto: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for target in goto:
        if isinstance(target, str):
            out.append(target)
        elif isinstance(target, Send):
            out.append({"send": target.node, "arg": target.arg})
        else:
            raise ConfigError(f"guarded node {node!r}: Command goto {target!r} is not supported")
    return out


def _goto_from_json(goto: Sequence[Any]) -> list[Any]:
    return [t if isinstance(t, str) else Send(t["send"], t["arg"]) for t in goto]


def _jsonable(value: Any) -> bool:
    try:
        canonical_json(value)
    except (TypeError, ValueError):
        return False
    return True


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` or its cause chain is LangGraph's interrupt (``interrupt()`` called)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, GraphInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _thread_of(config: Mapping[str, Any] | None) -> str:
    conf = (config or {}).get("configurable") or {}
    return str(conf.get("thread_id", "default"))


def _task_of(config: Mapping[str, Any] | None) -> tuple[int, str]:
    """(super-step, push suffix) of the running task, from LangGraph's run metadata."""
    meta = (config or {}).get("metadata") or {}
    step = int(meta.get("langgraph_step", 0))
    path = meta.get("langgraph_path") or ()
    suffix = ""
    if path and path[0] == "__pregel_push":
        suffix = "#" + ".".join(str(p) for p in path[1:])
    return step, suffix


class GraphGuard:
    """The runtime of one guarded graph (shared by every run and thread of it).

    Args:
        adapter: The adapter (kernel, options, machine configuration).
        nodes: The guarded nodes by name.
        weights: Katz influence weights of every node of the user's graph (sum to 1).
        hook: The intervention hook, or ``None`` for the configured intervention runner.
        channels: The graph's channels (``StateGraph.channels``, state key -> channel): a
            reviewer's update may write only the application's keys among them, with values
            their reducers accept. ``None``: only the ``bb_`` keys are refused.
    """

    def __init__(
        self,
        adapter: LangGraphAdapter,
        nodes: Mapping[str, GuardedNode],
        weights: Mapping[str, float],
        hook: AnyHook | None,
        channels: Mapping[str, Any] | None = None,
    ) -> None:
        self.adapter = adapter
        self.channels = dict(channels or {})
        self.state_keys = None if channels is None else tuple(sorted(set(channels) - BB_KEYS))
        self.nodes = dict(nodes)
        self.weights = dict(weights)
        self.panel_mode = adapter.options.panel
        self.machines = Machines(adapter.machine_config)
        self.traces = Traces(adapter.options.trace_path, fsync=adapter.context.settings.trace.fsync)
        self.base_probe = build_probe(adapter.context)
        self.pool = ThreadPoolExecutor(
            max_workers=adapter.context.settings.probe.max_concurrency,
            thread_name_prefix="biasbreaker-probe",
        )
        self.steps: dict[str, Callable[..., Any]] = {
            name: self._probe_step(spec) for name, spec in self.nodes.items()
        }
        self.runner: InterventionRunner | None = None
        if hook is None:
            self.runner = InterventionRunner.from_context(
                adapter.context,
                rechecker=ProbeRechecker(_FreshProbes(self.base_probe), self.steps),
                attributes=self._attributes,
            )
            hook = self.runner.ahook
        elif self.panel_mode == "send":
            raise ConfigError(
                "[plugin.langgraph] panel = 'send' runs the configured intervention runner's "
                "skeptics as Send branches; it cannot be combined with guard(hook=...)"
            )
        self.hook: AnyHook = hook

    def _attributes(self, task: Any) -> list[str]:
        """The demographic axes a step's input mentions (the panel's domain-match input)."""
        return sorted({d.axis for d in self.base_probe.generator.detect(task)})

    def new_probe(self) -> Probe:
        """A fresh probe with the configured scorers and generator (one per probed call).

        A probe's call cache is per instance; a fresh one per call keeps concurrent calls (Send
        branches of one node, threads of several runs) from sharing it.
        """
        return _clone(self.base_probe)

    # ------------------------------------------------------------------ the wrapper

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

        if spec.is_async:

            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                config = kwargs["config"] if wants_config else kwargs.pop("config", None)
                self._check_trace(spec, args, kwargs, config)
                out = await fn(*args, **kwargs)
                call = self._begin(spec, args, kwargs, out, config)
                if call.sampled:
                    await self._probe(call)
                return self._finish(call)

            wrapper: Callable[..., Any] = guarded_async
        else:

            @functools.wraps(fn)
            def guarded_sync(*args: Any, **kwargs: Any) -> Any:
                config = kwargs["config"] if wants_config else kwargs.pop("config", None)
                self._check_trace(spec, args, kwargs, config)
                out = fn(*args, **kwargs)
                call = self._begin(spec, args, kwargs, out, config)
                if call.sampled:
                    run_sync(self._probe(call))
                return self._finish(call)

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
            self.traces.check_new_run(_thread_of(config if config is not None else get_config()))

    def _begin(
        self,
        spec: GuardedNode,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        out: Any,
        config: Mapping[str, Any] | None,
    ) -> _Call:
        state = args[0] if args else kwargs[spec.first]
        if not isinstance(state, Mapping):
            raise ConfigError(
                f"guarded node {spec.name!r} received a {type(state).__name__} state; the "
                "biasbreaker adapter guards graphs whose state is a dict (a TypedDict schema)"
            )
        update, goto, command = _split_output(spec.name, out)
        if config is None:
            config = get_config()
        lg_step, suffix = _task_of(config)
        key = f"{spec.name}@{lg_step}{suffix}"
        call = _Call(
            node=spec,
            state=state,
            update=update,
            goto=goto,
            command=command,
            key=key,
            step_id=key,
            thread=_thread_of(config),
            lg_step=lg_step,
            injected={name: kwargs[name] for name in spec.inject if name in kwargs},
        )
        call.json_error = json_problem(update)
        call.sampled = (
            call.json_error is None
            and spec.probe
            and self.base_probe.probe_rate > 0.0
            and self.base_probe.should_probe(call.step_id)
        )
        return call

    async def _probe(self, call: _Call) -> None:
        probe = self.new_probe()
        # the re-runs get the objects LangGraph injected into this call (the probe's tasks and
        # worker threads copy this context); looking them up again from a worker thread fails
        # on Python 3.10, where an async run cannot hand its config to a sync node's thread
        token = _INJECTED.set(call.injected)
        try:
            result = await probe.probe(
                self.steps[call.node.name],
                call.probe_input,
                call.update,
                step_id=call.step_id,
                step_name=call.node.name,
            )
        except Exception as exc:  # the probe fails closed: the output goes to human review
            call.probe_error = f"{type(exc).__name__}: {exc}"
            if _interrupted(exc):
                call.probe_error += (
                    f"; node {call.node.name!r} calls interrupt(), which cannot answer the "
                    "probe's re-runs on counterfactual states: mark it "
                    "@guard_node(probe=False) (from biasbreaker_plugins.langgraph import "
                    "guard_node), or leave it out of guard(nodes=...)"
                )
            return
        finally:
            _INJECTED.reset(token)
        if result.status == "not_sampled":
            call.sampled = False
            return
        call.score = result.score
        call.probe_summary = {
            "status": result.status,
            "score": result.score,
            "k": result.k,
            "r": result.r,
            "calls": result.calls,
            "reason": result.reason,
        }

    def _probe_step(self, spec: GuardedNode) -> Callable[..., Any]:
        """The step the probe re-runs: the user's function on a variant of the state.

        It takes the application's keys of the state (the probe's payload), calls the function
        with the LangGraph objects it declares resolved for the running task, and returns the
        state update. A sync function runs in a worker thread, so the probe's calls overlap.
        """
        fn = spec.fn
        inject = spec.inject

        def injected() -> dict[str, Any]:
            given = _INJECTED.get({})
            values: dict[str, Any] = {}
            for name in inject:
                if name in given:
                    values[name] = given[name]
                elif name == "config":
                    values[name] = get_config()
                elif name == "runtime":
                    values[name] = get_runtime()
                elif name == "writer":
                    values[name] = get_stream_writer()
                else:
                    values[name] = get_store()
            return values

        async def step(payload: Any, sample: int = 0) -> dict[str, Any]:
            kwargs = injected()
            if spec.is_async:
                out = await fn(payload, **kwargs)
            else:
                # like asyncio.to_thread (context copied), on the guard's long-lived pool
                call = functools.partial(
                    contextvars.copy_context().run, functools.partial(fn, payload, **kwargs)
                )
                out = await asyncio.get_running_loop().run_in_executor(self.pool, call)
            update, _, _ = _split_output(spec.name, out)
            return update

        return step

    # ------------------------------------------------------------------ deciding

    def _fold(
        self, state: Mapping[str, Any], scores: dict[str, float | None], call: _Call
    ) -> tuple[dict[str, Any], float, float, float | None]:
        """Fold the call's score into the latest scores; B_net and the EWMAs after it.

        Returns:
            (new EWMA state, fast, slow, B_net or None); ``scores`` is updated in place.
        """
        if call.sampled:
            scores[call.node.name] = call.score
        b_net = network_score(self.weights, scores).b_net if scores else None
        raw = state.get("bb_network_ewma")
        if b_net is None and raw:
            # No evidence this step: the EWMAs do not move (NetworkEwma.update(None)).
            fast, slow = raw["fast"]["value"], raw["slow"]["value"]
            return raw, fast or 0.0, slow or 0.0, None
        ewma = (
            NetworkEwma.from_dict(raw)
            if raw
            else self.adapter.context.settings.propagation.network_ewma()
        )
        ewma = ewma.update(b_net)
        fast = ewma.fast.value if ewma.fast.value is not None else 0.0
        slow = ewma.slow.value if ewma.slow.value is not None else 0.0
        return ewma.to_dict(), fast, slow, b_net

    def _entry(self, call: _Call, status: str, **extra: Any) -> dict[str, Any]:
        staged_input = call.probe_input if _jsonable(call.probe_input) else None
        entry: dict[str, Any] = {
            "node": call.node.name,
            "key": call.key,
            "order": [call.lg_step, call.key],
            "status": status,
            "update": call.update,
            "goto": _goto_json(call.node.name, call.goto),
            "input": staged_input,
            "sampled": call.sampled,
            "score": call.score,
            "probe": call.probe_summary,
            "step": None,
            "reason": "",
        }
        entry.update(extra)
        return entry

    def _preview(
        self,
        handle: Handle,
        node: str,
        update: Mapping[str, Any],
        step_input: Any,
        step: Mapping[str, Any],
    ) -> tuple[BreakerDecision | None, InterventionContext | None]:
        """Step the machine with a capturing hook: the decision, or the context it would repair.

        When the step would call the hook the machine is left dirty: the caller drops it.
        """
        handle.dispatch.target = None
        handle.dispatch.captured = None
        scores = {n: v for n, v in step["scores"].items() if v is not None}
        decision = handle.machine.step(
            step["fast"],
            step["slow"],
            node=node,
            local_scores=scores,
            weights=self.weights,
            payload=update,
            step_input=step_input,
        )
        captured = handle.dispatch.take()
        if captured is not None:
            return None, captured
        return decision, None

    async def _machine_astep(
        self, machine: ControlMachine, entry: Mapping[str, Any], step: Mapping[str, Any]
    ) -> BreakerDecision:
        scores = {n: s for n, s in step["scores"].items() if s is not None}
        return await machine.astep(
            step["fast"],
            step["slow"],
            node=entry["node"],
            local_scores=scores,
            weights=self.weights,
            payload=entry["update"],
            step_input=entry["input"],
        )

    def _commit(self, handle: Handle, thread: str, by: str) -> dict[str, Any]:
        """Snapshot the handle's machine, write its trace records, cache it; the state value."""
        value = {"machine": handle.machine.snapshot(), "by": by}
        commit_records(self.traces, thread, handle)
        self.machines.release(handle, value)
        return value

    @staticmethod
    def _to_review(call: _Call, entry: dict[str, Any], event: str, error: str) -> Halt:
        """Hold ``call``'s output for human review, with an audit event naming why."""
        return Halt(
            goto=REVIEW,
            update={
                "bb_unverified_output": {call.key: entry},
                "bb_audit_trail": [{"event": event, "key": call.key, "error": error}],
            },
        )

    def _finish(self, call: _Call) -> Any:
        """Decide what the guarded node returns (see the module docstring, steps 3 and 4)."""
        name = call.node.name
        state = call.state
        if call.json_error is not None:
            reason = (
                f"output is not JSON, held: {call.json_error}; a guarded node returns JSON-like "
                "data (dict/list/str/finite number/bool/None)"
            )
            entry = self._entry(call, "escalated", reason=reason)
            entry["update"] = shown(call.update)
            entry["not_json"] = call.json_error
            return self._to_review(call, entry, "not-json", call.json_error)
        if call.probe_error is not None:
            entry = self._entry(
                call, "escalated", reason=f"probe failed, output held: {call.probe_error}"
            )
            return self._to_review(call, entry, "probe-failed", call.probe_error)
        if call.node.mode == "queued":
            return Halt(
                goto=BREAKER,
                update={"bb_unverified_output": {call.key: self._entry(call, "queued")}},
            )
        scores = dict(state.get("bb_local_scores") or {})
        raw_ewma = state.get("bb_network_ewma")
        ewma, fast, slow, b_net = self._fold(state, scores, call)
        step = {"fast": fast, "slow": slow, "b_net": b_net, "scores": scores}
        bb: dict[str, Any] = {}
        if ewma is not raw_ewma:
            bb["bb_network_ewma"] = ewma
        if call.sampled:
            bb["bb_local_scores"] = {name: call.score}
        weights = state.get("bb_katz_weights")
        if weights is not self.weights and weights != self.weights:
            bb["bb_katz_weights"] = self.weights
        handle = self.machines.acquire(state.get("bb_breaker"))
        decision, _ = self._preview(handle, name, call.update, None, step)
        if decision is None:
            # The step starts an intervention: bb_breaker takes it with the real hook.
            entry = self._entry(call, "tripped", step=step)
            return Halt(goto=BREAKER, update={**bb, "bb_unverified_output": {call.key: entry}})
        bb["bb_breaker"] = self._commit(handle, call.thread, call.key)
        if decision.action is BreakerAction.PROCEED:
            if call.command is not None:
                return Command(update={**call.update, **bb}, goto=call.command.goto)
            return {**call.update, **bb}
        entry = self._entry(call, _held_status(decision), step=step, reason=decision.reason)
        bb["bb_unverified_output"] = {call.key: entry}
        bb.update(self._freeze_record(state, call.key, name, call.update, decision, handle.machine))
        return Halt(goto=_route_for(decision), update=bb)

    # ------------------------------------------------------------------ records

    def _freeze_record(
        self,
        state: Mapping[str, Any],
        key: str,
        node: str,
        update: Any,
        decision: BreakerDecision,
        machine: ControlMachine,
    ) -> dict[str, Any]:
        """The ``bb_frozen`` record and audit event when ``decision`` froze this output."""
        payload = decision.frozen_payload
        if payload is None or payload != FrozenPayload.of(update):
            # None, or the decision refers to another output (the one under repair while this
            # output is held in RECOVERY): this output was not frozen by this step.
            return {}
        known = (state.get("bb_frozen") or {}).get(key)
        if known is not None and known["payload"]["sha256"] == payload.sha256:
            return {}
        record = {
            "node": node,
            "payload": payload.to_json(),
            "status": "frozen",
            "step": machine.steps_taken - 1,
            "state": decision.state.value,
            "reason": decision.reason,
        }
        return {
            "bb_frozen": {key: record},
            "bb_audit_trail": [
                {"event": "freeze", "key": key, "node": node, "sha256": payload.sha256}
            ],
        }

    # ------------------------------------------------------------------ breaker node

    def breaker_node(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        """``bb_breaker``: the breaker and mitigation node (the one stepping held outputs).

        In order of priority, one action per run:

        1. the earliest *tripped* output: its pending step, with the intervention hook (with
           ``panel = "send"``, a step that would run the skeptic panel fans the reviews out to
           ``bb_skeptic`` branches instead);
        2. the earliest *held* output: a re-step with the same output and the same fast and
           slow B_net (docs/control.md §3a);
        3. an output whose Send panel has been aggregated: its step, replaying the panel;
        4. otherwise the *queued* outputs of parallel branches, one after another, until one
           is not let through.

        Each of 1-3 takes one machine step, so with ``durability="sync"`` every transition is
        checkpointed before the next. Outputs let through are promoted together with the other
        outputs of their super-step (so their successors run together, as without the guard).
        """
        work = _Work(state, config)
        pending = work.entries("tripped", "held", "fanout")
        if pending:
            entry = pending[0]
            if entry["status"] == "fanout":
                ready = self._aggregated(state, entry)
                if ready is None:
                    return work.result(self)  # the Send branches are still running
                self._take_step(work, entry, self._replay_hook(entry, ready), clear_fan=True)
                prefix = f"{entry['key']}/{entry['fanout']['attempt']}/"
                slots = state.get("bb_verdicts") or {}
                done = {slot: None for slot in slots if slot.startswith(prefix)}
                work.pairs.append(("bb_verdicts", done))
            elif self.panel_mode == "send" and self.runner is not None:
                sends = self._fan_out(work, entry)
                if sends is not None:
                    return work.result(self, sends=sends)
                self._take_step(work, entry, self.hook)
            else:
                self._take_step(work, entry, self.hook)
        else:
            self._run_queue(work)
        return work.result(self)

    def _take_step(
        self,
        work: _Work,
        entry: dict[str, Any],
        hook: AnyHook,
        *,
        clear_fan: bool = False,
    ) -> None:
        """One machine step for a tripped or held output, with ``hook``; record the outcome."""
        handle = self.machines.acquire(work.breaker)
        handle.dispatch.target = hook
        decision = run_sync(self._machine_astep(handle.machine, entry, entry["step"]))
        machine = handle.machine
        result = machine.last_result
        work.set_breaker(
            self._commit(handle, work.thread, f"{BREAKER}@{work.lg_step}:{entry['key']}")
        )
        work.extend(
            self._freeze_record(
                work.state, entry["key"], entry["node"], entry["update"], decision, machine
            ).items()
        )
        ran_hook = machine.last_record is not None and machine.last_record.intervention is not None
        if ran_hook and result is not None:
            event = {"event": "intervention", "key": entry["key"], **result.summary()}
            work.pairs.append(("bb_audit_trail", [event]))
        entry = {k: v for k, v in entry.items() if k != "fanout"} if clear_fan else entry
        repaired = None
        tau_exit = machine.config.thresholds.tau_exit
        if (
            ran_hook
            and decision.state is BreakerState.INTERVENTION
            and result is not None
            and result.recheck_passes(tau_exit)
            and result.repaired is not None
        ):
            repaired = self._usable_repair(entry, result.repaired)
        if decision.action is BreakerAction.PROCEED:
            work.clear(entry, entry["update"])
        elif repaired is not None and result is not None:
            work.clear(entry, repaired)
            work.pairs.append(("bb_local_scores", {entry["node"]: result.recheck_score}))
            frozen = dict(work.frozen(entry["key"]))
            if frozen:
                work.pairs.append(
                    (
                        "bb_frozen",
                        {entry["key"]: {**frozen, "status": "repaired", "repaired": repaired}},
                    )
                )
        else:
            work.put({**entry, "status": _held_status(decision), "reason": decision.reason})

    def _run_queue(self, work: _Work) -> None:
        """Check the queued outputs in order; stop at the first that is not let through."""
        scores = dict(work.state.get("bb_local_scores") or {})
        running = dict(work.state)
        for entry in work.entries("queued"):
            call_like = _Call(
                node=self.nodes[entry["node"]],
                state=running,
                update=entry["update"],
                goto=[],
                command=None,
                key=entry["key"],
                step_id=entry["key"],
                thread=work.thread,
                lg_step=work.lg_step,
                given_input={},
                sampled=entry["sampled"],
                score=entry["score"],
            )
            ewma, fast, slow, b_net = self._fold(running, scores, call_like)
            running["bb_network_ewma"] = ewma
            work.pairs.append(("bb_network_ewma", ewma))
            if entry["sampled"]:
                work.pairs.append(("bb_local_scores", {entry["node"]: entry["score"]}))
            if work.state.get("bb_katz_weights") != self.weights:
                work.pairs.append(("bb_katz_weights", self.weights))
            step = {"fast": fast, "slow": slow, "b_net": b_net, "scores": dict(scores)}
            handle = self.machines.acquire(work.breaker)
            decision, _ = self._preview(handle, entry["node"], entry["update"], None, step)
            if decision is None:
                work.put({**entry, "status": "tripped", "step": step})
                return
            work.set_breaker(
                self._commit(handle, work.thread, f"{BREAKER}@{work.lg_step}:{entry['key']}")
            )
            if decision.action is BreakerAction.PROCEED:
                work.clear({**entry, "step": step}, entry["update"])
                continue
            held = {**entry, "status": _held_status(decision), "step": step}
            work.put({**held, "reason": decision.reason})
            work.extend(
                self._freeze_record(
                    running, entry["key"], entry["node"], entry["update"], decision, handle.machine
                ).items()
            )
            return

    def _usable_repair(self, entry: Mapping[str, Any], repaired: FrozenPayload) -> Any:
        """The repaired payload as an update of the node's keys, or ``None`` if unusable."""
        value = repaired.thaw()
        if not isinstance(value, dict):
            return None
        if set(value) - set(entry["update"]) or any(k in BB_KEYS for k in value):
            return None
        return value

    # ------------------------------------------------------------------ the Send panel

    def _fan_out(self, work: _Work, entry: dict[str, Any]) -> list[Send] | None:
        """The ``Send`` branches of the skeptic panel if this step would run it, else ``None``.

        Previews the step: when it would call the hook and the router chooses ``"skeptics"``,
        the step is not taken; the panel's request goes to one branch per skeptic and the entry
        waits (status ``"fanout"``). Otherwise the caller takes the step in process.
        """
        runner = self.runner
        if runner is None or runner.panel is None:
            return None
        handle = self.machines.acquire(work.breaker)
        _, context = self._preview(
            handle, entry["node"], entry["update"], entry["input"], entry["step"]
        )
        if context is None or context.frozen_payload is None:
            return None
        route = checked_route(runner.router, context, name=runner.router_name)
        if route != "skeptics":
            return None
        request = self._panel_request(runner, context)
        fan = {"request": request.model_dump(mode="json"), "attempt": context.attempt}
        work.put({**entry, "status": "fanout", "fanout": {**fan, "from": entry["status"]}})
        return [
            Send(SKEPTIC, {"key": entry["key"], "kind": skeptic.kind, **fan})
            for skeptic in runner.panel.skeptics
        ]

    def _panel_request(
        self, runner: InterventionRunner, context: InterventionContext
    ) -> SkepticRequest:
        """The request the runner's panel reviews for ``context`` (as the runner builds it)."""
        original = context.frozen_payload.thaw() if context.frozen_payload is not None else None
        task = None if context.step_input is None else context.step_input.thaw()
        attributes: tuple[str, ...] = ()
        if runner.attributes is not None and task is not None:
            attributes = tuple(sorted(set(runner.attributes(task))))
        return SkepticRequest(
            payload=as_text(original),
            task=None if task is None else as_text(task),
            node=context.node,
            attributes=attributes,
            seed=context.seed,
        )

    def _send_panel(self) -> tuple[InterventionRunner, SkepticPanel]:
        runner = self.runner
        if runner is None or runner.panel is None:
            raise ConfigError("the Send panel needs the configured intervention runner's panel")
        return runner, runner.panel

    def skeptic_node(self, branch: dict[str, Any]) -> Any:
        """``bb_skeptic``: one skeptic's review (a ``Send`` branch), written to ``bb_verdicts``."""
        _, panel = self._send_panel()
        request = SkepticRequest.model_validate(branch["request"])
        outcome = run_sync(review_one(panel, branch["kind"], request))
        slot = f"{branch['key']}/{branch['attempt']}/{branch['kind']}"
        return {"bb_verdicts": {slot: outcome_to_json(outcome)}}

    def aggregate_node(self, state: dict[str, Any]) -> Any:
        """``bb_aggregate``: join the skeptic branches and aggregate their verdicts.

        The panel's own code runs on the branches' outcomes (anonymisation, the configured
        aggregator, the kernel's checks; fewer than two valid verdicts fail it closed); the
        panel run is stored and ``bb_breaker`` takes the machine's step with it.
        """
        runner, panel = self._send_panel()
        pending = [e for e in self._staged(state, "fanout")]
        updates: dict[str, Any] = {}
        for entry in pending:
            fan = entry["fanout"]
            prefix = f"{entry['key']}/{fan['attempt']}/"
            slots = state.get("bb_verdicts") or {}
            if prefix + "panel" in slots:
                continue
            kinds = {s.kind for s in panel.skeptics}
            outcomes = {
                slot[len(prefix) :]: outcome_from_json(value)
                for slot, value in slots.items()
                if slot.startswith(prefix) and slot[len(prefix) :] in kinds
            }
            if set(outcomes) != kinds:
                continue
            request = SkepticRequest.model_validate(fan["request"])
            replay = ReplayPanel.of(panel, request, outcomes=outcomes)
            run = run_sync(replay.run(request, track_record=runner.track_record))
            updates[prefix + "panel"] = run.model_dump(mode="json")
        if not updates:
            return {}
        return Command(update={"bb_verdicts": updates}, goto=BREAKER)

    def _aggregated(self, state: Mapping[str, Any], entry: Mapping[str, Any]) -> Any:
        fan = entry["fanout"]
        slot = f"{entry['key']}/{fan['attempt']}/panel"
        return (state.get("bb_verdicts") or {}).get(slot)

    def _replay_hook(self, entry: Mapping[str, Any], recorded: Mapping[str, Any]) -> AnyHook:
        """The runner's hook with the Send panel's aggregated run replayed for its request."""
        runner, panel = self._send_panel()
        request = SkepticRequest.model_validate(entry["fanout"]["request"])
        replay = dataclasses.replace(
            runner, panel=ReplayPanel.of(panel, request, recorded=PanelRun.model_validate(recorded))
        )

        async def hook(context: InterventionContext) -> Any:
            result = await replay.ahook(context)
            runner.track_record = replay.track_record
            return result

        return hook

    # ------------------------------------------------------------------ review

    def review_node(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        """``bb_review``: pause with ``interrupt()`` for the first escalated output.

        Everything before ``interrupt()`` only reads the state, so re-running the node from its
        top on resume (LangGraph's rule) has no side effect.
        """
        work = _Work(state, config)
        pending = work.entries("escalated")
        if not pending:
            return {}
        entry = pending[0]
        key = entry["key"]
        snapshot = (state.get("bb_breaker") or {}).get("machine") or {}
        step = entry.get("step") or {}
        # the machine's last intervention belongs to this output only if it was run on it: a
        # later output held while ESCALATED (or one escalated by a failed probation) has none
        result = (snapshot.get("result") or {}) if _last_intervened(state) == key else {}
        request = ReviewRequest(
            key=key,
            node=entry["node"],
            held=entry["update"],
            frozen=work.frozen(key).get("payload"),
            reason=entry.get("reason", ""),
            breaker_state=str(snapshot.get("state", "normal")),
            local_scores=dict(state.get("bb_local_scores") or {}),
            fast=step.get("fast"),
            slow=step.get("slow"),
            trail=list(result.get("trail") or []),
        )
        payload = request.model_dump(mode="json")
        answer = _interrupt(payload, config)
        while True:
            decision, error = self._decision(state, entry, answer)
            if decision is not None:
                break
            # Ask again, never raise: LangGraph replays a thread's resume values into this
            # node's interrupts in order on every resume, so a raise here would repeat on
            # every later resume. The next resume value answers this second interrupt.
            answer = _interrupt({**payload, "error": error}, config)
        record = {
            "key": key,
            "node": entry["node"],
            "action": decision.action,
            "reviewer": decision.reviewer,
            "note": decision.note,
        }
        work.pairs.append(("bb_reviews", [record]))
        work.pairs.append(("bb_audit_trail", [{"event": "review", **record}]))
        frozen = dict(work.frozen(key))
        if decision.action == "reject":
            work.drop(key)
            if frozen:
                work.pairs.append(("bb_frozen", {key: {**frozen, "status": "rejected"}}))
            return work.result(self)
        update = entry["update"] if decision.action == "approve" else dict(decision.update or {})
        work.clear(entry, update)
        if frozen:
            status = "approved" if decision.action == "approve" else "edited"
            work.pairs.append(("bb_frozen", {key: {**frozen, "status": status}}))
        return work.result(self)

    def _decision(
        self, state: Mapping[str, Any], entry: Mapping[str, Any], answer: Any
    ) -> tuple[ReviewDecision | None, str]:
        """The reviewer's decision on ``entry``, or ``None`` and what is wrong with ``answer``.

        Refused: a value that is not a :class:`ReviewDecision` (wrong action, missing or extra
        field, an edit writing ``bb_`` keys or values that are not JSON, NaN and infinity
        included), an edit writing keys the graph's state does not have or a value of another
        type than a plain key's annotation declares (:meth:`_type_problem`), and ``approve`` of an
        output that is not JSON (it was held for that reason; edit or reject it), and an update
        the state's reducers refuse (a list reducer given a number): LangGraph would fail the
        super-step after this node returned, again on every resume.
        """
        hint = "resume with {'action': 'approve' | 'edit' | 'reject', ...}"
        try:
            decision = ReviewDecision.model_validate(answer)
        except (ValueError, TypeError) as exc:
            return None, (
                f"the resume value {_short(answer)} is not a ReviewDecision: "
                f"{_first_error(exc)}; {hint}"
            )
        if decision.action == "approve" and entry.get("not_json"):
            return None, (
                f"approve would promote the output of {entry['node']!r}, which is not JSON "
                f"({entry['not_json']}); resume with 'edit' and a JSON update, or 'reject'"
            )
        if decision.action == "edit" and self.state_keys is not None:
            unknown = sorted(set(decision.update or {}) - set(self.state_keys))
            if unknown:
                return None, (
                    f"the edit writes {unknown}, which are not keys of the graph's state "
                    f"(keys: {list(self.state_keys)}); LangGraph would drop them silently"
                )
        if decision.action == "edit":
            mistyped = self._type_problem(decision.update or {})
            if mistyped is not None:
                return None, f"{mistyped}; give a value of that type"
        update = entry["update"] if decision.action == "approve" else decision.update
        if decision.action != "reject" and update:
            refused = write_problem(self.channels, state, update)
            if refused is not None:
                return None, (
                    f"the state's reducer refuses the {decision.action}'s update ({refused}); "
                    + (
                        "resume with 'edit' and an update it accepts, or 'reject'"
                        if decision.action == "approve"
                        else "give a value of the key's type"
                    )
                )
        return decision, ""

    def _type_problem(self, update: Mapping[str, Any]) -> str | None:
        """The first value of ``update`` whose key's annotation says it has the wrong type.

        Only plain keys (LangGraph's ``LastValue`` channel, holding the key's annotation) are
        checked, with :func:`~biasbreaker_plugins.langgraph.state.annotation_problem`: a key
        with a reducer takes whatever its reducer accepts (checked by ``write_problem``).
        """
        from langgraph.channels.last_value import LastValue

        for key, value in update.items():
            channel = self.channels.get(key)
            if isinstance(channel, LastValue):
                problem = annotation_problem(channel.typ, value, key)
                if problem is not None:
                    return problem
        return None

    def _staged(self, state: Mapping[str, Any], *statuses: str) -> list[dict[str, Any]]:
        staged = state.get("bb_unverified_output") or {}
        chosen = [e for e in staged.values() if e["status"] in statuses]
        return sorted(chosen, key=_order)


def _last_intervened(state: Mapping[str, Any]) -> str | None:
    """The key of the output the thread's latest intervention ran on, or ``None``."""
    for event in reversed(state.get("bb_audit_trail") or []):
        if event.get("event") == "intervention":
            return str(event.get("key"))
    return None


def _order(entry: Mapping[str, Any]) -> tuple[int, str]:
    return int(entry["order"][0]), str(entry["order"][1])


class _Work:
    """The writes one breaker-node task accumulates, over a working copy of the buffer.

    Outputs let through are *cleared* (status ``"cleared"``, final update kept) and promoted
    together once no output of the same super-step (``order[0]``) is still undecided.
    """

    def __init__(self, state: Mapping[str, Any], config: RunnableConfig) -> None:
        self.state = state
        self.thread = _thread_of(config)
        self.lg_step, _ = _task_of(config)
        self.staged: dict[str, dict[str, Any]] = dict(state.get("bb_unverified_output") or {})
        self.breaker: Mapping[str, Any] | None = state.get("bb_breaker")
        self.pairs: list[tuple[str, Any]] = []

    def entries(self, *statuses: str) -> list[dict[str, Any]]:
        """The staged outputs with one of ``statuses``, earliest first."""
        return sorted((e for e in self.staged.values() if e["status"] in statuses), key=_order)

    def frozen(self, key: str) -> Mapping[str, Any]:
        """The frozen record of ``key`` as written so far (this task's writes included)."""
        record: Mapping[str, Any] = (self.state.get("bb_frozen") or {}).get(key) or {}
        for name, value in self.pairs:
            if name == "bb_frozen" and key in value:
                record = value[key]
        return record

    def set_breaker(self, value: Mapping[str, Any]) -> None:
        self.breaker = value
        self.pairs.append(("bb_breaker", value))

    def extend(self, pairs: Any) -> None:
        self.pairs.extend(pairs)

    def put(self, entry: dict[str, Any]) -> None:
        self.staged[entry["key"]] = entry
        self.pairs.append(("bb_unverified_output", {entry["key"]: entry}))

    def drop(self, key: str) -> None:
        self.staged.pop(key, None)
        self.pairs.append(("bb_unverified_output", {key: None}))

    def clear(self, entry: Mapping[str, Any], update: Mapping[str, Any]) -> None:
        """Let ``entry`` through with ``update`` (promoted with the rest of its super-step)."""
        self.put({**entry, "status": "cleared", "final": dict(update)})

    def result(self, guard: GraphGuard, *, sends: Sequence[Send] = ()) -> Any:
        """The task's return value: promotions, writes and where to go next."""
        promoted: list[str] = []
        goto: list[Any] = list(sends)
        batches = sorted({_order(e)[0] for e in self.staged.values()})
        for batch in batches:
            members = [e for e in self.staged.values() if _order(e)[0] == batch]
            if not all(e["status"] == "cleared" for e in members):
                continue
            for entry in sorted(members, key=_order):
                self.pairs.extend(entry["final"].items())
                self.drop(entry["key"])
                promoted.append(entry["node"])
                goto.extend(_goto_from_json(entry["goto"]))
        if not sends:
            if self.entries("tripped", "held", "queued"):
                goto.append(BREAKER)
            elif self.entries("escalated"):
                goto.append(REVIEW)
        pairs = _coalesce(self.pairs)
        if promoted:
            return Promote(update=pairs, goto=goto, promoted=tuple(dict.fromkeys(promoted)))
        return Command(update=pairs, goto=goto)


class _FreshProbes:
    """Anything-with-``probe``: a fresh probe per call (for the runner's re-check)."""

    def __init__(self, base: Probe) -> None:
        self.base = base

    async def probe(self, *args: Any, **kwargs: Any) -> Any:
        return await _clone(self.base).probe(*args, **kwargs)


def _clone(base: Probe) -> Probe:
    return Probe(
        base.scorers,
        generator=base.generator,
        k=base.k,
        r=base.r,
        probe_rate=base.probe_rate,
        seed=base.seed,
        combine=base.combine,
        bootstrap=base.bootstrap,
        confidence=base.confidence,
        max_concurrency=base.max_concurrency,
        cache_size=base.cache_size,
    )


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "value"
        return f"{where}: {first.get('msg', exc)}"
    return str(exc)


def _held_status(decision: BreakerDecision) -> str:
    return "escalated" if decision.action is BreakerAction.ESCALATE else "held"


def _route_for(decision: BreakerDecision) -> str:
    return REVIEW if decision.action is BreakerAction.ESCALATE else BREAKER


def _coalesce(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Merge repeated writes of the ``bb_`` mapping keys (one write per key per task).

    Reducer keys accept several writes in one task, but the breaker's own reducer rejects
    two snapshots in one step, so every ``bb_`` key is written once with the merged value
    (mappings merged in order, lists concatenated, otherwise the last value).
    """
    merged: dict[str, Any] = {}
    order: list[str] = []
    rest: list[tuple[str, Any]] = []
    for name, value in pairs:
        if name not in BB_KEYS:
            rest.append((name, value))
            continue
        if name not in merged:
            order.append(name)
            merged[name] = value
        elif (
            isinstance(value, dict)
            and isinstance(merged[name], dict)
            and name
            not in (
                "bb_breaker",
                "bb_network_ewma",
                "bb_katz_weights",
            )
        ):
            merged[name] = {**merged[name], **value}
        elif isinstance(value, list) and isinstance(merged[name], list):
            merged[name] = merged[name] + value
        else:
            merged[name] = value
    return rest + [(name, merged[name]) for name in order]


class LangGraphAdapter:
    """The ``langgraph`` framework adapter: builds guarded graphs for one kernel.

    Args:
        options: ``[plugin.langgraph]``.
        context: The kernel (settings, seed, plugins).

    Raises:
        ConfigError: ``[breaker] probation`` is not ``"half-open"``.
    """

    def __init__(self, options: LangGraphOptions, context: BuildContext) -> None:
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
    ) -> GuardedStateGraph:
        """A guarded copy of ``builder``; see :func:`biasbreaker_plugins.langgraph.guard`."""
        from biasbreaker_plugins.langgraph.graph import build_guarded

        return build_guarded(self, builder, nodes=nodes, hook=hook, concurrent=concurrent)


__all__ = [
    "ADDED_NODES",
    "AGGREGATE",
    "BREAKER",
    "PROMOTERS",
    "REVIEW",
    "SKEPTIC",
    "GraphGuard",
    "GuardedNode",
    "LangGraphAdapter",
]
