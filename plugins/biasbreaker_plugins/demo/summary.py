"""The numbers of a guarded run, computed from its run traces and ``results.jsonl`` only.

Everything the demo and ``biasbreaker run`` print and write into ``report.md`` is computed here
from the files they wrote, never from in-memory state, so a reader (and the tests) can
recompute every number from the output folder:

* :func:`trace_counts` — per phase, from the traces: runs, guarded steps, steps whose node had
  a local score, trips, interventions by strategy, repairs (interventions whose measured
  re-check passed), escalations;
* :func:`selection` — per phase, from ``results.jsonl``: the shortlist's selection rate per
  group and the disparate-impact ratios (rate / highest rate, the four-fifths rule);
* :func:`recall` — from ``results.jsonl`` and the guarded traces: the postings whose biased
  shortlist differs from the group-blind one, how many of them the breaker tripped on, why it
  did not on the others, and the trips on postings whose shortlist the bias left alone;
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


def trip_trigger(fast: float, tau_enter: float) -> str:
    """Which trigger fired a trip: ``"network"`` or ``"node"``.

    ``"network"`` when fast B_net reached ``tau_enter``, else ``"node"`` (the guarded node's own
    score did, with ``[breaker] node_trip`` on). The machine's own rule
    (``ControlMachine._trip_reason``): a trip whose fast B_net is at or above ``tau_enter`` is
    the network's, whatever the node's own score.
    """
    return "network" if fast >= tau_enter else "node"


def trip_triggers(traces: Iterable[Trace]) -> dict[str, int]:
    """Trips (records whose transition is ``trip``) per trigger (:func:`trip_trigger`).

    Returns:
        ``{"network": n, "node": m}``; ``n + m`` is :attr:`TraceCounts.trips` of the same
        traces.
    """
    counts = {"network": 0, "node": 0}
    for trace in traces:
        tau_enter = trace.header.thresholds.tau_enter
        for r in trace.records:
            if r.transition == "trip":
                counts[trip_trigger(r.fast, tau_enter)] += 1
    return counts


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


MISS_REASONS: tuple[str, ...] = (
    "below tau_enter",
    "not_applicable",
    "not_sampled",
    "unsupported_language",
    "unreadable",
    "no probe",
    "no step",
    "other",
)
"""Why the breaker did not trip on a posting whose shortlist the bias changed, in table order.

