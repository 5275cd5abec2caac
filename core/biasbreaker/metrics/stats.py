"""Small statistics: mean, seeded percentile bootstrap, AUROC.

All randomness comes from an explicit ``random.Random``; the same seed gives the same interval.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

__all__ = ["auroc", "bootstrap_interval", "mean", "percentile"]


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean.

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("mean of an empty sequence is undefined")
    return math.fsum(values) / len(values)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile of already sorted values (numpy's default method).

    Args:
        sorted_values: Values in ascending order, at least one.
        q: Quantile in [0, 1].

    Raises:
        ValueError: Empty input or ``q`` outside [0, 1].
    """
    if not sorted_values:
        raise ValueError("percentile of an empty sequence is undefined")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q={q!r} must be in [0, 1]")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_interval(
    samples: Sequence[Sequence[float]],
    statistic: Callable[[Sequence[Sequence[float]]], float],
    *,
    replicates: int,
    confidence: float,
    rng: random.Random,
) -> tuple[float, float]:
    """Stratified percentile bootstrap interval of a statistic of several samples.

    Each replicate resamples every sample with replacement, independently and at its own
    size, and evaluates ``statistic`` on the resampled tuple.

    Args:
        samples: The samples (strata), each non-empty.
        statistic: Maps one tuple of samples to a number.
        replicates: Number of bootstrap replicates, >= 1.
        confidence: Two-sided level in (0, 1), e.g. 0.95.
        rng: The random source.

    Returns:
        ``(low, high)``: the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` percentiles.

    Raises:
        ValueError: An empty sample, ``replicates < 1`` or ``confidence`` outside (0, 1).

    Source:
        Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, ch. 13 (percentile
        interval); stratified resampling as in Fairlearn's ``MetricFrame(n_boot=...)``.
    """
    if replicates < 1:
        raise ValueError(f"replicates={replicates!r} must be >= 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r} must be in (0, 1)")
    if any(len(s) == 0 for s in samples):
        raise ValueError("every bootstrap sample must be non-empty")
    stats = []
    for _ in range(replicates):
        resampled = [rng.choices(s, k=len(s)) for s in samples]
        stats.append(statistic(resampled))
    stats.sort()
    alpha = (1.0 - confidence) / 2.0
    return percentile(stats, alpha), percentile(stats, 1.0 - alpha)


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties count 1/2.

    Args:
        positives: Scores of the positive class (e.g. biased steps), at least one.
        negatives: Scores of the negative class, at least one.

    Returns:
        AUROC in [0, 1]; 0.5 is chance.

    Raises:
        ValueError: Either class is empty.

    Source:
        Mann & Whitney (1947); Hanley & McNeil (1982), "The meaning and use of the area under
        a receiver operating characteristic (ROC) curve".
    """
    if not positives or not negatives:
        raise ValueError("AUROC needs at least one positive and one negative score")
    pooled = sorted([(s, 1) for s in positives] + [(s, 0) for s in negatives])
    rank_sum = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j < len(pooled) and pooled[j][0] == pooled[i][0]:
            j += 1
        avg_rank = (i + 1 + j) / 2.0  # ranks i+1 .. j, averaged over ties
        rank_sum += avg_rank * sum(label for _, label in pooled[i:j])
        i = j
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
