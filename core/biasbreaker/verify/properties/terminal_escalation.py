"""Terminal escalation: once ESCALATED, every later step is ESCALATED.

``checked`` counts the steps after the first ESCALATED one.

Source:
    Phase 3 design (M3), R3 "ESCALATED (terminal, human review)".
"""

from __future__ import annotations

from biasbreaker.trace import StepRecord
from biasbreaker.types import BreakerAction, BreakerState
from biasbreaker.verify.report import PropertyReport, ViolationLog


class TerminalEscalationVerifier:
    """Streaming verifier of the terminal-escalation property."""

    name = "escalation-terminal"
    version = "v1"

    def __init__(self) -> None:
        self._escalated_at: int | None = None
        self._after = 0
        self._log = ViolationLog()

    def observe(self, record: StepRecord) -> None:
        """Check that nothing leaves ESCALATED."""
        if self._escalated_at is None:
            if record.state is BreakerState.ESCALATED:
                self._escalated_at = record.step
            return
        self._after += 1
        if (
            record.state is not BreakerState.ESCALATED
            or record.action is not BreakerAction.ESCALATE
        ):
            self._log.add(
                record.step,
                f"state {record.state.value} / action {record.action.value} after "
                f"escalation at step {self._escalated_at}",
            )

    def report(self) -> PropertyReport:
        """Return the verdict."""
        note = (
            "vacuous: the run never escalated"
            if self._escalated_at is None
            else f"escalated at step {self._escalated_at}"
        )
        return PropertyReport(
            self.name, self.version, self._after, self._log.count, tuple(self._log.kept), note
        )


__all__ = ["TerminalEscalationVerifier"]
