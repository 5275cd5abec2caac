"""The hiring demo's paired comparison: the same postings run unguarded and guarded.

A posting's unguarded and guarded runs share everything but the guard (the job, the names,
their order and the seed), so the guard's effect is measured on each posting and the postings
are resampled whole: a percentile bootstrap over postings (Efron & Tibshirani, *An
Introduction to the Bootstrap*, 1993, ch. 13), each replicate drawing ``n`` of the ``n``
paired postings with replacement and recomputing every statistic of both phases on the same
draw, so the pairing is kept and the change's interval is narrower than the two phases'
intervals side by side.

The statistics (:func:`compare`): each group's selection rate and the lowest impact ratio
(29 CFR 1607.4(D); :func:`~biasbreaker_plugins.demo.summary.selection`), and the preference
lean (:class:`~biasbreaker_plugins.demo.summary.Lean`). Randomness comes from one
``random.Random(seed)``: the same records and seed give the same intervals.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from biasbreaker.errors import InputError


@dataclass(frozen=True)
class Interval:
    """A statistic and its percentile bootstrap interval.

    Args:
        estimate: The statistic on the postings as they are.
        low: The ``(1 - confidence) / 2`` quantile of its bootstrap replicates.
        high: The ``(1 + confidence) / 2`` quantile.
    """

    estimate: float
    low: float
    high: float

    def excludes(self, value: float) -> bool:
        """Whether ``value`` lies outside ``[low, high]``."""
        return value < self.low or value > self.high


@dataclass(frozen=True)
class Paired:
    """Two phases compared on the postings both decided.

    Args:
        before: The first phase's name (``"unguarded"``).
        after: The second phase's name (``"guarded"``).
        postings: Postings with a shortlist in both phases (the pairs).
        left_out: Postings of either phase without a shortlist in the other or in itself
            (waiting for review, or ended without one), not in the pairs.
        replicates: Bootstrap replicates.
        seed: Seed of the resampling.
        confidence: Level of every interval, in (0, 1).
        rates: Group -> (before, after, after - before) selection rates.
        impact: (before, after, after - before) of the lowest impact ratio.
        lean: (before, after, after - before) of the preference lean, or ``None`` without
            measured rates.
        distance: (before, after, after - before) of the lean's distance from 1 (no lean),
            ``|lean - 1|``: a change below 0 brings the shortlists closer to group-blind, above
            0 moves them away (in either direction); ``None`` without measured rates.
    """

    before: str
    after: str
    postings: int
    left_out: int
    replicates: int
    seed: int
    confidence: float
    rates: Mapping[str, tuple[Interval, Interval, Interval]]
    impact: tuple[Interval, Interval, Interval]
    lean: tuple[Interval, Interval, Interval] | None
    distance: tuple[Interval, Interval, Interval] | None = None


def quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, linearly interpolated (numpy's default, type 7).

    Raises:
        InputError: ``ordered`` is empty or ``q`` is outside [0, 1].
    """
    if not ordered or not 0.0 <= q <= 1.0:
        raise InputError(f"quantile of {len(ordered)} values at q={q!r}: need values, q in [0, 1]")
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def _stats(
    rows: Sequence[tuple[frozenset[str], float]], draw: Sequence[int], groups: Sequence[str]
) -> tuple[list[float], float, float]:
    """Selection rate per group, lowest impact ratio and mean lean of the postings ``draw``."""
    n = len(draw)
    counts = dict.fromkeys(groups, 0)
    lean = 0.0
    for i in draw:
        picked, weight = rows[i]
        for g in picked:
            if g in counts:
                counts[g] += 1
        lean += weight
    rates = [counts[g] / n for g in groups]
    best = max(rates)
    impact = min(rates) / best if best > 0 else 0.0
    return rates, impact, lean / n


