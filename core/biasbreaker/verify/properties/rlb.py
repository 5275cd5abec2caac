"""RLB-v1, the Recovery Latency Bound, as corrected for this project.

Definitions (ADR-0034, in this project's terms). The calibration window holds the last ``W``
fast-B_net observations (``max_history = W``) and counts those beyond 3σ and 5σ of the control
distribution. A step is *dirty* when ``beyond_3 + beyond_5 > 0`` and *clean* otherwise. A
*recovery transition* at step ``t`` is a clean step right after a dirty one. An
*over-threshold outcome* is an observation above ``mean + 3·std``.

**RLB-v1 (corrected).** For every recovery transition at ``t``, let ``s(t)`` be the step of
the last over-threshold outcome before ``t``. Then ``t - s(t) <= W``: once outcomes are back
in range, at most ``W`` steps pass before the window is clean. A transition with no
over-threshold outcome before it also violates the property (the window was dirty for no
recorded reason).

**Why not the ADR's literal statement.** The ADR states ``L(t) <= peak(t) + W - 1``, where
``L(t)`` is the length of the whole dirty run before ``t`` and ``peak(t)`` the largest count in
it. For a burst of ``N`` consecutive over-threshold outcomes, a sliding window gives
``L = N + W - 1`` and ``peak = min(N, W)``, so the literal bound fails exactly when ``N > W``;
the smallest counterexample is ``W = 1`` and outcomes (over, over, within): ``L = 2 > peak +
W - 1 = 1``. The ADR's witness (``dirty_run <= W``) fails on it too. The report still counts
the transitions at which the literal bound fails (``literal_bound_exceeded``), for
information.

The verifier recomputes each step's over-threshold flag from the recorded fast B_net and the
header's control statistics, so it checks the window builder independently: a window that
does not evict one observation per step shows up as a violation.

Source:
    ADR-0034 "Recovery Latency Bound Property v1 (RLB)" (seed ``002``), corrected per
    ``seeds/README.md``; ``docs/control.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from biasbreaker.trace.lines import StepLineV1
from biasbreaker.types import ControlStatistics, JSONValue
from biasbreaker.verify.report import PropertyReport, Violation, ViolationLog

PROPERTY_VERSION: Final = "RLB-v1"


@dataclass(frozen=True, slots=True)
class RecoveryTransition:
    """One recovery transition (a clean step right after a dirty one).

    Args:
        step: The clean step ``t``.
        dirty_run: ``L(t)``, the number of consecutive dirty steps before ``t``.
        peak: ``peak(t)``, the largest ``beyond_3`` count seen in that dirty run.
        latency: ``t - s(t)``, steps since the last over-threshold outcome, or ``None`` if
            there was none.
    """

    step: int
    dirty_run: int
    peak: int
    latency: int | None

    def literal_bound_holds(self, max_history: int) -> bool:
        """Whether the ADR's literal ``L(t) <= peak(t) + W - 1`` holds here."""
        return self.dirty_run <= self.peak + max_history - 1

    def corrected_bound_holds(self, max_history: int) -> bool:
        """Whether RLB-v1 (corrected), ``t - s(t) <= W``, holds here."""
        return self.latency is not None and self.latency <= max_history


class RecoveryTracker:
    """Walks a run in order, keeping the dirty-run counter, and yields recovery transitions.

    Feed it one step at a time with :meth:`feed`; it returns the
    :class:`RecoveryTransition` completed at that step, if any.
    """

    def __init__(self) -> None:
        self._dirty_run = 0
        self._peak = 0
        self._last_over: int | None = None

    @property
    def idle(self) -> bool:
        """Whether no dirty run is pending (a clean step that is not over-threshold is a no-op)."""
        return self._dirty_run == 0

    def feed(
        self, step: int, *, over: bool, beyond_3: int, beyond_5: int
    ) -> RecoveryTransition | None:
        """Take one step.

        Args:
            step: The step index (increasing).
            over: Whether this step's observation is over-threshold (beyond 3σ).
            beyond_3: The window's count beyond 3σ after this step.
            beyond_5: The window's count beyond 5σ after this step.

        Returns:
            The recovery transition at this step, or ``None``.
        """
        if over:
            self._last_over = step
        if beyond_3 + beyond_5 > 0:
            self._dirty_run += 1
            self._peak = max(self._peak, beyond_3)
            return None
        transition = None
        if self._dirty_run > 0:
            latency = None if self._last_over is None else step - self._last_over
            transition = RecoveryTransition(step, self._dirty_run, self._peak, latency)
        self._dirty_run = 0
        self._peak = 0
        return transition


