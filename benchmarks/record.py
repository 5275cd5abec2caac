"""The bench figures the docs quote: one generated file, ``docs/bench/latest.json`` and ``.md``.

Wall-time ratios differ from run to run, so the docs cannot be checked against a fresh run.
Instead ``nox -s bench`` records its run (``pytest benchmarks --bench-record docs/bench``:
:func:`record` from ``benchmarks/conftest.py``) with the date, the machine's load and the
versions, and renders one passage per benchmark group between ``<!-- quoted: bench GROUP -->``
markers (:func:`render`). The docs quote those passages; ``tests/test_bench_record.py`` checks
that every quoted passage equals what the committed JSON renders, so a figure in the docs
cannot drift from the recorded run. ``nox -s bench -- update`` (or ``python -m
biasbreaker_plugins.quoted update docs/bench/latest.md DOC...``) rewrites the passages.

A run of some groups only (``-k langchain``) replaces those groups in the file and keeps the
others, each group with the run that measured it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from biasbreaker_plugins.quoted import WIDTH, block

ROOT = Path(__file__).resolve().parents[1]
DOCS = (
    "README.md",
    "docs/cli.md",
    "docs/control.md",
    "docs/detection.md",
    "docs/intervention.md",
    "docs/langchain.md",
    "docs/langgraph.md",
)
"""The documents that quote bench passages (``nox -s bench -- update`` rewrites them)."""


def load() -> tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages (zeros where the OS has none)."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)
    return (round(one, 2), round(five, 2), round(fifteen, 2))


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def commit() -> str | None:
    """The work tree's ``HEAD`` (short), said to have uncommitted changes when it has."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    commit = out.stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"{commit} with uncommitted changes" if commit and dirty else commit or None


def run_info(load_start: Sequence[float], tree: str | None, command: str) -> dict[str, Any]:
    """The run's date, load (at its start and end), machine, versions, commit and command.

    Args:
        load_start: :func:`load` when the run started.
        tree: :func:`commit` when the run started (the code measured).
        command: The pytest command line.
    """
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_start": list(load_start),
        "load_end": list(load()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "langgraph": _version("langgraph"),
        "langchain": _version("langchain"),
        "commit": tree,
        "command": command,
    }


RUN_FIGURES = ("runs_per_s", "peak_rss_mb", "peak_rss_ratio", "peak_rss_goal")
"""What a ``biasbreaker run`` benchmark (``benchmarks/test_bench_run.py``) adds to its times:
runs per second and the child process's peak RSS, and for the large run its peak against the
baseline's with the goal. Recorded and rendered only for the groups that report them."""


def _run_figures(bench: Any) -> dict[str, Any]:
    return {k: bench.extra_info[k] for k in RUN_FIGURES if k in bench.extra_info}


def _met(ratio: float | None, goal: float | None) -> bool | None:
    return None if ratio is None or goal is None else ratio <= goal


def group_record(benches: Sequence[Any], run: Mapping[str, Any]) -> dict[str, Any] | None:
    """One group's figures from pytest-benchmark's results (``None`` without a baseline)."""
    baselines = [b for b in benches if "baseline" in b.name]
    if not baselines:
        return None
    base = baselines[0]
    cases = []
    for bench in benches:
        if bench is base:
            continue
        goal = bench.extra_info.get("goal_ratio")
        ratio = bench.stats.mean / base.stats.mean
        fastest = bench.stats.min / base.stats.min
        paired = bench.extra_info.get("paired_ratio")
        cases.append(
            {
                "name": bench.name,
                "per": bench.extra_info.get("per", ""),
                "mean_s": bench.stats.mean,
                "min_s": bench.stats.min,
                "rounds": bench.stats.rounds,
                "ratio": round(ratio, 3),
                "min_ratio": round(fastest, 3),
                "paired_ratio": paired,
                "goal": goal,
                "met_mean": _met(ratio, goal),
                "met_min": _met(fastest, goal),
                "met_paired": _met(paired, goal),
                **_run_figures(bench),
            }
        )
    return {
        "run": dict(run),
        "baseline": {
            "name": base.name,
            "per": base.extra_info.get("per", ""),
            "mean_s": base.stats.mean,
            "min_s": base.stats.min,
            "rounds": base.stats.rounds,
            **_run_figures(base),
        },
        "cases": cases,
    }


def _time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.2f} µs"


def _verdict(met: bool | None) -> str:
    return "" if met is None else (" met" if met else " **not met**")


def _load(values: Sequence[float]) -> str:
    return " / ".join(f"{v:.1f}" for v in values)


