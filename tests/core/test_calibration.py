from __future__ import annotations

import datetime
import hashlib
import itertools
import json
import math
import random
import statistics
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.calibration import (
    CalibrationWarning,
    CalibrationWindow,
    ControlStatistics,
    ControlStep,
    calibrate,
    calibrate_thresholds,
    check_calibration,
    false_halt_rate,
    normalise_control_runs,
    outlier_level,
    read_control_trajectories,
    round_to_digits,
    summarise_control_runs,
    write_calibration_toml,
)
from biasbreaker.config import load_settings
from biasbreaker.dot import iter_dot
from biasbreaker.errors import InputError, PluginError, ScoreError, ThresholdError
from biasbreaker.hookspecs import hookimpl
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.trace import TraceTruncatedWarning, TraceWriter
from biasbreaker.types import Thresholds

STATS = ControlStatistics(mean=0.1, std=0.05, n_steps=100)


@dataclass
class Step:
    fast: float
    slow: float


def test_summary_accepts_pairs_mappings_and_objects_and_matches_statistics() -> None:
    runs = [
        [(0.1, 0.05), (0.3, 0.1), (0.2, 0.12)],
        [{"fast": 0.05, "slow": 0.2, "extra": "ignored"}, {"fast": 0.15, "slow": 0.1}],
        [Step(0.4, 0.3)],
    ]
    sample = summarise_control_runs(runs)
    assert sample.fast_maxima == (0.3, 0.15, 0.4)
    assert sample.slow_maxima == (0.12, 0.2, 0.3)
    values = [0.1, 0.3, 0.2, 0.05, 0.15, 0.4]
    assert sample.statistics.mean == pytest.approx(statistics.fmean(values), abs=1e-15)
    assert sample.statistics.std == pytest.approx(statistics.stdev(values), abs=1e-15)
    assert sample.statistics.n_steps == 6
    assert sample.n_runs == 3


