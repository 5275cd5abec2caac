"""The hiring demo's outputs: numbers from the files, ``report.md``, figures, console lines."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasbreaker.probe.adaptive import report_note
from biasbreaker_plugins.demo.figures import bnet_figure, lean_figure, pick_runs, selection_figure
from biasbreaker_plugins.demo.hiring import BIASED_AGENT, GROUPS, group_label, measured_rates
from biasbreaker_plugins.demo.hiring_demo import HiringResult
from biasbreaker_plugins.demo.output import write_text_atomic
from biasbreaker_plugins.demo.paired import Interval, Paired, compare
from biasbreaker_plugins.demo.quoted import block, measured, summary
from biasbreaker_plugins.demo.quoted import recall as recall_passage
from biasbreaker_plugins.demo.report import (
    CALIBRATION_SETTINGS,
    Table,
    calibrate_command,
    estimate_lines,
    phase_table,
    property_table,
    selection_table,
    usage_lines,
    verification_block,
    write_calibration_settings,
    zero_floor_note,
)
from biasbreaker_plugins.demo.summary import (
    GUARDED_PHASES,
    Lean,
    Recall,
    Selection,
    TraceCounts,
    Verification,
    lean,
    read_phase_files,
    recall,
    selection,
    trip_triggers,
)

_LABELS = {"reference": "group-blind ranker", "unguarded": "unguarded", "guarded": "guarded"}


@dataclass(frozen=True)
class HiringOutputs:
    """What the demo wrote and prints.

    Args:
        counts: Phase -> what its traces record.
        selections: ``unguarded`` and ``guarded`` selection rates.
        changed: Postings whose shortlist the guard changed (as a set of names).
        recall: Of the postings whose shortlist the bias changed, those the breaker tripped on
            and why not the others (``None`` without a group-blind reference phase).
        verification: Every trace verified.
        tables: The tables, in report order: phases, selection, lean, recall (when there is a
            group-blind reference phase), verified properties (last).
        report: Path of ``report.md``.
        figures: Paths of the PNG figures.
        paired: The unguarded and guarded phases compared on the same postings, with
            bootstrap intervals (``None`` when either phase did not run).
        headline: The report's leading sentence on that comparison (``""`` without it).
    """

    counts: dict[str, TraceCounts]
    selections: dict[str, Selection]
    changed: int
    verification: Verification
    tables: tuple[Table, ...]
    report: Path
    figures: tuple[Path, ...]
    recall: Recall | None = None
    paired: Paired | None = None
    headline: str = ""


PAIRED_REPLICATES = 2000
"""Bootstrap replicates of the paired comparison (:mod:`biasbreaker_plugins.demo.paired`)."""


def _interval(x: Interval, digits: int) -> str:
    return f"{x.estimate:.{digits}f} [{x.low:.{digits}f}, {x.high:.{digits}f}]"


def _beyond(change: Interval) -> str:
    if change.excludes(0.0):
        return "yes: its interval excludes 0"
    return "no: its interval includes 0"


def paired_table(p: Paired, labels: dict[str, str]) -> Table:
    """The paired comparison: each statistic before, after and its change, with intervals."""
    rows: list[tuple[str, ...]] = []
    named: list[tuple[str, tuple[Interval, Interval, Interval], int]] = []
    if p.lean is not None:
        named.append(("preference lean (1 = none)", p.lean, 4))
    if p.distance is not None:
        named.append(("the lean's distance from 1 (0 = none)", p.distance, 4))
    named.append(("lowest impact ratio", p.impact, 2))
    named += [(f"selection rate: {labels.get(g, g)}", v, 3) for g, v in p.rates.items()]
    for name, (b, a, c), digits in named:
        rows.append(
            (name, _interval(b, digits), _interval(a, digits), _interval(c, digits), _beyond(c))
        )
    level = f"{p.confidence:.0%}"
    return Table(
        f"Paired: the same {p.postings} postings {p.before} and {p.after} ({level} percentile "
        f"bootstrap intervals over postings, {p.replicates} resamples, seed {p.seed})",
        (
            "statistic",
            f"{p.before} [{level}]",
            f"{p.after} [{level}]",
            f"change [{level}]",
            "change beyond this run's noise",
        ),
        tuple(rows),
        note=(
            f"{p.left_out} posting(s) of these phases without a shortlist in both (waiting "
            "for review, or ended without one) are left out of the pairs."
            if p.left_out
            else ""
        ),
    )


def headline(p: Paired, recalled: Recall | None = None) -> str:
    """The report's first result: what the paired comparison supports, with its interval.

    With the group-blind reference (``recalled``), it first says on how many postings the
    bias changed the shortlist: where it changed none, every change after is the guard's own.
    """
    level = f"{p.confidence:.0%}"
    parts = [
        f"**Headline** (the same {p.postings} postings run {p.before} and {p.after}; "
        f"{level} percentile bootstrap over postings, {p.replicates} resamples)."
    ]
    if recalled is not None:
        parts.append(
            f"The ranker's bias changed the shortlist of {recalled.changed} of "
            f"{recalled.compared} postings (against the group-blind ranker's)"
            + (
                ": none, so every change below is the guard's own."
                if recalled.changed == 0
                else "."
            )
        )
    for name, (b, a, c), digits in (
        *((("The preference lean", p.lean, 4),) if p.lean is not None else ()),
        ("The lowest impact ratio", p.impact, 2),
    ):
        verdict = (
            "beyond this run's noise"
            if c.excludes(0.0)
            else "within this run's noise: at this number of postings the demo cannot tell "
            "this change from no change"
        )
        parts.append(
            f"{name} went from {b.estimate:.{digits}f} to {a.estimate:.{digits}f}: a change of "
            f"{c.estimate:+.{digits}f} [{c.low:+.{digits}f}, {c.high:+.{digits}f}], {verdict}."
        )
        if name == "The preference lean" and p.distance is not None:
            parts.append(closer(p.distance[2]))
    return " ".join(parts)


def closer(change: Interval) -> str:
    """Say which way the lean's distance from 1 (no lean) moved, and whether beyond noise."""
    way = "closer to" if change.estimate < 0 else "further from"
    noise = "beyond" if change.excludes(0.0) else "within"
    return (
        f"Its distance from 1 (no lean) changed by {change.estimate:+.4f} [{change.low:+.4f}, "
        f"{change.high:+.4f}]: the guarded shortlists are {way} group-blind, {noise} this run's "
        "noise."
    )


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _short_note(demo: dict[str, Any]) -> str:
    """The report's sentence on ``[demo] prompts = "short"`` (none for full prompts)."""
    if demo.get("prompts") != "short":
        return ""
    from biasbreaker_plugins.demo.hiring_graph import SHORT_CHARS

    return (
        f' Short prompts (`[demo] prompts = "short"`): the job description\'s first '
        f"sentences and each resume's first {SHORT_CHARS} characters, each request's "
        "max_tokens sized to its answer."
    )


