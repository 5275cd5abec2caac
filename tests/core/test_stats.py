"""Small statistics: percentile, seeded bootstrap, AUROC."""

from __future__ import annotations

import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.metrics.stats import auroc, bootstrap_interval, mean, percentile


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=50))
def test_percentile_matches_the_standard_library(values: list[float]) -> None:
    data = sorted(values)
    quartiles = statistics.quantiles(data, n=4, method="inclusive")
    for q, expected in zip((0.25, 0.5, 0.75), quartiles, strict=True):
        assert percentile(data, q) == pytest.approx(expected, abs=1e-6)


def brute_auroc(pos: list[float], neg: list[float]) -> float:
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=30),
    st.lists(st.integers(0, 5), min_size=1, max_size=30),
)
def test_auroc_equals_the_pairwise_definition(pos: list[int], neg: list[int]) -> None:
    p, n = [float(x) for x in pos], [float(x) for x in neg]
    assert auroc(p, n) == pytest.approx(brute_auroc(p, n))


def test_auroc_edges() -> None:
    assert auroc([1.0, 2.0], [0.0]) == 1.0
    assert auroc([0.0], [0.0, 0.0]) == 0.5
    with pytest.raises(ValueError, match="at least one"):
        auroc([], [1.0])


def test_bootstrap_is_seeded_and_covers_the_mean() -> None:
    source = random.Random(1)
    data = [source.gauss(0.3, 0.1) for _ in range(40)]
    a = bootstrap_interval(
        [data], lambda s: mean(s[0]), replicates=500, confidence=0.9, rng=random.Random(7)
    )
    b = bootstrap_interval(
        [data], lambda s: mean(s[0]), replicates=500, confidence=0.9, rng=random.Random(7)
    )
    assert a == b
    assert a[0] < mean(data) < a[1]
    with pytest.raises(ValueError, match="non-empty"):
        bootstrap_interval([[]], lambda s: 0.0, replicates=1, confidence=0.9, rng=random.Random(0))
