"""Deciding a guarded step: fold its score into B_net, step the control machine, hold or pass.

For a guarded call, in its own task (*inline* nodes) or in ``bb_breaker`` (*queued* ones):

1. fold the call's local score into the latest scores (``bb_local_scores``); B_net is their
   Katz average (:func:`biasbreaker.propagation.network_score`), and the fast and slow EWMAs
   (``bb_network_ewma``) move with it (:meth:`Decider.fold`);
2. *preview* the control machine's step (:meth:`Decider.preview`) on the output's JSON view,
   with what the probe made of the call (recorded in the trace): a step that would not start
   an intervention is committed — snapshot to ``bb_breaker``, trace record — and on
   ``PROCEED`` the update is returned, promoted in the node's own task; a step that would
   start one is discarded and left to ``bb_breaker``, which takes it with the real hook;
3. a call the probe could not read, or whose probe failed, is a *held* step
   (``ControlMachine.step(hold=...)``): recorded, frozen, and handed to ``bb_review``;
4. an output not let through is staged (:mod:`.staging`) and the node reroutes to
   ``bb_breaker`` (tripped or held) or ``bb_review`` (escalated).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langgraph.types import Command

from biasbreaker.machine import ControlMachine, KatzWeights
from biasbreaker.propagation import NetworkEwma, network_score
from biasbreaker.trace.sink import TraceSink
from biasbreaker.types import BreakerAction, BreakerDecision, FrozenPayload, InterventionContext
from biasbreaker_plugins.langgraph._internals import Halt
from biasbreaker_plugins.langgraph.machines import Handle, Machines
from biasbreaker_plugins.langgraph.names import BREAKER
from biasbreaker_plugins.langgraph.probing import Call
from biasbreaker_plugins.langgraph.shared import Shared
from biasbreaker_plugins.langgraph.staging import entry, held_status, hold_event, route_for
from biasbreaker_plugins.langgraph.traces import commit_records


class Decider(Shared):
    """Steps the control machine for the guarded outputs of one graph.

    Args:
        machines: The cache of machines restored from ``bb_breaker``.
        traces: The run traces.
        weights: Katz influence weights of every node of the user's graph (sum to 1).
        new_ewma: Builds a fresh pair of fast and slow EWMAs (``[propagation]``); called
            once, the pair (immutable) starting every thread's B_net.
        opaque: State keys the probe never reads (``guard(opaque=...)``).
    """

    def __init__(
        self,
        machines: Machines,
        traces: TraceSink,
        weights: Mapping[str, float],
        new_ewma: Callable[[], NetworkEwma],
        opaque: frozenset[str] = frozenset(),
    ) -> None:
        self.machines = machines
        self.traces = traces
        self.weights = dict(weights)
        self.katz = KatzWeights(self.weights)  # checked once; the machine trusts it
        self.fresh_ewma = new_ewma()  # a NetworkEwma is immutable: one serves every thread
        self.opaque = opaque

    def fold(
        self,
        bb: Mapping[str, Any],
        scores: dict[str, float | None],
        node: str,
        sampled: bool,
        score: float | None,
    ) -> tuple[dict[str, Any], float, float, float | None]:
        """Fold ``node``'s score (when ``sampled``) into the latest scores; B_net and EWMAs.

        Returns:
            (new EWMA state, fast, slow, B_net or None); ``scores`` is updated in place.
        """
        if sampled:
            scores[node] = score
        b_net = network_score(self.weights, scores).b_net if scores else None
        raw = bb.get("bb_network_ewma")
        if b_net is None and raw:
            # No evidence this step: the EWMAs do not move (NetworkEwma.update(None)).
            fast, slow = raw["fast"]["value"], raw["slow"]["value"]
            return raw, fast or 0.0, slow or 0.0, None
        ewma = NetworkEwma.from_dict(raw) if raw else self.fresh_ewma
        ewma = ewma.update(b_net)
        fast = ewma.fast.value if ewma.fast.value is not None else 0.0
        slow = ewma.slow.value if ewma.slow.value is not None else 0.0
        return ewma.to_dict(), fast, slow, b_net

    def preview(
        self,
        handle: Handle,
        staged: Mapping[str, Any],
        step_input: Any,
        step: Mapping[str, Any],
    ) -> tuple[BreakerDecision | None, InterventionContext | None]:
        """Step the machine with a capturing hook: the decision, or the context it would repair.

        When the step would call the hook the machine is left dirty: the caller drops it.
        """
        return self._preview(
            handle,
            staged["node"],
            staged["view"] if "view" in staged else staged.get("update"),
            step_input,
            staged.get("outcome") or None,
            staged.get("hold"),
            step["fast"],
            step["slow"],
            step["scores"],
        )

    def _preview(
        self,
        handle: Handle,
        node: str,
        payload: Any,
        step_input: Any,
        outcome: Mapping[str, str] | None,
        hold: str | None,
        fast: float,
        slow: float,
        scores: Mapping[str, float | None],
    ) -> tuple[BreakerDecision | None, InterventionContext | None]:
        """:meth:`preview` with the staged entry's and the step's fields as arguments."""
        dispatch = handle.dispatch
        dispatch.target = None
        dispatch.captured = None
        decision = handle.machine.step(
            fast,
            slow,
            node=node,
            local_scores={n: v for n, v in scores.items() if v is not None} if scores else {},
            weights=self.katz,
            payload=payload,
            step_input=step_input,
            probe=outcome,
            hold=hold,
        )
        captured = dispatch.take()
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
            weights=self.katz,
            payload=staged.get("view", staged["update"]),
            step_input=staged["input"],
            probe=staged.get("outcome") or None,
            hold=staged.get("hold"),
        )

    def commit(self, handle: Handle, thread: str, by: str) -> dict[str, Any]:
        """Snapshot the handle's machine, write its trace records, cache it; the state value."""
        value = {"machine": handle.machine.snapshot(), "by": by}
        if self.machines.record:  # else the machine has no recorder: no records to write
            commit_records(self.traces, thread, handle)
        self.machines.release(handle, value)
        return value

    def finish(self, call: Call) -> Any:
        """Decide what the guarded node returns (see the module docstring).

        Returns:
            The node's update (a dict, or a ``Command`` with its destinations) with the ``bb_``
            writes when the output is let through; otherwise a
            :class:`~biasbreaker_plugins.langgraph._internals.Halt` that stages it.
        """
        name = call.node.name
        bb = call.bb
        rotation = None if call.coverage is None else {"bb_probe_coverage": {name: call.coverage}}
        if call.node.mode == "queued":
            staged = entry(call, "queued", self.opaque)
            return Halt(
                goto=BREAKER,
                update={"bb_unverified_output": {call.key: staged}, **(rotation or {})},
            )
        scores = dict(bb.get("bb_local_scores") or {})
        raw_ewma = bb.get("bb_network_ewma")
        ewma, fast, slow, b_net = self.fold(bb, scores, name, call.sampled, call.score)
        writes: dict[str, Any] = {}
        if ewma is not raw_ewma:
            writes["bb_network_ewma"] = ewma
        if call.sampled:
            writes["bb_local_scores"] = {name: call.score}
        if rotation is not None:
            writes.update(rotation)
        weights = bb.get("bb_katz_weights")
        if weights is not self.weights and weights != self.weights:
            writes["bb_katz_weights"] = self.weights
        handle = self.machines.acquire(bb.get("bb_breaker"))
        decision, _ = self._preview(
            handle,
            name,
            call.payload(),  # built only if the step freezes it
            None,
            call.outcome or None,
            call.hold,
            fast,
            slow,
            scores,
        )
        if decision is None:
            # The step starts an intervention: bb_breaker takes it with the real hook.
            step = {"fast": fast, "slow": slow, "b_net": b_net, "scores": scores}
            staged = entry(call, "tripped", self.opaque, step=step, reason=trip_reason(call, fast))
            return Halt(goto=BREAKER, update={**writes, "bb_unverified_output": {call.key: staged}})
        writes["bb_breaker"] = self.commit(handle, call.thread, call.key)
        if decision.action is BreakerAction.PROCEED:
            if call.command is not None:
                return Command(update={**call.update, **writes}, goto=call.command.goto)
            return {**call.update, **writes}
        step = {"fast": fast, "slow": slow, "b_net": b_net, "scores": scores}
        staged = entry(call, held_status(decision), self.opaque, step=step, reason=decision.reason)
        writes["bb_unverified_output"] = {call.key: staged}
        frozen = freeze_record(bb, call.key, name, call.view, decision, handle.machine)
        writes.update(frozen)
        if call.hold is not None:  # why it is held, then that it was frozen
            writes["bb_audit_trail"] = [hold_event(staged), *frozen.get("bb_audit_trail", [])]
        return Halt(goto=route_for(decision), update=writes)


def trip_reason(call: Call, fast: float) -> str:
    """Why a guarded output is held before the breaker node has decided its repair.

    The machine's own reason comes with the breaker node's step; the ``held`` stream event is
    sent from the node's task, before it, and says this instead of nothing.
    """
    own = "" if call.score is None else f"local score {call.score:.4g}, "
    return (
        f"tripped: this step opens the breaker ({own}fast B_net {fast:.4g}); the breaker node "
        "repairs or holds the output"
    )


def freeze_record(
    bb: Mapping[str, Any],
    key: str,
    node: str,
    view: Any,
    decision: BreakerDecision,
    machine: ControlMachine,
) -> dict[str, Any]:
    """The ``bb_frozen`` record and audit event when ``decision`` froze this output (its view)."""
    payload = decision.frozen_payload
    if payload is None or payload != FrozenPayload.of(view):
        # None, or the decision refers to another output (the one under repair while this
        # output is held in RECOVERY): this output was not frozen by this step.
        return {}
    known = (bb.get("bb_frozen") or {}).get(key)
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


__all__ = ["Decider", "freeze_record", "trip_reason"]
