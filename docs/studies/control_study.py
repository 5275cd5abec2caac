"""Control study (M3 WP7): the breaker and the control machine on simulated debates.

Run ``python docs/studies/control_study.py`` to regenerate ``docs/studies/control.md`` and its
figures (``docs/studies/figures/control-*.png``; two to five minutes on two shared cores).
``--quick`` uses fewer seeds and calibrations: the test suite runs it that way and compares the
text with ``tests/golden/control_study_quick.md`` (regenerate that with ``--quick --text-only
--out tests/golden/control_study_quick.md``). ``--check`` regenerates into a temporary folder and
exits 1 naming every file that differs from the committed one (``nox -s study`` runs it at full
size). Two runs give byte-identical files: every random draw comes from an explicit seed, and the
figures are written without a timestamp (their bytes also depend on the installed matplotlib and
its bundled fonts).

**Everything here is simulated.** The B_net trajectories come from :mod:`biasbreaker.dot` (a
stochastic model of a multi-agent debate; no model is called); the breaker, the control machine,
the calibration window and the calibration are the real ones, used through their public API
(:mod:`biasbreaker.breaker`, :mod:`biasbreaker.machine`, :mod:`biasbreaker.calibration`). The
repairs are stand-ins (a hook whose re-check passes, or hooks that fail), because the simulated
debate does not receive a repair (the loop is open, ``docs/control.md`` §8).

Sections (each on the same trajectories for every breaker it compares):

1. hysteresis against a single threshold, on every DoT preset;
2. recovery after the cool-down and the calibration window;
3. escalation after ``max_retries`` failed repairs;
4. the calibrated false-halt rate against its target, over many calibrations;
5. the two triggers (fast B_net and a node's own score) on debates and on pipelines.

Intervals: Clopper-Pearson (exact binomial, ``scipy.stats.binomtest``) for rates, Student t for
mean counts per run; both 95 %.
"""

from __future__ import annotations

import argparse
import filecmp
import itertools
import math
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scipy import stats

import biasbreaker_plugins.calibrator_percentile as calibrator_percentile
from biasbreaker.breaker import CircuitBreaker, freeze
from biasbreaker.calibration import (
    CalibrationReport,
    CalibrationWindow,
    ControlStatistics,
    calibrate,
    outlier_level,
    summarise_control_runs,
)
from biasbreaker.config import load_settings
from biasbreaker.dot import PRESETS, BiasSource, DotConfig, RepairEvent, iter_dot
from biasbreaker.kernel import Kernel
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.plugins import PluginHost
from biasbreaker.propagation import katz_influence
from biasbreaker.types import BreakerState, InterventionContext, InterventionResult, Thresholds

HERE = Path(__file__).resolve().parent
REPORT = HERE / "control.md"
FIGURE_FOLDER = "figures"
"""The figures' folder, relative to the report's."""

STEPS = 200
"""Guarded steps per simulated run (the presets are shaped for 200)."""

THRESHOLDS = Thresholds(tau_enter=0.30, tau_exit=0.20, tau_warn=0.15, kappa=0.05)
"""The ``[breaker]`` defaults (tests/test_control_study.py checks they still are)."""
COOLDOWN, MAX_RETRIES, MAX_HISTORY = 3, 2, 32
"""``[breaker] cooldown_steps``, ``max_retries`` and ``[calibration] max_history`` defaults."""

WINDOW_SEEDS = range(10_000, 10_020)
"""Control runs that give the window its statistics, as ``biasbreaker simulate`` uses."""
POOL_SEED, FRESH_SEED, LONG_SEED, TRIGGER_CONTROL_SEED = 100_000, 200_000, 300_000, 400_000
"""First seeds of the calibration pool, the fresh control runs, the long fresh runs, and the
control runs of the trigger section: disjoint ranges, so no run is used twice by accident."""

ONSET = 40
"""Bias onset of the trigger section's scenarios (as the recovery and persistent presets)."""
LEVELS = (0.0, 0.025, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0)
"""Bias drives of the trigger section."""

S = BreakerState

# The oscillating debate ended by the harness's own permanent repair of every agent at step 150:
# the trajectory of the seed's one-sentence success test (tests/core/test_dot_loop.py).
RISE_OSCILLATE_FALL = replace(
    PRESETS["oscillate-near-threshold"],
    name="rise-oscillate-fall",
    repairs=(RepairEvent(150, strength=1.0, permanent=True),),
)
RISE_OSCILLATE_FALL_STEPS = 240


def debate(drive: float) -> DotConfig:
    """A debate: three of five agents on a mesh with bias drive ``drive`` from ``ONSET``.

    Conformity (kappa 0.5) spreads it to the two unbiased agents, as in the presets.
    """
    return DotConfig(
        name=f"debate-{drive}",
        sources=tuple(BiasSource(f"a{i}", drive, onset=ONSET) for i in (0, 1, 2)) if drive else (),
    )


def pipeline(drive: float, node: str = "a4") -> DotConfig:
    """A pipeline: a chain ``a0 -> ... -> a4`` whose one agent ``node`` has bias drive ``drive``.

    ``a4``, the last (the decider), has the smallest Katz weight: nothing reads its output.
    """
    return DotConfig(
        name=f"pipeline-{node}-{drive}",
        topology="chain",
        sources=(BiasSource(node, drive, onset=ONSET),) if drive else (),
    )


@dataclass(frozen=True)
class Sizes:
    """How many runs each section uses.

    Args:
        name: ``"full"`` or ``"quick"``.
        seeds: Seeds per preset (sections 1, 3 and 5), seeds ``0 .. seeds - 1``.
        grid_seeds: Seeds per configuration of the recovery and escalation grids, and for the
            failing hooks other than the no-op (section 3).
        calibrations: Calibrations on 19 control runs each (section 4).
        large_calibrations: Calibrations on 99 control runs each (section 4).
        trigger_seeds: Seeds per bias level and scenario (section 5).
        trigger_control_runs: Control runs each trigger calibration uses.
    """

    name: str
    seeds: int
    grid_seeds: int
    calibrations: int
    large_calibrations: int
    trigger_seeds: int
    trigger_control_runs: int


FULL = Sizes("full", 200, 30, 200, 38, 100, 99)
QUICK = Sizes("quick", 8, 3, 12, 2, 8, 19)


# ------------------------------------------------------------------------------------------------
# Trajectories and the machines run on them


@dataclass(frozen=True, slots=True)
class Step:
    """One guarded step of a simulated run: what the machine is given."""

    t: int
    fast: float
    slow: float
    node: str
    own: float | None
    scores: Mapping[str, float]


Trajectory = tuple[Step, ...]


def simulate(config: DotConfig, seed: int, steps: int = STEPS) -> Trajectory:
    """The guarded steps of one simulated run (steps before the first score are not guarded)."""
    return tuple(
        Step(s.step, s.fast, s.slow, s.node, s.scores.get(s.node), s.scores)
        for s in iter_dot(config, seed=seed, steps=steps)
        if s.fast is not None and s.slow is not None
    )


def window_statistics() -> ControlStatistics:
    """Mean and std of fast B_net over the control runs ``biasbreaker simulate`` uses."""
    runs = [[(s.fast, s.slow) for s in simulate(PRESETS["control"], seed)] for seed in WINDOW_SEEDS]
    return summarise_control_runs(runs).statistics


def machine_config(
    thresholds: Thresholds = THRESHOLDS,
    *,
    control: ControlStatistics | None,
    cooldown: int = COOLDOWN,
    max_retries: int = MAX_RETRIES,
    max_history: int = MAX_HISTORY,
    node_trip: bool = False,
) -> MachineConfig:
    """The seed's literal machine (``probation="hold"``), as the DoT harness runs it."""
    return MachineConfig(
        thresholds,
        cooldown_steps=cooldown,
        max_retries=max_retries,
        control=control,
        max_history=max_history,
        probation="hold",
        node_trip=node_trip,
    )


def passing_repair(context: InterventionContext) -> InterventionResult:
    """A stand-in for M4: a converged repair whose re-check scores 0.05 (below tau_exit)."""
    return InterventionResult(freeze({"repaired": context.step}), True, "skeptics", (), 0.05)


def failing_recheck(context: InterventionContext) -> InterventionResult:
    """A repair that converges but whose re-check scores 0.25 (at or above tau_exit)."""
    return InterventionResult(freeze({"repaired": context.step}), True, "skeptics", (), 0.25)


def raising_hook(context: InterventionContext) -> InterventionResult:
    """A repair that crashes (the machine fails closed: the attempt counts, the output is held)."""
    raise RuntimeError("the repair service is down")


FAILED_HOOKS: dict[str, Callable[[InterventionContext], InterventionResult] | None] = {
    "no-op (the default: nothing repairs)": None,
    "re-check fails (0.25 >= tau_exit)": failing_recheck,
    "the hook raises": raising_hook,
}


def run_machine(
    trajectory: Trajectory,
    config: MachineConfig,
    hook: Callable[[InterventionContext], InterventionResult] | None = None,
    *,
    until_trip: bool = False,
) -> list[BreakerState]:
    """The machine's state at each guarded step (stopping at the first trip if asked).

    The payload is left out: it does not change the state sequence (property-tested in
    tests/core/test_machine.py), and freezing one per escalated step would only cost time.
    """
    machine = ControlMachine(config, hook=hook)
    states = []
    for s in trajectory:
        state = machine.step(s.fast, s.slow, node=s.node, local_scores=s.scores).state
        states.append(state)
        if until_trip and state.tripped:
            break
    return states


def entries(tripped: Sequence[bool]) -> int:
    """Changes from closed to tripped (the run starts closed)."""
    return sum(1 for i, now in enumerate(tripped) if now and (i == 0 or not tripped[i - 1]))


def intervention_entries(states: Sequence[BreakerState]) -> int:
    """Entries into INTERVENTION (a trip or a retry)."""
    return sum(
        1
        for i, s in enumerate(states)
        if s is S.INTERVENTION and (i == 0 or states[i - 1] is not S.INTERVENTION)
    )


def first_trip(states: Sequence[BreakerState]) -> int | None:
    """Index of the first tripped state, or ``None``."""
    return next((i for i, s in enumerate(states) if s.tripped), None)


def first_true(flags: Sequence[bool]) -> int | None:
    """Index of the first true flag, or ``None``."""
    return next((i for i, f in enumerate(flags) if f), None)