@dataclass(frozen=True, slots=True)
class RLBReport:
    """The RLB-v1 verdict on one trace (the shape of ADR-0034's report).

    Args:
        trace_sha256: SHA-256 of the trace file.
        max_history: The ``W`` the bound was checked with.
        property_version: ``"RLB-v1"``.
        cycles_total: Steps in the trace.
        recovery_transitions: Recovery transitions seen (the precondition count).
        first_recovery_step: Step of the first one, or ``None``.
        violation_count: Transitions violating the corrected bound.
        violations: The first of them.
        literal_bound_exceeded: Transitions at which the ADR's literal statement
            ``L(t) <= peak(t) + W - 1`` fails (information, not a violation).
        note: Why the verdict is vacuous or which caveat applies; empty if none.
    """

    trace_sha256: str
    max_history: int
    property_version: str
    cycles_total: int
    recovery_transitions: int
    first_recovery_step: int | None
    violation_count: int
    violations: tuple[Violation, ...]
    literal_bound_exceeded: int
    note: str

    @property
    def holds(self) -> bool:
        """Whether no recovery transition violates the corrected bound."""
        return self.violation_count == 0

    @property
    def vacuous(self) -> bool:
        """Whether the verdict is vacuous (no recovery transition was seen)."""
        return self.recovery_transitions == 0

    def to_json(self) -> dict[str, JSONValue]:
        """Return the report as plain JSON."""
        return {
            "property_version": self.property_version,
            "holds": self.holds,
            "vacuous": self.vacuous,
            "trace_sha256": self.trace_sha256,
            "max_history": self.max_history,
            "cycles_total": self.cycles_total,
            "recovery_transitions": self.recovery_transitions,
            "first_recovery_step": self.first_recovery_step,
            "violation_count": self.violation_count,
            "violations": [v.to_json() for v in self.violations],
            "literal_bound_exceeded": self.literal_bound_exceeded,
            "note": self.note,
        }

    def as_property_report(self) -> PropertyReport:
        """Return the verdict in the common per-property shape."""
        return PropertyReport(
            "recovery-latency-bound",
            self.property_version,
            self.recovery_transitions,
            self.violation_count,
            self.violations,
            self.note,
        )


class RLBVerifier:
    """Streaming RLB-v1 verifier over trace records.

    Args:
        control: The run's control statistics (the window's bands), or ``None`` if the run
            had no calibration window (the property then holds vacuously).
        max_history: ``W`` to check against, >= 1. Pass the run's real window length (the
            trace header's ``max_history``); another value makes the verdict meaningless
            for this run.
        recorded_max_history: The trace header's ``max_history``, used only to warn in the
            note when it differs from ``max_history``.
    """

    def __init__(
        self,
        control: ControlStatistics | None,
        max_history: int,
        recorded_max_history: int | None = None,
    ) -> None:
        self._control = control
        self._max_history = max_history
        self._recorded = recorded_max_history
        self._tracker = RecoveryTracker()
        self._cycles = 0
        self._transitions = 0
        self._first: int | None = None
        self._literal_exceeded = 0
        self._windowless = 0
        self._log = ViolationLog()

    def resume(self, last_over: int | None) -> None:
        """Start after steps observed elsewhere, the last over-threshold one at ``last_over``.

        For a verifier that starts in the middle of a trace (:mod:`biasbreaker.verify.split`)
        whose warm-up saw no over-threshold outcome: the step of the last one before it, or
        ``None`` if there was none.
        """
        self._tracker._last_over = last_over

    def observe(self, records: Sequence[StepLineV1]) -> None:
        """Take the next records (in step order)."""
        self._cycles += len(records)
        control = self._control
        if control is None:
            self._windowless += len(records)
            return
        over_3 = control.mean + 3.0 * control.std  # the window's 3σ band (docs/control.md §5)
        tracker = self._tracker
        idle = tracker.idle  # changes only when the tracker is fed
        for record in records:
            window = record.window
            if window is None:
                self._windowless += 1
                continue
            over = record.fast > over_3
            if not over and window.beyond_3 + window.beyond_5 == 0 and idle:
                continue  # clean, nothing pending: feeding it would change nothing
            transition = tracker.feed(
                record.step, over=over, beyond_3=window.beyond_3, beyond_5=window.beyond_5
            )
            idle = tracker.idle
            if transition is not None:
                self._transition(transition)

    def _transition(self, transition: RecoveryTransition) -> None:
        self._transitions += 1
        if self._first is None:
            self._first = transition.step
        if not transition.literal_bound_holds(self._max_history):
            self._literal_exceeded += 1
        if transition.latency is None:
            self._log.add(
                transition.step,
                f"window clean after {transition.dirty_run} dirty step(s), but no "
                "over-threshold outcome was recorded before it",
            )
        elif not transition.corrected_bound_holds(self._max_history):
            self._log.add(
                transition.step,
                f"window clean {transition.latency} steps after the last "
                f"over-threshold outcome (step {transition.step - transition.latency})"
                f", more than W={self._max_history}",
            )

    def report(self, trace_sha256: str) -> RLBReport:
        """Return the verdict (``trace_sha256`` is the digest of the file verified)."""
        notes: list[str] = []
        if self._windowless:
            notes.append(f"{self._windowless} step(s) recorded no calibration window")
        if self._transitions == 0:
            notes.append(
                "holds vacuously: no recovery transition (the window never went from "
                "dirty to clean)"
            )
        if self._recorded is not None and self._recorded != self._max_history:
            notes.append(
                f"checked with W={self._max_history} but the run's window had "
                f"W={self._recorded}: the verdict does not apply to this run"
            )
        return RLBReport(
            trace_sha256=trace_sha256,
            max_history=self._max_history,
            property_version=PROPERTY_VERSION,
            cycles_total=self._cycles,
            recovery_transitions=self._transitions,
            first_recovery_step=self._first,
            violation_count=self._log.count,
            violations=tuple(self._log.kept),
            literal_bound_exceeded=self._literal_exceeded,
            note="; ".join(notes),
        )


__all__ = [
    "PROPERTY_VERSION",
    "RLBReport",
    "RLBVerifier",
    "RecoveryTracker",
    "RecoveryTransition",
]