``below tau_enter``: the node's step was scored and its local score was below ``tau_enter``;
``not_applicable`` ... ``unreadable``: the probe's status for the step (nothing scored:
``not_applicable`` found no protected mention, ``not_sampled`` was skipped by ``probe_rate``);
``no probe``: the trace records no probe for the step; ``no step``: the trace has no step of
the node (or there is no trace); ``other``: scored at or above ``tau_enter`` yet no trip (a
step held in a state that cannot trip, for instance)."""


@dataclass(frozen=True)
class Recall:
    """How the breaker met the bias that changed a shortlist (see :func:`recall`).

    Args:
        compared: Postings with a shortlist in both the group-blind and the biased phase.
        ranking_changed: Of ``compared``, postings whose biased ranking differs from the
            group-blind ranking (order included).
        changed: Of ``compared``, postings whose biased shortlist (as a set) differs from the
            group-blind shortlist: the bias changed the shortlist.
        tripped: Of ``changed``, postings whose guarded run tripped (a step with transition
            ``trip``).
        missed: Of ``changed`` and not tripped: reason (one of :data:`MISS_REASONS`) -> count;
            every reason present, 0 included.
        below: The local scores of the node at the ``below tau_enter`` misses, ascending.
        tau_enter: The ``tau_enter`` of the guarded traces (the largest if they differ), or
            ``None`` without traces.
        unchanged: Of ``compared``, postings whose shortlist the bias did not change.
        tripped_unchanged: Of ``unchanged``, postings whose guarded run tripped anyway.
        tripped_unchanged_ranking: Of ``tripped_unchanged``, postings whose biased ranking
            still differs from the group-blind one (below the shortlist).
    """

    compared: int
    ranking_changed: int
    changed: int
    tripped: int
    missed: Mapping[str, int]
    below: tuple[float, ...]
    tau_enter: float | None
    unchanged: int
    tripped_unchanged: int
    tripped_unchanged_ranking: int


def _miss_reason(trace: Trace | None, node: str) -> tuple[str, float | None]:
    """Why ``trace`` did not trip at ``node``: a :data:`MISS_REASONS` entry and the score."""
    if trace is None:
        return "no step", None
    step = next((r for r in trace.records if r.node == node), None)
    if step is None:
        return "no step", None
    if step.probe is None:
        return "no probe", None
    status = step.probe["status"]
    if status != "scored":
        return (status if status in MISS_REASONS else "other"), None
    score = step.scores.get(node)
    if score is not None and score < trace.header.thresholds.tau_enter:
        return "below tau_enter", score
    return "other", None


def recall(
    records: Iterable[Mapping[str, Any]],
    traces: Mapping[str, Trace],
    node: str,
    *,
    reference: str = "reference",
    biased: str = "unguarded",
    guarded: str = "guarded",
) -> Recall:
    """Of the postings the bias changed, how many the breaker tripped on, and why not the rest.

    A posting's shortlist is *changed by the bias* when its ``biased`` phase's shortlist (the
    pipeline with the biased agent, unguarded) differs as a set from its ``reference`` phase's
    (the same posting, every agent group-blind). Only postings with a shortlist in both phases
    are compared. A posting *tripped* when its ``guarded`` trace has a step whose transition is
    ``trip``; for a changed posting that did not, the reason is read from the first step of
    ``node`` in its trace (see :data:`MISS_REASONS`).

    Args:
        records: ``results.jsonl`` records (``phase``, ``thread``, ``status``, ``ranking``,
            ``shortlist``).
        traces: Thread -> the ``guarded`` phase's trace of that posting.
        node: The biased agent's node (the step the reasons are read from).
        reference: The group-blind phase.
        biased: The unguarded phase with the biased agent.
        guarded: The guarded phase (its threads are the postings).
    """
    by_key = {(r.get("phase"), r.get("thread")): r for r in records}

    def shortlist(phase: str, thread: Any) -> frozenset[str] | None:
        rec = by_key.get((phase, thread))
        if rec is None or rec.get("status") != "done" or not rec.get("shortlist"):
            return None
        return frozenset(rec["shortlist"])

    compared = ranking_changed = changed = tripped = 0
    unchanged = tripped_unchanged = tripped_unchanged_ranking = 0
    missed: Counter[str] = Counter()
    below: list[float] = []
    threads = [t for (phase, t) in by_key if phase == guarded]
    for thread in threads:
        blind, bias = shortlist(reference, thread), shortlist(biased, thread)
        if blind is None or bias is None:
            continue
        compared += 1
        order = by_key[(biased, thread)].get("ranking") != by_key[(reference, thread)].get(
            "ranking"
        )
        ranking_changed += order
        trace = traces.get(str(thread))
        trips = trace is not None and any(r.transition == "trip" for r in trace.records)
        if blind != bias:
            changed += 1
            if trips:
                tripped += 1
                continue
            reason, score = _miss_reason(trace, node)
            missed[reason] += 1
            if score is not None:
                below.append(score)
        else:
            unchanged += 1
            tripped_unchanged += trips
            tripped_unchanged_ranking += trips and order
    taus = [t.header.thresholds.tau_enter for t in traces.values()]
    return Recall(
        compared=compared,
        ranking_changed=ranking_changed,
        changed=changed,
        tripped=tripped,
        missed={reason: missed[reason] for reason in MISS_REASONS},
        below=tuple(sorted(below)),
        tau_enter=max(taus) if taus else None,
        unchanged=unchanged,
        tripped_unchanged=tripped_unchanged,
        tripped_unchanged_ranking=tripped_unchanged_ranking,
    )


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
    "MISS_REASONS",
    "Lean",
    "PhaseFiles",
    "PropertyTotal",
    "Recall",
    "Selection",
    "TraceCounts",
    "Verification",
    "lean",
    "read_phase_files",
    "recall",
    "selection",
    "trace_counts",
    "trip_trigger",
    "trip_triggers",
    "verification",
]