def single_threshold(trajectory: Trajectory, tau: float) -> list[bool]:
    """A breaker without memory: tripped exactly while ``fast >= tau``."""
    return [s.fast >= tau for s in trajectory]


def hysteresis(trajectory: Trajectory, thresholds: Thresholds = THRESHOLDS) -> list[bool]:
    """The bare hysteresis element, :class:`~biasbreaker.breaker.CircuitBreaker`."""
    breaker = CircuitBreaker.from_thresholds(thresholds)
    return [breaker.check(s.fast, s.slow).state.tripped for s in trajectory]


# ------------------------------------------------------------------------------------------------
# Intervals


@dataclass(frozen=True, slots=True)
class Rate:
    """``k`` of ``n`` with its 95 % Clopper-Pearson interval."""

    k: int
    n: int

    @property
    def value(self) -> float:
        """The share, or NaN for ``n = 0``."""
        return self.k / self.n if self.n else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        """The exact (Clopper-Pearson) 95 % interval; NaN for ``n = 0``."""
        if self.n == 0:
            return math.nan, math.nan
        ci = stats.binomtest(self.k, self.n).proportion_ci(0.95, method="exact")
        return float(ci.low), float(ci.high)

    def cell(self) -> str:
        """``k/n = share [low, high]``."""
        low, high = self.interval
        return f"{self.k}/{self.n} = {self.value:.3f} [{low:.3f}, {high:.3f}]"


@dataclass(frozen=True, slots=True)
class Mean:
    """A mean count per run with its 95 % Student t interval, and the range."""

    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        """The mean."""
        return statistics.fmean(self.values)

    @property
    def interval(self) -> tuple[float, float]:
        """``mean ± t(0.975, n - 1) · s / √n``; the mean itself when every value is equal."""
        n = len(self.values)
        sd = statistics.stdev(self.values) if n > 1 else 0.0
        if sd == 0.0:
            return self.mean, self.mean
        half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
        return self.mean - half, self.mean + half

    def cell(self, digits: int = 2) -> str:
        """``mean [low, high] (min–max)``."""
        low, high = self.interval
        lo, hi = min(self.values), max(self.values)
        return f"{self.mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}] ({lo:.0f}–{hi:.0f})"


def spread(values: Iterable[float]) -> str:
    """``median [min–max]`` of integers, or ``—`` for none."""
    vals = sorted(values)
    if not vals:
        return "—"
    return f"{statistics.median(vals):g} [{vals[0]:g}–{vals[-1]:g}]"


# ------------------------------------------------------------------------------------------------
# 1. Hysteresis against a single threshold

BREAKERS = (
    "single threshold at tau_enter",
    "single threshold at tau_exit",
    "hysteresis breaker",
    "control machine, repair passes",
)


@dataclass
class Thrash:
    """Section 1's measurements.

    Args:
        entries: Per preset and breaker, the entries into the tripped state of every run.
        held: Per preset and breaker, the tripped (held) steps of every run.
        crossings: Per preset, how often fast crossed tau_enter in each run.
        tripped_at_end: Per preset, runs whose hysteresis breaker was tripped at the last step.
        same_first_trip: Runs where the hysteresis breaker and the single threshold at
            tau_enter first tripped at the same step (or neither tripped).
        runs: All runs of all presets.
        leaked: Steps at which the single threshold at tau_enter was tripped and the
            hysteresis breaker was not.
        example: The run the oscillation figure shows.
    """

    entries: dict[str, dict[str, list[int]]]
    held: dict[str, dict[str, list[int]]]
    crossings: dict[str, list[int]]
    tripped_at_end: dict[str, int]
    same_first_trip: int
    runs: int
    leaked: int
    example: dict[str, Any]


def thrash(trajectories: Mapping[str, list[Trajectory]], control: ControlStatistics) -> Thrash:
    """Section 1: each breaker on each preset's runs."""
    config = machine_config(control=control)
    ent: dict[str, dict[str, list[int]]] = {}
    held: dict[str, dict[str, list[int]]] = {}
    crossings: dict[str, list[int]] = {}
    at_end: dict[str, int] = {}
    same = runs = leaked = 0
    example: dict[str, Any] = {}
    for preset, runs_of in trajectories.items():
        ent[preset] = {b: [] for b in BREAKERS}
        held[preset] = {b: [] for b in BREAKERS}
        crossings[preset] = []
        at_end[preset] = 0
        for seed, trajectory in enumerate(runs_of):
            states = run_machine(trajectory, config, passing_repair)
            flags = {
                BREAKERS[0]: single_threshold(trajectory, THRESHOLDS.tau_enter),
                BREAKERS[1]: single_threshold(trajectory, THRESHOLDS.tau_exit),
                BREAKERS[2]: hysteresis(trajectory),
                BREAKERS[3]: [s.tripped for s in states],
            }
            for name, tripped in flags.items():
                ent[preset][name].append(entries(tripped))
                held[preset][name].append(sum(tripped))
            single, hyst = flags[BREAKERS[0]], flags[BREAKERS[2]]
            crossings[preset].append(sum(1 for a, b in itertools.pairwise(single) if a != b))
            runs += 1
            at_end[preset] += hyst[-1]
            same += first_true(single) == first_true(hyst)
            leaked += sum(1 for a, b in zip(single, hyst, strict=True) if a and not b)
            if preset == "oscillate-near-threshold" and seed == 0:
                example = {
                    "t": [s.t for s in trajectory],
                    "fast": [s.fast for s in trajectory],
                    "single": single,
                    "hysteresis": hyst,
                    "machine": states,
                }
    return Thrash(ent, held, crossings, at_end, same, runs, leaked, example)


# ------------------------------------------------------------------------------------------------
# 2. Recovery


@dataclass
class RecoveryRun:
    """One run with a passing repair: when it tripped and recovered, and what held it."""

    trip: int | None
    recovered: int | None
    below_exit: int | None
    last_outlier: int | None
    binding: str | None
    held: int


def recovery_run(
    trajectory: Trajectory,
    control: ControlStatistics,
    *,
    cooldown: int = COOLDOWN,
    max_history: int | None = MAX_HISTORY,
) -> RecoveryRun:
    """Run the machine with a passing repair; measure the first episode's recovery.

    ``below_exit``: the first step after the trip from which fast stays below tau_exit until
    the recovery; ``binding``: what still held the machine one step before it recovered (fast at
    or above tau_exit, the window dirty, or only the cool-down). ``max_history=None`` runs the
    machine without a window.
    """
    config = machine_config(
        control=None if max_history is None else control,
        cooldown=cooldown,
        max_history=max_history or MAX_HISTORY,
    )
    states = run_machine(trajectory, config, passing_repair)
    trip = first_trip(states)
    held = sum(s.tripped for s in states)
    if trip is None:
        return RecoveryRun(None, None, None, None, None, held)
    recovered = next((i for i in range(trip + 1, len(states)) if not states[i].tripped), None)
    if recovered is None:
        return RecoveryRun(trajectory[trip].t, None, None, None, None, held)
    if max_history is None:
        dirty = [False] * len(trajectory)
    else:
        window = CalibrationWindow(control, max_history)
        dirty = [window.observe(s.fast).dirty for s in trajectory]
    below = recovered
    while below > trip and trajectory[below - 1].fast < THRESHOLDS.tau_exit:
        below -= 1
    outliers = [i for i in range(recovered) if outlier_level(trajectory[i].fast, control)]
    before = recovered - 1
    reasons = []
    if trajectory[before].fast >= THRESHOLDS.tau_exit:
        reasons.append("fast")
    if dirty[before]:
        reasons.append("window")
    return RecoveryRun(
        trajectory[trip].t,
        trajectory[recovered].t,
        trajectory[below].t,
        trajectory[outliers[-1]].t if outliers else None,
        " and ".join(reasons) or "cool-down",
        held,
    )


def window_lag(run: RecoveryRun) -> int | None:
    """Steps from the last outlier to NORMAL, or ``None`` if the run did not recover."""
    if run.recovered is None or run.last_outlier is None:
        return None
    return run.recovered - run.last_outlier


@dataclass
class Recovery:
    """Section 2: the recovering presets at the defaults, and a grid on ``recovery``."""

    runs: dict[str, list[RecoveryRun]]
    grid: dict[tuple[int | None, int], list[RecoveryRun]]
    example: dict[str, Any]


RECOVERING = ("spike", "recovery", "rise-oscillate-fall", "oscillate-near-threshold", "persistent")
GRID_PRESET = "spike"
GRID_WINDOWS: tuple[int | None, ...] = (None, 1, 8, 32)
"""Window lengths W of the recovery grid; ``None``: the machine runs without a window."""
GRID_COOLDOWNS = (1, 3, 10, 30)


def recovery(
    trajectories: Mapping[str, list[Trajectory]], control: ControlStatistics, sizes: Sizes
) -> Recovery:
    """Section 2."""
    runs = {p: [recovery_run(t, control) for t in trajectories[p]] for p in RECOVERING}
    grid = {
        (w, c): [
            recovery_run(t, control, cooldown=c, max_history=w)
            for t in trajectories[GRID_PRESET][: sizes.grid_seeds]
        ]
        for w in GRID_WINDOWS
        for c in GRID_COOLDOWNS
    }
    trajectory = trajectories["recovery"][0]
    config = machine_config(control=control)
    window = CalibrationWindow(control, MAX_HISTORY)
    example = {
        "t": [s.t for s in trajectory],
        "fast": [s.fast for s in trajectory],
        "dirty": [window.observe(s.fast).dirty for s in trajectory],
        "repair": run_machine(trajectory, config, passing_repair),
        "noop": run_machine(trajectory, config),
        "bound": control.bound(3.0),
    }
    return Recovery(runs, grid, example)


# ------------------------------------------------------------------------------------------------
# 3. Escalation

TRIPPING = ("spike", "oscillate-near-threshold", "recovery", "persistent")
GRID_RETRIES = (1, 2, 3, 5)
GRID_ESCALATION_COOLDOWNS = (0, 3, 10)


@dataclass
class EscalationRun:
    """One run with a failing repair."""

    interventions: int
    delay: int | None
    terminal: bool
    escalated_at: int | None


