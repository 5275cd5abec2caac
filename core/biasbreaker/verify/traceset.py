"""Verifying a set of run traces: one verdict per property over every trace.

A guarded pipeline writes one run trace per run (per LangGraph thread), so an audit checks a
folder of traces, not one file. :func:`trace_files` expands files and folders into the trace
files, :func:`verify_traces` verifies each with :func:`~biasbreaker.verify.verify_trace` and
:class:`TraceSetVerification` aggregates the verdicts per property (a property holds on the set
when it holds on every trace). ``biasbreaker verify`` and the demo's report use it.

The verification streams: each trace's report is summed into the totals and dropped, so memory
grows with the traces only by each one's key and head digest (about 0.2 KB), not its report
(about 5 KB). Only the failing traces' reports are kept, the first
:data:`KEPT_FAILURE_REPORTS` of them; a caller that wants every report (``biasbreaker verify
--json``) takes each as it is made (``on_report``), e.g. into a :class:`ReportSpool`.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Final

from biasbreaker.errors import InputError
from biasbreaker.trace import TraceTruncatedWarning
from biasbreaker.types import JSONValue
from biasbreaker.verify.manifest import ManifestCheck, check_manifest, read_manifest_entries
from biasbreaker.verify.verifier import VerificationReport, verify_trace

TRACE_SUFFIX = ".jsonl"
"""The suffix of the files a folder argument contributes."""

KEPT_FAILURE_REPORTS: Final = 20
"""Failing traces whose whole report :func:`verify_traces` keeps by default (every failing
trace's key and violated properties are kept)."""


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
    """A set of traces' verification, aggregated per property.

    Args:
        heads: Trace key (its path, or relative to the ``root`` given) -> its chain head
            digest, for every trace, in the order verified.
        totals: One per property, RLB-v1 first, then the others in the verifier's order.
        manifest: The check against the manifest, when one was given.
        failures: Key -> the properties violated on it (``"chain v1"``, ``"RLB-v1"``, ...,
            in the order printed), for every trace on which one is, in the order verified.
        failure_reports: Key -> the whole report, for the first failing traces only (at
            most the ``keep_failures`` given to :func:`verify_traces`).
    """

    heads: Mapping[str, str] = field(default_factory=dict)
    totals: tuple[PropertyTotal, ...] = ()
    manifest: ManifestCheck | None = None
    failures: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    failure_reports: Mapping[str, VerificationReport] = field(default_factory=dict)

    @property
    def count(self) -> int:
        """How many traces were verified, >= 0."""
        return len(self.heads)

    @property
    def holds(self) -> bool:
        """Whether every property holds on every trace (and the set matches its manifest)."""
        return all(t.holds for t in self.totals) and (self.manifest is None or self.manifest.holds)

    def failing(self) -> list[str]:
        """The keys of the traces on which some property is violated, in order."""
        return list(self.failures)

    def json_chunks(self, spool: ReportSpool) -> Iterator[str]:
        """The set as one JSON document, in pieces: the totals, every trace's report, the manifest.

        Joined, the pieces are ``json.dumps(document, indent=2)`` of ``{"holds", "totals",
        "traces": {key: report.to_json(), ...}, "manifest"}``, without holding the reports:
        they are read back from ``spool``, which took them as they were verified.

        Args:
            spool: The :class:`ReportSpool` given to :func:`verify_traces` as ``on_report``.
        """
        yield '{\n  "holds": ' + _nested(self.holds, 1)
        yield ',\n  "totals": ' + _nested([t.to_json() for t in self.totals], 1)
        yield ',\n  "traces": '
        if spool.count:
            yield "{\n"
            yield from spool.chunks()
            yield "\n  }"
        else:
            yield "{}"
        manifest = None if self.manifest is None else self.manifest.to_json()
        yield ',\n  "manifest": ' + _nested(manifest, 1) + "\n}"


def _nested(value: JSONValue, level: int) -> str:
    """``value`` as ``json.dumps(..., indent=2)`` writes it ``level`` levels deep in a document."""
    return json.dumps(value, indent=2).replace("\n", "\n" + "  " * level)


class ReportSpool:
    """Every trace's report as JSON, written to a temporary file as each is verified.

    Give it to :func:`verify_traces` as ``on_report``, then to
    :meth:`TraceSetVerification.json_chunks`: the reports go to disk (about 5 KB each), not
    memory. Use it as a context manager (the file is deleted on close).
    """

    def __init__(self) -> None:
        # closed by close() or on leaving the context, not within __init__
        self._file = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self.count = 0
        """Reports written, >= 0."""

    def __call__(self, key: str, report: VerificationReport) -> None:
        """Write one trace's report (its key and ``report.to_json()``)."""
        if self.count:
            self._file.write(",\n")
        self._file.write("    " + json.dumps(key) + ": " + _nested(report.to_json(), 2))
        self.count += 1

    def chunks(self, size: int = 1 << 16) -> Iterator[str]:
        """The reports written, in pieces of at most ``size`` characters (``size`` >= 1)."""
        self._file.seek(0)
        while piece := self._file.read(size):
            yield piece

    def close(self) -> None:
        """Delete the file."""
        self._file.close()

    def __enter__(self) -> ReportSpool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


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
    on_report: Callable[[str, VerificationReport], None] | None = None,
    keep_failures: int = KEPT_FAILURE_REPORTS,
) -> TraceSetVerification:
    """Verify every trace and aggregate the verdicts per property, one trace at a time.

    Each report is summed into the totals, given to ``on_report`` and dropped (unless the
    trace fails and fewer than ``keep_failures`` failing reports are kept): memory grows with
    the traces by a key and a head digest each.

    Args:
        paths: Trace files (expand folders with :func:`trace_files` first).
        root: If given, the keys are the paths relative to it (POSIX form); otherwise the
            paths as given.
        max_history: ``W`` for RLB-v1 on every trace; default each trace header's.
        truncated_is_error: Whether a trace whose last line is cut is an error (a run that
            finished writes whole records) rather than a :class:`TraceTruncatedWarning`.
        public_key: As :func:`~biasbreaker.verify.verify_trace`, for every trace, and the key
            the manifest's seal must be signed with.
        manifest: A ``results.jsonl`` listing each trace's head digest: the set is also
            checked against it, each record's status against its trace's end and the manifest
            against its seal (:mod:`~biasbreaker.verify.manifest`); the traces it lists that
            exist are verified too.
        on_report: Called with each trace's key and report, in the order verified (e.g. a
            :class:`ReportSpool`).
        keep_failures: How many failing traces' whole reports to keep, >= 0.

    Returns:
        The heads, the totals (one :class:`PropertyTotal` per property), the failing traces.

    Raises:
        TraceError: A trace is malformed (the message names file and line); with
            ``truncated_is_error``, also a cut last line.
        InputError: ``max_history`` is not an int >= 1, ``root`` does not contain a path, or
            the manifest is unreadable.
    """
    listed = None if manifest is None else read_manifest_entries(manifest)
    given = [Path(raw) for raw in paths]
    everything = list(dict.fromkeys(given))
    if listed is not None:
        known = {path.resolve() for path in everything}
        everything += [p for p in listed if p.exists() and p.resolve() not in known]
        del known
    tally = _Tally()
    heads: dict[str, str] = {}
    by_file: dict[Path, str] = {}
    failures: dict[str, tuple[str, ...]] = {}
    kept: dict[str, VerificationReport] = {}
    for path in everything:
        key = str(path)
        if root is not None:
            try:
                key = path.relative_to(root).as_posix()
            except ValueError:
                raise InputError(f"trace {key!r} is not below root {str(root)!r}") from None
        with warnings.catch_warnings():
            if truncated_is_error:
                warnings.simplefilter("error", TraceTruncatedWarning)
            report = verify_trace(path, max_history=max_history, public_key=public_key)
        tally.add(report)
        heads[key] = report.head
        if listed is not None:
            by_file[path] = report.head
        if not report.holds:
            failures[key] = _violated(report)
            if len(kept) < keep_failures:
                kept[key] = report
        if on_report is not None:
            on_report(key, report)
        del report
    checked = None
    if listed is not None and manifest is not None:
        checked = check_manifest(manifest, listed, by_file, given, public_key=public_key)
    return TraceSetVerification(heads, tally.totals(), checked, failures, kept)


