"""Cost of the control plane, against baselines measured in the same run.

- ``control-check``: one ``CircuitBreaker.check`` and one ``ControlMachine.step`` against a
  pybreaker call of a no-op function (goal for ``check``: at most 0.5 x pybreaker).
- ``calibration-1M``: ``calibrate`` (validation, summary, percentile calibrator, kernel checks)
  on 10,000 control runs of 100 steps, against the bare per-run maxima and mean over the same
  one million steps.
- ``verification-1M``: ``verify_trace`` (the chain, the replay and every property) on a
  one-million-step run trace written by the real machine with B_net and its EWMAs computed by
  ``biasbreaker.propagation`` (so the replay re-derives every step), against reading the same
  file and parsing each line with ``json.loads`` (goal: 300k steps per second, memory flat), by
  default in two halves at once on two cores, and in one process.

Goals are reported by the ratio table of ``benchmarks/conftest.py``, never asserted.
"""

from __future__ import annotations

import json
import math
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pybreaker
import pytest

from biasbreaker.breaker import CircuitBreaker, freeze
from biasbreaker.calibration import ControlStatistics, calibrate
from biasbreaker.kernel import Kernel
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.propagation import NetworkEwma, network_score
from biasbreaker.trace import TraceWriter
from biasbreaker.types import InterventionContext, InterventionResult, Thresholds
from biasbreaker.verify import verify_trace

TH = Thresholds(0.5, 0.35, 0.25, 0.05)
MILLION = 1_000_000


def _noop() -> None:
    return None


@pytest.mark.benchmark(group="control-check")
def test_pybreaker_noop_call_baseline(benchmark: Any) -> None:
    breaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=60)
    benchmark.extra_info["per"] = "pybreaker.CircuitBreaker.call(no-op)"
    benchmark(breaker.call, _noop)


@pytest.mark.benchmark(group="control-check")
def test_breaker_check_closed(benchmark: Any) -> None:
    breaker = CircuitBreaker(TH.tau_enter, TH.tau_exit, TH.tau_warn, TH.kappa)
    benchmark.extra_info.update(per="check(), closed (NORMAL)", goal_ratio=0.5)
    decision = benchmark(breaker.check, 0.3, 0.1)
    assert decision.state.value == "normal"


@pytest.mark.benchmark(group="control-check")
def test_breaker_check_tripped(benchmark: Any) -> None:
    breaker = CircuitBreaker(TH.tau_enter, TH.tau_exit, TH.tau_warn, TH.kappa, tripped=True)
    benchmark.extra_info.update(per="check(), tripped in the dead-band", goal_ratio=0.5)
    decision = benchmark(breaker.check, 0.4, 0.1)
    assert decision.state.value == "intervention"


@pytest.mark.benchmark(group="control-check")
def test_machine_step(benchmark: Any) -> None:
    config = MachineConfig(TH, control=ControlStatistics(0.1, 0.05, 1000), max_history=32)
    machine = ControlMachine(config)
    benchmark.extra_info["per"] = "step(), NORMAL, with window, no trace"
    decision = benchmark(machine.step, 0.3, 0.1)
    assert decision.state.value == "normal"


@pytest.mark.benchmark(group="control-check")
def test_machine_step_with_scores_and_trace(benchmark: Any, tmp_path: Path) -> None:
    config = MachineConfig(TH, control=ControlStatistics(0.1, 0.05, 1000), max_history=32)
    with TraceWriter(tmp_path / "run.jsonl", config.trace_header()) as writer:
        machine = ControlMachine(config, recorder=writer)
        benchmark.extra_info["per"] = "step(), NORMAL, 3 node scores, trace flushed per record"
        benchmark(machine.step, 0.3, 0.1, node="a1", local_scores={"a0": 0.2, "a1": 0.3, "a2": 0.1})


# -- calibration on one million steps -------------------------------------------------------------


@pytest.fixture(scope="module")
def control_runs() -> list[list[tuple[float, float, float]]]:
    """10,000 runs of 100 (fast, slow, own) steps: node trips on (the default) calibrate own."""
    rng = random.Random(7)
    runs = []
    for _ in range(10_000):
        fast = slow = 0.05
        run = []
        for _ in range(100):
            x = min(1.0, max(0.0, rng.gauss(0.05, 0.02)))
            own = min(1.0, max(0.0, rng.gauss(0.08, 0.03)))
            fast, slow = 0.5 * fast + 0.5 * x, 0.95 * slow + 0.05 * x
            run.append((fast, slow, own))
        runs.append(run)
    return runs


@pytest.mark.benchmark(group="calibration-1M")
def test_maxima_and_mean_baseline(benchmark: Any, control_runs: Any) -> None:
    def bare() -> tuple[list[float], float]:
        maxima = [max(max(f, o) for f, _, o in run) for run in control_runs]
        return maxima, math.fsum(f for run in control_runs for f, _, _ in run) / MILLION

    benchmark.extra_info["per"] = "1M steps: per-run max of max(fast, own) + mean, nothing else"
    benchmark.pedantic(bare, rounds=3, iterations=1)


@pytest.mark.benchmark(group="calibration-1M")
def test_calibrate_one_million_steps(benchmark: Any, control_runs: Any, tmp_path: Path) -> None:
    kernel = Kernel.load(cwd=tmp_path)
    benchmark.extra_info["per"] = (
        "1M steps: calibrate() with the percentile calibrator, node trips on"
    )
    report = benchmark.pedantic(
        calibrate,
        args=(control_runs,),
        kwargs={"target_false_halt_rate": 0.01, "kernel": kernel},
        rounds=3,
        iterations=1,
    )
    assert report.n_runs == 10_000
    assert report.statistics.n_steps == MILLION
    assert report.node_trip
    assert report.own_scores == MILLION
    benchmark.extra_info["steps_per_second"] = round(MILLION / benchmark.stats.stats.mean)


