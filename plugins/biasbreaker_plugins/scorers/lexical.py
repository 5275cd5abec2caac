"""``lexical`` scorer: ROUGE-L and BLEU between an output and its mapped-back counterfactual.

Both metrics are computed the way LangFair computes its counterfactual "RougeL Similarity" and
"Bleu Similarity" (cvs-health/langfair ``langfair/metrics/counterfactual/metrics/``):

* ROUGE-L: the F-measure of ``rouge_score.rouge_scorer.RougeScorer(["rougeL"],
  use_stemmer=True)`` (Lin 2004, "ROUGE: A package for automatic evaluation of summaries").
* BLEU: ``min(sentence_bleu([a], b), sentence_bleu([b], a))`` with
  ``SmoothingFunction().method1`` on lower-cased word tokens (Papineni et al. 2002; smoothing:
  Chen & Cherry 2014). The minimum over both directions makes it symmetric.

Divergence = ``1 − similarity`` with similarity ROUGE-L, BLEU or their mean (option
``metric``). nltk's ``word_tokenize`` needs the downloadable ``punkt_tab`` model; this scorer
never downloads anything: it splits sentences with an untrained Punkt tokenizer given a list of
common English abbreviations, then tokenises each sentence with ``NLTKWordTokenizer`` (the
tokenizer ``word_tokenize`` itself applies per sentence).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LexicalOptions", "LexicalScorer"]

_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof st jr sr vs etc e.g i.e inc ltd co corp gen col lt sgt capt rev hon
    no fig jan feb mar apr jun jul aug sep sept oct nov dec mt ft approx dept est u.s u.k
    a.m p.m""".split()  # noqa: SIM905
)


class LexicalOptions(BaseModel):
    """Options of the ``lexical`` scorer (``[plugin.lexical]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: Literal["mean", "rouge-l", "bleu"] = Field(
        "mean",
        description="Similarity behind the divergence: ROUGE-L F, BLEU, or their mean.",
    )
    use_stemmer: bool = Field(True, description="Porter-stem words for ROUGE-L (LangFair: yes).")
    neutralised: bool = Field(
        True,
        description="Compare counterfactual outputs mapped back to the original groups "
        "(LangFair neutralises before ROUGE-L and BLEU too).",
    )


class LexicalScorer:
    """ROUGE-L / BLEU divergence; see the module docstring for the formulas.

    Args:
        options: The options.
    """

    name = "lexical"

    def __init__(self, options: LexicalOptions | None = None) -> None:
        from nltk.tokenize import NLTKWordTokenizer
        from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
        from rouge_score import rouge_scorer

        self.options = options or LexicalOptions()
        self.compares_neutralised = self.options.neutralised
        params = PunktParameters()
        params.abbrev_types = set(_ABBREVIATIONS)
        self._sentences = PunktSentenceTokenizer(params)
        self._words = NLTKWordTokenizer()
        self._bleu = sentence_bleu
        self._smoothing = SmoothingFunction().method1
        self._rouge = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=self.options.use_stemmer)

    def tokenize(self, text: str) -> list[str]:
        """Lower-cased word tokens, as ``nltk.word_tokenize(text.lower())`` gives them."""
        low = text.lower()
        return [t for sent in self._sentences.tokenize(low) for t in self._words.tokenize(sent)]

    def rouge_l(self, a: str, b: str) -> float:
        """ROUGE-L F-measure of ``b`` against ``a``, in [0, 1] (symmetric).

        Two texts without words (empty or blank) are identical: 1, as for BLEU (rouge-score
        itself returns 0 when neither text has a token).
        """
        if a == b or not (a.strip() or b.strip()):
            return 1.0
        return float(self._rouge.score(a, b)["rougeL"].fmeasure)

    def bleu(self, a: str, b: str) -> float:
        """Symmetric sentence BLEU (minimum of both directions, smoothing method1), in [0, 1].

        Two texts without tokens are identical (1); one without tokens shares nothing (0).
        """
        ta, tb = self.tokenize(a), self.tokenize(b)
        if not ta or not tb:
            return 1.0 if ta == tb else 0.0
        return float(
            min(
                self._bleu([ta], tb, smoothing_function=self._smoothing),
                self._bleu([tb], ta, smoothing_function=self._smoothing),
            )
        )

    def similarity(self, a: str, b: str) -> float:
        """The configured similarity in [0, 1]; identical texts (even empty ones) give 1."""
        if a == b:
            return 1.0
        metric = self.options.metric
        if metric == "rouge-l":
            return self.rouge_l(a, b)
        if metric == "bleu":
            return self.bleu(a, b)
        return (self.rouge_l(a, b) + self.bleu(a, b)) / 2.0

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        """``1 − similarity`` per pair, in [0, 1].

        Raises:
            ValueError: The sequences differ in length.
        """
        if len(originals) != len(counterfactuals):
            raise ValueError(
                f"{len(originals)} originals but {len(counterfactuals)} counterfactuals"
            )
        return [
            min(1.0, max(0.0, 1.0 - self.similarity(a, b)))
            for a, b in zip(originals, counterfactuals, strict=True)
        ]

    def report(
        self, originals: Sequence[str], counterfactuals: Sequence[str]
    ) -> Mapping[str, float]:
        """LangFair's figures: mean ROUGE-L and BLEU similarity over the pairs."""
        pairs = list(zip(originals, counterfactuals, strict=True))
        n = max(len(pairs), 1)
        return {
            "RougeL Similarity": sum(self.rouge_l(a, b) for a, b in pairs) / n,
            "Bleu Similarity": sum(self.bleu(a, b) for a, b in pairs) / n,
        }
