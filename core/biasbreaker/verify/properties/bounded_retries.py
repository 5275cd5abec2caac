"""Bounded retries: an episode makes at most ``max_retries`` interventions.

An *episode* starts when the breaker trips (a closed state followed by a tripped one) and
ends when it is closed again. An *intervention* is an entry into INTERVENTION (a record in
INTERVENTION whose previous record is not). Within an episode there are at most
``max_retries`` of them; the machine escalates instead of making another.

``checked`` counts the episodes.

Source:
    Phase 3 design (M3), R3 "ESCALATED: attempts exceed max_retries" and the risk "infinite
    correction loop".
"""

from __future__ import annotations

from biasbreaker.trace import StepRecord
from biasbreaker.types import BreakerState
from biasbreaker.verify.report import PropertyReport, ViolationLog


class BoundedRetriesVerifier:
    """Streaming verifier of the retry bound (see the module docstring).

    Args:
        max_retries: The run's retry budget (from the trace header), >= 1.
    """

    name = "bounded-retries"
    version = "v1"

    def __init__(self, max_retries: int) -> None:
        self._max_retries = max_retries
        self._previous = BreakerState.NORMAL
        self._episodes = 0
        self._interventions = 0
        self._log = ViolationLog()

    def observe(self, record: StepRecord) -> None:
        """Count interventions within the current episode."""
        state = record.state
        if state.tripped and not self._previous.tripped:
            self._episodes += 1
            self._interventions = 0
        if state is BreakerState.INTERVENTION and self._previous is not BreakerState.INTERVENTION:
            self._interventions += 1
            if self._interventions > self._max_retries:
                self._log.add(
                    record.step,
                    f"intervention {self._interventions} in episode {self._episodes} "
                    f"exceeds max_retries {self._max_retries}",
                )
        self._previous = state

    def report(self) -> PropertyReport:
        """Return the verdict."""
        note = "" if self._episodes else "vacuous: the breaker never tripped"
        return PropertyReport(
            self.name, self.version, self._episodes, self._log.count, tuple(self._log.kept), note
        )


__all__ = ["BoundedRetriesVerifier"]
