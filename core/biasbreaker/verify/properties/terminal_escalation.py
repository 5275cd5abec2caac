"""Terminal escalation: once ESCALATED, every later step is ESCALATED.

``checked`` counts the steps after the first ESCALATED one; the verdict is vacuous when there
are none (the run never escalated, or its escalation was its last record).

Source:
    Phase 3 design (M3), R3 "ESCALATED (terminal, human review)".
"""

from __future__ import annotations

from collections.abc import Sequence

from biasbreaker.trace.lines import StepLineV1
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

    def observe(self, records: Sequence[StepLineV1]) -> None:
        """Check that nothing leaves ESCALATED."""
        escalated, escalate = BreakerState.ESCALATED, BreakerAction.ESCALATE
        for record in records:
            if self._escalated_at is None:
                if record.state is escalated:
                    self._escalated_at = record.step
                continue
            self._after += 1
            if record.state is not escalated or record.action is not escalate:
                self._log.add(
                    record.step,
                    f"state {record.state.value} / action {record.action.value} after "
                    f"escalation at step {self._escalated_at}",
                )

    def report(self) -> PropertyReport:
        """Return the verdict."""
        if self._escalated_at is None:
            vacuous = "the run never escalated"
        elif not self._after:
            vacuous = f"the one escalation (step {self._escalated_at}) was the trace's last record"
        else:
            vacuous = ""
        note = f"vacuous: {vacuous}" if vacuous else f"escalated at step {self._escalated_at}"
        return PropertyReport(
            self.name,
            self.version,
            self._after,
            self._log.count,
            tuple(self._log.kept),
            note,
            what=f"{self._after} step(s) after the first escalation",
            vacuous=vacuous,
        )


__all__ = ["TerminalEscalationVerifier"]
