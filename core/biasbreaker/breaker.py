"""The hysteresis circuit breaker (WP2) and payload freezing (WP4).

:class:`CircuitBreaker` watches the two scales of B_net. On the *fast* scale it has two
thresholds: it trips when ``fast >= tau_enter`` and clears only when ``fast < tau_exit``, with
``tau_exit < tau_enter``; the interval ``[tau_exit, tau_enter)`` is a dead-band in which it
never changes between closed and tripped, so a score oscillating near one threshold cannot
make it thrash. On the *slow* scale a single threshold ``tau_warn`` raises a drift warning.
Every decision also carries a continuous, advisory severity, the mixing ratio
``sigmoid((fast - tau_enter) / kappa)``.

The breaker is the hysteresis element only. The full lifecycle (cool-down, retries, recovery,
escalation) is :class:`biasbreaker.machine.ControlMachine`.

:func:`freeze` takes an immutable deep snapshot of a node's output when the breaker halts it.

Source:
    Phase 3 design (M3), R1, R2, R4; WP2 and WP4.
"""

from __future__ import annotations

import math
from typing import Final

from biasbreaker.errors import InputError
from biasbreaker.types import (
    BreakerAction,
    BreakerDecision,
    BreakerState,
    FrozenPayload,
    JSONValue,
    Thresholds,
    check_unit_score,
)

_exp: Final = math.exp

# The hot path builds decisions with tuple.__new__, skipping BreakerDecision's validation: every
# field is valid by construction (state/action pairs from ALLOWED_ACTIONS, the ratio from a
# sigmoid, fast checked above). tests/core/test_breaker.py re-validates every decision it gets.
_new_decision: Final = tuple.__new__
_Decision: Final = BreakerDecision
_NORMAL: Final = BreakerState.NORMAL
_WARNING: Final = BreakerState.WARNING
_INTERVENTION: Final = BreakerState.INTERVENTION
_PROCEED: Final = BreakerAction.PROCEED
_HALT: Final = BreakerAction.HALT

REASON_TRIP: Final = "fast >= tau_enter: tripped"
REASON_HOLD: Final = "fast >= tau_exit: still tripped (dead-band or above)"
REASON_CLEAR: Final = "fast < tau_exit: cleared"
REASON_WARN: Final = "slow >= tau_warn: drift warning"
REASON_NORMAL: Final = "fast < tau_enter and slow < tau_warn"


def mixing_ratio(b_net: float, tau_enter: float, kappa: float) -> float:
    """Return the advisory severity ``sigmoid((b_net - tau_enter) / kappa)`` in [0, 1].

    Computed without overflow for any finite input: for ``x >= 0`` as ``1 / (1 + e^-x)``,
    otherwise as ``e^x / (1 + e^x)``. It is 0.5 at ``b_net == tau_enter``, increases
    monotonically with ``b_net``, and saturates to exactly 0 or 1 for ``|x|`` beyond ~745.

    Args:
        b_net: Fast-scale B_net, finite.
        tau_enter: The trip threshold, finite.
        kappa: Sigmoid width in B_net units, > 0.

    Returns:
        The mixing ratio, a float in [0, 1].

    Source:
        Phase 3 design (M3), R2 "continuous mixing ratio".
    """
    x = (b_net - tau_enter) / kappa
    if x >= 0.0:
        return 1.0 / (1.0 + _exp(-x))
    e = _exp(x)
    return e / (1.0 + e)


def freeze(payload: object) -> FrozenPayload:
    """Take an immutable deep snapshot of a JSON-like payload, with its SHA-256 content digest.

    The payload is validated and copied at call time: mutating the original afterwards cannot
    reach the snapshot. ``result.value`` is a deep read-only view (arrays become tuples,
    objects read-only mappings); ``result.thaw()`` returns a fresh mutable copy;
    ``result.sha256`` is the SHA-256 of the payload's canonical JSON (sorted keys, no
    whitespace), so equal content gives an equal digest whatever the key order.

    Args:
        payload: ``None``, bool, int, finite float, str, or lists/tuples and dicts (with ``str``
            keys) of these, nested to any depth. Tuples are frozen as JSON arrays. A
            :class:`~biasbreaker.types.LazyPayload` is built, and its value frozen.

    Returns:
        The frozen payload.

    Raises:
        InputError: If a value is not JSON (e.g. a ``set``, ``bytes``, an object, NaN or
            infinity, a non-``str`` key, a reference cycle); the message names its path, e.g.
            ``payload['items'][2]``, and its type.

    Source:
        Phase 3 design (M3), R4 and WP4 "payload freezing".
    """
    return FrozenPayload.of(payload)