def escalation_run(
    trajectory: Trajectory,
    control: ControlStatistics,
    hook: Callable[[InterventionContext], InterventionResult] | None,
    *,
    cooldown: int = COOLDOWN,
    max_retries: int = MAX_RETRIES,
) -> EscalationRun:
    """Entries into INTERVENTION, steps from the trip to ESCALATED, and whether it stayed there."""
    config = machine_config(control=control, cooldown=cooldown, max_retries=max_retries)
    states = run_machine(trajectory, config, hook)
    trip = first_trip(states)
    escalated = next((i for i, s in enumerate(states) if s is S.ESCALATED), None)
    delay = None if trip is None or escalated is None else escalated - trip
    terminal = escalated is not None and all(s is S.ESCALATED for s in states[escalated:])
    at = None if escalated is None else trajectory[escalated].t
    return EscalationRun(intervention_entries(states), delay, terminal, at)


def expected_delay(cooldown: int, max_retries: int) -> int:
    """Steps from the trip to ESCALATED: each attempt is one INTERVENTION step and a cool-down."""
    return max_retries * (max(cooldown, 1) + 1)


@dataclass
class Escalation:
    """Section 3."""

    runs: dict[str, dict[str, list[EscalationRun]]]
    grid: dict[tuple[int, int], list[EscalationRun]]


def escalation(
    trajectories: Mapping[str, list[Trajectory]], control: ControlStatistics, sizes: Sizes
) -> Escalation:
    """Section 3: every failing hook on every tripping preset; a grid on ``persistent``.

    The default no-op hook runs on every seed, the two other failing hooks on the grid's seeds.
    """
    runs = {
        hook_name: {
            p: [
                escalation_run(t, control, hook)
                for t in trajectories[p][: None if hook is None else sizes.grid_seeds]
            ]
            for p in TRIPPING
        }
        for hook_name, hook in FAILED_HOOKS.items()
    }
    grid = {
        (r, c): [
            escalation_run(t, control, None, cooldown=c, max_retries=r)
            for t in trajectories["persistent"][: sizes.grid_seeds]
        ]
        for r in GRID_RETRIES
        for c in GRID_ESCALATION_COOLDOWNS
    }
    return Escalation(runs, grid)


# ------------------------------------------------------------------------------------------------
# 4. Calibration


def study_kernel() -> Kernel:
    """A kernel with only the ``percentile`` calibrator, its options pinned to the defaults.

    No installed plugin is loaded; the configuration folder is this one (it has none), and the
    calibration keys the study relies on are given explicitly, so they win over any other source.
    """
    host = PluginHost(autoload=False, disabled=frozenset())
    host.register(calibrator_percentile, name="calibrator-percentile")
    loaded = load_settings(
        cwd=HERE,
        overrides={
            "calibration": {"calibrator": "percentile", "exit_ratio": 0.7, "warn_ratio": 1.0}
        },
    )
    return Kernel(loaded, host)


def triples(trajectory: Trajectory) -> list[tuple[float, float, float | None]]:
    """A run as the calibration reads it: ``(fast, slow, own)`` per step."""
    return [(s.fast, s.slow, s.own) for s in trajectory]


def trip_max(trajectory: Trajectory, node_trip: bool) -> float:
    """The run's maximum trip statistic: fast, or with node trips ``max(fast, own)``."""
    return max(
        max(s.fast, s.own) if node_trip and s.own is not None else s.fast for s in trajectory
    )


def calibrated_config(report: CalibrationReport, *, node_trip: bool) -> MachineConfig:
    """The literal machine with a calibration's thresholds and window statistics."""
    th = report.thresholds
    return machine_config(
        Thresholds(th.tau_enter, th.tau_exit, th.tau_warn, THRESHOLDS.kappa),
        control=report.statistics,
        node_trip=node_trip,
    )


@dataclass(frozen=True)
class CalibrationRow:
    """One calibration setting of section 4."""

    label: str
    alpha: float
    n: int
    calibrate_node_trip: bool
    run_node_trip: bool
    long_runs: bool = False


CALIBRATION_ROWS = (
    CalibrationRow("network + node (the default trigger)", 0.05, 19, True, True),
    CalibrationRow("network + node", 0.10, 19, True, True),
    CalibrationRow("network + node", 0.20, 19, True, True),
    CalibrationRow("network only", 0.10, 19, False, False),
    CalibrationRow("network + node", 0.05, 99, True, True),
    CalibrationRow("mismatch: calibrated on fast only, run with node trips", 0.10, 19, False, True),
    CalibrationRow(
        f"shift: new runs twice as long ({2 * STEPS} steps)", 0.10, 19, True, True, long_runs=True
    ),
)


def conformal_rate(n: int, alpha: float) -> float:
    """``(n + 1 − k)/(n + 1)`` with ``k = ⌈(n + 1)(1 − α)⌉``: the expected rate without ties."""
    k = calibrator_percentile.conformal_rank(n, alpha)
    return (n + 1 - k) / (n + 1)


@dataclass
class CalibrationResult:
    """One row's outcome."""

    row: CalibrationRow
    fresh: Rate
    conditional: list[float]
    tau_enter: list[float]
    disagreements: int


@dataclass
class Calibration:
    """Section 4: one result per row, and where the control runs' fast maxima lie."""

    rows: list[CalibrationResult]
    startup: Rate
    """Control runs of the pool whose fast maximum lies in the first round (steps 0-4)."""
    startup_top: Rate
    """The same among the tenth of the pool with the highest fast maxima."""


