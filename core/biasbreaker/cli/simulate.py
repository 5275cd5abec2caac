"""``biasbreaker simulate``: a simulated debate through the whole control loop.

By default the command runs a simulated DoT debate (:mod:`biasbreaker.dot`, **simulated
data**) through the control machine (:mod:`biasbreaker.dot_loop`) and writes the run trace
(:mod:`biasbreaker.trace`), ready for ``biasbreaker verify``. ``--trajectory`` writes the raw
simulated B_net trajectory instead (one DoT record per step, ``"simulated": true``).

The ``[propagation]``, ``[breaker]`` and ``[calibration]`` settings of the effective
configuration apply, except ``[breaker] node_trip``: the simulated debate runs the seed's
literal machine (only fast B_net trips), the machine its presets are shaped for; the trace
header records ``node_trip: false``. The calibration window uses ``[calibration.control]``
when configured; otherwise its statistics come from 20 simulated control runs (the ``control``
preset, seeds 10000-10019, same propagation settings), and the trace header says which.

The trace is sealed at the end of the run (signed with the key file given by
``--signing-key``, or named by ``BIASBREAKER_SIGNING_KEY_FILE``, if any).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from biasbreaker.cli._common import ConfigOption, fail, stderr
from biasbreaker.config import load_settings
from biasbreaker.dot import PRESETS, DotStep, iter_dot, write_jsonl
from biasbreaker.dot_loop import (
    CONTROL_FIRST_SEED,
    LoopSummary,
    run_dot_loop,
    simulated_control_statistics,
)
from biasbreaker.errors import BiasbreakerError
from biasbreaker.machine import MachineConfig
from biasbreaker.trace import FROM_ENVIRONMENT, Signer, TraceWriter
from biasbreaker.trace.writer import SignerChoice

CONTROL_RUNS = 20


def _trajectory_summary(preset: str, seed: int, steps: list[DotStep], where: str) -> str:
    fast = [(s.fast, s.step) for s in steps if s.fast is not None]
    slow = [s.slow for s in steps if s.slow is not None]
    text = f"simulated DoT trajectory {preset!r} (seed {seed}, {len(steps)} steps) -> {where}"
    if fast:
        top, at = max(fast)
        text += f"; fast max {top:.3f} at step {at}, slow max {max(slow):.3f}"
    return text


def _loop_summary(preset: str, seed: int, summary: LoopSummary, where: str) -> str:
    text = (
        f"simulated run {preset!r} (seed {seed}, {summary.steps} steps, {summary.guarded} "
        f"guarded) -> {where}: {summary.interventions} intervention(s)"
    )
    if summary.first_trip is not None:
        text += f", first trip at step {summary.first_trip}"
    text += f", {summary.recoveries} recovery(ies)"
    if summary.escalated_at is not None:
        text += f", escalated at step {summary.escalated_at}"
    return text + f"; final state {summary.final_state.value}"


def simulate(
    preset: Annotated[
        str,
        typer.Argument(help=f"Preset: {', '.join(PRESETS)}.", show_default=False),
    ],
    seed: Annotated[
        int | None,
        typer.Option("--seed", help="Seed of the run; default: `seed` of the configuration."),
    ] = None,
    steps: Annotated[
        int,
        typer.Option("--steps", min=0, help="Guarded steps to simulate (presets: shaped for 200)."),
    ] = 200,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            dir_okay=False,
            help="JSON Lines file to write (replaced if it exists); default: standard output.",
        ),
    ] = None,
    trajectory: Annotated[
        bool,
        typer.Option(
            "--trajectory",
            help="Write the raw simulated B_net trajectory instead of the run trace.",
        ),
    ] = False,
    config: ConfigOption = None,
    signing_key: Annotated[
        Path | None,
        typer.Option(
            "--signing-key",
            dir_okay=False,
            help="Sign the trace's seal with this Ed25519 key file (biasbreaker keygen); "
            "default: the file BIASBREAKER_SIGNING_KEY_FILE names, if set.",
        ),
    ] = None,
) -> None:
    """Simulate a multi-agent debate (synthetic data) through the control loop; write its trace."""
    if preset not in PRESETS:
        fail(f"unknown preset {preset!r}; presets: {', '.join(PRESETS)}")
    to_stdout = out is None or str(out) == "-"
    where = "stdout" if to_stdout else str(out)
    try:
        settings = load_settings(config).settings
        debate = PRESETS[preset].with_propagation(settings.propagation)
        run_seed = settings.seed if seed is None else seed
        if not to_stdout:
            assert out is not None
            out.parent.mkdir(parents=True, exist_ok=True)
        if trajectory:
            records = list(iter_dot(debate, seed=run_seed, steps=steps))
            write_jsonl(records, sys.stdout if to_stdout else out)  # type: ignore[arg-type]
            stderr().print(_trajectory_summary(preset, run_seed, records, where))
            return
        # The DoT presets are shaped for the literal machine (fast B_net trips): a speaking
        # agent's own score would trip every biased preset, and `drift`, early.
        ewma = debate.network_ewma()
        machine_config = replace(
            MachineConfig.from_settings(settings),
            node_trip=False,
            ewma_smoothing=(ewma.fast.smoothing, ewma.slow.smoothing),
        )
        window = "configured ([calibration.control])"
        if machine_config.control is None:
            machine_config = replace(
                machine_config,
                control=simulated_control_statistics(debate, runs=CONTROL_RUNS),
            )
            window = (
                f"simulated: {CONTROL_RUNS} runs of the control preset, seeds "
                f"{CONTROL_FIRST_SEED}-{CONTROL_FIRST_SEED + CONTROL_RUNS - 1}, 200 steps each"
            )
        header = machine_config.trace_header(
            {
                "simulated": True,
                "source": "biasbreaker.dot",
                "preset": preset,
                "seed": run_seed,
                "steps": steps,
                "hook": "noop: no mitigation strategy installed, tripped runs escalate",
                "window": window,
            }
        )
        target = sys.stdout if to_stdout else out
        assert target is not None
        signer: SignerChoice = (
            FROM_ENVIRONMENT if signing_key is None else Signer.from_file(signing_key)
        )
        with TraceWriter(target, header, fsync=settings.trace.fsync, signer=signer) as writer:
            _, summary = run_dot_loop(
                debate, seed=run_seed, steps=steps, machine_config=machine_config, recorder=writer
            )
            writer.seal()
    except BiasbreakerError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    stderr().print(_loop_summary(preset, run_seed, summary, where))


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command."""
    app.command("simulate")(simulate)
