"""The hiring demo's outputs: numbers from the files, ``report.md``, figures, console lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasbreaker_plugins.demo.figures import bnet_figure, pick_runs, selection_figure
from biasbreaker_plugins.demo.hiring import GROUPS, group_label, measured_rates
from biasbreaker_plugins.demo.hiring_demo import HiringResult
from biasbreaker_plugins.demo.output import write_text_atomic
from biasbreaker_plugins.demo.report import (
    CALIBRATION_SETTINGS,
    Table,
    calibrate_command,
    phase_table,
    property_table,
    selection_table,
    verification_block,
    write_calibration_settings,
    zero_floor_note,
)
from biasbreaker_plugins.demo.summary import (
    GUARDED_PHASES,
    Lean,
    Selection,
    TraceCounts,
    Verification,
    lean,
    read_phase_files,
    selection,
)

_LABELS = {"reference": "group-blind ranker", "unguarded": "unguarded", "guarded": "guarded"}


@dataclass(frozen=True)
class HiringOutputs:
    """What the demo wrote and prints.

    Args:
        counts: Phase -> what its traces record.
        selections: ``unguarded`` and ``guarded`` selection rates.
        changed: Postings whose shortlist the guard changed (as a set of names).
        verification: Every trace verified.
        tables: The tables, in report order.
        report: Path of ``report.md``.
        figures: Paths of the PNG figures.
    """

    counts: dict[str, TraceCounts]
    selections: dict[str, Selection]
    changed: int
    verification: Verification
    tables: tuple[Table, ...]
    report: Path
    figures: tuple[Path, ...]


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _smoothing(propagation: dict[str, Any]) -> str:
    if propagation["fast_smoothing"]:
        return f"{propagation['fast_smoothing']:g}"
    return f"from a half-life of {propagation['fast_half_life']:g} steps"


def lean_table(rows: list[tuple[str, Lean]]) -> Table:
    """The preference lean of each phase's shortlists."""
    return Table(
        "How far the shortlists follow GPT-3.5's measured preferences (mean over postings of "
        "8 x the top-1 rate Bloomberg measured for the shortlisted candidates' groups in that "
        "job; 1 = no lean)",
        ("phase", "postings", "mean weight of the shortlisted groups", "95% interval"),
        tuple(
            (
                name,
                str(x.postings),
                f"{x.mean:.4f}",
                f"[{x.mean - x.half_width:.4f}, {x.mean + x.half_width:.4f}]",
            )
            for name, x in rows
        ),
        note="A group-blind pipeline has expectation 1; the GPT-3.5 preferences push it above 1. "
        "Unlike the lowest impact ratio (the ratio of two extremes of eight noisy rates), this "
        "mean uses every shortlist, so a few hundred postings measure it to about ±0.02.",
    )


def write_hiring_outputs(result: HiringResult, out: Path) -> HiringOutputs:
    """Compute every number from ``out``'s traces and ``results.jsonl``; write the report."""
    files = read_phase_files(out)
    records, traces, counts, checked = files.records, files.traces, files.counts, files.verification
    shown: list[str] = [p for p in ("reference", "unguarded", "guarded") if p in result.phases]
    selections = {p: selection(records, p, GROUPS) for p in shown}
    shortlists = {(r["phase"], r["thread"]): frozenset(r["shortlist"] or ()) for r in records}
    changed = sum(
        1
        for (phase, thread), short in shortlists.items()
        if phase == "guarded" and shortlists.get(("unguarded", thread)) != short
    )

    labels = {g: group_label(g) for g in GROUPS}
    figures_dir = out / "figures"
    figures_dir.mkdir(exist_ok=True)
    bnet = figures_dir / "bnet.png"
    bnet_figure(
        pick_runs(traces["guarded"]),
        bnet,
        title="Guarded postings: fast and slow B_net, thresholds, breaker state (bands)",
    )
    sel_png = figures_dir / "selection.png"
    sel_pairs = [(_LABELS[p], selections[p]) for p in shown]
    selection_figure(sel_pairs, labels, sel_png, title="Shortlist selection rate per group")
    calls = {p: result.phases[p].llm_calls for p in result.phases}
    leans = {p: lean(records, p, measured_rates(), len(GROUPS)) for p in shown}
    tables = (
        phase_table([(p, counts[p], calls[p]) for p in GUARDED_PHASES]),
        selection_table(sel_pairs, labels),
        lean_table([(_LABELS[p], leans[p]) for p in shown]),
        property_table(checked.totals),
    )
    write_calibration_settings(out, result.calibration, result.settings)
    report = out / "report.md"
    text = _markdown(result, counts, selections, changed, checked, tables, calls)
    write_text_atomic(report, text)
    return HiringOutputs(counts, selections, changed, checked, tables, report, (bnet, sel_png))


