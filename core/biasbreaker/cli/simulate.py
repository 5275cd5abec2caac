"""``biasbreaker simulate``: write a simulated DoT debate trajectory as JSON Lines.

The trajectory comes from :func:`biasbreaker.dot.simulate_dot` (**simulated data**, labelled
``"simulated": true`` in every record) with the ``[propagation]`` settings of the effective
configuration applied (Katz attenuation or alpha, EWMA half-lives or smoothing factors).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from biasbreaker.cli._common import ConfigOption, fail, stderr
from biasbreaker.config import load_settings
from biasbreaker.dot import PRESETS, DotStep, iter_dot, write_jsonl
from biasbreaker.errors import BiasbreakerError


def _summary(preset: str, seed: int, steps: list[DotStep], where: str) -> str:
    fast = [(s.fast, s.step) for s in steps if s.fast is not None]
    slow = [s.slow for s in steps if s.slow is not None]
    text = f"simulated DoT trajectory {preset!r} (seed {seed}, {len(steps)} steps) -> {where}"
    if fast:
        top, at = max(fast)
        text += f"; fast max {top:.3f} at step {at}, slow max {max(slow):.3f}"
    return text


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
    config: ConfigOption = None,
) -> None:
    """Simulate a multi-agent debate (synthetic data) and write its B_net trajectory."""
    if preset not in PRESETS:
        fail(f"unknown preset {preset!r}; presets: {', '.join(PRESETS)}")
    try:
        settings = load_settings(config).settings
        cfg = PRESETS[preset].with_propagation(settings.propagation)
        run_seed = settings.seed if seed is None else seed
        records = list(iter_dot(cfg, seed=run_seed, steps=steps))
        if out is None or str(out) == "-":
            write_jsonl(records, sys.stdout)
            where = "stdout"
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            write_jsonl(records, out)
            where = str(out)
    except BiasbreakerError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    stderr().print(_summary(preset, run_seed, records, where))


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command."""
    app.command("simulate")(simulate)
