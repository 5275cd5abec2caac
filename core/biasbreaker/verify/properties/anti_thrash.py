"""Anti-thrash: the breaker does not flip while fast B_net stays inside the dead-band.

The breaker is *closed* in NORMAL and WARNING and *tripped* in INTERVENTION, RECOVERY and
ESCALATED. Hysteresis allows a change between the two only on a threshold crossing: closed
-> tripped needs ``fast >= tau_enter``, tripped -> closed needs ``fast < tau_exit``. So at a
step whose fast B_net lies in the dead-band ``[tau_exit, tau_enter)`` the breaker cannot flip.
NORMAL <-> WARNING (the slow scale) and changes among the tripped states (the re-check, the
retry budget) are not flips of the breaker and are checked by other properties.

**Node trips (v2).** When the trace header says ``node_trip: true``, the machine also trips on
the guarded step's own local score: a closed -> tripped change with fast below ``tau_enter``
is allowed exactly when the record's own score (``scores[node]``) is ``>= tau_enter``. Nothing
else changes: without node trips in the header (or without an own score at or above
``tau_enter`` in the record) such a change is a violation, and tripped -> closed still needs
``fast < tau_exit``. On traces without node trips v2 is v1.

``checked`` counts the steps whose fast B_net lies in the dead-band; the verdict is vacuous when
the breaker never flipped (a violation can only happen at a flip).

Source:
    Phase 3 design (M3), R2 and §3 "the breaker never flips state while B_net stays within
    the [tau_exit, tau_enter] dead-band".
"""

from __future__ import annotations

from collections.abc import Sequence

from biasbreaker.trace.lines import StepLineV1
from biasbreaker.types import BreakerState, Thresholds
from biasbreaker.verify.report import PropertyReport, ViolationLog


class AntiThrashVerifier:
    """Streaming verifier of the anti-thrash property (see the module docstring).

    Args:
        thresholds: The run's thresholds (from the trace header).
        node_trip: Whether the header says the machine tripped on a step's own score too.
    """

    name = "anti-thrash"
    version = "v2"

    def __init__(self, thresholds: Thresholds, *, node_trip: bool = False) -> None:
        self._node_trip = node_trip
        self._enter = thresholds.tau_enter
        self._exit = thresholds.tau_exit
        self._previous = BreakerState.NORMAL
        self._in_band = 0
        self._flips = 0
        self._log = ViolationLog()

    def observe(self, records: Sequence[StepLineV1]) -> None:
        """Check each step against the previous one."""
        low, high = self._exit, self._enter
        previous = self._previous
        for record in records:
            fast = record.fast
            if low <= fast < high:
                self._in_band += 1
            state = record.state
            if state is not previous and state.tripped is not previous.tripped:
                self._flip(record, previous)
            previous = state
        self._previous = previous

    def _flip(self, record: StepLineV1, previous: BreakerState) -> None:
        """Check one change between closed and tripped."""
        self._flips += 1
        self._previous = previous
        fast = record.fast
        was, now = previous.tripped, record.state.tripped
        if now and not was and fast < self._enter and not self._node_tripped(record):
            own = None if record.node is None else record.scores.get(record.node)
            if not self._node_trip:
                why = "and the header says node trips are off"
            elif own is None:
                why = "and the step has no own score (no node, or none recorded)"
            else:
                why = f"and the own score {own!r} of node {record.node!r} is not >= tau_enter"
            self._log.add(
                record.step,
                f"tripped ({self._previous.value} -> {record.state.value}) with fast "
                f"{fast!r} below tau_enter {self._enter!r}, {why}",
            )
        elif was and not now and fast >= self._exit:
            self._log.add(
                record.step,
                f"cleared ({self._previous.value} -> {record.state.value}) with fast "
                f"{fast!r} not below tau_exit {self._exit!r}",
            )

    def _node_tripped(self, record: StepLineV1) -> bool:
        """Whether node trips are on and this record's own score reached tau_enter."""
        if not self._node_trip or record.node is None:
            return False
        own = record.scores.get(record.node)
        return own is not None and own >= self._enter

    def report(self) -> PropertyReport:
        """Return the verdict."""
        vacuous = "" if self._flips else "the breaker never changed between closed and tripped"
        return PropertyReport(
            self.name,
            self.version,
            self._in_band,
            self._log.count,
            tuple(self._log.kept),
            f"vacuous: {vacuous}" if vacuous else "",
            what=f"{self._flips} flip(s), {self._in_band} dead-band step(s)",
            vacuous=vacuous,
        )


__all__ = ["AntiThrashVerifier"]
