"""The numbers of a guarded run, computed from its run traces and ``results.jsonl`` only.

Everything the demo and ``biasbreaker run`` print and write into ``report.md`` is computed here
from the files they wrote, never from in-memory state, so a reader (and the tests) can
recompute every number from the output folder:

* :func:`trace_counts` — per phase, from the traces: runs, guarded steps, steps whose node had
  a local score, trips, interventions by strategy, repairs (interventions whose measured
  re-check passed), escalations;
* :func:`selection` — per phase, from ``results.jsonl``: the shortlist's selection rate per
  group and the disparate-impact ratios (rate / highest rate, the four-fifths rule);
* :func:`verification` — :func:`biasbreaker.verify.verify_trace` on every trace, each
  property's verdict aggregated over them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasbreaker.trace import Trace, read_trace
from biasbreaker.types import BreakerState
from biasbreaker.verify.traceset import PropertyTotal, TraceSetVerification, verify_traces
from biasbreaker_plugins.demo.driver import read_results

TRIPPED_STATES = frozenset(
    {BreakerState.INTERVENTION, BreakerState.RECOVERY, BreakerState.ESCALATED}
)


@dataclass(frozen=True)
class TraceCounts:
    """What the traces of one phase record.

    Args:
        runs: Traces (one per thread whose graph stepped the breaker).
        steps: Guarded steps (trace records), re-steps of held outputs included.
        scored_steps: Steps whose node had a local score (probed and applicable).
        trips: Steps at which the breaker tripped (transition ``trip``).
        runs_tripped: Runs with at least one step in a tripped state.
        interventions: Intervention attempts, by strategy (``skeptics``, ``madera``, ``none``).
        repairs: Attempts whose repair passed its measured re-check (``recheck_score <
            tau_exit``, converged, no error), by strategy.
        failed_interventions: Attempts that raised (error recorded), by strategy.
        escalated_runs: Runs that ended ESCALATED (their output waits for a human).
        held_steps: Steps whose output was held (``halt``, ``reroute`` or ``escalate``).
        final_states: Final state of each run -> count.
    """

    runs: int
    steps: int
    scored_steps: int
    trips: int
    runs_tripped: int
    interventions: Mapping[str, int]
    repairs: Mapping[str, int]
    failed_interventions: Mapping[str, int]
    escalated_runs: int
    held_steps: int
    final_states: Mapping[str, int]

    @property
    def false_halt_rate(self) -> float:
        """Share of runs with a trip (meaningful on control runs: a false halt)."""
        return self.runs_tripped / self.runs if self.runs else 0.0


def trace_counts(traces: Iterable[Trace]) -> TraceCounts:
    """Count what ``traces`` record (see :class:`TraceCounts`).

    ``traces`` is read once, so a generator reading them one by one keeps one in memory.
    """
    runs = 0
    steps = scored = trips = tripped = escalated = held = 0
    interventions: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    finals: Counter[str] = Counter()
    for trace in traces:
        runs += 1
        tau_exit = trace.header.thresholds.tau_exit
        records = trace.records
        steps += len(records)
        scored += sum(1 for r in records if r.node is not None and r.node in r.scores)
        trips += sum(1 for r in records if r.transition == "trip")
        held += sum(1 for r in records if r.action.value != "proceed")
        if any(r.state in TRIPPED_STATES for r in records):
            tripped += 1
        for r in records:
            if r.intervention is None:
                continue
            summary = r.intervention
            strategy = str(summary.get("strategy"))
            interventions[strategy] += 1
            score = summary.get("recheck_score")
            if summary.get("error"):
                failed[strategy] += 1
            elif summary.get("converged") and isinstance(score, (int, float)) and score < tau_exit:
                repairs[strategy] += 1
        if records:
            final = records[-1].state
            finals[final.value] += 1
            if final is BreakerState.ESCALATED:
                escalated += 1
    return TraceCounts(
        runs=runs,
        steps=steps,
        scored_steps=scored,
        trips=trips,
        runs_tripped=tripped,
        interventions=dict(sorted(interventions.items())),
        repairs=dict(sorted(repairs.items())),
        failed_interventions=dict(sorted(failed.items())),
        escalated_runs=escalated,
        held_steps=held,
        final_states=dict(sorted(finals.items())),
    )


@dataclass(frozen=True)
class Selection:
    """Per-group selection rates of one phase's shortlists.

    Args:
        groups: The groups, in table order.
        decided: Postings with a shortlist (the denominators).
        waiting: Postings paused for human review (no shortlist yet).
        empty: Postings whose pipeline ended without a shortlist (an unreadable ranking).
        selected: Group -> postings in which its candidate is on the shortlist.
        rates: Group -> ``selected / decided``.
        impact: Group -> rate / the highest rate (disparate-impact ratio; < 0.8 fails the
            four-fifths rule).
    """

    groups: tuple[str, ...]
    decided: int
    waiting: int
    empty: int
    selected: Mapping[str, int]
    rates: Mapping[str, float]
    impact: Mapping[str, float]

    @property
    def min_impact(self) -> float:
        """The lowest disparate-impact ratio."""
        return min(self.impact.values()) if self.impact else 0.0


def selection(records: Iterable[Mapping[str, Any]], phase: str, groups: Sequence[str]) -> Selection:
    """Selection rates of ``phase`` from ``results.jsonl`` records.

    A group is selected in a posting when its candidate is on the shortlist. Rates are over
    the postings that have a shortlist; postings waiting for review are counted apart.

    Source:
        Selection rate and impact ratio: Uniform Guidelines on Employee Selection Procedures,
        29 CFR 1607.4(D) (the four-fifths rule), as in Bloomberg's ``performance_ranking.csv``.
    """
    decided = waiting = empty = 0
    selected: Counter[str] = Counter()
    for rec in records:
        if rec.get("phase") != phase:
            continue
        if rec.get("status") == "review":
            waiting += 1
            continue
        shortlist = rec.get("shortlist") or []
        if not shortlist:
            empty += 1
            continue
        decided += 1
        by_name = rec.get("groups") or {}
        for g in {by_name[name] for name in shortlist if name in by_name}:
            selected[g] += 1
    rates = {g: (selected[g] / decided if decided else 0.0) for g in groups}
    best = max(rates.values(), default=0.0)
    impact = {g: (r / best if best > 0 else 0.0) for g, r in rates.items()}
    return Selection(
        tuple(groups), decided, waiting, empty, {g: selected[g] for g in groups}, rates, impact
    )


@dataclass(frozen=True)
class Lean:
    """How far a phase's shortlists follow a measured preference.

    Args:
        postings: Postings with a shortlist.
        mean: Mean over postings of the mean weight of the shortlisted candidates' groups;
            the weight is ``number of groups x measured top-1 rate``, so a group-blind pipeline
            has expectation 1 and a shortlist that follows the preference is above 1.
        half_width: Half-width of the normal 95% interval of ``mean`` (1.96 standard errors
            over postings).
    """

    postings: int
    mean: float
    half_width: float


def lean(
    records: Iterable[Mapping[str, Any]],
    phase: str,
    rates: Mapping[tuple[str, str], float],
    n_groups: int,
) -> Lean:
    """The preference lean of ``phase``'s shortlists (see :class:`Lean`).

    Args:
        records: ``results.jsonl`` records (with ``job``, ``groups`` and ``shortlist``).
        phase: The phase.
        rates: ``(job, group)`` -> measured top-1 selection rate.
        n_groups: The number of groups per posting (the weight is ``n_groups x rate``).
    """
    per_posting = []
    for rec in records:
        if rec.get("phase") != phase or rec.get("status") != "done" or not rec.get("shortlist"):
            continue
        weights = [n_groups * rates[(rec["job"], rec["groups"][n])] for n in rec["shortlist"]]
        per_posting.append(math.fsum(weights) / len(weights))
    n = len(per_posting)
    if n == 0:
        return Lean(0, 0.0, 0.0)
    mean = math.fsum(per_posting) / n
    var = math.fsum((x - mean) ** 2 for x in per_posting) / (n - 1) if n > 1 else 0.0
    return Lean(n, mean, 1.96 * math.sqrt(var / n))


GUARDED_PHASES: tuple[str, ...] = ("calibration", "guarded", "fresh-control")
"""The demo's phases that run through the guard and write run traces."""