def calibration(sizes: Sizes, kernel: Kernel) -> Calibration:
    """Section 4: calibrate on disjoint blocks of control runs; trip a fresh run per calibration.

    Each calibration ``c`` uses its own block of ``n`` control runs from one pool (seeds from
    ``POOL_SEED``) and is tested on one fresh control run (seed ``FRESH_SEED + c``, or
    ``LONG_SEED + c`` for the shift row) through the real machine: independent trials, each with
    probability the *expected* false-halt rate, so the count is binomial. The *conditional*
    rate of one calibration (what a user who calibrated once gets) is estimated on the other
    calibrations' fresh runs.
    """
    control = PRESETS["control"]
    pool_size = max(
        sizes.calibrations * max(r.n for r in CALIBRATION_ROWS if r.n < 99),
        sizes.large_calibrations * 99,
    )
    pool = [simulate(control, POOL_SEED + i) for i in range(pool_size)]
    fresh = [simulate(control, FRESH_SEED + c) for c in range(sizes.calibrations)]
    long_runs = [simulate(control, LONG_SEED + c, 2 * STEPS) for c in range(sizes.calibrations)]
    cache: dict[tuple[float, int, bool], list[CalibrationReport]] = {}
    out = []
    for row in CALIBRATION_ROWS:
        count = sizes.large_calibrations if row.n == 99 else sizes.calibrations
        key = (row.alpha, row.n, row.calibrate_node_trip)
        if key not in cache:
            cache[key] = [
                calibrate(
                    [triples(t) for t in pool[c * row.n : (c + 1) * row.n]],
                    target_false_halt_rate=row.alpha,
                    kernel=kernel,
                    node_trip=row.calibrate_node_trip,
                )
                for c in range(count)
            ]
        reports = cache[key]
        tested = long_runs if row.long_runs else fresh
        maxima = [trip_max(t, row.run_node_trip) for t in tested]
        trips = disagreements = 0
        conditional = []
        for c, report in enumerate(reports):
            config = calibrated_config(report, node_trip=row.run_node_trip)
            tripped = first_trip(run_machine(tested[c], config, until_trip=True)) is not None
            trips += tripped
            tau = report.thresholds.tau_enter
            disagreements += tripped != (trip_max(tested[c], row.run_node_trip) >= tau)
            others = [m for i, m in enumerate(maxima) if i != c]
            conditional.append(sum(m >= tau for m in others) / len(others))
        out.append(
            CalibrationResult(
                row,
                Rate(trips, len(reports)),
                conditional,
                [r.thresholds.tau_enter for r in reports],
                disagreements,
            )
        )
    agents = control.agents
    argmax = [max(range(len(t)), key=lambda i: t[i].fast) for t in pool]
    top = sorted(range(len(pool)), key=lambda i: trip_max(pool[i], False))[-len(pool) // 10 :]
    return Calibration(
        out,
        Rate(sum(1 for i in argmax if i < agents), len(pool)),
        Rate(sum(1 for i in top if argmax[i] < agents), len(top)),
    )


# ------------------------------------------------------------------------------------------------
# 5. The two triggers

DEFAULT_SCENARIOS: dict[str, DotConfig] = {
    **{p: PRESETS[p] for p in PRESETS},
    "pipeline, decider a4 at drive 1": pipeline(1.0),
    "pipeline, middle agent a2 at drive 1": pipeline(1.0, "a2"),
}


@dataclass
class FirstTrips:
    """Where each trigger first trips a scenario's runs at the default thresholds."""

    network_only: list[int]
    combined: list[int]
    by: dict[str, int]
    runs: int


def trigger_of(step: Step, tau: float) -> str:
    """Which trigger fired at a trip: ``network`` (fast), ``node`` (own score) or ``both``."""
    network = step.fast >= tau
    node = step.own is not None and step.own >= tau
    return "both" if network and node else "network" if network else "node"


def first_trips(
    runs: Sequence[Trajectory], control: ControlStatistics, thresholds: Thresholds = THRESHOLDS
) -> FirstTrips:
    """Run each trajectory with node trips off and on; the first trip's step and trigger."""
    off = machine_config(thresholds, control=control)
    on = machine_config(thresholds, control=control, node_trip=True)
    network_only, combined = [], []
    by = {"network": 0, "node": 0, "both": 0}
    for trajectory in runs:
        i = first_trip(run_machine(trajectory, off, until_trip=True))
        if i is not None:
            network_only.append(trajectory[i].t)
        j = first_trip(run_machine(trajectory, on, until_trip=True))
        if j is not None:
            combined.append(trajectory[j].t)
            by[trigger_of(trajectory[j], thresholds.tau_enter)] += 1
    return FirstTrips(network_only, combined, by, len(runs))


@dataclass
class Curve:
    """Detection by drive level for one scenario and one machine."""

    detected: list[Rate]
    """Runs detected (first trip at or after the onset) among those not halted before it."""
    early: list[int]
    """Runs halted before the onset (false halts: the drive is still 0 there)."""
    delays: list[list[int]]
    by: list[dict[str, int]]


@dataclass
class Triggers:
    """Section 5."""

    defaults: dict[str, FirstTrips]
    taus: dict[str, dict[str, CalibrationReport]]
    curves: dict[str, dict[str, Curve]]
    weights: dict[str, float] = field(default_factory=dict)


SCENARIOS: dict[str, Callable[[float], DotConfig]] = {
    "debate (mesh, three of five agents biased)": debate,
    "pipeline (chain, the decider a4 biased)": pipeline,
}
MACHINES = ("network only", "network + node")


def triggers(
    trajectories: Mapping[str, list[Trajectory]],
    control: ControlStatistics,
    sizes: Sizes,
    kernel: Kernel,
) -> Triggers:
    """Section 5: first trips at the defaults; calibrated detection curves."""
    defaults = {}
    for name, scenario_config in DEFAULT_SCENARIOS.items():
        runs = trajectories.get(name) or [
            simulate(scenario_config, seed) for seed in range(sizes.seeds)
        ]
        defaults[name] = first_trips(runs, control)
    taus: dict[str, dict[str, CalibrationReport]] = {}
    curves: dict[str, dict[str, Curve]] = {}
    for scenario, make in SCENARIOS.items():
        controls = [
            triples(simulate(make(0.0), TRIGGER_CONTROL_SEED + i))
            for i in range(sizes.trigger_control_runs)
        ]
        taus[scenario] = {
            machine: calibrate(
                controls,
                target_false_halt_rate=0.05,
                kernel=kernel,
                node_trip=machine != "network only",
            )
            for machine in MACHINES
        }
        curves[scenario] = {m: Curve([], [], [], []) for m in MACHINES}
        for level in LEVELS:
            runs = [simulate(make(level), seed) for seed in range(sizes.trigger_seeds)]
            for machine in MACHINES:
                node_trip = machine != "network only"
                report = taus[scenario][machine]
                config = calibrated_config(report, node_trip=node_trip)
                detected = early = 0
                delays: list[int] = []
                by = {"network": 0, "node": 0, "both": 0}
                for trajectory in runs:
                    i = first_trip(run_machine(trajectory, config, until_trip=True))
                    if i is None:
                        continue
                    if trajectory[i].t < ONSET:
                        early += 1
                        continue
                    detected += 1
                    delays.append(trajectory[i].t - ONSET)
                    by[trigger_of(trajectory[i], report.thresholds.tau_enter)] += 1
                curve = curves[scenario][machine]
                curve.detected.append(Rate(detected, len(runs) - early))
                curve.early.append(early)
                curve.delays.append(delays)
                curve.by.append(by)
    weights = dict(katz_influence(pipeline(0.0).graph()).weights)
    return Triggers(defaults, taus, curves, weights)


# ------------------------------------------------------------------------------------------------
# The whole study


@dataclass
class Results:
    """Everything the report and the figures show."""

    sizes: Sizes
    control: ControlStatistics
    thrash: Thrash
    recovery: Recovery
    escalation: Escalation
    calibration: Calibration
    triggers: Triggers


def measure(sizes: Sizes) -> Results:
    """Run every section at the given sizes."""
    control = window_statistics()
    trajectories: dict[str, list[Trajectory]] = {
        p: [simulate(PRESETS[p], seed) for seed in range(sizes.seeds)] for p in PRESETS
    }
    trajectories["rise-oscillate-fall"] = [
        simulate(RISE_OSCILLATE_FALL, seed, RISE_OSCILLATE_FALL_STEPS)
        for seed in range(sizes.seeds)
    ]
    kernel = study_kernel()
    presets = {p: trajectories[p] for p in PRESETS}
    return Results(
        sizes,
        control,
        thrash(presets, control),
        recovery(trajectories, control, sizes),
        escalation(trajectories, control, sizes),
        calibration(sizes, kernel),
        triggers(presets, control, sizes, kernel),
    )


# ------------------------------------------------------------------------------------------------
# The report


def runs_phrase(k: int, n: int) -> str:
    """``on all 200 runs`` or ``on 197 of 200 runs``."""
    return f"on all {n} runs" if k == n else f"on {k} of {n} runs"


def md_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def figure(name: str, alt: str) -> str:
    """A Markdown image of one of the study's figures."""
    return f"![{alt}]({FIGURE_FOLDER}/{name})"


FIGURES = {
    "oscillation": "control-oscillation.png",
    "entries": "control-entries.png",
    "recovery": "control-recovery.png",
    "calibration": "control-calibration.png",
    "triggers": "control-triggers.png",
}


def setup_section(r: Results) -> list[str]:
    """How the runs were made."""
    c = r.control
    th = THRESHOLDS
    return [
        "## Set-up",
        "",
        f"Every run is a simulated DoT debate of {STEPS} guarded steps (`biasbreaker.dot`; "
        f"`rise-oscillate-fall` has {RISE_OSCILLATE_FALL_STEPS}), seeds 0–{r.sizes.seeds - 1} "
        "for every preset. The breaker has the `[breaker]` defaults: tau_enter = "
        f"{th.tau_enter}, tau_exit = {th.tau_exit} (fast B_net), tau_warn = {th.tau_warn} (slow "
        f"B_net), kappa = {th.kappa}; the machine has cooldown_steps = {COOLDOWN}, max_retries = "
        f"{MAX_RETRIES} and a calibration window of W = {MAX_HISTORY} steps whose statistics come "
        f"from {len(WINDOW_SEEDS)} control runs (seeds {WINDOW_SEEDS[0]}–{WINDOW_SEEDS[-1]}, as "
        f"`biasbreaker simulate` uses): mean {c.mean:.4f}, std {c.std:.4f}, so an observation "
        f"is an outlier above mean + 3·std = {c.bound(3.0):.4f}. Unless a section says "
        "otherwise the machine is the seed's literal one, as the DoT harness runs it: only fast "
        "B_net trips (`node_trip = false`) and RECOVERY holds every output (`probation = "
        '"hold"`). The simulated debate never receives the machine\'s repair (the loop is open), '
        "so a repair is a stand-in: a hook whose re-check passes (score 0.05), or one that fails.",
        "",
    ]


def thrash_section(r: Results) -> list[str]:
    """Section 1."""
    t = r.thrash
    n = r.sizes.seeds
    osc = "oscillate-near-threshold"
    single = Mean(tuple(t.entries[osc][BREAKERS[0]]))
    hyst_osc = t.entries[osc][BREAKERS[2]]
    tripping = [p for p in t.entries if any(t.entries[p][BREAKERS[0]])]
    hyst_once = sum(1 for p in tripping for e in t.entries[p][BREAKERS[2]] if e == 1)
    hyst_total = sum(len(t.entries[p][BREAKERS[2]]) for p in tripping)
    thrashing = {
        p: sum(1 for e in t.entries[p][BREAKERS[0]] if e > 1)
        for p in t.entries
        if any(e > 1 for e in t.entries[p][BREAKERS[0]])
    }
    drift_exit = sum(1 for e in t.entries["drift"][BREAKERS[1]] if e > 0)
    held = {p: {b: statistics.fmean(v) for b, v in t.held[p].items()} for p in t.held}
    lines = [
        "## 1. Hysteresis against a single threshold",
        "",
        "Four breakers read the same fast B_net of each run: a breaker without memory that is "
        "tripped exactly while fast >= tau_enter (a single threshold at the trip point), the "
        "same at tau_exit, the hysteresis element `CircuitBreaker` (trips at tau_enter, clears "
        "below tau_exit), and the control machine with a repair whose re-check passes (it also "
        "waits for the cool-down and a clean window before closing). An *entry* is a change "
        "from closed to tripped; a breaker that clears and trips again enters again.",
        "",
        f"Entries per run, mean [95 % t interval] (min–max), {n} runs per preset:",
        "",
        *md_table(
            ["preset", *BREAKERS],
            [
                [f"`{p}`", *(Mean(tuple(t.entries[p][b])).cell() for b in BREAKERS)]
                for p in t.entries
            ],
        ),
        figure(FIGURES["entries"], "Entries into the tripped state per run, by preset and breaker"),
        "",
        f"On `{osc}`, fast crosses tau_enter {spread(t.crossings[osc])} times per run (median "
        "[range]), and the single threshold at tau_enter flips with every crossing: it enters "
        f"the tripped state {single.mean:.2f} times per run [{single.interval[0]:.2f}, "
        f"{single.interval[1]:.2f}]. The hysteresis breaker enters "
        f"{statistics.fmean(hyst_osc):.2f} times per run and is still tripped at the last step "
        f"on {t.tripped_at_end[osc]} of {n} runs: fast stays in the dead-band or above. Over the "
        "presets that trip at all "
        f"({', '.join(f'`{p}`' for p in tripping)}), the hysteresis breaker entered exactly "
        f"once {runs_phrase(hyst_once, hyst_total)}. The single threshold at tau_enter entered "
        "more than once on "
        + ", ".join(f"{k} of {n} `{p}` runs" for p, k in thrashing.items())
        + ".",
        "",
        figure(
            FIGURES["oscillation"],
            "One oscillating run: a single threshold and the hysteresis breaker",
        ),
        "",
        "**What the hysteresis breaker does not miss.** It trips at the same step as the single "
        f"threshold at tau_enter {runs_phrase(t.same_first_trip, t.runs)}, and it is tripped at "
        "every step at which that single threshold is (steps where the single threshold held and "
        f"the hysteresis breaker did not: {t.leaked}). That is by construction: once tripped it "
        "needs fast < tau_exit < tau_enter to clear.",
        "",
        "**What it costs.** It keeps holding after fast falls back below tau_enter, and the "
        "machine holds longer still (until the cool-down is over and the window is clean). Held "
        "steps per run, mean:",
        "",
        *md_table(
            ["preset", *BREAKERS],
            [[f"`{p}`", *(f"{held[p][b]:.1f}" for b in BREAKERS)] for p in held],
        ),
        f"**What a single threshold catches that the breaker does not.** A single threshold at "
        f"tau_exit trips on `drift` in {drift_exit} of {n} runs (its fast B_net climbs above "
        f"{THRESHOLDS.tau_exit} but never to {THRESHOLDS.tau_enter}); the hysteresis breaker and "
        "the machine only warn there (slow >= tau_warn), as the design asks: drift is watched, "
        "a spike is halted. A deployment that wants drift of that size halted needs a lower "
        "tau_enter, not a different breaker; the price is the thrash the same threshold then "
        "shows near its own level.",
        "",
    ]
    return lines


def binding_counts(runs: Iterable[RecoveryRun]) -> str:
    """``window 30, cool-down 2``: what held the machine one step before it recovered."""
    counts: dict[str, int] = {}
    for run in runs:
        if run.binding is not None:
            counts[run.binding] = counts.get(run.binding, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "—"


def recovery_section(r: Results) -> list[str]:
    """Section 2."""
    rec = r.recovery
    rows = []
    recovered_total = window_bound = exact_w = 0
    for preset, runs in rec.runs.items():
        done = [x for x in runs if x.recovered is not None]
        tripped = [x for x in runs if x.trip is not None]
        recovered_total += len(done)
        window_bound += sum(1 for x in done if x.binding == "window")
        exact_w += sum(1 for x in done if window_lag(x) == MAX_HISTORY)
        rows.append(
            [
                f"`{preset}`",
                f"{len(done)}/{len(runs)}",
                spread(x.trip for x in tripped if x.trip is not None),
                spread(x.below_exit for x in done if x.below_exit is not None),
                spread(x.last_outlier for x in done if x.last_outlier is not None),
                spread(x.recovered for x in done if x.recovered is not None),
                spread(lag for x in done if (lag := window_lag(x)) is not None),
                binding_counts(done),
            ]
        )
    never = {
        p: sum(1 for x in runs if x.trip is not None and x.recovered is None)
        for p, runs in rec.runs.items()
    }
    never_text = ", ".join(f"{k} of {len(rec.runs[p])} `{p}` runs" for p, k in never.items() if k)
    grid_rows = []
    for w in GRID_WINDOWS:
        cells = []
        for c in GRID_COOLDOWNS:
            grid_runs = rec.grid[(w, c)]
            normal = [x.recovered for x in grid_runs if x.recovered is not None]
            cells.append(f"{spread(normal)}; {binding_counts(grid_runs)}")
        grid_rows.append(["no window" if w is None else f"W = {w}", *cells])
    bound = r.control.bound(3.0)
    spike_end = max(src.end or 0 for src in PRESETS["spike"].sources)
    spike_normal = [x.recovered for x in rec.runs["spike"] if x.recovered is not None]
    return [
        "## 2. Recovery after the cool-down and the window",
        "",
        "The machine with a repair whose re-check passes returns to NORMAL at the first step at "
        "which the cool-down is over, fast < tau_exit and the calibration window is clean. "
        "Simulated steps, median [min–max] over the recovered runs; *held by* is what was still "
        "unmet one step before NORMAL (fast at or above tau_exit, the window dirty, or only the "
        "cool-down):",
        "",
        *md_table(
            [
                "preset",
                "recovered",
                "trip",
                "fast < tau_exit from",
                "last outlier",
                "NORMAL at",
                "NORMAL − last outlier",
                "held by",
            ],
            rows,
        ),
        f"The window held the machine last in {window_bound} of {recovered_total} recoveries, and "
        f"NORMAL came exactly W = {MAX_HISTORY} steps after the last outlier in {exact_w} of "
        f"{recovered_total}: RLB-v1's bound t − s(t) <= W (`docs/control.md` §7) holds with "
        "equality, as it must for a sliding window. With these statistics a clean window needs "
        f"W steps at or below mean + 3·std = {bound:.4f}, far below tau_exit = "
        f"{THRESHOLDS.tau_exit}, so the tau_exit condition never decides a recovery while a "
        "window is configured; it decides for the bare breaker and for a machine without a "
        f"window. The `spike` preset's bias ends at step {spike_end}, yet the machine holds "
        f"its outputs until step {spread(spike_normal)}: the price of waiting for the network "
        "to look like the control runs again. "
        + (
            f"Runs whose bias never subsides stay tripped to the end ({never_text}): "
            "fail-closed, there is no recovery time-out."
            if never_text
            else ""
        ),
        "",
        f"The cool-down against the window, on `{GRID_PRESET}` (seeds 0–{r.sizes.grid_seeds - 1}; "
        "NORMAL at, median [range]; held by):",
        "",
        *md_table(["", *(f"cooldown_steps = {c}" for c in GRID_COOLDOWNS)], grid_rows),
        "Without a window the machine recovers as soon as fast < tau_exit and the cool-down is "
        "over; the cool-down decides only when it outlasts the fall of fast B_net. With a "
        "window, W decides.",
        "",
        figure(
            FIGURES["recovery"], "One recovery run: a repair that passes against the no-op hook"
        ),
        "",
    ]


def escalation_section(r: Results) -> list[str]:
    """Section 3."""
    esc = r.escalation
    expected = expected_delay(COOLDOWN, MAX_RETRIES)
    rows = []
    for hook_name, by_preset in esc.runs.items():
        for preset, runs in by_preset.items():
            n = len(runs)
            rows.append(
                [
                    hook_name,
                    f"`{preset}`",
                    f"{sum(x.interventions == MAX_RETRIES for x in runs)}/{n}",
                    f"{sum(x.delay == expected for x in runs)}/{n}",
                    f"{sum(x.terminal for x in runs)}/{n}",
                ]
            )
    repair_step = PRESETS["recovery"].repairs[0].step
    noop = next(iter(esc.runs.values()))["recovery"]
    escalated_at = [x.escalated_at for x in noop if x.escalated_at is not None]
    grid_rows = []
    for retries in GRID_RETRIES:
        cells = []
        for c in GRID_ESCALATION_COOLDOWNS:
            runs = esc.grid[(retries, c)]
            want = expected_delay(c, retries)
            ok = sum(x.delay == want and x.interventions == retries and x.terminal for x in runs)
            delays = spread(x.delay for x in runs if x.delay is not None)
            cells.append(f"{delays} ({ok}/{len(runs)} = {want})")
        grid_rows.append([f"max_retries = {retries}", *cells])
    return [
        "## 3. Escalation after `max_retries` failed repairs",
        "",
        "A repair fails its re-check when nothing repairs (the default no-op hook), when the "
        "repaired output still scores at or above tau_exit, or when the hook raises (the machine "
        "fails closed: the attempt counts and the output is held). Each attempt is one "
        "INTERVENTION step and a cool-down of max(cooldown_steps, 1) RECOVERY steps; after "
        f"max_retries attempts the machine escalates, {expected} steps after the trip with the "
        "defaults, and ESCALATED is terminal. Runs with exactly max_retries entries into "
        f"INTERVENTION, ESCALATED exactly {expected} steps after the trip, and ESCALATED to the "
        f"end (the no-op hook on seeds 0–{r.sizes.seeds - 1}, the others on seeds "
        f"0–{r.sizes.grid_seeds - 1}):",
        "",
        *md_table(
            [
                "failed repair",
                "preset",
                f"{MAX_RETRIES} entries",
                f"escalated after {expected} steps",
                "ESCALATED to the end",
            ],
            rows,
        ),
        f"On `recovery` the harness's own repair brings B_net back to the noise floor at step "
        f"{repair_step}, after the escalation (step {spread(escalated_at)}): the machine stays "
        "ESCALATED, because only a human closes an escalated episode.",
        "",
        f"Steps from the trip to ESCALATED on `persistent` (seeds 0–{r.sizes.grid_seeds - 1}) with "
        "the no-op hook, median [range] (runs matching max_retries · (max(cooldown_steps, 1) + 1) "
        "= expected):",
        "",
        *md_table(["", *(f"cooldown_steps = {c}" for c in GRID_ESCALATION_COOLDOWNS)], grid_rows),
    ]


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank)."""
    vals = sorted(values)
    return vals[max(0, math.ceil(q * len(vals)) - 1)]


def calibration_section(r: Results) -> list[str]:
    """Section 4."""
    cal = r.calibration
    rows = []
    for res in cal.rows:
        row = res.row
        cond = res.conditional
        rows.append(
            [
                row.label,
                f"{row.alpha:g}",
                str(row.n),
                str(res.fresh.n),
                f"{conformal_rate(row.n, row.alpha):.3f}",
                res.fresh.cell(),
                f"{statistics.median(res.tau_enter):.4f} "
                f"[{min(res.tau_enter):.4f}–{max(res.tau_enter):.4f}]",
                f"{statistics.fmean(cond):.3f}, {statistics.median(cond):.3f}, "
                f"{quantile(cond, 0.9):.3f}",
                f"{sum(c > row.alpha for c in cond)}/{len(cond)}",
            ]
        )
    disagreements = sum(res.disagreements for res in cal.rows)
    trials = sum(res.fresh.n for res in cal.rows)
    inside = [
        res
        for res in cal.rows
        if res.fresh.interval[0]
        <= conformal_rate(res.row.n, res.row.alpha)
        <= res.fresh.interval[1]
    ]
    plain = [res for res in cal.rows if not res.row.long_runs and "mismatch" not in res.row.label]
    shift = next(res for res in cal.rows if res.row.long_runs)
    mismatch = next(res for res in cal.rows if "mismatch" in res.row.label)
    return [
        "## 4. The calibrated false-halt rate against its target",
        "",
        "Each calibration runs `biasbreaker.calibration.calibrate` (the `percentile` calibrator, "
        f"through a kernel) on its own block of n control runs ({STEPS} steps each; one pool, "
        f"seeds from {POOL_SEED}, disjoint blocks) at a target per-run rate α. Its thresholds "
        "then run the real machine on one fresh control run (seed "
        f"{FRESH_SEED} + the calibration's index): each calibration is one independent trial whose "
        "probability of a false halt is the *expected* rate, so the count of fresh runs that "
        "tripped is binomial and gets a Clopper-Pearson interval. The theorem (`docs/control.md` "
        "§5) bounds that expected rate by α, with equality (n + 1 − k)/(n + 1) for scores "
        "without ties. A user calibrates once, though: the rate *their* thresholds give is a "
        "random variable around it, estimated here for each calibration on the other "
        "calibrations' fresh runs (mean, median and 90th percentile over calibrations, and how "
        "many calibrations exceed α).",
        "",
        *md_table(
            [
                "trigger",
                "α",
                "n",
                "calibrations",
                "expected rate",
                "fresh runs that tripped [95 % CP]",
                "tau_enter, median [range]",
                "one calibration's rate: mean, median, 90th pct",
                "calibrations above α",
            ],
            rows,
        ),
        f"The expected rate lies inside the interval in {len(inside)} of {len(cal.rows)} rows; of "
        f"the rows that meet the theorem's conditions, {sum(1 for x in plain if x in inside)} of "
        f"{len(plain)}. The machine tripped exactly when the run's maximum trip statistic reached "
        f"tau_enter on every trial ({disagreements} disagreements in {trials}). Two rows break "
        "the conditions on purpose. *Mismatch*: thresholds calibrated on fast B_net alone, run "
        f"by a machine with node trips, trip {mismatch.fresh.value:.2f} of the fresh runs — "
        "calibrate with the trigger the machine uses (`biasbreaker calibrate` reads `[breaker] "
        f"node_trip`). *Shift*: new runs twice as long as the calibration runs trip "
        f"{shift.fresh.value:.2f} against a target of {shift.row.alpha:g}: the rate is per run of "
        "the calibrated length, and a longer run has more chances to reach the threshold.",
        "",
        f"Where the network threshold comes from: in {cal.startup.k} of {cal.startup.n} control "
        "runs of the pool the maximum of fast B_net lies in the first round (steps 0–4), where "
        "B_net averages the few agents that have spoken yet (at step 0, one) and the fast EWMA "
        f"starts at the first B_net; among the tenth of the runs with the highest maxima — "
        f"those that set tau_enter at α <= 0.1 — in {cal.startup_top.k} of {cal.startup_top.n}. "
        + (
            "So the network-only tau_enter mostly reflects the start-up, where one agent's "
            "probe noise is not yet averaged, rather than the network average in steady state."
            if cal.startup_top.value > 0.5
            else "So the start-up is not what sets the network-only tau_enter here."
        ),
        "",
        figure(FIGURES["calibration"], "Measured false-halt rates against their targets"),
        "",
    ]


def detection_level(tr: Triggers, scenario: str, machine: str, share: float) -> str:
    """``d = 0.1``: the smallest bias drive at which ``machine`` detects ``share`` of the runs."""
    for i, level in enumerate(LEVELS):
        if level > 0 and tr.curves[scenario][machine].detected[i].value >= share:
            return f"d = {level:g}"
    return f"no level up to d = {LEVELS[-1]:g}"


def triggers_section(r: Results) -> list[str]:
    """Section 5."""
    tr = r.triggers
    n = r.sizes.seeds
    rows = []
    node_first = network_first = both_first = tripped_on = 0
    for name, f in tr.defaults.items():
        node_first += f.by["node"]
        network_first += f.by["network"]
        both_first += f.by["both"]
        tripped_on += len(f.combined)
        rows.append(
            [
                f"`{name}`" if name in PRESETS else name,
                f"{len(f.network_only)}/{f.runs}",
                spread(f.network_only),
                f"{len(f.combined)}/{f.runs}",
                spread(f.combined),
                f"{f.by['network']} / {f.by['node']} / {f.by['both']}",
            ]
        )
    drift = tr.defaults["drift"]
    w4 = tr.weights["a4"]
    pipes = [f for name, f in tr.defaults.items() if name not in PRESETS]
    pipes_on = sum(len(f.combined) for f in pipes)
    pipes_off = sum(len(f.network_only) for f in pipes)
    pipes_runs = sum(f.runs for f in pipes)
    scen = list(SCENARIOS)
    tau_rows = [
        [
            s,
            m,
            f"{tr.taus[s][m].thresholds.tau_enter:.4f}",
            f"{tr.taus[s][m].thresholds.tau_exit:.4f}",
            f"{tr.taus[s][m].thresholds.tau_warn:.4f}",
        ]
        for s in scen
        for m in MACHINES
    ]
    enter = {(s, m): tr.taus[s][m].thresholds.tau_enter for s in scen for m in MACHINES}
    same = all(enter[(scen[0], m)] == enter[(scen[1], m)] for m in MACHINES)
    same_text = (
        "The two topologies get the same thresholds: the control maxima come from the first "
        "steps, before the agents have read each other (section 4). "
        if same
        else ""
    )
    raised = all(enter[(s, MACHINES[1])] > enter[(s, MACHINES[0])] for s in scen)
    det_rows = []
    delay_rows = []
    for i, level in enumerate(LEVELS):
        det_rows.append(
            [f"{level:g}", *(tr.curves[s][m].detected[i].cell() for s in scen for m in MACHINES)]
        )
        delay_rows.append(
            [f"{level:g}", *(spread(tr.curves[s][m].delays[i]) for s in scen for m in MACHINES)]
        )
    early = {(s, m): tr.curves[s][m].early[0] for s in scen for m in MACHINES}
    by_total = {
        (s, m): {k: sum(b[k] for b in tr.curves[s][m].by) for k in ("network", "node", "both")}
        for s in scen
        for m in MACHINES
    }
    combined_by = {
        k: sum(by_total[(s, MACHINES[1])][k] for s in scen) for k in ("network", "node", "both")
    }
    head = [f"{s}, {m}" for s in scen for m in MACHINES]

    def first_level(s: str, m: str, share: float) -> str:
        return detection_level(tr, s, m, share)

    control_halts = {
        (s, m): Rate(early[(s, m)] + tr.curves[s][m].detected[0].k, r.sizes.trigger_seeds)
        for s in scen
        for m in MACHINES
    }

    return [
        "## 5. The two triggers: the network score and a node's own score",
        "",
        "The breaker can trip on fast B_net (the *network* trigger, a Katz-weighted average of "
        "the agents' scores) and, with `node_trip = true` (the configuration default for guarded "
        "pipelines), on the guarded step's own local score (the *node* trigger), both against "
        "tau_enter (`docs/control.md` §3b). Two kinds of run: *debates*, the DoT presets and a "
        "mesh of five agents where three are biased and conformity spreads it to the other two; "
        "and *pipelines*, a chain a0 -> a1 -> a2 -> a3 -> a4 with one biased agent.",
        "",
        f"**At the default thresholds** (tau_enter = {THRESHOLDS.tau_enter}), seeds 0–{n - 1}: "
        "runs that trip and the first trip's simulated step, median [range], with node trips "
        "off and on; for node trips on, which trigger fired at the first trip (network only / "
        "node only / both at that step):",
        "",
        *md_table(
            [
                "scenario",
                "node trips off: tripped",
                "first trip",
                "node trips on: tripped",
                "first trip",
                "first trigger: network / node / both",
            ],
            rows,
        ),
        f"With node trips on, the node trigger fired first on {node_first} of {tripped_on} "
        f"tripped runs, the network trigger alone on {network_first}, both at once on "
        f"{both_first}. That is no accident of these presets: fast B_net is an average over time "
        "of B_net, which is a weighted average of the agents' latest scores, each of which was "
        "some step's own score; so fast cannot reach tau_enter before some own score has, and "
        "with node trips on that step already tripped the breaker (the exceptions: a score set "
        "outside a guarded step, such as the harness's re-probe after a repair, or an own score "
        "that arrived while the breaker was already tripped). The node trigger also trips "
        f"`drift`, built to warn and never trip, on {len(drift.combined)} of {drift.runs} runs "
        f"(steps {spread(drift.combined)}). It trips {pipes_on} of {pipes_runs} pipeline runs; "
        f"the network trigger trips {pipes_off}: one fully biased agent among five moves B_net "
        f"only by its Katz weight (the decider a4's is {w4:.3f}: nothing reads its output).",
        "",
        "**With calibrated thresholds.** Each scenario's thresholds come from "
        f"{r.sizes.trigger_control_runs} of its own control runs (drive 0; seeds from "
        f"{TRIGGER_CONTROL_SEED}) at α = 0.05: on fast B_net alone for the network-only "
        "machine, on max(fast, own) for the machine with both triggers:",
        "",
        *md_table(["scenario", "machine", "tau_enter", "tau_exit", "tau_warn"], tau_rows),
        same_text
        + (
            "Calibrating for both triggers raises tau_enter, because over a run a single "
            "agent's own score reaches higher than the average does."
            if raised
            else "Calibrating for both triggers did not raise tau_enter here."
        ),
        "",
        f"Runs detected by bias drive d: the first trip at or after the bias onset (step "
        f"{ONSET}), among the runs not halted before it. {r.sizes.trigger_seeds} seeds per "
        "level, the same at every level, so the runs halted before the onset (false halts: the "
        "drive is still 0 there) are the same runs at every level: "
        + ", ".join(f"{k} for {s.split(' (')[0]}, {m}" for (s, m), k in early.items())
        + ". At d = 0 a detection is a false halt after the onset; with those before it, the "
        "calibrated machines halted "
        + ", ".join(
            f"{rate.cell()} ({s.split(' (')[0]}, {m})" for (s, m), rate in control_halts.items()
        )
        + " of the control runs, against a target of 0.05: the rate of one calibration, which "
        "scatters around the target (section 4).",
        "",
        *md_table(["d", *head], det_rows),
        "Steps from the onset to the trip, detected runs, median [range]:",
        "",
        *md_table(["d", *head], delay_rows),
        figure(FIGURES["triggers"], "Detection by bias drive: debates against pipelines"),
        "",
        "First trigger at the detected trips of the machine with both: node "
        f"{combined_by['node']}, network {combined_by['network']}, both {combined_by['both']}.",
        "",
        "**When each matters.**",
        "",
        "* *Debates.* Conformity spreads the bias across agents, so B_net follows it: the "
        "network-only machine detects nine in ten runs from "
        f"{first_level(scen[0], MACHINES[0], 0.9)}, the machine with both triggers from "
        f"{first_level(scen[0], MACHINES[1], 0.9)}.",
        f"* *Pipelines.* One biased agent is diluted by its Katz weight: the network-only machine "
        f"reaches nine in ten at {first_level(scen[1], MACHINES[0], 0.9)}, the machine with "
        f"both triggers at {first_level(scen[1], MACHINES[1], 0.9)}.",
        *(
            [
                "* The two calibrated machines are not at equal false-halt rates here (on the "
                "control runs "
                + " and ".join(f"{m} {control_halts[(scen[0], m)].value:.2f}" for m in MACHINES)
                + "): part of the combined machine's lead at the smallest drives is its higher "
                "false-halt rate, not sensitivity."
            ]
            if control_halts[(scen[0], MACHINES[0])].k != control_halts[(scen[0], MACHINES[1])].k
            else []
        ),
        "* With node trips on, the trips come from the node trigger, debates included; the "
        "network score's part is then everything else the machine does with fast and slow "
        "B_net: the drift warning (slow), the recovery (fast < tau_exit and the window, both on "
        "fast B_net) and, for steps that carry no own score (not applicable), the trip itself. "
        "The network trigger is also what a deployment has when it turns node trips off (the "
        "seed's literal machine, as `biasbreaker simulate` runs it).",
        "",
    ]


def limits_section(r: Results) -> list[str]:
    """What the study shows and does not."""
    return [
        "## What this does and does not show",
        "",
        "* Everything is simulated: the trajectories come from a stochastic model of a debate "
        "with bounded probe noise (an Irwin-Hall sum, at most 3 × 0.03 from the stance), not "
        "from language models. The machine, the window and the calibration are the real code; "
        "their numbers on real pipelines depend on the pipeline's own control runs.",
        "* The loop is open: the machine's repair never reaches the simulated debate, so "
        "recovery here follows the harness's own repair events, and the passing repair is a "
        "stand-in. The study measures the control logic, not a repair.",
        "* The calibration guarantee is in expectation over calibrations, for runs exchangeable "
        "with the control runs (same pipeline, same length, same noise): section 4 shows both "
        "how one calibration scatters around it and what a longer run does to it.",
        "* A different noise model or graph changes the numbers; the ordering of the two "
        "triggers with one shared threshold (section 5) follows from B_net being an average of "
        "own scores, not from the model.",
        "",
    ]


def headline(r: Results) -> list[str]:
    """The study's results in a few lines, every number measured above."""
    t = r.thrash
    osc = "oscillate-near-threshold"
    single = Mean(tuple(t.entries[osc][BREAKERS[0]]))
    hyst = Mean(tuple(t.entries[osc][BREAKERS[2]]))
    recovered = [x for runs in r.recovery.runs.values() for x in runs if x.recovered is not None]
    exact = sum(1 for x in recovered if window_lag(x) == MAX_HISTORY)
    esc = [x for by in r.escalation.runs.values() for runs in by.values() for x in runs]
    expected = expected_delay(COOLDOWN, MAX_RETRIES)
    ok = sum(x.interventions == MAX_RETRIES and x.delay == expected and x.terminal for x in esc)
    default = next(res for res in r.calibration.rows if res.row.alpha == 0.05 and res.row.n == 19)
    mismatch = next(res for res in r.calibration.rows if "mismatch" in res.row.label)
    shift = next(res for res in r.calibration.rows if res.row.long_runs)
    defaults = r.triggers.defaults
    node = sum(f.by["node"] for f in defaults.values())
    tripped = sum(len(f.combined) for f in defaults.values())
    pipes = [f for name, f in defaults.items() if name not in PRESETS]
    pipes_tripped = sum(len(f.network_only) for f in pipes)
    pipes_runs = sum(f.runs for f in pipes)
    debates = [defaults[p] for p in TRIPPING]
    scen = list(SCENARIOS)
    debates_tripped = sum(len(f.network_only) for f in debates)
    debates_runs = sum(f.runs for f in debates)
    return [
        "## Results in brief",
        "",
        f"* **No thrash.** On `{osc}` a single threshold at tau_enter enters the tripped state "
        f"{single.mean:.2f} times per run [{single.interval[0]:.2f}, {single.interval[1]:.2f}]; "
        f"the hysteresis breaker {hyst.mean:.2f}, at the same first step, and it is tripped "
        "wherever the single threshold is. The price: it holds longer, and it does not trip on "
        "slow drift that a single threshold at tau_exit catches (section 1).",
        f"* **Recovery** waits for the window: NORMAL came exactly W = {MAX_HISTORY} steps after "
        f"the last outlier in {exact} of {len(recovered)} recoveries (section 2).",
        f"* **Escalation** after max_retries = {MAX_RETRIES} failed repairs, exactly {expected} "
        f"steps after the trip, terminal: {ok} of {len(esc)} runs (section 3).",
        f"* **Calibration.** At α = 0.05 on 19 control runs, {default.fresh.cell()} of fresh "
        "control runs tripped; one calibration's own rate has a 90th percentile of "
        f"{quantile(default.conditional, 0.9):.3f}. Thresholds calibrated on fast B_net alone "
        f"and run with node trips trip {mismatch.fresh.value:.2f} of fresh runs; runs twice as "
        f"long as the calibration runs trip {shift.fresh.value:.2f} at α = {shift.row.alpha:g} "
        "(section 4).",
        f"* **Triggers.** With node trips on, the node's own score fired first on {node} of "
        f"{tripped} tripped runs. The network score alone tripped {pipes_tripped} of "
        f"{pipes_runs} pipeline runs with one fully biased agent at the defaults, and "
        f"{debates_tripped} of {debates_runs} runs of the biased debate presets, where "
        "conformity spreads the bias. Calibrated at α = 0.05, the network trigger alone "
        f"detects nine in ten runs of one biased pipeline agent from "
        f"{detection_level(r.triggers, scen[1], MACHINES[0], 0.9)}, both triggers from "
        f"{detection_level(r.triggers, scen[1], MACHINES[1], 0.9)}; on debates "
        f"{detection_level(r.triggers, scen[0], MACHINES[0], 0.9)} against "
        f"{detection_level(r.triggers, scen[0], MACHINES[1], 0.9)} (section 5).",
        "",
    ]


def report(r: Results) -> str:
    """The Markdown report."""
    sizes = r.sizes
    lines = [
        "# Control study (simulated)",
        "",
        "Generated by `docs/studies/control_study.py`"
        + (" in quick mode" if sizes.name == "quick" else "")
        + f" ({sizes.seeds} seeds per preset, {sizes.calibrations} + "
        f"{sizes.large_calibrations} calibrations, {sizes.trigger_seeds} seeds per bias level). "
        "**Everything here is simulated**: the B_net trajectories come from the DoT harness "
        "(`biasbreaker.dot`), a stochastic model of a multi-agent debate, not from language "
        "models; the breaker, the control machine, the calibration window and the calibration "
        "are the real code. Regenerate with `python docs/studies/control_study.py` (byte for "
        "byte; `--check` compares with the committed files).",
        "",
        *headline(r),
        *setup_section(r),
        *thrash_section(r),
        *recovery_section(r),
        *escalation_section(r),
        *calibration_section(r),
        *triggers_section(r),
        *limits_section(r),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


# ------------------------------------------------------------------------------------------------
# The figures

COLOURS = {
    BREAKERS[0]: "tab:red",
    BREAKERS[1]: "tab:orange",
    BREAKERS[2]: "tab:blue",
    BREAKERS[3]: "tab:green",
}
STATE_COLOURS = {
    S.NORMAL: "#cfcfcf",
    S.WARNING: "#f2c14e",
    S.INTERVENTION: "#d62728",
    S.RECOVERY: "#ff9f4a",
    S.ESCALATED: "#6a3d9a",
}
MACHINE_COLOURS = {MACHINES[0]: "tab:blue", MACHINES[1]: "tab:purple"}


def spans(t: Sequence[int], flags: Sequence[bool]) -> list[tuple[int, int]]:
    """``(start, width)`` of each run of true flags, in simulated steps."""
    out = []
    start = None
    for i, flag in enumerate(flags):
        if flag and start is None:
            start = i
        if start is not None and (not flag or i == len(flags) - 1):
            end = i + 1 if flag else i
            out.append((t[start], t[end - 1] - t[start] + 1))
            start = None
    return out


def state_spans(
    t: Sequence[int], states: Sequence[BreakerState]
) -> dict[BreakerState, list[tuple[int, int]]]:
    """Per state that occurs, ``(start, width)`` of each run of it."""
    return {
        state: spans(t, [s is state for s in states]) for state in BreakerState if state in states
    }


def save(fig: Any, path: Path) -> None:
    """Write a PNG without a timestamp or version stamp, so its bytes are reproducible."""
    fig.savefig(path, dpi=110, metadata={"Software": None})


def write_figures(r: Results, folder: Path) -> list[Path]:
    """Write the five figures into ``folder``; return their paths.

    matplotlib is imported here, not at the top: the report's text (and its test, which runs
    without the ``demo`` extra) does not need it.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "svg.hashsalt": "biasbreaker"})
    folder.mkdir(parents=True, exist_ok=True)
    th = THRESHOLDS
    paths = []

    # 1. one oscillating run, both breakers
    ex = r.thrash.example
    fig, (ax, bx) = plt.subplots(
        2, 1, figsize=(10, 5.4), sharex=True, height_ratios=[3, 1.4], layout="constrained"
    )
    ax.plot(ex["t"], ex["fast"], color="black", lw=1.3)
    ax.axhline(th.tau_enter, color="tab:red", ls="--", lw=1.2)
    ax.axhline(th.tau_exit, color="tab:blue", ls=":", lw=1.4)
    ax.set_ylabel("fast B_net")
    ax.set_title("oscillate-near-threshold, seed 0: one trajectory read by two breakers")
    rows = [
        ("single threshold at tau_enter", ex["single"]),
        ("hysteresis breaker", ex["hysteresis"]),
    ]
    for y, (name, flags) in enumerate(reversed(rows)):
        colour = COLOURS[name]
        blocks = spans(ex["t"], flags)
        bx.broken_barh(blocks, (y - 0.35, 0.7), color=colour, alpha=0.85)
        bx.plot([b[0] for b in blocks], [y + 0.5] * len(blocks), "v", color=colour, ms=7)
    bx.set_yticks(
        range(len(rows)),
        [
            f"{name}\n{entries(flags)} entr{'y' if entries(flags) == 1 else 'ies'}"
            for name, flags in reversed(rows)
        ],
    )
    bx.set_ylim(-0.6, len(rows) - 0.1)
    bx.set_xlabel("simulated step")
    fig.legend(
        [
            Line2D([], [], color="black", lw=1.3),
            Line2D([], [], color="tab:red", ls="--"),
            Line2D([], [], color="tab:blue", ls=":"),
            Patch(color="grey", alpha=0.85),
            Line2D([], [], marker="v", color="grey", ls=""),
        ],
        [
            "fast B_net",
            f"tau_enter = {th.tau_enter}",
            f"tau_exit = {th.tau_exit}",
            "tripped (outputs held)",
            "entry (closed -> tripped)",
        ],
        loc="outside lower center",
        ncols=5,
    )
    paths.append(folder / FIGURES["oscillation"])
    save(fig, paths[-1])
    plt.close(fig)

    # 2. entries per run, by preset and breaker
    presets = list(r.thrash.entries)
    fig, ax = plt.subplots(figsize=(10, 4.6), layout="constrained")
    width = 0.2
    for j, name in enumerate(BREAKERS):
        means = [Mean(tuple(r.thrash.entries[p][name])) for p in presets]
        xs = [i + (j - 1.5) * width for i in range(len(presets))]
        ys = [m.mean for m in means]
        err = [[m.mean - m.interval[0] for m in means], [m.interval[1] - m.mean for m in means]]
        ax.bar(xs, ys, width, color=COLOURS[name], label=name)
        ax.errorbar(xs, ys, yerr=err, fmt="none", ecolor="black", capsize=3, lw=1)
    ax.set_xticks(range(len(presets)), [p.replace("-near-", "-\nnear-") for p in presets])
    ax.set_ylabel("entries per run")
    ax.set_title(
        f"Entries into the tripped state per run: mean and 95 % interval, {r.sizes.seeds} "
        "seeds per preset"
    )
    fig.legend(loc="outside lower center", ncols=4)
    paths.append(folder / FIGURES["entries"])
    save(fig, paths[-1])
    plt.close(fig)

    # 3. one recovery run: a repair that passes against the no-op hook
    ex = r.recovery.example
    repair_step = PRESETS["recovery"].repairs[0].step
    fig, (ax, bx) = plt.subplots(
        2, 1, figsize=(10, 5.6), sharex=True, height_ratios=[3, 1.6], layout="constrained"
    )
    ax.plot(ex["t"], ex["fast"], color="black", lw=1.3)
    ax.axhline(th.tau_enter, color="tab:red", ls="--", lw=1.2)
    ax.axhline(th.tau_exit, color="tab:blue", ls=":", lw=1.4)
    ax.axhline(ex["bound"], color="tab:green", ls="-.", lw=1.2)
    ax.axvline(repair_step, color="grey", lw=1)
    ax.set_ylabel("fast B_net")
    ax.set_title("recovery, seed 0: the machine with a repair that passes, and with the no-op hook")
    strips = [("repair passes", ex["repair"]), ("no-op hook", ex["noop"])]
    occurring: list[BreakerState] = []
    for y, (_, states) in enumerate(reversed(strips)):
        for state, blocks in state_spans(ex["t"], states).items():
            bx.broken_barh(blocks, (y + 1 - 0.35, 0.7), color=STATE_COLOURS[state])
            if state not in occurring:
                occurring.append(state)
    bx.broken_barh(spans(ex["t"], ex["dirty"]), (-0.35, 0.7), color="tab:green", alpha=0.5)
    bx.axvline(repair_step, color="grey", lw=1)
    bx.set_yticks(range(3), ["window dirty", *(name for name, _ in reversed(strips))])
    bx.set_ylim(-0.6, 2.6)
    bx.set_xlabel("simulated step")
    order = [s for s in BreakerState if s in occurring]
    fig.legend(
        [
            Line2D([], [], color="black", lw=1.3),
            Line2D([], [], color="tab:red", ls="--"),
            Line2D([], [], color="tab:blue", ls=":"),
            Line2D([], [], color="tab:green", ls="-."),
            Line2D([], [], color="grey"),
            *(Patch(color=STATE_COLOURS[s]) for s in order),
            Patch(color="tab:green", alpha=0.5),
        ],
        [
            "fast B_net",
            f"tau_enter = {th.tau_enter}",
            f"tau_exit = {th.tau_exit}",
            f"outlier bound mean + 3·std = {ex['bound']:.3f}",
            f"harness repair (step {repair_step})",
            *(f"state {s.value.upper()}" for s in order),
            f"window dirty (W = {MAX_HISTORY})",
        ],
        loc="outside lower center",
        ncols=4,
    )
    paths.append(folder / FIGURES["recovery"])
    save(fig, paths[-1])
    plt.close(fig)

    # 4. calibration
    rows_ = r.calibration.rows
    labels = [
        f"{res.row.label}\nα = {res.row.alpha:g}, n = {res.row.n}, {res.fresh.n} calibrations"
        for res in rows_
    ]
    fig, (ax, bx) = plt.subplots(
        1, 2, figsize=(11, 5.6), sharey=True, width_ratios=[1.2, 1], layout="constrained"
    )
    rows_y = list(range(len(rows_)))[::-1]
    for y, res in zip(rows_y, rows_, strict=True):
        low, high = res.fresh.interval
        ax.errorbar(
            [res.fresh.value],
            [y],
            xerr=[[res.fresh.value - low], [high - res.fresh.value]],
            fmt="o",
            color="tab:blue",
            capsize=4,
        )
        ax.plot([res.row.alpha], [y], "|", color="black", ms=16, mew=2)
        ax.plot([conformal_rate(res.row.n, res.row.alpha)], [y], "D", color="tab:orange", ms=5)
        bx.boxplot(
            [res.conditional],
            positions=[y],
            orientation="horizontal",
            widths=0.5,
            showfliers=True,
            flierprops={"markersize": 3},
            medianprops={"color": "black"},
        )
        bx.plot([res.row.alpha], [y], "|", color="black", ms=16, mew=2)
    for a in (ax, bx):
        a.set_xscale("function", functions=(math_sqrt, math_square))
        a.set_xlim(0, 1.05)
        a.set_xticks([0, 0.05, 0.1, 0.2, 0.5, 1], ["0", ".05", ".1", ".2", ".5", "1"])
        a.grid(axis="x", alpha=0.3)
    ax.set_yticks(rows_y, labels)
    ax.set_xlabel("fresh control runs that tripped (√ scale)")
    ax.set_title("Measured rate: one fresh run per calibration")
    bx.set_xlabel("one calibration's own rate (√ scale)")
    bx.set_title("How one calibration's rate scatters")
    fig.legend(
        [
            Line2D([], [], marker="o", color="tab:blue", ls=""),
            Line2D([], [], marker="|", color="black", ls="", ms=12, mew=2),
            Line2D([], [], marker="D", color="tab:orange", ls=""),
            Patch(facecolor="white", edgecolor="black"),
        ],
        [
            "measured, 95 % Clopper-Pearson",
            "target α",
            "expected (n + 1 − k)/(n + 1)",
            "calibrations: quartiles, whiskers 1.5 IQR",
        ],
        loc="outside lower center",
        ncols=4,
    )
    paths.append(folder / FIGURES["calibration"])
    save(fig, paths[-1])
    plt.close(fig)

    # 5. the two triggers
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True, layout="constrained")
    xs = list(range(len(LEVELS)))
    for a, scenario in zip(axes, SCENARIOS, strict=True):
        for offset, machine in zip((-0.07, 0.07), MACHINES, strict=True):
            curve = r.triggers.curves[scenario][machine]
            vals = [rate.value for rate in curve.detected]
            err = [
                [v - rate.interval[0] for v, rate in zip(vals, curve.detected, strict=True)],
                [rate.interval[1] - v for v, rate in zip(vals, curve.detected, strict=True)],
            ]
            a.errorbar(
                [x + offset for x in xs],
                vals,
                yerr=err,
                marker="o",
                capsize=3,
                color=MACHINE_COLOURS[machine],
            )
        a.set_xticks(xs, [f"{level:g}" if level else "0\n(control)" for level in LEVELS])
        a.set_xlabel("bias drive d of the biased agents")
        a.set_title(scenario)
        a.set_ylim(-0.03, 1.03)
        a.grid(alpha=0.3)
    axes[0].set_ylabel("share detected (runs not halted before the onset)")
    taus = r.triggers.taus[next(iter(SCENARIOS))]
    fig.legend(
        [Line2D([], [], marker="o", color=MACHINE_COLOURS[m]) for m in MACHINES],
        [
            f"network only: fast B_net >= tau_enter = {taus[MACHINES[0]].thresholds.tau_enter:.3f} "
            "(calibrated on fast)",
            f"network + node: also own score >= tau_enter = "
            f"{taus[MACHINES[1]].thresholds.tau_enter:.3f} (calibrated on max(fast, own))",
        ],
        loc="outside lower center",
        ncols=1,
    )
    fig.suptitle(
        "Calibrated at α = 0.05: runs detected at or after the bias onset (95 % intervals)"
    )
    paths.append(folder / FIGURES["triggers"])
    save(fig, paths[-1])
    plt.close(fig)
    return paths


def math_sqrt(x: Any) -> Any:
    """Square root for a matplotlib function scale (elementwise on arrays, clipped at 0)."""
    import numpy as np

    return np.sqrt(np.clip(x, 0, None))


def math_square(x: Any) -> Any:
    """Inverse of :func:`math_sqrt`."""
    import numpy as np

    return np.square(x)


# ------------------------------------------------------------------------------------------------
# Command line


def write(r: Results, out: Path, *, text_only: bool = False) -> list[Path]:
    """Write the report to ``out`` and its figures beside it; return the paths written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report(r), encoding="utf-8", newline="\n")
    if text_only:
        return [out]
    return [out, *write_figures(r, out.parent / FIGURE_FOLDER)]


def check(r: Results, out: Path, *, text_only: bool = False) -> list[Path]:
    """Write the study into a temporary folder; return the files under ``out``'s folder that differ.

    A file that is missing counts as differing. Nothing under ``out``'s folder is changed.
    """
    with tempfile.TemporaryDirectory() as tmp:
        fresh = write(r, Path(tmp) / out.name, text_only=text_only)
        return [
            committed
            for committed in (out.parent / path.relative_to(tmp) for path in fresh)
            if not committed.is_file()
            or not filecmp.cmp(
                Path(tmp) / committed.relative_to(out.parent), committed, shallow=False
            )
        ]


def main(argv: Sequence[str] | None = None) -> int:
    """Write the study (``--out``, default ``docs/studies/control.md``), or check it."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds and calibrations")
    parser.add_argument("--out", type=Path, default=REPORT, help="the report (figures beside it)")
    parser.add_argument("--text-only", action="store_true", help="write or check the text only")
    parser.add_argument(
        "--check",
        action="store_true",
        help="regenerate into a temporary folder and exit 1 if any file differs from --out's",
    )
    args = parser.parse_args(argv)
    results = measure(QUICK if args.quick else FULL)
    if not args.check:
        for path in write(results, args.out, text_only=args.text_only):
            print(f"wrote {path}")
        return 0
    differ = check(results, args.out, text_only=args.text_only)
    for path in differ:
        print(f"differs from a fresh run: {path}")
    if differ:
        flags = " --quick" if args.quick else ""
        flags += " --text-only" if args.text_only else ""
        print(f"regenerate with: python docs/studies/control_study.py{flags} --out {args.out}")
        return 1
    print(f"the files beside {args.out} match a fresh run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
