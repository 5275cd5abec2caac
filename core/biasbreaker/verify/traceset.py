"""Verifying a set of run traces: one verdict per property over every trace.

A guarded pipeline writes one run trace per run (per LangGraph thread), so an audit checks a
folder of traces, not one file. :func:`trace_files` expands files and folders into the trace
files, :func:`verify_traces` verifies each with :func:`~biasbreaker.verify.verify_trace` and
:class:`TraceSetVerification` aggregates the verdicts per property (a property holds on the set
when it holds on every trace). ``biasbreaker verify`` and the demo's report use it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from biasbreaker.errors import InputError
from biasbreaker.trace import TraceTruncatedWarning
from biasbreaker.types import JSONValue
from biasbreaker.verify.manifest import ManifestCheck, check_manifest, read_manifest
from biasbreaker.verify.report import PropertyReport
from biasbreaker.verify.verifier import VerificationReport, verify_trace

TRACE_SUFFIX = ".jsonl"
"""The suffix of the files a folder argument contributes."""


@dataclass(frozen=True)
class PropertyTotal:
    """One property's verdicts summed over a set of traces.

    Args:
        name: The property and its version, e.g. ``"RLB-v1"`` or ``"anti-thrash v2"``.
        traces: Traces checked, >= 0.
        holding: Traces on which it holds, in [0, traces].
        checked: Cases checked over all traces (recovery transitions for RLB-v1), >= 0.
        violations: Violations over all traces, >= 0.
        vacuous: Traces on which the verdict is vacuous (nothing the property speaks about
            happened there; for RLB-v1, no recovery transition).
        cycles: RLB-v1 only: controller cycles over all traces.
        exercise: What would exercise the property, said when it is vacuous on every trace.
    """

    name: str
    traces: int
    holding: int
    checked: int
    violations: int
    vacuous: int = 0
    cycles: int = 0
    exercise: str = ""

    @property
    def holds(self) -> bool:
        """Whether the property holds on every trace."""
        return self.holding == self.traces

    def line(self) -> str:
        """The property line, e.g. ``RLB-v1: HOLDS (320 traces, ...)``."""
        verdict = "HOLDS" if self.holds else "VIOLATED"
        if self.name.startswith("RLB"):
            detail = (
                f"{self.traces} traces, {self.cycles} cycles, {self.checked} recovery "
                f"transition(s), {self.violations} violation(s); vacuous on {self.vacuous}"
            )
        else:
            detail = (
                f"{self.traces} traces, {self.checked} checked, {self.violations} violation(s); "
                f"vacuous on {self.vacuous}"
            )
        line = f"{self.name}: {verdict} ({detail})"
        if self.traces and self.vacuous == self.traces:
            line += f" -- VACUOUS ON EVERY TRACE: nothing checked it; {self.exercise}"
        return line

    def to_json(self) -> dict[str, JSONValue]:
        """Return the total as plain JSON."""
        return {
            "name": self.name,
            "holds": self.holds,
            "traces": self.traces,
            "holding": self.holding,
            "checked": self.checked,
            "violations": self.violations,
            "vacuous": self.vacuous,
            "cycles": self.cycles,
        }


EXERCISED_BY: Final = {
    "chain": "write version-2 traces (this biasbreaker does)",
    "replay": "record at least one step",
    "recovery-latency-bound": "a run whose calibration window goes dirty and clean again",
    "anti-thrash": "a run whose breaker trips (or recovers)",
    "bounded-retries": "a run whose breaker trips",
    "escalation-terminal": "a run that escalates before its last step (e.g. later steps of an "
    "escalated run, or a resumed review)",
    "recovery-after-cooldown": "a run that recovers after a repair that passed its re-check",
    "must-trip": "a run whose trip statistic reaches tau_enter while the breaker is closed",
}
"""What would exercise each property, for a property vacuous on every trace of a set."""


@dataclass(frozen=True)
class TraceSetVerification:
    """Every trace's verification, aggregated per property.

    Args:
        reports: Trace key (its path, or relative to the ``root`` given) -> its report, in
            the order verified.
        totals: One per property, RLB-v1 first, then the others in the verifier's order.
    """

    reports: Mapping[str, VerificationReport] = field(default_factory=dict)
    totals: tuple[PropertyTotal, ...] = ()
    manifest: ManifestCheck | None = None

    @property
    def holds(self) -> bool:
        """Whether every property holds on every trace (and the set matches its manifest)."""
        return all(t.holds for t in self.totals) and (self.manifest is None or self.manifest.holds)

    def failing(self) -> list[str]:
        """The keys of the traces on which some property is violated, in order."""
        return [key for key, report in self.reports.items() if not report.holds]

    def to_json(self) -> dict[str, JSONValue]:
        """Return the totals and every trace's report as plain JSON."""
        return {
            "holds": self.holds,
            "totals": [t.to_json() for t in self.totals],
            "traces": {key: report.to_json() for key, report in self.reports.items()},
            "manifest": None if self.manifest is None else self.manifest.to_json(),
        }