def _smoothing(propagation: dict[str, Any]) -> str:
    if propagation["fast_smoothing"]:
        return f"{propagation['fast_smoothing']:g}"
    return f"from a half-life of {propagation['fast_half_life']:g} steps"


def triggers_line(triggers: dict[str, int], runs: int) -> str:
    """Say which trigger fired the guarded phase's trips (:func:`summary.trip_triggers`)."""
    return (
        f"Trips by trigger, over all {runs} guarded runs: {triggers['network']} network "
        f"(fast B_net >= tau_enter), {triggers['node']} node (the guarded node's own score >= "
        "tau_enter while fast B_net stayed below it: the network average dilutes one biased "
        "node of a chain)."
    )


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


_MISS_LABELS = {
    "below tau_enter": "the ranker's local score was below tau_enter",
    "not_applicable": "the probe was not applicable (no protected mention found)",
    "not_sampled": "the step was not sampled (probe_rate)",
    "unsupported_language": "the probe does not support the input's language",
    "unreadable": "the probe could not read the output",
    "no probe": "the trace records no probe for the ranker step",
    "no step": "the trace has no ranker step",
    "other": "other (scored at or above tau_enter, yet no trip)",
}

_FEW_SCORES = 6
"""Below-threshold scores with at most this many distinct values are listed one by one."""

_ALWAYS_SHOWN = ("below tau_enter", "not_applicable", "not_sampled")
"""Reasons the recall table lists even at 0; the others only when they occur."""


