"""Deciding a guarded step: fold its score into B_net, step the control machine, hold or pass.

For a guarded call, in its own task (*inline* nodes) or in ``bb_breaker`` (*queued* ones):

1. fold the call's local score into the latest scores (``bb_local_scores``); B_net is their
   Katz average (:func:`biasbreaker.propagation.network_score`), and the fast and slow EWMAs
   (``bb_network_ewma``) move with it (:meth:`Decider.fold`);
2. *preview* the control machine's step (:meth:`Decider.preview`): a step that would not start
   an intervention is committed — snapshot to ``bb_breaker``, trace record — and on
   ``PROCEED`` the update is returned with the ``bb_`` keys, promoted in the node's own task;
   a step that would start one is discarded and left to ``bb_breaker``, which takes it with
   the real intervention hook;
3. an output not let through is staged (:mod:`.staging`) and the node reroutes to
   ``bb_breaker`` (tripped or held) or ``bb_review`` (escalated).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langgraph.types import Command

from biasbreaker.machine import ControlMachine
from biasbreaker.propagation import NetworkEwma, network_score
from biasbreaker.types import BreakerAction, BreakerDecision, FrozenPayload, InterventionContext
from biasbreaker_plugins.langgraph._internals import Halt
from biasbreaker_plugins.langgraph.machines import Handle, Machines
from biasbreaker_plugins.langgraph.names import BREAKER
from biasbreaker_plugins.langgraph.probing import Call
from biasbreaker_plugins.langgraph.staging import (
    entry,
    held_status,
    route_for,
    to_review,
)
from biasbreaker_plugins.langgraph.state import shown
from biasbreaker_plugins.langgraph.traces import Traces, commit_records


class Decider:
    """Steps the control machine for the guarded outputs of one graph.

    Args:
        machines: The cache of machines restored from ``bb_breaker``.
        traces: The run traces.
        weights: Katz influence weights of every node of the user's graph (sum to 1).
        new_ewma: A fresh pair of fast and slow EWMAs (``[propagation]``).
    """

    def __init__(
        self,
        machines: Machines,
        traces: Traces,
        weights: Mapping[str, float],
        new_ewma: Callable[[], NetworkEwma],
    ) -> None:
        self.machines = machines
        self.traces = traces
        self.weights = dict(weights)
        self.new_ewma = new_ewma

    def fold(
        self, state: Mapping[str, Any], scores: dict[str, float | None], call: Call
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
        ewma = NetworkEwma.from_dict(raw) if raw else self.new_ewma()
        ewma = ewma.update(b_net)
        fast = ewma.fast.value if ewma.fast.value is not None else 0.0
        slow = ewma.slow.value if ewma.slow.value is not None else 0.0
        return ewma.to_dict(), fast, slow, b_net

    def preview(
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

    async def astep(
        self, machine: ControlMachine, staged: Mapping[str, Any], step: Mapping[str, Any]
    ) -> BreakerDecision:
        """Step ``machine`` for a staged output (its hook runs if the step intervenes)."""
        scores = {n: s for n, s in step["scores"].items() if s is not None}
        return await machine.astep(
            step["fast"],
            step["slow"],
            node=staged["node"],
            local_scores=scores,
            weights=self.weights,
            payload=staged["update"],
            step_input=staged["input"],
        )

    def commit(self, handle: Handle, thread: str, by: str) -> dict[str, Any]:
        """Snapshot the handle's machine, write its trace records, cache it; the state value."""
        value = {"machine": handle.machine.snapshot(), "by": by}
        commit_records(self.traces, thread, handle)
        self.machines.release(handle, value)
        return value

    def finish(self, call: Call) -> Any:
        """Decide what the guarded node returns (see the module docstring)."""
        name = call.node.name
        state = call.state
        if call.json_error is not None:
            reason = (
                f"output is not JSON, held: {call.json_error}; a guarded node returns JSON-like "
                "data (dict/list/str/finite number/bool/None)"
            )
            staged = entry(call, "escalated", reason=reason)
            staged["update"] = shown(call.update)
            staged["not_json"] = call.json_error
            return to_review(call, staged, "not-json", call.json_error)
        if call.probe_error is not None:
            reason = f"probe failed, output held: {call.probe_error}"
            staged = entry(call, "escalated", reason=reason)
            return to_review(call, staged, "probe-failed", call.probe_error)
        if call.node.mode == "queued":
            return Halt(
                goto=BREAKER,
                update={"bb_unverified_output": {call.key: entry(call, "queued")}},
            )
        scores = dict(state.get("bb_local_scores") or {})
        raw_ewma = state.get("bb_network_ewma")
        ewma, fast, slow, b_net = self.fold(state, scores, call)
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
        decision, _ = self.preview(handle, name, call.update, None, step)
        if decision is None:
            # The step starts an intervention: bb_breaker takes it with the real hook.
            staged = entry(call, "tripped", step=step)
            return Halt(goto=BREAKER, update={**bb, "bb_unverified_output": {call.key: staged}})
        bb["bb_breaker"] = self.commit(handle, call.thread, call.key)
        if decision.action is BreakerAction.PROCEED:
            if call.command is not None:
                return Command(update={**call.update, **bb}, goto=call.command.goto)
            return {**call.update, **bb}
        staged = entry(call, held_status(decision), step=step, reason=decision.reason)
        bb["bb_unverified_output"] = {call.key: staged}
        bb.update(freeze_record(state, call.key, name, call.update, decision, handle.machine))
        return Halt(goto=route_for(decision), update=bb)


def freeze_record(
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
        "bb_audit_trail": [{"event": "freeze", "key": key, "node": node, "sha256": payload.sha256}],
    }


__all__ = ["Decider", "freeze_record"]