def passage(group: str, figures: Mapping[str, Any]) -> str:
    """The Markdown a document quotes for one group: its run, then one row per case."""
    run, base = figures["run"], figures["baseline"]
    versions = f"Python {run['python']}"
    if run.get("langgraph"):
        versions += f", LangGraph {run['langgraph']}"
    if run.get("langchain") and group.startswith("langchain"):
        versions += f", LangChain {run['langchain']}"
    head = (
        f"Group `{group}` of the bench run recorded {run['date']} (commit {run['commit'] or '?'}, "
        f"{versions}, {run['machine']}; load average 1 / 5 / 15 min: {_load(run['load_start'])}"
        f" at the run's start, {_load(run['load_end'])} at its end). Baseline `{base['name']}`"
        f" ({base['per'] or 'one call'}): mean {_time(base['mean_s'])}, min "
        f"{_time(base['min_s'])}."
    )
    runs = "peak_rss_mb" in base
    if runs:
        head += (
            f" The baseline run: {base['runs_per_s']} runs/s, peak RSS {base['peak_rss_mb']} MB."
        )
    lines = [
        textwrap.fill(head, WIDTH, break_on_hyphens=False),
        "",
        "| case | mean (min) | mean / baseline mean | min / baseline min | paired ratio | goal |"
        + (" runs/s | peak RSS | peak RSS / baseline's |" if runs else ""),
        "|---|---|---|---|---|---|" + ("---|---|---|" if runs else ""),
    ]
    for case in figures["cases"]:
        goal = case["goal"]
        paired = case["paired_ratio"]
        paired_text = "—" if paired is None else f"{paired:.3f}{_verdict(case['met_paired'])}"
        lines.append(
            f"| `{case['name']}` ({case['per']}) | {_time(case['mean_s'])} "
            f"({_time(case['min_s'])}) | {case['ratio']:.3f}{_verdict(case['met_mean'])} "
            f"| {case['min_ratio']:.3f}{_verdict(case['met_min'])} | {paired_text} "
            f"| {'—' if goal is None else f'≤ {goal}'} |"
            + (f" {_run_cells(case)} |" if runs else "")
        )
    return "\n".join(lines)


def _run_cells(case: Mapping[str, Any]) -> str:
    """A run case's runs/s, peak RSS and peak RSS ratio (with its goal), as table cells."""
    ratio, goal = case.get("peak_rss_ratio"), case.get("peak_rss_goal")
    peak = "—" if ratio is None else f"{ratio:.3f}{_verdict(_met(ratio, goal))}"
    if ratio is not None and goal is not None:
        peak += f" (goal ≤ {goal})"
    return f"{case.get('runs_per_s', '—')} | {case.get('peak_rss_mb', '—')} MB | {peak}"


def render(recorded: Mapping[str, Any]) -> str:
    """``docs/bench/latest.md``: every group's passage between its markers."""
    parts = [
        "# Benchmarks: the latest recorded run",
        "",
        textwrap.fill(
            "Generated by `nox -s bench` (`benchmarks/record.py`) from `latest.json`, which "
            "also keeps each run's pytest command; do not edit. Each group was measured in "
            "the run its first line names, with the machine's load then: on a shared machine "
            "a ratio moves with the other work, so read it with its load. The docs quote "
            "these passages between the same markers; `tests/test_bench_record.py` fails when "
            "a quoted passage differs.",
            WIDTH,
            break_on_hyphens=False,
        ),
    ]
    for group in sorted(recorded["groups"]):
        parts += [
            "",
            f"## {group}",
            "",
            block(f"bench {group}", passage(group, recorded["groups"][group])),
        ]
    return "\n".join(parts) + "\n"


def record(benchmarks: Sequence[Any], out: Path, run: Mapping[str, Any]) -> list[str]:
    """Merge this run's groups into ``out/latest.json`` and write ``out/latest.md``.

    Returns:
        The groups recorded (those with a baseline).
    """
    by_group: dict[str, list[Any]] = {}
    for bench in benchmarks:
        by_group.setdefault(bench.group or bench.name, []).append(bench)
    path = out / "latest.json"
    recorded: dict[str, Any] = (
        json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"groups": {}}
    )
    written = []
    for group, benches in by_group.items():
        figures = group_record(benches, run)
        if figures is not None:
            recorded["groups"][group] = figures
            written.append(group)
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (out / "latest.md").write_text(render(recorded), encoding="utf-8")
    return sorted(written)


def main(argv: Sequence[str] | None = None) -> int:
    """``render JSON``: print the Markdown a recorded JSON renders (the test's own check)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "render":
        print("usage: python benchmarks/record.py render docs/bench/latest.json")
        return 2
    print(render(json.loads(Path(args[1]).read_text(encoding="utf-8"))), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