def _below(x: Recall) -> str:
    """The local scores of the below-threshold misses and how far below tau_enter they are.

    A few distinct scores (at most :data:`_FEW_SCORES`; the decision scorer's are a grid)
    are listed with their counts, highest first; more as their range and median.
    """
    if not x.below or x.tau_enter is None:
        return ""
    lo, hi = x.below[0], x.below[-1]
    counts = Counter(x.below)
    if len(counts) <= _FEW_SCORES:
        scores = ", ".join(f"{_fmt(v)} x{n}" for v, n in sorted(counts.items(), reverse=True))
    else:
        n = len(x.below)
        mid = x.below[n // 2] if n % 2 else (x.below[n // 2 - 1] + x.below[n // 2]) / 2
        scores = f"{_fmt(lo)} to {_fmt(hi)}, median {_fmt(mid)}"
    return (
        f"local score {scores}: {_fmt(x.tau_enter - hi)} to {_fmt(x.tau_enter - lo)} below "
        f"tau_enter {_fmt(x.tau_enter)}"
    )


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole}" + (f" ({part / whole:.0%})" if whole else "")


def recall_table(x: Recall) -> Table:
    """The postings whose shortlist the ranker's bias changed, and what the breaker did."""
    rows = [
        ("postings compared (a shortlist in the group-blind and the unguarded run)",
         str(x.compared), ""),
        ("the biased ranking differs from the group-blind ranking", str(x.ranking_changed),
         "order anywhere in the eight"),
        ("the bias changed the shortlist", str(x.changed),
         "unguarded shortlist differs from the group-blind one (as a set)"),
        ("... the breaker tripped on the guarded run", _share(x.tripped, x.changed), ""),
    ]  # fmt: skip
    for reason, label in _MISS_LABELS.items():
        n = x.missed.get(reason, 0)
        if n or reason in _ALWAYS_SHOWN:
            detail = _below(x) if reason == "below tau_enter" else ""
            rows.append((f"... no trip: {label}", str(n), detail))
    rows += [
        ("the bias left the shortlist as it was", str(x.unchanged), ""),
        ("... the breaker tripped anyway", _share(x.tripped_unchanged, x.unchanged),
         f"{x.tripped_unchanged_ranking} of them with a biased ranking that differs below the "
         "shortlist"),
    ]  # fmt: skip
    return Table(
        "Recall: the postings whose shortlist the ranker's bias changed, and the breaker",
        ("postings", "count", "detail"),
        tuple(rows),
        note="Per posting, the unguarded run's shortlist (the ranker biased) against the "
        "group-blind run's (every agent at dial 0), from results.jsonl; trips and the ranker "
        "step's probe status and local score from the guarded run's trace (the first ranker "
        "step; the breaker trips when a node's own score or the fast B_net reaches tau_enter).",
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
        title="Guarded postings: fast and slow B_net, thresholds, trips by trigger, breaker state",
        total=len(traces["guarded"]),
    )
    sel_png = figures_dir / "selection.png"
    sel_pairs = [(_LABELS[p], selections[p]) for p in shown]
    selection_figure(sel_pairs, labels, sel_png, title="Shortlist selection rate per group")
    calls = {p: result.phases[p].llm_calls for p in result.phases}
    leans = {p: lean(records, p, measured_rates(), len(GROUPS)) for p in shown}
    lean_png = figures_dir / "lean.png"
    lean_figure(
        [(_LABELS[p], leans[p]) for p in shown],
        lean_png,
        title="How far each phase's shortlists follow GPT-3.5's measured preferences",
    )
    recalled = None
    if "reference" in shown and "unguarded" in shown and "guarded" in shown:
        traced = [r["thread"] for r in records if r["phase"] == "guarded" and r["trace"]]
        by_thread = dict(zip(traced, traces["guarded"], strict=True))
        recalled = recall(records, by_thread, BIASED_AGENT)
    tables = (
        phase_table([(p, counts[p], calls[p]) for p in GUARDED_PHASES]),
        selection_table(sel_pairs, labels),
        lean_table([(_LABELS[p], leans[p]) for p in shown]),
        *(() if recalled is None else (recall_table(recalled),)),
        property_table(checked.totals),
    )
    write_calibration_settings(out, result.calibration, result.settings)
    report = out / "report.md"
    by_trigger = trip_triggers(traces["guarded"])
    triggers = triggers_line(by_trigger, len(traces["guarded"]))
    paired = None
    lead = quoted = ""
    if "unguarded" in shown and "guarded" in shown:
        weights = {key: len(GROUPS) * rate for key, rate in measured_rates().items()}
        paired = compare(
            records, GROUPS, weights=weights, seed=result.seed, replicates=PAIRED_REPLICATES
        )
        lead = headline(paired, recalled)
        run = f"demo seed {result.seed}, {result.sizes.postings} postings"
        trip_nodes = [
            r.node or "?" for t in traces["guarded"] for r in t.records if r.transition == "trip"
        ]
        quoted = block(
            f"{run}: summary",
            summary(
                label=run,
                postings=result.sizes.postings,
                guarded=counts["guarded"],
                fresh=counts["fresh-control"],
                trip_nodes=trip_nodes,
                triggers=by_trigger,
                selections=selections,
                leans=leans,
                paired=paired,
                checked=checked,
            ),
        )
        quoted += "\n\n" + block(
            f"{run}: measured",
            measured(
                postings=result.sizes.postings,
                calibration=result.calibration,
                guarded=counts["guarded"],
                fresh=counts["fresh-control"],
                calls=calls["guarded"],
                trip_nodes=trip_nodes,
                triggers=by_trigger,
                changed=changed,
                selections=selections,
                leans=leans,
                paired=paired,
                group_names=labels,
                checked=checked,
            ),
        )
        if recalled is not None:
            quoted += "\n\n" + block(
                f"{run}: recall",
                recall_passage(recalled, shortlist=result.settings["demo"]["shortlist"]),
            )
    text = _markdown(
        result,
        counts,
        selections,
        changed,
        checked,
        tables,
        calls,
        triggers,
        () if paired is None else (lead, paired_table(paired, labels)),
        quoted,
    )
    write_text_atomic(report, text)
    return HiringOutputs(
        counts,
        selections,
        changed,
        checked,
        tables,
        report,
        (bnet, sel_png, lean_png),
        recalled,
        paired,
        lead,
    )


