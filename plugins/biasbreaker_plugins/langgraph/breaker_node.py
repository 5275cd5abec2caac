"""``bb_breaker``: the breaker and mitigation node, the only one that steps held outputs.

It takes one machine step per super-step (so each transition is checkpointed before the next
starts): the pending step of a tripped output with the real intervention hook, then the
re-step protocol of docs/control.md §3a with the same held output and the same fast and slow
B_net, until the output is let through (probation passed, or a repair that passed its
re-check) or escalated to ``bb_review``. It also checks the *queued* outputs of parallel
branches one after another. Outputs it lets through are promoted with the other outputs of
their super-step (:class:`~biasbreaker_plugins.langgraph.staging.Work`).

It takes no input from the graph: it reads the guard's keys itself
(:func:`~biasbreaker_plugins.langgraph._internals.read_channels`), so no stream mode shows
a held output as its task's input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from biasbreaker.machine import AnyHook
from biasbreaker.types import BreakerAction, BreakerState, FrozenPayload
from biasbreaker_plugins.langgraph._internals import read_channels
from biasbreaker_plugins.langgraph.deciding import Decider, freeze_record
from biasbreaker_plugins.langgraph.machines import run_sync
from biasbreaker_plugins.langgraph.names import BREAKER
from biasbreaker_plugins.langgraph.probing import Rerun, rerun_context, reset_rerun
from biasbreaker_plugins.langgraph.send_panel import SendPanel
from biasbreaker_plugins.langgraph.shared import Shared
from biasbreaker_plugins.langgraph.staging import Work, goto_from_json, held_status, hold_event
from biasbreaker_plugins.langgraph.state import BB_KEYS
from biasbreaker_plugins.langgraph.values import rebuild_values


class BreakerNode(Shared):
    """The ``bb_breaker`` node of one guarded graph.

    Args:
        decider: Steps the control machine.
        hook: The intervention hook.
        send_panel: The ``Send`` panel, or ``None`` with ``panel = "in-process"``.
        settle: Called with the task's work and config before it returns (streams the
            promoted outputs' held events).
    """

    def __init__(
        self,
        decider: Decider,
        hook: AnyHook,
        send_panel: SendPanel | None,
        settle: Callable[[Work, RunnableConfig], None],
    ) -> None:
        self.decider = decider
        self.hook = hook
        self.send_panel = send_panel
        self.settle = settle

    def __call__(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        """Take one action, in order of priority.

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
        bb = read_channels(config, BB_KEYS)
        work = Work(bb, config)
        result = self._act(work, bb, config)
        self.settle(work, config)
        return result

    def _act(self, work: Work, bb: Mapping[str, Any], config: RunnableConfig) -> Any:
        pending = work.entries("tripped", "held", "fanout")
        panel = self.send_panel
        if not pending:
            self._run_queue(work)
            return work.result()
        staged = pending[0]
        if staged["status"] == "fanout" and panel is not None:
            ready = panel.aggregated(bb, staged)
            if ready is None:
                return work.result()  # the Send branches are still running
            hook = panel.replay_hook(staged, ready)
            self._take_step(work, staged, hook, config, clear_fan=True)
            prefix = f"{staged['key']}/{staged['fanout']['attempt']}/"
            slots = bb.get("bb_verdicts") or {}
            done = {slot: None for slot in slots if slot.startswith(prefix)}
            work.pairs.append(("bb_verdicts", done))
        elif panel is not None:
            sends = panel.fan_out(work, staged)
            if sends is not None:
                return work.result(sends=sends)
            self._take_step(work, staged, self.hook, config)
        else:
            self._take_step(work, staged, self.hook, config)
        return work.result()

    def _take_step(
        self,
        work: Work,
        staged: dict[str, Any],
        hook: AnyHook,
        config: RunnableConfig,
        *,
        clear_fan: bool = False,
    ) -> None:
        """One machine step for a tripped or held output, with ``hook``; record the outcome."""
        decider = self.decider
        handle = decider.machines.acquire(work.breaker)
        handle.dispatch.target = hook
        # a repair's re-check re-runs the node on counterfactual states rebuilt onto its input
        token = rerun_context(
            Rerun(
                staged.get("template"),
                config,
                update=staged.get("update"),
                goto=goto_from_json(staged.get("goto") or []),
            )
        )
        try:
            decision = run_sync(decider.astep(handle.machine, staged, staged["step"]))
        finally:
            reset_rerun(token)
        machine = handle.machine
        result = machine.last_result
        work.set_breaker(
            decider.commit(handle, work.thread, f"{BREAKER}@{work.lg_step}:{staged['key']}")
        )
        work.extend(
            freeze_record(
                work.state,
                staged["key"],
                staged["node"],
                staged.get("view", staged["update"]),
                decision,
                machine,
            ).items()
        )
        ran_hook = machine.last_record is not None and machine.last_record.intervention is not None
        if ran_hook and result is not None:
            event = {"event": "intervention", "key": staged["key"], **result.summary()}
            work.pairs.append(("bb_audit_trail", [event]))
        staged = {k: v for k, v in staged.items() if k != "fanout"} if clear_fan else staged
        repaired = None
        tau_exit = machine.config.thresholds.tau_exit
        if (
            ran_hook
            and decision.state is BreakerState.INTERVENTION
            and result is not None
            and result.recheck_passes(tau_exit)
            and result.repaired is not None
        ):
            repaired = _usable_repair(staged, result.repaired)
        if decision.action is BreakerAction.PROCEED:
            work.clear(staged, staged["update"])
        elif repaired is not None and result is not None:
            update, view = repaired
            work.clear(staged, update, "repaired")
            work.pairs.append(("bb_local_scores", {staged["node"]: result.recheck_score}))
            frozen = dict(work.frozen(staged["key"]))
            if frozen:
                work.pairs.append(
                    (
                        "bb_frozen",
                        {staged["key"]: {**frozen, "status": "repaired", "repaired": view}},
                    )
                )
        else:
            work.put({**staged, "status": held_status(decision), "reason": decision.reason})

    def _run_queue(self, work: Work) -> None:
        """Check the queued outputs in order; stop at the first that is not let through."""
        decider = self.decider
        scores = dict(work.state.get("bb_local_scores") or {})
        running = dict(work.state)
        for staged in work.entries("queued"):
            ewma, fast, slow, b_net = decider.fold(
                running, scores, staged["node"], staged["sampled"], staged["score"]
            )
            running["bb_network_ewma"] = ewma
            work.pairs.append(("bb_network_ewma", ewma))
            if staged["sampled"]:
                work.pairs.append(("bb_local_scores", {staged["node"]: staged["score"]}))
            if work.state.get("bb_katz_weights") != decider.weights:
                work.pairs.append(("bb_katz_weights", decider.weights))
            step = {"fast": fast, "slow": slow, "b_net": b_net, "scores": dict(scores)}
            handle = decider.machines.acquire(work.breaker)
            decision, _ = decider.preview(handle, staged, None, step)
            if decision is None:
                work.put({**staged, "status": "tripped", "step": step})
                return
            work.set_breaker(
                decider.commit(handle, work.thread, f"{BREAKER}@{work.lg_step}:{staged['key']}")
            )
            if decision.action is BreakerAction.PROCEED:
                work.clear({**staged, "step": step}, staged["update"])
                continue
            held = {**staged, "status": held_status(decision), "step": step}
            work.put({**held, "reason": decision.reason})
            if staged.get("hold") is not None:
                work.pairs.append(("bb_audit_trail", [hold_event(staged)]))
            frozen = freeze_record(
                running,
                staged["key"],
                staged["node"],
                staged.get("view", staged["update"]),
                decision,
                handle.machine,
            )
            work.extend(frozen.items())
            return


def _usable_repair(
    staged: Mapping[str, Any], repaired: FrozenPayload
) -> tuple[dict[str, Any], Any] | None:
    """The repaired view as (an update of the node's keys, the view), or ``None`` if unusable.

    The view is rebuilt onto the node's own update (messages keep their ids and types); a
    repair that writes a key the node did not write, a ``bb_`` key, or changes the update's
    shape (a message or a tool call more or less) is unusable.
    """
    value = repaired.thaw()
    if not isinstance(value, dict):
        return None
    update = staged["update"]
    if set(value) - set(update) or any(k in BB_KEYS for k in value):
        return None
    try:
        rebuilt = rebuild_values({k: v for k, v in update.items() if k in value}, value)
    except ValueError:
        return None
    return rebuilt, value


__all__ = ["BreakerNode"]
