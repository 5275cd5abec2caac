"""``biasbreaker simulate`` on every DoT preset: the figures docs/control.md §8 quotes.

Run ``python docs/studies/simulated_runs.py`` to regenerate ``docs/studies/simulated_runs.md``;
``--check`` regenerates it in memory and exits 1 when the committed file, or a passage
docs/control.md quotes from it, differs (``tests/test_simulated_runs.py`` runs it: about 30 s).

Every run is the simulated loop of ``biasbreaker simulate PRESET --seed S`` with the
configuration's defaults (:mod:`biasbreaker.cli.simulate`, built here the same way): a DoT
debate (:mod:`biasbreaker.dot`, **simulated data**) through the real control machine, the
no-op repair hook, the calibration window from 20 simulated control runs, and node trips off
(the seed's literal machine) unless a column says "node trips on". Each run's trace is written
and checked by :func:`biasbreaker.verify.verify_trace`, as ``biasbreaker verify`` would.

A *recovery transition* is RLB-v1's: a step whose calibration window is clean right after a
dirty one (``docs/control.md`` §7). A *dirty* step's window holds an observation beyond the
control mean + 3 std.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from biasbreaker.config.settings import Settings
from biasbreaker.dot import PRESETS
from biasbreaker.dot_loop import CONTROL_FIRST_SEED, run_dot_loop, simulated_control_statistics
from biasbreaker.machine import MachineConfig
from biasbreaker.trace import StepRecord, TraceWriter
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.quoted import block, study_main

HERE = Path(__file__).resolve().parent
REPORT = HERE / "simulated_runs.md"
DOC = HERE.parent / "control.md"
CONTROL_RUNS = 20
"""Control runs of the window's statistics (``biasbreaker simulate``'s ``CONTROL_RUNS``)."""
STEPS = 200
TABLE_SEED = 1
SEEDS = tuple(range(10))
PRESET_ORDER = ("recovery", "persistent", "oscillate-near-threshold", "spike", "drift", "control")


@dataclass(frozen=True)
class Run:
    """One simulated run, as its trace and ``biasbreaker verify`` tell it.

    Args:
        first_trip: Simulated step of the first entry into INTERVENTION, or ``None``.
        escalated_at: Simulated step of the escalation, or ``None``.
        final_state: The machine's state after the last step (``"escalated"``, ...).
        rlb_holds: Whether RLB-v1 holds on the trace.
        transitions: Trace steps of its recovery transitions.
        first_dirty: Trace step of the first dirty window, or ``None``.
    """

    first_trip: int | None
    escalated_at: int | None
    final_state: str
    rlb_holds: bool
    transitions: tuple[int, ...]
    first_dirty: int | None


@functools.cache
def machine_config(preset: str, *, node_trip: bool) -> MachineConfig:
    """The machine ``biasbreaker simulate PRESET`` runs with the defaults, node trips as given.

    Raises:
        SystemExit: A ``BIASBREAKER_*`` variable is set: the figures are for the defaults.
        ThresholdError: If the simulated control runs never vary (they do).
    """
    overridden = sorted(k for k in os.environ if k.upper().startswith("BIASBREAKER_"))
    if overridden:
        raise SystemExit(
            f"{', '.join(overridden)} set: the figures are for the defaults; unset them"
        )
    settings = Settings()
    debate = PRESETS[preset].with_propagation(settings.propagation)
    ewma = debate.network_ewma()
    return replace(
        MachineConfig.from_settings(settings),
        node_trip=node_trip,
        ewma_smoothing=(ewma.fast.smoothing, ewma.slow.smoothing),
        control=simulated_control_statistics(debate, runs=CONTROL_RUNS),
    )


def simulate(preset: str, seed: int, *, node_trip: bool, folder: Path) -> Run:
    """Run ``preset`` at ``seed``, write its trace into ``folder`` and verify it."""
    config = machine_config(preset, node_trip=node_trip)
    debate = PRESETS[preset].with_propagation(Settings().propagation)
    header = config.trace_header(
        {
            "simulated": True,
            "source": "biasbreaker.dot",
            "preset": preset,
            "seed": seed,
            "steps": STEPS,
            "hook": "noop: no mitigation strategy installed, tripped runs escalate",
            "window": f"simulated: {CONTROL_RUNS} runs of the control preset, seeds "
            f"{CONTROL_FIRST_SEED}-{CONTROL_FIRST_SEED + CONTROL_RUNS - 1}, {STEPS} steps each",
        }
    )
    records: list[StepRecord] = []
    path = folder / f"{preset}-{seed}-{'node' if node_trip else 'literal'}.jsonl"
    with TraceWriter(path, header, signer=None) as writer:

        def record(r: StepRecord) -> None:
            records.append(r)
            writer(r)

        _, summary = run_dot_loop(
            debate, seed=seed, steps=STEPS, machine_config=config, recorder=record
        )
        writer.seal()
    dirty = [r.window is not None and r.window.dirty for r in records]
    transitions = tuple(
        r.step
        for r, d, before in zip(records[1:], dirty[1:], dirty[:-1], strict=True)
        if before and not d
    )
    return Run(
        first_trip=summary.first_trip,
        escalated_at=summary.escalated_at,
        final_state=summary.final_state.value,
        rlb_holds=verify_trace(path, workers=1).rlb.holds,
        transitions=transitions,
        first_dirty=next((r.step for r, d in zip(records, dirty, strict=True) if d), None),
    )


def spread(values: Sequence[int]) -> str:
    """``"45–51"``, or ``"56"`` when every value is the same (``values`` not empty)."""
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}–{high}"


def by_step(per_seed: Sequence[tuple[int, Sequence[int]]]) -> str:
    """Each step with the seeds it occurs on: ``"150 (seeds 0, 1), 35 (seed 5)"``."""
    seeds_at: dict[int, list[int]] = {}
    for seed, steps in per_seed:
        for step in steps:
            seeds_at.setdefault(step, []).append(seed)
    if not seeds_at:
        return "none"
    parts = []
    for step in sorted(seeds_at):
        seeds = seeds_at[step]
        parts.append(f"{step} (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})")
    return ", ".join(parts)


def trips(runs: Sequence[Run]) -> str:
    """First trips over seeds: ``"45–51"``, ``"never"``, or ``"142–167 on 9 of 10"``."""
    tripped = [r.first_trip for r in runs if r.first_trip is not None]
    if not tripped:
        return "never"
    text = spread(tripped)
    return text if len(tripped) == len(runs) else f"{text} on {len(tripped)} of {len(runs)}"


def seed_table(folder: Path) -> str:
    """The passage ``simulate: seed 1``: one row per preset."""
    rows = ["| preset | first trip | machine | RLB-v1 |", "|---|---|---|---|"]
    for preset in PRESET_ORDER:
        run = simulate(preset, TABLE_SEED, node_trip=False, folder=folder)
        trip = "—" if run.first_trip is None else f"step {run.first_trip}"
        machine = (
            f"escalated at {run.escalated_at}"
            if run.escalated_at is not None
            else run.final_state.upper()
        )
        if not run.rlb_holds:
            rlb = "**violated**"
        elif run.transitions:
            n = len(run.transitions)
            steps = ", ".join(map(str, run.transitions))
            rlb = f"holds, {n} recovery transition{'s' if n > 1 else ''} (step {steps})"
        else:
            rlb = "holds vacuously" + (
                " (the window never goes dirty)" if run.first_dirty is None else ""
            )
        rows.append(f"| `{preset}` | {trip} | {machine} | {rlb} |")
    return "\n".join(rows)


def seeds_table(folder: Path) -> str:
    """The passage ``simulate: seeds 0-9``: one row per preset, over :data:`SEEDS`."""
    rows = [
        "| preset | first trip, node trips off | first trip, node trips on | RLB-v1 holds "
        "| recovery transitions (trace step) | first dirty window (trace step) |",
        "|---|---|---|---|---|---|",
    ]
    for preset in PRESET_ORDER:
        literal = [simulate(preset, s, node_trip=False, folder=folder) for s in SEEDS]
        node = [simulate(preset, s, node_trip=True, folder=folder) for s in SEEDS]
        holds = sum(r.rlb_holds for r in literal)
        transitions = by_step([(s, r.transitions) for s, r in zip(SEEDS, literal, strict=True)])
        dirty = by_step(
            [
                (s, () if r.first_dirty is None else (r.first_dirty,))
                for s, r in zip(SEEDS, literal, strict=True)
            ]
        )
        rows.append(
            f"| `{preset}` | {trips(literal)} | {trips(node)} | {holds} of {len(SEEDS)} "
            f"| {transitions} | {dirty} |"
        )
    return "\n".join(rows)


def report() -> str:
    """``docs/studies/simulated_runs.md``: both passages, each with what it measured."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        one = seed_table(folder)
        many = seeds_table(folder)
    seeds = f"{SEEDS[0]}-{SEEDS[-1]}"
    return "\n".join(
        [
            "# `biasbreaker simulate` on every DoT preset",
            "",
            "Generated by `python docs/studies/simulated_runs.py` (simulated data; do not edit).",
            "docs/control.md §8 quotes these passages between the same markers; `--check`",
            "(`tests/test_simulated_runs.py`) fails when this file or a quoted passage differs",
            "from what the script measures. The `[breaker]` defaults, the no-op repair hook, the",
            f"window from {CONTROL_RUNS} simulated control runs, {STEPS} steps; node trips off",
            "(the machine `biasbreaker simulate` runs) unless a column says otherwise.",
            "",
            f"## Seed {TABLE_SEED}",
            "",
            block(f"simulate: seed {TABLE_SEED}", one),
            "",
            f"## Seeds {seeds}",
            "",
            block(f"simulate: seeds {seeds}", many),
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Write the report, or (``--check``) exit 1 naming what differs from it."""
    return study_main(__doc__.splitlines()[0], report, REPORT, DOC, argv)


if __name__ == "__main__":
    sys.exit(main())