@given(
    st.lists(
        st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=8),
        min_size=2,
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_summary_does_not_depend_on_run_order(
    runs: list[list[tuple[float, float]]], rng: random.Random
) -> None:
    try:
        first = summarise_control_runs(runs)
    except ThresholdError:
        return  # no spread: covered below
    shuffled = list(runs)
    rng.shuffle(shuffled)
    second = summarise_control_runs(shuffled)
    assert sorted(first.fast_maxima) == sorted(second.fast_maxima)
    assert first.statistics.mean == second.statistics.mean
    assert first.statistics.std == pytest.approx(second.statistics.std, rel=1e-12)


@pytest.mark.parametrize(
    ("runs", "error", "match"),
    [
        ([], InputError, "no control runs"),
        ([[]], InputError, "control run 0 has no steps"),
        ([[(0.1, 0.1)], [(0.2, math.nan)]], ScoreError, r"control run 1 step 0\.slow=nan"),
        ([[(0.1, 0.1), (-0.2, 0.0)]], ScoreError, r"control run 0 step 1\.fast=-0\.2"),
        ([[(0.1, 0.1, 0.3, 0.2)]], InputError, "a step is a"),
        ([[(1.5, 0.1)]], ScoreError, r"control run 0 step 0\.fast=1\.5 is above 1"),
        ([[(0.1, 0.1, 2.0)]], ScoreError, r"control run 0 step 0\.own=2\.0 is above 1"),
        ([[(0.1, 10**400)]], ScoreError, r"step 0\.slow=<an integer beyond the float range>"),
        ([[{"fast": 0.1, "slow": 0.1, "own": "x"}]], ScoreError, r"own='x' is not a score"),
        ([[{"fast": 0.1}]], InputError, "needs the keys 'fast' and 'slow'"),
        ([[(0.2, 0.1), (0.2, 0.3)]], ThresholdError, "control std is 0"),
    ],
)
def test_summary_errors_name_run_and_step(
    runs: list[list[object]], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        summarise_control_runs(runs)


def test_false_halt_rate_is_per_run_and_inclusive() -> None:
    assert false_halt_rate([0.1, 0.5, 0.5, 0.9], 0.5) == 0.75
    assert false_halt_rate([0.1, 0.2], 0.5) == 0.0
    assert false_halt_rate([], 0.5) == 0.0


# -- kernel checks around a calibrator ------------------------------------------------------------


class FixedPlugin:
    """A throwaway calibrator plugin returning a fixed result (or raising)."""

    def __init__(self, result: object, name: str = "fixed") -> None:
        self.result = result
        self.name = name
        self.seen: Any = None

    @hookimpl
    def calibrator(self, register: Any) -> None:
        register(self.name, lambda options, context: self)

    def calibrate(self, trajectories: Any, *, target_false_halt_rate: float) -> object:
        self.seen = trajectories
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


# 100 one-step runs with fast maxima 0.00, 0.01, ..., 0.99
RUNS = [[(i / 100, i / 200)] for i in range(100)]


@pytest.fixture
def fixed(register_plugin: Any, make_kernel: Any) -> Any:
    """A kernel whose calibrator returns ``result``; node trips off unless asked (RUNS are pairs)."""

    made = itertools.count()

    def make(result: object, node_trip: bool = False, **calibration: object) -> Any:
        index = next(made)
        plugin = FixedPlugin(result, "fixed" if index == 0 else f"fixed-{index}")
        register_plugin(plugin, name=f"fixed-calibrator-{index}")
        kernel = make_kernel(
            {
                "calibration": {"calibrator": plugin.name, **calibration},
                "breaker": {"node_trip": node_trip},
            }
        )
        kernel.fixed_plugin = plugin
        return kernel

    return make


# 100 two-step runs: fast maxima 0.00 .. 0.99 as in RUNS, own scores 0.5 higher on 10 of them
NODE_RUNS = [
    [(i / 200, 0.0, None), (i / 100, i / 200, min(1.0, i / 100 + (0.5 if i % 10 == 0 else 0)))]
    for i in range(100)
]


def test_with_node_trips_the_calibrator_gets_the_trip_statistic(fixed: Any) -> None:
    kernel = fixed((0.995, 0.7, 0.4), node_trip=True)
    report = calibrate(NODE_RUNS, target_false_halt_rate=0.2, kernel=kernel)
    assert kernel.fixed_plugin.seen[10] == [(0.05, 0.0), (0.6, 0.05)]  # max(fast, own), slow
    assert kernel.fixed_plugin.seen[11] == [(0.055, 0.0), (0.11, 0.055)]
    assert (report.node_trip, report.own_scores) == (True, 100)
    # runs 50, 60, 70, 80 reach 0.995 only through their own score (90 reaches 1.0 too)
    assert report.empirical_false_halt_rate == 5 / 100
    exact = summarise_control_runs(NODE_RUNS).statistics  # fast only, kept to 4 digits
    assert report.statistics.mean == round_to_digits(exact.mean, up=False)
    assert report.statistics.std == round_to_digits(exact.std, up=False)
    assert report.to_json()["node_trip"] is True
    # the same runs without node trips: the calibrator sees fast B_net
    literal = fixed((0.995, 0.7, 0.4), node_trip=True)
    off = calibrate(NODE_RUNS, target_false_halt_rate=0.2, kernel=literal, node_trip=False)
    assert literal.fixed_plugin.seen[10] == [(0.05, 0.0), (0.1, 0.05)]
    assert (off.node_trip, off.empirical_false_halt_rate) == (False, 0.0)


def test_the_kernel_check_uses_the_trip_statistic(fixed: Any) -> None:
    # tau_enter 0.9 halts 10 runs by fast B_net; node trips add runs 40..80 (own >= 0.9)
    assert calibrate(NODE_RUNS, target_false_halt_rate=0.1, kernel=fixed((0.9, 0.6, 0.4)))
    with pytest.raises(ThresholdError, match=r"halts 0\.1500 of the control runs"):
        calibrate(NODE_RUNS, target_false_halt_rate=0.1, kernel=fixed((0.9, 0.6, 0.4), True))


def test_node_trips_without_own_scores_warn_that_only_fast_is_bounded(fixed: Any) -> None:
    with pytest.warns(CalibrationWarning, match="no control step carries its own score"):
        report = calibrate(RUNS, target_false_halt_rate=0.5, kernel=fixed((0.995, 0.7, 0.4), True))
    assert (report.node_trip, report.own_scores) == (True, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calibrate(RUNS, target_false_halt_rate=0.5, kernel=fixed((0.995, 0.7, 0.4)))
    with pytest.raises(InputError, match="node_trip='yes' must be a bool"):
        calibrate(RUNS, kernel=fixed((0.995, 0.7, 0.4)), node_trip="yes")  # type: ignore[arg-type]


def test_calibrate_thresholds_warns_at_its_callers_line(fixed: Any) -> None:
    with pytest.warns(CalibrationWarning, match="no control step carries its own score") as got:
        calibrate_thresholds(
            RUNS, target_false_halt_rate=0.5, kernel=fixed((0.995, 0.7, 0.4), True)
        )
    assert [Path(w.filename).name for w in got] == [Path(__file__).name]


def test_control_steps_accept_own_scores_in_every_shape() -> None:
    @dataclass
    class Own:
        fast: float
        slow: float
        own: float | None

    @dataclass
    class Record:
        fast: float
        slow: float
        node: str | None
        scores: dict[str, float]

    runs = [
        [(0.1, 0.0, 0.7), {"fast": 0.2, "slow": 0.0, "own": 0.1}, Own(0.1, 0.0, None)],
        [{"fast": 0.1, "slow": 0.0, "node": "a", "scores": {"a": 0.9}}, Record(0.3, 0.1, "b", {})],
        [Record(0.2, 0.1, "a", {"a": 0.4, "b": 1.0}), Step(0.1, 0.1)],
    ]
    sample = summarise_control_runs(runs, node_trip=True)
    assert sample.trip_maxima == (0.7, 0.9, 0.4)
    assert sample.fast_maxima == (0.2, 0.3, 0.2)
    assert sample.own_scores == 4
    assert summarise_control_runs(runs).trip_maxima == sample.fast_maxima
    [step] = normalise_control_runs([[{"fast": 0.1, "slow": 0.0, "own": 0.3}]])[0]
    assert (step, step.trip(True), step.trip(False)) == (ControlStep(0.1, 0.0, 0.3), 0.3, 0.1)


def test_calibrate_reports_the_empirical_rate(fixed: Any) -> None:
    kernel = fixed((0.995, 0.7, 0.4))
    report = calibrate(RUNS, target_false_halt_rate=0.01, kernel=kernel)
    assert report.empirical_false_halt_rate == 0.0
    assert report.thresholds == (0.995, 0.7, 0.4)
    assert report.n_runs == 100 and report.calibrator == "fixed"
    assert report.to_json()["control"]["n_steps"] == 100
    assert calibrate_thresholds(RUNS, target_false_halt_rate=0.01, kernel=kernel) == (
        0.995,
        0.7,
        0.4,
    )


def test_the_default_target_comes_from_the_configuration(fixed: Any) -> None:
    kernel = fixed((0.95, 0.7, 0.4), target_false_halt_rate=0.06)
    assert calibrate(RUNS, kernel=kernel).target_false_halt_rate == 0.06


def test_a_calibrator_that_misses_the_target_fails_closed(fixed: Any) -> None:
    with pytest.raises(
        ThresholdError,
        match=r"halts 0\.1000 of the control runs, above the "
        r"target 0\.05",
    ):
        calibrate(RUNS, target_false_halt_rate=0.05, kernel=fixed((0.9, 0.6, 0.4)))


@pytest.mark.parametrize(
    ("result", "match"),
    [
        ((0.5, 0.6, 0.1), "invalid thresholds: tau_enter=0.5 must be greater"),
        ((0.5, 0.3), "expected \\(tau_enter, tau_exit, tau_warn\\)"),
        ((0.5, 0.3, -1.0), "invalid thresholds: tau_warn=-1.0"),
        ("nope", "returned 'nope'"),
        ((1.2, 0.8, 0.5), "tau_enter=1.2, above 1"),
    ],
)
def test_inconsistent_results_are_threshold_errors(fixed: Any, result: object, match: str) -> None:
    with pytest.raises(ThresholdError, match="calibrator 'fixed'.*" + match):
        calibrate(RUNS, target_false_halt_rate=0.5, kernel=fixed(result))


def test_a_raising_calibrator_is_a_plugin_error(fixed: Any) -> None:
    with pytest.raises(PluginError, match="calibrator 'fixed' raised ZeroDivisionError"):
        calibrate(RUNS, target_false_halt_rate=0.5, kernel=fixed(ZeroDivisionError("x")))


def test_a_calibrator_threshold_error_passes_unchanged(fixed: Any) -> None:
    with pytest.raises(ThresholdError, match="needs 7 more"):
        calibrate(RUNS, target_false_halt_rate=0.5, kernel=fixed(ThresholdError("needs 7 more")))


@pytest.mark.parametrize("target", [0.0, 1.0, -0.1, math.nan, True])
def test_the_target_must_be_a_rate(fixed: Any, target: float) -> None:
    with pytest.raises(ThresholdError, match="target_false_halt_rate=.* must be in \\(0, 1\\)"):
        calibrate(RUNS, target_false_halt_rate=target, kernel=fixed((0.995, 0.7, 0.4)))


def test_check_calibration_accepts_a_good_result() -> None:
    sample = summarise_control_runs(RUNS)
    assert check_calibration((0.995, 0.7, 0.4), sample, name="x", target_false_halt_rate=0.01) == (
        0.995,
        0.7,
        0.4,
    )


# -- files --------------------------------------------------------------------------------------


def write_lines(path: Path, lines: list[dict[str, Any]], end: str = "\n") -> Path:
    path.write_text("\n".join(json.dumps(line) for line in lines) + end)
    return path


def test_read_control_trajectories_groups_steps_by_run(tmp_path: Path) -> None:
    lines = [
        {"run": "a", "fast": 0.1, "slow": 0.05},
        {"run": "b", "fast": 0.2, "slow": 0.1, "own": 0.5},
        {"run": "a", "fast": 0.3, "slow": 0.06, "own": None},
        {"run": 7, "fast": None, "slow": None},  # not scored yet: skipped
        {"run": 7, "fast": 0.4, "slow": 0.2},
        {"run": "7", "fast": 0.0, "slow": 0.0},  # the string "7" is another run than 7
    ]
    path = write_lines(tmp_path / "control.jsonl", lines, "\n\n")
    runs = read_control_trajectories(path)
    assert runs.names == ('run="a"', 'run="b"', "run=7", 'run="7"')
    assert runs.runs == (
        ((0.1, 0.05, None), (0.3, 0.06, None)),
        ((0.2, 0.1, 0.5),),
        ((0.4, 0.2, None),),
        ((0.0, 0.0, None),),
    )
    assert runs.skipped == 1
    assert runs.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert not runs.truncated
    seeds = read_control_trajectories(
        write_lines(tmp_path / "seeds.jsonl", [{"seed": 3, "fast": 0.1, "slow": 0.1}])
    )
    assert seeds.names == ("seed=3",)


def test_records_keyed_by_run_and_by_seed_are_not_merged(tmp_path: Path) -> None:
    # run 3 and seed 3 used to be merged into one run "3"; a file names runs one way
    lines = [
        {"run": 3, "fast": 0.1, "slow": 0.1},
        {"run": 4, "fast": 0.1, "slow": 0.1},
        {"seed": 3, "fast": 0.2, "slow": 0.1},
    ]
    path = write_lines(tmp_path / "mixed.jsonl", lines)
    with pytest.raises(InputError) as info:
        read_control_trajectories(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3: this step record names its run by 'seed'")
    assert "but line 1 named its run by 'run'" in message
    assert "run 3 and seed 3 are not the same run" in message
    both = write_lines(tmp_path / "both.jsonl", [{"run": 1, "seed": 1, "fast": 0.1, "slow": 0}])
    with pytest.raises(InputError, match=r"both\.jsonl:1: a step record has both 'run' and 'seed'"):
        read_control_trajectories(both)


def test_unknown_keys_in_step_records_are_an_error_listing_the_allowed_ones(
    tmp_path: Path,
) -> None:
    path = write_lines(
        tmp_path / "typo.jsonl",
        [{"run": 1, "fast": 0.1, "slow": 0.1}, {"run": 1, "fast": 0.1, "slwo": 0.1, "x": 1}],
    )
    with pytest.raises(InputError) as info:
        read_control_trajectories(path)
    assert str(info.value).startswith(
        f"{path}:2: unknown key(s) 'slwo', 'x' in a step record; allowed: fast, own, run, "
        "seed, slow"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("1e300", "fast=1e+300 is above 1"),
        ("1.5", "fast=1.5 is above 1"),
        ("9" * 400, "fast=<an integer beyond the float range> is not a valid score"),
        ("-0.1", "fast=-0.1 is not a valid score"),
        ("NaN", "fast=nan is not a valid score"),
        ("1e400", "fast=inf is not a valid score"),
        ('"0.1"', "fast='0.1' is not a score"),
        ("true", "fast=True is not a score"),
    ],
)
def test_every_value_is_validated_with_file_and_line(
    tmp_path: Path, value: str, shown: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"run": 1, "fast": 0.1, "slow": 0.1}\n{"run": 1, "fast": ' + value + ', "slow": 0.1}\n'
    )
    with pytest.raises(InputError) as info:
        read_control_trajectories(path)
    assert str(info.value).startswith(f"{path}:2: {shown}")


def test_own_scores_and_other_nodes_scores_are_validated_too(tmp_path: Path) -> None:
    own = write_lines(tmp_path / "own.jsonl", [{"run": 1, "fast": 0.1, "slow": 0.1, "own": 1.2}])
    with pytest.raises(InputError, match=r"own\.jsonl:1: own=1\.2 is above 1"):
        read_control_trajectories(own)
    trace = tmp_path / "trace.jsonl"
    with TraceWriter(trace, MachineConfig(Thresholds(0.5, 0.35, 0.25, 0.05)).trace_header()) as w:
        machine = ControlMachine(MachineConfig(Thresholds(0.5, 0.35, 0.25, 0.05)), recorder=w)
        with pytest.raises(ScoreError, match=r"local_scores\['b'\]=3\.0 is above 1"):
            machine.step(0.1, 0.1, node="a", local_scores={"a": 0.1, "b": 3.0})
        machine.step(0.1, 0.1, node="a", local_scores={"a": 0.1, "b": 0.375})
    # the machine no longer writes such a value: a trace edited by hand still fails the reader
    text = trace.read_text(encoding="utf-8")
    assert text.count('"b":0.375') == 1
    trace.write_text(text.replace('"b":0.375', '"b":3.0'), encoding="utf-8")
    with pytest.raises(InputError, match=r"trace\.jsonl:2: scores\['b'\]=3\.0 is above 1"):
        read_control_trajectories(trace)


def test_a_cut_last_line_is_ignored_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text(
        '{"run": 1, "fast": 0.1, "slow": 0.1}\n{"run": 1, "fast": 0.2, "slow": 0.1}\n{"run": 1, "fa'
    )
    with pytest.warns(TraceTruncatedWarning, match=r"cut\.jsonl:3: the last line is cut"):
        runs = read_control_trajectories(path)
    assert runs.truncated
    assert runs.runs == (((0.1, 0.1, None), (0.2, 0.1, None)),)
    # a whole last record without its newline is read (an editor may drop the newline)
    whole = tmp_path / "whole.jsonl"
    whole.write_text('{"run": 1, "fast": 0.1, "slow": 0.1}\n{"run": 1, "fast": 0.2, "slow": 0.1}')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_control_trajectories(whole).runs[0]) == 2
    # a bad line in the middle is still an error
    middle = tmp_path / "middle.jsonl"
    middle.write_text('{"run": 1, "fa\n{"run": 1, "fast": 0.2, "slow": 0.1}\n')
    with pytest.raises(InputError, match=r"middle\.jsonl:1: not valid JSON"):
        read_control_trajectories(middle)


def test_read_control_trajectories_accepts_concatenated_run_traces(tmp_path: Path) -> None:
    config = MachineConfig(Thresholds(0.5, 0.35, 0.25, 0.05))
    path = tmp_path / "traces.jsonl"
    with path.open("w") as out:
        for run in range(3):
            part = tmp_path / f"run{run}.jsonl"
            with TraceWriter(part, config.trace_header()) as writer:
                machine = ControlMachine(config, recorder=writer)
                for step in range(4):
                    machine.step(0.01 * (run + step), 0.001 * step)
            out.write(part.read_text())
    runs = read_control_trajectories(path)
    assert runs.names == ("trace 1", "trace 2", "trace 3")
    assert [max(step.fast for step in run) for run in runs.runs] == [0.03, 0.04, 0.05]
    assert all(step.own is None for run in runs.runs for step in run)  # no node: no own score


def test_run_traces_give_each_step_its_own_score(tmp_path: Path) -> None:
    config = MachineConfig(Thresholds(0.5, 0.35, 0.25, 0.05), node_trip=True)
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path, config.trace_header()) as writer:
        machine = ControlMachine(config, recorder=writer)
        machine.step(0.01, 0.0, node="a", local_scores={"a": 0.2})
        machine.step(0.02, 0.0, node="b", local_scores={"a": 0.2, "b": 0.3})
        machine.step(0.03, 0.0, node="c", local_scores={"a": 0.2, "b": 0.3})  # c: none
    [run] = read_control_trajectories(path).runs
    assert run == ((0.01, 0.0, 0.2), (0.02, 0.0, 0.3), (0.03, 0.0, None))