def _violated(report: VerificationReport) -> tuple[str, ...]:
    """The properties violated on ``report``'s trace, in the order printed."""
    broken = [f"{p.name} {p.version}" for p in (report.chain, report.replay) if not p.holds]
    broken += [report.rlb.property_version] if not report.rlb.holds else []
    broken += [f"{p.name} {p.version}" for p in report.properties if not p.holds]
    return tuple(broken)


class _Sum:
    """One property's verdicts summed so far (see :class:`PropertyTotal`)."""

    def __init__(self, name: str, exercise: str) -> None:
        self.name, self.exercise = name, exercise
        self.traces = self.holding = self.checked = self.violations = self.vacuous = 0
        self.cycles = 0

    def add(self, holds: bool, checked: int, violations: int, vacuous: bool) -> None:
        self.traces += 1
        self.holding += holds
        self.checked += checked
        self.violations += violations
        self.vacuous += vacuous

    def total(self) -> PropertyTotal:
        return PropertyTotal(
            name=self.name,
            traces=self.traces,
            holding=self.holding,
            checked=self.checked,
            violations=self.violations,
            vacuous=self.vacuous,
            cycles=self.cycles,
            exercise=self.exercise,
        )


class _Tally:
    """The per-property totals of the reports added so far.

    Chain, replay, RLB-v1, then the rest in the order first seen (the verifier's order).
    """

    def __init__(self) -> None:
        self.chain = _Sum("chain v1", "")  # exercise: named by the first trace's report
        self.replay = _Sum("replay v1", "")
        self.rlb = _Sum("RLB-v1", EXERCISED_BY["recovery-latency-bound"])
        self.rlb_named = False
        self.others: dict[str, _Sum] = {}

    def add(self, report: VerificationReport) -> None:
        for prop, into in ((report.chain, self.chain), (report.replay, self.replay)):
            if not into.traces:
                into.exercise = EXERCISED_BY.get(prop.name, "")
            into.add(prop.holds, prop.checked, prop.violation_count, bool(prop.vacuous))
        rlb = report.rlb
        if not self.rlb_named:  # the first trace's version names the total
            self.rlb.name, self.rlb_named = rlb.property_version, True
        self.rlb.add(rlb.holds, rlb.recovery_transitions, rlb.violation_count, bool(rlb.vacuous))
        self.rlb.cycles += rlb.cycles_total
        for prop in report.properties:
            name = f"{prop.name} {prop.version}"
            if name not in self.others:
                self.others[name] = _Sum(name, EXERCISED_BY.get(prop.name, ""))
            self.others[name].add(
                prop.holds, prop.checked, prop.violation_count, bool(prop.vacuous)
            )

    def totals(self) -> tuple[PropertyTotal, ...]:
        sums = [self.chain, self.replay, self.rlb, *self.others.values()]
        return tuple(s.total() for s in sums)


__all__ = [
    "KEPT_FAILURE_REPORTS",
    "PropertyTotal",
    "ReportSpool",
    "TraceSetVerification",
    "trace_files",
    "verify_traces",
]
