"""The online calibration window (ADR-0034's history, RLB-v1's input).

From the control runs, the mean μ and standard deviation σ of fast B_net
(:class:`~biasbreaker.types.ControlStatistics`); online, a sliding window of the last ``W``
observations counting those beyond 3σ and beyond 5σ (:class:`CalibrationWindow`, whose counts
are :class:`~biasbreaker.types.WindowCounts`). A step is *dirty* while a count is above zero;
the control machine recovers only on a clean step.

Source:
    ADR-0034 (RLB-v1) as corrected in ``docs/control.md`` §5 and §7.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from biasbreaker.errors import InputError
from biasbreaker.types import ControlStatistics, WindowCounts


def outlier_level(value: float, statistics: ControlStatistics) -> int:
    """Classify one observation: 5 if above mean + 5σ, 3 if above mean + 3σ, else 0.

    One-sided on purpose: a B_net far *below* the control mean is not a bias event.
    """
    if value > statistics.mean + 5.0 * statistics.std:
        return 5
    if value > statistics.mean + 3.0 * statistics.std:
        return 3
    return 0


class CalibrationWindow:
    """Sliding window of the last ``max_history`` fast-B_net observations, counting outliers.

    Each :meth:`observe` appends one observation's outlier level (0, 3 or 5; see
    :func:`outlier_level`) and, once the window is full, evicts the oldest. The counts are
    kept incrementally, so an observation costs O(1).

    Args:
        statistics: Control mean and std of fast B_net.
        max_history: Window length W, >= 1.
        levels: Outlier levels of the observations already in the window, oldest first (to
            restore a window); at most ``max_history`` of them, each 0, 3 or 5.

    Raises:
        InputError: On a bad ``max_history`` or ``levels``.

    Source:
        ADR-0034 (RLB-v1), "CalibrationHistory" built with ``max_history=W``.
    """

    __slots__ = ("_beyond_3", "_beyond_5", "_levels", "_max_history", "_statistics")

    def __init__(
        self, statistics: ControlStatistics, max_history: int, levels: Iterable[int] = ()
    ) -> None:
        if isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1:
            raise InputError(f"max_history={max_history!r} must be an int >= 1")
        self._statistics = statistics
        self._max_history = max_history
        restored = list(levels)
        if len(restored) > max_history or any(level not in (0, 3, 5) for level in restored):
            raise InputError(
                f"window levels {restored!r} must be at most max_history={max_history} values, "
                "each 0, 3 or 5"
            )
        self._levels: deque[int] = deque(restored, maxlen=max_history)
        self._beyond_3 = sum(1 for level in restored if level >= 3)
        self._beyond_5 = sum(1 for level in restored if level == 5)

    @property
    def statistics(self) -> ControlStatistics:
        """The control statistics the bands come from."""
        return self._statistics

    @property
    def max_history(self) -> int:
        """The window length W."""
        return self._max_history

    @property
    def counts(self) -> WindowCounts:
        """The current counts."""
        return WindowCounts(len(self._levels), self._beyond_3, self._beyond_5)

    def peek(self, value: float) -> WindowCounts:
        """Return the counts after observing ``value``, without changing the window."""
        level = outlier_level(value, self._statistics)
        beyond_3, beyond_5 = self._beyond_3, self._beyond_5
        size = len(self._levels)
        if size == self._max_history:
            oldest = self._levels[0]
            beyond_3 -= oldest >= 3
            beyond_5 -= oldest == 5
        else:
            size += 1
        return WindowCounts(size, beyond_3 + (level >= 3), beyond_5 + (level == 5))

    def observe(self, value: float) -> WindowCounts:
        """Add one observation (fast B_net, finite >= 0) and return the new counts."""
        level = outlier_level(value, self._statistics)
        if len(self._levels) == self._max_history:
            oldest = self._levels[0]
            self._beyond_3 -= oldest >= 3
            self._beyond_5 -= oldest == 5
        self._levels.append(level)
        self._beyond_3 += level >= 3
        self._beyond_5 += level == 5
        return WindowCounts(len(self._levels), self._beyond_3, self._beyond_5)

    def levels(self) -> list[int]:
        """The outlier levels in the window, oldest first (plain data for a snapshot)."""
        return list(self._levels)


__all__ = ["CalibrationWindow", "WindowCounts", "outlier_level"]
