"""Predict a run's LLM calls and tokens before anything is called (``biasbreaker estimate``).

A run's calls split in two parts, predicted differently:

* **without repairs** (agent and probe): each input's steps, each step's own LLM calls
  (``calls``: one run of the node) and, for a probed step, its probe's re-runs, each one more
  run of the node. The re-runs are what :meth:`~biasbreaker.probe.Probe.draw` draws for the
  step's input (:func:`reruns`): ``k`` counterfactual variants, one joint variant when the
  input names two or more axes, one per-person variant per person of a mixed axis, ``r``
  same-group resamples, duplicates answered once; none when the input names no protected
  group (not applicable). Expected calls are these times ``probe_rate``. A step the probe
  holds (an unsupported language, an unreadable mention, a step over ``[probe]
  max_calls_per_step`` or ``max_calls_per_run``: :func:`draw`) runs its node, re-runs nothing
  and pauses its run for review, so no later step of that input runs; held inputs are
  counted apart (:attr:`Prediction.held`). Given the steps, this part is exact: nothing in
  it depends on a reply.
* **repairs** (re-check, skeptic, MADERA): they happen only where the breaker trips, which
  depends on what the agents answer. They are given as a range, from none (no step trips) to
  every guarded step tripping once at the costliest configured route
  (:func:`repair_cost`), and as an expectation only when a trip rate is given (the share of
  guarded steps that trip, e.g. measured on earlier runs of the same pipeline).

Tokens are counted by the rule :func:`biasbreaker.llm.estimate_tokens` uses for replies whose
endpoint reports no usage (about four characters a token): prompt tokens of the agent's and the
probe's calls from the prompt text where the caller knows it, completion tokens only where the
caller gives them (a reply's length is not known before it is written).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from biasbreaker.errors import ConfigError, ProbeError
from biasbreaker.probe import Probe, ProbeResult
from biasbreaker.probe.budget import BudgetExceeded, BudgetLimits, ProbeBudget

REPAIR_ROLES = ("re-check", "skeptic", "MADERA")
"""The roles whose calls happen only where the breaker trips."""


@dataclass(frozen=True)
class Step:
    """One step of one input's run, as the estimate sees it.

    Args:
        node: The node's name.
        calls: LLM calls one run of the node makes (its own call or calls), >= 0.
        reruns: Re-runs of the node the probe makes for this step when it probes it (0: not
            probed, not applicable, held); :func:`reruns` counts them.
        guarded: Whether the breaker checks the step (it can trip there).
        prompt_tokens: Prompt tokens of one run of the node (all its calls together), or
            ``None`` when not predicted.
        completion_tokens: Completion tokens of one run of the node, or ``None``.
        held: Why the probe holds the step for review when it probes it (``"unsupported_
            language"``, ``"unreadable"``, ``"max_calls_per_step"``, ``"failed"``:
            :attr:`Draw.held`), or ``""``: the node runs (its own calls), nothing is re-run,
            no repair is called, and the run pauses there for review (no later step runs).
    """

    node: str
    calls: int = 1
    reruns: int = 0
    guarded: bool = True
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    held: str = ""


@dataclass(frozen=True)
class Repairs:
    """What one intervention can cost, from ``[intervention]``.

    Args:
        routes: The strategies the router can choose (``"skeptics"``, ``"madera"``; empty for
            human review only, or a phase whose breaker only records).
        panel: Skeptics in the panel.
        max_rewrites: MADERA's rounds per intervention.
    """

    routes: frozenset[str]
    panel: int = 3
    max_rewrites: int = 3


@dataclass(frozen=True)
class RepairCost:
    """The LLM calls of one intervention at a step, by role: typical and at most."""

    typical: dict[str, int]
    most: dict[str, int]


def repair_cost(step: Step, repairs: Repairs) -> RepairCost:
    """The calls one intervention at ``step`` makes, by role.

    The skeptic route: the panel (one call per skeptic; at most one retry each for a reply
    that does not parse), then the re-check probes the repaired step: each of the step's
    re-runs runs the node and the panel again. The MADERA route, per round: the diagnoser and
    the editor (one call each, the shipped ``llm`` stages), then the re-check, each re-run
    running the node and the editor; typical is one round, at most ``max_rewrites``. With
    both routes possible, typical is the skeptic route's and at most the costlier one's.
    """
    v, c, p = step.reruns, step.calls, repairs.panel
    options: list[tuple[dict[str, int], dict[str, int]]] = []
    if "skeptics" in repairs.routes:
        options.append(
            (
                {"skeptic": p, "re-check": v * (c + p)},
                {"skeptic": 2 * p, "re-check": v * (c + 2 * p)},
            )
        )
    if "madera" in repairs.routes:
        rounds = repairs.max_rewrites
        options.append(
            (
                {"MADERA": 2, "re-check": v * (c + 1)},
                {"MADERA": 2 * rounds, "re-check": rounds * v * (c + 1)},
            )
        )
    if not options:
        return RepairCost({}, {})
    most = max((o[1] for o in options), key=lambda d: sum(d.values()))
    return RepairCost(typical=options[0][0], most=most)


@dataclass
class Prediction:
    """The predicted calls and tokens of a run (or of one phase of it).

    Args:
        inputs: Inputs (runs).
        steps: Steps over all inputs.
        guarded_steps: Guarded steps over all inputs (where a trip can happen).
        repairable_steps: Guarded steps where a trip calls an LLM (a repair route exists).
        probed_steps: Steps the probe re-runs (expected, with ``probe_rate``).
        calls: Calls without repairs, by role (``agent``, ``probe``).
        prompt_tokens: Prompt tokens without repairs, by role, where predicted.
        completion_tokens: Completion tokens without repairs, by role, where given.
        repairs_most: Repair calls by role if every guarded step trips once at the costliest
            route.
        repair_typical_all: Typical repair calls by role if every guarded step trips once
            (:attr:`repairs_expected` scales it by the trip rate).
        trip_rate: The share of guarded steps assumed to trip, or ``None`` (no expectation).
        held: Inputs held for review at a step, by why (:attr:`Step.held`, or
            ``"max_calls_per_run"``); expected, with ``probe_rate``.
    """

    inputs: int = 0
    steps: int = 0
    guarded_steps: int = 0
    repairable_steps: int = 0
    probed_steps: float = 0.0
    calls: dict[str, float] = field(default_factory=dict)
    prompt_tokens: dict[str, float] = field(default_factory=dict)
    completion_tokens: dict[str, float] = field(default_factory=dict)
    repairs_most: dict[str, int] = field(default_factory=dict)
    repair_typical_all: dict[str, int] = field(default_factory=dict)
    trip_rate: float | None = None
    held: dict[str, float] = field(default_factory=dict)

    @property
    def held_inputs(self) -> float:
        """Inputs held for review (expected, with ``probe_rate``)."""
        return sum(self.held.values())

    @property
    def without_repairs(self) -> float:
        """Every call when no step trips."""
        return sum(self.calls.values())

    @property
    def at_most(self) -> float:
        """Every call when every guarded step trips at its costliest route."""
        return self.without_repairs + sum(self.repairs_most.values())

    @property
    def repair_per_trip(self) -> float:
        """Typical calls one trip adds, averaged over the steps where a trip can repair."""
        if not self.repairable_steps:
            return 0.0
        return sum(self.repair_typical_all.values()) / self.repairable_steps

    @property
    def repairs_expected(self) -> dict[str, float] | None:
        """Expected repair calls by role at :attr:`trip_rate`, or ``None`` without one."""
        if self.trip_rate is None:
            return None
        return {r: self.trip_rate * n for r, n in self.repair_typical_all.items()}

    @property
    def expected(self) -> float:
        """Without repairs, plus the expected repairs where a trip rate is given."""
        extra = self.repairs_expected
        return self.without_repairs + (sum(extra.values()) if extra else 0.0)

    def add(self, other: Prediction) -> Prediction:
        """The sum of two predictions (two phases of one run); the trip rates must agree."""
        out = Prediction(
            inputs=self.inputs + other.inputs,
            steps=self.steps + other.steps,
            guarded_steps=self.guarded_steps + other.guarded_steps,
            repairable_steps=self.repairable_steps + other.repairable_steps,
            probed_steps=self.probed_steps + other.probed_steps,
            trip_rate=self.trip_rate if self.trip_rate == other.trip_rate else None,
        )
        for name in (
            "calls",
            "prompt_tokens",
            "completion_tokens",
            "repairs_most",
            "repair_typical_all",
            "held",
        ):
            total: dict[str, Any] = dict(getattr(self, name))
            for role, n in getattr(other, name).items():
                total[role] = total.get(role, 0) + n
            setattr(out, name, total)
        return out

    def to_json(self) -> dict[str, Any]:
        """A JSON object: the figures, rounded to whole calls and tokens."""
        expected = self.repairs_expected
        return {
            "inputs": self.inputs,
            "steps": self.steps,
            "guarded_steps": self.guarded_steps,
            "repairable_steps": self.repairable_steps,
            "probed_steps": round(self.probed_steps, 2),
            "held_inputs": round(self.held_inputs, 2),
            "held": {why: round(n, 2) for why, n in self.held.items()},
            "calls": {
                "without_repairs": round(self.without_repairs),
                "expected": round(self.expected),
                "at_most": round(self.at_most),
                "by_role": {r: round(n) for r, n in self.calls.items()},
                "repairs_per_trip": round(self.repair_per_trip, 2),
                "repairs_at_most": dict(self.repairs_most),
                "repairs_expected": (
                    None if expected is None else {r: round(n) for r, n in expected.items()}
                ),
            },
            "trip_rate": self.trip_rate,
            "prompt_tokens": {r: round(n) for r, n in self.prompt_tokens.items()},
            "completion_tokens": {r: round(n) for r, n in self.completion_tokens.items()},
        }


def predict(
    runs: Sequence[Sequence[Step]],
    repairs: Repairs,
    *,
    probe_rate: float = 1.0,
    trip_rate: float | None = None,
    max_calls_per_run: int = 0,
) -> Prediction:
    """Predict the calls of ``runs`` (one list of steps per input).

    Args:
        runs: Each input's steps, in order.
        repairs: What an intervention can cost (no routes: the breaker cannot repair).
        probe_rate: ``[probe] probe_rate``: the expected share of steps probed, in [0, 1].
        trip_rate: The share of guarded steps that trip, in [0, 1], for the expectation; or
            ``None`` to give the repairs as a range only.
        max_calls_per_run: ``[probe] max_calls_per_run`` (0: no bound): the step whose
            re-runs would pass it is held (as :attr:`Step.held`, ``"max_calls_per_run"``).

    A held step (:attr:`Step.held`), when the probe samples it, runs its node, re-runs
    nothing, calls no repair and pauses its input's run for review: no later step of the input
    runs (``run`` reports it ``review``). The calls, tokens, probed steps and held inputs are
    expectations over the sampling (exact at ``probe_rate = 1``); the repair range counts the
    steps a run can reach (all of them but those after a step held at ``probe_rate = 1``).

    Raises:
        ConfigError: ``probe_rate`` or ``trip_rate`` is outside [0, 1] (named with its value).
    """
    for name, value in (("probe_rate", probe_rate), ("trip_rate", trip_rate)):
        if value is not None and not (0.0 <= value <= 1.0 and math.isfinite(value)):
            raise ConfigError(
                f"{name} = {value!r} is not a share: give a number from 0 to 1 (e.g. 0.05 for "
                "one step in twenty)"
            )
    out = Prediction(trip_rate=trip_rate)
    for steps in runs:
        out.inputs += 1
        going, spent = 1.0, 0.0  # the chance the run reaches the step; re-runs spent so far
        for step in steps:
            out.steps += 1
            held = step.held
            if not held and max_calls_per_run and step.reruns:
                held = "max_calls_per_run" if spent + step.reruns > max_calls_per_run else ""
            sampled = probe_rate if step.reruns or held else 0.0
            probed = 0.0 if held else going * sampled
            spent += 0.0 if held else sampled * step.reruns
            out.probed_steps += probed
            _add(out.calls, "agent", going * step.calls)
            _add(out.calls, "probe", probed * step.reruns * step.calls)
            for into, tokens in (
                (out.prompt_tokens, step.prompt_tokens),
                (out.completion_tokens, step.completion_tokens),
            ):
                if tokens is None:
                    continue
                _add(into, "agent", going * tokens)
                if probed:
                    _add(into, "probe", probed * step.reruns * tokens)
            if held and sampled:
                _add(out.held, held, going * sampled)
                going *= 1.0 - sampled
            if step.guarded and going:
                _repairs(out, step, repairs)
            if not going:
                break  # held for review: the run pauses here
    if "probe" in out.calls and not out.calls["probe"]:
        del out.calls["probe"]
    return out


def _repairs(out: Prediction, step: Step, repairs: Repairs) -> None:
    """Add a guarded step's repair range to ``out``."""
    out.guarded_steps += 1
    cost = repair_cost(step, repairs)
    out.repairable_steps += bool(cost.typical)
    for role, n in cost.most.items():
        out.repairs_most[role] = out.repairs_most.get(role, 0) + n
    for role, n in cost.typical.items():
        out.repair_typical_all[role] = out.repair_typical_all.get(role, 0) + n