def trace_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand files and folders into the trace files to verify.

    A file is taken as given (whatever its name); a folder contributes every ``*.jsonl`` file
    below it, recursively, in sorted path order. Duplicates (the same file, however it is
    spelt: ``a/t.jsonl`` and ``./a/t.jsonl`` or its absolute path) are kept once, first place
    and spelling win.

    Args:
        paths: Files and folders.

    Returns:
        The trace files, in argument order (each folder's files sorted).

    Raises:
        InputError: A path does not exist, or a folder holds no ``*.jsonl`` file.
    """
    out: dict[Path, Path] = {}  # resolved -> as given
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob(f"*{TRACE_SUFFIX}") if p.is_file())
            if not found:
                raise InputError(
                    f"folder {str(path)!r} holds no {TRACE_SUFFIX} file; give trace files or a "
                    "folder of them (e.g. biasbreaker-demo/traces)"
                )
        elif path.is_file():
            found = [path]
        else:
            raise InputError(f"trace {str(path)!r} does not exist; check the path")
        for file in found:
            out.setdefault(file.resolve(), file)
    return list(out.values())


def verify_traces(
    paths: Sequence[str | os.PathLike[str]],
    *,
    root: str | os.PathLike[str] | None = None,
    max_history: int | None = None,
    truncated_is_error: bool = False,
    public_key: str | None = None,
    manifest: str | os.PathLike[str] | None = None,
) -> TraceSetVerification:
    """Verify every trace and aggregate the verdicts per property.

    Args:
        paths: Trace files (expand folders with :func:`trace_files` first).
        root: If given, the reports' keys are the paths relative to it (POSIX form);
            otherwise the paths as given.
        max_history: ``W`` for RLB-v1 on every trace; default each trace header's.
        truncated_is_error: Whether a trace whose last line is cut is an error (a run that
            finished writes whole records) rather than a :class:`TraceTruncatedWarning`.
        public_key: As :func:`~biasbreaker.verify.verify_trace`, for every trace.
        manifest: A ``results.jsonl`` listing each trace's head digest: the set is also
            checked against it (:mod:`~biasbreaker.verify.manifest`); the traces it lists that
            exist are verified too.

    Returns:
        The per-trace reports and one :class:`PropertyTotal` per property.

    Raises:
        TraceError: A trace is malformed (the message names file and line); with
            ``truncated_is_error``, also a cut last line.
        InputError: ``max_history`` is not an int >= 1, ``root`` does not contain a path, or
            the manifest is unreadable.
    """
    listed = None if manifest is None else read_manifest(manifest)
    given = [Path(raw) for raw in paths]
    everything = list(dict.fromkeys(given))
    if listed is not None:
        known = {path.resolve() for path in everything}
        everything += [p for p in listed if p.exists() and p.resolve() not in known]
    reports: dict[str, VerificationReport] = {}
    heads: dict[Path, str] = {}
    for raw in everything:
        path = Path(raw)
        key = str(path)
        if root is not None:
            try:
                key = path.relative_to(root).as_posix()
            except ValueError:
                raise InputError(f"trace {key!r} is not below root {str(root)!r}") from None
        with warnings.catch_warnings():
            if truncated_is_error:
                warnings.simplefilter("error", TraceTruncatedWarning)
            reports[key] = verify_trace(path, max_history=max_history, public_key=public_key)
        heads[path] = reports[key].head
    checked = None
    if listed is not None and manifest is not None:
        checked = check_manifest(manifest, listed, heads, given)
    return TraceSetVerification(reports, _totals(reports.values()), checked)


def _totals(reports: Iterable[VerificationReport]) -> tuple[PropertyTotal, ...]:
    reports = list(reports)
    rlb = [r.rlb for r in reports]
    totals = [
        _total([r.chain for r in reports], "chain v1"),
        _total([r.replay for r in reports], "replay v1"),
    ]
    totals.append(
        PropertyTotal(
            name=rlb[0].property_version if rlb else "RLB-v1",
            traces=len(rlb),
            holding=sum(1 for r in rlb if r.holds),
            checked=sum(r.recovery_transitions for r in rlb),
            violations=sum(r.violation_count for r in rlb),
            vacuous=sum(1 for r in rlb if r.vacuous),
            cycles=sum(r.cycles_total for r in rlb),
            exercise=EXERCISED_BY["recovery-latency-bound"],
        )
    )
    names: dict[str, list[PropertyReport]] = {}
    for report in reports:
        for prop in report.properties:
            names.setdefault(f"{prop.name} {prop.version}", []).append(prop)
    totals.extend(_total(props, name) for name, props in names.items())
    return tuple(totals)


def _total(props: list[PropertyReport], name: str) -> PropertyTotal:
    """One property's reports over the set, summed (``name``: the property and its version)."""
    first = props[0] if props else None
    return PropertyTotal(
        name=name,
        traces=len(props),
        holding=sum(1 for p in props if p.holds),
        checked=sum(p.checked for p in props),
        violations=sum(p.violation_count for p in props),
        vacuous=sum(1 for p in props if p.vacuous),
        exercise="" if first is None else EXERCISED_BY.get(first.name, ""),
    )


__all__ = ["PropertyTotal", "TraceSetVerification", "trace_files", "verify_traces"]
