"""``report.md`` and the console summary of a guarded run.

The tables are built once, as rows of strings (:class:`Table`), and rendered twice: as
Markdown into ``report.md`` and as rich tables on the console. Every number comes from
:mod:`biasbreaker_plugins.demo.summary`, i.e. from the traces and ``results.jsonl``; the report
holds no wall-clock time, so the same run gives the same report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biasbreaker.usage import describe_usage
from biasbreaker_plugins.demo.output import write_text_atomic
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


def zero_floor_note(report: CalibrationReport) -> str:
    """A sentence saying which thresholds came from ``[calibration] zero_floor`` (or ``""``)."""
    if not report.zero_floor:
        return ""
    return (
        f" {' and '.join(report.zero_floor)} came from the floor [calibration] zero_floor, "
        "not from the runs' spread: every control run scored exactly 0 on that scale."
    )


CALIBRATION_SETTINGS = "calibration.toml"
"""The file in the output folder that holds the calibration settings the run used."""


def calibration_settings(report: CalibrationReport, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Every setting ``biasbreaker calibrate`` reads, as the run used them (a TOML tree).

    ``[calibration]``: the calibrator, the false-halt target, ``exit_ratio``, ``warn_ratio``,
    ``zero_floor`` (the thresholds of control runs that all score 0) and ``max_history`` (the
    shipped calibrator does not use it; another may); ``[breaker]
    node_trip``; and the calibrator's ``[plugin.<name>]`` options when the run configured any
    (only the keys it set). Defaults are written too: a ``biasbreaker.toml`` in the folder the
    command runs in ranks below ``--config`` key by key, so a key left out could be changed by
    it.

    Args:
        report: The calibration the run used.
        settings: The run's effective configuration (``Settings.model_dump(mode="json")``).
    """
    cal = settings["calibration"]
    tree: dict[str, Any] = {
        "calibration": {
            "calibrator": report.calibrator,
            "target_false_halt_rate": report.target_false_halt_rate,
            "exit_ratio": cal["exit_ratio"],
            "warn_ratio": cal["warn_ratio"],
            "zero_floor": cal["zero_floor"],
            "max_history": cal["max_history"],
        },
        "breaker": {"node_trip": report.node_trip},
    }
    options = settings.get("plugin", {}).get(report.calibrator)
    if options:
        tree["plugin"] = {report.calibrator: dict(options)}
    return tree


def write_calibration_settings(
    out: Path, report: CalibrationReport, settings: Mapping[str, Any]
) -> str:
    """Write :func:`calibration_settings` to ``out/calibration.toml``; return its name."""
    import tomlkit

    header = (
        "# The calibration settings this run used: `biasbreaker calibrate control-runs.jsonl "
        f"--config {CALIBRATION_SETTINGS}`\n# in this folder gives the report's thresholds again.\n"
    )
    text = header + tomlkit.dumps(calibration_settings(report, settings))
    write_text_atomic(out / CALIBRATION_SETTINGS, text)
    return CALIBRATION_SETTINGS


def calibrate_command(control_file: str, settings_file: str) -> str:
    """The ``biasbreaker calibrate`` command that gives a run's thresholds again.

    Every setting ``calibrate`` reads comes from ``settings_file`` (written by
    :func:`write_calibration_settings`), so neither the demo's own defaults nor a
    ``biasbreaker.toml`` where the command is run change the result. (``calibrate`` has flags
    for the target and node trips only; the ratios, the calibrator and its options need a
    file.) ``BIASBREAKER_*`` environment variables still rank above it.

    Args:
        control_file: The control runs' file, relative to the output folder (where the
            command is meant to run).
        settings_file: The calibration settings file, relative to the output folder.

    Returns:
        Markdown: the command as a code span.
    """
    return f"`biasbreaker calibrate {control_file} --config {settings_file}`"


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


def usage_lines(phases: Mapping[str, Any]) -> str:
    """LLM calls and tokens per role in each phase (Markdown), from each phase's ``usage``."""
    rows = [f"- {name}: {describe_usage(phase.usage)}" for name, phase in phases.items()]
    return (
        "LLM calls and tokens per role (agent, probe re-runs, re-checks of repairs, skeptics, "
        "MADERA; tokens the client estimated because no endpoint reported them are counted "
        "apart):\n\n" + "\n".join(rows)
    )


REPAIR_ROLES = ("re-check", "skeptic", "MADERA")
"""Roles whose calls happen only where the breaker trips (:mod:`biasbreaker.estimate`)."""


