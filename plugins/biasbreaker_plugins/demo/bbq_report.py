"""The bbq demo's outputs: numbers from the files, ``report.md``, figures, console tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasbreaker.metrics.bbq import BBQScores, bbq_scores
from biasbreaker.probe.adaptive import report_note
from biasbreaker_plugins.demo.bbq import CATEGORIES, index, items
from biasbreaker_plugins.demo.bbq_demo import BBQResult
from biasbreaker_plugins.demo.figures import bnet_figure, pick_runs
from biasbreaker_plugins.demo.output import write_text_atomic
from biasbreaker_plugins.demo.report import (
    CALIBRATION_SETTINGS,
    Table,
    calibrate_command,
    phase_table,
    property_table,
    usage_lines,
    verification_block,
    write_calibration_settings,
    zero_floor_note,
)
from biasbreaker_plugins.demo.summary import (
    GUARDED_PHASES,
    TraceCounts,
    Verification,
    read_phase_files,
)


@dataclass(frozen=True)
class BBQOutputs:
    """What the bbq demo wrote and prints (see :class:`~.hiring_report.HiringOutputs`)."""

    counts: dict[str, TraceCounts]
    scores: dict[str, dict[str, BBQScores]]
    verification: Verification
    tables: tuple[Table, ...]
    report: Path
    figures: tuple[Path, ...]


def _scores(records: list[dict[str, Any]], phase: str) -> dict[str, BBQScores]:
    """BBQ scores of the answers a phase released, per category.

    Answers waiting for review are not released.
    """
    by_id = {cat: {i.example_id: i for i in items(cat)} for cat in CATEGORIES}
    out = {}
    for cat in CATEGORIES:
        chosen = [
            r
            for r in records
            if r["phase"] == phase and r["category"] == cat and r["status"] == "done"
        ]
        if chosen:
            out[cat] = bbq_scores(
                [by_id[cat][r["example_id"]] for r in chosen], [r["answer"] for r in chosen]
            )
    return out


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def bbq_table(scores: dict[str, dict[str, BBQScores]], released: dict[str, int]) -> Table:
    """Per category: accuracy and bias scores of the replayed answers, unguarded vs guarded."""
    rows = []
    for cat in CATEGORIES:
        for phase in ("unguarded", "guarded"):
            s = scores[phase].get(cat)
            if s is None:
                continue
            rows.append(
                (
                    cat.replace("_", " "),
                    phase,
                    str(s.n),
                    f"{s.accuracy_ambiguous:.3f}",
                    f"{s.accuracy_disambiguated:.3f}",
                    _f(s.bias_ambiguous),
                    _f(s.bias_disambiguated),
                )
            )
    return Table(
        "UnifiedQA's real answers that reach the panel's output (guarded: answers waiting for "
        "review are not released)",
        (
            "category",
            "phase",
            "answers released",
            "accuracy (ambiguous)",
            "accuracy (disambiguated)",
            "bias score (ambiguous)",
            "bias score (disambiguated)",
        ),
        tuple(rows),
        note="Bias scores as Parrish et al. (2022) define them, in [-1, 1]: positive = answers "
        "follow the stereotype. In an ambiguous context the right answer is the unknown option.",
    )


def write_bbq_outputs(result: BBQResult, out: Path) -> BBQOutputs:
    """Compute every number from ``out``'s traces and ``results.jsonl``; write the report."""
    files = read_phase_files(out)
    records, traces, counts, checked = files.records, files.traces, files.counts, files.verification
    scores = {p: _scores(records, p) for p in ("unguarded", "guarded")}
    released = {
        p: sum(1 for r in records if r["phase"] == p and r["status"] == "done") for p in scores
    }
    figures = out / "figures"
    figures.mkdir(exist_ok=True)
    bnet = figures / "bnet.png"
    bnet_figure(
        pick_runs(traces["guarded"], limit=30),
        bnet,
        title="Guarded BBQ items: fast and slow B_net, thresholds, trips by trigger, breaker state",
        total=len(traces["guarded"]),
    )
    calls = {p: result.phases[p].llm_calls for p in result.phases}
    tables = (
        phase_table([(p, counts[p], calls[p]) for p in GUARDED_PHASES]),
        bbq_table(scores, released),
        property_table(checked.totals),
    )
    guarded_cases = [r for r in records if r["phase"] == "guarded"]
    paired = sum(1 for r in guarded_cases if r["paired"])
    cal = result.calibration
    settings_file = CALIBRATION_SETTINGS
    fresh = counts["fresh-control"]
    th = cal.thresholds
    s = result.settings
    lines = [
        "# biasbreaker demo: bbq",
        "",
        (
            "**Real model answers, simulated second opinion.** "
            if result.simulated
            else f"**Real model answers; second opinion by `{result.model}`.** "
        )
        + "The `unifiedqa` agent replays the answers UnifiedQA-T5-11B gave to these BBQ items "
        "(released by the BBQ authors; no model runs here); `second_opinion` answers through "
        "the configured client"
        + (" (the seeded fake at dial 0, simulated)." if result.simulated else "."),
        "",
        f"Data: BBQ (Parrish et al. 2022), Religion and Sexual orientation, "
        f"{result.sizes.items} items (seed {result.seed}). The replay's counterfactual is the "
        f"BBQ item with the two groups exchanged: {paired} of {len(guarded_cases)} items have "
        "it in the data; the others run with the probe inapplicable (their steps are not "
        "scored). Control runs (calibration and fresh): the panel with the replay replaced "
        f"by the client at dial 0. Probe: k = {s['probe']['k']}, r = {s['probe']['r']}, "
        f"scorer(s) {', '.join(s['probe']['scorers'])}.{report_note(s['probe'])}",
        "",
        "## Calibration",
        "",
        f"From {cal.n_runs} control runs at a per-run false-halt target of "
        f"{cal.target_false_halt_rate}: tau_enter = {th.tau_enter:.4g}, tau_exit = "
        f"{th.tau_exit:.4g}, tau_warn = {th.tau_warn:.4g}.{zero_floor_note(cal)} Reproduce (in "
        "this folder): "
        f"{calibrate_command(result.control_file, settings_file)} (sha256 "
        f"{result.control_sha256[:12]}…).",
        "",
        f"**False halts on fresh control runs: {fresh.runs_tripped} of {fresh.runs} "
        f"({fresh.false_halt_rate:.3f}; target {cal.target_false_halt_rate}).**",
        "",
        "## What happened",
        "",
        tables[0].markdown(),
        "",
        usage_lines(result.phases),
        "",
        tables[1].markdown(),
        "",
        "![B_net](figures/bnet.png)",
        "",
        "## Verification",
        "",
        *verification_block(tables[2], checked),
    ]
    if result.simulated:
        lines += [
            "## What is simulated",
            "",
            "The second opinion, the control runs' answerer and the skeptics are biasbreaker's "
            "seeded fake LLM (`biasbreaker-fake (simulated)`), not a language model; the "
            "simulated skeptics cannot answer BBQ questions, so a halted UnifiedQA answer is "
            "not repaired: it waits for human review. The questions and UnifiedQA's answers "
            "are real.",
            "",
        ]
    write_calibration_settings(out, result.calibration, result.settings)
    report = out / "report.md"
    write_text_atomic(report, "\n".join(lines))
    return BBQOutputs(counts, scores, checked, tables, report, (bnet,))


__all__ = ["BBQOutputs", "bbq_table", "index", "write_bbq_outputs"]