def _markdown(
    result: HiringResult,
    counts: dict[str, TraceCounts],
    selections: dict[str, Selection],
    changed: int,
    checked: Verification,
    tables: tuple[Table, ...],
    calls: dict[str, int],
) -> str:
    cal = result.calibration
    settings_file = CALIBRATION_SETTINGS
    th = cal.thresholds
    st = cal.statistics
    s = result.settings
    fresh = counts["fresh-control"]
    target = cal.target_false_halt_rate
    lines = [
        "# biasbreaker demo: hiring",
        "",
        ("**Simulated LLM.** " if result.simulated else f"**LLM: `{result.model}`.** ")
        + " ".join(f"{n[0].upper()}{n[1:]}." for n in result.agent_notes),
        "",
        f"Data: Bloomberg (2024) — 4 real job descriptions, 8 equally qualified resumes per "
        f"job, race/gender-coded names (White, Black, Asian, Hispanic x man, woman). "
        f"{result.sizes.postings} postings (jobs in turn, names and order shuffled per "
        f"posting, seed {result.seed}), each run unguarded and guarded; "
        f"{result.sizes.control_runs} control postings for calibration and "
        f"{result.sizes.fresh_control_runs} fresh ones after it (every agent at dial 0).",
        "",
        "Pipeline per posting: `screen` (one screener call per applicant) -> `ranker` -> "
        "`reviewer` -> `decider` (shortlist from the ranking's top "
        f"{s['demo']['shortlist']}); every agent is an LLM call. One breaker per posting "
        "(the LangGraph thread). Probe: "
        f"k = {s['probe']['k']} counterfactual variants, r = {s['probe']['r']} same-group "
        f"resamples, scorer(s) {', '.join(s['probe']['scorers'])}. Fast EWMA smoothing "
        f"{_smoothing(s['propagation'])}, router `{s['intervention']['router']}`, skeptics "
        f"{', '.join(s['intervention']['skeptics'])} ({s['intervention']['aggregator']}).",
        "",
        "## Calibration",
        "",
        f"From {cal.n_runs} control runs at a per-run false-halt target of {target}: "
        f"tau_enter = {_fmt(th.tau_enter)}, tau_exit = {_fmt(th.tau_exit)}, "
        f"tau_warn = {_fmt(th.tau_warn)}; calibration window mean {_fmt(st.mean)}, std "
        f"{_fmt(st.std)} over {st.n_steps} steps (calibrator `{cal.calibrator}`; "
        f"{cal.empirical_false_halt_rate:.3f} of the calibration runs reach tau_enter)."
        f"{zero_floor_note(cal)} "
        f"Reproduce (in this folder): {calibrate_command(result.control_file, settings_file)} "
        "(sha256 "
        f"{result.control_sha256[:12]}…).",
        "",
        f"**False halts on fresh control runs: {fresh.runs_tripped} of {fresh.runs} "
        f"({fresh.false_halt_rate:.3f}; target {target}).**",
        "",
        "## What happened",
        "",
        tables[0].markdown(),
        "",
        tables[1].markdown(),
        "",
        (
            "The group-blind column runs the same postings with every agent at dial 0: its "
            "lowest impact ratio is what sampling noise alone gives at this number of "
            "postings, so compare the other columns with it, not with 1. "
            if "reference" in selections
            else ""
        )
        + f"The guard changed the shortlist of {changed} of {result.sizes.postings} postings.",
        "",
        "![selection rates](figures/selection.png)",
        "",
        tables[2].markdown(),
        "",
        "![B_net](figures/bnet.png)",
        "",
        "## Verification",
        "",
        *verification_block(tables[3], checked),
    ]
    if result.simulated:
        lines += [
            "## What is simulated",
            "",
            "The LLM is biasbreaker's seeded fake (`model = biasbreaker-fake (simulated)`), not "
            "a language model: its ranker reproduces, by construction, the per-group top-1 "
            "rates Bloomberg measured for GPT-3.5; its skeptics re-rank the candidates "
            "group-blind. The data (jobs, resumes, names, measured rates) is real; the "
            "answers are not. Point `[llm] client` at a real endpoint to run the same "
            "pipeline on a model.",
            "",
        ]
    return "\n".join(lines)


__all__ = ["HiringOutputs", "write_hiring_outputs"]
