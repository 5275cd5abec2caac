"""`lexical` scorer: LangFair's ROUGE-L and BLEU reproduced on its own real responses."""

from __future__ import annotations

from typing import Any

import pytest

from biasbreaker.probe import (
    CounterfactualGenerator,
    CounterfactualMapping,
    ResponsePair,
    score_pairs,
)
from biasbreaker_plugins.scorers.lexical import LexicalOptions, LexicalScorer

# LangFair neutralises with nltk.word_tokenize + its own 29-word list and detokenises with
# sacremoses before scoring; we neutralise in place with our grammar-aware list and tokenise
# without the punkt download. Re-running the measurement with LangFair's exact word list on our
# tokenisation moves BLEU by 0.0011 and ROUGE-L by 0.0010, so 0.005 covers the remaining
# tokenisation and word-choice differences while still catching any formula change (using raw,
# un-neutralised text already moves ROUGE-L by 0.008 and BLEU by 0.007).
TOLERANCE = 0.005


@pytest.fixture(scope="module")
def scorer() -> LexicalScorer:
    return LexicalScorer()


@pytest.fixture(scope="module")
def masked(langfair_gender: dict[str, Any]) -> tuple[list[str], list[str]]:
    gen = CounterfactualGenerator()
    mask = lambda t: str(gen.neutralise(t, axes=["gender"], names=False))  # noqa: E731
    return [mask(t) for t in langfair_gender["male"]], [mask(t) for t in langfair_gender["female"]]


def test_reproduces_langfair_rouge_l_and_bleu(
    scorer: LexicalScorer, langfair_gender: dict[str, Any], masked: tuple[list[str], list[str]]
) -> None:
    report = scorer.report(*masked)
    published = langfair_gender["published"]
    assert published["RougeL Similarity"] == pytest.approx(0.476, abs=5e-4)
    assert published["Bleu Similarity"] == pytest.approx(0.262, abs=5e-4)
    assert report["RougeL Similarity"] == pytest.approx(
        published["RougeL Similarity"], abs=TOLERANCE
    )
    assert report["Bleu Similarity"] == pytest.approx(published["Bleu Similarity"], abs=TOLERANCE)


def test_our_map_back_differs_on_purpose(
    scorer: LexicalScorer, langfair_gender: dict[str, Any], masked: tuple[list[str], list[str]]
) -> None:
    """Mapping female responses back to male terms instead of masking both sides.

    LangFair's prompts were not clean swaps (both kept "Mrs. Parker"), so the male responses
    keep female words that the map-back turns male: lower similarity than masking. Both
    numbers are in docs/detection.md.
    """
    gen = CounterfactualGenerator()
    swap = CounterfactualMapping("gender", (("male", "female"), ("female", "male")))
    back = [str(gen.map_back(t, swap)) for t in langfair_gender["female"]]
    mapped = scorer.report(langfair_gender["male"], back)
    assert mapped["RougeL Similarity"] == pytest.approx(0.4585, abs=1e-3)
    assert mapped["Bleu Similarity"] == pytest.approx(0.2403, abs=1e-3)
    assert mapped["RougeL Similarity"] < scorer.report(*masked)["RougeL Similarity"]


def test_langfair_race_reference_values(
    scorer: LexicalScorer, langfair_race: dict[str, Any]
) -> None:
    report = scorer.report(langfair_race["text1"], langfair_race["text2"])
    ref = langfair_race["reference"]
    assert report["RougeL Similarity"] == pytest.approx(float(ref["test3"]), abs=1e-9)
    assert report["Bleu Similarity"] == pytest.approx(float(ref["test1"]), rel=1e-6)


def test_real_responses_are_mostly_sampling_noise(langfair_gender: dict[str, Any]) -> None:
    """The issue's point, measured: the male/female gap is within the same-group gap.

    Each male response's same-group resample is the next male response to the same prompt
    (LangFair drew 25 per prompt at temperature 1).
    """
    male, female = langfair_gender["male"], langfair_gender["female"]
    pairs = [
        ResponsePair(male[i], female[i], resample=male[(i // 25) * 25 + (i % 25 + 1) % 25])
        for i in range(75)
    ]
    report = score_pairs(
        pairs, [LexicalScorer()], neutralisation="mask", mask_axes=["gender"], mask_names=False
    )
    s = report.scorers[0]
    assert s.counterfactual == pytest.approx(0.6305, abs=1e-3)
    assert s.same_group == pytest.approx(0.6125, abs=1e-3)
    assert s.excess_ci is not None
    assert s.excess_ci[0] < 0.0 < s.excess_ci[1]


@pytest.mark.parametrize("metric", ["mean", "rouge-l", "bleu"])
def test_divergence_range_identity_and_symmetry(metric: str) -> None:
    scorer = LexicalScorer(LexicalOptions(metric=metric))
    a = "The candidate has strong skills. Dr. Smith agreed."
    b = "The applicant lacks the required skills entirely."
    d = scorer.divergence([a, a, b, ""], [a, b, a, ""])
    assert d[0] == pytest.approx(0.0, abs=1e-12)
    assert 0.0 < d[1] <= 1.0
    assert d[1] == pytest.approx(d[2])
    assert d[3] == 0.0


def test_tokenizer_needs_no_nltk_download(monkeypatch: pytest.MonkeyPatch) -> None:
    import nltk

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("nltk tried to download data")

    monkeypatch.setattr(nltk, "download", refuse)
    scorer = LexicalScorer()
    assert scorer.tokenize("Hello Mr. Smith. He can't go.") == [
        "hello",
        "mr.",
        "smith",
        ".",
        "he",
        "ca",
        "n't",
        "go",
        ".",
    ]


def test_length_mismatch_is_an_error(scorer: LexicalScorer) -> None:
    with pytest.raises(ValueError, match="2 originals but 1"):
        scorer.divergence(["a", "b"], ["a"])


@pytest.mark.parametrize(("a", "b"), [("", ""), ("", "  "), ("\n", "")])
def test_texts_without_words_are_identical_for_both_metrics(
    scorer: LexicalScorer, a: str, b: str
) -> None:
    # the new-user report: an empty pair gave RougeL similarity 0 but Bleu 1
    assert scorer.rouge_l(a, b) == 1.0
    assert scorer.bleu(a, b) == 1.0
    assert scorer.report([a], [b]) == {"RougeL Similarity": 1.0, "Bleu Similarity": 1.0}
    assert scorer.divergence([a], [b]) == [0.0]
    assert scorer.rouge_l("", "some words") == 0.0
    assert scorer.bleu("", "some words") == 0.0