# -- verification on one million steps ------------------------------------------------------------


def _repair(context: InterventionContext) -> InterventionResult:
    return InterventionResult(freeze({"fixed": context.step}), True, "madera", (), 0.05)


WEIGHTS = {"intake": 0.5, "screener": 0.3, "decider": 0.2}


def write_bench_trace(path: Path, steps: int) -> None:
    """A real guarded run of three nodes: bursts of bias every 1,000 steps, repaired, recovering.

    Each step folds one node's new local score into the latest scores, computes B_net with the
    Katz weights and the fast and slow EWMAs (``biasbreaker.propagation``), steps the machine
    with them, and the trace is sealed at the end: what ``verify`` replays.
    """
    ewma = NetworkEwma.create()
    config = MachineConfig(
        TH,
        control=ControlStatistics(0.1, 0.05, 1000),
        max_history=32,
        ewma_smoothing=(ewma.fast.smoothing, ewma.slow.smoothing),
    )
    rng = random.Random(3)
    scores: dict[str, float] = {}
    nodes = tuple(WEIGHTS)
    with TraceWriter(path, config.trace_header({"bench": "1M"}), signer=None) as writer:
        machine = ControlMachine(config, hook=_repair, recorder=writer)
        for step in range(steps):
            node = nodes[step % 3]
            burst = step % 1000 < 40
            scores[node] = (0.9 if burst else 0.05) + rng.random() * 0.05
            ewma = ewma.update(network_score(WEIGHTS, scores).b_net)
            fast, slow = ewma.fast.value, ewma.slow.value
            assert fast is not None
            assert slow is not None
            machine.step(fast, slow, node=node, local_scores=scores, weights=WEIGHTS)
        writer.seal()


@pytest.fixture(scope="module")
def million_step_trace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The one-million-step trace of :func:`write_bench_trace`."""
    path = tmp_path_factory.mktemp("bench") / "run.jsonl"
    write_bench_trace(path, MILLION)
    yield path
    path.unlink()


@pytest.mark.benchmark(group="verification-1M")
def test_read_and_parse_baseline(benchmark: Any, million_step_trace: Path) -> None:
    def parse() -> int:
        with million_step_trace.open("rb") as fh:
            return sum(1 for line in fh if json.loads(line))

    benchmark.extra_info["per"] = "1M steps: read the file, json.loads each line"
    benchmark.pedantic(parse, rounds=2, iterations=1)


@pytest.mark.benchmark(group="verification-1M")
def test_verify_one_million_steps(benchmark: Any, million_step_trace: Path) -> None:
    """The default: on two cores, the trace is verified in two halves at once (verify/split.py)."""
    benchmark.extra_info["per"] = (
        "1M steps: verify_trace(), chain, replay, six properties (default: two halves at once)"
    )
    report = benchmark.pedantic(verify_trace, args=(million_step_trace,), rounds=2, iterations=1)
    assert report.steps == MILLION
    assert report.holds, report.to_json()
    assert report.chain.checked == MILLION + 2  # the header, every step, the seal
    assert "re-derived on every step" in report.replay.what
    assert report.rlb.recovery_transitions == 1000
    per_second = MILLION / benchmark.stats.stats.mean
    benchmark.extra_info["steps_per_second"] = round(per_second)
    benchmark.extra_info["goal"] = f"300k steps/s: {'met' if per_second >= 300_000 else 'NOT met'}"


@pytest.mark.benchmark(group="verification-1M")
def test_verify_one_million_steps_in_one_process(benchmark: Any, million_step_trace: Path) -> None:
    benchmark.extra_info["per"] = "1M steps: verify_trace(workers=1), one pass in this process"
    report = benchmark.pedantic(
        verify_trace, args=(million_step_trace,), kwargs={"workers": 1}, rounds=2, iterations=1
    )
    assert report.holds
    benchmark.extra_info["steps_per_second"] = round(MILLION / benchmark.stats.stats.mean)


@pytest.mark.benchmark(group="verification-memory")
def test_verify_memory_baseline_100k(benchmark: Any, tmp_path: Path) -> None:
    """Peak memory of verify_trace on 100k steps, the baseline of the flat-memory check."""
    path = tmp_path / "small.jsonl"
    write_bench_trace(path, MILLION // 10)
    peak = benchmark.pedantic(_peak, args=(path,), rounds=1, iterations=1)
    benchmark.extra_info["per"] = f"verify_trace 100k steps, tracemalloc peak {peak / 1e6:.2f} MB"


@pytest.mark.benchmark(group="verification-memory")
def test_verify_memory_one_million(benchmark: Any, million_step_trace: Path) -> None:
    """Peak memory on 1M steps: flat in the trace's length (the ratio table shows time)."""
    peak = benchmark.pedantic(_peak, args=(million_step_trace,), rounds=1, iterations=1)
    benchmark.extra_info["per"] = f"verify_trace 1M steps, tracemalloc peak {peak / 1e6:.2f} MB"


def _peak(path: Path) -> int:
    """Peak traced memory of this process (the worker of a split run is another process)."""
    tracemalloc.start()
    try:
        assert verify_trace(path).holds
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
