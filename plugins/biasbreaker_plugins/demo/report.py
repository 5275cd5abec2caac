"""``report.md`` and the console summary of a guarded run.

The tables are built once, as rows of strings (:class:`Table`), and rendered twice: as
Markdown into ``report.md`` and as rich tables on the console. Every number comes from
:mod:`biasbreaker_plugins.demo.summary`, i.e. from the traces and ``results.jsonl``; the report
holds no wall-clock time, so the same run gives the same report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from biasbreaker_plugins.demo.summary import (
    PropertyTotal,
    Selection,
    TraceCounts,
    Verification,
)

if TYPE_CHECKING:
    from biasbreaker.calibration import CalibrationReport


@dataclass(frozen=True)
class Table:
    """A table: a title, a header row and string rows."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""

    def markdown(self) -> str:
        """The table in GitHub Markdown, with its title as a bold line above it."""
        lines = [f"**{self.title}**", "", "| " + " | ".join(self.header) + " |"]
        lines.append("|" + "|".join("---" for _ in self.header) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines)


def calibrate_command(control_file: str, report: CalibrationReport) -> str:
    """The ``biasbreaker calibrate`` command that gives ``report``'s thresholds again.

    It carries, explicitly, every setting ``calibrate`` reads that a demo can change: the
    false-halt target and whether node trips are on, so the command does not depend on the
    configuration of the directory it is run in. The calibrator has no flag: when it is not
    the shipped default, the text after the command says which one to configure.

    Args:
        control_file: The control runs' file, relative to the output folder (where the
            command is meant to run).
        report: The calibration the run used.

    Returns:
        Markdown: the command as a code span, and the calibrator note if any.
    """
    from biasbreaker.config import CalibrationSettings

    trigger = "--node-trip" if report.node_trip else "--no-node-trip"
    text = (
        f"`biasbreaker calibrate {control_file} --target-false-halt-rate "
        f"{report.target_false_halt_rate!r} {trigger}`"
    )
    if report.calibrator != CalibrationSettings.model_fields["calibrator"].default:
        text += f' with `[calibration] calibrator = "{report.calibrator}"` configured'
    return text


def _by_strategy(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) if counts else "0"


def phase_table(phases: Sequence[tuple[str, TraceCounts, int]]) -> Table:
    """One row per guarded phase: what its traces record, and its LLM calls."""
    rows = []
    for name, c, calls in phases:
        rows.append(
            (
                name,
                str(c.runs),
                str(c.steps),
                str(c.scored_steps),
                str(calls),
                str(c.trips),
                str(c.runs_tripped),
                _by_strategy(c.interventions),
                _by_strategy(c.repairs),
                str(c.escalated_runs),
            )
        )
    return Table(
        "Guarded runs, from their traces",
        (
            "phase",
            "runs",
            "guarded steps",
            "steps with a local score",
            "LLM calls",
            "trips",
            "runs that tripped",
            "interventions (by strategy)",
            "repairs passing the re-check",
            "escalated (waiting for review)",
        ),
        tuple(rows),
        note="A *guarded step* is one trace record (a held output stepped again is a step "
        "too); a *trip* is the breaker opening (NORMAL/WARNING -> INTERVENTION); a *repair* "
        "is an intervention whose repair passed its measured re-check (score below "
        "tau_exit); an *escalated* run ended ESCALATED and its held output waits for a human "
        "(interrupt()).",
    )


def selection_table(phases: Sequence[tuple[str, Selection]], labels: Mapping[str, str]) -> Table:
    """Per group: selection rate and impact ratio in each phase, side by side."""
    groups = phases[0][1].groups
    header = ["group"]
    for name, _ in phases:
        header += [f"{name}: rate", f"{name}: impact ratio"]
    rows = []
    for g in groups:
        row = [labels.get(g, g)]
        for _, sel in phases:
            row += [f"{sel.rates[g]:.3f} ({sel.selected[g]}/{sel.decided})", f"{sel.impact[g]:.2f}"]
        rows.append(tuple(row))
    lowest = ["lowest impact ratio"]
    for _, sel in phases:
        verdict = "passes" if sel.min_impact >= 0.8 else "fails"
        lowest += ["", f"**{sel.min_impact:.2f}** ({verdict} 4/5)"]
    rows.append(tuple(lowest))
    notes = "; ".join(
        f"{name}: {sel.decided} postings with a shortlist, {sel.waiting} waiting for human "
        f"review, {sel.empty} without a readable shortlist"
        for name, sel in phases
    )
    return Table(
        "Shortlist selection rate per group (rate = postings in which the group's candidate is "
        "shortlisted / postings with a shortlist)",
        tuple(header),
        tuple(rows),
        note=notes + ". Impact ratio = rate / the highest rate in the same column (29 CFR "
        "1607.4(D), the four-fifths rule).",
    )


def property_lines(verification: Verification) -> list[str]:
    """The property lines (``RLB-v1: HOLDS (...)`` ...), one per property."""
    return [t.line() for t in verification.totals]


def property_table(totals: Sequence[PropertyTotal]) -> Table:
    """The verification verdicts as a table."""
    return Table(
        "Properties verified on every trace (biasbreaker.properties.verify_trace)",
        ("property", "verdict", "traces", "violations", "detail"),
        tuple(
            (
                t.name,
                "HOLDS" if t.holds else "VIOLATED",
                str(t.traces),
                str(t.violations),
                (
                    f"{t.cycles} cycles, {t.checked} recovery transition(s), vacuous on "
                    f"{t.vacuous} trace(s)"
                )
                if t.name.startswith("RLB")
                else f"{t.checked} checked",
            )
            for t in totals
        ),
    )


__all__ = [
    "Table",
    "calibrate_command",
    "phase_table",
    "property_lines",
    "property_table",
    "selection_table",
]