def estimate_lines(estimate: Any, phases: Mapping[str, Any]) -> str:
    """Predicted (before the run) against measured LLM calls per phase (Markdown).

    Args:
        estimate: The :class:`~biasbreaker_plugins.demo.estimate.Estimate` printed before the
            run.
        phases: The run's phases, each with its ``usage`` (calls per role).
    """

    def measured(usage: Mapping[str, Mapping[str, int]], repairs: bool) -> int:
        return sum(u["calls"] for r, u in usage.items() if (r in REPAIR_ROLES) == repairs)

    def off(predicted: float, actual: int) -> str:
        return "—" if not actual else f"{100 * (predicted - actual) / actual:+.1f} %"

    rows = []
    totals = [0.0, 0, 0, 0, 0]
    for name, predicted in estimate.phases.items():
        usage = phases[name].usage if name in phases else {}
        plain, fixes = measured(usage, False), measured(usage, True)
        most = sum(predicted.repairs_most.values())
        rows.append(
            f"| {name} | {round(predicted.without_repairs)} | {plain} | 0 … {most} | {fixes} "
            f"| {plain + fixes} | {off(predicted.without_repairs, plain + fixes)} |"
        )
        for i, n in enumerate((predicted.without_repairs, plain, most, fixes, plain + fixes)):
            totals[i] += n
    rows.append(
        f"| **all** | {round(totals[0])} | {totals[1]} | 0 … {totals[2]} | {totals[3]} | "
        f"{totals[4]} | {off(totals[0], int(totals[4]))} |"
    )
    exact = round(totals[0]) == totals[1]
    return "\n".join(
        [
            "LLM calls predicted before the run (`biasbreaker estimate --demo`, nothing "
            "called; docs/cost.md) and measured. Calls without repairs (agents, probe "
            "re-runs) follow from the configuration, the graph and the postings; repairs "
            "(re-checks, skeptics, MADERA) happen only where the breaker trips, so they are "
            "predicted as a range, from no trip to every guarded step tripping:",
            "",
            "| phase | predicted without repairs | measured without repairs | predicted "
            "repairs | measured repairs | measured in all | prediction without repairs vs "
            "all measured |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            (
                "The calls without repairs were predicted exactly"
                if exact
                else "The calls without repairs were not predicted exactly (an assumption of "
                "the estimate did not hold: docs/cost.md)"
            )
            + f"; the {totals[3]} repair calls "
            + ("are" if totals[3] <= totals[2] else "are not")
            + " within the predicted range.",
        ]
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
    """The property lines (``RLB-v1: HOLDS (...)`` ...), one per property, then the manifest's."""
    lines = [t.line() for t in verification.totals]
    if verification.manifest is not None:
        lines.append(verification.manifest.line("results.jsonl"))
        lines += [f"  {trace}: {problem}" for trace, problem in verification.manifest.problems]
    return lines


def verification_block(table: Table, verification: Verification) -> list[str]:
    """Markdown lines: the verdicts ``table``, the property lines as printed, the trace heads.

    The heads are each trace's chain head (the digest of its last seal), as ``results.jsonl``
    lists them: what a reader compares a copy of the traces with, or checks them against with
    ``biasbreaker verify TRACES --manifest results.jsonl``.
    """
    heads = [f"{head}  {key}" for key, head in verification.heads.items()]
    return [
        table.markdown(),
        "",
        "```",
        *property_lines(verification),
        "```",
        "",
        "Each trace's head digest (SHA-256 of its final seal, RFC 8785 JSON; also in "
        "`results.jsonl`), which `biasbreaker verify traces --manifest results.jsonl` checks:",
        "",
        "```",
        *heads,
        "```",
        "",
    ]


def property_table(totals: Sequence[PropertyTotal]) -> Table:
    """The verification verdicts as a table."""
    return Table(
        "Properties verified on every trace (biasbreaker.verify.verify_trace)",
        ("property", "verdict", "traces", "violations", "vacuous on", "detail"),
        tuple(
            (
                t.name,
                "HOLDS" if t.holds else "VIOLATED",
                str(t.traces),
                str(t.violations),
                f"{t.vacuous} trace(s)",
                (
                    f"{t.cycles} cycles, {t.checked} recovery transition(s)"
                    if t.name.startswith("RLB")
                    else f"{t.checked} checked"
                )
                + (
                    f"; vacuous on every trace: nothing here exercised it, {t.exercise}"
                    if t.traces and t.vacuous == t.traces
                    else ""
                ),
            )
            for t in totals
        ),
    )


__all__ = [
    "CALIBRATION_SETTINGS",
    "Table",
    "calibrate_command",
    "calibration_settings",
    "estimate_lines",
    "phase_table",
    "property_lines",
    "property_table",
    "selection_table",
    "verification_block",
    "write_calibration_settings",
    "zero_floor_note",
]