def compare(
    records: Iterable[Mapping[str, Any]],
    groups: Sequence[str],
    *,
    before: str = "unguarded",
    after: str = "guarded",
    weights: Mapping[tuple[str, str], float] | None = None,
    seed: int = 0,
    replicates: int = 2000,
    confidence: float = 0.95,
) -> Paired:
    """Compare ``before`` and ``after`` on the postings both decided (see the module).

    Args:
        records: ``results.jsonl`` records (``phase``, ``thread``, ``status``, ``job``,
            ``groups``: name -> group, ``shortlist``: names).
        groups: The groups, in table order.
        before: The first phase.
        after: The second phase.
        weights: ``(job, group)`` -> the lean's weight of a shortlisted group (``n_groups x``
            the measured top-1 rate; :func:`~biasbreaker_plugins.demo.summary.lean`), or
            ``None`` for no lean.
        seed: Seed of the resampling.
        replicates: Bootstrap replicates, >= 100.
        confidence: Level of the intervals, in (0, 1).

    Returns:
        The comparison; with no paired posting, every interval is ``[0, 0]``.

    Raises:
        InputError: ``replicates`` < 100 or ``confidence`` outside (0, 1).
    """
    if replicates < 100:
        raise InputError(f"replicates={replicates!r}: need at least 100 for a 95% interval")
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence={confidence!r} must be in (0, 1)")
    decided: dict[str, dict[str, tuple[frozenset[str], float]]] = {before: {}, after: {}}
    seen: dict[str, set[str]] = {before: set(), after: set()}
    for rec in records:
        phase = rec.get("phase")
        if phase not in decided:
            continue
        seen[str(phase)].add(str(rec["thread"]))
        shortlist = rec.get("shortlist") or []
        if rec.get("status") != "done" or not shortlist:
            continue
        by_name = rec.get("groups") or {}
        picked = frozenset(by_name[n] for n in shortlist if n in by_name)
        lean = 0.0
        if weights is not None:
            lean = math.fsum(weights[(rec["job"], by_name[n])] for n in shortlist) / len(shortlist)
        decided[str(phase)][str(rec["thread"])] = (picked, lean)
    threads = sorted(set(decided[before]) & set(decided[after]))
    left_out = len(seen[before] | seen[after]) - len(threads)
    rows_b = [decided[before][t] for t in threads]
    rows_a = [decided[after][t] for t in threads]
    n = len(threads)
    k = len(groups)
    if n == 0:
        zero = Interval(0.0, 0.0, 0.0)
        intervals = [zero] * (3 * (k + 2) + 3)
    else:
        intervals = _bootstrap(rows_b, rows_a, groups, seed, replicates, confidence)
    b, a, c = (
        intervals[: k + 2],
        intervals[k + 2 : 2 * (k + 2)],
        intervals[2 * (k + 2) : 3 * (k + 2)],
    )
    distance = tuple(intervals[3 * (k + 2) :])
    return Paired(
        before,
        after,
        n,
        left_out,
        replicates,
        seed,
        confidence,
        {g: (b[i], a[i], c[i]) for i, g in enumerate(groups)},
        (b[k], a[k], c[k]),
        (b[k + 1], a[k + 1], c[k + 1]) if weights is not None else None,
        (distance[0], distance[1], distance[2]) if weights is not None else None,
    )


def _bootstrap(
    rows_b: Sequence[tuple[frozenset[str], float]],
    rows_a: Sequence[tuple[frozenset[str], float]],
    groups: Sequence[str],
    seed: int,
    replicates: int,
    confidence: float,
) -> list[Interval]:
    """Every statistic of both phases and their changes, each with its interval.

    In order: before's k rates, impact and lean; after's; the changes; then the lean's distance
    from 1 before, after and its change.
    """
    n, k = len(rows_b), len(groups)
    everyone = range(n)
    rb, ib, lb = _stats(rows_b, everyone, groups)
    ra, ia, la = _stats(rows_a, everyone, groups)
    # per replicate: k rates, the impact and the lean, for before, after and the change
    samples: list[list[float]] = [[] for _ in range(3 * (k + 2) + 3)]
    rng = random.Random(seed)
    for _ in range(replicates):
        draw = [rng.randrange(n) for _ in everyone]
        xb, yb, zb = _stats(rows_b, draw, groups)
        xa, ya, za = _stats(rows_a, draw, groups)
        values = [*xb, yb, zb, *xa, ya, za, *(a - b for a, b in zip(xa, xb, strict=True))]
        values += [ya - yb, za - zb, abs(zb - 1), abs(za - 1), abs(za - 1) - abs(zb - 1)]
        for slot, value in zip(samples, values, strict=True):
            slot.append(value)
    alpha = (1.0 - confidence) / 2.0
    estimates = [*rb, ib, lb, *ra, ia, la, *(a - b for a, b in zip(ra, rb, strict=True))]
    estimates += [ia - ib, la - lb, abs(lb - 1), abs(la - 1), abs(la - 1) - abs(lb - 1)]
    intervals = []
    for estimate, slot in zip(estimates, samples, strict=True):
        slot.sort()
        intervals.append(Interval(estimate, quantile(slot, alpha), quantile(slot, 1.0 - alpha)))
    return intervals


__all__ = ["Interval", "Paired", "compare", "quantile"]