def test_run_trace_lines_are_validated(tmp_path: Path) -> None:
    config = MachineConfig(Thresholds(0.5, 0.35, 0.25, 0.05))
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path, config.trace_header()) as writer:
        machine = ControlMachine(config, recorder=writer)
        for _ in range(3):
            machine.step(0.1, 0.0)
    header, *steps = path.read_text().splitlines()
    cases = {
        "no-header": ("\n".join(steps), r":1: a run-trace step before any header line"),
        "order": (
            "\n".join([header, steps[0], steps[2]]),
            r":3: step 2 of trace 1 is out of order",
        ),
        "field": (
            "\n".join([header, steps[0].replace('"state":"normal"', '"state":"sideways"')]),
            r":2: step record is invalid",
        ),
        "kind": ('{"kind": "footer"}', r":1: unknown kind 'footer'"),
    }
    for name, (text, match) in cases.items():
        bad = tmp_path / f"{name}.jsonl"
        bad.write_text(text + "\n")
        with pytest.raises(InputError, match=match):
            read_control_trajectories(bad)


def test_dot_harness_records_are_read_one_run_per_preset_and_seed(tmp_path: Path) -> None:
    path = tmp_path / "dot.jsonl"
    with path.open("w") as out:
        for seed in (1, 2):
            for step in iter_dot("control", seed=seed, steps=12):
                out.write(json.dumps(step.to_dict()) + "\n")
    runs = read_control_trajectories(path)
    assert runs.names == ("dot control seed=1", "dot control seed=2")
    expected = [
        (s.fast, s.slow, s.scores.get(s.node))
        for s in iter_dot("control", seed=1, steps=12)
        if s.fast is not None
    ]
    assert list(runs.runs[0]) == expected
    assert runs.skipped == 24 - sum(len(run) for run in runs.runs)