def _add(into: dict[str, float], role: str, n: float) -> None:
    into[role] = into.get(role, 0) + n


def _never_called(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the estimate draws re-runs; it never runs a step")


@dataclass(frozen=True)
class Draw:
    """What the probe would do with a step, drawn before anything runs (:func:`draw`).

    Args:
        reruns: The re-runs it makes, >= 0 (0: not applicable, or held).
        held: Why it holds the step for review, or ``""``: ``"unsupported_language"`` (``[probe]
            unsupported_language = "hold"``), ``"unreadable"`` (a mention it cannot vary),
            ``"max_calls_per_step"`` (more re-runs than the bound) or ``"failed"`` (the probe
            raised on the input).
        reason: The probe's own reason, as the run's trace records it (``""`` when not held).
    """

    reruns: int
    held: str = ""
    reason: str = ""


def draw(probe: Probe, node: str, step_input: Any) -> Draw:
    """What ``probe`` does with a step of ``node`` on ``step_input`` (nothing called).

    What :meth:`~biasbreaker.probe.Probe.draw` draws with a fresh rotation, and
    :meth:`~biasbreaker.probe.Probe.start` would start with an empty cache: each distinct call
    once, the step's own output (sample 0) not re-run. Sampling (``probe_rate``) is left to
    :func:`predict`. A step the probe holds (:attr:`ProbeResult.holds
    <biasbreaker.probe.ProbeResult.holds>`, a :class:`~biasbreaker.errors.ProbeError`, more
    re-runs than ``[probe] max_calls_per_step``, whose message is the budget's own) is held,
    with the reason the run would record.

    Args:
        probe: The run's probe (:func:`~biasbreaker.probe.build_probe`); its rotation state
            for ``node`` is reset, its sampling and budget are not used.
        node: The node's name.
        step_input: The step's input (the state the node reads, JSON-like).
    """
    rate, budget = probe.probe_rate, probe.budget
    probe.probe_rate, probe.budget = 1.0, None
    try:
        drawn = probe.draw(
            _never_called, step_input, step_id=f"estimate:{node}", step_name=node, coverage={}
        )
    except ProbeError as exc:  # the probe fails closed on this input: held, nothing re-run
        return Draw(0, "failed", f"probe failed: {type(exc).__name__}: {exc}")
    finally:
        probe.probe_rate, probe.budget = rate, budget
    if isinstance(drawn, ProbeResult):
        return Draw(0, drawn.status, drawn.reason) if drawn.holds else Draw(0)
    distinct = {c.key for c in drawn.calls} - {drawn.original_key}
    limit = budget.limits.max_calls_per_step if budget is not None else 0
    if limit and len(distinct) > limit:
        try:  # the budget's own message: what the run's trace would record
            ProbeBudget(BudgetLimits(max_calls_per_step=limit)).reserve(
                node, f"estimate:{node}", len(distinct), drawn.count()
            )
        except BudgetExceeded as exc:
            return Draw(0, "max_calls_per_step", f"probe failed: BudgetExceeded: {exc}")
    return Draw(len(distinct))


def reruns(probe: Probe, node: str, step_input: Any) -> int:
    """The re-runs ``probe`` makes for a step of ``node`` on ``step_input``: :func:`draw`'s.

    Returns:
        The re-runs, >= 0: 0 when the input names no protected group or the probe would hold
        the step (an unsupported language, a mention it cannot read, over ``[probe]
        max_calls_per_step``).
    """
    return draw(probe, node, step_input).reruns


ReRuns = Callable[[str, Any], int]
"""``(node, step input) -> re-runs``: :func:`reruns` bound to a probe."""


def describe(prediction: Prediction, *, label: str = "") -> list[str]:
    """Human-readable lines: calls without repairs, the range, by role, tokens.

    Args:
        prediction: What :func:`predict` returned.
        label: A prefix naming what is predicted (``"run"``, a phase), or ``""``.
    """
    p = prediction
    head = f"{label}: " if label else ""
    by_role = ", ".join(f"{r} {round(n)}" for r, n in p.calls.items()) or "none"
    held = ""
    if p.held:
        why = ", ".join(f"{w} {n:g}" for w, n in p.held.items())
        held = f", {p.held_inputs:g} input(s) held for review ({why})"
    lines = [
        f"{head}{round(p.without_repairs)} LLM calls without repairs ({by_role}) for "
        f"{p.inputs} input(s), {p.steps} step(s), {p.probed_steps:g} probed{held}",
    ]
    if p.guarded_steps and p.repairs_most:
        lines.append(
            f"{head}repairs: about {p.repair_per_trip:.0f} calls per trip; from 0 (no trip) to "
            f"{sum(p.repairs_most.values())} (every one of the {p.repairable_steps} guarded "
            "steps that can repair tripping at the costliest route): "
            f"{round(p.without_repairs)} to {round(p.at_most)} calls in all"
        )
        expected = p.repairs_expected
        if expected is not None:
            lines.append(
                f"{head}expected at trip rate {p.trip_rate:g}: {round(p.expected)} calls "
                f"({sum(expected.values()):.0f} for repairs)"
            )
    elif p.guarded_steps:
        lines.append(f"{head}repairs: none can call an LLM (no LLM-backed route)")
    if p.prompt_tokens:
        tokens = ", ".join(f"{r} {round(n)}" for r, n in p.prompt_tokens.items())
        lines.append(f"{head}prompt tokens without repairs (~4 characters a token): {tokens}")
    if p.completion_tokens:
        tokens = ", ".join(f"{r} {round(n)}" for r, n in p.completion_tokens.items())
        lines.append(f"{head}completion tokens without repairs: {tokens}")
    return lines


def check_calls(calls: Mapping[str, int]) -> dict[str, int]:
    """``--calls NODE=N`` values, checked: whole numbers >= 0.

    Raises:
        ConfigError: A value below 0 (named with the node).
    """
    for node, n in calls.items():
        if n < 0:
            raise ConfigError(
                f"--calls {node}={n}: a node makes 0 or more LLM calls per run; give e.g. "
                f"--calls {node}=1 (0 for a node that calls no model)"
            )
    return dict(calls)


__all__ = [
    "REPAIR_ROLES",
    "Draw",
    "Prediction",
    "ReRuns",
    "RepairCost",
    "Repairs",
    "Step",
    "check_calls",
    "describe",
    "draw",
    "predict",
    "repair_cost",
    "reruns",
]
