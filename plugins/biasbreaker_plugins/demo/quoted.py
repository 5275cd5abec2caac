"""The hiring demo's numbers that README.md and docs/demo.md quote, generated so they cannot drift.

A quoted passage sits in its document between two HTML comments that Markdown does not show::

    <!-- quoted: demo seed 0, 240 postings: summary -->
    ...the text the demo generated...
    <!-- /quoted -->

The demo writes the passages of its own run into ``report.md`` (section "Quoted by the
docs"), under the same markers; the markers, :func:`check` and :func:`update` are
:mod:`biasbreaker_plugins.quoted`'s, re-exported here. ``nox -s numbers``
runs the full demo and checks README.md and docs/demo.md; ``tests/plugins/test_demo.py``
checks the ``--quick`` run's passage in docs/demo.md. Each run carries three passages:
``summary`` (:func:`summary`, the README's paragraph), ``measured`` (:func:`measured`,
docs/demo.md's table of the run's figures) and ``recall`` (:func:`recall`, docs/demo.md's
"Recall, stated plainly"). A figure no passage carries (a wall time) is not generated and is
said apart from the passages.

Command line: ``python -m biasbreaker_plugins.demo.quoted check|update REPORT DOC...`` (exit
1 when a passage differs, naming it; ``update`` rewrites the documents atomically), the same
as ``python -m biasbreaker_plugins.quoted``.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence

from biasbreaker.calibration import CalibrationReport
from biasbreaker_plugins.demo.paired import Interval, Paired
from biasbreaker_plugins.demo.summary import Lean, Recall, Selection, TraceCounts, Verification
from biasbreaker_plugins.quoted import END, WIDTH, block, blocks, check, main, marker, update


def _trip_nodes(nodes: Sequence[str]) -> str:
    named = sorted(set(nodes))
    if not named:
        return ""
    if len(named) == 1:
        return f", at the {named[0]}"
    return ", at " + ", ".join(f"the {n}" for n in named)


def _verdict(change_excludes_zero: bool) -> str:
    return (
        "beyond the run's noise"
        if change_excludes_zero
        else "within the run's noise (its interval includes no change)"
    )


def summary(
    *,
    label: str,
    postings: int,
    guarded: TraceCounts,
    fresh: TraceCounts,
    trip_nodes: Sequence[str],
    triggers: Mapping[str, int],
    selections: Mapping[str, Selection],
    leans: Mapping[str, Lean],
    paired: Paired,
    checked: Verification,
) -> str:
    """The README's paragraph of measured figures, as one passage (see the module).

    Args:
        label: The run's label (``"demo seed 0, 240 postings"``).
        postings: Postings of the run.
        guarded: The guarded phase's trace counts.
        fresh: The fresh control runs' trace counts.
        trip_nodes: The node of each trip (transition ``trip``) of the guarded phase.
        triggers: Its trips per trigger (:func:`~biasbreaker_plugins.demo.summary.trip_triggers`).
        selections: Phase -> selection rates (``reference``, ``unguarded``, ``guarded``).
        leans: Phase -> preference lean.
        paired: The paired comparison of ``unguarded`` and ``guarded``.
        checked: Every trace of the run verified.
    """
    repairs = sum(guarded.repairs.values())
    lean_change = paired.lean[2] if paired.lean is not None else None
    ref = "reference" in selections
    holds = all(t.holds for t in checked.totals)
    traces = max((t.traces for t in checked.totals), default=0)
    text = (
        f"Measured ({label}): the breaker tripped on {guarded.runs_tripped} of {postings} "
        f"biased rankings ({guarded.trips} trips{_trip_nodes(trip_nodes)}: "
        f"{triggers['network']} by the network score, fast B_net, {triggers['node']} by the "
        f"node's own score); {repairs} were repaired, "
        f"{guarded.escalated_runs} wait for a human; **{fresh.runs_tripped} of {fresh.runs} "
        f"fresh control runs halted**; the shortlists' lean towards GPT-3.5's preferences (mean "
        f"measured weight of the shortlisted groups, 1 = none) went from "
        f"{leans['unguarded'].mean:.4f} to {leans['guarded'].mean:.4f}"
        + (f" (a group-blind ranker: {leans['reference'].mean:.4f})" if ref else "")
    )
    if lean_change is not None:
        text += (
            f", a paired change of {lean_change.estimate:+.4f} [{lean_change.low:+.4f}, "
            f"{lean_change.high:+.4f}] over {paired.postings} postings, "
            f"{_verdict(lean_change.excludes(0.0))}"
        )
    if paired.distance is not None:
        d = paired.distance[2]
        way = "closer to" if d.estimate < 0 else "further from"
        text += (
            f"; its distance from 1 changed by {d.estimate:+.4f} [{d.low:+.4f}, {d.high:+.4f}]: "
            f"{way} no lean, {_verdict(d.excludes(0.0))}"
        )
    impact = paired.impact[2]
    text += (
        f". The four-fifths impact ratio moved from {selections['unguarded'].min_impact:.2f} to "
        f"{selections['guarded'].min_impact:.2f}"
        + (
            f" (the group-blind ranker's own: {selections['reference'].min_impact:.2f})"
            if ref
            else ""
        )
        + f", a paired change of {impact.estimate:+.2f} [{impact.low:+.2f}, {impact.high:+.2f}], "
        f"{_verdict(impact.excludes(0.0))}. "
        + (
            f"Every property holds on all {traces} traces."
            if holds
            else "Not every property holds: see the report's verification table."
        )
    )
    return textwrap.fill(text, WIDTH, break_on_hyphens=False)


def _g(x: float) -> str:
    return f"{x:.4g}"


def _change(x: Interval, digits: int) -> str:
    return f"{x.estimate:+.{digits}f} [{x.low:+.{digits}f}, {x.high:+.{digits}f}]"


def _noise(x: Interval) -> str:
    return "beyond the run's noise" if x.excludes(0.0) else "within it"


def _properties(checked: Verification) -> str:
    parts = []
    for t in checked.totals:
        verdict = "HOLDS" if t.holds else f"VIOLATED on {t.traces - t.holding}"
        what = "recovery transitions" if t.name.startswith("RLB") else "checked"
        parts.append(f"{t.name} {verdict} ({t.checked} {what}, vacuous on {t.vacuous})")
    return "; ".join(parts)


def measured(
    *,
    postings: int,
    calibration: CalibrationReport,
    guarded: TraceCounts,
    fresh: TraceCounts,
    calls: int,
    trip_nodes: Sequence[str],
    triggers: Mapping[str, int],
    changed: int,
    selections: Mapping[str, Selection],
    leans: Mapping[str, Lean],
    paired: Paired,
    group_names: Mapping[str, str],
    checked: Verification,
) -> str:
    """docs/demo.md's table of a run's figures, as one passage (see the module).

    Args:
        postings: Postings of the run.
        calibration: The calibration the guarded phase ran with.
        guarded: The guarded phase's trace counts.
        fresh: The fresh control runs' trace counts.
        calls: The guarded phase's LLM calls.
        trip_nodes: The node of each trip of the guarded phase.
        triggers: Its trips per trigger (``network``, ``node``).
        changed: Postings whose shortlist the guard changed.
        selections: Phase -> selection rates (``unguarded``, ``guarded``, optionally
            ``reference``).
        leans: Phase -> preference lean (the same phases).
        paired: The paired comparison of ``unguarded`` and ``guarded``.
        group_names: Group -> its name in prose (``"B_W"`` -> ``"Black woman"``).
        checked: Every trace of the run verified.

    Returns:
        A Markdown table, one row per figure, the long cells not wrapped.
    """
    th, st = calibration.thresholds, calibration.statistics
    shown = [p for p in ("reference", "unguarded", "guarded") if p in selections]
    names = {"reference": "group-blind reference", "unguarded": "unguarded", "guarded": "guarded"}
    lowest = [selections[p].min_impact for p in shown]
    scored = (
        "all scored"
        if guarded.scored_steps == guarded.steps
        else f"{guarded.scored_steps} with a local score"
    )
    strategies = ", ".join(f"{n} {k}" for k, n in guarded.interventions.items()) or "none"
    level = f"{paired.confidence:.0%}".replace("%", " %")
    paired_cell = ""
    if paired.lean is not None:
        paired_cell += f"lean change **{_change(paired.lean[2], 4)}**, {_noise(paired.lean[2])}"
    if paired.distance is not None:
        d = paired.distance[2]
        way = "closer to" if d.estimate < 0 else "further from"
        paired_cell += f"; its distance from 1 **{_change(d, 4)}** ({way} no lean), {_noise(d)}"
    impact = paired.impact[2]
    moved = [
        f"{group_names.get(g, g)} ({_change(c, 3)})"
        for g, (_, _, c) in paired.rates.items()
        if c.excludes(0.0)
    ]
    paired_cell += (
        f"; lowest impact ratio change {_change(impact, 2)}, {_noise(impact)}; of the "
        f"{len(paired.rates)} groups' selection rates, "
        + (("moved beyond noise: " + ", ".join(moved)) if moved else "none moved beyond noise")
    )
    rows = [
        (
            f"calibration ({calibration.n_runs} control runs, target "
            f"{calibration.target_false_halt_rate})",
            f"tau_enter {_g(th.tau_enter)}, tau_exit {_g(th.tau_exit)}, tau_warn "
            f"{_g(th.tau_warn)}; window mean {_g(st.mean)}, std {_g(st.std)} over "
            f"{st.n_steps} steps",
        ),
        (
            f"**false halts on {fresh.runs} fresh control runs**",
            f"**{fresh.runs_tripped} of {fresh.runs}**",
        ),
        (
            f"guarded run, {postings} postings",
            f"{guarded.steps} guarded steps, {scored}; {calls:,} LLM calls; **{guarded.trips} "
            f"trips**{_trip_nodes(trip_nodes)}; interventions: {strategies}; "
            f"**{sum(guarded.repairs.values())} repairs** that passed their re-check, "
            f"{guarded.escalated_runs} escalations",
        ),
        ("shortlists changed by the guard", f"{changed} of {postings}"),
        (
            "lowest impact ratio (the four-fifths rule)",
            ", ".join(f"{names[p]} {selections[p].min_impact:.2f}" for p in shown)
            + (" — all below 0.8" if all(x < 0.8 for x in lowest) else ""),
        ),
        (
            "mean measured GPT-3.5 weight of the shortlisted groups (1 = no lean)",
            ", ".join(
                f"{names[p]} {leans[p].mean:.4f} [{leans[p].mean - leans[p].half_width:.4f}, "
                f"{leans[p].mean + leans[p].half_width:.4f}]"
                for p in shown
            ),
        ),
        (
            f"**paired, the same {paired.postings} postings {paired.before} and "
            f"{paired.after}** ({level} percentile bootstrap over postings, "
            f"{paired.replicates:,} resamples, seed {paired.seed}; the report's headline)",
            paired_cell,
        ),
        (
            "trips by trigger",
            f"{triggers['network']} network (fast B_net ≥ tau_enter), {triggers['node']} node "
            "(the node's own score ≥ tau_enter, fast B_net below)",
        ),
        (f"properties, {max((t.traces for t in checked.totals), default=0)} traces",
         _properties(checked)),
    ]  # fmt: skip
    return "\n".join(["| | measured |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])


_MISSED = {
    "not_applicable": "the probe was not applicable (no protected mention found)",
    "not_sampled": "the step was not sampled (probe_rate)",
    "unsupported_language": "the probe does not support the input's language",
    "unreadable": "the probe could not read the output",
    "no probe": "the trace records no probe for the ranker step",
    "no step": "the trace has no ranker step",
    "other": "scored at or above tau_enter, yet no trip",
}
"""Why a posting whose shortlist the bias changed did not trip, besides a score below
tau_enter (``Recall.missed``'s reasons)."""


_FEW_SCORES = 6
"""Below-threshold scores with at most this many distinct values are listed one by one
(the decision scorer's are a grid); more are given as their range."""


def recall(x: Recall, *, shortlist: int) -> str:
    """docs/demo.md's "Recall, stated plainly", as one passage (see the module).

    Args:
        x: The run's recall (:func:`~biasbreaker_plugins.demo.summary.recall`).
        shortlist: The shortlist's length (the top ``shortlist`` of a ranking).
    """
    text = (
        f"Of the {x.compared} biased rankings, {x.ranking_changed} order the applicants "
        "otherwise than the group-blind ranker does on the same posting, and "
        f"**{x.changed} change the shortlist** (the top {shortlist}, as a set). "
    )
    text += (
        f"The breaker **tripped on {x.tripped} of those {x.changed} "
        f"({x.tripped / x.changed:.0%})**."
        if x.changed
        else "So this run does not measure the breaker's recall on them."
    )
    others = x.changed - x.tripped
    below = x.missed.get("below tau_enter", 0)
    if others:
        text += f" Of the other {others}, "
        parts = []
        if below and x.tau_enter is not None:
            counts = Counter(x.below)
            if len(counts) <= _FEW_SCORES:
                scores = ", ".join(
                    f"{n} at {_g(v)} ({_g(x.tau_enter - v)} below it)"
                    for v, n in sorted(counts.items(), reverse=True)
                )
            else:
                scores = f"from {_g(x.below[0])} to {_g(x.below[-1])}"
            parts.append(
                f"{'all' if below == others else below} were probed and scored, and the "
                "ranker's local score was **below "
                f"tau_enter {_g(x.tau_enter)}**: {scores}"
            )
        parts += [
            f"{n}: {_MISSED.get(reason, reason)}"
            for reason, n in x.missed.items()
            if reason != "below tau_enter" and n
        ]
        text += "; ".join(parts) + "."
    text += (
        f" **{x.tripped_unchanged} of the {x.unchanged} postings whose shortlist the bias left "
        f"alone tripped too** ({x.tripped_unchanged_ranking} of them with a biased order below "
        "the shortlist)."
    )
    return textwrap.fill(text, WIDTH, break_on_hyphens=False)


__all__ = [
    "END",
    "WIDTH",
    "block",
    "blocks",
    "check",
    "main",
    "marker",
    "measured",
    "recall",
    "summary",
    "update",
]


if __name__ == "__main__":
    raise SystemExit(main())
