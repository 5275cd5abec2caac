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

from collections.abc import Sequence

from biasbreaker.trace.lines import StepLineV1
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

    def observe(self, records: Sequence[StepLineV1]) -> None:
        """Count interventions within the current episode."""
        previous = self._previous
        intervention = BreakerState.INTERVENTION
        for record in records:
            state = record.state
            if state is previous:
                continue
            if state.tripped and not previous.tripped:
                self._episodes += 1
                self._interventions = 0
            if state is intervention:
                self._interventions += 1
                if self._interventions > self._max_retries:
                    self._log.add(
                        record.step,
                        f"intervention {self._interventions} in episode {self._episodes} "
                        f"exceeds max_retries {self._max_retries}",
                    )
            previous = state
        self._previous = previous

    def report(self) -> PropertyReport:
        """Return the verdict."""
        vacuous = "" if self._episodes else "the breaker never tripped"
        return PropertyReport(
            self.name,
            self.version,
            self._episodes,
            self._log.count,
            tuple(self._log.kept),
            f"vacuous: {vacuous}" if vacuous else "",
            what=f"{self._episodes} episode(s)",
            vacuous=vacuous,
        )


__all__ = ["BoundedRetriesVerifier"]