def test_one_simulation_twice_in_a_file_is_refused_not_merged(tmp_path: Path) -> None:
    # the same preset and seed concatenated twice used to read as one run of twice the steps
    lines = [json.dumps(s.to_dict()) for s in iter_dot("control", seed=1, steps=12)]
    path = tmp_path / "twice.jsonl"
    path.write_text("\n".join(lines + lines) + "\n")
    with pytest.raises(InputError, match=r"twice\.jsonl:13: DoT record 'control' seed 1 step 0 "):
        read_control_trajectories(path)
    bad = tmp_path / "nostep.jsonl"
    record = json.loads(lines[0])
    del record["step"]
    bad.write_text(json.dumps(record) + "\n")
    with pytest.raises(InputError, match=r":1: DoT record step=None must be an integer"):
        read_control_trajectories(bad)


@pytest.mark.parametrize(
    ("text", "error", "match"),
    [
        ('{"fast": 0.1, "slow": 0.1}\n', InputError, r":1: a step without a run"),
        ('{"run": 1, "fast": 0.1, "slow": 0.1}\n{oops\n', InputError, r":2: not valid JSON"),
        ("[1]\n", InputError, r":1: each line must be a JSON object"),
        ('{"run": 1, "fast": -0.1, "slow": 0.1}\n', InputError, r":1: fast=-0\.1"),
        ('{"run": 1, "fast": 0.1}\n', InputError, r":1: a step record needs 'fast' and 'slow'"),
        ('{"run": [1], "fast": 0.1, "slow": 0.1}\n', InputError, r":1: run=\[1\] must be a"),
        ('{"seed": "a", "fast": 0.1, "slow": 0.1}\n', InputError, r":1: seed='a' must be an"),
        ('{"run": 1, "fast": null, "slow": 0.1}\n', InputError, "no scored step found"),
    ],
)
def test_read_control_trajectories_errors_name_file_and_line(
    tmp_path: Path, text: str, error: type[Exception], match: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(error, match=match):
        read_control_trajectories(path)


def test_write_calibration_toml_marks_the_file_and_keeps_other_keys(tmp_path: Path) -> None:
    path = tmp_path / "biasbreaker.toml"
    path.write_text(
        'seed = 3\n[breaker]\nkappa = 0.02\ntau_enter = 0.9\n[intervention]\nrouter = "heuristic"\n'
    )
    report = summarise_control_runs(RUNS)
    from biasbreaker.calibration import CalibratedThresholds, CalibrationReport

    calibration = CalibrationReport(
        CalibratedThresholds(0.42, 0.3, 0.25), report.statistics, 100, 0.01, 0.0, "percentile"
    )
    write_calibration_toml(
        path, calibration, calibrated_on=datetime.date(2026, 6, 1), source_sha256="ab" * 32
    )
    settings = load_settings(path, cwd=tmp_path).settings
    assert settings.seed == 3 and settings.breaker.kappa == 0.02
    assert (settings.breaker.tau_enter, settings.breaker.tau_exit, settings.breaker.tau_warn) == (
        0.42,
        0.3,
        0.25,
    )
    assert settings.calibration.calibrated_on == datetime.date(2026, 6, 1)
    assert settings.calibration.source_sha256 == "ab" * 32
    assert settings.calibration.target_false_halt_rate == 0.01
    assert settings.calibration.control is not None
    assert settings.calibration.control.mean == report.statistics.mean
    assert settings.intervention.router == "heuristic"
    config = MachineConfig.from_settings(settings)
    assert config.control == report.statistics
    assert config.thresholds == Thresholds(0.42, 0.3, 0.25, 0.02)


# -- the window -----------------------------------------------------------------------------------


def test_outlier_level_is_one_sided_and_strict() -> None:
    assert outlier_level(0.25, STATS) == 0  # exactly mean + 3σ is not beyond it
    assert outlier_level(0.2500001, STATS) == 3
    assert outlier_level(0.35, STATS) == 3
    assert outlier_level(0.3500001, STATS) == 5
    assert outlier_level(0.0, STATS) == 0  # far below the mean is not a bias event


@given(st.integers(1, 8), st.lists(st.floats(0.0, 0.6), max_size=60))
def test_window_counts_match_a_brute_force_recount(max_history: int, values: list[float]) -> None:
    window = CalibrationWindow(STATS, max_history)
    for index, value in enumerate(values):
        peeked = window.peek(value)
        counts = window.observe(value)
        assert peeked == counts
        recent = values[max(0, index + 1 - max_history) : index + 1]
        assert counts.size == len(recent)
        assert counts.beyond_3 == sum(1 for v in recent if v > 0.25)
        assert counts.beyond_5 == sum(1 for v in recent if v > 0.35)
        assert counts.dirty == any(v > 0.25 for v in recent)
        assert window.counts == counts


def test_window_peek_does_not_change_it_and_restores_from_levels() -> None:
    window = CalibrationWindow(STATS, 3)
    for value in [0.3, 0.1, 0.4]:
        window.observe(value)
    assert window.levels() == [3, 0, 5]
    window.peek(0.9)
    assert window.levels() == [3, 0, 5]
    clone = CalibrationWindow(STATS, 3, window.levels())
    assert clone.counts == window.counts
    assert clone.observe(0.0) == window.observe(0.0)


@pytest.mark.parametrize(
    ("max_history", "levels", "match"),
    [
        (0, [], "max_history=0"),
        (2, [0, 0, 0], "at most max_history=2"),
        (3, [4], "each 0, 3 or 5"),
    ],
)
def test_window_rejects_bad_arguments(max_history: int, levels: list[int], match: str) -> None:
    with pytest.raises(InputError, match=match):
        CalibrationWindow(STATS, max_history, levels)


def test_control_statistics_round_trip_and_validation() -> None:
    assert ControlStatistics.from_json(STATS.to_json()) == STATS
    assert STATS.bound(3) == pytest.approx(0.25)
    with pytest.raises(ThresholdError, match="n_steps=1"):
        ControlStatistics(0.1, 0.1, 1)
    with pytest.raises(InputError, match="need 'mean'"):
        ControlStatistics.from_json({"mean": 0.1})


def test_fast_b_net_without_spread_floors_the_window_std_with_a_warning(fixed: Any) -> None:
    """One value on every control step: sigma is zero_floor / 5, said, whatever the calibrator."""
    from biasbreaker.calibration import CalibrationWarning

    kernel = fixed((0.3, 0.2, 0.25), zero_floor=0.1)
    runs = [[(0.2, 0.1), (0.2, 0.15)] for _ in range(30)]
    with pytest.warns(CalibrationWarning, match=r"fast B_net is 0\.2 on every control step") as w:
        report = calibrate(runs, kernel=kernel)
    assert (report.statistics.mean, report.statistics.std) == (0.2, 0.02)
    assert "above 0.26 (3σ) and 0.3 (5σ)" in str(w[0].message)
    with pytest.raises(ThresholdError, match="control std is 0"):  # no floor: refused
        summarise_control_runs(runs)
    # some spread, however small: the measured std, no floor and no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)
        spread = calibrate([*runs[:-1], [(0.2, 0.1), (0.2001, 0.1)]], kernel=kernel)
    assert 0.0 < spread.statistics.std < 0.001
