"""Benchmark reporting: every case is printed as a ratio to its group's baseline.

Each benchmark group has one case whose name contains ``baseline``, measured in the same run.
After the run, a table gives every other case's mean time divided by the baseline's mean, the
same ratio of the fastest rounds (min/min: the cost with the least interference from other
work on a shared machine; the mean also carries that interference), and the goal stated in
``benchmark.extra_info["goal_ratio"]`` (met or not, by each). Goals are reported, never
asserted: speed targets live here, not in the test suite.

``--bench-record DIR`` (``nox -s bench`` passes ``docs/bench``) also writes the run's ratios,
with the date and the machine's load, to ``DIR/latest.json`` and ``DIR/latest.md``, the file
the docs quote (``benchmarks/record.py``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from record import commit, load, record, run_info

_AT_START: dict[str, Any] = {}
"""The load and the commit when the session started (the code the run measures)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--bench-record",
        metavar="DIR",
        default=None,
        help="write the run's ratios, date and load to DIR/latest.json and DIR/latest.md",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    _AT_START.update(load=load(), commit=commit())


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    session = getattr(config, "_benchmarksession", None)
    if session is None or not session.benchmarks:
        return
    groups: dict[str, list[Any]] = defaultdict(list)
    for bench in session.benchmarks:
        groups[bench.group or bench.name].append(bench)
    terminalreporter.section("biasbreaker benchmark ratios (mean time / baseline mean time)")
    for group, benches in sorted(groups.items()):
        baselines = [b for b in benches if "baseline" in b.name]
        if not baselines:
            continue
        base = baselines[0]
        base_mean = base.stats.mean
        terminalreporter.write_line(f"[{group}] baseline {base.name}: {base_mean * 1e6:.3f} us")
        for bench in benches:
            if bench is base:
                continue
            ratio = bench.stats.mean / base_mean
            fastest = bench.stats.min / base.stats.min
            goal = bench.extra_info.get("goal_ratio")
            verdict = ""
            if goal is not None:
                verdict = (
                    f"  goal <= {goal}: mean {'met' if ratio <= goal else 'NOT met'}, "
                    f"min {'met' if fastest <= goal else 'NOT met'}"
                )
            unit = bench.extra_info.get("per", "")
            extra = f" ({unit})" if unit else ""
            terminalreporter.write_line(
                f"  {bench.name}{extra}: {bench.stats.mean * 1e6:.3f} us = {ratio:.3f} x baseline"
                f" (min/min {fastest:.3f})" + verdict
            )
            if "paired_ratio" in bench.extra_info:
                paired = bench.extra_info["paired_ratio"]
                met = (
                    ""
                    if goal is None
                    else f" (goal <= {goal}: {'met' if paired <= goal else 'NOT met'})"
                )
                terminalreporter.write_line(
                    f"    paired with the baseline, invoke by invoke: median {paired} x{met}"
                )
            _write_run_numbers(terminalreporter, bench)
        if any("runs_per_s" in b.extra_info for b in benches):
            _write_run_numbers(terminalreporter, base, baseline=True)
    out = config.getoption("--bench-record")
    if out is not None and exitstatus != 0:
        terminalreporter.write_line(
            f"not recorded in {out}: a benchmark failed (exit {exitstatus})"
        )
    elif out is not None:
        command = "pytest " + " ".join(config.invocation_params.args)
        written = record(
            session.benchmarks, Path(out), run_info(_AT_START["load"], _AT_START["commit"], command)
        )
        terminalreporter.write_line(f"recorded {', '.join(written)} in {out}/latest.json and .md")


def _write_run_numbers(terminalreporter: Any, bench: Any, baseline: bool = False) -> None:
    """The extra numbers of ``benchmarks/test_bench_run.py``: runs/s, peak RSS and its ratio."""
    info = bench.extra_info
    if "runs_per_s" not in info:
        return
    line = (
        f"    {'baseline ' if baseline else ''}{bench.name}: {info['runs_per_s']} runs/s, "
        f"peak RSS {info['peak_rss_mb']} MB"
    )
    if "peak_rss_ratio" in info:
        goal = info["peak_rss_goal"]
        met = "met" if info["peak_rss_ratio"] <= goal else "NOT met"
        line += f" = {info['peak_rss_ratio']} x the baseline's peak (goal <= {goal}: {met})"
    terminalreporter.write_line(line)
