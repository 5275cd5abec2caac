"""The demo's figures say what they show: trips by trigger, only the bands that occur, every line named."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from biasbreaker.breaker import freeze
from biasbreaker.calibration import ControlStatistics
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.trace import TraceWriter, read_trace
from biasbreaker.types import InterventionContext, InterventionResult, Thresholds
from biasbreaker_plugins.demo.figures import (
    TRIP_LABELS,
    bnet_figure,
    lean_figure,
    selection_figure,
    trip_trigger,
)
from biasbreaker_plugins.demo.summary import Lean, Selection

TH = Thresholds(0.5, 0.35, 0.25, 0.05)


def _hook(context: InterventionContext) -> InterventionResult:
    return InterventionResult(freeze({"fixed": context.step}), True, "madera", [], 0.1)


def _trace(path: Path, steps: list[tuple[float, float]]) -> Path:
    """A run of (fast B_net, the step's own score) pairs through a node-tripping machine."""
    config = MachineConfig(
        TH,
        cooldown_steps=1,
        max_retries=2,
        control=ControlStatistics(0.1, 0.05, 500),
        max_history=3,
        seed=4,
        node_trip=True,
    )
    with TraceWriter(path, config.trace_header({"preset": "unit"})) as writer:
        machine = ControlMachine(config, hook=_hook, recorder=writer)
        for step, (fast, own) in enumerate(steps):
            machine.step(
                fast,
                fast / 10,
                node="n0",
                local_scores={"n0": own},
                payload={"out": step},
                weights={"n0": 1.0},
            )
    return path


def test_each_trip_is_marked_by_the_trigger_the_machine_named(tmp_path: Path) -> None:
    # a node trip (own 0.7, fast 0.1), recovery, then a network trip (fast 0.6)
    quiet = [(0.0, 0.0)] * 4
    path = _trace(tmp_path / "a.jsonl", [(0.1, 0.7), *quiet, (0.6, 0.2), *quiet])
    trace = read_trace(path)
    reasons = [r.reason for r in trace.records if r.transition == "trip"]
    assert len(reasons) == 2 and reasons[0].startswith("trip (node)")
    assert reasons[1].startswith("trip: fast")

    drawn = bnet_figure([trace], tmp_path / "b.png", title="t", total=7)

    assert drawn.trips == {"network": 1, "node": 1}
    assert f"{TRIP_LABELS['node']} (1 in the runs shown)" in drawn.legend
    assert f"{TRIP_LABELS['network']} (1 in the runs shown)" in drawn.legend
    assert (tmp_path / "b.png").stat().st_size > 5_000


def test_only_the_states_that_occur_get_a_band_and_every_threshold_is_named(
    tmp_path: Path,
) -> None:
    calm = read_trace(_trace(tmp_path / "calm.jsonl", [(0.0, 0.0)] * 5))
    drawn = bnet_figure([calm], tmp_path / "calm.png", title="t")
    bands = [label for label in drawn.legend if label.endswith("(band)")]
    assert bands == ["normal (band)"]
    assert drawn.trips == {"network": 0, "node": 0}
    assert not any("trip" in label for label in drawn.legend)
    for name, value in (("tau_enter", 0.5), ("tau_exit", 0.35), ("tau_warn", 0.25)):
        assert f"{name} {value:.4g}" in drawn.legend

    tripped = read_trace(_trace(tmp_path / "trip.jsonl", [(0.6, 0.0)] + [(0.0, 0.0)] * 4))
    states = {r.state.value for r in tripped.records}
    drawn = bnet_figure([calm, tripped], tmp_path / "both.png", title="t")
    bands = {label.removesuffix(" (band)") for label in drawn.legend if label.endswith("(band)")}
    assert bands == states | {"normal"}
    assert "escalated (band)" not in drawn.legend


def test_the_trigger_follows_the_machine_rule_at_the_threshold() -> None:
    assert trip_trigger(0.5, 0.5) == "network"
    assert trip_trigger(0.4999, 0.5) == "node"


def _selection(rates: dict[str, float]) -> Selection:
    best = max(rates.values())
    return Selection(
        tuple(rates),
        10,
        0,
        0,
        {g: round(r * 10) for g, r in rates.items()},
        rates,
        {g: r / best for g, r in rates.items()},
    )


def test_the_selection_legend_names_every_bar_and_every_four_fifths_line(tmp_path: Path) -> None:
    phases = [
        ("unguarded", _selection({"a": 0.5, "b": 0.2})),
        ("guarded", _selection({"a": 0.4, "b": 0.3})),
    ]
    drawn = selection_figure(phases, {"a": "A", "b": "B"}, tmp_path / "s.png", title="t")
    assert drawn.legend == (
        "unguarded: rate (n = 10, lowest impact ratio 0.40)",
        "guarded: rate (n = 10, lowest impact ratio 0.75)",
        "unguarded: 4/5 of its best rate (0.400)",
        "guarded: 4/5 of its best rate (0.320)",
    )


def test_four_fifths_lines_that_coincide_are_one_line_naming_every_phase(tmp_path: Path) -> None:
    phases = [
        ("group-blind", _selection({"a": 0.5, "b": 0.2})),
        ("unguarded", _selection({"a": 0.5, "b": 0.3})),
        ("guarded", _selection({"a": 0.4, "b": 0.3})),
    ]
    drawn = selection_figure(phases, {"a": "A", "b": "B"}, tmp_path / "s.png", title="t")
    assert drawn.legend[3:] == (
        "group-blind, unguarded: 4/5 of each one's best rate (0.400)",
        "guarded: 4/5 of its best rate (0.320)",
    )


def test_the_lean_figure_names_its_interval_and_the_no_lean_line(tmp_path: Path) -> None:
    drawn = lean_figure(
        [
            ("unguarded", Lean(24, 1.03, 0.02)),
            ("guarded", Lean(24, 1.0, 0.02)),
            ("x", Lean(0, 0, 0)),
        ],
        tmp_path / "l.png",
        title="t",
    )
    assert drawn.legend == (
        "mean weight of the shortlisted groups, 95% interval",
        "1 = no lean (group-blind expectation)",
    )
    assert (tmp_path / "l.png").stat().st_size > 5_000
