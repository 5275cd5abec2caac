"""Recovery only after the cool-down.

A tripped breaker closes again only from RECOVERY, and only after at least
``max(cooldown_steps, 1)`` consecutive RECOVERY steps immediately before the step that
closes it. Closing straight from INTERVENTION or ESCALATED is a violation.

``checked`` counts the recoveries (tripped -> closed changes).

Source:
    Phase 3 design (M3), R3 "RECOVERY -> NORMAL: cool-down elapsed and ...".
"""

from __future__ import annotations

from collections.abc import Sequence

from biasbreaker.trace.lines import StepLineV1
from biasbreaker.types import BreakerState
from biasbreaker.verify.report import PropertyReport, ViolationLog


class CooldownVerifier:
    """Streaming verifier of the cool-down property.

    Args:
        cooldown_steps: The run's cool-down in steps (from the trace header), >= 0.
    """

    name = "recovery-after-cooldown"
    version = "v1"

    def __init__(self, cooldown_steps: int) -> None:
        self._needed = max(cooldown_steps, 1)
        self._previous = BreakerState.NORMAL
        self._recovery_run = 0
        self._recoveries = 0
        self._log = ViolationLog()

    def observe(self, records: Sequence[StepLineV1]) -> None:
        """Track the runs of RECOVERY steps and check each recovery."""
        recovery = BreakerState.RECOVERY
        for record in records:
            state = record.state
            if state is self._previous:  # no change: only a RECOVERY run grows
                if state is recovery:
                    self._recovery_run += 1
                continue
            self._observe(record)

    def _observe(self, record: StepLineV1) -> None:
        state = record.state
        if self._previous.tripped and not state.tripped:
            self._recoveries += 1
            if self._previous is not BreakerState.RECOVERY:
                self._log.add(
                    record.step,
                    f"closed ({state.value}) straight from "
                    f"{self._previous.value}, without RECOVERY",
                )
            elif self._recovery_run < self._needed:
                self._log.add(
                    record.step,
                    f"recovered after {self._recovery_run} RECOVERY "
                    f"step(s); the cool-down needs {self._needed}",
                )
        self._recovery_run = self._recovery_run + 1 if state is BreakerState.RECOVERY else 0
        self._previous = state

    def report(self) -> PropertyReport:
        """Return the verdict."""
        vacuous = "" if self._recoveries else "the breaker never recovered"
        return PropertyReport(
            self.name,
            self.version,
            self._recoveries,
            self._log.count,
            tuple(self._log.kept),
            f"vacuous: {vacuous}" if vacuous else "",
            what=f"{self._recoveries} recovery(ies)",
            vacuous=vacuous,
        )


__all__ = ["CooldownVerifier"]
