"""Applying the breaker's mixing ratio ``m`` to a repair: ``blend(original, corrected, m)``.

The mixing ratio ``m = sigmoid((s - tau_enter) / kappa)`` is M3's advisory severity of the
statistic ``s`` that trips (fast B_net, or with node trips on ``max(fast, own score)``); M4
applies it. The rule, by JSON type:

* **numbers** (int or float, not bool) are blended linearly, ``(1 - m) * original +
  m * corrected``; the result is an int only when both inputs are ints and the blend is a whole
  number;
* **text, booleans, null, and any pair of different types** are categorical: the corrected
  value when ``m >= 0.5``, else the original;
* **arrays** of equal length whose elements are all numbers are blended element-wise; any other
  array, including a **ranking** (an ordering of names), is categorical as a whole, because
  mixing two orderings element by element does not give an ordering;
* **objects** are blended key by key; a key in only one of them is kept from the corrected
  payload when ``m >= 0.5`` and from the original otherwise.

At a trip ``s >= tau_enter`` so ``m >= 0.5``: a text payload is always replaced by its
correction, and structured payloads move at least half-way. The re-check measures the *blended*
repair, so what is promoted is what was measured.

Source:
    Phase 3 design (M3) R2 (the continuous mixing ratio); Phase 4 design (M4) R5 and WP5.
"""

from __future__ import annotations

import math

from biasbreaker.errors import InputError
from biasbreaker.types import JSONValue

CATEGORICAL_CUTOFF = 0.5
"""``m`` at or above which categorical values come from the corrected payload."""


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def blend(original: JSONValue, corrected: JSONValue, m: float) -> JSONValue:
    """Blend a corrected payload into the original by the mixing ratio ``m``.

    Args:
        original: The frozen (biased) payload, as plain JSON.
        corrected: The repair, as plain JSON.
        m: Mixing ratio in [0, 1]; 1 = fully corrected.

    Returns:
        The blended payload (see the module docstring for the rule per type).

    Raises:
        InputError: If ``m`` is not a finite number in [0, 1].
    """
    if not (_is_number(m) and math.isfinite(m) and 0.0 <= m <= 1.0):
        raise InputError(f"mixing ratio m={m!r} must be a number in [0, 1]")
    return _blend(original, corrected, float(m))


def _blend(original: JSONValue, corrected: JSONValue, m: float) -> JSONValue:
    take_corrected = m >= CATEGORICAL_CUTOFF
    if _is_number(original) and _is_number(corrected):
        assert isinstance(original, (int, float))
        assert isinstance(corrected, (int, float))
        mixed = (1.0 - m) * original + m * corrected
        if isinstance(original, int) and isinstance(corrected, int) and mixed.is_integer():
            return int(mixed)
        return mixed
    if isinstance(original, dict) and isinstance(corrected, dict):
        out: dict[str, JSONValue] = {}
        for key in corrected:
            if key in original:
                out[key] = _blend(original[key], corrected[key], m)
            elif take_corrected:
                out[key] = corrected[key]
        for key in original:
            if key not in corrected and not take_corrected:
                out[key] = original[key]
        return out
    if (
        isinstance(original, list)
        and isinstance(corrected, list)
        and len(original) == len(corrected)
        and all(_is_number(v) for v in (*original, *corrected))
    ):
        return [_blend(a, b, m) for a, b in zip(original, corrected, strict=True)]
    return corrected if take_corrected else original


__all__ = ["CATEGORICAL_CUTOFF", "blend"]