@dataclass(frozen=True)
class PhaseFiles:
    """What a demo's output folder records, read back: the numbers' only source.

    Args:
        records: ``results.jsonl``, one record per run and phase.
        traces: Phase -> its runs' traces, in ``results.jsonl`` order.
        counts: Phase -> :func:`trace_counts` of its traces.
        verification: Every trace in the folder verified (a cut trace is an error).
    """

    records: list[dict[str, Any]]
    traces: dict[str, list[Trace]]
    counts: dict[str, TraceCounts]
    verification: TraceSetVerification


def read_phase_files(out: Path, phases: Sequence[str] = GUARDED_PHASES) -> PhaseFiles:
    """Read ``out``'s ``results.jsonl`` and traces, count each phase and verify every trace.

    Raises:
        TraceError: A trace is malformed or cut.
        InputError: ``results.jsonl`` is malformed.
    """
    records = read_results(out / "results.jsonl")
    traces = {
        phase: [read_trace(out / r["trace"]) for r in records if r["phase"] == phase and r["trace"]]
        for phase in phases
    }
    counts = {phase: trace_counts(traces[phase]) for phase in phases}
    checked = verification([out / r["trace"] for r in records if r["trace"]], out)
    return PhaseFiles(records, traces, counts, checked)


Verification = TraceSetVerification
"""Every trace's verification, aggregated per property (the kernel's type, kept under the
demo's name)."""


def verification(paths: Sequence[Path], root: Path) -> TraceSetVerification:
    """Verify every trace in ``paths`` and aggregate the verdicts.

    A finished run writes whole records, so a trace with a cut last line is an error here. When
    ``root`` holds a ``results.jsonl``, the traces are also checked against the head digests it
    lists (missing, changed, swapped or extra traces are named).

    Args:
        paths: Trace files.
        root: Folder the report's keys are relative to.

    Raises:
        TraceError: A trace is malformed or cut.
    """
    manifest = root / "results.jsonl"
    return verify_traces(
        paths,
        root=root,
        truncated_is_error=True,
        manifest=manifest if manifest.exists() else None,
    )


__all__ = [
    "GUARDED_PHASES",
    "Lean",
    "PhaseFiles",
    "PropertyTotal",
    "Selection",
    "TraceCounts",
    "Verification",
    "lean",
    "read_phase_files",
    "selection",
    "trace_counts",
    "verification",
]
