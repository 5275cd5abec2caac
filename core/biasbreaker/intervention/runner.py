"""The intervention runner: the control machine's mitigation hook (M4 WP5).

``InterventionRunner`` turns an :class:`~biasbreaker.types.InterventionContext` (a halted step:
its frozen output, its input, per-node scores and the mixing ratio) into an
:class:`~biasbreaker.types.InterventionResult`:

1. **route**: the selected ``classify_route`` plugin picks ``"skeptics"``, ``"madera"`` or
   ``"none"`` (:func:`~biasbreaker.intervention.router.checked_route`);
2. **repair**: the skeptic panel (concurrent skeptics, checked aggregation) proposes a
   corrected payload, or MADERA diagnoses, retrieves counter-evidence and rewrites, re-scoring
   every rewrite;
3. **blend**: the correction is blended into the original by the breaker's mixing ratio
   (:func:`~biasbreaker.intervention.blend.blend`);
4. **re-check**: the repair is *measured*, not assumed. The runner probes the repaired step:
   it re-runs the guarded node on the counterfactual variants (and same-group resamples) of the
   step's input, applies the same repair to every output (the panel again for the skeptic
   route; one editor call with the chosen round's diagnosis and evidence for MADERA), blends
   each, and scores the divergence with the detection scorers (the M1 probe, noise floor
   subtracted). That score is the ``recheck_score`` RECOVERY -> NORMAL needs below
   ``tau_exit``. Cost per re-check with ``k`` variants and ``r`` resamples: ``k + r`` node
   calls plus ``k + r`` repairs (skeptics: ``n_skeptics`` LLM calls each; MADERA: one editor
   call each), and MADERA re-checks every round.

Every route, verdict, skeptic failure, pruning, rewrite, blend and re-check is appended to the
result's trail. Any exception fails the attempt closed: the result carries the error, never a
repair, and the machine retries, then escalates.

Source:
    Phase 4 design (M4) R5 and WP5; Phase 3 design (M3) R2 (mixing ratio) and R3 (recovery
    re-check).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from biasbreaker.errors import InterventionError
from biasbreaker.intervention.blend import blend
from biasbreaker.intervention.madera import Madera
from biasbreaker.intervention.panel import SkepticPanel
from biasbreaker.intervention.router import Router, checked_route, possible_routes
from biasbreaker.intervention.types import (
    Diagnosis,
    Evidence,
    PanelRun,
    ReviewRequest,
    TrackRecord,
)
from biasbreaker.probe.probe import Probe, Routed
from biasbreaker.redaction import redact_text
from biasbreaker.registry import BuildContext
from biasbreaker.types import (
    FrozenJSON,
    FrozenPayload,
    InterventionContext,
    InterventionResult,
    JSONValue,
    Route,
    canonical_json,
)
from biasbreaker.usage import phase

if TYPE_CHECKING:
    from biasbreaker.machine import MachineConfig


class Repair(Protocol):
    """Applies a chosen repair to one output of the guarded node (used by the re-check)."""

    def __call__(self, output: JSONValue, task: JSONValue | None = None) -> Awaitable[JSONValue]:
        """Repair ``output``.

        Args:
            output: One output of the guarded node.
            task: The input that output was computed from (a counterfactual variant of the
                halted step's input, in the re-check), or ``None`` for the halted step's own:
                a skeptic reviewing a variant's output must see the variant's task, not the
                original one.

        Returns:
            The repaired output.
        """
        ...


TrailEvent = dict[str, JSONValue]


def _trail(events: list[TrailEvent]) -> tuple[Mapping[str, FrozenJSON], ...]:
    """The trail as ``InterventionResult`` stores it (it deep-freezes the events itself)."""
    return cast(tuple[Mapping[str, FrozenJSON], ...], tuple(events))


def as_text(value: JSONValue) -> str:
    """The text an LLM stage sees for a payload: a string as is, else canonical JSON."""
    return value if isinstance(value, str) else canonical_json(value)


def parse_like(original: JSONValue, text: str) -> JSONValue | None:
    """Read a correction proposed as text in the original payload's shape.

    Args:
        original: The original payload.
        text: The proposed correction (text; JSON text for structured payloads).

    Returns:
        ``text`` itself for a text payload; for a structured payload the parsed JSON value when
        it is of the same JSON type (object, array, number, bool) as the original, else ``None``
        (an unusable correction).
    """
    if isinstance(original, str):
        return text
    try:
        value: JSONValue = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if _json_kind(value) == _json_kind(original) else None


def _json_kind(value: JSONValue) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "null" if value is None else "object"


@dataclass(frozen=True)
class Recheck:
    """A measured re-check of a repair.

    Args:
        score: The repaired step's bias score (finite, >= 0).
        calls: Calls the measurement made (node and repair invocations).
        detail: What was measured, for the trail.
    """

    score: float
    calls: int
    detail: str = ""


class Rechecker(Protocol):
    """Measures a repair: the bias score of the guarded step followed by the repair."""

    async def recheck(
        self, context: InterventionContext, repair: Repair, repaired: JSONValue
    ) -> Recheck:
        """Score ``repaired`` as the output of ``repair(node(input))``.

        Raises:
            InterventionError: If the repair cannot be scored (fails closed).
        """
        ...


async def _call_step(step: Callable[..., Any], value: Any, sample: int) -> Any:
    try:
        params = inspect.signature(step).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    out = step(value, sample=sample) if "sample" in params else step(value)
    if inspect.isawaitable(out):
        out = await out
    return out


@dataclass
class ProbeRechecker:
    """Re-checks a repair with the M1 probe: counterfactual invariance of ``repair o node``.

    Args:
        probe: A :class:`biasbreaker.probe.probe.Probe` (anything with its async ``probe``).
        steps: Node name -> the guarded step callable (sync or async, optionally taking
            ``sample=``).
        compared: Node name -> ``async (repaired output, step input) -> value``: what the
            re-check compares for that node instead of the repaired output alone — e.g. the
            output with where it sends the run next (the LangGraph adapter adds the
            destinations a node's conditional edges pick from the repaired state, so a repair
            that leaves a route depending on the group does not pass). Applied to every
            re-run's repaired output and to the repaired output being checked (on the halted
            step's input). A node without an entry compares the repaired output itself.

    A step may return a :class:`~biasbreaker.probe.Routed` (its output and where it sent the
    run, e.g. a LangGraph ``Command(goto=...)``): a repair rewrites the output, never the
    route, so the re-run's repaired output keeps the route it took, and the node's
    ``compared`` entry gets the ``Routed`` (for the repaired output being checked it gets the
    bare output and adds the route the halted step will take). A route that depends on the
    group thus fails the re-check however neutral the rewritten output is. Without a
    ``compared`` entry the bare reference has no route and every routed re-run differs from
    it: the re-check fails closed.
    """

    probe: Any
    steps: Mapping[str, Callable[..., Any]]
    compared: Mapping[str, Callable[[JSONValue, Any], Awaitable[JSONValue]]] = field(
        default_factory=dict
    )
    _count: int = field(default=0, init=False)

    async def recheck(
        self, context: InterventionContext, repair: Repair, repaired: JSONValue
    ) -> Recheck:
        """Probe the repaired step on the halted step's input.

        Raises:
            InterventionError: No step for the node, no step input, or the probe did not score
                (e.g. the input has no protected mention).
        """
        if context.node is None or context.node not in self.steps:
            raise InterventionError(
                f"cannot re-check node {context.node!r}: no guarded step registered for it "
                f"(known: {sorted(self.steps)})"
            )
        if context.step_input is None:
            raise InterventionError("cannot re-check: the context carries no step input")
        step = self.steps[context.node]
        finish = self.compared.get(context.node)
        calls = 0

        # the default is an equivalent mutant's: the probe passes every call's sample
        async def repaired_step(value: Any, sample: int = 0) -> JSONValue:  # pragma: no mutate
            nonlocal calls
            calls += 2
            output = await _call_step(step, value, sample)
            if isinstance(output, Routed):
                fixed: Any = Routed(await repair(output.output, value), output.route)
            else:
                fixed = await repair(output, value)
            return fixed if finish is None else await finish(fixed, value)

        # each re-check's own step id: a shared probe caches outputs by step name
        self._count += 1
        name = f"recheck:{context.node}:{context.step}:{context.attempt}:{self._count}"
        step_input = context.step_input.thaw()
        reference = repaired if finish is None else await finish(repaired, step_input)
        with phase("re-check"):  # its calls are the re-check's in the usage tally
            # a repair is measured by the full probe, never a first stage (adaptive probing)
            full = {"full": "a repair's re-check"} if isinstance(self.probe, Probe) else {}
            result = await self.probe.probe(
                repaired_step, step_input, reference, step_id=name, step_name=name, **full
            )
        if result.status != "scored" or result.score is None:
            raise InterventionError(
                f"the re-check could not score the repair ({result.status}: {result.reason})"
            )
        return Recheck(
            score=float(result.score),
            calls=calls,
            detail=f"probe k={result.k} r={result.r}, {result.calls} step calls",
        )


@dataclass
class InterventionRunner:
    """The control machine's intervention hook: route, repair, blend, re-check.

    Args:
        router: The ``classify_route`` implementation.
        rechecker: Measures each repair (normally a :class:`ProbeRechecker`).
        panel: The skeptic panel, or ``None`` (the skeptic route then fails closed).
        madera: The MADERA stages, or ``None`` (the MADERA route then fails closed).
        router_name: The router's name, for messages.
        track_record: Per-kind accuracy of the skeptics (the trust formula's ``R``). Updated
            after each panel repair whose re-check passed; persist it with ``to_json``.
        attributes: Maps the step input to the demographic attributes it involves (for the
            skeptics and the trust formula's ``I``), or ``None``.

    Use :meth:`hook` with ``ControlMachine.step`` and :meth:`ahook` with ``astep``.
    """

    router: Router
    rechecker: Rechecker
    panel: SkepticPanel | None = None
    madera: Madera | None = None
    router_name: str = "router"
    track_record: TrackRecord = field(default_factory=TrackRecord)
    attributes: Callable[[JSONValue], Sequence[str]] | None = None

    @classmethod
    def from_context(
        cls,
        context: BuildContext,
        *,
        rechecker: Rechecker,
        track_record: TrackRecord | None = None,
        attributes: Callable[[JSONValue], Sequence[str]] | None = None,
    ) -> InterventionRunner:
        """Build the configured runner (router, panel, MADERA from ``[intervention]``).

        Only the strategies the router can route to (its ``routes``,
        :func:`~biasbreaker.intervention.router.possible_routes`) are built; the other is
        ``None``.

        Raises:
            ConfigError: The panel is misconfigured (fewer than two distinct kinds), or a
                strategy needs an LLM and ``[llm] client`` is unset.
            PluginError: A selected implementation failed to build.
        """
        name = context.settings.intervention.router
        router = context.build("classify_route", name)
        routes = possible_routes(router, name=name)
        return cls(
            router=router,  # type: ignore[arg-type]
            rechecker=rechecker,
            panel=SkepticPanel.from_context(context) if "skeptics" in routes else None,
            madera=Madera.from_context(context) if "madera" in routes else None,
            router_name=name,
            track_record=track_record or TrackRecord(),
            attributes=attributes,
        )

    @property
    def repairs(self) -> bool:
        """Whether any repair strategy was built (the router can route to one).

        ``False`` for a router that routes every trip to ``"none"`` (``"human-review"``):
        then no intervention can pass its re-check, and every trip ends in escalation.
        """
        return self.panel is not None or self.madera is not None

    def machine_config(self, config: MachineConfig) -> MachineConfig:
        """The configuration the control machine runs with under this runner.

        ``config`` itself when a repair can pass its re-check; otherwise
        :meth:`~biasbreaker.machine.MachineConfig.without_repair` (``max_retries = 1``, no
        cool-down), so the first trip escalates to review two re-steps later instead of
        retrying repairs that cannot be made. Every adapter that runs this runner builds its
        machines from this (the LangGraph guard, the LangChain middleware).
        """
        return config if self.repairs else config.without_repair()

    def hook(self, context: InterventionContext) -> InterventionResult:
        """The synchronous hook (``ControlMachine(hook=runner.hook)`` with ``step``).

        Raises:
            RuntimeError: Inside a running event loop (use :meth:`ahook` with ``astep``).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.ahook(context))
        raise RuntimeError("InterventionRunner.hook() called inside an event loop; use ahook")

    async def ahook(self, context: InterventionContext) -> InterventionResult:
        """The coroutine hook (``ControlMachine(hook=runner.ahook)`` with ``astep``)."""
        trail: list[TrailEvent] = []
        route: Route = "none"
        try:
            if context.frozen_payload is None:
                raise InterventionError("nothing to repair: the context has no frozen payload")
            route = checked_route(self.router, context, name=self.router_name)
            trail.append({"event": "route", "route": route, "router": self.router_name})
            if route == "none":
                return InterventionResult(strategy="none", trail=_trail(trail))
            original = context.frozen_payload.thaw()
            request = self._request(context, original)
            if route == "skeptics":
                return await self._skeptics(context, original, request, trail)
            return await self._madera(context, original, request, trail)
        except Exception as exc:
            error = redact_text(f"{type(exc).__name__}: {exc}")  # recorded in the trace
            trail.append({"event": "failed", "error": error})
            return InterventionResult(strategy=route, trail=_trail(trail), error=error)

    def _request(self, context: InterventionContext, payload: JSONValue) -> ReviewRequest:
        task = None if context.step_input is None else context.step_input.thaw()
        attributes: tuple[str, ...] = ()
        if self.attributes is not None and task is not None:
            attributes = tuple(sorted(set(self.attributes(task))))
        return ReviewRequest(
            payload=as_text(payload),
            task=None if task is None else as_text(task),
            node=context.node,
            attributes=attributes,
            seed=context.seed,
        )

    # ------------------------------------------------------------------ skeptics

    async def _skeptics(
        self,
        context: InterventionContext,
        original: JSONValue,
        request: ReviewRequest,
        trail: list[TrailEvent],
    ) -> InterventionResult:
        panel = self.panel
        if panel is None:
            raise InterventionError("the router chose 'skeptics' but no panel is configured")
        run = await panel.run(request, track_record=self.track_record)
        trail.extend(_panel_events(run))
        if not run.ok or run.result is None:
            raise InterventionError(f"skeptic panel failed closed: {run.closed_reason}")
        result = run.result
        corrected = None if result.corrected is None else parse_like(original, result.corrected)
        if corrected is None:
            why = (
                f"panel decided {result.decision!r} without a usable correction"
                if result.decision == "stands" or result.corrected is None
                else "the panel's correction does not parse as the payload's JSON type"
            )
            trail.append({"event": "no-repair", "reason": why})
            return InterventionResult(strategy="skeptics", trail=_trail(trail))
        m = context.mixing_ratio
        repaired = blend(original, corrected, m)
        trail.append({"event": "blend", "mixing_ratio": m})

        async def repair(output: JSONValue, task: JSONValue | None = None) -> JSONValue:
            update = {"payload": as_text(output)}
            if task is not None:
                update["task"] = as_text(task)
            sub = await panel.run(request.model_copy(update=update), track_record=self.track_record)
            fix = None
            if sub.ok and sub.result is not None and sub.result.corrected is not None:
                fix = parse_like(output, sub.result.corrected)
            return output if fix is None else blend(output, fix, m)

        check = await self.rechecker.recheck(context, repair, repaired)
        passed = check.score < context.thresholds.tau_exit
        trail.append(
            {
                "event": "recheck",
                "score": check.score,
                "calls": check.calls,
                "detail": check.detail,
                "passes": passed,
            }
        )
        if passed:
            for verdict in run.verdicts:
                self.track_record = self.track_record.observe(
                    verdict.kind, verdict.decision != "stands"
                )
        return InterventionResult(
            repaired=FrozenPayload.of(repaired),
            converged=passed,
            strategy="skeptics",
            trail=_trail(trail),
            recheck_score=check.score,
        )

    # ------------------------------------------------------------------ MADERA

    async def _madera(
        self,
        context: InterventionContext,
        original: JSONValue,
        request: ReviewRequest,
        trail: list[TrailEvent],
    ) -> InterventionResult:
        madera = self.madera
        if madera is None:
            raise InterventionError("the router chose 'madera' but no MADERA stages are set")
        m = context.mixing_ratio
        details: dict[int, Recheck] = {}

        async def rescore(text: str, diagnosis: Diagnosis, evidence: Sequence[Evidence]) -> float:
            candidate = parse_like(original, text)
            if candidate is None:
                raise InterventionError("the editor's rewrite does not parse as the payload's type")

            async def repair(output: JSONValue, task: JSONValue | None = None) -> JSONValue:
                # The editor rewrites the output with the round's evidence; it takes no task.
                rewrite = await madera.rewrite(as_text(output), diagnosis, evidence)
                fixed = parse_like(output, rewrite)
                return output if fixed is None else blend(output, fixed, m)

            check = await self.rechecker.recheck(context, repair, blend(original, candidate, m))
            details[len(details) + 1] = check
            return check.score

        result = await madera.run(
            as_text(original), request, rescore=rescore, tau_exit=context.thresholds.tau_exit
        )
        for attempt in result.attempts:
            check = details[attempt.round]
            trail.append(
                {
                    "event": "rewrite",
                    "round": attempt.round,
                    "attribute": attempt.diagnosis.attribute,
                    "query": attempt.diagnosis.query,
                    "evidence": list(attempt.evidence),
                    "score": attempt.score,
                    "recheck_calls": check.calls,
                }
            )
        trail.append(
            {
                "event": "madera-stop",
                "reason": result.stop_reason,
                "best_round": None if result.best is None else result.best.round,
            }
        )
        if result.best is None:
            trail.append(
                {
                    "event": "no-repair",
                    "reason": "no counter-evidence found: payload kept (no evidence, no rewrite)",
                }
            )
            return InterventionResult(strategy="madera", trail=_trail(trail))
        best = parse_like(original, result.best.text)
        assert best is not None  # rescore rejected unparseable rewrites
        repaired = blend(original, best, m)
        trail.append({"event": "blend", "mixing_ratio": m})
        return InterventionResult(
            repaired=FrozenPayload.of(repaired),
            converged=result.converged,
            strategy="madera",
            trail=_trail(trail),
            recheck_score=result.best.score,
        )


def _panel_events(run: PanelRun) -> list[TrailEvent]:
    events: list[TrailEvent] = []
    for v in run.verdicts:
        events.append(
            {
                "event": "verdict",
                "kind": v.kind,
                "decision": v.decision,
                "confidence": v.confidence,
                "evidence": list(v.evidence),
                "attribute": v.attribute,
                "critique": v.critique[:500],
            }
        )
    for f in run.failures:
        events.append(
            {"event": "skeptic-failed", "kind": f.kind, "failure": f.failure, "reason": f.reason}
        )
    if run.result is not None:
        for p in run.result.pruned:
            events.append(
                {"event": "pruned", "label": p.label, "reason": p.reason, "detail": p.detail}
            )
        events.append(
            {
                "event": "panel",
                "aggregator": run.result.aggregator,
                "decision": run.result.decision,
                "confidence": run.result.confidence,
                "weights": dict(run.result.weights),
            }
        )
    else:
        events.append({"event": "panel-closed", "reason": run.closed_reason})
    return events


__all__ = [
    "InterventionRunner",
    "ProbeRechecker",
    "Recheck",
    "Rechecker",
    "Repair",
    "as_text",
    "parse_like",
]