class CircuitBreaker:
    """Two-threshold hysteresis breaker on the fast scale, with a drift warning on the slow one.

    ``check(fast, slow)`` returns one of three decisions:

    - ``INTERVENTION / HALT`` while tripped. It trips when ``fast >= tau_enter`` and stays
      tripped until ``fast < tau_exit``.
    - ``WARNING / PROCEED`` when not tripped and ``slow >= tau_warn``.
    - ``NORMAL / PROCEED`` otherwise.

    The only state is the tripped flag; ``check`` is O(1) and allocates one decision.

    Args:
        tau_enter: Trip threshold on the fast scale, > ``tau_exit``.
        tau_exit: Clear threshold on the fast scale, > 0.
        tau_warn: Warning threshold on the slow scale, > 0.
        kappa: Width of the mixing-ratio sigmoid, > 0, in B_net units.
        tripped: Initial tripped flag (to restore a breaker), default ``False``.

    Raises:
        ThresholdError: If ``tau_enter <= tau_exit``, a threshold or ``kappa`` is not positive,
            or a value is not finite.

    Source:
        Phase 3 design (M3), R1, R2, WP2.
    """

    __slots__ = ("_kappa", "_tau_enter", "_tau_exit", "_tau_warn", "_thresholds", "_tripped")

    def __init__(
        self,
        tau_enter: float,
        tau_exit: float,
        tau_warn: float,
        kappa: float,
        *,
        tripped: bool = False,
    ) -> None:
        self._thresholds = Thresholds(tau_enter, tau_exit, tau_warn, kappa)
        self._tau_enter = self._thresholds.tau_enter
        self._tau_exit = self._thresholds.tau_exit
        self._tau_warn = self._thresholds.tau_warn
        self._kappa = self._thresholds.kappa
        self._tripped = bool(tripped)

    @classmethod
    def from_thresholds(cls, thresholds: Thresholds, *, tripped: bool = False) -> CircuitBreaker:
        """Build a breaker from a validated :class:`~biasbreaker.types.Thresholds`."""
        return cls(
            thresholds.tau_enter,
            thresholds.tau_exit,
            thresholds.tau_warn,
            thresholds.kappa,
            tripped=tripped,
        )

    @property
    def thresholds(self) -> Thresholds:
        """The breaker's thresholds."""
        return self._thresholds

    @property
    def tripped(self) -> bool:
        """Whether the breaker is tripped (the last check returned INTERVENTION)."""
        return self._tripped

    def reset(self) -> None:
        """Clear the tripped flag."""
        self._tripped = False

    def check(self, fast: float, slow: float) -> BreakerDecision:
        """Decide on one step from the two scales of B_net.

        Args:
            fast: Fast-EWMA B_net (spikes), in [0, 1].
            slow: Slow-EWMA B_net (drift), in [0, 1].

        Returns:
            The decision; ``b_net`` is ``fast``; ``frozen_payload`` is ``None`` (freezing is
            the caller's or the control machine's job).

        Raises:
            ScoreError: If ``fast`` or ``slow`` is not a number in [0, 1] (NaN, infinite,
                negative or above 1); the message names the argument and its value. The
                breaker's state is unchanged.
        """
        if type(fast) is not float or not 0.0 <= fast <= 1.0:
            fast = check_unit_score("fast", fast)
        if type(slow) is not float or not 0.0 <= slow <= 1.0:
            slow = check_unit_score("slow", slow)
        x = (fast - self._tau_enter) / self._kappa
        if x >= 0.0:
            ratio = 1.0 / (1.0 + _exp(-x))
        else:
            e = _exp(x)
            ratio = e / (1.0 + e)
        if self._tripped:
            if fast < self._tau_exit:
                self._tripped = False
                reason = REASON_CLEAR
            else:
                return _new_decision(
                    _Decision, (_INTERVENTION, _HALT, ratio, fast, REASON_HOLD, None)
                )
        elif fast >= self._tau_enter:
            self._tripped = True
            return _new_decision(_Decision, (_INTERVENTION, _HALT, ratio, fast, REASON_TRIP, None))
        else:
            reason = REASON_NORMAL
        if slow >= self._tau_warn:
            return _new_decision(_Decision, (_WARNING, _PROCEED, ratio, fast, REASON_WARN, None))
        return _new_decision(_Decision, (_NORMAL, _PROCEED, ratio, fast, reason, None))

    def snapshot(self) -> dict[str, JSONValue]:
        """Return the breaker as plain JSON: thresholds and the tripped flag."""
        return {"thresholds": self._thresholds.to_json(), "tripped": self._tripped}

    @classmethod
    def restore(cls, snapshot: dict[str, JSONValue]) -> CircuitBreaker:
        """Rebuild a breaker from :meth:`snapshot` output.

        Raises:
            InputError: If a field is missing or ``tripped`` is not a bool.
            ThresholdError: If the thresholds are inconsistent.
        """
        thresholds = snapshot.get("thresholds") if isinstance(snapshot, dict) else None
        tripped = snapshot.get("tripped") if isinstance(snapshot, dict) else None
        if not isinstance(thresholds, dict) or not isinstance(tripped, bool):
            raise InputError(
                "breaker snapshot needs 'thresholds' (an object) and 'tripped' "
                "(a bool); build it with CircuitBreaker.snapshot()"
            )
        return cls.from_thresholds(Thresholds.from_json(thresholds), tripped=tripped)


__all__ = ["CircuitBreaker", "freeze", "mixing_ratio"]
