"""Must trip: a closed breaker whose trip statistic reaches ``tau_enter`` trips at that step.

The *trip statistic* of a step is its fast B_net, or, when the trace header says node trips are
on, the larger of fast B_net and the step's own local score (``scores[node]``). A step taken
while the breaker is closed (the previous record is NORMAL or WARNING, or it is the first step)
whose trip statistic is ``>= tau_enter`` must be tripped (INTERVENTION): otherwise the output
proceeded although the breaker had to halt it — the *missed trip* that the properties of
decisions alone (anti-thrash and the others) cannot see.

``checked`` counts those steps; the verdict is vacuous when there are none.

Source:
    ``docs/control.md`` §3 (the ``trip`` rows and the ``spike`` guard) and §3b (node trips).
"""

from __future__ import annotations

from collections.abc import Sequence

from biasbreaker.trace.lines import StepLineV1
from biasbreaker.types import BreakerState, Thresholds
from biasbreaker.verify.report import PropertyReport, ViolationLog


class MustTripVerifier:
    """Streaming verifier of the must-trip property (see the module docstring).

    Args:
        thresholds: The run's thresholds (from the trace header).
        node_trip: Whether the header says the machine tripped on a step's own score too.
    """

    name = "must-trip"
    version = "v1"

    def __init__(self, thresholds: Thresholds, *, node_trip: bool = False) -> None:
        self._enter = thresholds.tau_enter
        self._node_trip = node_trip
        self._closed = True
        self._checked = 0
        self._log = ViolationLog()

    def observe(self, records: Sequence[StepLineV1]) -> None:
        """Check every step taken while the breaker was closed."""
        enter, node_trip = self._enter, self._node_trip
        normal, warning = BreakerState.NORMAL, BreakerState.WARNING
        closed = self._closed
        for record in records:
            if closed:
                statistic = record.fast
                if node_trip and record.node is not None:
                    own = record.scores.get(record.node)
                    if own is not None and own > statistic:
                        statistic = own
                if statistic >= enter:
                    self._checked += 1
                    if not record.state.tripped:
                        trigger = "fast" if record.fast >= enter else "the own score"
                        self._log.add(
                            record.step,
                            f"state {record.state.value} / action {record.action.value} with "
                            f"{trigger} {statistic!r} >= tau_enter {enter!r} while closed: the "
                            "breaker had to trip",
                        )
            state = record.state  # closed: NORMAL or WARNING (compared by identity: fast)
            closed = state is normal or state is warning
        self._closed = closed

    def report(self) -> PropertyReport:
        """Return the verdict."""
        vacuous = "" if self._checked else "no closed step reached tau_enter"
        return PropertyReport(
            self.name,
            self.version,
            self._checked,
            self._log.count,
            tuple(self._log.kept),
            f"vacuous: {vacuous}" if vacuous else "",
            what=f"{self._checked} closed step(s) at or above tau_enter",
            vacuous=vacuous,
        )


__all__ = ["MustTripVerifier"]
