"""The outputs of ``biasbreaker run``: numbers from its files, ``report.md``, a B_net figure."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from biasbreaker.trace import read_trace
from biasbreaker_plugins.demo.driver import read_results
from biasbreaker_plugins.demo.figures import bnet_figure, pick_runs
from biasbreaker_plugins.demo.report import Table, phase_table, property_table, verification_block
from biasbreaker_plugins.demo.run_graph import RunResult
from biasbreaker_plugins.demo.summary import TraceCounts, Verification, trace_counts, verification


@dataclass(frozen=True)
class RunOutputs:
    """What ``biasbreaker run`` wrote.

    Args:
        counts: What the traces record.
        waiting: Runs paused for human review.
        verification: Every trace verified.
        tables: The report's tables.
        report: ``report.md``.
        figure: The B_net figure.
    """

    counts: TraceCounts
    waiting: int
    verification: Verification
    tables: tuple[Table, ...]
    report: Path
    figure: Path


def write_run_outputs(result: RunResult, out: Path, *, graph: str, inputs: Path) -> RunOutputs:
    """Compute the run's numbers from ``out`` and write ``report.md`` and the figure."""
    records = read_results(out / "results.jsonl")
    paths = [out / r["trace"] for r in records if r["trace"]]
    traces = [read_trace(p) for p in paths]
    counts = trace_counts(traces)
    checked = verification(paths, out)
    waiting = sum(1 for r in records if r["status"] == "review")
    figures = out / "figures"
    figures.mkdir(exist_ok=True)
    figure = figures / "bnet.png"
    bnet_figure(pick_runs(traces), figure, title=f"{graph}: fast and slow B_net, breaker state")
    tables = (phase_table([("run", counts, result.llm_calls)]), property_table(checked.totals))
    s = result.settings
    b = s["breaker"]
    calibrated = s["calibration"]["calibrated_on"]
    lines = [
        f"# biasbreaker run: `{graph}`",
        "",
        f"{len(records)} input(s) from `{inputs}`, one LangGraph thread each; "
        f"{waiting} paused for human review. Thresholds: tau_enter {b['tau_enter']}, tau_exit "
        f"{b['tau_exit']}, tau_warn {b['tau_warn']} — "
        + (
            f"calibrated on {calibrated}."
            if calibrated
            else "the shipped starting points, **not calibrated** (record control runs and "
            "run `biasbreaker calibrate`)."
        ),
        "",
    ]
    if result.failure:
        lines += [f"**Stopped early:** {result.failure}", ""]
    lines += [
        tables[0].markdown(),
        "",
        "![B_net](figures/bnet.png)",
        "",
        *verification_block(tables[1], checked),
    ]
    report = out / "report.md"
    report.write_text("\n".join(lines), encoding="utf-8")
    return RunOutputs(counts, waiting, checked, tables, report, figure)


__all__ = ["RunOutputs", "write_run_outputs"]