def _markdown(
    result: HiringResult,
    counts: dict[str, TraceCounts],
    selections: dict[str, Selection],
    changed: int,
    checked: Verification,
    tables: tuple[Table, ...],
    calls: dict[str, int],
    triggers: str,
    lead: tuple[str, Table] | tuple[()],
    quoted: str,
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
        f"resamples, scorer(s) {', '.join(s['probe']['scorers'])}.{report_note(s['probe'])} "
        "Fast EWMA smoothing "
        f"{_smoothing(s['propagation'])}, router `{s['intervention']['router']}`, skeptics "
        f"{', '.join(s['intervention']['skeptics'])} ({s['intervention']['aggregator']})."
        + _short_note(s["demo"]),
        "",
        *(() if not lead else (lead[0], "", lead[1].markdown(), "")),
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
        usage_lines(result.phases),
        "",
        *(() if result.estimate is None else (estimate_lines(result.estimate, result.phases), "")),
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
        "![preference lean](figures/lean.png)",
        "",
        "![B_net](figures/bnet.png)",
        "",
        triggers,
        "",
        *(
            (
                "## Recall: the bias that changed a shortlist",
                "",
                "Which postings the ranker's bias mattered on (its shortlist is not the "
                "group-blind one), whether the breaker tripped on them, and why not where it "
                "did not; and the trips on postings whose shortlist the bias left as it was.",
                "",
                tables[3].markdown(),
                "",
            )
            if len(tables) > 4
            else ()
        ),
        "## Verification",
        "",
        *verification_block(tables[-1], checked),
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
    if quoted:
        lines += [
            "## Quoted by the docs",
            "",
            "README.md and docs/demo.md quote these passages of a run with this seed and size "
            "word for word (`python -m biasbreaker_plugins.demo.quoted check report.md "
            "README.md docs/demo.md` compares them).",
            "",
            quoted,
            "",
        ]
    return "\n".join(lines)


__all__ = ["HiringOutputs", "write_hiring_outputs"]
