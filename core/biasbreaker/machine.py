"""The control state machine (WP3): the breaker's full lifecycle, step by step.

The machine follows the seed's R3 diagram::

    NORMAL --slow>=tau_warn--> WARNING --fast>=tau_enter--> INTERVENTION
       ^                          |                              |
       |                    fast>=tau_enter                 (run mitigation hook)
       |                          v                              v
       +--B_net<tau_exit & cool-down elapsed & recheck OK-- RECOVERY
                                                                |
                                  max_retries exceeded ---------+--> ESCALATED (terminal)

Every transition is one row of :data:`TRANSITIONS` with one guard function; on each step the
first row whose source is the current state and whose guard holds is taken, otherwise the
machine holds its state. A guard sees only :class:`GuardInputs` — the state, the counters,
this step's fast and slow B_net, the step's own local score and whether the calibration window
is dirty — so transitions are a function of those alone.

With ``node_trip`` on (:class:`MachineConfig`), the breaker also trips when the guarded step's
own local score reaches ``tau_enter``, not only when fast B_net does: B_net is a Katz-weighted
*average* over the nodes, smoothed by the fast EWMA, so one maximally biased node among clean
ones may never move fast B_net to ``tau_enter``.

One step is one call of :meth:`ControlMachine.step` (or :meth:`ControlMachine.astep` for a
coroutine hook); it takes at most one transition. The intervention hook runs inside the step
that enters INTERVENTION; the next step moves to RECOVERY, where the cool-down counts steps.

Source:
    Phase 3 design (M3), R3 and WP3; ``docs/control.md`` (transition table).
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Literal, Union

from biasbreaker.breaker import freeze, mixing_ratio
from biasbreaker.calibration import CalibrationWindow, ControlStatistics, WindowCounts
from biasbreaker.errors import InputError
from biasbreaker.redaction import redact_text, register_environment
from biasbreaker.trace import HELD_FOR_REVIEW, StepRecord, TraceHeader
from biasbreaker.types import (
    BreakerAction,
    BreakerDecision,
    BreakerState,
    FrozenPayload,
    InterventionContext,
    InterventionResult,
    JSONValue,
    Thresholds,
    check_score,
    check_unit_score,
)

if TYPE_CHECKING:
    from biasbreaker.config import Settings

SNAPSHOT_VERSION: Final = 1


Probation = Literal["hold", "half-open"]
"""What RECOVERY does with new outputs once a repair has passed its re-check (see MachineConfig)."""
PROBATION_MODES: Final = ("hold", "half-open")

InterventionHook = Callable[[InterventionContext], InterventionResult]
"""A synchronous mitigation hook (seed R3): context in, result out."""

AsyncInterventionHook = Callable[[InterventionContext], Awaitable[InterventionResult]]
"""A coroutine mitigation hook, for :meth:`ControlMachine.astep`."""

AnyHook = Union[InterventionHook, AsyncInterventionHook]  # noqa: UP007 (runtime alias, 3.10)


def noop_hook(context: InterventionContext) -> InterventionResult:
    """The default hook: repairs nothing, so the re-check fails and the machine escalates.

    This is the honest default of the seed (R3): without a mitigation strategy installed, a
    tripped run is retried ``max_retries`` times and then handed to human review.
    """
    return InterventionResult.noop()


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MachineConfig:
    """Static configuration of a control machine.

    Args:
        thresholds: The breaker's thresholds (``tau_enter > tau_exit``, ``tau_warn``, ``kappa``).
        cooldown_steps: Steps the machine stays in RECOVERY before it may leave it, >= 0 (it
            always spends at least one step there).
        max_retries: Interventions an episode may make, >= 1; when another one would be
            needed, the machine escalates instead.
        control: Control statistics for the calibration window, or ``None`` to run without a
            window (then RECOVERY -> NORMAL does not wait for a clean window; the trace says so
            by recording ``window: null``).
        max_history: Calibration window length W, >= 1 (ignored without ``control``).
        history_steps: Per-node score history kept for the router, >= 1 steps.
        seed: Seed from which each intervention's seed is derived.
        probation: What RECOVERY does with the outputs of new steps after the episode's
            repair passed its re-check. ``"hold"`` (the seed's literal machine): every output
            is held until RECOVERY -> NORMAL — right for a stream whose held outputs are simply
            dropped (the DoT harness). ``"half-open"`` (what a guarded pipeline needs, since a
            held output blocks everything downstream of it): RECOVERY is a probation in the
            sense of a circuit breaker's half-open state. A step whose own local score
            (``local_scores[node]``) is below ``tau_exit``, or that has none (not applicable),
            proceeds; a step whose own score is at or above ``tau_exit`` fails probation and
            the machine intervenes on *that* output (transition ``relapse``, a new attempt of
            the same episode) or escalates when the budget is spent (``relapse-escalate``).
            In half-open mode the caller promotes a repair that passed its re-check on the
            INTERVENTION step itself (``last_result.repaired``), and the step that recovers
            promotes its own output.
        node_trip: Whether the breaker also trips (NORMAL/WARNING -> INTERVENTION) when the
            guarded step's own local score (``local_scores[node]``) is ``>= tau_enter``, as
            well as when fast B_net is. ``False`` (the seed's literal machine, the default
            here, used by the DoT harness): only fast B_net trips. ``True`` (the
            configuration default, what guarded pipelines use): a single biased node is
            held even when the network average dilutes it below ``tau_enter``; the mixing
            ratio of a step with an own score is then taken on ``max(fast, own score)``, so
            it is ``>= 0.5`` at a node trip too. Closing the
            breaker is unchanged (fast below ``tau_exit``, cool-down, re-check, clean window).
            Calibrate the thresholds for the trigger you use (``biasbreaker calibrate``
            reads ``[breaker] node_trip``).
        ewma_smoothing: The smoothing factors ``(fast, slow)``, each in (0, 1], of the EWMAs
            that produce the fast and slow B_net this machine is given, or ``None`` when the
            caller does not say. Not used by the machine: it is recorded in the trace header
            so that ``biasbreaker verify`` can re-derive fast and slow from the recorded local
            scores (``from_settings`` takes them from ``[propagation]``).

    Raises:
        InputError: If a counter is out of range or ``thresholds`` is not a Thresholds.
    """

    thresholds: Thresholds
    cooldown_steps: int = 3
    max_retries: int = 2
    control: ControlStatistics | None = None
    max_history: int = 32
    history_steps: int = 8
    seed: int = 0
    probation: Probation = "hold"
    node_trip: bool = False
    ewma_smoothing: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.thresholds, Thresholds):
            raise InputError("MachineConfig.thresholds must be a Thresholds instance")
        for name, minimum in (
            ("cooldown_steps", 0),
            ("max_retries", 1),
            ("max_history", 1),
            ("history_steps", 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise InputError(f"MachineConfig.{name}={value!r} must be an int >= {minimum}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InputError(f"MachineConfig.seed={self.seed!r} must be an int")
        if self.control is not None and not isinstance(self.control, ControlStatistics):
            raise InputError("MachineConfig.control must be ControlStatistics or None")
        if self.probation not in PROBATION_MODES:
            raise InputError(
                f"MachineConfig.probation={self.probation!r} must be 'hold' or 'half-open'"
            )
        if not isinstance(self.node_trip, bool):
            raise InputError(f"MachineConfig.node_trip={self.node_trip!r} must be a bool")
        if self.ewma_smoothing is not None:
            pair = tuple(self.ewma_smoothing)
            if len(pair) != 2 or not all(
                not isinstance(a, bool) and isinstance(a, (int, float)) and 0.0 < a <= 1.0
                for a in pair
            ):
                raise InputError(
                    f"MachineConfig.ewma_smoothing={self.ewma_smoothing!r} must be the (fast, "
                    "slow) smoothing factors, each in (0, 1], or None"
                )
            object.__setattr__(self, "ewma_smoothing", (float(pair[0]), float(pair[1])))

    @classmethod
    def from_settings(cls, settings: Settings) -> MachineConfig:
        """Build the configuration from ``[breaker]``, ``[calibration]`` and ``seed``.

        ``[breaker] node_trip`` (default true) and ``[breaker] probation`` (default
        ``"half-open"``) are what guarded pipelines need; the dataclass defaults are the seed's
        literal machine.

        The calibration window is used when ``[calibration.control]`` is set (``biasbreaker
        calibrate --write-toml`` writes it), with ``W = [calibration] max_history``.

        Raises:
            ThresholdError: If the configured thresholds are inconsistent.
        """
        breaker = settings.breaker
        control = settings.calibration.control
        return cls(
            thresholds=Thresholds(
                breaker.tau_enter, breaker.tau_exit, breaker.tau_warn, breaker.kappa
            ),
            cooldown_steps=breaker.cooldown_steps,
            max_retries=breaker.max_retries,
            control=None
            if control is None
            else ControlStatistics(control.mean, control.std, control.n_steps),
            max_history=settings.calibration.max_history,
            history_steps=breaker.history_steps,
            seed=settings.seed,
            probation=breaker.probation,
            node_trip=breaker.node_trip,
            ewma_smoothing=(
                settings.propagation.smoothing("fast"),
                settings.propagation.smoothing("slow"),
            ),
        )

    def without_repair(self) -> MachineConfig:
        """This configuration for a run with no repair configured: escalate at the first trip.

        With no repair strategy (``[intervention] router = "human-review"``, no hook) no
        intervention can pass its re-check, so every episode ends in ESCALATED whatever
        ``max_retries`` and ``cooldown_steps`` are; they would only hold the output for more
        steps (with the defaults, 2 interventions and 3 cool-down steps each: 8 re-steps after
        the trip). This copy has ``max_retries = 1`` and ``cooldown_steps = 0``, so a trip
        escalates two re-steps later: ``trip`` (INTERVENTION, HALT), ``recover-start``
        (RECOVERY, HALT), ``escalate`` (ESCALATED, ESCALATE). The trace header records the
        values the machine ran with, so ``biasbreaker verify`` replays them.
        """
        return replace(self, max_retries=1, cooldown_steps=0)

    def trace_header(self, meta: Mapping[str, JSONValue] | None = None) -> TraceHeader:
        """Return the run-trace header describing this configuration."""
        return TraceHeader(
            thresholds=self.thresholds,
            cooldown_steps=self.cooldown_steps,
            max_retries=self.max_retries,
            max_history=None if self.control is None else self.max_history,
            control=self.control,
            seed=self.seed,
            meta=dict(meta or {}),
            node_trip=self.node_trip,
            probation=self.probation,
            ewma=self.ewma_smoothing,
        )

    def to_json(self) -> dict[str, JSONValue]:
        """Return the configuration as plain JSON."""
        return {
            "thresholds": self.thresholds.to_json(),
            "cooldown_steps": self.cooldown_steps,
            "max_retries": self.max_retries,
            "control": None if self.control is None else self.control.to_json(),
            "max_history": self.max_history,
            "history_steps": self.history_steps,
            "seed": self.seed,
            "probation": self.probation,
            "node_trip": self.node_trip,
            "ewma_smoothing": None if self.ewma_smoothing is None else list(self.ewma_smoothing),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MachineConfig:
        """Rebuild from :meth:`to_json` output.

        ``probation``, ``node_trip`` and ``ewma_smoothing`` may be missing (snapshots written
        before they existed): they then take the literal machine's values, ``"hold"``,
        ``False`` and ``None``.

        Raises:
            InputError: On a missing or bad field.
            ThresholdError: On inconsistent thresholds or control statistics.
        """
        try:
            control = data["control"]
            return cls(
                thresholds=Thresholds.from_json(data["thresholds"]),
                cooldown_steps=data["cooldown_steps"],
                max_retries=data["max_retries"],
                control=None if control is None else ControlStatistics.from_json(control),
                max_history=data["max_history"],
                history_steps=data["history_steps"],
                seed=data["seed"],
                probation=data.get("probation", "hold"),
                node_trip=data.get("node_trip", False),
                ewma_smoothing=None
                if data.get("ewma_smoothing") is None
                else tuple(data["ewma_smoothing"]),
            )
        except KeyError as exc:
            raise InputError(f"machine config is missing the field {exc.args[0]!r}") from None


# --------------------------------------------------------------------------------------------
# Guards and the transition table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Counters:
    """The machine's control state: everything a transition may depend on besides the inputs.

    Args:
        state: Current state.
        attempts: Interventions made in the current episode (0 outside an episode).
        recovery_steps: Steps spent in RECOVERY since the last intervention.
        recheck_ok: Whether the last intervention's repaired output passed its re-check.
        hook_returned: Whether the current intervention's hook has returned (it always has
            by the step after INTERVENTION is entered).
    """

    state: BreakerState
    attempts: int = 0
    recovery_steps: int = 0
    recheck_ok: bool = False
    hook_returned: bool = False


@dataclass(frozen=True, slots=True)
class GuardInputs:
    """What a guard may look at: the counters, this step's inputs, and the configuration.

    Args:
        counters: The control state before this step.
        fast: This step's fast-scale B_net.
        slow: This step's slow-scale B_net.
        window_dirty: Whether the calibration window, including this step, holds an outlier.
        thresholds: The thresholds.
        cooldown_steps: The cool-down length in steps.
        max_retries: The retry budget.
        step_score: This step's own local score (``local_scores[node]``), or ``None`` when
            the step has none (not applicable, or no node given).
        half_open: Whether the machine runs with ``probation="half-open"``.
        node_trip: Whether the machine runs with ``node_trip=True`` (the step's own score
            can trip the breaker).
    """

    counters: Counters
    fast: float
    slow: float
    window_dirty: bool
    thresholds: Thresholds
    cooldown_steps: int
    max_retries: int
    step_score: float | None = None
    half_open: bool = False
    node_trip: bool = False


def network_spike(g: GuardInputs) -> bool:
    """``fast >= tau_enter``: fast B_net spiked."""
    return g.fast >= g.thresholds.tau_enter


def node_spike(g: GuardInputs) -> bool:
    """With node trips on, this step's own local score is ``>= tau_enter``.

    Direct evidence about the guarded output itself, which the network average dilutes: in a
    chain of four nodes, one node at local score 1.0 after clean ones gives B_net about 0.24
    and a fast EWMA below it.
    """
    return g.node_trip and g.step_score is not None and g.step_score >= g.thresholds.tau_enter


def spike(g: GuardInputs) -> bool:
    """The trip guard (NORMAL/WARNING -> INTERVENTION): a network spike or a node spike.

    ``fast >= tau_enter``, or, with node trips on, the step's own score ``>= tau_enter``.
    """
    return network_spike(g) or node_spike(g)


def drift(g: GuardInputs) -> bool:
    """``slow >= tau_warn``: drift is building (NORMAL -> WARNING)."""
    return g.slow >= g.thresholds.tau_warn


def drift_subsided(g: GuardInputs) -> bool:
    """``slow < tau_warn``: the drift subsided (WARNING -> NORMAL)."""
    return g.slow < g.thresholds.tau_warn


def hook_returned(g: GuardInputs) -> bool:
    """The mitigation hook returned, successfully or not (INTERVENTION -> RECOVERY)."""
    return g.counters.hook_returned


def cooldown_elapsed(g: GuardInputs) -> bool:
    """At least ``cooldown_steps`` steps were spent in RECOVERY (and at least one)."""
    return g.counters.recovery_steps >= max(g.cooldown_steps, 1)


def relapsed(g: GuardInputs) -> bool:
    """The cool-down elapsed and the last intervention's repair failed its re-check.

    A failed hook, the no-op hook, a strategy that did not converge, and a repair whose
    re-check scored at or above ``tau_exit`` all fail the re-check.
    """
    return cooldown_elapsed(g) and not g.counters.recheck_ok


def relapsed_budget_spent(g: GuardInputs) -> bool:
    """Relapsed with ``max_retries`` interventions already made (RECOVERY -> ESCALATED)."""
    return relapsed(g) and g.counters.attempts >= g.max_retries


def relapsed_with_budget(g: GuardInputs) -> bool:
    """Relapsed with interventions left in the budget (RECOVERY -> INTERVENTION, a retry)."""
    return relapsed(g) and g.counters.attempts < g.max_retries


def probation_failed(g: GuardInputs) -> bool:
    """Half-open only: after a passed re-check, this step's own score is ``>= tau_exit``.

    The step's output is direct evidence (unlike fast B_net, which still carries the
    pre-repair scores), so it is acted on at once, cool-down or not.
    """
    return (
        g.half_open
        and g.counters.recheck_ok
        and g.step_score is not None
        and g.step_score >= g.thresholds.tau_exit
    )


def probation_failed_budget_spent(g: GuardInputs) -> bool:
    """Failed probation with ``max_retries`` interventions made (RECOVERY -> ESCALATED)."""
    return probation_failed(g) and g.counters.attempts >= g.max_retries


def probation_failed_with_budget(g: GuardInputs) -> bool:
    """Failed probation with budget left (RECOVERY -> INTERVENTION on this step's output)."""
    return probation_failed(g) and g.counters.attempts < g.max_retries


def recovered(g: GuardInputs) -> bool:
    """Cool-down elapsed, re-check OK, ``fast < tau_exit``, window clean (RECOVERY -> NORMAL)."""
    return (
        cooldown_elapsed(g)
        and g.counters.recheck_ok
        and g.fast < g.thresholds.tau_exit
        and not g.window_dirty
    )


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of the transition table.

    Args:
        name: Name recorded in the trace (``"trip"``, ``"retry"``…).
        source: State the row applies to.
        target: State it leads to.
        guard: Predicate over :class:`GuardInputs`.
    """

    name: str
    source: BreakerState
    target: BreakerState
    guard: Callable[[GuardInputs], bool]


_S = BreakerState
_NORMAL: Final = BreakerState.NORMAL
_PROCEED: Final = BreakerAction.PROCEED
_REASON_NORMAL: Final = "normal"
_STATE_VALUES: Final[Mapping[BreakerState, str]] = {state: state.value for state in BreakerState}
_new_decision: Final = tuple.__new__

# fmt: off
TRANSITIONS: Final[tuple[Transition, ...]] = (
    #          name             source            target            guard
    Transition("trip",          _S.NORMAL,        _S.INTERVENTION,  spike),
    Transition("warn",          _S.NORMAL,        _S.WARNING,       drift),
    Transition("trip",          _S.WARNING,       _S.INTERVENTION,  spike),
    Transition("calm",          _S.WARNING,       _S.NORMAL,        drift_subsided),
    Transition("recover-start", _S.INTERVENTION,  _S.RECOVERY,      hook_returned),
    Transition("escalate",      _S.RECOVERY,      _S.ESCALATED,     relapsed_budget_spent),
    Transition("retry",         _S.RECOVERY,      _S.INTERVENTION,  relapsed_with_budget),
    Transition("relapse-escalate", _S.RECOVERY,   _S.ESCALATED,     probation_failed_budget_spent),
    Transition("relapse",       _S.RECOVERY,      _S.INTERVENTION,  probation_failed_with_budget),
    Transition("recover",       _S.RECOVERY,      _S.NORMAL,        recovered),
    # ESCALATED has no row: it is terminal.
)
# fmt: on
"""The whole transition table, in priority order within each source state.

Each step takes the first row whose ``source`` is the current state and whose guard holds;
if none holds the state is kept (recorded as transition ``"hold"``). RECOVERY holds while
cooling down, while fast is at or above ``tau_exit`` (the dead-band and above: a spike of fast
B_net after a repair that passed its re-check does not start a new intervention, so an
oscillation near ``tau_enter`` enters INTERVENTION once), and while the calibration window is
dirty. ``relapse`` rows fire only with ``probation="half-open"``, on a step whose *own* score
fails probation; they never fire in the default ``"hold"`` mode.
"""

_BY_SOURCE: Final[Mapping[BreakerState, tuple[Transition, ...]]] = {
    state: tuple(t for t in TRANSITIONS if t.source is state) for state in BreakerState
}


_STEADY: Final = tuple(t.guard for t in _BY_SOURCE[BreakerState.NORMAL]) == (spike, drift)
"""Whether NORMAL's rows are still ``trip`` on :func:`spike` and ``warn`` on :func:`drift`,
the rows :meth:`ControlMachine.step`'s steady path assumes (it is off if the table changes)."""


# equivalent mutants: annotations are never evaluated (`from __future__ import annotations`)
def select_transition(g: GuardInputs) -> Transition | None:  # pragma: no mutate
    """Return the transition the table takes for ``g``, or ``None`` to hold the state.

    A pure function of its argument: this is the machine's whole transition logic.
    """
    for transition in _BY_SOURCE[g.counters.state]:
        if transition.guard(g):
            return transition
    return None


# --------------------------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Plan:
    """A step computed but not yet committed (so a cancelled async hook changes nothing).

    Private and never changed after it is built; not ``frozen``, because a frozen dataclass
    sets each of its 17 fields through ``object.__setattr__``, a visible part of every step's
    cost (``nox -s bench``, ``langgraph-guard``).
    """

    fast: float
    slow: float
    node: str | None
    scores: Mapping[str, float]
    step_score: float | None
    ratio: float
    window: WindowCounts | None
    transition: Transition | None
    counters: Counters
    episode: int
    frozen: FrozenPayload | None
    history: Mapping[str, tuple[float, ...]]
    context: InterventionContext | None
    frozen_input: FrozenPayload | None = None
    held: FrozenPayload | None = None
    """This step's own output, frozen, when the decision refers to it rather than to the
    episode's frozen payload (a later output held while ESCALATED, or a held step)."""
    weights: Mapping[str, float] | None = None
    """The step's Katz weights when they differ from the last recorded ones (a topology
    change, or the first step that has them), else ``None``."""
    hold: str | None = None
    """Why the step's output cannot be checked (a held step: no transition, ESCALATE)."""


WEIGHT_SUM_TOLERANCE = 1e-6
"""How far the Katz weights handed to :meth:`ControlMachine.step` may sum from 1."""


class KatzWeights(Mapping[str, float]):
    """Katz weights checked once (each finite and >= 0, summing to 1), immutable.

    :meth:`ControlMachine.step` checks the weights it is given on every step; a caller that
    steps many times with the same weights (the LangGraph adapter: one set per graph) builds
    this once and the machine checks only that the step's scored nodes are covered.

    Raises:
        ScoreError: A weight is not a finite number >= 0.
        InputError: They do not sum to 1 (within :data:`WEIGHT_SUM_TOLERANCE`).
    """

    __slots__ = ("_weights",)

    def __init__(self, weights: Mapping[str, float]) -> None:
        checked = {
            name: check_score(f"weights[{name!r}]", value)
            for name, value in sorted(weights.items())
        }
        total = math.fsum(checked.values())
        if checked and abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
            raise InputError(
                f"weights sum to {total:.6g}, not 1: they are Katz weights normalised over the "
                "graph; pass katz_influence(graph).weights, or divide each by their sum"
            )
        self._weights = checked

    def __getitem__(self, key: str) -> float:
        return self._weights[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._weights)

    def __len__(self) -> int:
        return len(self._weights)

    def __eq__(self, other: object) -> bool:
        # the machine compares the step's weights with the last recorded ones (a dict) on
        # every step: compare the dicts directly, not through Mapping's generic items() copy
        if isinstance(other, KatzWeights):
            return self._weights == other._weights
        if isinstance(other, dict):
            return self._weights == other
        return super().__eq__(other)


def _checked_weights(
    weights: Mapping[str, float] | None, scores: Mapping[str, float]
) -> Mapping[str, float]:
    """Validate a step's Katz weights: each finite and >= 0, summing to 1, covering the scores.

    An empty or absent mapping is allowed (no weights known); :class:`KatzWeights` were
    checked when built. Source: the weights are Katz influence normalised over the graph
    (docs/propagation.md), so the hook's ``magnitudes = w_i * b_i`` are shares of B_net.
    """
    if not weights:
        return {}
    checked = weights if isinstance(weights, KatzWeights) else KatzWeights(weights)
    if not scores:
        return checked
    missing = sorted(name for name in scores if name not in checked)
    if missing:
        raise InputError(
            f"local_scores name node(s) {missing} that have no weight (weights cover "
            f"{sorted(checked)}); give every scored node's Katz weight, or no weights at all"
        )
    return checked


def _derive_seed(seed: int, episode: int, attempt: int) -> int:
    digest = hashlib.sha256(f"biasbreaker/{seed}/{episode}/{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _describe_error(exc: BaseException) -> str:
    text = redact_text(str(exc))  # recorded in the trace: never a key a server echoed
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ControlMachine:
    """The control plane's state machine: hysteresis, cool-down, retries, escalation.

    Call :meth:`step` once per guarded step with the two scales of B_net (and, optionally,
    the node, its scores and its output); act on the returned decision's ``action``. The
    machine's whole state is plain data: :meth:`snapshot` returns it as versioned JSON and
    :meth:`restore` continues from it identically.

    Args:
        config: The configuration (thresholds, cool-down, retry budget, window, seed).
        hook: The mitigation hook, called with an :class:`InterventionContext` when the
            machine enters INTERVENTION; default :func:`noop_hook` (the machine then
            escalates after ``max_retries`` attempts). May be a coroutine function if you
            drive the machine with :meth:`astep`. If the hook raises (any ``Exception``) or
            returns something other than an :class:`InterventionResult`, the attempt fails
            closed: the error is recorded in the decision's reason and the trace, the output
            is halted, and the attempt counts against ``max_retries``.
        recorder: Called with each step's :class:`~biasbreaker.trace.StepRecord` (e.g. a
            :class:`~biasbreaker.trace.TraceWriter`), or ``None``. It is called after the step
            is committed; if it raises, the exception propagates and the caller gets no
            decision for that step (so nothing is promoted). Without one, the record of a
            steady step (NORMAL staying NORMAL) is built only if :attr:`last_record` is read.

    Constructing one registers the environment's secrets
    (:func:`~biasbreaker.redaction.register_environment`), so a hook error quoting one is
    redacted in the decision's reason and the trace.
    """

    def __init__(
        self,
        config: MachineConfig,
        *,
        hook: AnyHook | None = None,
        recorder: Callable[[StepRecord], None] | None = None,
    ) -> None:
        if not isinstance(config, MachineConfig):
            raise InputError(
                "ControlMachine needs a MachineConfig; build one with "
                "MachineConfig(Thresholds(...), ...)"
            )
        register_environment()
        self._config = config
        # the config is immutable: its JSON is built once, for every snapshot
        self._config_json = config.to_json()
        self._hook: AnyHook = noop_hook if hook is None else hook
        self._recorder = recorder
        self._counters = Counters(BreakerState.NORMAL)
        self._step = 0
        self._episode = 0
        self._frozen: FrozenPayload | None = None
        self._frozen_input: FrozenPayload | None = None
        self._result: InterventionResult | None = None
        self._window = (
            None
            if config.control is None
            else CalibrationWindow(config.control, config.max_history)
        )
        self._history: dict[str, deque[float]] = {}
        self._last_record: StepRecord | None = None
        # the steady step's record fields, when no recorder takes the record: built into
        # _last_record only if last_record is read
        self._pending_record: tuple[Any, ...] | None = None
        self._recorded_weights: Mapping[str, float] = {}
        # the KatzWeights a steady step last found equal to _recorded_weights (immutable, so
        # the same object is still equal until _recorded_weights is replaced)
        self._weights_recorded: KatzWeights | None = None

    # -- read-only views ---------------------------------------------------------------------

    @property
    def config(self) -> MachineConfig:
        """The configuration."""
        return self._config

    @property
    def state(self) -> BreakerState:
        """The current state."""
        return self._counters.state

    @property
    def counters(self) -> Counters:
        """The current control counters."""
        return self._counters

    @property
    def steps_taken(self) -> int:
        """Number of steps taken so far (the next step's index)."""
        return self._step

    @property
    def last_record(self) -> StepRecord | None:
        """The trace record of the last step, or ``None`` before the first."""
        if self._pending_record is not None:
            self._last_record = StepRecord(*self._pending_record)
            self._pending_record = None
        return self._last_record

    @property
    def last_result(self) -> InterventionResult | None:
        """The current episode's latest intervention result, or ``None``."""
        return self._result

    # -- stepping ----------------------------------------------------------------------------

    def step(
        self,
        fast: float,
        slow: float,
        *,
        node: str | None = None,
        local_scores: Mapping[str, float] | None = None,
        weights: Mapping[str, float] | None = None,
        payload: object = None,
        step_input: object = None,
        probe: Mapping[str, str] | None = None,
        hold: str | None = None,
    ) -> BreakerDecision:
        """Advance the machine by one guarded step.

        Args:
            fast: Fast-scale B_net of this step, in [0, 1].
            slow: Slow-scale B_net of this step, in [0, 1].
            node: The guarded node whose output this step checks, or ``None``.
            local_scores: Per-node local scores ``b_i`` at this step (node -> float in [0, 1]);
                recorded in the trace and the per-node history.
            weights: Per-node Katz weights (node -> float >= 0) summing to 1 (within
                1e-6) and covering every node of ``local_scores``, or ``None``/empty when
                unknown; passed to the hook.
            payload: The node's output (JSON-like). Frozen when this step starts an
                intervention episode; otherwise not retained (on PROCEED the caller promotes
                it, on HALT the caller keeps it staged). In ESCALATED it is frozen into this
                decision's ``frozen_payload`` (and the record's ``payload_sha256``): the output
                goes to review itself, while the episode's escalated payload stays the
                machine's frozen payload (snapshot); a step without a payload reports that
                escalated payload. A :class:`~biasbreaker.types.LazyPayload` is built only
                when the step freezes it.
            step_input: The node's input (JSON-like), frozen with ``payload`` when this step
                starts an episode and handed to the hook as ``InterventionContext.step_input``.
            probe: What the probe made of this step, ``{"status": ..., "reason": ...}`` (e.g.
                ``"scored"``, ``"not_applicable"`` with "no protected group named in the
                input", ``"unreadable"`` naming the key and type); recorded as is in the
                trace record's ``probe`` field, never read by the transitions.
            hold: Why this step's output cannot be checked (the probe could not read it, or
                failed), or ``None``. A held step fails closed: it takes no transition (state,
                counters, episode and frozen payload unchanged; transition
                ``"held-for-review"``), its output is frozen into the decision and its action
                is ``ESCALATE`` — the output goes to human review whatever the state. The
                window still observes ``fast`` (every step is a cycle).

        Returns:
            The decision for this step.

        Raises:
            ScoreError: If ``fast``, ``slow`` or a local score is not a number in [0, 1]
                (NaN, infinite, negative or above 1), or a weight is not a finite number
                >= 0 (the machine's state is unchanged).
            InputError: If ``payload`` is not JSON-like when it has to be frozen, a node
                name is invalid, or the weights do not sum to 1 or miss a scored node
                (state unchanged).
        """
        if hold is None and not local_scores and self._counters.state is _NORMAL and _STEADY:
            decision = self._steady(fast, slow, node, weights, probe)
            if decision is not None:
                return decision
        return self._planned_step(
            fast, slow, node, local_scores, weights, payload, step_input, probe, hold
        )

    def _planned_step(
        self,
        fast: float,
        slow: float,
        node: str | None,
        local_scores: Mapping[str, float] | None,
        weights: Mapping[str, float] | None,
        payload: object,
        step_input: object,
        probe: Mapping[str, str] | None,
        hold: str | None,
    ) -> BreakerDecision:
        """:meth:`step` through the plan: every step the steady path does not take."""
        plan = self._plan(fast, slow, node, local_scores, weights, payload, step_input, hold)
        result: InterventionResult | None = None
        if plan.context is not None:
            result = self._call_hook(plan.context)
        return self._commit(plan, result, probe)

    def _steady(
        self,
        fast: float,
        slow: float,
        node: str | None,
        weights: Mapping[str, float] | None,
        probe: Mapping[str, str] | None,
    ) -> BreakerDecision | None:
        """The commonest step, NORMAL staying NORMAL with nothing scored, without a plan.

        Called for a step in NORMAL with no local scores and no hold. Takes the step when
        ``fast`` and ``slow`` are floats in [0, 1] below ``tau_enter`` and ``tau_warn`` (no
        row of NORMAL fires: with no scores there is no node spike), the node is ``None`` or
        a non-empty ``str`` and the weights are absent or :class:`KatzWeights`; it then
        returns the decision :meth:`_plan` and :meth:`_commit` would (PROCEED, ``"normal"``,
        no payload), records the same :class:`StepRecord` and changes the machine as they
        would (window, recorded weights, step). Returns ``None``, changing nothing, for any
        other step: the planned path takes it, and refuses what it refuses. A malformed
        ``probe`` raises :class:`InputError` before anything changes.
        (tests/core/test_machine.py runs random steps through both paths and compares.)
        """
        thresholds = self._config.thresholds
        if not (
            type(fast) is float
            and 0.0 <= fast <= 1.0
            and fast < thresholds.tau_enter
            and type(slow) is float
            and 0.0 <= slow <= 1.0
            and slow < thresholds.tau_warn
            and (node is None or (type(node) is str and node))
        ):
            return None
        checked: Mapping[str, float]
        if type(weights) is KatzWeights:  # its own dict's length: no Mapping.__len__ call
            checked = weights if weights._weights else {}
        elif not weights:
            checked = {}
        else:
            return None
        recorded_probe = None if probe is None else _checked_probe(probe)
        ratio = mixing_ratio(fast, thresholds.tau_enter, thresholds.kappa)
        window = None
        if self._window is not None:
            window = self._window.peek(fast)
            self._window.observe(fast)
        changed: dict[str, float] | None = None
        if checked is not self._weights_recorded:
            changed = dict(checked) if checked != self._recorded_weights else None
            self._weights_recorded = checked if type(checked) is KatzWeights else None
        # the record's fields in their order (step, node, scores, fast, slow, window, state,
        # action, mixing_ratio, reason, transition, episode, attempt, payload_sha256,
        # intervention, weights, probe); building the frozen record costs more than the rest
        # of the step, so without a recorder it is built only if last_record is read
        fields: tuple[Any, ...] = (
            self._step,
            node,
            {},
            fast,
            slow,
            window,
            _NORMAL,
            _PROCEED,
            ratio,
            _REASON_NORMAL,
            "hold",
            self._episode,
            self._counters.attempts,
            None,
            None,
            changed,
            recorded_probe,
        )
        if changed is not None:
            self._recorded_weights = changed
        self._step += 1
        if self._recorder is None:
            self._last_record = None
            self._pending_record = fields
        else:
            record = StepRecord(*fields)
            self._last_record = record
            self._pending_record = None
            self._recorder(record)
        # every field valid by construction: NORMAL allows PROCEED, the ratio is a sigmoid,
        # fast was checked above (the tests compare it with the validated slow path's)
        return _new_decision(
            BreakerDecision, (_NORMAL, _PROCEED, ratio, fast, _REASON_NORMAL, None)
        )

    async def astep(
        self,
        fast: float,
        slow: float,
        *,
        node: str | None = None,
        local_scores: Mapping[str, float] | None = None,
        weights: Mapping[str, float] | None = None,
        payload: object = None,
        step_input: object = None,
        probe: Mapping[str, str] | None = None,
        hold: str | None = None,
    ) -> BreakerDecision:
        """Advance by one step, awaiting the hook if it returns an awaitable.

        Same arguments, result and errors as :meth:`step`; use it when the hook is a
        coroutine function (e.g. a skeptic panel run with asyncio) or when the caller runs
        inside an event loop (LangGraph async nodes). If the awaiting task is cancelled, the
        step is not committed: the machine is as before the call.
        """
        if hold is None and not local_scores and self._counters.state is _NORMAL and _STEADY:
            decision = self._steady(fast, slow, node, weights, probe)
            if decision is not None:
                return decision
        plan = self._plan(fast, slow, node, local_scores, weights, payload, step_input, hold)
        result: InterventionResult | None = None
        if plan.context is not None:
            result = await self._acall_hook(plan.context)
        return self._commit(plan, result, probe)

    def _call_hook(self, context: InterventionContext) -> InterventionResult:
        try:
            outcome: object = self._hook(context)
        except Exception as exc:
            return InterventionResult.failed(f"intervention hook raised {_describe_error(exc)}")
        if inspect.isawaitable(outcome):
            close = getattr(outcome, "close", None)
            if callable(close):
                close()
            return InterventionResult.failed(
                "intervention hook returned an awaitable; drive the machine with astep() "
                "for coroutine hooks"
            )
        return self._checked_result(outcome)

    async def _acall_hook(self, context: InterventionContext) -> InterventionResult:
        try:
            outcome: object = self._hook(context)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except Exception as exc:
            return InterventionResult.failed(f"intervention hook raised {_describe_error(exc)}")
        return self._checked_result(outcome)

    @staticmethod
    def _checked_result(outcome: object) -> InterventionResult:
        if isinstance(outcome, InterventionResult):
            return outcome
        return InterventionResult.failed(
            f"intervention hook returned {type(outcome).__name__}, expected InterventionResult"
        )

    def _plan(
        self,
        fast: float,
        slow: float,
        node: str | None,
        local_scores: Mapping[str, float] | None,
        weights: Mapping[str, float] | None,
        payload: object,
        step_input: object = None,
        hold: str | None = None,
    ) -> _Plan:
        # the common case checked inline, the rest (and every error) by check_unit_score
        if type(fast) is not float or not 0.0 <= fast <= 1.0:
            fast = check_unit_score("fast", fast)
        if type(slow) is not float or not 0.0 <= slow <= 1.0:
            slow = check_unit_score("slow", slow)
        if node is not None and (not isinstance(node, str) or not node):
            raise InputError(f"node={node!r} must be a non-empty str or None")
        scores = (
            {
                name: check_unit_score(f"local_scores[{name!r}]", value)
                for name, value in sorted(local_scores.items())
            }
            if local_scores
            else {}
        )
        checked_weights = _checked_weights(weights, scores)
        weights_changed = checked_weights != self._recorded_weights
        config = self._config
        thresholds = config.thresholds
        window = None if self._window is None else self._window.peek(fast)
        counters = self._counters
        step_score = None if node is None else scores.get(node)
        # the severity of the statistic that trips: with node trips on, a node whose own score
        # reaches tau_enter trips while fast (diluted by the network average) is below it, and a
        # ratio on fast alone would then be < 0.5 and discard every categorical repair
        severity = fast
        if config.node_trip and step_score is not None:
            severity = max(fast, step_score)
        ratio = mixing_ratio(severity, thresholds.tau_enter, thresholds.kappa)
        if hold is not None:
            if not isinstance(hold, str) or not hold:
                raise InputError(f"hold={hold!r} must be a non-empty str (the reason) or None")
            return _Plan(
                fast,
                slow,
                node,
                scores,
                step_score,
                ratio,
                window,
                None,
                counters,
                self._episode,
                self._frozen,
                {name: tuple(self._history.get(name, ())) for name in scores},
                None,
                self._frozen_input,
                held=None if payload is None else freeze(payload),
                weights=dict(checked_weights) if weights_changed else None,
                hold=hold,
            )
        transition = select_transition(
            GuardInputs(
                counters=counters,
                fast=fast,
                slow=slow,
                window_dirty=window is not None and window.dirty,
                thresholds=thresholds,
                cooldown_steps=config.cooldown_steps,
                max_retries=config.max_retries,
                step_score=step_score,
                half_open=config.probation == "half-open",
                node_trip=config.node_trip,
            )
        )
        # Only the scored nodes' histories change; they are committed after the hook.
        history = {
            name: (*self._history.get(name, ()), value)[-config.history_steps :]
            for name, value in scores.items()
        }
        episode, frozen, context = self._episode, self._frozen, None
        frozen_input = self._frozen_input
        held: FrozenPayload | None = None
        target = counters.state if transition is None else transition.target

        if transition is None:
            if target is BreakerState.ESCALATED and payload is not None:
                # a later output held while ESCALATED goes to review itself: the decision
                # refers to it, while the escalated episode's payload stays frozen
                held = freeze(payload)
            elif target is BreakerState.RECOVERY:
                counters = Counters(
                    target,
                    counters.attempts,
                    counters.recovery_steps + 1,
                    counters.recheck_ok,
                    counters.hook_returned,
                )
        elif target is BreakerState.INTERVENTION:
            if not counters.state.tripped:
                episode += 1
                frozen = None if payload is None else freeze(payload)
                frozen_input = None if step_input is None else freeze(step_input)
                attempts = 1
            else:
                attempts = counters.attempts + 1
                if transition.name == "relapse" and payload is not None:
                    # the output that failed probation is the one this attempt repairs
                    frozen = freeze(payload)
            context = InterventionContext(
                step=self._step,
                node=node,
                state=counters.state,
                fast=fast,
                slow=slow,
                mixing_ratio=ratio,
                thresholds=thresholds,
                local_scores=scores,
                weights=checked_weights,
                history={
                    **{name: tuple(values) for name, values in self._history.items()},
                    **history,
                },
                attempt=attempts,
                frozen_payload=frozen,
                seed=_derive_seed(config.seed, episode, attempts),
                step_input=frozen_input,
            )
            counters = Counters(target, attempts, 0, False, False)
        elif target is BreakerState.RECOVERY:
            counters = Counters(target, counters.attempts, 1, counters.recheck_ok, True)
        elif target is BreakerState.NORMAL and counters.state.tripped:
            counters = Counters(target)
        else:
            if transition.name == "relapse-escalate" and payload is not None:
                frozen = freeze(payload)  # the held output goes to human review
            counters = Counters(
                target,
                counters.attempts,
                counters.recovery_steps,
                counters.recheck_ok,
                counters.hook_returned,
            )
        return _Plan(
            fast,
            slow,
            node,
            scores,
            step_score,
            ratio,
            window,
            transition,
            counters,
            episode,
            frozen,
            history,
            context,
            frozen_input,
            held,
            dict(checked_weights) if weights_changed else None,
        )

    def _commit(
        self,
        plan: _Plan,
        result: InterventionResult | None,
        probe: Mapping[str, str] | None = None,
    ) -> BreakerDecision:
        config = self._config
        counters = plan.counters
        state = counters.state
        frozen = plan.frozen
        transition = plan.transition
        name = "hold" if transition is None else transition.name
        if plan.hold is not None:
            name = HELD_FOR_REVIEW
        if result is not None:
            counters = Counters(
                state,
                counters.attempts,
                counters.recovery_steps,
                result.recheck_passes(config.thresholds.tau_exit),
                True,
            )
            self._result = result
        decision_payload: FrozenPayload | None = frozen if state.tripped else None
        if plan.held is not None:
            decision_payload = plan.held
        if plan.hold is not None:
            action = BreakerAction.ESCALATE  # fail closed: a human looks at this output
        elif state is BreakerState.INTERVENTION:
            assert result is not None  # entering INTERVENTION always runs the hook
            action = (
                BreakerAction.REROUTE
                if result.error is None and result.strategy != "none"
                else BreakerAction.HALT
            )
        elif state is BreakerState.RECOVERY:
            if self._passes_probation(plan.step_score, counters):
                action = BreakerAction.PROCEED  # half-open: this output is promoted
                decision_payload = None
            else:
                action = BreakerAction.HALT
        elif state is BreakerState.ESCALATED:
            action = BreakerAction.ESCALATE
        else:
            action = BreakerAction.PROCEED
            if name == "recover" and config.probation == "hold":
                # "recover" needs recheck_ok, which needs a converged result with a repair;
                # held outputs are replaced by it. (Half-open: the repair was promoted on the
                # INTERVENTION step, and the recovering step promotes its own output.)
                assert self._result is not None
                assert self._result.repaired is not None
                decision_payload = self._result.repaired
        reason = (
            f"held for review: {plan.hold}"
            if plan.hold is not None
            else self._reason(name, plan, counters, result)
        )

        recorded_probe = None if probe is None else _checked_probe(probe)

        # Commit: nothing above mutated the machine.
        if plan.window is not None and self._window is not None:
            self._window.observe(plan.fast)
        for node_name, values in plan.history.items():
            self._history[node_name] = deque(values, maxlen=config.history_steps)
        self._counters = counters
        self._episode = plan.episode
        if state is BreakerState.NORMAL and name == "recover":
            self._frozen = None
            self._frozen_input = None
            self._result = None
        else:
            self._frozen = frozen
            self._frozen_input = plan.frozen_input
        decision = BreakerDecision(state, action, plan.ratio, plan.fast, reason, decision_payload)
        record = StepRecord(
            step=self._step,
            node=plan.node,
            scores=plan.scores,
            fast=plan.fast,
            slow=plan.slow,
            window=plan.window,
            state=state,
            action=action,
            mixing_ratio=plan.ratio,
            reason=reason,
            transition=name,
            episode=plan.episode,
            attempt=counters.attempts,
            payload_sha256=None if decision_payload is None else decision_payload.sha256,
            intervention=None if result is None else result.summary(),
            weights=plan.weights,
            probe=recorded_probe,
        )
        if plan.weights is not None:
            self._recorded_weights = plan.weights
            self._weights_recorded = None
        self._step += 1
        self._last_record = record
        self._pending_record = None
        if self._recorder is not None:
            self._recorder(record)
        return decision

    def _passes_probation(
        self,
        # equivalent mutants: annotations are never evaluated (`from __future__ import annotations`)
        step_score: float | None,  # pragma: no mutate
        counters: Counters,
    ) -> bool:
        """Half-open only: the repair passed its re-check and this step's own score is clean."""
        return (
            self._config.probation == "half-open"
            and counters.recheck_ok
            and (step_score is None or step_score < self._config.thresholds.tau_exit)
        )

    def _reason(
        self, name: str, plan: _Plan, counters: Counters, result: InterventionResult | None
    ) -> str:
        th = self._config.thresholds
        fast, slow = plan.fast, plan.slow
        if name == "trip":
            text = self._trip_reason(plan)
        elif name == "retry":
            text = (
                f"retry {counters.attempts}/{self._config.max_retries}: the last "
                "intervention's repair failed its re-check"
            )
        elif name == "escalate":
            last = self._result
            if last is not None and last.strategy == "none" and last.error is None:
                text = (
                    f"escalate: no repair was made ({self._counters.attempts} attempt(s), the "
                    f"last routed to 'none'), max_retries {self._config.max_retries}; human "
                    "review needed"
                )
            else:
                text = (
                    f"escalate: {self._counters.attempts} intervention(s) made, max_retries "
                    f"{self._config.max_retries}; human review needed"
                )
        elif name == "relapse":
            text = (
                f"relapse {counters.attempts}/{self._config.max_retries}: on probation, this "
                f"step's own score {plan.step_score:.6g} >= tau_exit {th.tau_exit:.6g}"
            )
        elif name == "relapse-escalate":
            text = (
                f"escalate: on probation, this step's own score {plan.step_score:.6g} >= "
                f"tau_exit {th.tau_exit:.6g} with {self._counters.attempts} intervention(s) "
                f"made, max_retries {self._config.max_retries}; human review needed"
            )
        elif name == "recover-start":
            text = "intervention returned; cool-down started"
        elif name == "recover":
            text = (
                f"recovered: cool-down done, re-check passed, fast {fast:.6g} < tau_exit "
                f"{th.tau_exit:.6g}, window clean"
            )
        elif name == "warn":
            text = f"warn: slow {slow:.6g} >= tau_warn {th.tau_warn:.6g}"
        elif name == "calm":
            text = f"calm: slow {slow:.6g} < tau_warn {th.tau_warn:.6g}"
        else:
            text = self._hold_reason(plan, counters)
        if (
            name != "hold"
            and counters.state is BreakerState.RECOVERY
            and self._passes_probation(plan.step_score, counters)
        ):
            text += "; on probation: this step's own score is clean, output proceeds"
        if result is not None:
            if result.error is not None:
                text += f"; intervention failed closed: {result.error}"
            else:
                text += (
                    f"; intervention strategy {result.strategy!r}, converged "
                    f"{str(result.converged).lower()}"
                )
        return text

    def _trip_reason(self, plan: _Plan) -> str:
        """Say which trigger fired: the network (fast B_net), the node's own score, or both."""
        th = self._config.thresholds
        fast, own = plan.fast, plan.step_score
        node_fired = self._config.node_trip and own is not None and own >= th.tau_enter
        if fast >= th.tau_enter:
            text = f"trip: fast {fast:.6g} >= tau_enter {th.tau_enter:.6g}"
            if node_fired:
                text += f", and the own score {own:.6g} of node {plan.node!r} >= tau_enter"
            return text
        return (
            f"trip (node): the own score {own:.6g} of node {plan.node!r} >= tau_enter "
            f"{th.tau_enter:.6g}, while fast {fast:.6g} is below it (the network average "
            "dilutes a single node)"
        )

    def _hold_reason(self, plan: _Plan, counters: Counters) -> str:
        state = counters.state
        th = self._config.thresholds
        if state is BreakerState.ESCALATED:
            return "escalated: terminal, awaiting human review"
        if state is BreakerState.RECOVERY:
            if self._passes_probation(plan.step_score, counters):
                score = "none" if plan.step_score is None else f"{plan.step_score:.6g}"
                return (
                    f"on probation: this step's own score {score} < tau_exit "
                    f"{th.tau_exit:.6g}, output proceeds; recovery step {counters.recovery_steps}"
                )
            if counters.recovery_steps <= max(self._config.cooldown_steps, 1):
                return (
                    f"cooling down: {counters.recovery_steps}/"
                    f"{max(self._config.cooldown_steps, 1)} steps"
                )
            if plan.fast >= th.tau_exit:
                return f"recovery holds: fast {plan.fast:.6g} >= tau_exit {th.tau_exit:.6g}"
            return "recovery holds: calibration window dirty"
        if state is BreakerState.WARNING:
            return f"warning holds: slow {plan.slow:.6g} >= tau_warn {th.tau_warn:.6g}"
        return _REASON_NORMAL

    # -- snapshot ----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, JSONValue]:
        """Return the machine's whole state as versioned plain JSON.

        The snapshot holds the configuration, state and counters, step and episode numbers,
        the frozen payload and latest intervention result, the calibration window, the
        per-node history and the Katz weights last recorded in the trace: :meth:`restore`
        continues from it exactly as this machine would, trace records included. Its
        ``"config"`` object (:meth:`MachineConfig.to_json`) is built once and shared by every
        snapshot of this machine: copy it before changing it.
        """
        counters = self._counters
        return {
            "version": SNAPSHOT_VERSION,
            "config": self._config_json,
            "state": _STATE_VALUES[counters.state],
            "attempts": counters.attempts,
            "recovery_steps": counters.recovery_steps,
            "recheck_ok": counters.recheck_ok,
            "hook_returned": counters.hook_returned,
            "step": self._step,
            "episode": self._episode,
            "frozen_payload": None if self._frozen is None else self._frozen.to_json(),
            "frozen_input": None if self._frozen_input is None else self._frozen_input.to_json(),
            "result": None if self._result is None else self._result.to_json(),
            "window": None if self._window is None else list(self._window.levels()),
            "history": {name: list(values) for name, values in sorted(self._history.items())}
            if self._history
            else {},
            "recorded_weights": dict(self._recorded_weights),
        }

    @classmethod
    def restore(
        cls,
        snapshot: Mapping[str, Any],
        *,
        hook: AnyHook | None = None,
        recorder: Callable[[StepRecord], None] | None = None,
    ) -> ControlMachine:
        """Rebuild a machine from :meth:`snapshot` output.

        Args:
            snapshot: The snapshot (e.g. loaded from a checkpoint).
            hook: The mitigation hook (hooks are code, not state, so they are passed again).
            recorder: The trace recorder, or ``None``.

        Returns:
            A machine whose next step behaves exactly as the snapshotted machine's would.

        Raises:
            InputError: On an unsupported version or a missing or malformed field.
            ThresholdError: On inconsistent thresholds in the snapshot's configuration.
        """
        if not isinstance(snapshot, Mapping):
            raise InputError("machine snapshot must be a JSON object")
        version = snapshot.get("version")
        if version != SNAPSHOT_VERSION:
            raise InputError(
                f"machine snapshot version {version!r} is not supported; this "
                f"biasbreaker reads version {SNAPSHOT_VERSION}"
            )
        try:
            config = MachineConfig.from_json(snapshot["config"])
            machine = cls(config, hook=hook, recorder=recorder)
            state = BreakerState(snapshot["state"])
            machine._counters = Counters(
                state=state,
                attempts=_nonneg(snapshot["attempts"], "attempts"),
                recovery_steps=_nonneg(snapshot["recovery_steps"], "recovery_steps"),
                recheck_ok=_bool(snapshot["recheck_ok"], "recheck_ok"),
                hook_returned=_bool(snapshot["hook_returned"], "hook_returned"),
            )
            machine._step = _nonneg(snapshot["step"], "step")
            machine._episode = _nonneg(snapshot["episode"], "episode")
            frozen = snapshot["frozen_payload"]
            machine._frozen = None if frozen is None else FrozenPayload.from_json(frozen)
            frozen_input = snapshot.get("frozen_input")
            machine._frozen_input = (
                None if frozen_input is None else FrozenPayload.from_json(frozen_input)
            )
            result = snapshot["result"]
            machine._result = None if result is None else InterventionResult.from_json(result)
            levels = snapshot["window"]
            if (levels is None) != (config.control is None):
                raise InputError(
                    "machine snapshot: 'window' must be present exactly when the "
                    "config has control statistics"
                )
            if config.control is not None:
                machine._window = CalibrationWindow(config.control, config.max_history, levels)
            history = snapshot["history"]
            if not isinstance(history, Mapping):
                raise InputError("machine snapshot: 'history' must be an object")
            for name, values in history.items():
                checked = [check_unit_score(f"history[{name!r}]", v) for v in values]
                machine._history[name] = deque(checked, maxlen=config.history_steps)
            recorded = snapshot.get("recorded_weights") or {}
            if not isinstance(recorded, Mapping):
                raise InputError("machine snapshot: 'recorded_weights' must be an object")
            machine._recorded_weights = {
                name: check_score(f"recorded_weights[{name!r}]", value)
                for name, value in sorted(recorded.items())
            }
        except KeyError as exc:
            raise InputError(f"machine snapshot is missing the field {exc.args[0]!r}") from None
        except ValueError as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"machine snapshot is invalid: {exc}") from exc
        return machine


def _checked_probe(probe: Mapping[str, str]) -> dict[str, str]:
    """The probe outcome as recorded: ``{"status": str, "reason": str}``.

    Raises:
        InputError: A key is missing or extra, or a value is not a str.
    """
    if type(probe) is dict and len(probe) == 2:  # the common case, without building sets
        status, reason = probe.get("status"), probe.get("reason")
        if type(status) is str and type(reason) is str:
            return {"status": status, "reason": reason}
    if set(probe) != {"status", "reason"} or not all(
        isinstance(probe[k], str) for k in ("status", "reason")
    ):
        raise InputError(
            f"probe={dict(probe)!r} must be {{'status': str, 'reason': str}} (what the probe "
            "made of the step)"
        )
    return {"status": probe["status"], "reason": probe["reason"]}


def _nonneg(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"machine snapshot: {name}={value!r} must be an int >= 0")
    return value


def _bool(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"machine snapshot: {name}={value!r} must be a bool")
    return value


__all__ = [
    "SNAPSHOT_VERSION",
    "TRANSITIONS",
    "AsyncInterventionHook",
    "ControlMachine",
    "Counters",
    "GuardInputs",
    "InterventionHook",
    "MachineConfig",
    "Probation",
    "Transition",
    "cooldown_elapsed",
    "drift",
    "drift_subsided",
    "hook_returned",
    "network_spike",
    "node_spike",
    "noop_hook",
    "probation_failed",
    "probation_failed_budget_spent",
    "probation_failed_with_budget",
    "recovered",
    "relapsed",
    "relapsed_budget_spent",
    "relapsed_with_budget",
    "select_transition",
    "spike",
]
