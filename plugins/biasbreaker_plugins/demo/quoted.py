"""The hiring demo's numbers that README.md and docs/demo.md quote, generated so they cannot drift.

A quoted passage sits in its document between two HTML comments that Markdown does not show::

    <!-- quoted: demo seed 0, 240 postings: summary -->
    ...the text the demo generated...
    <!-- /quoted -->

The demo writes the passages of its own run into ``report.md`` (section "Quoted by the
docs"), under the same markers; the markers, :func:`check` and :func:`update` are
:mod:`biasbreaker_plugins.quoted`'s, re-exported here. ``nox -s numbers``
runs the full demo and checks README.md and docs/demo.md; ``tests/plugins/test_demo.py``
checks the ``--quick`` run's passage in docs/demo.md. A figure no passage carries (a wall
time) is not generated and is said apart from the passages.

Command line: ``python -m biasbreaker_plugins.demo.quoted check|update REPORT DOC...`` (exit
1 when a passage differs, naming it; ``update`` rewrites the documents atomically), the same
as ``python -m biasbreaker_plugins.quoted``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

from biasbreaker_plugins.demo.paired import Paired
from biasbreaker_plugins.demo.summary import Lean, Selection, TraceCounts, Verification
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


__all__ = ["END", "WIDTH", "block", "blocks", "check", "main", "marker", "summary", "update"]


if __name__ == "__main__":
    raise SystemExit(main())
