"""``biasbreaker calibrate``: thresholds and window statistics from recorded control runs."""

from __future__ import annotations

import json
import warnings
from datetime import date
from pathlib import Path
from typing import Annotated

import typer

from biasbreaker.calibration import (
    CalibrationWarning,
    calibrate,
    read_control_runs,
    write_calibration_toml,
)
from biasbreaker.cli._common import (
    ConfigOption,
    JsonOption,
    StrictOption,
    fail,
    load_kernel,
    stdout,
    warn,
)
from biasbreaker.cli._stores import Location, as_folders
from biasbreaker.errors import BiasbreakerError, InputError
from biasbreaker.trace import TraceTruncatedWarning


def _parse_date(value: str | None) -> date:
    if value is None:
        return date.today()
    try:
        return date.fromisoformat(value)
    except ValueError:
        fail(f"--date {value!r} is not a date; use YYYY-MM-DD")


def calibrate_command(
    trajectories: Annotated[
        list[Location],
        typer.Argument(
            parser=Location,
            help="JSON Lines control runs, or folders of them (every *.jsonl below, sorted, as "
            "verify reads a folder), or trace store URLs (sqlite:///PATH.db, "
            "postgresql://host/db: every thread, as verify reads one): run traces (e.g. the "
            "traces/ folder or control-runs.jsonl "
            "of `biasbreaker run --control`), DoT records (simulate --trajectory), or step "
            "records with fast, slow, a run (or seed) key and optionally own (the step's own "
            "local score).",
            show_default=False,
        ),
    ],
    target_false_halt_rate: Annotated[
        float | None,
        typer.Option(
            "--target-false-halt-rate",
            help="Share of control runs allowed to trip the breaker, in (0, 1); default "
            "[calibration] target_false_halt_rate.",
        ),
    ] = None,
    node_trip: Annotated[
        bool | None,
        typer.Option(
            "--node-trip/--no-node-trip",
            help="Calibrate for a machine that also trips on a step's own score (or for fast "
            "B_net only); default [breaker] node_trip.",
            show_default=False,
        ),
    ] = None,
    write_toml: Annotated[
        Path | None,
        typer.Option(
            "--write-toml",
            dir_okay=False,
            help="Write the thresholds and window statistics into this TOML file (under "
            "[tool.biasbreaker] in a pyproject.toml), marked as calibrated with the date and "
            "the input's sha256; everything else in it (comments, formatting, other keys) is "
            "kept byte for byte. The result is checked to load and read back first, and the "
            "file is replaced atomically.",
        ),
    ] = None,
    on_date: Annotated[
        str | None,
        typer.Option("--date", help="Calibration date to record, YYYY-MM-DD; default today."),
    ] = None,
    config: ConfigOption = None,
    strict: StrictOption = False,
    as_json: JsonOption = False,
) -> None:
    """Choose tau_enter, tau_exit and tau_warn from control runs at a per-run false-halt rate.

    The thresholds are for the trigger [breaker] node_trip selects (written with them), kept to
    4 significant digits (tau_enter and tau_warn rounded up). Calibration assumes the control
    runs are fair: review them first.
    """
    kernel = load_kernel(config, strict)
    calibrated_on = _parse_date(on_date)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TraceTruncatedWarning)
        warnings.simplefilter("always", CalibrationWarning)
        try:
            try:
                with as_folders(trajectories, config=config, strict=strict) as paths:
                    runs = read_control_runs(paths)
            except InputError as exc:
                folders = [str(p) for p in map(Path, trajectories) if p.is_dir()]
                if not folders:
                    raise
                raise InputError(
                    f"{exc} (a folder argument, here {', '.join(folders)}, takes every *.jsonl "
                    "file below it and each must hold control runs: give the folder that holds "
                    "only the run traces, e.g. biasbreaker-run/traces, or the control-runs.jsonl)"
                ) from exc
            report = calibrate(
                runs.runs,
                target_false_halt_rate=target_false_halt_rate,
                kernel=kernel,
                node_trip=node_trip,
            )
            if write_toml is not None:
                write_calibration_toml(
                    write_toml, report, calibrated_on=calibrated_on, source_sha256=runs.sha256
                )
        except BiasbreakerError as exc:
            for item in caught:
                warn(str(item.message))
            fail(str(exc))
    for item in caught:
        warn(str(item.message))
    if runs.skipped:
        warn(f"skipped {runs.skipped} step(s) without a score yet (fast or slow null)")
    if as_json:
        typer.echo(
            json.dumps(
                {
                    **report.to_json(),
                    "source_sha256": runs.sha256,
                    "written_to": None if write_toml is None else str(write_toml),
                },
                indent=2,
            )
        )
        return
    tau_enter, tau_exit, tau_warn = report.thresholds
    stats = report.statistics
    out = stdout()
    given = ", ".join(map(str, trajectories))
    files = f"{len(runs.files)} files in " if len(runs.files) > 1 else ""
    out.print(
        f"calibrated from {report.n_runs} control runs ({stats.n_steps} steps) in {files}"
        f"{given} (sha256 {runs.sha256}) with calibrator {report.calibrator!r}",
        markup=False,
    )
    steps = stats.n_steps
    if report.node_trip:
        out.print(
            "trigger: fast B_net or the step's own score (node trips on); "
            f"{report.own_scores} of {steps} steps carry an own score"
        )
    else:
        out.print("trigger: fast B_net only (node trips off)")
    out.print(f"tau_enter = {tau_enter!r}")
    out.print(f"tau_exit  = {tau_exit!r}")
    out.print(f"tau_warn  = {tau_warn!r}")
    if report.zero_floor:
        out.print(
            f"zero floor used for {' and '.join(report.zero_floor)}: every control run scores "
            "exactly 0 on that scale, so the thresholds come from [calibration] zero_floor "
            "(see the warning above), not from the runs' spread",
            markup=False,
        )
    out.print(
        f"window: control fast B_net mean {stats.mean:.6g}, std {stats.std:.6g} "
        f"(3σ band {stats.bound(3):.6g}, 5σ band {stats.bound(5):.6g})"
    )
    out.print(
        f"per-run false-halt rate: target {report.target_false_halt_rate}, on these runs "
        f"{report.empirical_false_halt_rate:.4g}"
    )
    out.print(
        "These thresholds are a starting point for this deployment, valid for runs "
        "exchangeable with the control runs; recalibrate when the graph, scorers or "
        "model change."
    )
    if write_toml is not None:
        table = " [tool.biasbreaker]" if write_toml.name == "pyproject.toml" else ""
        out.print(
            f"written to {write_toml}{table} (calibrated_on = {calibrated_on.isoformat()}, "
            f"node_trip = {str(report.node_trip).lower()})",
            markup=False,
        )


def register(app: typer.Typer) -> None:
    """Add the ``calibrate`` command."""
    app.command("calibrate")(calibrate_command)
