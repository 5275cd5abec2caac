"""The paired ratio: a guarded and a bare call alternated, the median of their time ratios.

The benchmark's own ratio divides two means measured one after the other, seconds apart, so a
shift in the machine's load between them (or a 1 ms sleep's jitter) moves it by more than the
5 % the goals are about: on a 2-core machine at load 0.7 it swung from 0.92 to 1.15 over five
runs of the same code. Alternating the two call by call puts both under the same conditions;
the median of the pairs' ratios is the guard's cost as a factor, stable to about 1 % between
runs. ``benchmarks/conftest.py`` prints it beside the ratio of means (``extra_info
["paired_ratio"]``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

PAIRS = 200
"""Pairs of calls measured (after :data:`WARMUP` of each)."""
WARMUP = 20


def paired_ratio(bare: Callable[[], Any], guarded: Callable[[], Any], pairs: int = PAIRS) -> float:
    """The median, over ``pairs`` back-to-back pairs, of guarded time / bare time.

    Args:
        bare: One call of the baseline (its input built inside or before it).
        guarded: One call of the guarded version.
        pairs: Pairs measured, >= 1.

    Returns:
        The median ratio (1.0 = no cost).
    """
    for _ in range(WARMUP):
        bare()
        guarded()
    ratios = []
    for _ in range(pairs):
        start = time.perf_counter()
        bare()
        middle = time.perf_counter()
        guarded()
        ratios.append((time.perf_counter() - middle) / (middle - start))
    return statistics.median(ratios)
