"""Probing a model call: whether it is sampled, its read, and its counterfactual re-issues.

:class:`CallProber` reads each call (:meth:`CallProber.begin`: a reply or a request the probe
cannot read holds the step, named), decides from the seed and the step id whether it is
sampled before the model is called (:meth:`CallProber.watcher`), starts a sampled call's
re-issues with the model's own call (:meth:`CallProber.speculate`) and scores it
(:meth:`CallProber.probe`): ``k`` counterfactual variants and ``r`` same-group resamples of
the request, through :class:`biasbreaker.probe.Probe`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.runnables import RunnableConfig

from biasbreaker.probe.budget import RunBudgets
from biasbreaker.types import LazyPayload
from biasbreaker_langchain.adapter import LangChainAgentAdapter
from biasbreaker_langchain.call import (
    Call,
    as_response,
    input_view,
    output_view,
    plain_reply,
    thread_of,
)
from biasbreaker_langchain.received import Received, changed
from biasbreaker_plugins.langgraph.probing import (
    HELPER_LOOP,
    Speculation,
    clone_probe,
    full_probe_reason,
    origin_of,
    probe_outcome,
)
from biasbreaker_plugins.langgraph.state import shown
from biasbreaker_plugins.langgraph.streaming import Capture
from biasbreaker_plugins.langgraph.values import Unreadable

NOT_VARIED = (
    "; the probe read the model request only (its messages, tool results among them, and "
    "system prompt): data a tool or the agent's state holds that the request does not carry is "
    "not varied, so a decision on it is not checked"
)
"""What a ``not_applicable`` outcome of a model call adds to the probe's reason
(:func:`biasbreaker_plugins.langgraph.probing.probe_outcome`)."""


class CallProber:
    """Whether a model call is probed, and its probe (one per middleware).

    Args:
        adapter: The middleware's adapter (its probe, node name and traces).
    """

    def __init__(self, adapter: LangChainAgentAdapter) -> None:
        self.adapter = adapter
        # the probe's covering rotation of the model node (docs/detection.md, "Every group
        # covered"), the latest in a run without a thread id: where the next such run starts
        # (a run with a thread id starts from its bb_probe_coverage and origin, never this)
        self._coverage: dict[str, int] = {}
        # thread -> the run's probe budget ([probe] max_calls_per_*, max_tokens_per_run)
        self._budgets = RunBudgets(adapter.probe.budget)
        # the outcome of a call not sampled, the same for every such call
        self._not_sampled = f"not sampled at [probe] probe_rate = {adapter.probe.probe_rate:g}"

    def begin(
        self,
        request: ModelRequest[Any],
        result: Any,
        config: RunnableConfig,
        capture: Capture,
        # an annotation's `|` replaced: equivalent mutants (never evaluated: `from __future__
        # import annotations`)
        received: Received | None,  # pragma: no mutate
    ) -> Call:
        """Read the call; decide whether the probe runs (``sampled``) or the step is held.

        ``received`` watched the call exactly when it may be sampled (:meth:`watcher`). A
        sampled call whose model received another request than the guard read (a
        middleware listed after the guard changed it: :mod:`biasbreaker_langchain.received`)
        is held as unreadable, the reason naming the fix.
        """
        response, command = as_response(result)
        call = Call(request, response, command, config, capture)
        try:
            if plain_reply(response):
                # certainly readable: the view is built if the machine freezes it, the probe
                # scores it or a review shows it (most calls do neither when not sampled)
                call.reply = LazyPayload(functools.partial(output_view, response))
            else:
                call.reply = output_view(response)
        except Unreadable as exc:
            call.reply = shown([m.model_dump() for m in response.result])
            call.hold = f"the probe cannot read the reply: {exc}"
            call.outcome = {"status": "unreadable", "reason": call.hold}
            return call
        if received is None:  # not sampled (watcher)
            call.outcome = {"status": "not_sampled", "reason": self._not_sampled}
            return call
        try:
            call.input_view = input_view(request)
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

    # the return annotation's `|` replaced: equivalent mutants (as `deciding.decide`'s)
    def watcher(self, request: ModelRequest[Any]) -> Received | None:  # pragma: no mutate
        """What watches the request the model receives, when the call may be sampled.

        Whether a call is sampled is a pure function of the seed and the step id
        (:meth:`Probe.should_probe`), known before the model is called; a call that is not
        sampled is never compared with what its model received (:meth:`begin`), so it is
        not watched (no callback handler is added to it).
        """
        probe = self.adapter.probe
        # at probe_rate 0 no step is sampled (should_probe is u < 0 with u >= 0): no hash
        if probe.probe_rate <= 0.0 or not probe.should_probe(self.step_id(request.state)):
            return None
        return Received()

    def step_id(self, state: Mapping[str, Any]) -> str:
        """The id of the machine step a call with ``state`` takes: ``"<node>@<step>"``."""
        raw = state.get("bb_breaker")
        step = int(raw["step"]) if isinstance(raw, Mapping) and "step" in raw else 0
        return f"{self.adapter.node}@{step}"

    def rotation(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, int]:
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

    def speculate(
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
        sync agent (``threaded``), on the helper loop; :meth:`probe` scores once the reply
        and all of them are in, with the result probing after the call gives. ``None`` for a
        call not sampled, with ``[probe] speculative = false``, or a request the probe cannot
        read (held after the call, as without speculation).
        """
        if received is None or not self.adapter.context.settings.probe.speculative:
            return None
        try:
            view = input_view(request)
        except Unreadable:
            return None
        probe = clone_probe(self.adapter.probe)
        probe.budget = self._budgets.get(thread_of(config))  # the call's run (its trace key)
        return Speculation.launch(
            probe,
            step,
            view,
            step_id=self.step_id(request.state),
            step_name=self.adapter.node,
            coverage=self.rotation(request.state, config),
            origin=origin_of(config, self.adapter.node),
            loop=HELPER_LOOP.get() if threaded else None,
            full=full_probe_reason(request.state.get("bb_breaker")),
        )

    async def probe(
        self,
        call: Call,
        step: Callable[[Any], Awaitable[Any]],
        ahead: Speculation | None = None,  # pragma: no mutate (an annotation, as above)
    ) -> None:
        """Score the call (``score``, ``outcome``), or hold it with why the probe failed.

        ``ahead``: its re-issues started with the model's own call (:meth:`speculate`), used
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
                    step_id=self.step_id(call.request.state),
                    step_name=self.adapter.node,
                    coverage=self.rotation(call.request.state, call.config),
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
        # step id before the call (watcher), and the probe decides on the same id with the
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
        call.outcome = probe_outcome(result, not_varied=NOT_VARIED)
        if result.holds:  # an unsupported language, [probe] unsupported_language = "hold"
            call.hold = result.reason


__all__ = ["NOT_VARIED", "CallProber"]
