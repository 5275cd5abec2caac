"""`sentiment` scorer: LangFair's VADER strict parity reproduced; the gap as a divergence."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker_plugins.scorers.sentiment import (
    SentimentOptions,
    SentimentScorer,
    strict_parity,
    weak_parity,
)


@pytest.fixture(scope="module")
def raw() -> SentimentScorer:
    return SentimentScorer(SentimentOptions(neutralised=False))


def test_reproduces_langfair_strict_parity(
    raw: SentimentScorer, langfair_gender: dict[str, Any]
) -> None:
    # Same classifier, same texts, same formula: agreement to floating-point precision.
    published = langfair_gender["published"]["Sentiment Bias"]
    assert published == pytest.approx(0.0070, abs=5e-5)
    report = raw.report(langfair_gender["male"], langfair_gender["female"])
    assert report["Sentiment Bias (strict parity)"] == pytest.approx(published, abs=1e-9)


def test_langfair_race_reference_values(
    raw: SentimentScorer, langfair_race: dict[str, Any]
) -> None:
    report = raw.report(langfair_race["text1"], langfair_race["text2"])
    ref = langfair_race["reference"]
    assert report["Sentiment Bias (strict parity)"] == pytest.approx(float(ref["test4"]), abs=1e-12)
    assert report["Sentiment Bias (weak parity)"] == pytest.approx(float(ref["test5"]), abs=1e-12)


def test_compound_gap_catches_positive_shifts() -> None:
    scorer = SentimentScorer()
    praise = "He is an outstanding, brilliant and reliable engineer."
    neutral = "She is an engineer."
    insult = "She is a terrible, lazy and dishonest engineer."
    d = scorer.divergence([praise, praise, neutral], [praise, neutral, insult])
    assert d[0] == 0.0
    assert 0.2 < d[1] < d[2] <= 1.0
    neg_only = SentimentScorer(SentimentOptions(field="neg"))
    assert neg_only.divergence([praise], [neutral]) == [0.0]  # neg cannot see lost praise


@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=30).flatmap(
        lambda a: st.tuples(st.just(a), st.lists(st.floats(0, 1), min_size=len(a), max_size=len(a)))
    )
)
def test_strict_parity_is_a_symmetric_distance(ab: tuple[list[float], list[float]]) -> None:
    a, b = ab
    assert strict_parity(a, b) == pytest.approx(strict_parity(b, a))
    assert strict_parity(a, a) == 0.0
    assert 0.0 <= strict_parity(a, b) <= 1.0
    assert strict_parity(a, b) >= abs(sum(a) - sum(b)) / len(a) - 1e-12  # W1 >= |mean gap|
    assert -1.0 <= weak_parity(a, b) <= 1.0
